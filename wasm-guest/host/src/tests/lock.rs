//! The store's lock across the boundary: the host holds it for its guest, so a native store
//! and a guest store never have one directory (or one `Fs`) open at once, whichever opened
//! first; and the WASI command's marker-file lock and the native lock refuse each other.

use seqstore_core::internal::LOCK_FILE;
use seqstore_core::surface::StreamStore;
use seqstore_core::{Config, Error as StoreError, Store};
use seqstore_fault_fs::{FaultFs, Model};
use seqstore_fs::{HostFs, SystemClock};

use crate::{run_guest_command, Error, GuestOptions, GuestStore};

fn is_locked(e: &Error) -> bool {
    matches!(e, Error::Store(StoreError::Locked { .. }))
}

#[test]
fn a_guest_and_a_native_store_refuse_each_other_on_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let native = Store::open(HostFs::open(d).unwrap(), Config::default()).unwrap();
    let e = GuestStore::open_dir(d, Config::default(), Box::new(SystemClock)).unwrap_err();
    assert!(is_locked(&e), "{e}");
    assert!(
        e.to_string().contains(&std::process::id().to_string()),
        "{e}"
    );
    native.close().unwrap();

    let mut guest = GuestStore::open_dir(d, Config::default(), Box::new(SystemClock)).unwrap();
    guest.append("a", b"", b"x").unwrap();
    match Store::open(HostFs::open(d).unwrap(), Config::default()) {
        Err(StoreError::Locked { .. }) => {}
        other => panic!("native open beside a guest: {:?}", other.map(|_| ())),
    }
    // the WASI command (marker-file protocol) is refused by the native lock the host holds
    let out = run_guest_command(d, &["state", "--wait", "0"], &GuestOptions::default()).unwrap();
    assert_ne!(out.code, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("in use") && err.contains("native process"),
        "{err}"
    );
    guest.close().unwrap();
    let s = Store::open(HostFs::open(d).unwrap(), Config::default()).unwrap();
    assert_eq!(s.state().msgs, 1);
}

#[test]
fn a_guest_on_an_fs_holds_its_lock() {
    let fs = FaultFs::new(Model::Posix);
    let guest = GuestStore::from_fs(fs.clone(), Config::default(), Box::new(SystemClock)).unwrap();
    assert!(fs.is_locked(LOCK_FILE));
    match Store::open(fs.clone(), Config::default()) {
        Err(StoreError::Locked { .. }) => {}
        other => panic!("native open beside a guest: {:?}", other.map(|_| ())),
    }
    let e = GuestStore::from_fs(fs.clone(), Config::default(), Box::new(SystemClock)).unwrap_err();
    assert!(is_locked(&e), "{e}");
    drop(guest);
    assert!(
        !fs.is_locked(LOCK_FILE),
        "dropping the guest store releases the lock"
    );
    Store::open(fs, Config::default()).unwrap().close().unwrap();
}

/// The WASI command under plain wasmtime-wasi (no file locks): while it runs a command it
/// holds `LOCK.wasi`; a stale marker (a guest that died) refuses every opener, native too,
/// with the file to remove; a stale native pid in `LOCK` refuses WASI openers only, until a
/// native open and close empties it.
#[test]
fn the_wasi_marker_and_the_native_lock() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ok = |args: &[&str]| {
        let out = run_guest_command(d, args, &GuestOptions::default()).unwrap();
        assert_eq!(
            out.code,
            0,
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ok(&["append", "--subject", "a", "--data", "x"]);
    assert!(
        !d.join("LOCK.wasi").exists(),
        "the command removed its marker"
    );
    // a marker left by a guest that died
    std::fs::write(d.join("LOCK.wasi"), "a WASI process (seqstore-guest)\n").unwrap();
    match Store::open(HostFs::open(d).unwrap(), Config::default()) {
        Err(e @ StoreError::Locked { .. }) => {
            assert!(e.to_string().contains("LOCK.wasi"), "{e}")
        }
        other => panic!("native open beside a WASI marker: {:?}", other.map(|_| ())),
    }
    let out = run_guest_command(d, &["state", "--wait", "0"], &GuestOptions::default()).unwrap();
    assert_ne!(out.code, 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("remove"));
    std::fs::remove_file(d.join("LOCK.wasi")).unwrap();
    // a native holder killed with its pid still in LOCK: native opens go on, WASI waits
    std::fs::write(d.join(LOCK_FILE), "pid 4194304\n").unwrap();
    let out = run_guest_command(d, &["state", "--wait", "0"], &GuestOptions::default()).unwrap();
    assert_ne!(out.code, 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("4194304"));
    Store::open(HostFs::open(d).unwrap(), Config::default())
        .unwrap()
        .close()
        .unwrap();
    ok(&["state"]);
}
