//! `seqstore-server serve --dir D`: a one-node cluster on 127.0.0.1:4480, no configuration.
//! `seqstore-server serve --dir D --id N --listen ADDR --peers 1=ADDR,2=ADDR,3=ADDR
//! [--bootstrap]`: one node of a cluster. See the crate README.
#![forbid(unsafe_code)]

use anyhow::Context;
use clap::{Parser, Subcommand};
use seqstore_server::{parse_peers, NodeOpts, DEFAULT_LISTEN};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(about = "the replicated seqstore stream service over HTTP/JSON")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Runs a node (a one-node cluster without --peers).
    Serve(Serve),
}

#[derive(clap::Args, Debug)]
struct Serve {
    /// The node's directory (created if missing).
    #[arg(long)]
    dir: PathBuf,
    /// This node's id (a member of --peers).
    #[arg(long, default_value_t = 1)]
    id: u64,
    /// The address to listen on [default: 127.0.0.1:4480, or with --peers this node's
    /// address there]. With --peers, the peers reach it at its --peers address.
    #[arg(long)]
    listen: Option<String>,
    /// Every member at start, this one included: ID=HOST:PORT,... Without it: a one-node
    /// cluster that initializes itself.
    #[arg(long)]
    peers: Option<String>,
    /// Form the cluster from --peers if this node's directory is empty.
    #[arg(long)]
    bootstrap: bool,
    /// Snapshot (and purge the log behind it) every this many entries.
    #[arg(long, default_value_t = 1000)]
    snapshot_every: u64,
    /// The bearer token clients and peers must send.
    #[arg(long, env = "SEQSTORE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The largest client request body, in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    max_body: usize,
    /// How long a write waits to be committed, in ms.
    #[arg(long, default_value_t = 10_000)]
    write_timeout_ms: u64,
    /// How long an empty node waits for a peer to answer the amnesia guard, in ms.
    #[arg(long, default_value_t = 10_000)]
    join_timeout_ms: u64,
    /// The election timeout, in ms: a follower that hears nothing from a leader for between
    /// this and twice this starts an election (heartbeats every quarter of it). Keep it above
    /// the disk's slowest fsync: a leader sends nothing while its own log fsync is in flight,
    /// so slower fsyncs depose every leader before it leads. Lower: a faster failover.
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(20..=600_000))]
    election_timeout_ms: u64,
    /// Threads running the node's HTTP, raft and JSON work. 1 (the default): one thread,
    /// which the node's work is serialized through anyway (one raft core, one state machine);
    /// more spread requests over that many. File I/O runs on threads of its own either way
    /// (the log's I/O thread, the blocking pool for the state machine's).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,
}

fn opts(s: Serve) -> anyhow::Result<NodeOpts> {
    let listen = s.listen.clone().unwrap_or(DEFAULT_LISTEN.to_string());
    let mut o = NodeOpts::single(s.dir, listen);
    if let Some(p) = &s.peers {
        o.peers = parse_peers(p)?;
        o.id = s.id;
        o.bootstrap = s.bootstrap;
        let Some(me) = o.peers.get(&o.id) else {
            anyhow::bail!("--id {} is not in --peers", o.id);
        };
        o.listen = s.listen.unwrap_or(me.clone());
    }
    o.snapshot_every = s.snapshot_every;
    // (an empty token is refused by the node: it must not quietly turn authentication off)
    o.token = s.token;
    o.max_body = s.max_body;
    o.write_timeout = Duration::from_millis(s.write_timeout_ms);
    o.join_timeout = Duration::from_millis(s.join_timeout_ms);
    o.election_timeout = Duration::from_millis(s.election_timeout_ms);
    Ok(o)
}

fn main() -> anyhow::Result<()> {
    let Cmd::Serve(s) = Cli::parse().cmd;
    let threads = s.threads;
    let o = opts(s)?;
    let id = o.id;
    let mut rt = match threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n.into());
            b
        }
    };
    rt.enable_all()
        .build()?
        .block_on(seqstore_server::serve(o))
        .with_context(|| format!("node {id}"))
}
