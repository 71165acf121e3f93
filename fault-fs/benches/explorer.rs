//! Crash images checked per second on a toy append-only log: records are `len u32 LE` +
//! payload + `sum u32 LE` (a byte-sum checksum), fdatasync every 4 records, the checker parses
//! the log from the start and requires every acknowledged record back intact.
//!
//! Run: `cargo bench -p seqstore-fault-fs --bench explorer`; criterion's `thrpt` line is images/s.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fault_fs::{explore, CrashCtx, ExploreConfig, FaultFs, Journal, Model, Report};
use std::hint::black_box;

const RECORDS: usize = 48;
const SYNC_EVERY: usize = 4;

fn record(i: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..40 + (i * 97) % 1200)
        .map(|k| (i * 31 + k) as u8)
        .collect();
    let sum: u32 = payload.iter().map(|&b| u32::from(b)).sum();
    let mut r = (payload.len() as u32).to_le_bytes().to_vec();
    r.extend_from_slice(&payload);
    r.extend_from_slice(&sum.to_le_bytes());
    r
}

/// Appends record `i`; syncs (and, the first time, syncs the directory) every SYNC_EVERY.
fn append(fs: &FaultFs, &i: &usize, j: &mut Journal<usize>) -> Result<(), String> {
    let f = fs
        .open("log", OpenOptions::read_write_create())
        .map_err(|e| e.to_string())?;
    let end = f.len().map_err(|e| e.to_string())?;
    f.write_all_at(&record(i), end).map_err(|e| e.to_string())?;
    if (i + 1) % SYNC_EVERY == 0 {
        f.sync_data().map_err(|e| e.to_string())?;
        if i + 1 == SYNC_EVERY {
            fs.sync_dir("").map_err(|e| e.to_string())?;
        }
        j.note(fs, i + 1);
    }
    Ok(())
}

/// Recovery: parse records until the first incomplete or corrupt one.
fn check(img: &FaultFs, cx: &CrashCtx<'_, usize>) -> Result<(), String> {
    let acked = cx.events.last().copied().unwrap_or(0);
    let f = match img.open("log", OpenOptions::read_only()) {
        Ok(f) => f,
        Err(_) if acked == 0 => return Ok(()),
        Err(e) => return Err(format!("log missing after {acked} acked: {e}")),
    };
    let len = f.len().map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; len as usize];
    f.read_exact_at(&mut buf, 0).map_err(|e| e.to_string())?;
    let (mut off, mut n) = (0usize, 0usize);
    while off + 4 <= buf.len() {
        let l = u32::from_le_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
        let Some(rec) = buf.get(off..off + 8 + l) else {
            break;
        };
        if rec != record(n).as_slice() {
            break;
        }
        off += 8 + l;
        n += 1;
    }
    if n < acked {
        return Err(format!("{n} records recovered, {acked} acked"));
    }
    Ok(())
}

fn run(model: Model) -> Report {
    let mut cfg = ExploreConfig::new(model);
    cfg.seed = 1;
    let steps: Vec<usize> = (0..RECORDS).collect();
    explore(&cfg, &steps, append, check)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("explorer");
    for model in Model::ALL {
        let r = run(model);
        assert!(r.is_clean(), "{r}");
        println!(
            "{model}: {} ops, {} crash points, {} images in {:.1?} = {:.0} images/s",
            r.ops, r.crash_points, r.images, r.elapsed, r.images_per_s
        );
        g.throughput(Throughput::Elements(r.images as u64));
        g.bench_function(format!("append_log_{model}"), |b| {
            b.iter(|| black_box(run(model)))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
