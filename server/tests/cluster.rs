//! A real cluster: three `seqstore-server` processes on 127.0.0.1 with a token, clients
//! appending concurrently through `seqstore-client`, and in turn:
//! 1. `kill -9` of the leader while appends are in flight, then its restart from its
//!    directory;
//! 2. SIGSTOP of a follower while appends go on (the other two are a majority), then SIGCONT;
//! 3. a follower's directory deleted: its restart as its old voter is **refused**; the admin
//!    call removes it, it restarts empty, is re-added as a learner (catching up by snapshot:
//!    the leader's log is purged behind its snapshots) and made a voter again.
//!
//! Then: every acknowledged append is on every node at the sequence its acknowledgement gave,
//! no sequence was acknowledged twice, no message is stored twice, and the three nodes hold
//! identical streams. Seeded (`SEQSTORE_SEED` replays the kill point, the stopped follower
//! and the payload sizes); bounded by a 60 s timeout; every child is killed and reaped on
//! drop.

mod common;
use common::*;
use seqstore_client::wire::{AppendRequest, ConsumerConfig, Dump, NextRequest, StreamConfig};
use seqstore_client::{Client, Error};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "cluster-token";

struct Cluster {
    procs: Procs,
    addrs: BTreeMap<u64, String>,
    /// Node 1 formed the cluster: from then on it starts without `--bootstrap` (an empty
    /// node with `--bootstrap` is refused once a cluster exists).
    formed: bool,
}

impl Cluster {
    fn url(&self, id: u64) -> String {
        format!("http://{}", self.addrs[&id])
    }

    fn urls(&self) -> Vec<String> {
        self.addrs.keys().map(|id| self.url(*id)).collect()
    }

    fn args(&self, id: u64) -> Vec<String> {
        let peers: Vec<String> = self.addrs.iter().map(|(i, a)| format!("{i}={a}")).collect();
        let mut a: Vec<String> = ["--id", &id.to_string(), "--listen", &self.addrs[&id]]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend([
            "--peers".into(),
            peers.join(","),
            "--snapshot-every".into(),
            "40".into(),
        ]);
        a.extend([
            "--token".into(),
            TOKEN.into(),
            "--join-timeout-ms".into(),
            "5000".into(),
        ]);
        if id == 1 && !self.formed {
            a.push("--bootstrap".into());
        }
        // both runtimes in one cluster: node 3 spreads its work over two threads
        if id == 3 {
            a.extend(["--threads".into(), "2".into()]);
        }
        a
    }

    fn spawn(&mut self, id: u64) {
        let args = self.args(id);
        self.procs.spawn(id, &args);
    }
}

fn client(urls: &[String]) -> Client {
    Client::new(urls, Some(TOKEN.to_string()))
        .with_timeout(Duration::from_secs(3))
        .with_retry_for(Duration::from_secs(15))
}

/// Waits until some node leads with exactly `voters`, as every node in `ask` sees it.
async fn wait_leader(c: &Client, urls: &BTreeMap<u64, String>, voters: &[u64]) -> u64 {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        let mut seen = BTreeSet::new();
        let mut ok = true;
        for u in urls.values() {
            match c.status_of(u).await {
                Ok(s) if s.voters == voters => {
                    seen.insert(s.leader);
                }
                _ => ok = false,
            }
        }
        if ok && seen.len() == 1 {
            if let Some(Some(l)) = seen.into_iter().next() {
                if voters.contains(&l) {
                    return l;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no leader with voters {voters:?} within 20 s");
}

/// Acknowledged appends: sequence -> payload; payloads whose outcome is unknown.
#[derive(Default)]
struct Acks {
    acked: BTreeMap<u64, String>,
    unknown: Vec<String>,
}

/// `n` appends from `clients` concurrent clients, payload `tag-i` padded to a seeded size;
/// `at_ack(count)` runs after each acknowledgement (it kills the leader at some count).
async fn append_many(
    urls: Vec<String>,
    tag: &str,
    n: usize,
    clients: usize,
    rng: &mut Rng,
    acks: Arc<Mutex<Acks>>,
    at_ack: Arc<dyn Fn(usize) + Send + Sync>,
) {
    let sizes: Vec<usize> = (0..n).map(|_| rng.below(200) as usize).collect();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (urls, acks, at_ack, sizes) =
            (urls.clone(), acks.clone(), at_ack.clone(), sizes.clone());
        let tag = tag.to_string();
        tasks.push(tokio::spawn(async move {
            let cl = client(&urls);
            // find the leader with a read (retried) first: an append sent to a stopped node
            // would time out with an unknown outcome
            let _ = cl.stream_info("s").await;
            for i in (c..n).step_by(clients) {
                let payload = format!("{tag}-{i}-{}", "p".repeat(sizes[i]));
                let req = AppendRequest::new(format!("k.{c}"), payload.as_bytes());
                match cl.append("s", &req).await {
                    Ok(seq) => {
                        let mut a = acks.lock().unwrap();
                        let dup = a.acked.insert(seq, payload);
                        assert!(dup.is_none(), "sequence {seq} acknowledged twice");
                        let count = a.acked.len();
                        drop(a);
                        at_ack(count);
                    }
                    Err(Error::Unknown(_)) | Err(Error::NoLeader(_)) => {
                        acks.lock().unwrap().unknown.push(payload)
                    }
                    Err(e) => panic!("append {tag}-{i}: {e}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_survive_kill_stop_and_a_lost_directory() {
    let seed = seed("three_nodes_survive_kill_stop_and_a_lost_directory");
    let t = Instant::now();
    let run = tokio::time::timeout(Duration::from_secs(60), run(seed));
    run.await.expect("the cluster test took over 60 s");
    eprintln!("cluster test: {:.1} s", t.elapsed().as_secs_f64());
}

async fn run(seed: u64) {
    let mut rng = Rng::new(seed);
    let addrs: BTreeMap<u64, String> = (1..=3).map(|id| (id, free_addr())).collect();
    let mut cl = Cluster {
        procs: Procs::new(),
        addrs: addrs.clone(),
        formed: false,
    };
    for id in 1..=3 {
        cl.spawn(id);
    }
    cl.formed = true;
    let urls: BTreeMap<u64, String> = (1..=3).map(|id| (id, cl.url(id))).collect();
    let all: Vec<String> = cl.urls();
    let admin = client(&all);
    let leader = wait_leader(&admin, &urls, &[1, 2, 3]).await;
    let created = admin
        .create_stream_if_absent("s", &StreamConfig::default())
        .await;
    assert_eq!(created, Ok(true), "create the stream");
    not_leader_names_the_leader(&urls, leader).await;

    let cl = Arc::new(Mutex::new(cl));
    let acks = Arc::new(Mutex::new(Acks::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = tokio::spawn(consume(all.clone(), stop.clone()));
    phase_kill(&cl, &all, &mut rng, &acks, leader).await;
    let leader = wait_leader(&admin, &urls, &[1, 2, 3]).await;
    phase_stop(&cl, &all, &mut rng, &acks, leader).await;
    let leader = wait_leader(&admin, &urls, &[1, 2, 3]).await;
    phase_amnesia(&cl, &admin, &urls, &mut rng, &acks, leader).await;
    stop.store(true, Ordering::Relaxed);
    let acked_by_consumer = consumer.await.expect("consumer task");
    let acks = std::mem::take(&mut *acks.lock().unwrap());
    let dumps = converge(&admin, &urls).await;
    check(&acks, &dumps);
    check_consumer(&acked_by_consumer, &dumps);
    // the same through the API: linearizable reads on the leader
    for (seq, p) in &acks.acked {
        let m = admin.get("s", *seq).await.expect("get");
        let got = m.map(|m| m.payload_bytes().expect("payload"));
        assert_eq!(got, Some(p.clone().into_bytes()), "get {seq}");
    }
    // snapshots every 40 entries: every node purged its log behind one (the re-added node
    // too), so purge and its recovery ran for real
    for (id, u) in &urls {
        let s = admin.status_of(u).await.expect("status");
        assert!(s.purged.is_some(), "node {id} never purged: {s:?}");
    }
}

/// A consumer working through every phase: pulls (a 300 ms ack wait of the log's time, so
/// what a lost answer delivered comes back), acks each message, and reads its state after
/// each acknowledged ack: the ack floor it reads (linearizable) never goes back. Returns the
/// stream sequences whose ack was acknowledged.
async fn consume(urls: Vec<String>, stop: Arc<AtomicBool>) -> BTreeSet<u64> {
    let c = client(&urls);
    while c
        .consumer_add("s", "w", &ConsumerConfig::default())
        .await
        .is_err()
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (mut acked, mut floor) = (BTreeSet::new(), 0);
    let req = NextRequest {
        batch: 8,
        filter: None,
        ack_wait_ms: 300,
    };
    while !stop.load(Ordering::Relaxed) {
        let Ok(ds) = c.consumer_next("s", "w", &req).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if ds.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for d in ds {
            if c.consumer_ack("s", "w", d.message.seq).await.is_ok() {
                acked.insert(d.message.seq);
                if let Ok(i) = c.consumer_info("s", "w").await {
                    assert!(i.ack_floor.stream >= floor, "ack floor went back: {i:?}");
                    floor = i.ack_floor.stream;
                }
            }
        }
    }
    eprintln!("consumer: {} acks acknowledged, floor {floor}", acked.len());
    acked
}

/// Every node holds the same consumer state, and every acknowledged ack is in it.
fn check_consumer(acked: &BTreeSet<u64>, dumps: &BTreeMap<u64, Dump>) {
    let first = dumps.values().next().expect("a dump");
    for (id, d) in dumps {
        assert_eq!(d.consumers, first.consumers, "node {id}'s consumers differ");
        let w = &d.consumers["s"]["w"];
        for seq in acked {
            let pending = w.pending.iter().any(|p| p.stream_seq == *seq);
            let done = *seq <= w.ack_floor.stream || !pending;
            assert!(
                done && *seq <= w.delivered.stream,
                "node {id}: ack of {seq} lost: {w:?}"
            );
        }
    }
    assert!(!acked.is_empty(), "the consumer acknowledged nothing");
}

/// A write to a follower: 421 `not_leader` with the leader's URL, nothing done.
async fn not_leader_names_the_leader(urls: &BTreeMap<u64, String>, leader: u64) {
    let follower = urls.keys().find(|id| **id != leader).expect("a follower");
    let one = client(&[urls[follower].clone()]).with_retry_for(Duration::from_secs(2));
    let r = one.append("s", &AppendRequest::new("k.x", b"never")).await;
    // the client follows the redirect to the leader URL, which it was not given: it succeeds
    // only if the follower named the leader
    assert!(matches!(r, Ok(1)), "{r:?}");
}

/// 1: appends from 4 clients; `kill -9` of the leader at a seeded acknowledgement count;
/// restart from its directory.
async fn phase_kill(
    cl: &Arc<Mutex<Cluster>>,
    urls: &[String],
    rng: &mut Rng,
    acks: &Arc<Mutex<Acks>>,
    leader: u64,
) {
    let n = 240;
    let kill_at = 30 + rng.below(90) as usize;
    eprintln!("phase 1: kill -9 leader {leader} at acknowledgement {kill_at}");
    let killer = cl.clone();
    let at_ack = Arc::new(move |count: usize| {
        if count == kill_at {
            killer.lock().unwrap().procs.kill9(leader); // appends are in flight
        }
    });
    append_many(urls.to_vec(), "a", n, 4, rng, acks.clone(), at_ack).await;
    let a = acks.lock().unwrap();
    assert!(
        a.acked.len() >= n * 8 / 10,
        "only {} of {n} acknowledged",
        a.acked.len()
    );
    drop(a);
    cl.lock().unwrap().spawn(leader); // restart from its directory
}

/// 2: a follower stopped (SIGSTOP) while appends go on, then continued.
async fn phase_stop(
    cl: &Arc<Mutex<Cluster>>,
    urls: &[String],
    rng: &mut Rng,
    acks: &Arc<Mutex<Acks>>,
    leader: u64,
) {
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let stopped = followers[rng.below(2) as usize];
    let pid = cl.lock().unwrap().procs.pid(stopped);
    eprintln!("phase 2: SIGSTOP follower {stopped}");
    signal(pid, "STOP");
    let before = acks.lock().unwrap().acked.len();
    append_many(
        urls.to_vec(),
        "b",
        60,
        3,
        rng,
        acks.clone(),
        Arc::new(|_| {}),
    )
    .await;
    signal(pid, "CONT");
    let after = acks.lock().unwrap().acked.len();
    assert_eq!(
        after - before,
        60,
        "appends failed with one follower stopped"
    );
}

/// 3: a follower loses its directory; refused; removed; restarted empty; re-added as a
/// learner (by snapshot) and voter.
async fn phase_amnesia(
    cl: &Arc<Mutex<Cluster>>,
    admin: &Client,
    urls: &BTreeMap<u64, String>,
    rng: &mut Rng,
    acks: &Arc<Mutex<Acks>>,
    leader: u64,
) {
    let victim = *(1..=3)
        .filter(|id| *id != leader)
        .collect::<Vec<_>>()
        .get(rng.below(2) as usize)
        .expect("a follower");
    eprintln!("phase 3: node {victim} loses its directory");
    {
        let mut c = cl.lock().unwrap();
        c.procs.kill9(victim);
        std::fs::remove_dir_all(c.procs.dir(victim)).expect("delete the directory");
        c.spawn(victim);
        let st = c.procs.wait_exit(victim, Duration::from_secs(10));
        let st = st.expect("the empty node's start as its old voter was not refused");
        assert!(!st.success(), "refused with a zero exit status");
        let log = c.procs.stderr(victim);
        assert!(log.contains("refusing to start"), "{log}");
        assert!(log.contains("as a voter"), "{log}");
    }
    let rest: Vec<u64> = (1..=3).filter(|id| *id != victim).collect();
    admin
        .change_membership(&rest)
        .await
        .expect("remove the node");
    // the leader's log is purged behind a snapshot by now: a learner starting empty can only
    // catch up by snapshot
    let ls = admin
        .status_of(&urls[&leader])
        .await
        .expect("leader status");
    assert!(
        ls.purged.is_some_and(|p| p > 1),
        "leader log not purged: {ls:?}"
    );
    cl.lock().unwrap().spawn(victim);
    wait_up(&cl.lock().unwrap().addrs[&victim], Duration::from_secs(10));
    let addr = cl.lock().unwrap().addrs[&victim].clone();
    admin
        .add_learner(victim, &addr)
        .await
        .expect("add the learner");
    let vs = admin
        .status_of(&urls[&victim])
        .await
        .expect("learner status");
    assert!(
        vs.snapshot.is_some(),
        "the learner did not install a snapshot: {vs:?}"
    );
    admin.change_membership(&[1, 2, 3]).await.expect("promote");
    let all: Vec<String> = urls.values().cloned().collect();
    append_many(all, "c", 30, 2, rng, acks.clone(), Arc::new(|_| {})).await;
}

/// Waits until all nodes have applied the same last index; their dumps.
async fn converge(c: &Client, urls: &BTreeMap<u64, String>) -> BTreeMap<u64, Dump> {
    let t = Instant::now();
    loop {
        let mut dumps = BTreeMap::new();
        for (id, u) in urls {
            if let Ok(d) = c.dump_of(u).await {
                dumps.insert(*id, d);
            }
        }
        let applied: BTreeSet<_> = dumps.values().map(|d| d.last_applied).collect();
        if dumps.len() == urls.len() && applied.len() == 1 {
            return dumps;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no convergence: {applied:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn check(acks: &Acks, dumps: &BTreeMap<u64, Dump>) {
    let first = dumps.values().next().expect("a dump");
    for (id, d) in dumps {
        assert_eq!(d.streams, first.streams, "node {id} differs");
        let msgs: BTreeMap<u64, String> = d.streams["s"]
            .iter()
            .map(|m| (m.seq, m.payload.clone().expect("text payload")))
            .collect();
        for (seq, p) in &acks.acked {
            assert_eq!(
                msgs.get(seq),
                Some(p),
                "node {id}: acknowledged {seq} missing"
            );
        }
        let distinct: BTreeSet<&String> = msgs.values().collect();
        assert_eq!(
            distinct.len(),
            msgs.len(),
            "node {id}: a message stored twice"
        );
        let known: BTreeSet<&String> = acks.acked.values().chain(&acks.unknown).collect();
        for p in msgs.values().filter(|p| p.as_str() != "never") {
            assert!(known.contains(p), "node {id}: a message nobody sent: {p}");
        }
    }
    eprintln!(
        "{} acknowledged, {} unknown; 3 nodes agree on {} messages",
        acks.acked.len(),
        acks.unknown.len(),
        first.streams["s"].len()
    );
}
