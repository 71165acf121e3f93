//! The measurements, in the order they run.

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use seqstore_core::{Config, SharedStore, Store, SyncPolicy};
use seqstore_fs::{HostFs, SystemClock};

use crate::mem::MEMORY;
use crate::nats::{NATS, NATS_CELLS};
use crate::peers::{Baseline, Fjall, OkayWal};
use crate::reads::{BATCH, MISS, READS, READ_CELLS};
use crate::report::{BenchReport, Goal, Table, Unit};
use crate::util::{dir_size, thread_cpu_ns, Ctx, Rng};
use crate::BenchOpts;

pub(crate) mod cells;
mod goals;
use cells::*;
use goals::{goals, new_tables};

pub(crate) const NOSYNC: &str = "append_nosync_msgs_per_s";
pub(crate) const EVERY: &str = "append_every1000_msgs_per_s";
pub(crate) const ALWAYS: &str = "append_always_msgs_per_s";
pub(crate) const REBUILD: &str = "recover_rebuild_s_per_gib";
pub(crate) const INDEX: &str = "recover_index_ms";
pub(crate) const PURGE: &str = "purge_ms";
pub(crate) const GET: &str = "get_random_msgs_per_s";
const INDEX_CPU: &str = "recover_index_cpu_ms";
const PURGE_CPU: &str = "purge_cpu_ms";
/// The tables that share the big stream.
pub(crate) const STREAM_TABLES: &[&str] = &[REBUILD, INDEX, GET, PURGE, READS, BATCH];

/// Measured in this order in every round (A B A B …).
#[cfg(not(feature = "guest"))]
pub(crate) const NOSYNC_ENGINES: &[&str] = &[
    "seqstore",
    "seqstore_encrypted",
    "seqstore_xchacha",
    "baseline",
    "okaywal",
    "fjall",
    "fjall_manual",
];
#[cfg(feature = "guest")]
pub(crate) const NOSYNC_ENGINES: &[&str] = &[
    "seqstore",
    "seqstore_encrypted",
    "seqstore_xchacha",
    "baseline",
    "okaywal",
    "fjall",
    "fjall_manual",
    "guest",
    "guest_wasi",
];
pub(crate) const EVERY_ENGINES: &[&str] = &["seqstore", "baseline", "okaywal", "fjall"];
const ALWAYS_CELLS: &[&str] = &[
    "fdatasync_probe_per_s",
    "seqstore_1",
    "baseline_1",
    "seqstore_16",
    "seqstore_64",
];
const SMALL: &str = "msgs_1k";
const BIG: &str = "msgs_1m";
#[cfg(not(feature = "guest"))]
const GUEST_TODO: &str = "guest (the wasm guest on the host's filesystem, wasm-guest/host's \
    GuestStore) is not measured in this build: the guest cells are null. Build with the \
    default features (feature `guest`) to measure it.";

/// The wasm guest on the host's real filesystem. `wasi == false` ("guest"): the host serves
/// the guest's `fs` import with host-fs (cap-std) on `path`, as `GuestStore::from_fs` does for
/// any `Fs`; `wasi == true` ("guest_wasi"): the guest gets `path` as a WASI preopen and runs
/// host-fs's WASI backend over wasmtime-wasi (`GuestStore::open_dir`), which caps a file read
/// at 64 KiB and runs file I/O on a blocking thread.
#[cfg(feature = "guest")]
pub(crate) fn open_guest(
    path: &Path,
    sync: SyncPolicy,
    wasi: bool,
) -> Result<seqstore_wasm::GuestStore> {
    let cfg = Config::default().with_sync(sync);
    let g = if wasi {
        seqstore_wasm::GuestStore::open_dir(path, cfg, Box::new(SystemClock))
    } else {
        let fs = HostFs::create(path).with_context(|| format!("guest root {}", path.display()))?;
        seqstore_wasm::GuestStore::from_fs(fs, cfg, Box::new(SystemClock))
    };
    g.with_context(|| format!("open guest store {}", path.display()))
}

pub(crate) fn open_store(path: &Path, sync: SyncPolicy) -> Result<Store<HostFs>> {
    open_store_with(path, Config::default().with_sync(sync))
}

/// [`open_store`] with a configuration of its own.
pub(crate) fn open_store_with(path: &Path, cfg: Config) -> Result<Store<HostFs>> {
    let fs = HostFs::create(path).with_context(|| format!("store root {}", path.display()))?;
    Store::builder(fs)
        .config(cfg)
        .clock(SystemClock)
        .open()
        .with_context(|| format!("open store {}", path.display()))
}

/// A store encrypted at rest with `cipher` under a fixed bench key (no compression: the bench
/// payload is random) on `path`, through the crypt layer.
pub(crate) fn open_encrypted_store(
    path: &Path,
    sync: SyncPolicy,
    cipher: seqstore_core::Cipher,
) -> Result<Store<seqstore_core::CryptFs<HostFs>>> {
    let fs = HostFs::create(path).with_context(|| format!("store root {}", path.display()))?;
    let cfg = Config::default()
        .with_sync(sync)
        .with_encryption(Some(seqstore_core::Encryption::new(cipher, [0x5e; 32])));
    Store::builder(fs)
        .config(cfg)
        .clock(SystemClock)
        .open_layered()
        .with_context(|| format!("open encrypted store {}", path.display()))
}

/// The 1-minute load average (Linux), if readable.
pub(crate) fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

fn total_steps(o: &BenchOpts) -> usize {
    let mut n = 2; // probes
    if o.runs(NOSYNC) {
        n += o.reps * NOSYNC_ENGINES.len();
    }
    if o.runs(EVERY) {
        n += o.reps * EVERY_ENGINES.len();
    }
    if o.runs(ALWAYS) {
        n += o.reps * ALWAYS_CELLS.len();
    }
    if o.runs(NATS) {
        n += 1 + o.nats_reps * NATS_CELLS.len(); // start the servers, the rounds
    }
    if o.runs(crate::acks::ACKS) {
        n += o.reps * crate::acks::ACK_CELLS.len();
    }
    if o.runs(MEMORY) {
        n += 2; // the two children
    }
    if STREAM_TABLES.iter().any(|t| o.runs(t)) {
        n += 2; // write the big stream, close it and write the small one
        n += [REBUILD, INDEX, GET, READS, BATCH]
            .iter()
            .filter(|t| o.runs(t))
            .count();
        if o.runs(PURGE) {
            n += o.purge_small_reps + o.purge_big_reps;
        }
    }
    n
}

/// Refuses options that cannot run, a plan over the byte budget, and a memory child that
/// ended up here; returns the plan's estimated bytes.
fn check_plan(opts: &BenchOpts) -> Result<u64> {
    // a memory child whose binary does not call `child_main` would run the whole bench again,
    // and start children of its own
    ensure!(
        std::env::var_os(crate::CHILD_ENV).is_none(),
        "{} is set: this is a memory child, and its main did not call seqstore_bench::child_main",
        crate::CHILD_ENV
    );
    ensure!(
        opts.reps >= 1 && opts.nats_reps >= 1,
        "reps and nats_reps must be at least 1"
    );
    ensure!(opts.sync_batch >= 1, "sync_batch must be at least 1");
    ensure!(
        opts.small_msgs >= 1 && opts.big_msgs >= 1 && opts.open_reps >= 1,
        "stream sizes and open_reps must be at least 1"
    );
    ensure!(
        opts.purge_small_reps >= 1 && opts.purge_big_reps >= 1,
        "purge reps must be at least 1"
    );
    ensure!(opts.payload_len >= 1, "payload_len must be at least 1");
    let est = opts.estimated_write_bytes();
    if est > opts.max_write_bytes {
        bail!(
            "this plan would write about {} MiB, above the limit of {} MiB (several GB push \
             the host into its slow-fsync state for minutes): use smaller sizes",
            est >> 20,
            opts.max_write_bytes >> 20
        );
    }
    Ok(est)
}

/// The notes on the host (load, fsync state) and on how the no-sync cells are taken.
fn host_notes(
    notes: &mut Vec<String>,
    load: (Option<f64>, Option<f64>),
    probes: (Option<f64>, Option<f64>),
) {
    if load.0.unwrap_or(0.0).max(load.1.unwrap_or(0.0)) > 1.5 {
        notes.push(format!(
            "other processes were using the CPUs (load average {:.1} at the start, {:.1} at \
             the end, on {} CPUs): CPU-bound cells are slower than on a quiet host, and \
             ratios between engines less steady",
            load.0.unwrap_or(0.0),
            load.1.unwrap_or(0.0),
            std::thread::available_parallelism().map_or(0, |n| n.get())
        ));
    }
    if [probes.0, probes.1]
        .iter()
        .any(|p| p.is_some_and(|us| (3000.0..5000.0).contains(&us)))
    {
        notes.push(
            "an fsync probe took ~4 ms, one 250 Hz timer tick: in this state of the VM a thread \
             that blocks on I/O while its CPU idles is woken only at the next tick, so every \
             single-threaded blocking fsync costs ~4 ms whatever the disk does, while threads \
             on busy CPUs do not wait. Single-thread fsync cells then measure the tick; seqstore_64 / \
             seqstore_1 is inflated, and recover_index_ms / purge_ms are dominated by their \
             2-3 directory/file fsyncs, which hides their CPU cost (the 1M/1k ratios look \
             better than on a quiet host)"
                .into(),
        );
    }
    if let (Some(a), Some(b)) = probes {
        if a.max(b) > 2.0 * a.min(b) {
            notes.push(format!(
                "the fsync latency changed during the run ({a:.0} µs at the start, {b:.0} µs \
                 at the end): the host changed state, so the fsync-bound ratios (sync every \
                 1000, sync always) are less trustworthy than usual; run again"
            ));
        }
    }
    notes.push(
        "no-sync cells stop the clock after the last append; whatever an engine still buffers \
         is written after (okaywal: all messages are chunks of one entry, rolled back after the \
         clock stops, since okaywal cannot append without a commit fsync)"
            .into(),
    );
    notes.push(
        "fjall runs with its default durability (every insert written to the OS); \
         fjall_manual is fjall with manual_journal_persist(true), for reference (no goal)"
            .into(),
    );
}

/// `reps` rounds of `cells` in turn (A B A B …) into `table`, if the table is selected.
fn rounds(
    ctx: &mut Ctx<'_>,
    opts: &BenchOpts,
    table: &mut Table,
    cells: &[&str],
    mut cell: impl FnMut(&mut Ctx<'_>, &str) -> Result<f64>,
) -> Result<()> {
    if !opts.runs(table.key) {
        return Ok(());
    }
    for r in 0..opts.reps {
        for &c in cells {
            ctx.tick(&format!("{} round {}/{}: {c}", table.key, r + 1, opts.reps));
            let v = cell(ctx, c)?;
            table.push(c, v);
        }
    }
    Ok(())
}

pub(crate) fn run(opts: &BenchOpts, progress: &dyn Fn(&str)) -> Result<BenchReport> {
    let est = check_plan(opts)?;
    let base = opts.dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&base).with_context(|| format!("create {}", base.display()))?;
    let load_start = loadavg();
    let io_start = crate::util::proc_io();
    let mut ctx = Ctx::new(base, progress, total_steps(opts), opts.payload_len);
    ctx.say(&format!(
        "seqstore bench: {} steps, about {} MiB of writes, in {}",
        ctx.total_steps,
        est >> 20,
        ctx.base.display()
    ));
    let mut notes = Vec::new();

    let [mut nosync, mut every, mut always, mut nats, mut rebuild, mut index, mut purge, mut get, mut memory, mut index_cpu, mut purge_cpu, mut reads, mut batch] =
        new_tables();

    #[cfg(feature = "guest")]
    {
        ctx.say("compiling the guest component (untimed)");
        seqstore_wasm::warm_up().context("wasm guest warm-up")?;
    }
    ctx.tick("fsync probe (start)");
    let probe_start = fsync_probe(&mut ctx, opts)?;

    rounds(&mut ctx, opts, &mut nosync, NOSYNC_ENGINES, |ctx, e| {
        nosync_cell(ctx, e, opts.nosync_msgs)
    })?;
    rounds(&mut ctx, opts, &mut every, EVERY_ENGINES, |ctx, e| {
        every_cell(ctx, e, opts.every_msgs, opts.sync_batch)
    })?;
    rounds(&mut ctx, opts, &mut always, ALWAYS_CELLS, |ctx, c| {
        always_cell(ctx, c, opts.always_secs, opts.always_max_syncs)
    })?;
    let mut acks = crate::acks::new_table();
    rounds(
        &mut ctx,
        opts,
        &mut acks,
        crate::acks::ACK_CELLS,
        |ctx, c| crate::acks::ack_cell(ctx, c, opts.always_secs, opts.always_max_syncs),
    )?;
    if opts.runs(NATS) {
        crate::nats::run_table(&mut ctx, opts, &mut nats, &mut notes)?;
    }
    if STREAM_TABLES.iter().any(|t| opts.runs(t)) {
        streams(
            &mut ctx,
            opts,
            &mut rebuild,
            [&mut index, &mut index_cpu],
            &mut get,
            [&mut purge, &mut purge_cpu],
            [&mut reads, &mut batch],
            &mut notes,
        )?;
    }

    ctx.tick("fsync probe (end)");
    let probe_end = fsync_probe(&mut ctx, opts)?;
    let load_end = loadavg();
    // after the end probe: the children write and sync up to 5 x mem_msgs messages, more than
    // the byte budget of the fsync-bound part allows
    if opts.runs(MEMORY) {
        crate::mem::run_table(&mut ctx, opts, &mut memory, &mut notes)?;
    }
    host_notes(&mut notes, (load_start, load_end), (probe_start, probe_end));
    let state = crate::fsync_probe_state(probe_start, probe_end);
    if nats.median("always_64").is_some() && state != "fast" {
        // NATS' single-connection durable publishes follow the host's fsync state much more
        // than seqstore_64 does
        notes.push(format!(
            "vs_nats_always64 was measured with the fsync probe {state}: NATS always_64 is the \
             cell that moves most with the host's fsync state, so take that ratio from a run whose probe says fast"
        ));
    }

    let tables = vec![
        nosync, every, always, nats, rebuild, index, purge, get, memory, index_cpu, purge_cpu,
        acks, reads, batch,
    ];
    let goals = goals(&tables);
    Ok(BenchReport {
        opts: opts.clone(),
        fsync_probe_us: (probe_start, probe_end),
        tables,
        goals,
        notes,
        #[cfg(not(feature = "guest"))]
        todo: vec![GUEST_TODO.into()],
        #[cfg(feature = "guest")]
        todo: Vec::new(),
        elapsed_s: ctx.started.elapsed().as_secs_f64(),
        bytes_written: match (io_start, crate::util::proc_io()) {
            (Some(a), Some(b)) => b.0.saturating_sub(a.0),
            _ => ctx.bytes_written,
        },
        disk_bytes: match (io_start, crate::util::proc_io()) {
            (Some(a), Some(b)) => Some(b.1.saturating_sub(a.1)),
            _ => None,
        },
        loadavg: (load_start, load_end),
    })
}
