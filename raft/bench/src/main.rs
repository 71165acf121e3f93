//! `seqstore-raft-bench log [SECS]`: Raft log append, entries/s, 128-byte entries, one fsync
//! per append batch, seqstore-raft against raft-log 0.4.6 in the same run (alternating
//! rounds, median of 3), plus the fsync latency of the directory used.
//! (The 3-node cluster's throughput against NATS R3: `seqstore-bench --replicated`.)
#![forbid(unsafe_code)]

use anyhow::Context;
use openraft::testing::log_id;
use openraft::EntryPayload;
use raft_log::api::raft_log_writer::RaftLogWriter;
use seqstore_fs::HostFs;
use seqstore_raft::{Entry, LogConfig, LogCore, LogStore, Op, Request};
use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod tracecheck;

const PAYLOAD: usize = 128;
const BATCHES: [usize; 3] = [1, 16, 256];

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RlTypes;

impl raft_log::Types for RlTypes {
    type LogId = (u64, u64);
    type LogPayload = Vec<u8>;
    type Vote = (u64, u64);
    type Callback = SyncSender<io::Result<()>>;
    type UserData = String;
    fn log_index(id: &(u64, u64)) -> u64 {
        id.1
    }
    fn payload_size(p: &Vec<u8>) -> u64 {
        p.len() as u64
    }
}

/// openraft entry `i`: an append of a 128-byte payload.
fn entry(i: u64) -> Entry {
    Entry {
        log_id: log_id(1, 1, i),
        payload: EntryPayload::Normal(Request {
            ts: i as i64,
            op: Op::Append {
                stream: "s".into(),
                subject: "x".into(),
                headers: Vec::new(),
                payload: vec![b'x'; PAYLOAD],
                ttl_ms: 0,
            },
        }),
    }
}

/// Runs `step(next_index)` (one batch, returns entries written) for about `secs`.
fn timed(secs: f64, mut step: impl FnMut(u64) -> anyhow::Result<u64>) -> anyhow::Result<f64> {
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed().as_secs_f64() < secs {
        n += step(n)?;
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

fn seqstore_core(dir: &Path, batch: usize, secs: f64) -> anyhow::Result<f64> {
    let mut log = LogCore::open(HostFs::create(dir)?, LogConfig::default())?;
    timed(secs, |next| {
        log.append_buffered((next..next + batch as u64).map(entry))?;
        log.sync()?;
        Ok(batch as u64)
    })
}

fn seqstore_adapter(dir: &Path, batch: usize, secs: f64) -> anyhow::Result<f64> {
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let log = LogStore::open(HostFs::create(dir)?, LogConfig::default())?;
    timed(secs, |next| {
        let (tx, rx) = sync_channel(1);
        let entries = (next..next + batch as u64).map(entry).collect();
        let cb = Box::new(move |r: io::Result<()>| {
            let _ = tx.send(r);
        });
        rt.block_on(log.append_with(entries, cb))?;
        rx.recv()??;
        Ok(batch as u64)
    })
}

/// raft-log with its defaults, or with `flush_batch_wait` 0 (`no_wait`): by default its flush
/// worker waits up to 1 ms to batch more writes before it syncs.
fn raft_log(dir: &Path, batch: usize, secs: f64, no_wait: bool) -> anyhow::Result<f64> {
    std::fs::create_dir_all(dir)?;
    let mut cfg = raft_log::Config::new(dir.to_str().context("utf-8 path")?);
    if no_wait {
        cfg.wal.flush_batch_wait = Some(Duration::ZERO);
    }
    let cfg = Arc::new(cfg);
    let mut log = raft_log::RaftLog::<RlTypes>::open(cfg)?;
    timed(secs, |next| {
        let entries = (next..next + batch as u64).map(|i| ((1, i + 1), vec![b'x'; PAYLOAD]));
        log.append(entries)?;
        let (tx, rx) = sync_channel(1);
        log.flush(true, Some(tx))?;
        rx.recv()??;
        Ok(batch as u64)
    })
}

/// Median fsync (fdatasync) latency of a 4 KiB overwrite in `dir`, in microseconds.
fn fsync_probe(dir: &Path) -> anyhow::Result<f64> {
    let mut f = std::fs::File::create(dir.join("probe"))?;
    let mut lat = Vec::new();
    for _ in 0..200 {
        f.write_all(&[0u8; 4096])?;
        let t = Instant::now();
        f.sync_data()?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    lat.sort_by(f64::total_cmp);
    Ok(lat[lat.len() / 2])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn log_bench(secs: f64) -> anyhow::Result<()> {
    let base = tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or(".".into()))?;
    println!(
        "fsync (fdatasync 4 KiB) median: {:.0} us",
        fsync_probe(base.path())?
    );
    println!("| batch | raft-log 0.4.6 (defaults) | raft-log, batch wait 0 | seqstore LogCore | seqstore LogStore (async) | LogCore / best raft-log | LogStore / best raft-log |");
    println!("|---|---|---|---|---|---|---|");
    for batch in BATCHES {
        let mut r: [Vec<f64>; 4] = Default::default();
        for round in 0..3 {
            let d = |name: &str| base.path().join(format!("{name}-{batch}-{round}"));
            r[0].push(raft_log(&d("rl"), batch, secs, false)?);
            r[1].push(raft_log(&d("rl0"), batch, secs, true)?);
            r[2].push(seqstore_core(&d("core"), batch, secs)?);
            r[3].push(seqstore_adapter(&d("ad"), batch, secs)?);
        }
        let [rl, rl0, core, ad] = r.map(median);
        let best = rl.max(rl0);
        println!(
            "| {batch} | {rl:.0} | {rl0:.0} | {core:.0} | {ad:.0} | {:.2}x | {:.2}x |",
            core / best,
            ad / best
        );
    }
    println!("fsync probe after: {:.0} us", fsync_probe(base.path())?);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    match args.get(1).map(String::as_str) {
        Some("log") => log_bench(secs),
        Some("rollcheck") => tracecheck::rollcheck(&args[2]),
        Some("rollcheck-seqstore") => tracecheck::rollcheck_seqstore(&args[2]),
        Some("tracecheck") => {
            let drop = args.get(4).is_some_and(|a| a == "--drop-dir-fsync");
            let lost = tracecheck::tracecheck(&args[2], &args[3], drop)?;
            println!("{lost} acknowledged flushes would lose a file or bytes");
            Ok(())
        }
        _ => anyhow::bail!(
            "usage: seqstore-raft-bench log [SECS] | rollcheck[-seqstore] DIR | tracecheck TRACE DIR [--drop-dir-fsync]"
        ),
    }
}
