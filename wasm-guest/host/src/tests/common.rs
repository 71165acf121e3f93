//! Shared test helpers: a seeded generator, a fixed clock, result normalization, and a
//! byte-for-byte comparison of two store directories.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::Path;

use seqstore_core::{Config, ManualClock};

/// A fixed time source, cloned into both stores of a comparison so timestamps match.
pub(crate) fn clock() -> ManualClock {
    ManualClock::new(1_700_000_000_000_000_000)
}

/// A config with small blocks, so that short workloads roll over blocks.
pub(crate) fn small_blocks() -> Config {
    Config::default().with_block_size(4096)
}

pub(crate) use seqstore_test_setup::seed;

/// The workspace's one seeded generator (splitmix64, fault-fs).
pub(crate) use seqstore_fault_fs::Rng;

/// A comparable form of a store result: values by their `Debug`, errors by what the store
/// means (for I/O errors the operation, path and kind; the message text differs between a
/// native `io::Error` and one that crossed the boundary).
pub(crate) fn norm<T: Debug>(r: &Result<T, seqstore_core::Error>) -> String {
    match r {
        Ok(v) => format!("Ok({v:?})"),
        Err(e) => format!("Err({})", norm_err(e)),
    }
}

pub(crate) fn norm_err(e: &seqstore_core::Error) -> String {
    match e {
        seqstore_core::Error::Io { op, path, source } => {
            format!("Io {{ op: {op}, path: {path}, kind: {:?} }}", source.kind())
        }
        other => format!("{other:?}"),
    }
}

/// The guest's result as store-core's; a sandbox error fails the test.
pub(crate) fn store_result<T, E: StoreError>(r: Result<T, E>) -> Result<T, seqstore_core::Error> {
    r.map_err(StoreError::store)
}

/// An error of a `StreamStore` as store-core's (the native store's is; the guest's a sandbox
/// error is not, and fails the test).
pub(crate) trait StoreError {
    fn store(self) -> seqstore_core::Error;
}

impl StoreError for seqstore_core::Error {
    fn store(self) -> seqstore_core::Error {
        self
    }
}

impl StoreError for crate::Error {
    fn store(self) -> seqstore_core::Error {
        match self {
            crate::Error::Store(e) => e,
            e => panic!("sandbox error where the store's result was expected: {e}"),
        }
    }
}

/// Every file below `root` (relative path → contents), and every directory (→ `None`).
pub(crate) fn tree(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                out.insert(rel, None);
                walk(root, &p, out);
            } else {
                out.insert(rel, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Asserts two store directories hold the same names with byte-identical contents.
pub(crate) fn assert_same_tree(a: &Path, b: &Path, ctx: &str) {
    let (ta, tb) = (tree(a), tree(b));
    let names_a: Vec<_> = ta.keys().collect();
    let names_b: Vec<_> = tb.keys().collect();
    assert_eq!(names_a, names_b, "{ctx}: different files");
    for (name, content) in &ta {
        let other = &tb[name];
        if content != other {
            let (la, lb) = (
                content.as_ref().map_or(0, Vec::len),
                other.as_ref().map_or(0, Vec::len),
            );
            let first_diff = content
                .as_ref()
                .zip(other.as_ref())
                .and_then(|(x, y)| x.iter().zip(y).position(|(p, q)| p != q));
            panic!(
                "{ctx}: {name} differs (native {la} bytes, guest {lb} bytes, first difference \
                 at {first_diff:?})"
            );
        }
    }
}
