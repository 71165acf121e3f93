//! seqstore's side of `--replicated`: three `seqstore-server` processes on loopback (the
//! release binary next to this one, or `--seqstore-server`), driven through
//! `seqstore-client` the way the NATS cells are driven through async-nats: `k` concurrent
//! clients, each awaiting its append's sequence before the next. As the NATS publishers share
//! one connection, the clients share one `seqstore_client::Client` (which gathers their
//! concurrent appends into batch requests); the `apart` cell gives each client its own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use seqstore_client::wire::{AppendRequest, StreamConfig};
use seqstore_client::Client;

use crate::nats::Cell;

/// How long a fresh cluster may take to elect a leader and take its followers as voters.
const FORMED_TIMEOUT: Duration = Duration::from_secs(30);

/// The server binary: `explicit`, else `seqstore-server` beside this executable.
pub(crate) fn find_server(explicit: Option<&Path>) -> Result<PathBuf> {
    let p = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?.with_file_name("seqstore-server"),
    };
    ensure!(
        p.is_file(),
        "{} missing: cargo build --release -p seqstore-server (or --seqstore-server PATH)",
        p.display()
    );
    Ok(p)
}

/// The nodes, killed and reaped on drop (on every path), then their directories removed.
pub(crate) struct Cluster {
    children: Vec<Child>,
    leader: String,
    rt: tokio::runtime::Runtime,
    _dirs: Vec<tempfile::TempDir>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Cluster {
    /// Starts one node per directory (one: `serve` with no configuration; more: node 1 with
    /// `--bootstrap` and the others as its peers), and waits until one leads them all as
    /// voters.
    pub(crate) fn start(bin: &Path, dirs: Vec<tempfile::TempDir>) -> Result<Cluster> {
        let n = dirs.len();
        let addrs: Vec<String> = (0..n)
            .map(|_| {
                let l = std::net::TcpListener::bind("127.0.0.1:0").context("a loopback port")?;
                Ok(l.local_addr()?.to_string())
            })
            .collect::<Result<_>>()?;
        let peers: Vec<String> = (addrs.iter().enumerate())
            .map(|(i, a)| format!("{}={a}", i + 1))
            .collect();
        let mut children = Vec::new();
        for (i, dir) in dirs.iter().enumerate() {
            let mut cmd = Command::new(bin);
            cmd.args(["serve", "--listen", &addrs[i]]);
            if n > 1 {
                cmd.args(["--id", &(i + 1).to_string(), "--peers", &peers.join(",")]);
            }
            cmd.arg("--dir")
                .arg(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if i == 0 && n > 1 {
                cmd.arg("--bootstrap");
            }
            children.push(
                cmd.spawn()
                    .with_context(|| format!("start {}", bin.display()))?,
            );
        }
        // two workers: the machines this runs on have two cores
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("tokio runtime")?;
        let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
        let mut cluster = Cluster {
            children,
            leader: String::new(),
            rt,
            _dirs: dirs,
        };
        cluster.leader = cluster.rt.block_on(formed(&urls, n))?;
        Ok(cluster)
    }

    /// Appends into a fresh stream `name`, then the stream deleted. Returns acknowledged
    /// appends per second; the stream must hold exactly the acknowledged appends. `apart`:
    /// each client has a `Client` of its own, instead of one shared.
    pub(crate) fn publish_cell(
        &self,
        name: &str,
        cell: Cell,
        payload: &[u8],
        apart: bool,
    ) -> Result<f64> {
        self.rt
            .block_on(publish_cell(&self.leader, name, cell, payload, apart))
    }
}

/// The leader's URL once it leads `voters` voters.
async fn formed(urls: &[String], voters: usize) -> Result<String> {
    let c = Client::new(urls, None);
    let t = Instant::now();
    while t.elapsed() < FORMED_TIMEOUT {
        for u in urls {
            if let Ok(s) = c.status_of(u).await {
                if s.leader == Some(s.id) && s.voters.len() == voters {
                    return Ok(u.clone());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("no leader of {voters} voters within {FORMED_TIMEOUT:?}")
}

async fn publish_cell(
    leader: &str,
    name: &str,
    cell: Cell,
    payload: &[u8],
    apart: bool,
) -> Result<f64> {
    let c = Client::new(&[leader], None);
    c.create_stream(name, &StreamConfig::default())
        .await
        .with_context(|| format!("create stream {name}"))?;
    // one untimed append: the stream's first block file is created
    c.append(name, &AppendRequest::new(format!("{name}.warm"), payload))
        .await
        .context("first append")?;
    let per = cell.msgs.div_ceil(cell.publishers.max(1));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for k in 0..cell.publishers {
        // each awaits its own answer, as each NATS publisher awaits its own PubAck
        let c = if apart {
            Client::new(&[leader], None)
        } else {
            c.clone()
        };
        let req = AppendRequest::new(format!("{name}.{:06}", k % 64), payload);
        let name = name.to_string();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while n < per && t.elapsed() < cell.max {
                c.append(&name, &req).await.context("append")?;
                n += 1;
            }
            anyhow::Ok(n)
        }));
    }
    let mut acked = 0;
    for h in tasks {
        acked += h.await.context("client task")??;
    }
    let v = acked as f64 / t.elapsed().as_secs_f64().max(1e-9);
    let info = c.stream_info(name).await.context("stream info")?;
    ensure!(
        info.state.msgs == acked + 1,
        "stream {name} holds {} messages, {} were acknowledged",
        info.state.msgs,
        acked + 1
    );
    c.delete_stream(name).await.context("delete stream")?;
    Ok(v)
}
