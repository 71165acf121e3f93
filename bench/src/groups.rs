//! The measurements, in the order they run.

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use host_fs::{HostFs, SystemClock};
use store_core::{Config, SharedStore, Store, SyncPolicy};

use crate::mem::MEMORY;
use crate::nats::{NATS, NATS_CELLS};
use crate::peers::{Baseline, Fjall, OkayWal};
use crate::reads::{BATCH, READS, READ_CELLS};
use crate::report::{BenchReport, Goal, Table, Unit};
use crate::util::{dir_size, thread_cpu_ns, Ctx, Rng};
use crate::BenchOpts;

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
pub(crate) const NOSYNC_ENGINES: &[&str] =
    &["seqstore", "baseline", "okaywal", "fjall", "fjall_manual"];
#[cfg(feature = "guest")]
pub(crate) const NOSYNC_ENGINES: &[&str] = &[
    "seqstore",
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
    GuestStore::open_dir) is not measured in this build: append_nosync_msgs_per_s.guest and \
    recover_rebuild_s_per_gib.guest are null. TODO: build with `--features guest` (needs \
    wasm-host to build and `rustup target add wasm32-wasip2`); the lead's `seqstore bench` \
    enables it once wasm-host is done.";

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
) -> Result<wasm_host::GuestStore> {
    let cfg = Config {
        sync,
        ..Config::default()
    };
    let g = if wasi {
        wasm_host::GuestStore::open_dir(path, cfg, Box::new(SystemClock))
    } else {
        let fs = HostFs::create(path).with_context(|| format!("guest root {}", path.display()))?;
        wasm_host::GuestStore::from_fs(fs, cfg, Box::new(SystemClock))
    };
    g.with_context(|| format!("open guest store {}", path.display()))
}

pub(crate) fn open_store(path: &Path, sync: SyncPolicy) -> Result<Store<HostFs>> {
    let fs = HostFs::create(path).with_context(|| format!("store root {}", path.display()))?;
    let cfg = Config {
        sync,
        ..Config::default()
    };
    Store::open_with_clock(fs, cfg, Box::new(SystemClock))
        .with_context(|| format!("open store {}", path.display()))
}

/// The 1-minute load average (Linux), if readable.
fn loadavg() -> Option<f64> {
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
             on busy CPUs do not wait (on this machine: 70 µs with a spinner on the same CPU, \
             4 ms without). Single-thread fsync cells then measure the tick; seqstore_64 / \
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
        wasm_host::warm_up().context("wasm guest warm-up")?;
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
        // seen on this machine: 0.6k-1.6k/s with the probe at ~4 ms or changing, 5-8k/s with
        // it fast, while seqstore_64 moves far less
        notes.push(format!(
            "vs_nats_always64 was measured with the fsync probe {state}: NATS always_64 is the \
             cell that moves most with the host's fsync state (5-10x lower than with a fast \
             probe), so take that ratio from a run whose probe says fast"
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

/// Every table of the report, empty, in the order of the report.
fn new_tables() -> [Table; 13] {
    let nosync = Table::new(
        NOSYNC,
        "append, no sync (msgs/s)",
        Unit::PerSec,
        &[
            "seqstore",
            "baseline",
            "okaywal",
            "fjall",
            "guest",
            "guest_wasi",
            "fjall_manual",
        ],
    );
    let every = Table::new(
        EVERY,
        "append, sync every 1000 (msgs/s)",
        Unit::PerSec,
        EVERY_ENGINES,
    )
    .fsync_bound();
    let always = Table::new(
        ALWAYS,
        "append, durable before return (msgs/s)",
        Unit::PerSec,
        &[
            "seqstore_1",
            "seqstore_16",
            "seqstore_64",
            "baseline_1",
            "fdatasync_probe_per_s",
        ],
    )
    .fsync_bound()
    .label("seqstore", "embedded");
    let nats = Table::new(
        NATS,
        "NATS JetStream, durable publish (publish + PubAck) (msgs/s)",
        Unit::PerSec,
        NATS_CELLS,
    )
    .fsync_bound()
    .label("", "server through client (loopback)");
    let memory = Table::new(
        MEMORY,
        "peak RSS of a child: write, sync, reopen, read all (MiB)",
        Unit::MiB,
        &["small", "large", "small_reopen", "large_reopen"],
    );
    let rebuild = Table::new(
        REBUILD,
        "recovery by scanning the blocks (s/GiB, warm)",
        Unit::SecPerGib,
        &["seqstore", "guest", "guest_wasi"],
    );
    let index = Table::new(
        INDEX,
        "recovery from index.db (ms)",
        Unit::Ms,
        &[SMALL, BIG],
    );
    let purge = Table::new(PURGE, "purge (ms)", Unit::Ms, &[SMALL, BIG]);
    let index_cpu = Table::new(
        INDEX_CPU,
        "recovery from index.db, on-CPU time only (ms)",
        Unit::Ms,
        &[SMALL, BIG],
    );
    let purge_cpu = Table::new(
        PURGE_CPU,
        "purge, on-CPU time only (ms)",
        Unit::Ms,
        &[SMALL, BIG],
    );
    let get = Table::new(
        GET,
        "get by random sequence, warm (msgs/s)",
        Unit::PerSec,
        &["seqstore", "seqstore_cache_64mib", "seqstore_no_cache"],
    );
    let reads = Table::new(
        READS,
        "issue #15 reads on a warm stream from index.db (µs per call)",
        Unit::Us,
        READ_CELLS,
    );
    let batch = Table::new(
        BATCH,
        "get_batch of 100 from random sequences, warm 1M stream (msgs/s)",
        Unit::PerSec,
        &["seqstore", "guest"],
    );
    [
        nosync, every, always, nats, rebuild, index, purge, get, memory, index_cpu, purge_cpu,
        reads, batch,
    ]
}

fn goals(tables: &[Table]) -> Vec<Goal> {
    let m = |t: &str, c: &str| tables.iter().find(|x| x.key == t).and_then(|x| x.median(c));
    let ratio = |t: &str, a: &str, b: &str| Some(m(t, a)? / m(t, b)?);
    // two cells of different tables
    let cross = |(ta, a): (&str, &str), (tb, b): (&str, &str)| Some(m(ta, a)? / m(tb, b)?);
    let paired = |t: &str, a: &str, b: &str| -> Option<(f64, f64, f64)> {
        let t = tables.iter().find(|x| x.key == t)?;
        let sa = &t.cells.iter().find(|c| c.name == a)?.samples;
        let sb = &t.cells.iter().find(|c| c.name == b)?.samples;
        if sa.is_empty() || sa.len() != sb.len() {
            return None;
        }
        let r: Vec<f64> = sa.iter().zip(sb).map(|(x, y)| x / y).collect();
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some((crate::util::median(&r)?, lo, hi))
    };
    vec![
        Goal {
            name: "nosync_vs_baseline",
            what: "no sync: seqstore / baseline",
            value: ratio(NOSYNC, "seqstore", "baseline"),
            op: ">=",
            paired: paired(NOSYNC, "seqstore", "baseline"),
            // issue #19's figure (0.5 before it)
            target: 0.7,
        },
        Goal {
            name: "nosync_vs_okaywal",
            what: "no sync: seqstore / okaywal",
            value: ratio(NOSYNC, "seqstore", "okaywal"),
            op: ">=",
            paired: paired(NOSYNC, "seqstore", "okaywal"),
            // issue #19: not slower than the WAL a user would pick instead (an earlier
            // target of 1.5 was judged out of reach: README)
            target: 1.0,
        },
        Goal {
            name: "nosync_vs_fjall",
            what: "no sync: seqstore / fjall",
            value: ratio(NOSYNC, "seqstore", "fjall"),
            op: ">=",
            paired: paired(NOSYNC, "seqstore", "fjall"),
            target: 8.0,
        },
        Goal {
            name: "every1000_vs_baseline",
            what: "sync every 1000: seqstore / baseline",
            value: ratio(EVERY, "seqstore", "baseline"),
            op: ">=",
            paired: paired(EVERY, "seqstore", "baseline"),
            target: 0.8,
        },
        Goal {
            name: "always1_vs_fdatasync",
            what: "sync always: seqstore_1 / fdatasync probe",
            value: ratio(ALWAYS, "seqstore_1", "fdatasync_probe_per_s"),
            op: ">=",
            paired: paired(ALWAYS, "seqstore_1", "fdatasync_probe_per_s"),
            target: 0.9,
        },
        Goal {
            name: "group64_vs_1",
            what: "sync always: seqstore_64 / seqstore_1",
            value: ratio(ALWAYS, "seqstore_64", "seqstore_1"),
            op: ">=",
            paired: paired(ALWAYS, "seqstore_64", "seqstore_1"),
            target: 10.0,
        },
        Goal {
            // issue #16: 64 consumers acking at once share the group commit's fsyncs
            name: "acks64_vs_1",
            what: "consumer acks, sync always: acks_64 / acks_1",
            value: ratio(crate::acks::ACKS, "acks_64", "acks_1"),
            op: ">=",
            paired: paired(crate::acks::ACKS, "acks_64", "acks_1"),
            target: 10.0,
        },
        Goal {
            // embedded against a server through its client: says what it compares
            name: "vs_nats_always64",
            what: "seqstore_64 embedded / NATS always_64",
            value: cross((ALWAYS, "seqstore_64"), (NATS, "always_64")),
            op: ">=",
            paired: None,
            target: 20.0,
        },
        Goal {
            name: "rebuild_s_per_gib",
            what: "open without index.db, warm (s/GiB)",
            value: m(REBUILD, "seqstore"),
            op: "<=",
            paired: None,
            // issue #19's figure (0.5 before it)
            target: 0.4,
        },
        Goal {
            name: "index_1m_vs_1k",
            what: "open from index.db: 1M / 1k messages",
            value: ratio(INDEX, BIG, SMALL),
            op: "<=",
            paired: paired(INDEX, BIG, SMALL),
            target: 2.0,
        },
        Goal {
            name: "purge_1m_vs_1k",
            what: "purge: 1M / 1k messages",
            value: ratio(PURGE, BIG, SMALL),
            op: "<=",
            paired: paired(PURGE, BIG, SMALL),
            target: 2.0,
        },
        Goal {
            name: "seq_from_time_1m_vs_1k",
            what: "seq_from_time: 1M / 1k messages",
            value: ratio(READS, "seq_from_time_1m", "seq_from_time_1k"),
            op: "<=",
            paired: paired(READS, "seq_from_time_1m", "seq_from_time_1k"),
            target: 2.0,
        },
        Goal {
            name: "num_pending_1m_vs_1k",
            what: "num_pending (orders.eu.*): 1M / 1k messages",
            value: ratio(READS, "num_pending_1m", "num_pending_1k"),
            op: "<=",
            paired: paired(READS, "num_pending_1m", "num_pending_1k"),
            target: 2.0,
        },
        Goal {
            name: "filtered_state_1m_vs_1k",
            what: "filtered_state (one subject of 64): 1M / 1k messages",
            value: ratio(READS, "filtered_state_1m", "filtered_state_1k"),
            op: "<=",
            paired: paired(READS, "filtered_state_1m", "filtered_state_1k"),
            target: 2.0,
        },
        Goal {
            name: "guest_batch_vs_native",
            what: "get_batch of 100: guest / seqstore",
            value: ratio(BATCH, "guest", "seqstore"),
            op: ">=",
            paired: paired(BATCH, "guest", "seqstore"),
            target: 0.6,
        },
        Goal {
            name: "get_random_per_s",
            what: "random gets on a warm 1M stream (msgs/s)",
            value: m(GET, "seqstore"),
            op: ">=",
            paired: None,
            target: 1e6,
        },
        Goal {
            name: "memory_large_vs_small",
            what: "peak RSS: 4N / N messages (N = mem_msgs)",
            value: ratio(MEMORY, "large", "small"),
            op: "<=",
            paired: None,
            target: 1.3,
        },
        // The wasm guest against the native store (issue #5); `None` without the `guest`
        // feature.
        Goal {
            name: "guest_nosync_vs_native",
            what: "no sync: guest / seqstore",
            value: ratio(NOSYNC, "guest", "seqstore"),
            op: ">=",
            paired: paired(NOSYNC, "guest", "seqstore"),
            target: 0.6,
        },
        Goal {
            // s/GiB: native over guest is the guest's speed relative to native
            name: "guest_rebuild_vs_native",
            what: "rebuild speed: guest / seqstore (seqstore s/GiB / guest s/GiB)",
            value: ratio(REBUILD, "seqstore", "guest"),
            op: ">=",
            paired: paired(REBUILD, "seqstore", "guest"),
            target: 0.5,
        },
    ]
}

/// Median µs of write 128 B + fdatasync on a fresh file (one untimed round first).
fn fsync_probe(ctx: &mut Ctx<'_>, opts: &BenchOpts) -> Result<Option<f64>> {
    let dir = ctx.tempdir("probe")?;
    let mut f = File::create(dir.path().join("probe")).context("create probe file")?;
    f.write_all(&ctx.payload)?;
    f.sync_data()?;
    let mut lat = Vec::with_capacity(opts.probe_iters as usize);
    let t0 = Instant::now();
    for _ in 0..opts.probe_iters {
        let t = Instant::now();
        f.write_all(&ctx.payload)?;
        f.sync_data()?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        if t0.elapsed().as_secs_f64() > opts.probe_max_secs {
            break;
        }
    }
    drop(f);
    ctx.finish_dir(dir)?;
    Ok(crate::util::median(&lat))
}

/// N appends, no fsync; msgs/s up to the last append.
fn nosync_cell(ctx: &mut Ctx<'_>, engine: &str, n: u64) -> Result<f64> {
    let dir = ctx.tempdir(engine)?;
    let p = dir.path();
    let payload = &ctx.payload;
    let v = match engine {
        "seqstore" => {
            let mut s = open_store(p, SyncPolicy::Never)?;
            let t = Instant::now();
            for i in 0..n {
                s.append(ctx.subject(i), b"", payload)?;
            }
            let v = rate(n, t.elapsed());
            drop(s);
            v
        }
        "baseline" => {
            let mut b = Baseline::create(p)?;
            let t = Instant::now();
            for _ in 0..n {
                b.append(payload)?;
            }
            let v = rate(n, t.elapsed());
            drop(b);
            v
        }
        "okaywal" => {
            let w = OkayWal::create(p)?;
            let mut e = w.entry()?;
            let t = Instant::now();
            for _ in 0..n {
                e.write_chunk(payload)?;
            }
            let v = rate(n, t.elapsed());
            // abandoned, not committed: nothing of it needs to reach the disk
            e.rollback()?;
            w.shutdown()?;
            v
        }
        #[cfg(feature = "guest")]
        "guest" | "guest_wasi" => {
            let mut g = open_guest(p, SyncPolicy::Never, engine == "guest_wasi")?;
            let t = Instant::now();
            for i in 0..n {
                g.append(ctx.subject(i), b"", payload)?;
            }
            let v = rate(n, t.elapsed());
            drop(g);
            v
        }
        "fjall" | "fjall_manual" => {
            let mut f = Fjall::create(p, engine == "fjall_manual")?;
            let t = Instant::now();
            for _ in 0..n {
                f.append(payload)?;
            }
            let v = rate(n, t.elapsed());
            drop(f);
            v
        }
        _ => bail!("unknown engine {engine}"),
    };
    ctx.finish_dir(dir)?;
    Ok(v)
}

/// N appends with a durable sync after every `batch` (the clock includes the last sync).
fn every_cell(ctx: &mut Ctx<'_>, engine: &str, n: u64, batch: u64) -> Result<f64> {
    let dir = ctx.tempdir(engine)?;
    let p = dir.path();
    let payload = &ctx.payload;
    let v = match engine {
        "seqstore" => {
            let mut s = open_store(p, SyncPolicy::Never)?;
            let t = Instant::now();
            for i in 0..n {
                s.append(ctx.subject(i), b"", payload)?;
                if (i + 1) % batch == 0 || i + 1 == n {
                    s.sync()?;
                }
            }
            let v = rate(n, t.elapsed());
            drop(s);
            v
        }
        "baseline" => {
            let mut b = Baseline::create(p)?;
            let t = Instant::now();
            for i in 0..n {
                b.append(payload)?;
                if (i + 1) % batch == 0 || i + 1 == n {
                    b.sync()?;
                }
            }
            rate(n, t.elapsed())
        }
        "okaywal" => {
            let w = OkayWal::create(p)?;
            let t = Instant::now();
            w.append_committed(payload, n, batch)?;
            let v = rate(n, t.elapsed());
            w.shutdown()?;
            v
        }
        "fjall" => {
            let mut f = Fjall::create(p, false)?;
            let t = Instant::now();
            for i in 0..n {
                f.append(payload)?;
                if (i + 1) % batch == 0 || i + 1 == n {
                    f.sync()?;
                }
            }
            let v = rate(n, t.elapsed());
            drop(f);
            v
        }
        _ => bail!("unknown engine {engine}"),
    };
    ctx.finish_dir(dir)?;
    Ok(v)
}

/// Durable appends for `secs` seconds or `max` fsyncs, whichever comes first (one untimed
/// append first: it creates the block file and its directory entry).
fn always_cell(ctx: &mut Ctx<'_>, cell: &str, secs: f64, max: u64) -> Result<f64> {
    let dir = ctx.tempdir(cell)?;
    let p = dir.path();
    let payload = &ctx.payload;
    let dur = Duration::from_secs_f64(secs);
    let v = match cell {
        "fdatasync_probe_per_s" => {
            let mut f = File::create(p.join("probe"))?;
            f.write_all(payload)?;
            f.sync_data()?;
            let (t, mut n) = (Instant::now(), 0u64);
            while n < max && t.elapsed() < dur {
                f.write_all(payload)?;
                f.sync_data()?;
                n += 1;
            }
            rate(n, t.elapsed())
        }
        "seqstore_1" => {
            let mut s = open_store(p, SyncPolicy::Always)?;
            s.append(ctx.subject(0), b"", payload)?;
            let (t, mut n) = (Instant::now(), 0u64);
            while n < max && t.elapsed() < dur {
                s.append(ctx.subject(n), b"", payload)?;
                n += 1;
            }
            rate(n, t.elapsed())
        }
        "baseline_1" => {
            let mut b = Baseline::create(p)?;
            b.append(payload)?;
            b.sync()?;
            let (t, mut n) = (Instant::now(), 0u64);
            while n < max && t.elapsed() < dur {
                b.append(payload)?;
                b.sync()?;
                n += 1;
            }
            rate(n, t.elapsed())
        }
        "seqstore_16" | "seqstore_64" => {
            let threads: u64 = if cell == "seqstore_16" { 16 } else { 64 };
            let store = SharedStore::new(open_store(p, SyncPolicy::Always)?);
            store.append(ctx.subject(0), b"", payload)?;
            let subjects = &ctx.subjects;
            // each writer stops after `max` appends: about `max` group fsyncs in all
            let t = Instant::now();
            let n = std::thread::scope(|sc| -> Result<u64> {
                let hs: Vec<_> = (0..threads)
                    .map(|k| {
                        let st = store.clone();
                        sc.spawn(move || -> Result<u64> {
                            let mut n = 0u64;
                            while n < max && t.elapsed() < dur {
                                let subj = &subjects[((k + n * threads) % 64) as usize];
                                st.append(subj, b"", payload)?;
                                n += 1;
                            }
                            Ok(n)
                        })
                    })
                    .collect();
                let mut total = 0;
                for h in hs {
                    total += h.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
                }
                Ok(total)
            })?;
            rate(n, t.elapsed())
        }
        _ => bail!("unknown cell {cell}"),
    };
    ctx.finish_dir(dir)?;
    Ok(v)
}

/// Appends `n` messages with `SyncPolicy::Never` and returns the open store.
fn write_stream(ctx: &Ctx<'_>, path: &Path, n: u64) -> Result<Store<HostFs>> {
    let mut s = open_store(path, SyncPolicy::Never)?;
    for i in 0..n {
        s.append(ctx.subject(i), b"", &ctx.payload)?;
    }
    Ok(s)
}

/// A stream written, closed (index.db) and reopened from its index; every block read.
fn closed_stream(ctx: &mut Ctx<'_>, path: &Path, n: u64) -> Result<Store<HostFs>> {
    write_stream(ctx, path, n)?.close()?;
    ctx.bytes_written += dir_size(path);
    let mut s = open_store(path, SyncPolicy::Never)?;
    ensure!(
        s.recovery_report().used_index,
        "reopen after close did not use index.db: {:?}",
        s.recovery_report().index_rejected
    );
    warm(&mut s, n)?;
    Ok(s)
}

/// Reads every block (a get every few hundred sequences): entries loaded, pages cached.
fn warm(s: &mut Store<HostFs>, n: u64) -> Result<()> {
    let step = (n / 4096).max(1) as usize;
    for seq in (1..=n).step_by(step) {
        black_box(s.get(seq)?);
    }
    black_box(s.get(n)?);
    Ok(())
}

fn seconds_per_gib(d: Duration, bytes: u64) -> f64 {
    d.as_secs_f64() / (bytes as f64 / (1u64 << 30) as f64)
}

/// The tables that share the big stream: rebuild, index, gets, purge.
#[allow(clippy::too_many_arguments)]
fn streams(
    ctx: &mut Ctx<'_>,
    opts: &BenchOpts,
    rebuild: &mut Table,
    [index, index_cpu]: [&mut Table; 2],
    get: &mut Table,
    [purge, purge_cpu]: [&mut Table; 2],
    [reads, batch]: [&mut Table; 2],
    notes: &mut Vec<String>,
) -> Result<()> {
    let big = ctx.tempdir("big")?;
    let bp = big.path().to_path_buf();
    ctx.tick(&format!(
        "write a {} message stream (dropped without close)",
        opts.big_msgs
    ));
    drop(write_stream(ctx, &bp, opts.big_msgs)?);
    let big_bytes = dir_size(&bp);
    ctx.bytes_written += big_bytes;

    if opts.runs(REBUILD) {
        ctx.tick(&format!(
            "{REBUILD}: {} timed opens of {} MiB without index.db",
            opts.open_reps,
            big_bytes >> 20
        ));
        for r in 0..=opts.open_reps {
            let t = Instant::now();
            let s = open_store(&bp, SyncPolicy::Never)?;
            let d = t.elapsed();
            ensure!(
                !s.recovery_report().used_index && s.state().msgs == opts.big_msgs,
                "rebuild open: unexpected state {:?}",
                s.state()
            );
            drop(s);
            if r > 0 {
                // the first open warms the page cache
                rebuild.push("seqstore", seconds_per_gib(d, big_bytes));
            }
            #[cfg(feature = "guest")]
            for (cell, wasi) in [("guest", false), ("guest_wasi", true)] {
                let t = Instant::now();
                let mut g = open_guest(&bp, SyncPolicy::Never, wasi)?;
                let d = t.elapsed();
                let st = g.state()?;
                ensure!(
                    !g.recovery_report().used_index && st.msgs == opts.big_msgs,
                    "{cell} rebuild open: unexpected state {st:?}"
                );
                drop(g);
                if r > 0 {
                    rebuild.push(cell, seconds_per_gib(d, big_bytes));
                }
            }
        }
        notes.push(format!(
            "the rebuild stream is the big stream: {} messages, {} MiB of blocks",
            opts.big_msgs,
            big_bytes >> 20
        ));
    }

    ctx.tick(&format!(
        "close the big stream (index.db), write a {} message stream",
        opts.small_msgs
    ));
    open_store(&bp, SyncPolicy::Never)?.close()?;
    let small = ctx.tempdir("small")?;
    let sp = small.path().to_path_buf();
    write_stream(ctx, &sp, opts.small_msgs)?.close()?;
    ctx.bytes_written += dir_size(&sp);

    if opts.runs(INDEX) {
        ctx.tick(&format!(
            "{INDEX}: {} timed opens each, alternating",
            opts.open_reps
        ));
        for _ in 0..opts.open_reps {
            for (cell, p, n) in [(SMALL, &sp, opts.small_msgs), (BIG, &bp, opts.big_msgs)] {
                let c = thread_cpu_ns();
                let t = Instant::now();
                let s = open_store(p, SyncPolicy::Never)?;
                let d = t.elapsed();
                index_cpu.push(cell, (thread_cpu_ns() - c) as f64 / 1e6);
                ensure!(
                    s.recovery_report().used_index && s.state().msgs == n,
                    "index open: index.db not used ({:?})",
                    s.recovery_report().index_rejected
                );
                drop(s);
                index.push(cell, d.as_secs_f64() * 1e3);
            }
        }
    }
    if opts.runs(READS) {
        let (small, big) = (
            (sp.as_path(), opts.small_msgs),
            (bp.as_path(), opts.big_msgs),
        );
        crate::reads::run_reads(ctx, opts, reads, small, big)?;
    }
    if opts.runs(BATCH) {
        crate::reads::run_batch(ctx, opts, batch, (bp.as_path(), opts.big_msgs))?;
    }
    small.close()?;

    // the big stream, opened from index.db and warmed: the get table, then the first purge
    let mut s = open_store(&bp, SyncPolicy::Never)?;
    warm(&mut s, opts.big_msgs)?;
    if opts.runs(GET) {
        ctx.tick(&format!(
            "{GET}: {} rounds of {} random gets",
            opts.reps, opts.gets
        ));
        let mut rng = Rng::new(0x6e75_6d62_6572);
        let seqs: Vec<u64> = (0..opts.gets)
            .map(|_| rng.below(opts.big_msgs) + 1)
            .collect();
        let mut sum = 0u64;
        // "seqstore": a block cache that holds the whole stream (what a user who wants fast
        // random reads configures); the default 64 MiB cache and no cache, for comparison.
        // Alternating; each cell first runs an untimed round so its cache settles.
        let whole = (big_bytes + (64 << 20)).next_multiple_of(64 << 20);
        let cells = [
            ("seqstore", whole),
            ("seqstore_cache_64mib", 64 << 20),
            ("seqstore_no_cache", 0),
        ];
        for _ in 0..opts.reps {
            for (cell, cache) in cells {
                s.set_block_cache(cache);
                for &q in seqs.iter().take(200_000) {
                    sum += s.get(q)?.payload.len() as u64;
                }
                let t = Instant::now();
                for &q in &seqs {
                    sum += s.get(q)?.payload.len() as u64;
                }
                get.push(cell, rate(opts.gets, t.elapsed()));
            }
        }
        black_box(sum);
        notes.push(format!(
            "gets: `seqstore` runs with Config::block_cache = {} MiB (the stream is {} MiB); \
             seqstore_cache_64mib is the default cache, seqstore_no_cache reads every record \
             with pread",
            whole >> 20,
            big_bytes >> 20
        ));
    }

    if opts.runs(PURGE) {
        let mut first_big = Some(s);
        let rounds = opts.purge_small_reps.max(opts.purge_big_reps);
        for r in 0..rounds {
            if r < opts.purge_small_reps {
                ctx.tick(&format!(
                    "{PURGE} round {}/{}: {} messages",
                    r + 1,
                    rounds,
                    opts.small_msgs
                ));
                let d = ctx.tempdir("purge-small")?;
                let mut st = closed_stream(ctx, d.path(), opts.small_msgs)?;
                let c = thread_cpu_ns();
                let t = Instant::now();
                let n = st.purge()?;
                purge.push(SMALL, t.elapsed().as_secs_f64() * 1e3);
                purge_cpu.push(SMALL, (thread_cpu_ns() - c) as f64 / 1e6);
                ensure!(n == opts.small_msgs, "purge removed {n}");
                drop(st);
                d.close()?;
            }
            if r < opts.purge_big_reps {
                ctx.tick(&format!(
                    "{PURGE} round {}/{}: {} messages",
                    r + 1,
                    rounds,
                    opts.big_msgs
                ));
                let (mut st, d) = match first_big.take() {
                    Some(st) => (st, None),
                    None => {
                        let d = ctx.tempdir("purge-big")?;
                        let st = closed_stream(ctx, d.path(), opts.big_msgs)?;
                        (st, Some(d))
                    }
                };
                let c = thread_cpu_ns();
                let t = Instant::now();
                let n = st.purge()?;
                purge.push(BIG, t.elapsed().as_secs_f64() * 1e3);
                purge_cpu.push(BIG, (thread_cpu_ns() - c) as f64 / 1e6);
                ensure!(n == opts.big_msgs, "purge removed {n}");
                drop(st);
                if let Some(d) = d {
                    d.close()?;
                }
            }
        }
    } else {
        drop(s);
    }
    big.close()?;
    Ok(())
}
