//! `--replicated`: committed appends/s of seqstore's 3-node cluster (three `seqstore-server`
//! processes, every entry fsynced by the leader and a follower before it commits) against a
//! real 3-node NATS JetStream cluster (three nats-server processes with routes, an R3 file
//! stream) under `sync_interval: always` and under the default config, driven by one client
//! harness: `k` concurrent clients, each awaiting its acknowledgement before its next append,
//! sharing one client (one NATS connection; one `seqstore_client::Client`).
//! Not part of `--quick` or CI: it starts nine server processes.
//!
//! Every process of a cell shares this machine's cores with the client, as the reference
//! measurements in `../shared/reference/replicated.md` did; only ratios from one run compare.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::groups::loadavg;
use crate::nats::{find_server, server_version, start_cluster, Cell, Client, Server};
use crate::report::Goal;
use crate::util::Ctx;

mod report;
mod seqstore;

pub use report::ReplReport;

/// What `--replicated` runs.
#[derive(Clone, Debug)]
pub struct ReplOpts {
    /// Rounds; each round measures every cell once, in the same order.
    pub reps: usize,
    /// Appends per cell with 1 client.
    pub msgs_1: u64,
    /// Appends per cell with 64 clients.
    pub msgs_64: u64,
    /// Longest a cell runs, s (it stops early with what it acknowledged by then).
    pub max_secs: f64,
    /// The nats-server binary (else `$NATS_SERVER_BIN`, else the PATH).
    pub nats_server: Option<PathBuf>,
    /// Where the servers' directories go (default: the temp dir; must be a real disk).
    pub dir: Option<PathBuf>,
    /// The seqstore-server binary (else the one beside this executable).
    pub seqstore_server: Option<PathBuf>,
    /// Only these cells (keys of [`CELLS`]); empty: all of them. A goal whose cells were not
    /// measured has no value.
    pub only: Vec<String>,
}

impl Default for ReplOpts {
    fn default() -> Self {
        ReplOpts {
            reps: 3,
            msgs_1: 1000,
            msgs_64: 6400,
            max_secs: 5.0,
            nats_server: None,
            dir: None,
            seqstore_server: None,
            only: Vec::new(),
        }
    }
}

/// The cells, in the order each round measures them: (key, clients). seqstore's beside NATS
/// `always`, the configuration it is compared with.
pub(crate) const CELLS: &[(&str, u64)] = &[
    ("nats_r3_always_1", 1),
    ("seqstore_r3_1", 1),
    ("nats_r3_always_64", 64),
    ("seqstore_r3_64", 64),
    ("seqstore_r3_64_apart", 64),
    ("nats_r3_default_1", 1),
    ("nats_r3_default_64", 64),
    ("seqstore_server1_64", 64),
    ("embedded_64", 64),
];

/// Runs every round and returns the report.
pub fn run_replicated(opts: &ReplOpts, progress: &dyn Fn(&str)) -> Result<ReplReport> {
    let cells: Vec<(&'static str, u64)> = (CELLS.iter().copied())
        .filter(|(k, _)| opts.only.is_empty() || opts.only.iter().any(|o| o == k))
        .collect();
    if let Some(o) = (opts.only.iter()).find(|o| !CELLS.iter().any(|(k, _)| k == o)) {
        anyhow::bail!(
            "--only {o}: no such cell (cells: {:?})",
            CELLS.iter().map(|c| c.0)
        );
    }
    let wants = |p: &str| cells.iter().any(|(k, _)| k.starts_with(p));
    let load_start = loadavg();
    let base = opts.dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut ctx = Ctx::new(base, progress, opts.reps * cells.len() + 1, 128);
    let bin = find_server(opts.nats_server.as_deref()).map_err(anyhow::Error::msg)?;
    let version = server_version(&bin)?;
    let ours = seqstore::find_server(opts.seqstore_server.as_deref())?;
    ctx.tick(&format!(
        "start two 3-node nats-server {version} clusters and a seqstore-server cluster"
    ));
    let probe_opts = crate::BenchOpts::quick();
    let probe_start = crate::groups::cells::fsync_probe(&mut ctx, &probe_opts)?;
    let dirs = |tag: &str| -> Result<[tempfile::TempDir; 3]> {
        Ok([
            ctx.tempdir(&format!("r3-{tag}-n1"))?,
            ctx.tempdir(&format!("r3-{tag}-n2"))?,
            ctx.tempdir(&format!("r3-{tag}-n3"))?,
        ])
    };
    let nats = |always: bool| -> Result<Option<(Vec<Server>, Client)>> {
        let tag = if always { "always" } else { "default" };
        if !wants(&format!("nats_r3_{tag}")) {
            return Ok(None);
        }
        let servers = start_cluster(&bin, dirs(tag)?, always)?;
        let client = Client::connect(&servers[0])?;
        Ok(Some((servers, client)))
    };
    let (always, default) = (nats(true)?, nats(false)?);
    let cs = (wants("seqstore_r3"))
        .then(|| seqstore::Cluster::start(&ours, dirs("seqstore")?.into()))
        .transpose()?;
    let one = (wants("seqstore_server1"))
        .then(|| seqstore::Cluster::start(&ours, vec![ctx.tempdir("server1")?]))
        .transpose()?;
    let mut samples: Vec<(&'static str, Vec<f64>)> =
        cells.iter().map(|(k, _)| (*k, Vec::new())).collect();
    let max = Duration::from_secs_f64(opts.max_secs);
    let started = Instant::now();
    for r in 0..opts.reps {
        for (i, &(key, clients)) in cells.iter().enumerate() {
            ctx.tick(&format!("round {}/{}: {key}", r + 1, opts.reps));
            let cell = Cell {
                replicas: 3,
                publishers: clients,
                msgs: if clients == 1 {
                    opts.msgs_1
                } else {
                    opts.msgs_64
                },
                max,
            };
            let name = format!("r3_{key}_{r}");
            let unstarted = "started above for the cells that use it";
            let v = match key {
                "embedded_64" => embedded(&mut ctx, cell),
                "seqstore_server1_64" => {
                    one.as_ref()
                        .expect(unstarted)
                        .publish_cell(&name, cell, &ctx.payload, false)
                }
                k if k.starts_with("seqstore") => cs.as_ref().expect(unstarted).publish_cell(
                    &name,
                    cell,
                    &ctx.payload,
                    k.ends_with("_apart"),
                ),
                k if k.contains("always") => {
                    always
                        .as_ref()
                        .expect(unstarted)
                        .1
                        .publish_cell(&name, cell, &ctx.payload)
                }
                _ => default
                    .as_ref()
                    .expect(unstarted)
                    .1
                    .publish_cell(&name, cell, &ctx.payload),
            }
            .with_context(|| format!("{key}, round {}", r + 1))?;
            samples[i].1.push(v);
        }
    }
    // the clients before their servers
    drop((cs, one));
    for (servers, client) in [always, default].into_iter().flatten() {
        drop(client);
        drop(servers);
    }
    let probe_end = crate::groups::cells::fsync_probe(&mut ctx, &probe_opts)?;
    let mut report = ReplReport {
        opts: opts.clone(),
        nats_version: version,
        nats_bin: bin,
        samples,
        goals: Vec::new(),
        elapsed_s: started.elapsed().as_secs_f64(),
        fsync_probe_us: (probe_start, probe_end),
        loadavg: (load_start, loadavg()),
    };
    report.goals = goals(&report);
    Ok(report)
}

/// The store embedded in this process: 64 threads appending through one `SharedStore` under
/// `SyncPolicy::Always` (group commit), each awaiting its append, as the clients await theirs.
fn embedded(ctx: &mut Ctx<'_>, cell: Cell) -> Result<f64> {
    let per_writer = cell.msgs.div_ceil(cell.publishers.max(1));
    let secs = cell.max.as_secs_f64();
    crate::groups::cells::always_cell(ctx, "seqstore_64", secs, per_writer)
}

/// The goal: seqstore's cluster at least twice NATS R3 under
/// `sync_interval: always` with 64 clients; the ratio of the medians decides, the per-round
/// ratios (cells measured next to each other) show the spread.
fn goals(r: &ReplReport) -> Vec<Goal> {
    let (ours, theirs) = (r.rounds("seqstore_r3_64"), r.rounds("nats_r3_always_64"));
    let per_round: Vec<f64> = ours.iter().zip(theirs).map(|(a, b)| a / b).collect();
    let paired = crate::util::median(&per_round).map(|m| {
        let lo = per_round.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = per_round.iter().copied().fold(0.0, f64::max);
        (m, lo, hi)
    });
    let always64 = r.median("nats_r3_always_64");
    vec![Goal {
        name: "r3_vs_nats_always64",
        what: "seqstore 3-node cluster / NATS R3 (sync_interval: always), 64 clients",
        value: r.median("seqstore_r3_64").zip(always64).map(|(a, b)| a / b),
        op: ">=",
        target: 2.0,
        paired,
    }]
}
