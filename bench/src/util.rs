//! Small helpers: the seeded RNG, medians, directory sizes, the run context (tempdirs,
//! progress, the byte budget).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

/// The workspace's one seeded generator (splitmix64, fault-fs).
pub(crate) use seqstore_fault_fs::Rng;

/// The median of `v` (mean of the two middle values for an even count).
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// Bytes in the files under `p` (recursively); 0 if it does not exist.
/// The least any recovery that checks its data must do: read every file under `dir` (sorted,
/// in 1 MiB reads) and crc32 every byte. Returns the bytes read and the crc (which keeps the
/// work from being optimized away).
pub(crate) fn read_and_crc_all(dir: &Path) -> std::io::Result<(u64, u32)> {
    use std::io::Read;
    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            if e.file_type()?.is_dir() {
                files(&e.path(), out)?;
            } else {
                out.push(e.path());
            }
        }
        Ok(())
    }
    let mut paths = Vec::new();
    files(dir, &mut paths)?;
    paths.sort();
    let mut buf = vec![0u8; 1 << 20];
    let mut crc = crc32fast::Hasher::new();
    let mut n = 0u64;
    for p in paths {
        let mut f = std::fs::File::open(p)?;
        loop {
            let k = f.read(&mut buf)?;
            if k == 0 {
                break;
            }
            crc.update(&buf[..k]);
            n += k as u64;
        }
    }
    Ok((n, crc.finalize()))
}

/// Empties the page cache (`sync`, then `1` into /proc/sys/vm/drop_caches), for a cold read;
/// false where this process may not (not root, a container): the cold cells are left out then.
pub(crate) fn drop_page_cache() -> bool {
    let synced = std::process::Command::new("sync")
        .status()
        .is_ok_and(|s| s.success());
    synced && std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok()
}

pub(crate) fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => n += dir_size(&e.path()),
            Ok(_) => n += e.metadata().map_or(0, |m| m.len()),
            Err(_) => {}
        }
    }
    n
}

/// Nanoseconds the calling thread has spent on a CPU (`/proc/thread-self/schedstat`, Linux;
/// 0 elsewhere): separates a call's own work from its waits for the disk.
pub(crate) fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// This process's I/O counters (`/proc/self/io`, Linux): bytes passed to `write(2)` and
/// friends (`wchar`), and bytes sent to storage net of those cancelled by truncation or
/// deletion before writeback (`write_bytes - cancelled_write_bytes`).
pub(crate) fn proc_io() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/self/io").ok()?;
    let get = |k: &str| -> Option<u64> {
        s.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix(':')?.trim().parse().ok())
    };
    Some((
        get("wchar")?,
        get("write_bytes")?.saturating_sub(get("cancelled_write_bytes")?),
    ))
}

/// Shared state of one run: where tempdirs go, the progress callback with a step counter,
/// the bytes written so far, the message contents.
pub(crate) struct Ctx<'a> {
    pub(crate) base: PathBuf,
    progress: &'a dyn Fn(&str),
    pub(crate) step: usize,
    pub(crate) total_steps: usize,
    /// Bytes in the engines' files (the size of each tempdir before it is removed): the
    /// fallback for `bytes_written` where `/proc/self/io` is missing. Preallocated space
    /// counts, so it overstates.
    pub(crate) bytes_written: u64,
    pub(crate) payload: Vec<u8>,
    pub(crate) subjects: Vec<String>,
    pub(crate) started: Instant,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        base: PathBuf,
        progress: &'a dyn Fn(&str),
        total_steps: usize,
        payload_len: usize,
    ) -> Self {
        let mut rng = Rng::new(0x5eed_0bad_cafe);
        let payload = (0..payload_len).map(|_| rng.next_u64() as u8).collect();
        // 64 subjects of exactly 16 bytes: "orders.eu.000000" .. "orders.eu.000063"
        let subjects = (0..64).map(|i| format!("orders.eu.{i:06}")).collect();
        Ctx {
            base,
            progress,
            step: 0,
            total_steps,
            bytes_written: 0,
            payload,
            subjects,
            started: Instant::now(),
        }
    }

    /// Reports the start of one step of the plan ("[3/41] append_nosync rep 1/3: okaywal").
    pub(crate) fn tick(&mut self, what: &str) {
        self.step += 1;
        let msg = format!(
            "[{}/{}] {:>6.1}s {what}",
            self.step.min(self.total_steps),
            self.total_steps,
            self.started.elapsed().as_secs_f64()
        );
        (self.progress)(&msg);
    }

    /// A note that is not a step.
    pub(crate) fn say(&self, what: &str) {
        (self.progress)(what);
    }

    /// A fresh empty directory for one engine in one cell.
    pub(crate) fn tempdir(&self, name: &str) -> Result<tempfile::TempDir> {
        tempfile::Builder::new()
            .prefix(&format!("seqstore-bench-{name}-"))
            .tempdir_in(&self.base)
            .with_context(|| format!("tempdir in {}", self.base.display()))
    }

    /// Counts what `dir` holds, then removes it.
    pub(crate) fn finish_dir(&mut self, dir: tempfile::TempDir) -> Result<()> {
        self.bytes_written += dir_size(dir.path());
        let p = dir.path().to_path_buf();
        dir.close()
            .with_context(|| format!("removing {}", p.display()))
    }

    pub(crate) fn subject(&self, i: u64) -> &str {
        &self.subjects[(i % self.subjects.len() as u64) as usize]
    }
}
