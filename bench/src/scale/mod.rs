//! `seqstore-bench --scale`: the store at 10M and 100M messages, a separate run
//! from the default and `--quick` ones (it writes ~20 GB; not run in CI).
//!
//! Each size runs in a child process of its own ([`child`]): it writes the stream (128 B
//! payloads, 64 subjects, `SyncPolicy::Never`), drops it without close, rebuilds it (open
//! without index.db) next to the read limit (read and crc32 every block byte), closes it,
//! opens it from index.db, times random gets, `num_pending` and `filtered_state` from random
//! sequences, and purges it; its VmHWM is then that size's peak resident set alone. The
//! parent checks the free space first, gives each child a fresh directory and deletes it after.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::mem::ChildCmd;

mod child;
mod report;

pub use child::SCALE_CHILD_ENV;
pub(crate) use child::{child_run, SizeResult};
pub use report::ScaleReport;

/// Bytes a message takes in the block files: 36 bytes of framing, a 16-byte subject, 128 bytes
/// of payload.
const DISK_BYTES_PER_MSG: u64 = 36 + 16 + 128;

/// What `--scale` runs.
#[derive(Clone, Debug)]
pub struct ScaleOpts {
    /// Stream sizes, each in a child of its own, in this order (default 1M, 10M, 100M). The
    /// goals compare the largest with the next size down (100M with 10M); 1M is there for
    /// reference: below the default entry cache (~1.5M messages) everything stays loaded.
    pub sizes: Vec<u64>,
    /// Where the stores go (`--scale-dir`); `None`: the temp dir, or the cargo target dir this
    /// binary is in, whichever has room.
    pub dir: Option<PathBuf>,
    /// Random gets per size.
    pub gets: u64,
    /// Calls per size of `num_pending` and of `filtered_state` (each capped at 20 s).
    pub calls: u64,
    /// How to start a child; `None`: this binary again.
    pub child: Option<ChildCmd>,
}

impl Default for ScaleOpts {
    fn default() -> Self {
        ScaleOpts {
            sizes: vec![1_000_000, 10_000_000, 100_000_000],
            dir: None,
            gets: 1_000_000,
            calls: 20_000,
            child: None,
        }
    }
}

impl ScaleOpts {
    /// Disk the largest size needs (sizes run one at a time, each directory deleted after):
    /// its block files, 10 % more, and 1 GiB to spare.
    pub fn needed_bytes(&self) -> u64 {
        let n = self.sizes.iter().copied().max().unwrap_or(0);
        let blocks = n.saturating_mul(DISK_BYTES_PER_MSG);
        blocks.saturating_add(blocks / 10).saturating_add(1 << 30)
    }
}

/// Bytes free to an unprivileged user on the filesystem of `p` (statvfs).
fn free_bytes(p: &Path) -> Result<u64> {
    let st = rustix::fs::statvfs(p).with_context(|| format!("statvfs {}", p.display()))?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// The directory the stores go under: `--scale-dir` (created), else the first of the temp dir
/// and the cargo target dir with room; refuses with the free space of each when none has.
fn pick_dir(o: &ScaleOpts) -> Result<PathBuf> {
    let need = o.needed_bytes();
    let candidates: Vec<PathBuf> = match &o.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
            vec![d.clone()]
        }
        None => {
            let exe = std::env::current_exe().context("current_exe")?;
            let target = exe.ancestors().find(|a| a.ends_with("target"));
            std::iter::once(std::env::temp_dir())
                .chain(target.map(Path::to_path_buf))
                .collect()
        }
    };
    let mut seen = Vec::new();
    for c in candidates {
        let free = free_bytes(&c)?;
        if free >= need {
            return Ok(c);
        }
        seen.push(format!("{} has {} MiB free", c.display(), free >> 20));
    }
    bail!(
        "--scale needs about {} MiB of free disk for its largest stream ({} messages), and {}: \
         give a directory on a filesystem with room with --scale-dir DIR",
        need >> 20,
        o.sizes.iter().max().unwrap_or(&0),
        seen.join(", ")
    )
}

/// Runs one child for a size in a fresh directory under `base` (deleted after); its result.
fn run_child(cmd: &ChildCmd, o: &ScaleOpts, base: &Path, n: u64) -> Result<SizeResult> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("seqstore-bench-scale-{n}-"))
        .tempdir_in(base)
        .with_context(|| format!("tempdir in {}", base.display()))?;
    let p = child::Params {
        msgs: n,
        gets: o.gets,
        calls: o.calls,
        dir: dir.path().to_path_buf(),
    };
    let out = Command::new(&cmd.exe)
        .args(&cmd.args)
        .env(SCALE_CHILD_ENV, p.spec())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("start scale child {}", cmd.exe.display()))?;
    let removed = dir.path().to_path_buf();
    dir.close()
        .with_context(|| format!("removing {}", removed.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("scale child ({n} messages) failed ({})", out.status);
    }
    child::parse_result(&stdout)
        .with_context(|| format!("scale child ({n} messages) printed no result: {stdout:?}"))
}

/// Runs `--scale`: one child per size, in order. `progress` gets a line per size.
pub fn run_scale(o: &ScaleOpts, progress: &dyn Fn(&str)) -> Result<ScaleReport> {
    // a child whose binary does not call `child_main` would start children of its own
    anyhow::ensure!(
        std::env::var_os(SCALE_CHILD_ENV).is_none(),
        "{SCALE_CHILD_ENV} is set: this is a scale child, and its main did not call \
         seqstore_bench::child_main"
    );
    anyhow::ensure!(!o.sizes.is_empty(), "--scale needs at least one size");
    anyhow::ensure!(
        o.gets >= 1 && o.calls >= 1,
        "gets and calls must be at least 1"
    );
    let base = pick_dir(o)?;
    let cmd = match &o.child {
        Some(c) => c.clone(),
        None => crate::mem::default_child()?,
    };
    let started = Instant::now();
    let load_start = crate::groups::loadavg();
    progress(&format!(
        "seqstore bench --scale: sizes {:?}, about {} MiB of disk at most, in {}",
        o.sizes,
        o.needed_bytes() >> 20,
        base.display()
    ));
    let mut sizes = Vec::new();
    for (i, &n) in o.sizes.iter().enumerate() {
        progress(&format!(
            "[{}/{}] {:>7.1}s a child process with {n} messages",
            i + 1,
            o.sizes.len(),
            started.elapsed().as_secs_f64()
        ));
        sizes.push(run_child(&cmd, o, &base, n)?);
    }
    Ok(ScaleReport::new(
        o.clone(),
        sizes,
        started.elapsed().as_secs_f64(),
        (load_start, crate::groups::loadavg()),
    ))
}
