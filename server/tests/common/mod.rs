//! Test helpers: `seqstore-server` child processes on loopback, killed and reaped on drop
//! (also when a test fails), a seeded generator, raw HTTP.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_seqstore-server");

/// A free loopback port: bound, noted, released (the node binds it right after).
pub fn free_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").to_string()
}

#[allow(unused_imports)] // not every test binary seeds
pub use seqstore_test_setup::seed;

/// xorshift64*: enough to pick kill points, victims and payload sizes from a seed.
pub struct Rng(u64);

impl Rng {
    /// Seeded through splitmix64, so that nearby seeds start far apart (and 0 is not stuck).
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Running nodes, killed (SIGCONT first, in case one is stopped) and reaped on drop.
pub struct Procs {
    pub root: tempfile::TempDir,
    pub children: BTreeMap<u64, Child>,
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in self.children.values_mut() {
            signal(c.id(), "CONT");
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            for id in 1..=9 {
                let log = self.stderr(id);
                if !log.is_empty() {
                    let tail: Vec<&str> = log.lines().rev().take(20).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    eprintln!("--- node {id} stderr (tail) ---\n{}", tail.join("\n"));
                }
            }
        }
    }
}

impl Procs {
    pub fn new() -> Self {
        Procs {
            root: tempfile::tempdir().expect("tempdir"),
            children: BTreeMap::new(),
        }
    }

    pub fn dir(&self, id: u64) -> PathBuf {
        self.root.path().join(format!("n{id}"))
    }

    pub fn stderr_path(&self, id: u64) -> PathBuf {
        self.root.path().join(format!("n{id}.stderr"))
    }

    /// Starts `seqstore-server serve --dir <n{id}> ARGS`, stderr appended to `n{id}.stderr`.
    pub fn spawn(&mut self, id: u64, args: &[String]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stderr_path(id))
            .expect("stderr file");
        let child = Command::new(BIN)
            .arg("serve")
            .arg("--dir")
            .arg(self.dir(id))
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn seqstore-server");
        if let Some(mut old) = self.children.insert(id, child) {
            let _ = old.kill();
            let _ = old.wait();
        }
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self, id: u64) {
        if let Some(mut c) = self.children.remove(&id) {
            c.kill().expect("SIGKILL"); // std's kill is SIGKILL on unix
            c.wait().expect("reap");
        }
    }

    pub fn pid(&self, id: u64) -> u32 {
        self.children[&id].id()
    }

    /// Waits at most `limit` for node `id` to exit; its status.
    pub fn wait_exit(&mut self, id: u64, limit: Duration) -> Option<ExitStatus> {
        let t = Instant::now();
        while t.elapsed() < limit {
            let c = self.children.get_mut(&id)?;
            if let Some(s) = c.try_wait().expect("try_wait") {
                self.children.remove(&id);
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    pub fn stderr(&self, id: u64) -> String {
        std::fs::read_to_string(self.stderr_path(id)).unwrap_or_default()
    }
}

/// `kill -SIG pid` (the command: no unsafe code in the tests).
pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// One raw HTTP/1.1 exchange (`Connection: close`); `(status, body)`.
pub fn raw_http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> (u16, String) {
    try_raw_http(addr, method, path, headers, body)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// [`raw_http`], `Err` when no complete answer came (a node still starting, a reset).
pub fn try_raw_http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(req.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let _ = s.write_all(body); // a server refusing early may close before reading it all
    let mut out = Vec::new();
    let read = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok());
    let Some(status) = status else {
        return Err(format!("no HTTP status in {text:?} (read: {read:?})"));
    };
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    Ok((status, body))
}

/// Waits until `GET /admin/status` answers on `addr` (any status).
pub fn wait_up(addr: &str, limit: Duration) {
    let t = Instant::now();
    while t.elapsed() < limit {
        if TcpStream::connect(addr).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{addr} not up within {limit:?}");
}

/// Waits until the node at `url` leads (through `seqstore-client`), at most 15 s.
pub async fn until_leader(c: &seqstore_client::Client, url: &str) {
    let limit = Duration::from_secs(15);
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Ok(s) = c.status_of(url).await {
            if s.leader == Some(s.id) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{url}: no leader within {limit:?}");
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}
