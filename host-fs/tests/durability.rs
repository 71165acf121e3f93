//! Durability smoke test (write, sync, reopen, read back) and shared-handle positioned I/O.
//! Builds for wasm32-wasip2 too.

use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fs::HostFs;

/// A fresh temporary directory (below the preopened `/tmp` under WASI, where
/// `std::env::temp_dir` panics).
fn scratch() -> tempfile::TempDir {
    if cfg!(target_os = "wasi") {
        tempfile::tempdir_in("/tmp").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

fn read_all(fs: &HostFs, path: &str) -> Vec<u8> {
    let f = fs.open(path, OpenOptions::read_only()).unwrap();
    let mut buf = vec![0u8; f.len().unwrap() as usize];
    f.read_exact_at(&mut buf, 0).unwrap();
    buf
}

#[test]
fn write_sync_reopen_read_back() {
    let d = scratch();
    {
        let fs = HostFs::create(d.path().join("store")).unwrap();
        fs.create_dir("seg").unwrap();
        fs.sync_dir("").unwrap();
        let f = fs
            .open("seg/0.tmp", OpenOptions::read_write_create())
            .unwrap();
        f.write_all_at(b"record one|", 0).unwrap();
        f.write_all_at(b"record two", 11).unwrap();
        f.sync_data().unwrap();
        f.sync_all().unwrap();
        drop(f);
        // The usual atomic-replace dance: write a temp, sync it, rename, sync the directory.
        fs.rename("seg/0.tmp", "seg/0.blk").unwrap();
        fs.sync_dir("seg").unwrap();
        let m = fs
            .open("MANIFEST", OpenOptions::read_write_create())
            .unwrap();
        m.write_all_at(b"seg/0.blk", 0).unwrap();
        m.sync_data().unwrap();
        fs.sync_dir(".").unwrap();
    }
    let fs = HostFs::open(d.path().join("store")).unwrap();
    assert_eq!(read_all(&fs, "MANIFEST"), b"seg/0.blk");
    assert_eq!(read_all(&fs, "seg/0.blk"), b"record one|record two");
    let names: Vec<_> = fs
        .read_dir("seg")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["0.blk"]);
    assert_eq!(
        std::fs::read(d.path().join("store/seg/0.blk")).unwrap(),
        b"record one|record two"
    );
}

#[cfg(not(target_os = "wasi"))] // no threads on wasm32-wasip2
#[test]
fn one_handle_shared_by_threads() {
    let d = scratch();
    let fs = HostFs::open(d.path()).unwrap();
    let f = std::sync::Arc::new(fs.open("f", OpenOptions::read_write_create()).unwrap());
    let threads: Vec<_> = (0..8u8)
        .map(|i| {
            let f = std::sync::Arc::clone(&f);
            std::thread::spawn(move || {
                let block = [i; 4096];
                for round in 0..16u64 {
                    let off = (round * 8 + i as u64) * 4096;
                    f.write_all_at(&block, off).unwrap();
                    let mut back = [0u8; 4096];
                    f.read_exact_at(&mut back, off).unwrap();
                    assert_eq!(back, block);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(f.len().unwrap(), 16 * 8 * 4096);
    f.sync_data().unwrap();
    let data = read_all(&fs, "f");
    for (n, chunk) in data.chunks(4096).enumerate() {
        assert!(chunk.iter().all(|&b| b as usize == n % 8), "block {n}");
    }
}
