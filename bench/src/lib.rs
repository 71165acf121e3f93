//! `seqstore-bench`: seqstore measured against a naive log, okaywal, fjall, the wasm guest and
//! NATS JetStream, in one process.
//!
//! Everything is a **ratio measured in the same run**: fsync latency on a shared or virtual
//! machine changes by an order of magnitude with the host's load, so absolute times from
//! different runs do not compare. The harness therefore
//! - alternates implementations inside each table (A B A B …, `reps` rounds), each engine in
//!   its own fresh tempdir that is removed right after, and reports medians;
//! - measures the raw fsync latency at the start and at the end (`fsync_probe_us`), so a
//!   reader can see whether the host changed state during the run;
//! - keeps the bytes written below [`BenchOpts::max_write_bytes`] (1 GiB by default: a few GB
//!   push the host into its slow-fsync state for minutes) and reports what it wrote.
//!
//! ```no_run
//! let report = seqstore_bench::run(&seqstore_bench::BenchOpts::quick(), &|s| eprintln!("{s}"))?;
//! println!("{}", report.table());
//! println!("{}", report.to_json());
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! What each number is (128-byte payloads, 16-byte subjects, one process):
//! - `append_nosync_msgs_per_s`: N appends, no fsync, clock stopped after the last append
//!   (whatever the engine still buffers is written after). seqstore: `SyncPolicy::Never`;
//!   baseline: `BufWriter` records; okaywal: chunks of one entry, rolled back after the clock
//!   stops (okaywal has no append without a commit fsync); fjall: `insert` with its default
//!   durability (each insert written to the OS, no fsync); `fjall_manual`: fjall with
//!   `manual_journal_persist(true)` (journal kept in fjall's buffer, like seqstore's), for
//!   reference only.
//! - `append_every1000_msgs_per_s`: N appends, a durable sync after every 1000, clock includes
//!   the last sync. seqstore: `Never` + `Store::sync()`; baseline: flush + `sync_data`;
//!   okaywal: entries of 1000 chunks, `commit`; fjall: `persist(SyncData)`.
//! - `append_always_msgs_per_s`: appends for `always_secs` (or `always_max_syncs` fsyncs,
//!   whichever comes first), each durable before it returns.
//!   `seqstore_1`: `Config::default()` (`SyncPolicy::Always`), one thread; `seqstore_16/64`:
//!   `SharedStore` (group commit) with 16/64 threads; `baseline_1`: record + flush +
//!   `sync_data`; `fdatasync_probe_per_s`: a raw loop of write 128 B + `fdatasync` on one file.
//! - `consumer_acks_always_per_s`: durable consumer acks through `SharedStore`
//!   under `Always` for `always_secs` (or `always_max_syncs` acks per consumer): `acks_1`, one
//!   consumer acking alone; `acks_64`, 64 consumers acking at once (one thread each), whose
//!   journal records share the group commit's fsyncs. Goal `acks64_vs_1` >= 10.
//! - `recover_rebuild_s_per_gib`: a `big_msgs` stream dropped without `close` (no index.db),
//!   then `Store::open` timed with a warm page cache (one untimed open first), seconds per GiB
//!   of block files; `read_crc32`, after each open, the least a recovery that checks its data
//!   must do on the same files: read every byte in order and crc32 it. Goal
//!   `rebuild_vs_read_limit` (the rebuild's rate over that one's) >= 0.6. `seqstore` rebuilds
//!   with the default `rebuild_threads`; `seqstore_1_thread` on the opening thread alone, as
//!   the wasm guest does (`guest_rebuild_vs_native` compares those two). `seqstore_cold` and
//!   `read_crc32_cold`: the same two with the page cache emptied before each (where the run
//!   may: root on Linux; a note says when it could not).
//! - `recover_index_ms`: `small_msgs` and `big_msgs` streams closed (index.db written), then
//!   `Store::open` timed (alternating small, big).
//! - `purge_ms`: a stream opened from its index.db and warmed (every block read), then
//!   `Store::purge()` timed.
//! - `recover_index_cpu_ms`, `purge_cpu_ms`: the same calls' on-CPU time only (the calling
//!   thread's, from `/proc/thread-self/schedstat`): their own work without the waits for the
//!   disk, whose latency can change by an order of magnitude during a run.
//! - `get_random_msgs_per_s`: `Store::get` of uniformly random sequences on the warm
//!   `big_msgs` stream; `seqstore` with a block cache that holds the stream,
//!   `seqstore_cache_64mib` with the default cache, `seqstore_no_cache` by pread.
//! - `nats_publish_msgs_per_s` (when a `nats-server` is found: [`BenchOpts::nats_server`],
//!   `$NATS_SERVER_BIN`, the PATH): a real nats-server with JetStream on a loopback port and
//!   its own store directory, a file-storage stream, durable publishes through async-nats
//!   (publish, then wait for the PubAck). `always_1`/`always_64`: 1/64 concurrent publishers,
//!   server config `sync_interval: always`; `default_64`: 64 publishers, the default config
//!   (no fsync before the ack); `version`: `nats-server --version`. A **server through a
//!   client over loopback**, next to seqstore **embedded** (`append_always_msgs_per_s`'s
//!   `seqstore_1`/`seqstore_64`): the goal `vs_nats_always64` is their ratio at 64.
//! - `memory_peak_rss_mib`: one child process per stream size (this binary again, see
//!   [`child_main`]) writes `small_msgs` = [`BenchOpts::mem_msgs`] (`large`: 4×) messages to
//!   a store (default `Config`, `SyncPolicy::Never`, 3 subjects), syncs, reopens it (rebuild),
//!   gets every message once, and reports its VmHWM (peak RSS). Runs after the end probe.
//!   `bytes_per_msg`: (large - small) / (3 × small_msgs), what each message costs in memory.
//! - `reads15_us`: the NATS stream reads of `store/query.rs`, µs per call on the warm `small_msgs` (`_1k`) and
//!   `big_msgs` (`_1m`) streams opened from index.db: `seq_from_time` at a random time,
//!   `num_pending` from a random sequence (filter `orders.eu.*`: every subject) and
//!   `filtered_state` from a random sequence (a literal subject, one in 64); `miss_64mib`, in
//!   the same rounds, one dependent load that misses every cache (a pointer chase through a
//!   random cycle over 64 MiB). The goals `num_pending_1m_vs_1k` and
//!   `filtered_state_1m_vs_1k` are ratios of sizes (≤ 2: neither walks the messages);
//!   `seq_from_time_vs_miss` holds the 1M call to 2 misses (its exact answer needs memory that
//!   the 1k stream keeps in the caches, so a ratio of sizes would compare a cache hit with a
//!   miss).
//! - `get_batch_msgs_per_s`: `get_batch` of 100 messages from random sequences of the warm
//!   big stream, native (`seqstore`) and in the wasm guest (`guest`, feature `guest`: one
//!   call into the component per batch); goal `guest_batch_vs_native` ≥ 0.7.
//! - `--scale` ([`run_scale`], a run of its own, not part of `--quick` or CI): the store at
//!   1M, 10M and 100M messages (~20 GB of disk, checked first, deleted after), each size in a
//!   child process of its own (this binary again, [`SCALE_CHILD_ENV`]): write rate, peak RSS
//!   (VmHWM), open from index.db, rebuild against the read limit, random gets (default block
//!   cache), `num_pending` and `filtered_state` from random sequences, purge. Its goals
//!   compare the largest size with the next size down ([`ScaleReport`]); its page is
//!   docs/BENCHMARKS-SCALE.md.
//! - `goals`: the goals' names by outcome (`passed`, `failed`, `not_measured`) and `line`, the
//!   one-line summary the text output ends with ([`goals_line`]).
//!
//! Every store is opened with `seqstore_fs::SystemClock` (a wall-clock timestamp per message, as
//! in production). The guest cells are measured only with the crate feature `guest` (without
//! it they are `null` and the report lists a TODO): `guest` is the wasm guest on the host's
//! real filesystem through its `fs` import (`seqstore_wasm::GuestStore::from_fs` over host-fs on the
//! same kind of directory), `guest_wasi` the same guest on a WASI preopen
//! (`GuestStore::open_dir`, wasmtime-wasi's filesystem), for reference.

#![warn(missing_docs)]

mod acks;
mod groups;
mod markdown;
mod mem;
mod nats;
mod peers;
mod reads;
mod replicated;
mod report;
mod scale;
mod util;

use std::path::PathBuf;

pub use markdown::Machine;
pub use mem::{child_main, ChildCmd, CHILD_ENV};
pub use replicated::{run_replicated, ReplOpts, ReplReport};
pub use report::{fsync_probe_state, goals_line, BenchReport, Goal};
pub use scale::{run_scale, ScaleOpts, ScaleReport, SCALE_CHILD_ENV};
pub use util::median;

/// What to run, and how big.
#[derive(Clone, Debug)]
pub struct BenchOpts {
    /// Label only: the options came from [`BenchOpts::quick`].
    pub quick: bool,
    /// Where the tempdirs go (default: `std::env::temp_dir()`); must be on the real disk, not
    /// tmpfs, or the fsync numbers mean nothing.
    pub dir: Option<PathBuf>,
    /// Rounds of each alternating table (A B A B …).
    pub reps: usize,
    /// Messages per cell of the "no sync" table.
    pub nosync_msgs: u64,
    /// Messages per cell of the "sync every 1000" table.
    pub every_msgs: u64,
    /// Appends between syncs in that table (the key says 1000).
    pub sync_batch: u64,
    /// Seconds per cell of the "sync always" table (each cell runs this long at most)…
    pub always_secs: f64,
    /// … or until it has done about this many fsyncs (single-writer cells: this many
    /// appends; group-commit cells: this many × writers). Each fsync of an append writes
    /// ~8 KiB (the data page and the inode), so on a quiet host (~15k fsyncs/s) the time
    /// bound alone would write ~120 MB per second per cell.
    pub always_max_syncs: u64,
    /// Iterations of the fsync-latency probe at the start and at the end.
    pub probe_iters: u32,
    /// The probe stops early after this many seconds (a busy host: ~4 ms per fsync).
    pub probe_max_secs: f64,
    /// The small stream of the index and purge tables (key `msgs_1k`).
    pub small_msgs: u64,
    /// The big stream of the rebuild, index, get and purge tables (key `msgs_1m`).
    pub big_msgs: u64,
    /// Timed opens per stream (rebuild and index tables).
    pub open_reps: usize,
    /// Purges of a small stream.
    pub purge_small_reps: usize,
    /// Purges of a big stream (each needs a freshly written big stream: the byte budget).
    pub purge_big_reps: usize,
    /// Random gets per timed round.
    pub gets: u64,
    /// Payload bytes (128 unless said).
    pub payload_len: usize,
    /// Run only these tables (names as in the JSON, e.g. `append_nosync_msgs_per_s` or a
    /// prefix such as `purge`); empty: all. Skipped tables are `null` in the JSON.
    pub only: Vec<String>,
    /// Refuse to start if the plan would write more than this (default 1 GiB). The memory
    /// rows, which run after the end probe, are not counted.
    pub max_write_bytes: u64,
    /// The nats-server for the NATS rows (`--nats-server`); `None`: `$NATS_SERVER_BIN`, else
    /// `nats-server` on the PATH, else the rows are skipped (with a note saying so).
    pub nats_server: Option<PathBuf>,
    /// Rounds of the NATS table (fewer than `reps` in the default run: its fsyncs would take
    /// the plan over the byte budget).
    pub nats_reps: usize,
    /// Publishes per round of the NATS `always_1` cell.
    pub nats_msgs_1: u64,
    /// Publishes per round of `always_64` (all publishers together).
    pub nats_msgs_64: u64,
    /// Publishes per round of `default_64`.
    pub nats_default_msgs: u64,
    /// A NATS cell stops after this many seconds even if its publishes are not done.
    pub nats_max_secs: f64,
    /// Messages of the small stream of the memory rows (the large one: 4×).
    pub mem_msgs: u64,
    /// How to start a memory child; `None`: this binary again (its `main` must call
    /// [`child_main`] first).
    pub mem_child: Option<ChildCmd>,
}

impl Default for BenchOpts {
    /// The default run: 5 rounds, bigger cells; about a minute and a half.
    fn default() -> Self {
        BenchOpts {
            quick: false,
            dir: None,
            reps: 5,
            nosync_msgs: 100_000,
            every_msgs: 30_000,
            sync_batch: 1000,
            always_secs: 1.5,
            always_max_syncs: 500,
            probe_iters: 500,
            probe_max_secs: 3.0,
            small_msgs: 1000,
            big_msgs: 1_000_000,
            open_reps: 5,
            purge_small_reps: 5,
            purge_big_reps: 3,
            gets: 1_000_000,
            payload_len: 128,
            only: Vec::new(),
            max_write_bytes: 1 << 30,
            // about 5 s at the rates measured by hand with nats-py (1.2k/s, 2.5k/s, 12k/s),
            // under 2 s at async-nats' (4-5k/s, 7-8k/s, 130k/s); ~60 MiB of fsyncs
            nats_reps: 3,
            nats_msgs_1: 600,
            nats_msgs_64: 1920,
            nats_default_msgs: 6400,
            nats_max_secs: 4.0,
            nats_server: None,
            mem_msgs: 1_000_000,
            mem_child: None,
        }
    }
}

impl BenchOpts {
    /// `--quick`: fewer rounds, smaller cells, one big purge; about 20 seconds.
    pub fn quick() -> Self {
        BenchOpts {
            quick: true,
            reps: 3,
            nosync_msgs: 50_000,
            every_msgs: 20_000,
            always_secs: 0.5,
            always_max_syncs: 600,
            probe_iters: 200,
            probe_max_secs: 1.5,
            open_reps: 5,
            purge_small_reps: 3,
            purge_big_reps: 1,
            gets: 300_000,
            // ~2000 publishes at one publisher in all (about 6 s of NATS rows at the rates
            // measured by hand; a cell stops after 2 s whatever the host does)
            nats_reps: 3,
            nats_msgs_1: 700,
            nats_msgs_64: 1920,
            nats_default_msgs: 6400,
            nats_max_secs: 2.0,
            // as the default run: a smaller stream fits the default entry cache (1M
            // entries) whole and cannot show whether memory is bounded (~3 s)
            mem_msgs: 1_000_000,
            ..BenchOpts::default()
        }
    }

    /// A tiny configuration for tests: every table runs, in a couple of seconds. Its
    /// numbers mean nothing.
    pub fn tiny() -> Self {
        BenchOpts {
            quick: true,
            reps: 1,
            nosync_msgs: 2000,
            every_msgs: 2000,
            always_secs: 0.02,
            always_max_syncs: 20,
            probe_iters: 5,
            probe_max_secs: 0.2,
            small_msgs: 50,
            big_msgs: 3000,
            open_reps: 1,
            purge_small_reps: 1,
            purge_big_reps: 1,
            gets: 2000,
            nats_reps: 1,
            nats_msgs_1: 20,
            nats_msgs_64: 128,
            nats_default_msgs: 128,
            nats_max_secs: 2.0,
            mem_msgs: 2000,
            ..BenchOpts::default()
        }
    }

    /// Whether table `name` is selected by [`BenchOpts::only`].
    pub fn runs(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| name.starts_with(o.as_str()))
    }

    /// A generous estimate of the bytes the plan sends to the disk (checked against
    /// [`BenchOpts::max_write_bytes`] before anything runs). What is deleted before
    /// writeback (the no-sync cells of seqstore and the baseline) does not reach the disk;
    /// what is fsynced does, at least a page per fsync.
    pub fn estimated_write_bytes(&self) -> u64 {
        // seqstore's record: 36 bytes of framing + subject + payload; the peers write less
        let rec = (36 + 16 + self.payload_len) as u64;
        let reps = self.reps as u64;
        const SYNC_BYTES: u64 = 8 << 10; // one data page + the inode, per fsync
        let mut b = 2 * self.probe_iters as u64 * SYNC_BYTES;
        if self.runs(groups::NOSYNC) {
            // fjall persists its journal on drop (okaywal's entry is rolled back, seqstore's
            // and the baseline's files are deleted before writeback)
            b += reps * 2 * self.nosync_msgs * rec;
        }
        if self.runs(groups::EVERY) {
            b += reps * groups::EVERY_ENGINES.len() as u64 * self.every_msgs * rec;
        }
        if self.runs(groups::ALWAYS) {
            b += reps * 5 * self.always_max_syncs * SYNC_BYTES;
        }
        if self.runs(acks::ACKS) {
            // an fsync per ack alone, fewer than that again for the groups of 64; the untimed
            // fill: the messages, and a ~96-byte journal record per delivery
            b += reps * 2 * self.always_max_syncs * SYNC_BYTES;
            b += reps * self.always_max_syncs * (rec + 65 * 96);
        }
        if self.runs(nats::NATS) {
            // every `always` publish fsynced (at most), the default ones written once
            let r = self.nats_reps as u64;
            b += r * ((self.nats_msgs_1 + self.nats_msgs_64) * SYNC_BYTES);
            b += r * self.nats_default_msgs * rec;
        }
        if groups::STREAM_TABLES.iter().any(|t| self.runs(t)) {
            let big_streams = if self.runs(groups::PURGE) {
                self.purge_big_reps.max(1) as u64
            } else {
                1
            };
            b += big_streams * self.big_msgs * rec;
            b += (self.purge_small_reps as u64 + 1) * self.small_msgs * rec;
        }
        b
    }
}

/// Runs the benchmark. `progress` gets one line per step ("[3/41]  12.5s append_nosync rep
/// 1/3: okaywal") and a few notes; nothing is printed otherwise.
pub fn run(opts: &BenchOpts, progress: &dyn Fn(&str)) -> anyhow::Result<BenchReport> {
    groups::run(opts, progress)
}

#[cfg(test)]
mod tests;
