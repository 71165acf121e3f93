//! One stream size of `--scale`, in a child process of its own (this binary again, with
//! [`SCALE_CHILD_ENV`] set), so that its peak resident set (VmHWM) is that size's alone.
//!
//! The child writes the stream, rebuilds it, opens it from index.db, reads it and purges it,
//! and prints one line: [`RESULT_PREFIX`] and a JSON object ([`SizeResult`]).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use seqstore_core::{Store, SyncPolicy};
use seqstore_fs::HostFs;
use serde_json::{json, Value};

use crate::groups::open_store;
use crate::mem::vmhwm_kib;
use crate::util::{dir_size, read_and_crc_all, Rng};

/// Set in a scale child's environment: `N:GETS:CALLS:DIR` (messages, random gets, calls per
/// read, the directory to create the store in).
pub const SCALE_CHILD_ENV: &str = "SEQSTORE_BENCH_SCALE_CHILD";
/// The child's one line of result on stdout, before its JSON.
pub(crate) const RESULT_PREFIX: &str = "seqstore-bench-scale-child: ";
/// A read cell (gets, num_pending, filtered_state, and the untimed warm-up before each) stops
/// after this many seconds even if its calls are not done (the figure is then over the calls
/// made): a read that scans blocks must not stall the run.
const READ_CAP_SECS: f64 = 20.0;
/// Timed opens from index.db (the median is reported).
const INDEX_OPENS: usize = 3;
/// Messages appended (and synced) after index.db before the crash of `crash_opens`.
const CRASH_TAIL: u64 = 1000;

/// What one child measured on one stream size.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SizeResult {
    pub(crate) msgs: u64,
    /// Bytes of the store directory after the write.
    pub(crate) block_bytes: u64,
    /// Appends (`SyncPolicy::Never`) and the drop that writes the buffer out, msgs/s.
    pub(crate) write_per_s: f64,
    /// VmHWM after the write phase, MiB.
    pub(crate) rss_write_mib: f64,
    /// VmHWM after the rebuild (and the close that writes index.db), MiB.
    pub(crate) rss_rebuild_mib: f64,
    /// VmHWM of the whole child, MiB.
    pub(crate) rss_peak_mib: f64,
    /// Open without index.db (rebuild from the blocks), s.
    pub(crate) rebuild_s: f64,
    /// Read and crc32 every byte of the same files, s.
    pub(crate) read_limit_s: f64,
    /// Bytes of index.db after the close that follows the rebuild.
    pub(crate) index_bytes: u64,
    /// Open from index.db, ms (median).
    pub(crate) index_open_ms: f64,
    /// Random gets, default block cache, msgs/s.
    pub(crate) gets_per_s: f64,
    /// `num_pending` from a random sequence, filter `orders.eu.*`, µs per call.
    pub(crate) num_pending_us: f64,
    /// `filtered_state` of one subject of 64 from a random sequence, µs per call.
    pub(crate) filtered_state_us: f64,
    /// Open after a crash that lost nothing synced ([`CRASH_TAIL`] appends since index.db),
    /// median of 3, ms.
    pub(crate) crash_open_ms: f64,
    /// `purge` of the warm stream opened from index.db, ms.
    pub(crate) purge_ms: f64,
    /// The child's wall time, s.
    pub(crate) child_s: f64,
}

const FIELDS: &[&str] = &[
    "msgs",
    "block_bytes",
    "write_per_s",
    "rss_write_mib",
    "rss_rebuild_mib",
    "rss_peak_mib",
    "rebuild_s",
    "read_limit_s",
    "index_bytes",
    "index_open_ms",
    "crash_open_ms",
    "gets_per_s",
    "num_pending_us",
    "filtered_state_us",
    "purge_ms",
    "child_s",
];

impl SizeResult {
    fn values(&self) -> [f64; 16] {
        [
            self.msgs as f64,
            self.block_bytes as f64,
            self.write_per_s,
            self.rss_write_mib,
            self.rss_rebuild_mib,
            self.rss_peak_mib,
            self.rebuild_s,
            self.read_limit_s,
            self.index_bytes as f64,
            self.index_open_ms,
            self.crash_open_ms,
            self.gets_per_s,
            self.num_pending_us,
            self.filtered_state_us,
            self.purge_ms,
            self.child_s,
        ]
    }

    /// The result as a JSON object (every field a number).
    pub(crate) fn to_json(&self) -> Value {
        let m = FIELDS
            .iter()
            .zip(self.values())
            .map(|(k, v)| (k.to_string(), json!(v)));
        Value::Object(m.collect())
    }

    /// Parses [`SizeResult::to_json`]'s object.
    pub(crate) fn from_json(v: &Value) -> Option<SizeResult> {
        let f = |k: &str| v.get(k)?.as_f64();
        Some(SizeResult {
            msgs: f("msgs")? as u64,
            block_bytes: f("block_bytes")? as u64,
            write_per_s: f("write_per_s")?,
            rss_write_mib: f("rss_write_mib")?,
            rss_rebuild_mib: f("rss_rebuild_mib")?,
            rss_peak_mib: f("rss_peak_mib")?,
            rebuild_s: f("rebuild_s")?,
            read_limit_s: f("read_limit_s")?,
            index_bytes: f("index_bytes")? as u64,
            index_open_ms: f("index_open_ms")?,
            crash_open_ms: f("crash_open_ms")?,
            gets_per_s: f("gets_per_s")?,
            num_pending_us: f("num_pending_us")?,
            filtered_state_us: f("filtered_state_us")?,
            purge_ms: f("purge_ms")?,
            child_s: f("child_s")?,
        })
    }

    /// Rebuild rate over the read limit's rate (the `rebuild_vs_read_limit` of the default run).
    pub(crate) fn rebuild_vs_read_limit(&self) -> f64 {
        self.read_limit_s / self.rebuild_s.max(1e-9)
    }
}

/// A child's parameters, from [`SCALE_CHILD_ENV`].
#[derive(Clone, Debug)]
pub(crate) struct Params {
    pub(crate) msgs: u64,
    pub(crate) gets: u64,
    pub(crate) calls: u64,
    pub(crate) dir: PathBuf,
}

impl Params {
    pub(crate) fn spec(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.msgs,
            self.gets,
            self.calls,
            self.dir.display()
        )
    }

    fn parse(spec: &str) -> Result<Params> {
        let w: Vec<&str> = spec.splitn(4, ':').collect();
        ensure!(
            w.len() == 4,
            "{SCALE_CHILD_ENV}={spec:?}: want N:GETS:CALLS:DIR"
        );
        let num = |s: &str| -> Result<u64> {
            s.parse()
                .with_context(|| format!("{SCALE_CHILD_ENV}: {s:?} is not a number"))
        };
        let p = Params {
            msgs: num(w[0])?,
            gets: num(w[1])?,
            calls: num(w[2])?,
            dir: PathBuf::from(w[3]),
        };
        ensure!(p.msgs >= 1 && p.gets >= 1 && p.calls >= 1, "{spec:?}: zero");
        Ok(p)
    }
}

/// If this process is a scale child ([`SCALE_CHILD_ENV`] set), runs it and prints its result
/// line; `None`: not a child.
pub(crate) fn child_run() -> Option<Result<()>> {
    let spec = std::env::var(SCALE_CHILD_ENV).ok()?;
    Some(Params::parse(&spec).and_then(|p| run_size(&p)).map(|r| {
        println!("{RESULT_PREFIX}{}", r.to_json());
    }))
}

/// Parses a child's result line (anywhere in `stdout`).
pub(crate) fn parse_result(stdout: &str) -> Option<SizeResult> {
    stdout.lines().find_map(|l| {
        let rest = l.split_once(RESULT_PREFIX)?.1;
        SizeResult::from_json(&serde_json::from_str(rest).ok()?)
    })
}

/// The bench's message: 128 random bytes from the run's seed (as `Ctx`), 64 subjects of 16 B.
fn message() -> (Vec<u8>, Vec<String>) {
    let mut rng = Rng::new(0x5eed_0bad_cafe);
    let payload = (0..128).map(|_| rng.next_u64() as u8).collect();
    let subjects = (0..64).map(|i| format!("orders.eu.{i:06}")).collect();
    (payload, subjects)
}

/// The store on `dir` with `n` messages; `index`: whether it must come from index.db.
fn open_checked(dir: &Path, n: u64, index: bool) -> Result<Store<HostFs>> {
    let s = open_store(dir, SyncPolicy::Never)?;
    let r = s.recovery_report();
    ensure!(
        r.used_index == index && s.state().msgs == n,
        "{}: used_index {} (wanted {index}), {} messages (wanted {n}); rejected: {:?}",
        dir.display(),
        r.used_index,
        s.state().msgs,
        r.index_rejected
    );
    Ok(s)
}

/// The child's work, in order: write (dropped without close), rebuild and read limit, close
/// (index.db), opens from index.db, gets, reads, purge.
fn run_size(p: &Params) -> Result<SizeResult> {
    let t0 = Instant::now();
    let (dir, n) = (p.dir.as_path(), p.msgs);
    let say = |what: &str| eprintln!("  {n}: {:>7.1}s {what}", t0.elapsed().as_secs_f64());
    let (payload, subjects) = message();
    let mut s = open_store(dir, SyncPolicy::Never)?;
    let t = Instant::now();
    for i in 0..n {
        s.append(&subjects[(i % 64) as usize], b"", &payload)?;
    }
    drop(s);
    let write_per_s = n as f64 / t.elapsed().as_secs_f64();
    let rss_write_mib = vmhwm_kib()? as f64 / 1024.0;
    let block_bytes = dir_size(dir);
    say(&format!("written, {} MiB; rebuild", block_bytes >> 20));
    let (rebuild_s, read_limit_s) = rebuild(dir, n)?;
    let rss_rebuild_mib = vmhwm_kib()? as f64 / 1024.0;
    // store-core's INDEX_FILE (not exported)
    let index_bytes = std::fs::metadata(dir.join("index.db")).map_or(0, |m| m.len());
    say("opens from index.db, gets, reads, purge");
    let mut opens = Vec::with_capacity(INDEX_OPENS);
    for _ in 0..INDEX_OPENS {
        let t = Instant::now();
        let s = open_checked(dir, n, true)?;
        opens.push(t.elapsed().as_secs_f64() * 1e3);
        drop(s);
    }
    let crash_open_ms = crash_opens(dir, n, &payload, &subjects)?;
    let mut s = open_checked(dir, n + CRASH_TAIL, true)?;
    let gets_per_s = gets(&mut s, n, p.gets)?;
    let num_pending_us = reads(&mut s, n, p.calls, true)?;
    let filtered_state_us = reads(&mut s, n, p.calls, false)?;
    let t = Instant::now();
    let purged = s.purge()?;
    let purge_ms = t.elapsed().as_secs_f64() * 1e3;
    ensure!(
        purged == n + CRASH_TAIL,
        "purge removed {purged} of {}",
        n + CRASH_TAIL
    );
    drop(s);
    say("done");
    Ok(SizeResult {
        msgs: n,
        block_bytes,
        write_per_s,
        rss_write_mib,
        rss_rebuild_mib,
        rss_peak_mib: vmhwm_kib()? as f64 / 1024.0,
        rebuild_s,
        read_limit_s,
        index_bytes,
        index_open_ms: crate::util::median(&opens).unwrap_or(0.0),
        crash_open_ms,
        gets_per_s,
        num_pending_us,
        filtered_state_us,
        purge_ms,
        child_s: t0.elapsed().as_secs_f64(),
    })
}

/// Opens after a crash that lost nothing synced: index.db from the last close, then
/// [`CRASH_TAIL`] appends and a sync, and the process killed (no close). Made in this process
/// by putting the earlier index.db back after a close (a store left open holds its lock, which
/// refuses the next open here): the directory is then the one such a crash leaves, but for the
/// newest block's preallocated zeros, which close cuts. Median of [`INDEX_OPENS`] opens, ms;
/// each must have read only the tail.
fn crash_opens(dir: &Path, n: u64, payload: &[u8], subjects: &[String]) -> Result<f64> {
    // store-core's INDEX_FILE (not exported)
    let index = dir.join("index.db");
    let before = std::fs::read(&index).context("read index.db")?;
    let mut s = open_checked(dir, n, true)?;
    for i in 0..CRASH_TAIL {
        s.append(&subjects[(i % 64) as usize], b"", payload)?;
    }
    s.sync()?;
    s.close()?;
    std::fs::write(&index, &before).context("put index.db back")?;
    let mut opens = Vec::with_capacity(INDEX_OPENS);
    for _ in 0..INDEX_OPENS {
        let t = Instant::now();
        let s = open_store(dir, SyncPolicy::Never)?;
        opens.push(t.elapsed().as_secs_f64() * 1e3);
        let r = s.recovery_report();
        ensure!(
            r.used_index && r.tail_scanned > 0 && s.state().msgs == n + CRASH_TAIL,
            "crash open of {}: {r:?}, {} messages",
            dir.display(),
            s.state().msgs
        );
        drop(s);
    }
    // the store as the rest of the run wants it: index.db current
    open_store(dir, SyncPolicy::Never)?.close()?;
    Ok(crate::util::median(&opens).unwrap_or(0.0))
}

/// The rebuild (open without index.db) and the read limit (read and crc32 every byte) on the
/// same files, both after an untimed read that warms the page cache as far as it holds the
/// stream; then the rebuilt store is closed (index.db written). Seconds each.
fn rebuild(dir: &Path, n: u64) -> Result<(f64, f64)> {
    read_and_crc_all(dir).context("warm-up read")?;
    let t = Instant::now();
    let s = open_checked(dir, n, false)?;
    let rebuild_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (_, crc) = read_and_crc_all(dir).context("read limit")?;
    let read_limit_s = t.elapsed().as_secs_f64();
    black_box(crc);
    s.close()?;
    Ok((rebuild_s, read_limit_s))
}

/// Random gets (sequences drawn before the clock starts): a tenth of `gets` untimed, then up
/// to `gets` timed or [`READ_CAP_SECS`], whichever comes first; msgs/s.
fn gets(s: &mut Store<HostFs>, n: u64, gets: u64) -> Result<f64> {
    let mut rng = Rng::new(0x6e75_6d62_6572);
    let seqs: Vec<u64> = (0..gets).map(|_| rng.below(n) + 1).collect();
    let mut sum = 0u64;
    let mut timed = |seqs: &[u64]| -> Result<f64> {
        let (t, mut done) = (Instant::now(), 0u64);
        for chunk in seqs.chunks(1024) {
            for &q in chunk {
                sum += s.get(q)?.payload.len() as u64;
            }
            done += chunk.len() as u64;
            if t.elapsed().as_secs_f64() > READ_CAP_SECS {
                break;
            }
        }
        Ok(done as f64 / t.elapsed().as_secs_f64())
    };
    timed(&seqs[..seqs.len() / 10])?;
    let rate = timed(&seqs)?;
    black_box(sum);
    Ok(rate)
}

/// µs per call of `num_pending` (filter `orders.eu.*`: every subject) or `filtered_state`
/// (one literal subject of 64), each from a random sequence; up to `calls` calls after a
/// tenth as many untimed, or [`READ_CAP_SECS`].
fn reads(s: &mut Store<HostFs>, n: u64, calls: u64, pending: bool) -> Result<f64> {
    let mut rng = Rng::new(if pending { 0x0005_eed3 } else { 0x0005_eed4 });
    let seqs: Vec<u64> = (0..calls).map(|_| rng.below(n) + 1).collect();
    let call = |s: &mut Store<HostFs>, q: u64| -> Result<u64> {
        Ok(match pending {
            true => s.num_pending(q, "orders.eu.*", false)?.0,
            false => s.filtered_state("orders.eu.000007", q)?.msgs,
        })
    };
    let mut sum = 0u64;
    for &q in seqs.iter().take(seqs.len() / 10) {
        sum += call(s, q)?;
    }
    let (t, mut done) = (Instant::now(), 0u64);
    for &q in &seqs {
        sum += call(s, q)?;
        done += 1;
        if t.elapsed().as_secs_f64() > READ_CAP_SECS {
            break;
        }
    }
    black_box(sum);
    Ok(t.elapsed().as_secs_f64() * 1e6 / done as f64)
}
