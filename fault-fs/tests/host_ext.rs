//! `FaultFs::from_dir`, `hard_link`, `exchange` and `stat`: the extensions for replaying and
//! serving real programs.

use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fault_fs::{FaultFs, FaultFsConfig, Model, Stat};

fn write(fs: &FaultFs, path: &str, bytes: &[u8], sync: bool) {
    let f = fs.open(path, OpenOptions::read_write_create()).unwrap();
    f.write_all_at(bytes, 0).unwrap();
    if sync {
        f.sync_data().unwrap();
    }
}

#[test]
fn from_dir_copies_the_tree_and_all_of_it_is_durable() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("a/b")).unwrap();
    std::fs::write(d.path().join("a/b/f"), b"hello").unwrap();
    std::fs::write(d.path().join("top"), b"").unwrap();
    for model in Model::ALL {
        let fs = FaultFs::from_dir(FaultFsConfig::new(model), d.path()).unwrap();
        assert_eq!(fs.list_tree(), ["a/", "a/b/", "a/b/f", "top"]);
        assert_eq!(fs.op_count(), 0, "the copy is not part of the trace");
        let crashed = fs.crash();
        assert_eq!(
            crashed.dump(),
            fs.dump(),
            "{model}: everything loaded is durable"
        );
        assert_eq!(crashed.read_file("a/b/f").unwrap(), b"hello");
    }
}

#[cfg(unix)]
#[test]
fn from_dir_rejects_a_symlink_by_name() {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("nowhere", d.path().join("link")).unwrap();
    let e = FaultFs::from_dir(FaultFsConfig::default(), d.path()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
    assert!(e.to_string().contains("link"), "{e}");
}

#[test]
fn hard_link_is_a_second_name_that_waits_for_its_directory() {
    let fs = FaultFs::new(Model::Posix);
    write(&fs, "f", b"data", true);
    fs.sync_dir("").unwrap();
    fs.hard_link("f", "g").unwrap();
    assert_eq!(fs.read_file("g").unwrap(), b"data");
    // one inode: a write through one name is seen through the other
    let f = fs
        .open("g", OpenOptions::new().read(true).write(true))
        .unwrap();
    f.write_all_at(b"D", 0).unwrap();
    assert_eq!(fs.read_file("f").unwrap(), b"Data");
    assert_eq!(fs.crash().list_tree(), ["f"], "the link is not durable yet");
    fs.sync_dir("").unwrap();
    assert_eq!(fs.crash().list_tree(), ["f", "g"]);
    // unlinking one name leaves the other
    fs.remove_file("f").unwrap();
    fs.sync_dir("").unwrap();
    assert_eq!(fs.crash().read_file("g").unwrap(), b"data");
    assert!(fs.hard_link("nope", "x").is_err());
    assert!(fs.hard_link("g", "g").is_err());
}

#[test]
fn exchange_is_atomic_in_every_image() {
    let fs = FaultFs::new(Model::Posix);
    fs.create_dir("d").unwrap();
    write(&fs, "a", b"A", true);
    write(&fs, "d/b", b"B", true);
    fs.sync_dir("").unwrap();
    fs.sync_dir("d").unwrap();
    fs.exchange("a", "d/b").unwrap();
    assert_eq!(fs.read_file("a").unwrap(), b"B");
    assert_eq!(fs.read_file("d/b").unwrap(), b"A");
    let images = fs.crash_images(usize::MAX);
    assert_eq!(images.len(), 2, "swapped or not, nothing in between");
    for img in &images {
        let (a, b) = (img.read_file("a").unwrap(), img.read_file("d/b").unwrap());
        assert_ne!(a, b, "an image holds both files once");
    }
    // waits for both parents
    fs.sync_dir("").unwrap();
    assert_eq!(fs.crash().read_file("a").unwrap(), b"A");
    fs.sync_dir("d").unwrap();
    assert_eq!(fs.crash().read_file("a").unwrap(), b"B");
    // under Ordered it is durable at once
    let o = FaultFs::new(Model::Ordered);
    write(&o, "x", b"X", true);
    write(&o, "y", b"Y", true);
    o.exchange("x", "y").unwrap();
    assert_eq!(o.crash().read_file("x").unwrap(), b"Y");
    assert!(o.exchange("x", "missing").is_err());
}

#[test]
fn stat_answers_from_the_live_tree_without_an_operation() {
    let fs = FaultFs::new(Model::Posix);
    fs.create_dir("d").unwrap();
    write(&fs, "d/f", b"12345", false);
    let ops = fs.op_count();
    assert_eq!(fs.stat("").unwrap(), Stat::Dir);
    assert_eq!(fs.stat("d").unwrap(), Stat::Dir);
    assert_eq!(fs.stat("d/f").unwrap(), Stat::File { len: 5 });
    for missing in ["e", "d/g", "d/f/x"] {
        assert!(fs.stat(missing).is_err(), "{missing}");
    }
    assert_eq!(fs.op_count(), ops, "a stat is not traced");
    // the live tree, not the durable one: the crash loses the unsynced file and its name
    assert!(fs.crash().stat("d/f").is_err());
}
