//! One test per durability rule of the models (see the crate docs).

use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fault_fs::{FaultFs, FaultFsConfig, FaultKind, Model, OpKind};
use std::io::ErrorKind;

fn rw() -> OpenOptions {
    OpenOptions::read_write_create()
}

/// Creates `path` with `data`, fsynced, and syncs its parent: fully durable.
fn durable_file(fs: &FaultFs, path: &str, data: &[u8]) {
    let f = fs.open(path, rw()).unwrap();
    f.write_all_at(data, 0).unwrap();
    f.sync_data().unwrap();
    fs.sync_dir(seqstore_core::fs::parent_of(path)).unwrap();
}

/// Every image the enumerator and 200 seeds give, plus the pessimistic one.
fn all_images(fs: &FaultFs) -> Vec<FaultFs> {
    let mut v = fs.crash_images(1000);
    v.push(fs.crash());
    v.extend((0..200).map(|s| fs.crash_seeded(s)));
    v
}

#[test]
fn created_synced_file_without_dir_sync_is_gone_under_posix_kept_under_ordered() {
    for model in Model::ALL {
        let fs = FaultFs::new(model);
        let f = fs.open("f", rw()).unwrap();
        f.write_all_at(b"data", 0).unwrap();
        f.sync_data().unwrap();
        let img = fs.crash();
        match model {
            Model::Posix => assert!(img.list_tree().is_empty(), "{}", img.dump()),
            Model::Ordered => assert_eq!(img.read_file("f").unwrap(), b"data"),
        }
        // with the directory synced it survives under both
        fs.sync_dir("").unwrap();
        assert_eq!(fs.crash().read_file("f").unwrap(), b"data");
    }
}

#[test]
fn unsynced_data_is_lost_under_both_models() {
    for model in Model::ALL {
        let fs = FaultFs::new(model);
        durable_file(&fs, "f", b"old");
        let f = fs.open("f", rw()).unwrap();
        f.write_all_at(b"new", 0).unwrap();
        assert_eq!(fs.crash().read_file("f").unwrap(), b"old", "{model}");
        f.sync_all().unwrap();
        assert_eq!(fs.crash().read_file("f").unwrap(), b"new", "{model}");
    }
}

#[test]
fn rename_without_dir_sync_gives_the_old_name_back_under_posix() {
    let fs = FaultFs::new(Model::Posix);
    durable_file(&fs, "a", b"A");
    fs.rename("a", "b").unwrap();
    let img = fs.crash();
    assert_eq!(img.list_tree(), vec!["a"]);
    assert_eq!(img.read_file("a").unwrap(), b"A");
    // atomic: no image has both names or neither
    for img in all_images(&fs) {
        let t = img.list_tree();
        assert!(t == vec!["a"] || t == vec!["b"], "{t:?}");
    }
    fs.sync_dir("").unwrap();
    assert_eq!(fs.crash().list_tree(), vec!["b"]);
    // Ordered: durable at once
    let fs = FaultFs::new(Model::Ordered);
    durable_file(&fs, "a", b"A");
    fs.rename("a", "b").unwrap();
    assert_eq!(fs.crash().list_tree(), vec!["b"]);
}

#[test]
fn rename_over_an_existing_file_is_undone_whole() {
    let fs = FaultFs::new(Model::Posix);
    durable_file(&fs, "cur", b"v1");
    durable_file(&fs, "tmp", b"v2");
    fs.rename("tmp", "cur").unwrap();
    assert_eq!(fs.crash().dump(), "cur = \"v1\"\ntmp = \"v2\"\n");
    let dumps: Vec<String> = all_images(&fs).iter().map(FaultFs::dump).collect();
    assert!(dumps.contains(&"cur = \"v2\"\n".to_string()));
    assert!(dumps
        .iter()
        .all(|d| d == "cur = \"v2\"\n" || d == "cur = \"v1\"\ntmp = \"v2\"\n"));
}

/// POSIX: a rename between two links to one file does nothing; both names stay (found by
/// wasi-trace's differential test against a real directory, seed 0xca110007).
#[test]
fn rename_between_two_links_of_one_file_keeps_both() {
    let fs = FaultFs::new(Model::Posix);
    durable_file(&fs, "a", b"x");
    fs.hard_link("a", "b").unwrap();
    fs.rename("a", "b").unwrap();
    assert_eq!(fs.list_tree(), vec!["a", "b"]);
    assert_eq!(fs.read_file("a").unwrap(), b"x");
}

#[test]
fn unlink_without_dir_sync_brings_the_file_back_under_posix() {
    let fs = FaultFs::new(Model::Posix);
    durable_file(&fs, "f", b"keep");
    fs.remove_file("f").unwrap();
    assert!(fs.list_tree().is_empty());
    assert_eq!(fs.crash().read_file("f").unwrap(), b"keep");
    fs.sync_dir("").unwrap();
    assert!(fs.crash().list_tree().is_empty());
    // Ordered: gone at once
    let fs = FaultFs::new(Model::Ordered);
    durable_file(&fs, "f", b"keep");
    fs.remove_file("f").unwrap();
    assert!(fs.crash().list_tree().is_empty());
}

#[test]
fn remove_dir_all_without_parent_sync_brings_the_tree_back() {
    let fs = FaultFs::new(Model::Posix);
    fs.create_dir("t").unwrap();
    fs.sync_dir("").unwrap();
    durable_file(&fs, "t/f", b"x");
    fs.remove_dir_all("t").unwrap();
    assert_eq!(fs.crash().list_tree(), vec!["t/", "t/f"]);
    fs.sync_dir("").unwrap();
    assert!(fs.crash().list_tree().is_empty());
}

#[test]
fn set_len_without_fsync_keeps_the_old_length() {
    for model in Model::ALL {
        let fs = FaultFs::new(model);
        durable_file(&fs, "f", b"0123456789");
        let f = fs.open("f", rw()).unwrap();
        f.set_len(3).unwrap();
        assert_eq!(fs.crash().read_file("f").unwrap(), b"0123456789");
        f.set_len(20).unwrap();
        assert_eq!(fs.crash().read_file("f").unwrap(), b"0123456789");
        f.sync_data().unwrap();
        assert_eq!(
            fs.crash().read_file("f").unwrap(),
            b"012\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
        );
        // open with truncate is a set_len(0), lost the same way
        let g = fs
            .open("f", OpenOptions::new().write(true).truncate(true))
            .unwrap();
        assert_eq!(g.len().unwrap(), 0);
        assert_eq!(fs.crash().read_file("f").unwrap().len(), 20);
    }
}

#[test]
fn torn_writes_keep_only_whole_sectors_of_the_new_data() {
    for model in Model::ALL {
        let cfg = FaultFsConfig::new(model).sector_size(512);
        let fs = FaultFs::with_config(cfg).unwrap();
        durable_file(&fs, "f", &[b'o'; 1000]);
        let f = fs.open("f", rw()).unwrap();
        // 2000 bytes at 300: sectors [300..512) [512..1024) [1024..1536) [1536..2048) [2048..2300)
        f.write_all_at(&[b'n'; 2000], 300).unwrap();
        let mut torn = 0;
        for img in all_images(&fs) {
            let d = img.read_file("f").unwrap();
            assert!(
                d.len() >= 1000,
                "{model}: a torn write never shrinks the file"
            );
            let bounds = [0, 300, 512, 1024, 1536, 2048, 2300];
            for w in bounds.windows(2) {
                let (lo, hi) = (w[0], w[1].min(d.len()));
                if lo >= hi {
                    continue;
                }
                let s = &d[lo..hi];
                let all_new = s.iter().all(|&b| b == b'n');
                let all_old = s
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == if lo + i < 1000 { b'o' } else { 0 });
                assert!(
                    all_new || all_old,
                    "{model}: sector {lo}..{hi} mixed: {d:?}"
                );
                if lo < 300 {
                    assert!(all_old, "{model}: bytes before the write changed");
                }
            }
            if d.len() > 1000 && d.len() < 2300
                || d[300] == b'n' && d[2299.min(d.len() - 1)] != b'n'
            {
                torn += 1;
            }
        }
        assert!(torn > 0, "{model}: some image must tear the write");
    }
}

#[test]
fn failed_fsync_data_is_never_durable_even_after_a_later_ok_fsync() {
    for model in Model::ALL {
        let fs = FaultFs::new(model);
        durable_file(&fs, "f", b"v1");
        let f = fs.open("f", rw()).unwrap();
        f.write_all_at(b"v2", 0).unwrap();
        fs.fail_kind(OpKind::SyncData, FaultKind::Eio);
        let e = f.sync_data().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Other);
        assert_eq!(e.to_string(), "EIO (injected)");
        fs.clear_faults();
        // reads still see the data (the page cache keeps it, marked clean)
        assert_eq!(fs.read_file("f").unwrap(), b"v2");
        f.sync_data().unwrap();
        for img in all_images(&fs) {
            assert_eq!(img.read_file("f").unwrap(), b"v1", "{model}");
        }
        // data written after the failure is made durable by a later sync
        f.write_all_at(b"v3", 2).unwrap();
        f.sync_all().unwrap();
        assert_eq!(fs.crash().read_file("f").unwrap(), b"v1v3", "{model}");
    }
}

#[test]
fn failed_sync_dir_loses_the_waiting_entries_for_good() {
    let fs = FaultFs::new(Model::Posix);
    durable_file(&fs, "a", b"A");
    fs.rename("a", "b").unwrap();
    fs.fail_op(fs.op_count(), FaultKind::Eio);
    assert!(fs.sync_dir("").is_err());
    fs.sync_dir("").unwrap();
    assert_eq!(fs.crash().list_tree(), vec!["a"]);
    assert_eq!(fs.list_tree(), vec!["b"]);
}

#[test]
fn mkdir_without_parent_sync_is_gone_under_posix() {
    let fs = FaultFs::new(Model::Posix);
    fs.create_dir("d").unwrap();
    let f = fs.open("d/f", rw()).unwrap();
    f.write_all_at(b"x", 0).unwrap();
    f.sync_all().unwrap();
    fs.sync_dir("d").unwrap();
    // d's entry for f is durable, but d itself is not: everything below it is unreachable
    assert!(fs.crash().list_tree().is_empty());
    fs.sync_dir("").unwrap();
    assert_eq!(fs.crash().dump(), "d/\nd/f = \"x\"\n");
    let fs = FaultFs::new(Model::Ordered);
    fs.create_dir("d").unwrap();
    assert_eq!(fs.crash().list_tree(), vec!["d/"]);
}

#[test]
fn rename_across_directories_needs_both_parents_synced() {
    let fs = FaultFs::new(Model::Posix);
    fs.create_dir("a").unwrap();
    fs.create_dir("b").unwrap();
    fs.sync_dir("").unwrap();
    durable_file(&fs, "a/f", b"F");
    fs.rename("a/f", "b/g").unwrap();
    fs.sync_dir("b").unwrap();
    assert_eq!(fs.crash().list_tree(), vec!["a/", "a/f", "b/"]);
    for img in all_images(&fs) {
        let t = img.list_tree();
        assert!(
            t == vec!["a/", "a/f", "b/"] || t == vec!["a/", "b/", "b/g"],
            "rename is atomic: {t:?}"
        );
    }
    fs.sync_dir("a").unwrap();
    assert_eq!(fs.crash().list_tree(), vec!["a/", "b/", "b/g"]);
}

#[test]
fn a_durable_unlink_of_a_name_from_an_undone_rename_is_skipped() {
    // rename d/x -> e/x, unlink e/x, sync e only: the unlink is durable but the rename is not,
    // so in the image e/x never existed and x is back at d/x; syncing d makes both durable
    let fs = FaultFs::new(Model::Posix);
    fs.create_dir("d").unwrap();
    fs.create_dir("e").unwrap();
    fs.sync_dir("").unwrap();
    durable_file(&fs, "d/x", b"x");
    fs.rename("d/x", "e/x").unwrap();
    fs.remove_file("e/x").unwrap();
    fs.sync_dir("e").unwrap();
    assert_eq!(fs.crash().list_tree(), vec!["d/", "d/x", "e/"]);
    fs.sync_dir("d").unwrap();
    assert_eq!(fs.crash().list_tree(), vec!["d/", "e/"]);
}

#[test]
fn ordered_subset_images_keep_operations_in_order() {
    let fs = FaultFs::new(Model::Ordered);
    let a = fs.open("a", rw()).unwrap();
    a.write_all_at(b"1", 0).unwrap();
    fs.create_dir("d").unwrap();
    let b = fs.open("d/b", rw()).unwrap();
    b.write_all_at(b"2", 0).unwrap();
    fs.rename("a", "d/a").unwrap();
    a.write_all_at(b"3", 1).unwrap();
    let images = all_images(&fs);
    let mut seen = std::collections::BTreeSet::new();
    for img in &images {
        // every namespace operation, in order: a moved into d, b created
        assert_eq!(img.list_tree(), vec!["d/", "d/a", "d/b"]);
        let a = img.read_file("d/a").unwrap();
        let b = img.read_file("d/b").unwrap();
        let state = (a.clone(), b.clone());
        // data in issue order: "1" before "2" before "3"
        let ok = [
            (b"".to_vec(), b"".to_vec()),
            (b"1".to_vec(), b"".to_vec()),
            (b"1".to_vec(), b"2".to_vec()),
            (b"13".to_vec(), b"2".to_vec()),
        ];
        assert!(ok.contains(&state), "out of order: {state:?}");
        seen.insert(state);
    }
    assert_eq!(seen.len(), 4, "every prefix shows up");
}

#[test]
fn posix_subsets_may_keep_a_later_operation_without_an_earlier_one() {
    let fs = FaultFs::new(Model::Posix);
    durable_file(&fs, "a", b"");
    durable_file(&fs, "b", b"");
    let a = fs.open("a", rw()).unwrap();
    let b = fs.open("b", rw()).unwrap();
    a.write_all_at(b"1", 0).unwrap();
    b.write_all_at(b"2", 0).unwrap();
    let found = all_images(&fs)
        .iter()
        .any(|i| i.read_file("a").unwrap().is_empty() && i.read_file("b").unwrap() == b"2");
    assert!(found);
}

#[test]
fn handles_follow_the_inode() {
    let fs = FaultFs::new(Model::Posix);
    fs.sync_dir("").unwrap();
    let h = fs.open("f", rw()).unwrap();
    fs.sync_dir("").unwrap();
    fs.rename("f", "g").unwrap();
    h.write_all_at(b"via old handle", 0).unwrap();
    h.sync_data().unwrap();
    fs.sync_dir("").unwrap();
    assert_eq!(fs.crash().read_file("g").unwrap(), b"via old handle");
    // removed but open: still writable, gone at the crash
    fs.remove_file("g").unwrap();
    h.write_all_at(b"more", 0).unwrap();
    h.sync_all().unwrap();
    let mut buf = [0u8; 4];
    h.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"more");
    fs.sync_dir("").unwrap();
    assert!(fs.crash().list_tree().is_empty());
}

#[test]
fn images_are_fresh_durable_and_crashable_again() {
    let fs = FaultFs::new(Model::Posix);
    durable_file(&fs, "f", b"x");
    let f = fs.open("f", rw()).unwrap();
    f.write_all_at(b"y", 1).unwrap();
    for img in fs.crash_images(100) {
        assert_eq!(img.op_count(), 0);
        assert_eq!(img.crash().dump(), img.dump());
        assert_eq!(img.crash_images(100).len(), 1);
    }
    // writing to an image does not touch the original
    let img = fs.crash();
    let g = img.open("f", rw()).unwrap();
    g.write_all_at(b"zz", 0).unwrap();
    assert_eq!(fs.read_file("f").unwrap(), b"xy");
}

#[test]
fn crash_images_are_distinct_and_deterministic() {
    let build = || {
        let fs = FaultFs::new(Model::Posix);
        let f = fs.open("log", rw()).unwrap();
        for i in 0..4u8 {
            f.write_all_at(&[i; 700], u64::from(i) * 700).unwrap();
        }
        fs.create_dir("x").unwrap();
        fs
    };
    let a: Vec<String> = build()
        .crash_images(1000)
        .iter()
        .map(FaultFs::dump)
        .collect();
    let b: Vec<String> = build()
        .crash_images(1000)
        .iter()
        .map(FaultFs::dump)
        .collect();
    assert_eq!(a, b);
    let set: std::collections::BTreeSet<&String> = a.iter().collect();
    assert_eq!(set.len(), a.len(), "deduplicated");
    assert!(a.len() > 6, "{}", a.len());
    assert_eq!(build().crash_images(3).len(), 3);
    for seed in [0, 1, 99] {
        assert_eq!(
            build().crash_seeded(seed).dump(),
            build().crash_seeded(seed).dump()
        );
    }
}

#[test]
fn injected_faults() {
    let fs = FaultFs::new(Model::Posix);
    let f = fs.open("f", rw()).unwrap();
    // the next operation fails with ENOSPC, without effect
    fs.fail_op(fs.op_count(), FaultKind::Enospc);
    assert_eq!(
        f.write_all_at(b"x", 0).unwrap_err().kind(),
        ErrorKind::StorageFull
    );
    assert_eq!(f.len().unwrap(), 0);
    f.write_all_at(b"x", 0).unwrap();
    // every op of a kind
    fs.fail_kind(OpKind::ReadDir, FaultKind::Eio);
    assert_eq!(fs.read_dir("").unwrap_err().to_string(), "EIO (injected)");
    fs.clear_faults();
    assert_eq!(fs.read_dir("").unwrap().len(), 1);
    // capacity
    fs.set_capacity(Some(10));
    f.write_all_at(b"123456789", 1).unwrap();
    assert_eq!(
        f.write_all_at(b"!", 10).unwrap_err().kind(),
        ErrorKind::StorageFull
    );
    f.write_all_at(b"!", 9).unwrap(); // overwrite needs no space
    let g = fs.open("g", rw()).unwrap();
    assert_eq!(g.set_len(1).unwrap_err().kind(), ErrorKind::StorageFull);
    fs.set_capacity(None);
    g.set_len(1).unwrap();
    // the trace records every call, failed ones included, with this file as call site
    let t = fs.trace();
    assert_eq!(t.len() as u64, fs.op_count());
    assert!(t.iter().all(|e| e.call_site.file.ends_with("model.rs")));
    assert_eq!(t[1].result, Err(ErrorKind::StorageFull));
}

#[test]
fn bit_flips_on_read_are_seeded() {
    let read = |seed| {
        let fs = FaultFs::new(Model::Posix);
        let f = fs.open("f", rw()).unwrap();
        f.write_all_at(&[0u8; 64], 0).unwrap();
        fs.bit_flip_on_read(seed, 1.0).unwrap();
        let mut buf = [0u8; 64];
        f.read_exact_at(&mut buf, 0).unwrap();
        buf
    };
    let a = read(5);
    assert_eq!(a, read(5));
    assert_eq!(a.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
    let fs = FaultFs::new(Model::Posix);
    assert!(fs.bit_flip_on_read(0, 1.5).is_err());
    assert!(fs.bit_flip_on_read(0, f64::NAN).is_err());
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let fs = FaultFs::new(Model::Posix);
    let f = fs.open("f", rw()).unwrap();
    assert_eq!(
        f.write_all_at(b"x", u64::MAX).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        f.write_all_at(b"x", 1 << 40).unwrap_err().kind(),
        ErrorKind::FileTooLarge
    );
    assert_eq!(
        f.set_len(u64::MAX).unwrap_err().kind(),
        ErrorKind::FileTooLarge
    );
    let long = "x".repeat(256);
    assert_eq!(
        fs.open(&long, rw()).unwrap_err().kind(),
        ErrorKind::InvalidFilename
    );
    assert!(FaultFs::with_config(FaultFsConfig::new(Model::Posix).sector_size(0)).is_err());
    assert!("posix".parse::<Model>().is_ok());
    assert!("Ordered".parse::<Model>().is_ok());
    assert!("ext4".parse::<Model>().is_err());
    assert_eq!(Model::Ordered.to_string(), "ordered");
    let r = fs.open("f", OpenOptions::read_only()).unwrap();
    assert!(r.write_all_at(b"x", 0).is_err());
    assert_eq!(r.set_len(0).unwrap_err().kind(), ErrorKind::InvalidInput);
}
