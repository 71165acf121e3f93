//! Shared test support: a store root beside an "outside" directory, and snapshots of what lies
//! outside the root so a test can prove nothing there changed.

#![allow(dead_code)] // each test binary uses a part

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// One filesystem object as seen without following symlinks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File(Vec<u8>),
    Dir,
    Symlink(PathBuf),
    Other,
}

/// Everything below `dir` (relative names, not following symlinks), skipping the subtree
/// `skip` if given.
pub fn snapshot(dir: &Path, skip: Option<&Path>) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    walk(dir, dir, skip, &mut out);
    out
}

fn walk(base: &Path, dir: &Path, skip: Option<&Path>, out: &mut BTreeMap<PathBuf, Node>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if Some(path.as_path()) == skip {
            out.insert(path.strip_prefix(base).unwrap().to_path_buf(), Node::Other);
            continue;
        }
        let md = fs::symlink_metadata(&path).unwrap();
        let node = if md.file_type().is_symlink() {
            Node::Symlink(fs::read_link(&path).unwrap())
        } else if md.is_dir() {
            walk(base, &path, skip, out);
            Node::Dir
        } else if md.is_file() {
            Node::File(fs::read(&path).unwrap())
        } else {
            Node::Other
        };
        out.insert(path.strip_prefix(base).unwrap().to_path_buf(), node);
    }
}

/// A temporary tree:
/// ```text
/// tmp/
///   outside/secret            "top secret"
///   outside/sub/deep          "deep"
///   root/                     the store root
///     inside/f                "inside"
///     link_out      -> ../outside          (relative, escapes)
///     link_abs      -> <tmp>/outside        (absolute, escapes)
///     link_file     -> ../outside/secret   (relative, escapes, to a file)
///     link_abs_file -> <tmp>/outside/secret (absolute, escapes, to a file)
///     link_dangling -> ../outside/planted  (relative, escapes, target missing)
///     link_in       -> inside              (relative, stays inside)
///     link_in_file  -> inside/f            (relative, stays inside, to a file)
///     link_in_abs   -> <tmp>/root/inside   (absolute, but pointing inside)
/// ```
pub struct Tree {
    pub tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub outside: PathBuf,
}

pub const ESCAPING_DIR_LINKS: [&str; 2] = ["link_out", "link_abs"];
pub const ESCAPING_FILE_LINKS: [&str; 3] = ["link_file", "link_abs_file", "link_dangling"];

impl Tree {
    pub fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("secret"), b"top secret").unwrap();
        fs::create_dir(outside.join("sub")).unwrap();
        fs::write(outside.join("sub/deep"), b"deep").unwrap();
        fs::create_dir(&root).unwrap();
        fs::create_dir(root.join("inside")).unwrap();
        fs::write(root.join("inside/f"), b"inside").unwrap();
        symlink("../outside", root.join("link_out")).unwrap();
        symlink(&outside, root.join("link_abs")).unwrap();
        symlink("../outside/secret", root.join("link_file")).unwrap();
        symlink(outside.join("secret"), root.join("link_abs_file")).unwrap();
        symlink("../outside/planted", root.join("link_dangling")).unwrap();
        symlink("inside", root.join("link_in")).unwrap();
        symlink("inside/f", root.join("link_in_file")).unwrap();
        symlink(root.join("inside"), root.join("link_in_abs")).unwrap();
        Tree { tmp, root, outside }
    }

    pub fn base(&self) -> PathBuf {
        self.root.parent().unwrap().to_path_buf()
    }

    /// Everything in the temporary directory except the store root's subtree.
    pub fn outside_snapshot(&self) -> BTreeMap<PathBuf, Node> {
        snapshot(&self.base(), Some(&self.root))
    }
}
