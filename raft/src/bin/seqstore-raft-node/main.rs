//! `seqstore-raft-node --id 1 --dir D --listen 127.0.0.1:7001 --peers 1=…,2=…,3=… [--bootstrap]`:
//! one node of a seqstore raft cluster (what `seqstore raft node` will be once it is wired into
//! the main CLI).

use clap::Parser;
mod node;

use node::{parse_peers, run, NodeOpts};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(about = "one node of a seqstore raft cluster (openraft log storage on seqstore)")]
struct Args {
    /// This node's id (a member of --peers).
    #[arg(long)]
    id: u64,
    /// The node's directory.
    #[arg(long)]
    dir: PathBuf,
    /// The address to listen on.
    #[arg(long)]
    listen: String,
    /// Every member, this one included: ID=ADDR,ID=ADDR,...
    #[arg(long)]
    peers: String,
    /// Initialize the cluster with --peers as voters if it is not initialized yet.
    #[arg(long)]
    bootstrap: bool,
    /// Snapshot (and purge the log behind it) every this many entries.
    #[arg(long, default_value_t = 500)]
    snapshot_every: u64,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let peers = parse_peers(&a.peers)?;
    anyhow::ensure!(peers.contains_key(&a.id), "--id {} is not in --peers", a.id);
    let opts = NodeOpts {
        id: a.id,
        dir: a.dir,
        listen: a.listen,
        peers,
        bootstrap: a.bootstrap,
        snapshot_every: a.snapshot_every,
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(opts))
}
