//! A node: the log on host-fs, the stream state machine, openraft, and the TCP server.

use anyhow::Context;
use openraft::error::{CheckIsLeaderError, RaftError};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use seqstore_fs::HostFs;
use seqstore_raft::batch::{system_clock, BatchLimits, Batcher, WriteError};
use seqstore_raft::net::{read_frame, write_frame, Msg, NetFactory, Reply, Rpc, Status};
use seqstore_raft::{LogConfig, LogStore, StreamStateMachine, TypeConfig};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

/// The node's raft handle.
pub type NodeRaft = Raft<TypeConfig>;

/// How to run a node.
#[derive(Clone, Debug)]
pub struct NodeOpts {
    /// This node's id.
    pub id: u64,
    /// Its directory (`log/` and `sm/` are created below it).
    pub dir: PathBuf,
    /// The address to listen on (loopback in the tests).
    pub listen: String,
    /// Every member, this one included: id -> address.
    pub peers: BTreeMap<u64, String>,
    /// Initialize the cluster with `peers` as voters if this node's log is empty.
    pub bootstrap: bool,
    /// Build a snapshot (and purge the log behind it) every this many entries.
    pub snapshot_every: u64,
}

/// Parses `1=127.0.0.1:7001,2=127.0.0.1:7002`.
pub fn parse_peers(s: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (id, addr) = p
                .split_once('=')
                .with_context(|| format!("peer {p:?} is not ID=ADDR"))?;
            Ok((id.parse().context("peer id")?, addr.to_string()))
        })
        .collect()
}

/// Starts openraft on the node's directory.
pub async fn start(o: &NodeOpts) -> anyhow::Result<(NodeRaft, StreamStateMachine<HostFs>)> {
    let config = Config {
        cluster_name: "seqstore".into(),
        heartbeat_interval: 100,
        election_timeout_min: 400,
        election_timeout_max: 800,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(o.snapshot_every),
        max_in_snapshot_log_to_keep: 20,
        ..Config::default()
    }
    .validate()?;
    let log_fs = HostFs::create(o.dir.join("log"))?;
    let sm_fs = HostFs::create(o.dir.join("sm"))?;
    let sm = StreamStateMachine::open(sm_fs).context("open state machine")?;
    let log = LogStore::open(log_fs, LogConfig::default())
        .context("open log")?
        .with_snapshot_floor(sm.snapshot_floor());
    let raft = Raft::new(o.id, Arc::new(config), NetFactory, log, sm.clone()).await?;
    if o.bootstrap && !raft.is_initialized().await? {
        let members: BTreeMap<u64, BasicNode> = o
            .peers
            .iter()
            .map(|(id, a)| (*id, BasicNode::new(a)))
            .collect();
        raft.initialize(members).await?;
    }
    Ok((raft, sm))
}

/// Runs a node until the process is killed.
pub async fn run(o: NodeOpts) -> anyhow::Result<()> {
    let listener = TcpListener::bind(&o.listen)
        .await
        .with_context(|| format!("listen on {}", o.listen))?;
    let (raft, sm) = start(&o).await?;
    let limits = match std::env::var("SEQSTORE_NODE_UNBATCHED") {
        // one proposal per write, one at a time per connection: for measuring the batcher
        Ok(_) => BatchLimits {
            max_ops: 1,
            in_flight: 64,
            ..BatchLimits::default()
        },
        Err(_) => BatchLimits::default(),
    };
    let batcher = Batcher::start(raft.clone(), limits, system_clock());
    let node = Arc::new(Node {
        raft,
        sm,
        batcher,
        id: o.id,
    });
    eprintln!("node {} listening on {}", o.id, o.listen);
    loop {
        let (sock, _) = listener.accept().await?;
        let _ = sock.set_nodelay(true);
        let node = Arc::clone(&node);
        tokio::spawn(async move {
            let _ = serve_conn(sock, &node).await;
        });
    }
}

/// What a connection's requests use.
struct Node {
    raft: NodeRaft,
    sm: StreamStateMachine<HostFs>,
    batcher: Batcher,
    id: u64,
}

/// Answers frames on one connection until it closes.
async fn serve_conn(mut sock: TcpStream, node: &Node) -> std::io::Result<()> {
    while let Some(rpc) = read_frame::<Rpc>(&mut sock).await? {
        let reply = handle(rpc, node).await;
        write_frame(&mut sock, &reply).await?;
    }
    Ok(())
}

fn not_leader(leader: Option<u64>, node: Option<BasicNode>) -> Reply {
    Reply::NotLeader {
        leader,
        addr: node.map(|n| n.addr),
    }
}

async fn handle(rpc: Rpc, n: &Node) -> Reply {
    let (raft, sm, batcher, id) = (&n.raft, &n.sm, &n.batcher, n.id);
    match rpc {
        Rpc::Append(r) => Reply::Append(raft.append_entries(r).await),
        Rpc::Vote(r) => Reply::Vote(raft.vote(r).await),
        Rpc::Snapshot(r) => Reply::Snapshot(raft.install_snapshot(r).await),
        Rpc::Write(op) => match batcher.write(op).await {
            Ok(w) => Reply::Written {
                response: w.response,
                index: w.log_id.index,
            },
            Err(WriteError::NotLeader { leader, node }) => not_leader(leader, node),
            Err(e) => Reply::Err(e.to_string()),
        },
        Rpc::Get { stream, seq } => match raft.ensure_linearizable().await {
            Ok(_) => match sm.get(&stream, seq) {
                Ok(m) => Reply::Msg(m.map(|m| Msg {
                    seq: m.seq,
                    subject: m.subject,
                    ts: m.ts,
                    headers: m.headers,
                    payload: m.payload,
                })),
                Err(e) => Reply::Err(e.to_string()),
            },
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                not_leader(f.leader_id, f.leader_node)
            }
            Err(e) => Reply::Err(e.to_string()),
        },
        Rpc::Dump => match sm.with_core(|c| c.dump().map(|d| (c.applied().0, d))) {
            Ok((last_applied, streams)) => Reply::Dump {
                last_applied,
                streams,
            },
            Err(e) => Reply::Err(e.to_string()),
        },
        Rpc::Status => {
            let m = raft.metrics().borrow().clone();
            Reply::Status(Status {
                id,
                leader: m.current_leader,
                term: m.current_term,
                last_applied: m.last_applied,
                last_log_index: m.last_log_index,
                snapshot: m.snapshot,
                purged: m.purged,
            })
        }
    }
}
