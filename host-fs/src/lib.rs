//! seqstore's [`Fs`](seqstore_core::Fs) on the real filesystem of whatever host the code runs on.
//!
//! [`HostFs`] is a directory tree rooted at one directory (the *store root*); every path given
//! to it is relative to that root and goes through [`seqstore_core::fs::split_path`], so every backend
//! applies the same path rules. Each method corresponds to the `std::fs` function of the same
//! name, and [`HostFile`] does positioned I/O (`read_at` / `write_all_at` take `&self`, so a file
//! can be shared between threads without a cursor).
//!
//! # Two implementations, one API
//! - **Natively** (any Unix other than WASI) it is built on a cap-std `Dir` opened on the
//!   store root. cap-std resolves every path beneath that directory handle (with `openat2`'s
//!   `RESOLVE_BENEATH` on Linux; component by component, checking each symlink, where
//!   `openat2` is missing), so no path, not even one going through a symlink, can reach outside
//!   the root.
//! - **Under WASI** (`wasm32-wasip2`) cap-std does not build, so it uses `std::fs` on paths joined
//!   below a root path (normally a directory preopened by the runtime, e.g. `/data`). The
//!   runtime's preopen is what confines it there.
//!
//! # Confinement
//! An absolute path, a `..` component, or (natively) a symlink whose target lies outside the
//! root, whether absolute or relative, is refused with [`io::ErrorKind::PermissionDenied`] and
//! nothing outside the root is read, created or changed. Symlinks that stay inside the root are
//! followed natively, except that cap-std refuses *absolute* symlink targets even when they
//! happen to point inside the root. The final component of `rename`, `remove_file` and
//! `remove_dir_all` is never followed: those act on a symlink itself, which lies inside the
//! root. A hard link to a file outside the root, made by someone else, cannot be detected by any
//! directory-relative scheme: it is simply a file inside the root.
//!
//! Under WASI the guarantee is the runtime's: nothing outside the *preopened* directory can be
//! reached. If the store root is a subdirectory of the preopen, a symlink inside the store root
//! may still lead elsewhere in the preopen; preopen the store root itself for exact confinement.
//!
//! # Directory fsync
//! [`Fs::sync_dir`](seqstore_core::Fs::sync_dir) opens the directory itself and fsyncs that
//! descriptor, which is how POSIX makes the entries of a directory (creations, renames,
//! removals) durable. cap-std has no such call, so it is done by hand:
//! - natively, cap-std opens directories with `O_PATH` on Linux (both the root from
//!   `Dir::open_ambient_dir` and `Dir::open_dir`), and `fsync` on an `O_PATH` descriptor fails
//!   with `EBADF`. So `Dir::open_dir(path)` first resolves the directory beneath the root
//!   (`O_DIRECTORY`: it must be a directory, never a FIFO or a device), then `"."` relative to that
//!   handle is opened `O_RDONLY` (for the root, `"."` relative to the root), which is a real
//!   descriptor of the same directory, and `File::sync_all` calls `fsync(2)` on it.
//! - under WASI, `std::fs::File::open(dir)` opens the directory descriptor, and `sync_all` calls
//!   the `sync` method of `wasi:filesystem`, which the runtime turns into an `fsync` of the host
//!   directory (checked with wasmtime).
//!
//! # Errors
//! Kinds follow std and the [`seqstore_core::Fs`] contract (`NotFound`, `AlreadyExists`,
//! `PermissionDenied`, `InvalidInput`, `IsADirectory`, `NotADirectory`, `DirectoryNotEmpty`,
//! `StorageFull`, ...). Opening a directory as a file is `IsADirectory` even for read-only opens
//! (which the kernel would allow). Errors of operations on paths carry the operation and the path
//! in their message; the kind is the underlying error's, and the underlying error is kept as the
//! [`source`](std::error::Error::source). A directory entry whose name is not UTF-8 (which
//! the store never creates) makes `read_dir` fail with `InvalidData`.

// No unsafe code but the two calls of wasi-libc's positioned I/O (`wasi.rs`, WASI only).
#![deny(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
use std::io;

#[cfg(all(not(target_os = "wasi"), not(unix)))]
compile_error!("host-fs supports Unix hosts (through cap-std) and WASI only");

mod lock;
#[cfg(all(not(target_os = "wasi"), unix))]
mod native;
/// The cap-std version [`HostFs::from_dir`] takes a `Dir` of.
#[cfg(all(not(target_os = "wasi"), unix))]
pub use cap_std;
#[cfg(all(not(target_os = "wasi"), unix))]
pub use native::{HostFile, HostFs};

#[cfg(target_os = "wasi")]
mod wasi;
#[cfg(target_os = "wasi")]
pub use wasi::{HostFile, HostFs};

/// An error of opening or creating the root: the operation and path, then the original
/// error's message. Its `io::Error` has the original's kind. (The errors of `Fs` methods carry
/// only their reason: the store's `Error::Io` names the operation and path.)
#[derive(Debug)]
struct PathError {
    op: &'static str,
    path: String,
    source: io::Error,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}: {}", self.op, self.path, self.source)
    }
}

// The message already says the original's: its source is what the original's message does
// not say, as `io::Error`'s own `source` (a chain printer then says each part once).
impl std::error::Error for PathError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

/// Wraps `e` with the operation and path, keeping its kind.
fn with_path(op: &'static str, path: &str, e: io::Error) -> io::Error {
    let kind = e.kind();
    io::Error::new(
        kind,
        PathError {
            op,
            path: path.to_owned(),
            source: e,
        },
    )
}

/// An error of `kind` about `path`, without an underlying error.
#[cfg(target_os = "wasi")]
fn path_error(kind: io::ErrorKind, op: &'static str, path: &str, msg: &str) -> io::Error {
    with_path(op, path, io::Error::new(kind, msg.to_owned()))
}

/// Converts an entry name to `String`, refusing (rather than mangling) a non-UTF-8 one.
fn entry_name(name: std::ffi::OsString) -> io::Result<String> {
    name.into_string().map_err(|name| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("entry name is not UTF-8: {name:?}"),
        )
    })
}

/// The host's wall clock ([`seqstore_core::StoreBuilder::clock`], and `HostFs`'s own): store-core reads no
/// clock itself, so the embedder passes this one (or its own).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl seqstore_core::Clock for SystemClock {
    /// The system time in ns since the epoch (0 before it). Natively: the system time at
    /// the last anchor plus the TSC's elapsed time since (`tsc_clock`), re-anchored every
    /// 100 ms, so it follows the system time (NTP steps and slews) to well within a
    /// microsecond of drift between anchors. A reading costs a few dozen instructions, a
    /// fraction of `SystemTime::now` with `duration_since`, which an unsynced append would
    /// otherwise spend a noticeable share of its time in. Not monotonic across an anchor that the system time stepped back; the
    /// store never lets a timestamp go back anyway.
    #[inline]
    fn now_ns(&self) -> i64 {
        #[cfg(not(target_os = "wasi"))]
        {
            tsc_clock::now_ns()
        }
        #[cfg(target_os = "wasi")]
        {
            system_ns()
        }
    }
}

/// `SystemTime::now()` in ns since the epoch, 0 before it.
fn system_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64)
}

#[cfg(not(target_os = "wasi"))]
mod tsc_clock {
    //! The wall clock from the TSC: an anchor (a raw TSC reading and the system time taken
    //! beside it) behind a sequence lock of atomics, so that readers on any thread take a
    //! consistent pair without a lock, and whichever reader finds the anchor 100 ms old
    //! takes a new one.
    use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU64, Ordering};
    use std::sync::OnceLock;

    /// How long an anchor serves before the system time is read again.
    const REANCHOR_NS: u64 = 100_000_000;

    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    /// Even: the anchor is stable; odd: being written. 0: no anchor yet.
    static SEQ: AtomicU64 = AtomicU64::new(0);
    static RAW: AtomicU64 = AtomicU64::new(0);
    static NS: AtomicI64 = AtomicI64::new(0);

    /// Readings served by the system time before the TSC is used: `quanta::Clock::new`
    /// calibrates the TSC against the system clock for 10 ms or more, which a short-lived
    /// process (one CLI command, a crash checker) would spend on a handful of readings.
    const SYSTEM_READINGS: u64 = 4096;
    static READINGS: AtomicU64 = AtomicU64::new(0);
    static WARM: AtomicBool = AtomicBool::new(false);

    #[inline]
    pub(super) fn now_ns() -> i64 {
        if !WARM.load(Ordering::Relaxed) {
            if READINGS.fetch_add(1, Ordering::Relaxed) < SYSTEM_READINGS {
                return super::system_ns();
            }
            WARM.store(true, Ordering::Relaxed);
        }
        let clock = CLOCK.get_or_init(quanta::Clock::new);
        let now = clock.raw();
        let s1 = SEQ.load(Ordering::Acquire);
        let (raw, ns) = (RAW.load(Ordering::Relaxed), NS.load(Ordering::Relaxed));
        fence(Ordering::Acquire);
        let s2 = SEQ.load(Ordering::Relaxed);
        if s1 == s2 && s1 != 0 && s1.is_multiple_of(2) && now >= raw {
            let elapsed = clock.delta_as_nanos(raw, now);
            if elapsed < REANCHOR_NS {
                return ns.saturating_add(elapsed as i64);
            }
        }
        reanchor(clock, s2)
    }

    /// Reads the system time (the answer) and, unless another thread is doing it, makes it
    /// the new anchor.
    #[cold]
    fn reanchor(clock: &quanta::Clock, seen: u64) -> i64 {
        let raw = clock.raw();
        let ns = super::system_ns();
        if seen.is_multiple_of(2)
            && SEQ
                .compare_exchange(seen, seen + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            fence(Ordering::Release);
            RAW.store(raw, Ordering::Relaxed);
            NS.store(ns, Ordering::Relaxed);
            SEQ.store(seen + 2, Ordering::Release);
        }
        ns
    }

    #[cfg(test)]
    mod tests {
        use super::now_ns;

        /// Readings stay within a millisecond of the system time, across anchors and on
        /// several threads at once (a torn anchor would be off by far more).
        #[test]
        fn follows_the_system_time() {
            let check = || {
                let until = std::time::Instant::now() + std::time::Duration::from_millis(350);
                let mut worst = 0i64;
                while std::time::Instant::now() < until {
                    let before = super::super::system_ns();
                    let t = now_ns();
                    let after = super::super::system_ns();
                    assert!(
                        t >= before - 1_000_000 && t <= after + 1_000_000,
                        "{before} <= {t} <= {after}"
                    );
                    worst = worst.max((t - before).abs().min((t - after).abs()));
                }
                worst
            };
            let hs: Vec<_> = (0..4).map(|_| std::thread::spawn(check)).collect();
            for h in hs {
                h.join().expect("thread");
            }
        }
    }
}

/// Runs [`seqstore_core::Store::tick`] on a shared store every `every` from a background thread, so
/// that `SyncPolicy::Interval` and `max_age` are enforced even when nothing else happens
/// (store-core runs nothing in the background). Dropping the `Ticker` stops the thread and joins it.
#[cfg(not(target_os = "wasi"))]
pub struct Ticker {
    stop: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[cfg(not(target_os = "wasi"))]
impl Ticker {
    /// Starts ticking `store`. Errors from `tick` (e.g. a poisoned store) are passed to
    /// `on_error` and end the ticker: a poisoned store must be reopened.
    pub fn start<F: seqstore_core::Fs + 'static>(
        store: seqstore_core::SharedStore<F>,
        every: std::time::Duration,
        on_error: impl Fn(seqstore_core::Error) + Send + 'static,
    ) -> Ticker {
        let (stop, rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                if let Err(e) = store.with(|s| s.tick()) {
                    on_error(e);
                    return;
                }
            }
        });
        Ticker {
            stop,
            thread: Some(thread),
        }
    }
}

#[cfg(not(target_os = "wasi"))]
impl Drop for Ticker {
    fn drop(&mut self) {
        let _ = self.stop.send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
