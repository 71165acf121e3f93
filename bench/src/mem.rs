//! Memory rows: the peak resident set of a process that writes, reopens and reads a stream,
//! one child process per stream size so that each peak is its own (VmHWM never goes down).
//!
//! The child is the current binary re-executed with [`CHILD_ENV`] set; a binary that runs the
//! bench calls [`child_main`] first thing in `main` (`seqstore-bench`
//! does). Tests re-execute the test binary on one test instead ([`crate::BenchOpts::mem_child`]).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, ensure, Context, Result};
use seqstore_core::{Config, Store, SyncPolicy};
use seqstore_fs::{HostFs, SystemClock};

use crate::report::Table;
use crate::util::Ctx;
use crate::BenchOpts;

/// The JSON key of the memory table.
pub(crate) const MEMORY: &str = "memory_peak_rss_mib";
/// Set in a child's environment: `N:DIR` (messages, the directory to create the store in).
pub const CHILD_ENV: &str = "SEQSTORE_BENCH_MEMORY_CHILD";
/// The child's one line of result on stdout: `…vmhwm_kib=A reopen_kib=B entry_bytes=C` (A the
/// whole run's peak; B the peak from the reopen on, after a reset of the peak, or A where
/// Linux refuses the reset; C the heap bytes a message of the sealed blocks' loaded entries
/// after the reads).
const RESULT_PREFIX: &str = "seqstore-bench-memory-child: vmhwm_kib=";
const REOPEN_KEY: &str = "reopen_kib=";
const ENTRY_KEY: &str = "entry_bytes=";

/// How a child is started: a program and the arguments before nothing else (`CHILD_ENV` says
/// what to do).
#[derive(Clone, Debug)]
pub struct ChildCmd {
    /// The program (default: `std::env::current_exe()`).
    pub exe: PathBuf,
    /// Its arguments (default: none).
    pub args: Vec<String>,
}

/// `VmHWM` (peak resident set) in KiB from the text of `/proc/self/status`.
pub(crate) fn parse_vmhwm_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut w = line["VmHWM:".len()..].split_whitespace();
    let n = w.next()?.parse().ok()?;
    (w.next() == Some("kB")).then_some(n)
}

/// If this process is a memory child (`CHILD_ENV` set) or a `--scale` child
/// ([`crate::SCALE_CHILD_ENV`] set), runs it and returns its exit code; the caller returns that
/// from `main`. `None`: not a child, go on.
pub fn child_main() -> Option<ExitCode> {
    // `--scale`'s children come through here too (`crate::scale::SCALE_CHILD_ENV`)
    Some(match crate::scale::child_run().or_else(child_run)? {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seqstore-bench memory child: {e:#}");
            ExitCode::FAILURE
        }
    })
}

/// [`child_main`]'s work: `None` if `CHILD_ENV` is not set; else runs the child and prints its
/// result line.
pub(crate) fn child_run() -> Option<Result<()>> {
    let spec = std::env::var(CHILD_ENV).ok()?;
    Some(run_child(&spec).map(|p| {
        println!(
            "{RESULT_PREFIX}{} {REOPEN_KEY}{} {ENTRY_KEY}{:.3}",
            p.all, p.reopen, p.entry_bytes
        )
    }))
}

/// A child's peaks (KiB).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Peaks {
    /// VmHWM of the whole run.
    pub(crate) all: u64,
    /// VmHWM from the reopen on (reset by `/proc/self/clear_refs` after the write phase).
    pub(crate) reopen: u64,
    /// Heap bytes a message of the sealed blocks' loaded entries, after the reads.
    pub(crate) entry_bytes: f64,
}

/// This process's VmHWM in KiB.
pub(crate) fn vmhwm_kib() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status").context("/proc/self/status")?;
    parse_vmhwm_kib(&status).context("no VmHWM in /proc/self/status")
}

/// Parses a child's result line (anywhere in `stdout`: a test harness prints the test's
/// name before it).
pub(crate) fn parse_result(stdout: &str) -> Option<Peaks> {
    stdout.lines().find_map(|l| {
        let rest = l.split_once(RESULT_PREFIX)?.1;
        let mut w = rest.split_whitespace();
        let all = w.next()?.parse().ok()?;
        let reopen = w.next()?.strip_prefix(REOPEN_KEY)?.parse().ok()?;
        let entry_bytes = w.next()?.strip_prefix(ENTRY_KEY)?.parse().ok()?;
        Some(Peaks {
            all,
            reopen,
            entry_bytes,
        })
    })
}

/// The child's work: a store on host-fs in DIR (default `Config`, `SyncPolicy::Never`, 128 B
/// payloads, 3 subjects), N appends, `sync`, dropped without close; reopened (so the entries
/// are rebuilt from the blocks), every message read once with `get`. Returns its peaks: the
/// whole run's, and the reopen-and-read phase's alone (the peak is reset after the first
/// store is dropped), to tell which phase holds the memory.
fn run_child(spec: &str) -> Result<Peaks> {
    let (n, dir) = spec
        .split_once(':')
        .with_context(|| format!("{CHILD_ENV}={spec:?}: want N:DIR"))?;
    let n: u64 = n
        .parse()
        .with_context(|| format!("{CHILD_ENV}: N = {n:?}"))?;
    let dir = Path::new(dir);
    let open = || -> Result<Store<HostFs>> {
        let fs = HostFs::create(dir).with_context(|| format!("store root {}", dir.display()))?;
        let cfg = Config::default().with_sync(SyncPolicy::Never);
        Ok(Store::builder(fs).config(cfg).clock(SystemClock).open()?)
    };
    let subjects = ["orders.eu.000000", "orders.eu.000001", "orders.eu.000002"];
    let payload = [0x5au8; 128];
    let mut s = open()?;
    for i in 0..n {
        s.append(subjects[(i % 3) as usize], b"", &payload)?;
    }
    s.sync()?;
    drop(s);
    let write_peak = vmhwm_kib()?;
    // "5": reset the peak resident set to the current one (Linux 4.0+)
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let mut s = open()?;
    ensure!(s.state().msgs == n, "reopened with {:?}", s.state());
    let mut sum = 0u64;
    for seq in 1..=n {
        sum += s.get(seq)?.payload.len() as u64;
    }
    black_box(sum);
    let (bytes, msgs) = s.sealed_entry_bytes();
    let entry_bytes = bytes as f64 / msgs.max(1) as f64;
    drop(s);
    let reopen = vmhwm_kib()?;
    Ok(Peaks {
        all: if reset {
            write_peak.max(reopen)
        } else {
            reopen
        },
        reopen,
        entry_bytes,
    })
}

/// Runs one child for `n` messages in a fresh directory under `dir`; its peaks in MiB (whole
/// run, reopen phase) and its entry bytes a message.
pub(crate) fn measure(cmd: &ChildCmd, dir: &Path, n: u64) -> Result<(f64, f64, f64)> {
    let out = Command::new(&cmd.exe)
        .args(&cmd.args)
        .env(CHILD_ENV, format!("{n}:{}", dir.display()))
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("start memory child {}", cmd.exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "memory child ({n} messages) failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let p = parse_result(&stdout)
        .with_context(|| format!("memory child ({n} messages) printed no result: {stdout:?}"))?;
    Ok((
        p.all as f64 / 1024.0,
        p.reopen as f64 / 1024.0,
        p.entry_bytes,
    ))
}

/// The default child: this binary again.
pub(crate) fn default_child() -> Result<ChildCmd> {
    Ok(ChildCmd {
        exe: std::env::current_exe().context("current_exe")?,
        args: Vec::new(),
    })
}

/// The memory table: one child for `mem_msgs` messages (`small`), one for 4× (`large`), each
/// in its own tempdir; a note with the bytes per message the difference implies.
pub(crate) fn run_table(
    ctx: &mut Ctx<'_>,
    opts: &BenchOpts,
    table: &mut Table,
    notes: &mut Vec<String>,
) -> Result<()> {
    let cmd = match &opts.mem_child {
        Some(c) => c.clone(),
        None => default_child()?,
    };
    let n = opts.mem_msgs;
    for (cell, msgs) in [("small", n), ("large", 4 * n)] {
        ctx.tick(&format!(
            "{MEMORY}: {cell}, a child process with {msgs} messages"
        ));
        let dir = ctx.tempdir(&format!("memory-{cell}"))?;
        let (all, reopen, entry_bytes) = measure(&cmd, dir.path(), msgs)?;
        ctx.finish_dir(dir)?;
        table.push(cell, all);
        table.push(&format!("{cell}_reopen"), reopen);
        table.push(&format!("{cell}_entry_bytes_per_msg"), entry_bytes);
    }
    table.extra.push(("small_msgs", n.into()));
    table.extra.push(("large_msgs", (4 * n).into()));
    if let (Some(s), Some(l)) = (table.median("small"), table.median("large")) {
        let per_msg = (l - s) * (1u64 << 20) as f64 / (3 * n) as f64;
        table
            .extra
            .push(("bytes_per_msg", (per_msg.round() as i64).into()));
        notes.push(format!(
            "{MEMORY}: peak RSS (VmHWM) of a child that writes, syncs, reopens (rebuild) and \
             reads every message of a {n} / {} message stream (128 B payloads, 3 subjects): \
             {:.1} bytes per message ((large - small) / {} messages); a store whose memory is \
             bounded keeps this near 0. small_reopen/large_reopen: the peak from the reopen on \
             (reset after the write phase), which tells whether writing or reopening and \
             reading holds the memory",
            4 * n,
            per_msg,
            3 * n
        ));
    }
    Ok(())
}
