//! A path fuzzer in the spirit of cap-std's own: random operations on random paths built from
//! awkward components, against a root holding symlinks that lead out. After every case nothing
//! outside the root may have changed, and no call may panic.
//!
//! Native only: it needs symlinks and cap-std's confinement (under WASI the runtime confines).
#![cfg(not(target_os = "wasi"))]

mod common;

use common::Tree;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fs::HostFs;

/// Components paths are made of: names that exist, `..`, `.`, empty ones, a slash (so `//` and
/// leading slashes appear), the escaping and inside symlinks, and names at and past NAME_MAX.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("a".to_owned()),
        4 => Just("b".to_owned()),
        1 => Just("..".to_owned()),
        1 => Just(".".to_owned()),
        1 => Just(String::new()),
        1 => Just("/".to_owned()),
        2 => Just("link_out".to_owned()),
        2 => Just("link_abs".to_owned()),
        2 => Just("link_file".to_owned()),
        2 => Just("link_in".to_owned()),
        1 => Just("l".repeat(255)),
        1 => Just("L".repeat(256)),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(component(), 0..5).prop_map(|parts| parts.join("/"))
}

#[derive(Debug, Clone)]
enum Op {
    Open {
        path: String,
        opts: OpenOptions,
        write: bool,
    },
    CreateDir(String),
    ReadDir(String),
    Rename(String, String),
    RemoveFile(String),
    RemoveDirAll(String),
    SyncDir(String),
}

fn op() -> impl Strategy<Value = Op> {
    let random = any::<[bool; 5]>().prop_map(|[r, w, c, cn, t]| {
        OpenOptions::new()
            .read(r)
            .write(w)
            .create(c)
            .create_new(cn)
            .truncate(t)
    });
    let opts = prop_oneof![
        2 => Just(OpenOptions::read_only()),
        3 => Just(OpenOptions::read_write_create()),
        1 => Just(OpenOptions::read_write_create().truncate(true)),
        1 => Just(OpenOptions::new().write(true).create_new(true)),
        1 => Just(OpenOptions::new().write(true)),
        2 => random,
    ];
    prop_oneof![
        3 => (path(), opts, any::<bool>()).prop_map(|(path, opts, write)| Op::Open { path, opts, write }),
        2 => path().prop_map(Op::CreateDir),
        1 => path().prop_map(Op::ReadDir),
        2 => (path(), path()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => path().prop_map(Op::RemoveFile),
        1 => path().prop_map(Op::RemoveDirAll),
        1 => path().prop_map(Op::SyncDir),
    ]
}

/// Whether `name` at the top of the root is (still) a symlink leading outside.
fn escapes(t: &Tree, name: &str) -> bool {
    match std::fs::read_link(t.root.join(name)) {
        Ok(target) => target.to_string_lossy().contains("outside"),
        Err(_) => false,
    }
}

/// Whether `path` goes *through* an escaping symlink at the top of the root, following it
/// (`follow_last`: also when the link is the last component).
fn through_escape(t: &Tree, path: &str, follow_last: bool) -> bool {
    let Ok(parts) = seqstore_core::fs::split_path(path) else {
        return false;
    };
    match parts.first() {
        Some(first) if escapes(t, first) => parts.len() > 1 || follow_last,
        _ => false,
    }
}

impl Op {
    /// The paths the op takes, and whether it follows a symlink in the last component.
    fn paths(&self) -> (Vec<&str>, bool) {
        match self {
            Op::Open { path, .. } => (vec![path], true),
            Op::ReadDir(p) | Op::SyncDir(p) => (vec![p], true),
            Op::CreateDir(p) | Op::RemoveFile(p) | Op::RemoveDirAll(p) => (vec![p], false),
            Op::Rename(a, b) => (vec![a, b], false),
        }
    }

    fn apply(&self, fs: &HostFs) -> std::io::Result<()> {
        match self {
            Op::Open { path, opts, write } => {
                let f = fs.open(path, *opts)?;
                if *write && opts.write {
                    f.write_all_at(b"fuzz", 3)?;
                    f.sync_data()?;
                }
                Ok(())
            }
            Op::CreateDir(p) => fs.create_dir(p),
            Op::ReadDir(p) => fs.read_dir(p).map(drop),
            Op::Rename(a, b) => fs.rename(a, b),
            Op::RemoveFile(p) => fs.remove_file(p),
            Op::RemoveDirAll(p) => fs.remove_dir_all(p),
            Op::SyncDir(p) => fs.sync_dir(p),
        }
    }
}

fn run(t: &Tree, fs: &HostFs, op: &Op) -> Result<(), TestCaseError> {
    let (paths, follow_last) = op.paths();
    // The kind every backend must give for a malformed path (absolute or `..`:
    // PermissionDenied; empty component, NUL, backslash: InvalidInput): the first path's that
    // `split_path` refuses. `open` checks its options before its path.
    let opts_error = match op {
        Op::Open { opts, .. } => opts.validate().err().map(|e| e.kind()),
        _ => None,
    };
    let path_error = paths
        .iter()
        .find_map(|p| seqstore_core::fs::split_path(p).err())
        .map(|e| e.kind());
    let through = paths.iter().any(|p| through_escape(t, p, follow_last));
    let result = op.apply(fs);
    if let Some(expected) = opts_error.or(path_error) {
        let kind = result.as_ref().err().map(|e| e.kind());
        prop_assert_eq!(kind, Some(expected), "{:?}", op);
    }
    if through {
        prop_assert!(result.is_err(), "{:?} went through an escaping link", op);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        // A failing case is saved beside this file (tests/path_fuzz.proptest-regressions) and
        // replayed first on the next run.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn nothing_outside_the_root_changes(ops in prop::collection::vec(op(), 1..10)) {
        let t = Tree::new();
        std::fs::create_dir(t.root.join("a")).unwrap();
        std::fs::write(t.root.join("a/b"), b"ab").unwrap();
        std::fs::write(t.root.join("b"), b"b").unwrap();
        let before = t.outside_snapshot();
        let fs = HostFs::open(&t.root).unwrap();
        for op in &ops {
            run(&t, &fs, op)?;
            prop_assert_eq!(&t.outside_snapshot(), &before, "after {:?}", op);
        }
    }
}
