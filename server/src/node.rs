//! A node: the log and the state machine on the node's directory, openraft over the HTTP
//! network, the amnesia guard, and the HTTP service.

use crate::error::Error;
use crate::http::{router, App, Inner};
use crate::net::HttpNetwork;
use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use seqstore_fs::HostFs;
use seqstore_raft::batch::{system_clock, BatchLimits, Batcher};
use seqstore_raft::{LogConfig, LogStore, StreamStateMachine, TypeConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The node's raft handle.
pub type NodeRaft = Raft<TypeConfig>;
/// The node's state machine.
pub type Sm = StreamStateMachine<HostFs>;

/// The node's raft log (its damage gate is read by the vote handler: `seqstore_raft::gate`).
pub type Log = LogStore<HostFs>;

/// The default listening address of `serve`: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:4480";

/// How to run a node.
#[derive(Clone, Debug)]
pub struct NodeOpts {
    /// This node's id.
    pub id: u64,
    /// Its directory (`log/` and `sm/` below it).
    pub dir: PathBuf,
    /// The address to listen on.
    pub listen: String,
    /// Every member at start, this one included: id -> `host:port` (this node's entry is its
    /// address in the membership, which may differ from `listen`, e.g. `0.0.0.0:7001`).
    pub peers: BTreeMap<u64, String>,
    /// Form the cluster if this node's directory is empty (see [`start`]).
    pub bootstrap: bool,
    /// Build a snapshot (and purge the log behind it) every this many entries.
    pub snapshot_every: u64,
    /// The bearer token clients and peers must send (and this node sends its peers).
    pub token: Option<String>,
    /// The largest client request body, in bytes.
    pub max_body: usize,
    /// How long a write waits to be committed before answering `unknown_outcome`.
    pub write_timeout: Duration,
    /// How long an empty node looks for a peer to answer the amnesia guard.
    pub join_timeout: Duration,
    /// The election timeout's lower bound (the upper is twice it, heartbeats every quarter
    /// of it). It must outlast the disk's slowest fsync: a leader sends nothing while its own
    /// log fsync is in flight (openraft 0.9 waits for it), so a slower fsync lets a
    /// follower's timer run out, and each new leader is deposed the same way.
    pub election_timeout: Duration,
}

impl NodeOpts {
    /// A one-node cluster: id 1, its own only voter, initialized on first start.
    pub fn single(dir: PathBuf, listen: String) -> Self {
        NodeOpts {
            id: 1,
            dir,
            peers: BTreeMap::from([(1, listen.clone())]),
            listen,
            bootstrap: true,
            snapshot_every: 1000,
            token: None,
            max_body: 4 << 20,
            write_timeout: Duration::from_secs(10),
            join_timeout: Duration::from_secs(10),
            election_timeout: Duration::from_millis(400),
        }
    }
}

/// Parses `1=127.0.0.1:7001,2=127.0.0.1:7002`.
pub fn parse_peers(s: &str) -> Result<BTreeMap<u64, String>, Error> {
    let mut out = BTreeMap::new();
    for p in s.split(',').filter(|p| !p.is_empty()) {
        let bad = || Error::Options(format!("peer {p:?} is not ID=HOST:PORT"));
        let (id, addr) = p.split_once('=').ok_or_else(bad)?;
        let id: u64 = id.parse().map_err(|_| bad())?;
        addr.parse::<SocketAddr>().map_err(|_| bad())?;
        out.insert(id, addr.to_string());
    }
    Ok(out)
}

fn raft_config(o: &NodeOpts) -> Result<Arc<Config>, Error> {
    let election = u64::try_from(o.election_timeout.as_millis()).unwrap_or(u64::MAX / 2);
    let c = Config {
        cluster_name: "seqstore".into(),
        heartbeat_interval: election / 4,
        election_timeout_min: election,
        election_timeout_max: election.saturating_mul(2),
        snapshot_policy: SnapshotPolicy::LogsSinceLast(o.snapshot_every),
        max_in_snapshot_log_to_keep: 20,
        ..Config::default()
    };
    c.validate()
        .map(Arc::new)
        .map_err(|e| Error::Options(e.to_string()))
}

fn open_err(o: &NodeOpts, e: impl std::fmt::Display) -> Error {
    Error::Open {
        path: o.dir.clone(),
        message: e.to_string(),
    }
}

/// A token must be something a client can send and a guess cannot be: not empty, no
/// whitespace or control characters (an `Authorization` header could not carry it as given).
/// An empty token must not quietly mean "no authentication": that is `token: None`.
pub(crate) fn check_token(token: Option<&str>) -> Result<(), Error> {
    match token {
        Some("") => Err(Error::Options(
            "the bearer token (--token, SEQSTORE_TOKEN) is empty: give one, or none at all to run \
             without authentication"
                .into(),
        )),
        Some(t) if t.chars().any(|c| c.is_whitespace() || c.is_control()) => Err(Error::Options(
            "the bearer token has whitespace or control characters".into(),
        )),
        _ => Ok(()),
    }
}

/// Starts openraft on the node's directory. On an empty directory the amnesia guard runs
/// first ([`crate::guard`]). With `bootstrap` on an uninitialized node, it initializes the
/// cluster with itself as the only voter, then adds the other peers as learners and makes
/// them voters as they come up (`form_cluster`): a fresh peer is never a voter before it
/// has joined, which is what lets the guard tell a fresh node from one that lost its disk.
pub async fn start(o: &NodeOpts) -> Result<(NodeRaft, Sm, Log), Error> {
    if !o.peers.contains_key(&o.id) {
        return Err(Error::Options(format!("id {} is not in the peers", o.id)));
    }
    check_token(o.token.as_deref())?;
    let log_fs = HostFs::create(o.dir.join("log")).map_err(|e| open_err(o, e))?;
    let sm_fs = HostFs::create(o.dir.join("sm")).map_err(|e| open_err(o, e))?;
    // One thread does a write's work: the log's append and fsync and the state machine's
    // apply run on the runtime's thread (server/README.md, "Speed", says why).
    let sm = StreamStateMachine::open(sm_fs).map_err(|e| open_err(o, e))?;
    let sm = sm.with_inline_apply(true);
    let mut log = LogStore::open(log_fs, LogConfig::default().with_inline_io(true))
        .map_err(|e| open_err(o, e))?
        .with_snapshot_floor(sm.snapshot_floor());
    let vote = log.read_vote().await.map_err(|e| open_err(o, e))?;
    let state = log.get_log_state().await.map_err(|e| open_err(o, e))?;
    let empty = vote.is_none() && state.last_log_id.is_none() && sm.last_applied().is_none();
    if empty {
        crate::guard::check(o).await?;
    }
    let net = HttpNetwork::new(o.token.clone());
    let raft = Raft::new(o.id, raft_config(o)?, net, log.clone(), sm.clone())
        .await
        .map_err(|e| Error::Raft(e.to_string()))?;
    // a log whose recovery found damage: no candidacy until it holds what it lost
    seqstore_raft::gate::hold_elections(&raft, &log);
    if let Some(through) = log.damaged() {
        eprintln!(
            "node {}: the log's recovery found damage to durable entries; it neither votes \
             nor stands for election until it holds index {through} again",
            o.id
        );
    }
    let initialized = raft.is_initialized().await;
    if o.bootstrap && !initialized.map_err(|e| Error::Raft(e.to_string()))? {
        let me = BTreeMap::from([(o.id, BasicNode::new(&o.peers[&o.id]))]);
        raft.initialize(me)
            .await
            .map_err(|e| Error::Raft(e.to_string()))?;
        if o.peers.len() > 1 {
            tokio::spawn(form_cluster(raft.clone(), o.id, o.peers.clone()));
        }
    }
    Ok((raft, sm, log))
}

/// Waits until the leader's replication to `id` reached `index` (the entry that added it as
/// a learner). openraft 0.9's blocking `add_learner` was seen returning at once, for a peer
/// not even listening yet and for a re-added id: this waits for an index that only the new
/// learner can have acknowledged.
pub async fn caught_up(raft: &NodeRaft, id: u64, index: u64) {
    let mut rx = raft.metrics();
    loop {
        let done = rx.borrow().replication.as_ref().is_some_and(|r| {
            r.get(&id)
                .copied()
                .flatten()
                .is_some_and(|l| l.index >= index)
        });
        if done || rx.changed().await.is_err() {
            return;
        }
    }
}

/// Adds every other peer as a learner (waiting until that learner caught up), then makes all
/// of them voters. Retries until done or this node is no longer the leader; after
/// that the admin calls finish the job.
async fn form_cluster(raft: NodeRaft, id: u64, peers: BTreeMap<u64, String>) {
    let leads = |r: &NodeRaft| r.metrics().borrow().current_leader == Some(id);
    for (pid, addr) in peers.iter().filter(|(p, _)| **p != id) {
        loop {
            let add = raft.add_learner(*pid, BasicNode::new(addr), false);
            if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_secs(5), add).await {
                let caught = caught_up(&raft, *pid, r.log_id.index);
                if tokio::time::timeout(Duration::from_secs(5), caught)
                    .await
                    .is_ok()
                {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            if !leads(&raft) {
                eprintln!("node {id}: no longer the leader; forming the cluster stops");
                return;
            }
        }
    }
    let voters: BTreeSet<u64> = peers.keys().copied().collect();
    while raft.change_membership(voters.clone(), false).await.is_err() {
        tokio::time::sleep(Duration::from_millis(300)).await;
        if !leads(&raft) {
            return;
        }
    }
    eprintln!("node {id}: cluster formed, voters {voters:?}");
}

/// Runs a node ([`serve`]) on a thread of its own, on a runtime of its own with two workers:
/// a node inside a program (or a test) that is not async. The handle's result is `serve`'s
/// error, if it stops.
pub fn serve_on_thread(o: NodeOpts) -> std::thread::JoinHandle<Result<(), Error>> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(Error::Serve)?;
        rt.block_on(serve(o))
    })
}

/// Runs a node until the process is killed.
pub async fn serve(o: NodeOpts) -> Result<(), Error> {
    let (raft, sm, log) = start(&o).await?;
    let listener = tokio::net::TcpListener::bind(&o.listen)
        .await
        .map_err(|source| Error::Listen {
            addr: o.listen.clone(),
            source,
        })?;
    let batcher = Batcher::start(raft.clone(), BatchLimits::default(), system_clock());
    let app = App::new(Inner {
        raft,
        sm,
        log,
        id: o.id,
        token: o.token.clone(),
        write_timeout: o.write_timeout,
        batcher,
    });
    let service = router(app, o.max_body).into_make_service_with_connect_info::<SocketAddr>();
    eprintln!("node {} serving on http://{}", o.id, o.listen);
    axum::serve(listener, service).await.map_err(Error::Serve)
}

#[cfg(test)]
mod tests {
    use super::{check_token, raft_config, NodeOpts};
    use std::time::Duration;

    /// The election timeout sets the range and the heartbeat (openraft's own check holds:
    /// the heartbeat is shorter than the shortest timeout).
    #[test]
    fn the_election_timeout_sets_the_range_and_the_heartbeat() {
        let mut o = NodeOpts::single("d".into(), "127.0.0.1:1".into());
        for ms in [20, 400, 1500, 600_000] {
            o.election_timeout = Duration::from_millis(ms);
            let c = raft_config(&o).expect("valid");
            let got = (
                c.heartbeat_interval,
                c.election_timeout_min,
                c.election_timeout_max,
            );
            assert_eq!(got, (ms / 4, ms, 2 * ms));
        }
    }

    /// An empty token is refused, not taken for "no authentication"; so is one no header
    /// could carry as given.
    #[test]
    fn a_token_must_be_sendable_and_not_empty() {
        assert!(check_token(None).is_ok());
        assert!(check_token(Some("s3cret")).is_ok());
        for t in ["", " ", "a b", "tab\t", "nl\n"] {
            assert!(check_token(Some(t)).is_err(), "{t:?}");
        }
    }
}
