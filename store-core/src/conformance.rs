//! A behavioural conformance suite for [`Fs`] implementations.
//!
//! Every backend (host-fs on a real directory, fault-fs in memory, the WIT-imported fs in the
//! guest) must behave the same way without crashes. Use the macro in a test module:
//!
//! ```ignore
//! seqstore_core::fs_conformance_tests!(|| {
//!     let dir = tempfile::tempdir().unwrap();
//!     let fs = seqstore_fs::HostFs::open(dir.path()).unwrap();
//!     (dir, fs) // the first element is kept alive for the test's duration
//! });
//! ```
//!
//! Each case is also a public function taking `&F`, so a backend can run a single one.
//! Cases panic (assert) on a mismatch: this module is test support, only compiled with the
//! `conformance` feature.

// A test kit compiled into the library: its unwraps and panics are its assertions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::fast::write_all_at_sync_data;
use crate::fs::{DirEntry, Fs, FsFile, OpenOptions, WriteSyncError};
use std::io::ErrorKind;

fn rw() -> OpenOptions {
    OpenOptions::read_write_create()
}

fn read_all<F: Fs>(fs: &F, path: &str) -> Vec<u8> {
    let f = fs
        .open(path, OpenOptions::read_only())
        .expect("open for read");
    let len = f.len().expect("len") as usize;
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, 0).expect("read_exact_at");
    buf
}

fn write_file<F: Fs>(fs: &F, path: &str, data: &[u8]) {
    let f = fs.open(path, rw().truncate(true)).expect("open for write");
    f.write_all_at(data, 0).expect("write_all_at");
}

fn names<F: Fs>(fs: &F, dir: &str) -> Vec<String> {
    fs.read_dir(dir)
        .expect("read_dir")
        .into_iter()
        .map(|e| e.name)
        .collect()
}

/// Writes at offsets, reads back, reads past the end, and sees gaps filled with zeros.
pub fn write_read_len<F: Fs>(fs: &F) {
    let f = fs.open("a", rw()).unwrap();
    assert_eq!(f.len().unwrap(), 0);
    f.write_all_at(b"hello", 0).unwrap();
    f.write_all_at(b"world", 10).unwrap();
    assert_eq!(f.len().unwrap(), 15);
    let mut buf = [0xffu8; 15];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"hello\0\0\0\0\0world");
    let mut small = [0u8; 4];
    assert_eq!(f.read_at(&mut small, 15).unwrap(), 0, "read at EOF");
    assert_eq!(f.read_at(&mut small, 100).unwrap(), 0, "read past EOF");
    let n = f.read_at(&mut small, 13).unwrap();
    assert!((1..=2).contains(&n), "short read at the end");
    assert_eq!(
        f.read_exact_at(&mut small, 13).unwrap_err().kind(),
        ErrorKind::UnexpectedEof
    );
    // overwrite in the middle
    f.write_all_at(b"HE", 0).unwrap();
    drop(f);
    assert_eq!(read_all(fs, "a"), b"HEllo\0\0\0\0\0world");
}

/// Two handles on one file see each other's writes.
pub fn handles_share_contents<F: Fs>(fs: &F) {
    let a = fs.open("f", rw()).unwrap();
    let b = fs.open("f", OpenOptions::read_only()).unwrap();
    a.write_all_at(b"xyz", 0).unwrap();
    assert_eq!(b.len().unwrap(), 3);
    let mut buf = [0u8; 3];
    b.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"xyz");
}

/// `set_len` truncates and extends with zeros.
pub fn set_len_truncates_and_extends<F: Fs>(fs: &F) {
    let f = fs.open("a", rw()).unwrap();
    f.write_all_at(b"0123456789", 0).unwrap();
    f.set_len(4).unwrap();
    assert_eq!(f.len().unwrap(), 4);
    f.set_len(8).unwrap();
    let mut buf = [0xffu8; 8];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"0123\0\0\0\0");
    f.sync_data().unwrap();
    f.sync_all().unwrap();
}

/// The open flags behave as std's.
pub fn open_flags<F: Fs>(fs: &F) {
    assert_eq!(
        fs.open("missing", OpenOptions::read_only())
            .err()
            .unwrap()
            .kind(),
        ErrorKind::NotFound
    );
    write_file(fs, "a", b"abc");
    let e = fs
        .open("a", OpenOptions::new().write(true).create_new(true))
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists);
    let f = fs
        .open("b", OpenOptions::new().write(true).create_new(true))
        .unwrap();
    f.write_all_at(b"1", 0).unwrap();
    drop(f);
    let f = fs
        .open("a", OpenOptions::new().write(true).truncate(true))
        .unwrap();
    assert_eq!(f.len().unwrap(), 0);
    drop(f);
    // create without truncate keeps contents
    write_file(fs, "c", b"keep");
    let f = fs.open("c", rw()).unwrap();
    assert_eq!(f.len().unwrap(), 4);
    // invalid combinations
    assert_eq!(
        fs.open("d", OpenOptions::new().read(true).create(true))
            .err()
            .unwrap()
            .kind(),
        ErrorKind::InvalidInput
    );
    // a missing parent
    assert_eq!(
        fs.open("nodir/x", rw()).err().unwrap().kind(),
        ErrorKind::NotFound
    );
}

/// Directories: create, list (sorted, typed), nested files, errors.
pub fn dirs_create_and_list<F: Fs>(fs: &F) {
    assert!(fs.read_dir("").unwrap().is_empty());
    fs.create_dir("d").unwrap();
    assert_eq!(
        fs.create_dir("d").unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        fs.create_dir("x/y").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    write_file(fs, "d/2.blk", b"2");
    write_file(fs, "d/10.blk", b"10");
    fs.create_dir("d/sub").unwrap();
    write_file(fs, "top", b"t");
    assert_eq!(
        fs.read_dir("d").unwrap(),
        vec![
            DirEntry {
                name: "10.blk".into(),
                is_dir: false
            },
            DirEntry {
                name: "2.blk".into(),
                is_dir: false
            },
            DirEntry {
                name: "sub".into(),
                is_dir: true
            },
        ]
    );
    assert_eq!(names(fs, ""), vec!["d", "top"]);
    assert_eq!(names(fs, "."), vec!["d", "top"]);
    assert_eq!(
        fs.read_dir("missing").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert!(fs.open("d", OpenOptions::read_only()).is_err());
    fs.sync_dir("d").unwrap();
    fs.sync_dir("").unwrap();
    assert_eq!(
        fs.sync_dir("missing").unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

/// Rename replaces an existing file atomically, moves directories, and fails on a missing source.
pub fn rename_over<F: Fs>(fs: &F) {
    write_file(fs, "a", b"new");
    write_file(fs, "b", b"old contents");
    fs.rename("a", "b").unwrap();
    assert_eq!(names(fs, ""), vec!["b"]);
    assert_eq!(read_all(fs, "b"), b"new");
    assert_eq!(fs.rename("a", "c").unwrap_err().kind(), ErrorKind::NotFound);
    // directories move with their contents
    fs.create_dir("d1").unwrap();
    write_file(fs, "d1/f", b"in d1");
    fs.rename("d1", "d2").unwrap();
    assert_eq!(names(fs, ""), vec!["b", "d2"]);
    assert_eq!(read_all(fs, "d2/f"), b"in d1");
    // across directories
    fs.rename("b", "d2/b").unwrap();
    assert_eq!(names(fs, "d2"), vec!["b", "f"]);
    // an open handle keeps working after its file is renamed
    let h = fs.open("d2/f", rw()).unwrap();
    fs.rename("d2/f", "g").unwrap();
    h.write_all_at(b"IN", 0).unwrap();
    drop(h);
    assert_eq!(read_all(fs, "g"), b"IN d1");
}

/// Removal of files and trees, and the errors on missing paths.
pub fn remove<F: Fs>(fs: &F) {
    write_file(fs, "a", b"1");
    fs.remove_file("a").unwrap();
    assert!(names(fs, "").is_empty());
    assert_eq!(fs.remove_file("a").unwrap_err().kind(), ErrorKind::NotFound);
    fs.create_dir("t").unwrap();
    fs.create_dir("t/u").unwrap();
    write_file(fs, "t/u/f", b"x");
    write_file(fs, "t/g", b"y");
    assert!(fs.remove_file("t").is_err(), "remove_file on a directory");
    fs.remove_dir_all("t").unwrap();
    assert!(names(fs, "").is_empty());
    assert_eq!(
        fs.remove_dir_all("t").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    // a name can be reused after removal
    write_file(fs, "a", b"again");
    assert_eq!(read_all(fs, "a"), b"again");
}

/// Paths that leave the root are refused with `PermissionDenied`; malformed ones are invalid.
pub fn path_confinement<F: Fs>(fs: &F) {
    for bad in ["/etc/passwd", "../x", "a/../../x", "..", "/"] {
        let e = fs.open(bad, rw()).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::PermissionDenied, "open {bad:?}");
        assert_eq!(
            fs.read_dir(bad).unwrap_err().kind(),
            ErrorKind::PermissionDenied,
            "read_dir {bad:?}"
        );
        assert_eq!(
            fs.create_dir(bad).unwrap_err().kind(),
            ErrorKind::PermissionDenied,
            "create_dir {bad:?}"
        );
        assert_eq!(
            fs.sync_dir(bad).unwrap_err().kind(),
            ErrorKind::PermissionDenied,
            "sync_dir {bad:?}"
        );
    }
    write_file(fs, "a", b"x");
    assert_eq!(
        fs.rename("a", "../a").unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    assert_eq!(
        fs.remove_dir_all("..").unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    assert_eq!(
        fs.open("a//b", rw()).err().unwrap().kind(),
        ErrorKind::InvalidInput
    );
    // the file is still there: nothing outside or inside was touched
    assert_eq!(read_all(fs, "a"), b"x");
}

/// The error kinds the trait names for type mismatches: opening a directory as a file, treating a
/// file as a directory, renaming a directory onto a non-empty one.
pub fn type_errors<F: Fs>(fs: &F) {
    fs.create_dir("d").unwrap();
    write_file(fs, "d/f", b"x");
    write_file(fs, "f", b"y");
    for opts in [OpenOptions::read_only(), rw()] {
        assert_eq!(
            fs.open("d", opts).err().unwrap().kind(),
            ErrorKind::IsADirectory
        );
    }
    assert_eq!(
        fs.read_dir("f").unwrap_err().kind(),
        ErrorKind::NotADirectory
    );
    assert_eq!(
        fs.open("f/x", rw()).err().unwrap().kind(),
        ErrorKind::NotADirectory
    );
    fs.create_dir("e").unwrap();
    write_file(fs, "e/g", b"z");
    assert_eq!(
        fs.rename("d", "e").unwrap_err().kind(),
        ErrorKind::DirectoryNotEmpty
    );
    // a directory may replace an empty directory, as on Linux
    fs.create_dir("empty").unwrap();
    fs.rename("d", "empty").unwrap();
    assert_eq!(names(fs, "empty"), vec!["f"]);
    // a write through a read-only handle fails and changes nothing
    let r = fs.open("f", OpenOptions::read_only()).unwrap();
    assert!(r.write_all_at(b"no", 0).is_err());
    drop(r);
    assert_eq!(read_all(fs, "f"), b"y");
}

/// A larger write at an unaligned offset round-trips byte for byte.
pub fn large_unaligned_io<F: Fs>(fs: &F) {
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let f = fs.open("big", rw()).unwrap();
    f.write_all_at(&data, 513).unwrap();
    assert_eq!(f.len().unwrap(), 513 + data.len() as u64);
    let mut back = vec![0u8; data.len()];
    f.read_exact_at(&mut back, 513).unwrap();
    assert!(back == data, "large read differs");
    f.sync_data().unwrap();
}

/// The store's durable append (`FastPaths::write_all_at_sync_data` if the file offers it, else
/// its write then its sync) writes as `write_all_at` does (gaps zero-filled) and its bytes
/// read back; through a read-only handle it fails at the write step and changes nothing.
pub fn write_then_sync<F: Fs>(fs: &F) {
    let f = fs.open("w", rw()).unwrap();
    f.write_all_at(b"head", 0).unwrap();
    write_all_at_sync_data(&f, b"tail", 6).unwrap();
    assert_eq!(f.len().unwrap(), 10);
    write_all_at_sync_data(&f, b"EA", 1).unwrap();
    drop(f);
    assert_eq!(read_all(fs, "w"), b"hEAd\0\0tail");
    let r = fs.open("w", OpenOptions::read_only()).unwrap();
    match write_all_at_sync_data(&r, b"no", 0) {
        Err(WriteSyncError::Write(_)) => {}
        other => panic!("a write through a read-only handle: {other:?}"),
    }
    drop(r);
    assert_eq!(read_all(fs, "w"), b"hEAd\0\0tail");
}

/// [`Fs::lock`]: exclusive per name until dropped, another name independent, released by the
/// drop, and kept outside the data (only `LOCK` or `LOCK.…` names appear in the root, and no
/// file's bytes change).
pub fn lock_is_exclusive<F: Fs>(fs: &F) {
    use crate::fs::LockError;
    write_file(fs, "a", b"data");
    let before: Vec<String> = names(fs, "");
    let held = fs.lock("LOCK").expect("the first lock");
    match fs.lock("LOCK") {
        Err(LockError::Held(h)) => assert!(!h.path.is_empty(), "the holder names the lock"),
        Err(e) => panic!("a second lock while held: {e:?}"),
        Ok(_) => panic!("a second lock while held succeeded"),
    }
    let other = fs.lock("OTHER").expect("another name is another lock");
    drop(other);
    let lock_names: Vec<String> = names(fs, "")
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert!(
        lock_names
            .iter()
            .all(|n| crate::store::is_lock_name(n) || n == "OTHER" || n.starts_with("OTHER.")),
        "the lock's files: {lock_names:?}"
    );
    drop(held);
    let again = fs.lock("LOCK").expect("the lock after its release");
    assert_eq!(read_all(fs, "a"), b"data", "locking changed a file's bytes");
    drop(again);
}

/// Generates one `#[test]` per conformance case. `$make` is an expression evaluating to a
/// closure returning `(guard, fs)`; the guard (e.g. a temp dir) lives as long as the test.
#[macro_export]
macro_rules! fs_conformance_tests {
    ($make:expr) => {
        $crate::fs_conformance_tests!(@cases $make;
            write_read_len, handles_share_contents, set_len_truncates_and_extends, open_flags,
            dirs_create_and_list, rename_over, remove, path_confinement, large_unaligned_io,
            type_errors, write_then_sync, lock_is_exclusive);
    };
    (@cases $make:expr; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                let (_guard, fs) = ($make)();
                $crate::conformance::$case(&fs);
            }
        )*
    };
}
