//! The 3-node cluster's committed writes/s on loopback.

use seqstore_raft::net::{Conn, Reply, Rpc};
use seqstore_raft::{Op, StreamConfig};
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
    let bin = std::env::current_exe()?.with_file_name("seqstore-raft-node");
    let peers: Vec<String> = addrs.iter().map(|(i, a)| format!("{i}={a}")).collect();
    let mut nodes = Nodes(Vec::new());
    for (id, a) in addrs {
        let mut cmd = Command::new(&bin);
        cmd.args([
            "--id",
            &id.to_string(),
            "--listen",
            a,
            "--peers",
            &peers.join(","),
        ])
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

async fn leader(addrs: &BTreeMap<u64, String>) -> anyhow::Result<String> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        for (id, a) in addrs {
            let r = Conn::new(a.clone())
                .call(&Rpc::Status, Duration::from_secs(1))
                .await;
            if let Ok(Reply::Status(s)) = r {
                if s.leader == Some(*id) {
                    return Ok(a.clone());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("no leader")
}

/// `clients` writers against the leader for `dur`; committed writes/s.
async fn load(leader: &str, clients: usize, dur: Duration) -> anyhow::Result<f64> {
    let done = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (done, addr) = (done.clone(), leader.to_string());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(addr);
            let rpc = Rpc::Write(Op::Append {
                stream: "bench".into(),
                subject: format!("c.{c}"),
                headers: Vec::new(),
                payload: vec![b'x'; 128],
                ttl_ms: 0,
            });
            while t.elapsed() < dur {
                if let Ok(Reply::Written { .. }) = conn.call(&rpc, Duration::from_secs(5)).await {
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let l = leader(&addrs).await?;
        let create = Rpc::Write(Op::CreateStream {
            name: "bench".into(),
            config: StreamConfig::default(),
        });
        match Conn::new(l.clone())
            .call(&create, Duration::from_secs(5))
            .await
        {
            Ok(Reply::Written { .. }) => {}
            other => anyhow::bail!("create the stream: {other:?}"),
        }
        println!("| clients | committed appends/s (3 nodes, loopback, 128-byte payloads) |");
        println!("|---|---|");
        for clients in [1, 64] {
            let w = load(&l, clients, dur).await?;
            println!("| {clients} | {w:.0} |");
        }
        anyhow::Ok(())
    })
}
