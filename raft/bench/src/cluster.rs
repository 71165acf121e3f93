//! The 3-node cluster's committed writes/s on loopback: three `seqstore-server` processes
//! (the release binary next to this one: `cargo build --release -p seqstore-server
//! -p seqstore-raft-bench`), appends over HTTP through `seqstore-client`.

use seqstore_client::wire::{AppendRequest, StreamConfig};
use seqstore_client::Client;
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Kills the nodes on drop (also on error).
struct Nodes(Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(dir: &std::path::Path, addrs: &BTreeMap<u64, String>) -> anyhow::Result<Nodes> {
    let bin = std::env::current_exe()?.with_file_name("seqstore-server");
    anyhow::ensure!(
        bin.exists(),
        "{bin:?} missing: cargo build --release -p seqstore-server"
    );
    let peers: Vec<String> = addrs.iter().map(|(i, a)| format!("{i}={a}")).collect();
    let mut nodes = Nodes(Vec::new());
    for (id, a) in addrs {
        let mut cmd = Command::new(&bin);
        cmd.arg("serve")
            .args(["--id", &id.to_string(), "--listen", a])
            .args(["--peers", &peers.join(",")])
            .arg("--dir")
            .arg(dir.join(format!("n{id}")))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if *id == 1 {
            cmd.arg("--bootstrap");
        }
        nodes.0.push(cmd.spawn()?);
    }
    Ok(nodes)
}

/// The leader's URL, once it leads all three voters.
async fn leader(c: &Client, urls: &[String]) -> anyhow::Result<String> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        for u in urls {
            if let Ok(s) = c.status_of(u).await {
                if s.leader == Some(s.id) && s.voters.len() == 3 {
                    return Ok(u.clone());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("no leader of three voters within 30 s")
}

/// `clients` writers against the leader for `dur`; committed writes/s.
async fn load(leader: &str, clients: usize, dur: Duration) -> anyhow::Result<f64> {
    let done = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (done, url) = (done.clone(), leader.to_string());
        tasks.push(tokio::spawn(async move {
            let cl = Client::new(&[url], None);
            let req = AppendRequest::new(format!("c.{c}"), &[b'x'; 128]);
            while t.elapsed() < dur {
                if cl.append("bench", &req).await.is_ok() {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64())
}

/// Runs the cluster benchmark.
pub fn run(dur: Duration) -> anyhow::Result<()> {
    let dir = tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or(".".into()))?;
    let addrs: BTreeMap<u64, String> = (1..=3)
        .map(|id| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            (id, l.local_addr().expect("addr").to_string())
        })
        .collect();
    let _nodes = spawn(dir.path(), &addrs)?;
    let urls: Vec<String> = addrs.values().map(|a| format!("http://{a}")).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let c = Client::new(&urls, None);
        let l = leader(&c, &urls).await?;
        c.create_stream_if_absent("bench", &StreamConfig::default())
            .await?;
        println!("| clients | committed appends/s (3 nodes, loopback, HTTP, 128-byte payloads) |");
        println!("|---|---|");
        for clients in [1, 64] {
            let w = load(&l, clients, dur).await?;
            println!("| {clients} | {w:.0} |");
        }
        anyhow::Ok(())
    })
}
