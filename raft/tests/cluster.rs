//! A real cluster: three `seqstore-raft-node` processes on 127.0.0.1, writes from concurrent
//! clients, `kill -9` of the leader while writes are in flight, restart from its directory,
//! then: every acknowledged append is readable from the new leader at the sequence its
//! acknowledgement gave, and all three nodes hold the same streams, message by message. Bounded in time; a drop guard kills every child even on failure.

use seqstore_raft::net::{Conn, Reply, Rpc, Status};
use seqstore_raft::streams::StreamDump;
use seqstore_raft::{Op, Response, StreamConfig};
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RPC: Duration = Duration::from_millis(2000);

struct Cluster {
    dir: tempfile::TempDir,
    addrs: BTreeMap<u64, String>,
    children: BTreeMap<u64, Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, c) in self.children.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Cluster {
    fn new(n: u64) -> Self {
        // free loopback ports: bound, noted, released (the nodes bind them right after)
        let addrs = (1..=n)
            .map(|id| {
                let l = TcpListener::bind("127.0.0.1:0").expect("bind");
                (id, l.local_addr().expect("addr").to_string())
            })
            .collect();
        Cluster {
            dir: tempfile::tempdir().expect("tempdir"),
            addrs,
            children: BTreeMap::new(),
        }
    }

    fn spawn(&mut self, id: u64, bootstrap: bool) {
        let peers: Vec<String> = self.addrs.iter().map(|(i, a)| format!("{i}={a}")).collect();
        let dir = self.dir.path().join(format!("n{id}"));
        std::fs::create_dir_all(&dir).expect("node dir");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("n{id}.stderr")))
            .expect("stderr file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_seqstore-raft-node"));
        cmd.args(["--id", &id.to_string(), "--listen", &self.addrs[&id]])
            .arg("--dir")
            .arg(&dir)
            .args(["--peers", &peers.join(","), "--snapshot-every", "50"])
            .stdout(Stdio::null())
            .stderr(log);
        if bootstrap {
            cmd.arg("--bootstrap");
        }
        self.children.insert(id, cmd.spawn().expect("spawn node"));
    }

    fn kill9(&mut self, id: u64) {
        let mut c = self.children.remove(&id).expect("running");
        c.kill().expect("SIGKILL"); // std's kill is SIGKILL on unix
        c.wait().expect("reap");
    }
}

async fn call(addr: &str, rpc: &Rpc) -> Option<Reply> {
    Conn::new(addr).call(rpc, RPC).await.ok()
}

async fn status(addr: &str) -> Option<Status> {
    match call(addr, &Rpc::Status).await {
        Some(Reply::Status(s)) => Some(s),
        _ => None,
    }
}

/// Waits for a node that says it is the leader; returns its id.
async fn wait_leader(addrs: &BTreeMap<u64, String>, not: Option<u64>, limit: Duration) -> u64 {
    let t = Instant::now();
    while t.elapsed() < limit {
        for (id, a) in addrs {
            if Some(*id) == not {
                continue;
            }
            if let Some(s) = status(a).await {
                if s.leader == Some(*id) {
                    return *id;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no leader within {limit:?}");
}

/// Proposes `op` through whichever node leads, following redirects and retrying on failure
/// until `limit`. The response once acknowledged (committed and applied on the leader).
async fn write(addrs: &BTreeMap<u64, String>, op: Op, limit: Duration) -> Option<Response> {
    let req = Rpc::Write(op);
    let t = Instant::now();
    let mut ids: Vec<&String> = addrs.values().collect();
    let mut target = ids[0].clone();
    while t.elapsed() < limit {
        match call(&target, &req).await {
            Some(Reply::Written { response, .. }) => return Some(response),
            Some(Reply::NotLeader { addr: Some(a), .. }) => target = a,
            _ => {
                ids.rotate_left(1);
                target = ids[0].clone();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    None
}

fn append(subject: &str, payload: &str) -> Op {
    Op::Append {
        stream: "s".into(),
        subject: subject.into(),
        headers: Vec::new(),
        payload: payload.as_bytes().to_vec(),
        ttl_ms: 0,
    }
}

type Dump = (Option<u64>, BTreeMap<String, StreamDump>);

async fn dump(addr: &str) -> Option<Dump> {
    match call(addr, &Rpc::Dump).await {
        Some(Reply::Dump {
            last_applied,
            streams,
        }) => Some((last_applied.map(|l| l.index), streams)),
        _ => None,
    }
}

/// Appends `n` messages (subject `k.<i>`) from `clients` concurrent clients; kills the leader
/// once `kill_at` are acknowledged. Returns the acknowledged ones: sequence -> (subject,
/// payload).
async fn write_with_kill(
    cluster: Arc<Mutex<Cluster>>,
    addrs: BTreeMap<u64, String>,
    leader: u64,
    n: usize,
    clients: usize,
    kill_at: usize,
) -> BTreeMap<u64, (String, String)> {
    let acked = Arc::new(Mutex::new(BTreeMap::new()));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (acked, addrs, cluster) = (acked.clone(), addrs.clone(), cluster.clone());
        tasks.push(tokio::spawn(async move {
            for i in (c..n).step_by(clients) {
                let (k, v) = (format!("k.{i:05}"), format!("v{i}-{}", i * 7919));
                let r = write(&addrs, append(&k, &v), Duration::from_secs(20)).await;
                if let Some(Response::Seq(seq)) = r {
                    let mut a = acked.lock().unwrap();
                    assert!(
                        a.insert(seq, (k, v)).is_none(),
                        "sequence {seq} acked twice"
                    );
                    if a.len() == kill_at {
                        drop(a);
                        cluster.lock().unwrap().kill9(leader); // writes are in flight
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    let a = acked.lock().unwrap().clone();
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_leader_mid_write_loses_no_acknowledged_write() {
    let test = tokio::time::timeout(Duration::from_secs(120), run_test());
    test.await.expect("cluster test took over 120 s");
}

async fn run_test() {
    let mut c = Cluster::new(3);
    for id in 1..=3 {
        c.spawn(id, id == 1);
    }
    let addrs = c.addrs.clone();
    let cluster = Arc::new(Mutex::new(c));
    let leader = wait_leader(&addrs, None, Duration::from_secs(20)).await;
    let create = Op::CreateStream {
        name: "s".into(),
        config: StreamConfig::default(),
    };
    let created = write(&addrs, create, Duration::from_secs(20)).await;
    assert_eq!(created, Some(Response::Done), "create the stream");
    let n = 300;
    let acked = write_with_kill(cluster.clone(), addrs.clone(), leader, n, 4, n / 3).await;
    assert!(
        acked.len() >= n * 9 / 10,
        "only {} of {n} writes acknowledged",
        acked.len()
    );
    let new_leader = wait_leader(&addrs, Some(leader), Duration::from_secs(20)).await;
    assert_ne!(new_leader, leader);
    cluster.lock().unwrap().spawn(leader, false); // restart from its directory
    for (seq, (k, v)) in &acked {
        let get = Rpc::Get {
            stream: "s".into(),
            seq: *seq,
        };
        let got = match call(&addrs[&new_leader], &get).await {
            Some(Reply::Msg(m)) => m,
            other => panic!("get {seq} from leader {new_leader}: {other:?}"),
        };
        let got = got.map(|m| (m.subject, m.payload));
        let want = (k.clone(), v.as_bytes().to_vec());
        assert_eq!(got, Some(want), "acknowledged append {seq} lost");
    }
    let states = converge(&addrs, Duration::from_secs(30)).await;
    for (id, (_, streams)) in &states {
        let msgs = &streams["s"].msgs;
        for (seq, (k, _)) in &acked {
            assert!(
                msgs.iter().any(|m| m.seq == *seq && &m.subject == k),
                "node {id} lacks acknowledged {seq}"
            );
        }
        assert_eq!(
            streams, &states[&new_leader].1,
            "node {id} disagrees with the leader"
        );
    }
    // snapshots every 50 entries: the log was purged behind them, on every node, the restarted
    // one included (purge and its recovery ran for real, not only in fault-fs)
    for (id, a) in &addrs {
        let s = status(a).await.expect("status");
        assert!(s.purged.is_some(), "node {id} never purged: {s:?}");
    }
    eprintln!(
        "acknowledged {} of {n}; leader {leader} killed, new leader {new_leader}; all 3 agree on {} messages",
        acked.len(),
        states[&new_leader].1["s"].msgs.len()
    );
}

/// Waits until every node has applied the same last index; returns each node's state.
async fn converge(addrs: &BTreeMap<u64, String>, limit: Duration) -> BTreeMap<u64, Dump> {
    let t = Instant::now();
    loop {
        let mut states = BTreeMap::new();
        for (id, a) in addrs {
            if let Some(d) = dump(a).await {
                states.insert(*id, d);
            }
        }
        let applied: Vec<_> = states.values().map(|s| s.0).collect();
        if states.len() == addrs.len() && applied.windows(2).all(|w| w[0] == w[1]) {
            return states;
        }
        assert!(t.elapsed() < limit, "nodes did not converge: {applied:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
