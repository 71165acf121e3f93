//! Nothing outside the store root can be reached: not with `..`, not with an absolute path, not
//! through a symlink (absolute or relative target) that leads out.
//!
//! Native only: it needs symlinks and cap-std's confinement (under WASI the runtime confines).
#![cfg(not(target_os = "wasi"))]

mod common;

use common::{Tree, ESCAPING_DIR_LINKS, ESCAPING_FILE_LINKS};
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fs::HostFs;
use std::io::ErrorKind::{self, PermissionDenied};

fn rw() -> OpenOptions {
    OpenOptions::read_write_create()
}

#[track_caller]
fn denied<T: std::fmt::Debug>(what: &str, r: std::io::Result<T>) {
    match r {
        Err(e) => assert_eq!(e.kind(), PermissionDenied, "{what}: {e}"),
        Ok(v) => panic!("{what}: succeeded with {v:?}, expected PermissionDenied"),
    }
}

/// Refused, and the message says what was refused and why, once: the symlink `link` leads
/// outside (the operation and the path are the store's part of the message, `Error::Io`).
#[track_caller]
fn refused<T: std::fmt::Debug>(link: &str, what: &str, r: std::io::Result<T>) {
    match r {
        Err(e) => {
            assert_eq!(e.kind(), PermissionDenied, "{what}: {e}");
            assert_eq!(
                e.to_string(),
                format!("refused: {link:?} is a symlink leading outside the store directory"),
                "{what}"
            );
        }
        Ok(v) => panic!("{what}: succeeded with {v:?}, expected PermissionDenied"),
    }
}

#[test]
fn symlinks_to_outside_directories_are_refused() {
    let t = Tree::new();
    let before = t.outside_snapshot();
    let fs = HostFs::open(&t.root).unwrap();
    for link in ESCAPING_DIR_LINKS {
        let p = |rest: &str| format!("{link}{rest}");
        refused(link, "read_dir", fs.read_dir(&p("")));
        refused(link, "read_dir sub", fs.read_dir(&p("/sub")));
        refused(link, "sync_dir", fs.sync_dir(&p("")));
        refused(
            link,
            "open secret",
            fs.open(&p("/secret"), OpenOptions::read_only()),
        );
        refused(
            link,
            "open secret rw",
            fs.open(&p("/secret"), rw().truncate(true)),
        );
        refused(link, "open new", fs.open(&p("/planted"), rw()));
        refused(
            link,
            "open create_new",
            fs.open(
                &p("/planted"),
                OpenOptions::new().write(true).create_new(true),
            ),
        );
        refused(
            link,
            "open the link",
            fs.open(&p(""), OpenOptions::read_only()),
        );
        refused(link, "create_dir", fs.create_dir(&p("/newdir")));
        // the name exists, as a symlink: what is refused is the symlink, not "File exists"
        refused(link, "create_dir the link", fs.create_dir(link));
        refused(link, "create_dir deep", fs.create_dir(&p("/sub/newdir")));
        refused(link, "remove_file", fs.remove_file(&p("/secret")));
        refused(link, "remove_file deep", fs.remove_file(&p("/sub/deep")));
        refused(link, "remove_dir_all", fs.remove_dir_all(&p("/sub")));
        refused(link, "rename out->in", fs.rename(&p("/secret"), "stolen"));
        refused(
            link,
            "rename in->out",
            fs.rename("inside/f", &p("/planted")),
        );
        refused(
            link,
            "rename out->out",
            fs.rename(&p("/secret"), &p("/renamed")),
        );
    }
    assert_eq!(
        t.outside_snapshot(),
        before,
        "something outside the root changed"
    );
    assert!(
        t.root.join("inside/f").exists(),
        "rename in->out removed the source"
    );
}

#[test]
fn symlinks_to_outside_files_are_refused() {
    let t = Tree::new();
    let before = t.outside_snapshot();
    let fs = HostFs::open(&t.root).unwrap();
    for link in ESCAPING_FILE_LINKS {
        refused(link, "open read", fs.open(link, OpenOptions::read_only()));
        refused(
            link,
            "open write",
            fs.open(link, OpenOptions::new().write(true)),
        );
        refused(link, "open create", fs.open(link, rw()));
        refused(link, "open truncate", fs.open(link, rw().truncate(true)));
        refused(link, "read_dir", fs.read_dir(link));
        refused(link, "sync_dir", fs.sync_dir(link));
        refused(
            link,
            "create_dir below",
            fs.create_dir(&format!("{link}/x")),
        );
        refused(link, "create_dir the link", fs.create_dir(link));
    }
    assert_eq!(
        t.outside_snapshot(),
        before,
        "something outside the root changed"
    );
    assert!(!t.outside.join("planted").exists());
}

#[test]
fn dot_dot_and_absolute_paths_are_refused() {
    let t = Tree::new();
    let before = t.outside_snapshot();
    let fs = HostFs::open(&t.root).unwrap();
    let outside = t.outside.to_str().unwrap().to_owned();
    let abs_secret = format!("{outside}/secret");
    let bad = [
        "..",
        "../outside",
        "../outside/secret",
        "inside/../../outside/secret",
        "inside/..",
        "./..",
        "/",
        "/etc/passwd",
        &outside,
        &abs_secret,
    ];
    for p in bad {
        denied("open", fs.open(p, OpenOptions::read_only()));
        denied("open create", fs.open(p, rw()));
        denied("create_dir", fs.create_dir(p));
        denied("read_dir", fs.read_dir(p));
        denied("remove_file", fs.remove_file(p));
        denied("remove_dir_all", fs.remove_dir_all(p));
        denied("sync_dir", fs.sync_dir(p));
        denied("rename from", fs.rename(p, "x"));
        denied("rename to", fs.rename("inside/f", p));
    }
    assert_eq!(t.outside_snapshot(), before);
    assert!(t.root.join("inside/f").exists());
}

#[test]
fn removing_or_renaming_an_escaping_link_acts_on_the_link_only() {
    let t = Tree::new();
    let before = t.outside_snapshot();
    let fs = HostFs::open(&t.root).unwrap();
    fs.remove_file("link_file").unwrap();
    fs.remove_dir_all("link_out").unwrap(); // a symlink: removed, not followed
    fs.rename("link_abs", "moved_link").unwrap();
    fs.rename("inside/f", "link_abs_file").unwrap(); // replaces the link, not its target
    fs.remove_file("link_dangling").unwrap();
    assert_eq!(t.outside_snapshot(), before);
    assert!(std::fs::symlink_metadata(t.root.join("moved_link"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read(t.root.join("link_abs_file")).unwrap(),
        b"inside"
    );
    denied("read_dir moved link", fs.read_dir("moved_link"));
}

#[test]
fn listing_reports_symlinks_as_not_directories() {
    let t = Tree::new();
    let fs = HostFs::open(&t.root).unwrap();
    let entries = fs.read_dir("").unwrap();
    let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "read_dir sorts by name");
    for e in &entries {
        assert_eq!(e.is_dir, e.name == "inside", "{e:?}");
    }
}

#[test]
fn symlinks_staying_inside_the_root_are_followed() {
    let t = Tree::new();
    let fs = HostFs::open(&t.root).unwrap();
    let names: Vec<_> = fs
        .read_dir("link_in")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["f"]);
    let f = fs.open("link_in/f", OpenOptions::read_only()).unwrap();
    let mut buf = [0u8; 6];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"inside");
    let f = fs
        .open("link_in_file", OpenOptions::new().write(true))
        .unwrap();
    f.write_all_at(b"IN", 0).unwrap();
    assert_eq!(std::fs::read(t.root.join("inside/f")).unwrap(), b"INside");
    fs.create_dir("link_in/d").unwrap();
    fs.sync_dir("link_in").unwrap();
    fs.sync_dir("link_in/d").unwrap();
    assert!(t.root.join("inside/d").is_dir());
}

/// cap-std refuses every absolute symlink target, even one that points back inside the root
/// (it cannot tell without resolving the root's own absolute path, which it never does).
#[test]
fn absolute_symlinks_are_refused_even_when_pointing_inside() {
    let t = Tree::new();
    let fs = HostFs::open(&t.root).unwrap();
    denied("read_dir", fs.read_dir("link_in_abs"));
    denied("open", fs.open("link_in_abs/f", OpenOptions::read_only()));
}

#[test]
fn a_root_that_is_itself_a_symlink_is_fine() {
    // The root path is resolved with ambient authority once; only what lies below is confined.
    let t = Tree::new();
    let fs = HostFs::open(t.root.join("link_in")).unwrap();
    assert_eq!(fs.read_dir("").unwrap().len(), 1);
    denied(
        "escape from the linked root",
        fs.open("../outside/secret", rw()),
    );
}

#[test]
fn root_operations() {
    let t = Tree::new();
    let fs = HostFs::open(&t.root).unwrap();
    let kind = |r: std::io::Result<()>| r.unwrap_err().kind();
    assert_eq!(
        fs.open("", OpenOptions::read_only()).unwrap_err().kind(),
        ErrorKind::IsADirectory
    );
    assert_eq!(kind(fs.create_dir(".")), ErrorKind::AlreadyExists);
    assert_eq!(kind(fs.remove_file("")), ErrorKind::IsADirectory);
    assert_eq!(kind(fs.remove_dir_all("")), ErrorKind::InvalidInput);
    assert_eq!(kind(fs.rename("", "x")), ErrorKind::InvalidInput);
    assert_eq!(kind(fs.rename("inside", ".")), ErrorKind::InvalidInput);
    fs.sync_dir(".").unwrap();
    assert!(t.root.join("inside/f").exists());
}

#[test]
fn error_kinds() {
    let t = Tree::new();
    let fs = HostFs::open(&t.root).unwrap();
    let kind = |r: std::io::Result<()>| r.unwrap_err().kind();
    // open on a directory, for reading as well as writing
    assert_eq!(
        fs.open("inside", OpenOptions::read_only())
            .unwrap_err()
            .kind(),
        ErrorKind::IsADirectory
    );
    assert_eq!(
        fs.open("inside", rw()).unwrap_err().kind(),
        ErrorKind::IsADirectory
    );
    assert_eq!(
        fs.open("inside/f/x", rw()).unwrap_err().kind(),
        ErrorKind::NotADirectory
    );
    assert_eq!(kind(fs.sync_dir("inside/f")), ErrorKind::NotADirectory);
    assert_eq!(
        fs.read_dir("inside/f").unwrap_err().kind(),
        ErrorKind::NotADirectory
    );
    assert_eq!(
        kind(fs.remove_dir_all("inside/f")),
        ErrorKind::NotADirectory
    );
    assert_eq!(kind(fs.remove_file("inside")), ErrorKind::IsADirectory);
    fs.create_dir("other").unwrap();
    fs.create_dir("other/x").unwrap();
    assert_eq!(
        kind(fs.rename("inside", "other")),
        ErrorKind::DirectoryNotEmpty
    );
    assert_eq!(
        kind(fs.rename("inside/f", "other")),
        ErrorKind::IsADirectory
    );
    assert_eq!(kind(fs.create_dir("inside/f")), ErrorKind::AlreadyExists);
    let long = "n".repeat(300);
    assert_eq!(kind(fs.create_dir(&long)), ErrorKind::InvalidFilename);
    assert_eq!(kind(fs.create_dir("a\\b")), ErrorKind::InvalidInput);
    assert_eq!(kind(fs.create_dir("a\0b")), ErrorKind::InvalidInput);
    assert_eq!(kind(fs.create_dir("a//b")), ErrorKind::InvalidInput);
    assert_eq!(kind(fs.create_dir("inside/")), ErrorKind::InvalidInput);
    // errors say the reason only: the store's `Error::Io` names the operation and the path,
    // so repeating them here would print them twice
    let e = fs.open("nope/x", OpenOptions::read_only()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    let msg = e.to_string();
    assert!(!msg.contains("open") && !msg.contains("nope/x"), "{msg}");
    // a file opened write-only cannot be read
    let w = fs.open("inside/f", OpenOptions::new().write(true)).unwrap();
    assert!(w.read_at(&mut [0u8; 1], 0).is_err());
}

#[test]
fn open_missing_root_fails() {
    let t = Tree::new();
    assert_eq!(
        HostFs::open(t.root.join("missing")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        HostFs::open(t.root.join("inside/f")).unwrap_err().kind(),
        ErrorKind::NotADirectory
    );
    let fs = HostFs::create(t.root.join("new/deeper")).unwrap();
    fs.create_dir("x").unwrap();
    assert!(t.root.join("new/deeper/x").is_dir());
    let dir = seqstore_fs::cap_std::fs::Dir::open_ambient_dir(
        &t.root,
        seqstore_fs::cap_std::ambient_authority(),
    )
    .unwrap();
    let fs = HostFs::from_dir(dir);
    assert!(fs.read_dir("").unwrap().iter().any(|e| e.name == "new"));
}

#[test]
fn non_utf8_names_fail_read_dir_with_invalid_data() {
    use std::os::unix::ffi::OsStrExt;
    let t = Tree::new();
    let name = std::ffi::OsStr::from_bytes(b"bad\xffname");
    if std::fs::write(t.root.join("inside").join(name), b"").is_err() {
        return; // a filesystem that refuses non-UTF-8 names cannot have them either
    }
    let fs = HostFs::open(&t.root).unwrap();
    assert_eq!(
        fs.read_dir("inside").unwrap_err().kind(),
        ErrorKind::InvalidData
    );
    assert!(fs.read_dir("").is_ok());
}
