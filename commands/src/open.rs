//! Opening the store a command names: the directory checks, the native store on host-fs
//! (cap-std natively, WASI's filesystem under WASI), and the whole command.

use clap::Args;
use seqstore_core::{Config, CryptFs, Store};
use seqstore_fs::{HostFs, SystemClock};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::{run_and_close, Error, Output, Result, StoreCmd};

/// Checks that `dir` is a store, or (`create`) makes a missing or empty one a store
/// directory. A non-empty directory that is not a store is refused either way, and nothing is
/// written to it.
pub fn prepare_dir(dir: &Path, create: bool) -> Result<()> {
    let dir_err = |what, source| Error::Dir {
        what,
        dir: dir.to_path_buf(),
        source,
    };
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !create {
                return Err(Error::NoStore {
                    dir: dir.to_path_buf(),
                    why: "the directory does not exist",
                });
            }
        }
        Err(e) => return Err(dir_err("reading", e)),
        Ok(it) => {
            // one listing decides, so that a store another process creates meanwhile is seen
            // whole: a crash during a purge can leave purge.new/purge.old and no msgs/
            // (recovery finishes it); a lock file alone means another process is creating
            // the store here
            let entries: Vec<_> = it.filter_map(|e| e.ok()).collect();
            let store_dirs = [
                seqstore_core::internal::MSGS_DIR,
                seqstore_core::internal::PURGE_NEW,
                seqstore_core::internal::PURGE_OLD,
            ];
            let is_store_dir = |e: &std::fs::DirEntry| {
                store_dirs.iter().any(|d| e.file_name() == *d) && e.path().is_dir()
            };
            if entries.iter().any(is_store_dir) {
                return Ok(());
            }
            let names: Vec<_> = entries.iter().map(|e| e.file_name()).collect();
            if names.iter().any(|n| {
                !n.to_str()
                    .is_some_and(seqstore_core::internal::is_lock_name)
            }) {
                return Err(Error::NotAStore {
                    dir: dir.to_path_buf(),
                });
            }
            if !create {
                return Err(Error::NoStore {
                    dir: dir.to_path_buf(),
                    why: "the directory is empty",
                });
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| dir_err("creating", e))
}

/// Runs `open` until it succeeds, fails for another reason than the store's lock (`locked`
/// tells), or `wait` has passed; it sleeps between tries, 1 ms at first, doubling up to 50
/// ms. The last `Err` is returned, with how long it waited.
pub fn retry_locked<T, E>(
    wait: Duration,
    locked: impl Fn(&E) -> bool,
    mut open: impl FnMut() -> Result<T, E>,
) -> Result<T, (E, Duration)> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match open() {
            Ok(v) => return Ok(v),
            Err(e) => {
                let waited = start.elapsed();
                if !locked(&e) || waited >= wait {
                    return Err((e, waited));
                }
                std::thread::sleep(pause.min(wait - waited));
                pause = (pause * 2).min(Duration::from_millis(50));
            }
        }
    }
}

/// Whether `e` is the refusal of a store another process has open.
pub fn is_locked(e: &seqstore_core::Error) -> bool {
    matches!(e, seqstore_core::Error::Locked { .. })
}

/// The native store in `dir` (after [`prepare_dir`]), on host-fs with the system clock,
/// through the encryption and compression layer `cfg` asks for (none: the files as they are).
///
/// A store another process has open is waited for, up to `wait` ([`retry_locked`]), then
/// refused with [`Error::Busy`].
pub fn open_native(dir: &Path, cfg: Config, wait: Duration) -> Result<Store<CryptFs<HostFs>>> {
    let open = || {
        // host-fs names the root in its error (`open root "DIR": …`); nothing repeats it.
        let fs = HostFs::open(dir).map_err(Error::Root)?;
        Store::builder(fs)
            .config(cfg.clone())
            .clock(SystemClock)
            .open_layered()
            .map_err(Error::Store)
    };
    let locked = |e: &Error| matches!(e, Error::Store(e) if is_locked(e));
    retry_locked(wait, locked, open).map_err(|(e, waited)| match e {
        Error::Store(e) if is_locked(&e) => Error::Busy {
            dir: dir.to_path_buf(),
            waited,
            source: Box::new(e),
        },
        Error::Store(e) => Error::Recover {
            dir: dir.to_path_buf(),
            guest: false,
            source: Box::new(e),
        },
        e => e,
    })
}

/// Runs `cmd` on the native store in its directory, from `base` with the command's flags
/// applied (`verify` reads the directory without opening a store). `prog` prefixes the
/// warning on stderr when recovery had to repair damage.
pub fn execute<X: Args>(cmd: &StoreCmd<X>, base: Config, prog: &str) -> Result<Output> {
    let at = cmd.target();
    if let StoreCmd::Verify { .. } = cmd {
        let fs = HostFs::open(&at.dir).map_err(Error::Root)?;
        let fs = CryptFs::new(fs, at.layer()?).map_err(Error::Root)?;
        // verify holds the store's lock while it reads: it waits for a writer as open does
        let r = retry_locked(at.wait, is_locked, || seqstore_core::verify(&fs)).map_err(
            |(source, waited)| match source {
                e if is_locked(&e) => Error::Busy {
                    dir: at.dir.clone(),
                    waited,
                    source: Box::new(e),
                },
                source => Error::Verify {
                    dir: at.dir.clone(),
                    source,
                },
            },
        )?;
        return Ok(Output::Verify((&r).into()));
    }
    prepare_dir(&at.dir, cmd.creates())?;
    let store = open_native(&at.dir, at.layered_config(base)?, at.wait)?;
    let rep = store.recovery_report();
    if rep.lost_data() {
        eprintln!("{prog}: recovery repaired damage: {rep:?}");
    }
    run_and_close(store, cmd, &SystemClock)
}
