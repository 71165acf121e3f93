//! The sandbox: the guest cannot reach outside its directory, and a guest that loops or
//! allocates without bound is stopped with a clear error, after which a fresh `GuestStore`
//! on the same directory works.

use seqstore_core::surface::StreamStore;
use std::time::{Duration, Instant};

use seqstore_core::{Config, SyncPolicy};
use seqstore_fs::HostFs;

use crate::engine::Kind;
use crate::guest_store::Backing;
use crate::tests::common::*;
use crate::{Error, GuestOptions, GuestStore, GUEST_DIR};

fn durable() -> Config {
    let mut c = small_blocks();
    c.sync = SyncPolicy::Always;
    c
}

/// A test-hooks guest on `dir` through the `fs` import.
fn hooks_on_fs(dir: &std::path::Path, opts: &GuestOptions) -> GuestStore {
    let fs = HostFs::open(dir).unwrap();
    GuestStore::open_inner(
        Kind::TestHooks,
        Backing::Fs(Box::new(fs)),
        durable(),
        Box::new(clock()),
        opts,
    )
    .unwrap()
}

/// A test-hooks guest on `dir` preopened as /data, with the store at `root`.
fn hooks_on_dir(dir: &std::path::Path, root: &str) -> crate::Result<GuestStore> {
    GuestStore::open_inner(
        Kind::TestHooks,
        Backing::Dir {
            host: dir.to_path_buf(),
            root: root.to_string(),
        },
        durable(),
        Box::new(clock()),
        &GuestOptions::default(),
    )
}

fn read_file(g: &mut GuestStore, path: &str) -> Result<u64, String> {
    let f = g.test_hook::<(&str,), (Result<u64, String>,)>("read-file");
    g.test_call(|s| f.call(s, (path,)).map(|(r,)| r)).unwrap()
}

/// Reopening after a trap: the data acknowledged before it is all there.
fn assert_reopens(dir: &std::path::Path, expect_last: u64) {
    let fs = HostFs::open(dir).unwrap();
    let mut g = GuestStore::from_fs(fs, durable(), Box::new(clock())).unwrap();
    assert_eq!(g.state().unwrap().last_seq, expect_last);
    assert_eq!(g.append("after", b"", b"trap").unwrap(), expect_last + 1);
    g.close().unwrap();
}

#[test]
fn preopened_guest_cannot_leave_its_directory() {
    let outer = tempfile::tempdir().unwrap();
    std::fs::write(outer.path().join("secret.txt"), b"outside").unwrap();
    let inner = outer.path().join("store");
    std::fs::create_dir(&inner).unwrap();
    std::fs::write(inner.join("inside.txt"), b"inside").unwrap();

    let mut g = hooks_on_dir(&inner, GUEST_DIR).unwrap();
    // Control: the preopen itself is readable.
    assert_eq!(read_file(&mut g, "/data/inside.txt"), Ok(6));
    for escape in [
        "/data/../secret.txt",
        "/data/../../etc/passwd",
        "../secret.txt",
        "/secret.txt",
        "/etc/passwd",
        "secret.txt",
    ] {
        let r = read_file(&mut g, escape);
        assert!(r.is_err(), "guest read {escape:?}: {r:?}");
    }
    drop(g);

    // A store rooted at `/data/..` is refused, and nothing is created outside the preopen.
    let before = tree(outer.path());
    for root in ["/data/..", "/data/../..", "/", "/tmp"] {
        match hooks_on_dir(&inner, root) {
            Err(Error::Store(seqstore_core::Error::Io { .. })) => {}
            Err(e) => panic!("root {root:?}: unexpected error {e}"),
            Ok(_) => panic!("root {root:?}: the guest opened a store outside its preopen"),
        }
    }
    assert_eq!(
        tree(outer.path()),
        before,
        "something changed outside the preopen"
    );
}

#[test]
fn fs_import_guest_has_no_wasi_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"x").unwrap();
    let mut g = hooks_on_fs(dir.path(), &GuestOptions::default());
    for path in ["f", "/f", "/data/f", ".", "/", "/etc/passwd"] {
        let r = read_file(&mut g, path);
        assert!(r.is_err(), "guest read {path:?}: {r:?}");
    }
    // The store paths the import refuses: store-core's rules apply at the host too.
    assert!(g.append("ok", b"", b"x").is_ok());
}

#[test]
fn spinning_guest_is_interrupted_then_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let opts = GuestOptions {
        call_timeout: Some(Duration::from_millis(200)),
        ..GuestOptions::default()
    };
    let mut g = hooks_on_fs(dir.path(), &opts);
    assert_eq!(g.append("before", b"", b"spin").unwrap(), 1);
    let spin = g.test_hook::<(), ()>("spin");
    let t = Instant::now();
    let err = g.test_call(|s| spin.call(s, ())).unwrap_err();
    let took = t.elapsed();
    assert!(
        matches!(err, Error::Timeout { limit } if limit == Duration::from_millis(200)),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "interrupt took {took:?}");
    assert!(err.to_string().contains("deadline"), "{err}");
    assert!(g.is_trapped());
    assert!(matches!(g.append("x", b"", b"y"), Err(Error::Dead)));
    drop(g);
    assert_reopens(dir.path(), 1);
}

#[test]
fn allocating_guest_is_stopped_then_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let opts = GuestOptions {
        max_memory: 64 << 20,
        ..GuestOptions::default()
    };
    let mut g = hooks_on_fs(dir.path(), &opts);
    assert_eq!(g.append("before", b"", b"alloc").unwrap(), 1);
    let alloc = g.test_hook::<(u64,), (u64,)>("allocate");
    // Within the cap: fine, and the instance stays usable.
    assert_eq!(
        g.test_call(|s| alloc.call(s, (8 << 20,))).unwrap(),
        (8 << 20,)
    );
    assert_eq!(g.append("between", b"", b"x").unwrap(), 2);
    let err = g.test_call(|s| alloc.call(s, (1 << 30,))).unwrap_err();
    match &err {
        Error::MemoryLimit { limit, requested } => {
            assert_eq!(*limit, 64 << 20);
            assert!(*requested > *limit);
        }
        e => panic!("expected MemoryLimit, got {e}"),
    }
    assert!(err.to_string().contains("cap"), "{err}");
    assert!(matches!(g.state(), Err(Error::Dead)));
    drop(g);
    assert_reopens(dir.path(), 2);
}

#[test]
fn oversized_argument_hits_the_memory_cap() {
    // No test hook: a payload bigger than the guest's memory cap, through the real API. The
    // host copies it into guest memory before the store sees it, so the cap stops it.
    let dir = tempfile::tempdir().unwrap();
    let opts = GuestOptions {
        max_memory: 32 << 20,
        ..GuestOptions::default()
    };
    let fs = HostFs::open(dir.path()).unwrap();
    let mut g = GuestStore::from_fs_with(fs, durable(), Box::new(clock()), &opts).unwrap();
    assert_eq!(g.append("a", b"", b"small").unwrap(), 1);
    let big = vec![7u8; 48 << 20];
    let err = g.append("a", b"", &big).unwrap_err();
    assert!(matches!(err, Error::MemoryLimit { .. }), "{err}");
    drop(g);
    assert_reopens(dir.path(), 1);
}

#[test]
fn tiny_memory_cap_fails_open_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let opts = GuestOptions {
        max_memory: 64 << 10,
        ..GuestOptions::default()
    };
    let fs = HostFs::open(dir.path()).unwrap();
    let err = GuestStore::from_fs_with(fs, durable(), Box::new(clock()), &opts).unwrap_err();
    assert!(matches!(err, Error::MemoryLimit { .. }), "{err}");
    assert!(err.is_trap());
}

#[test]
fn missing_preopen_dir_is_a_store_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let err =
        GuestStore::open_dir(dir.path().join("nope"), durable(), Box::new(clock())).unwrap_err();
    match err {
        Error::Store(e) => assert_eq!(e.io_kind(), Some(std::io::ErrorKind::NotFound)),
        e => panic!("{e}"),
    }
}
