//! The directory layout: the names of the store's directories and files.

use super::{io_at, Store};
use crate::error::Result;
use crate::fs::Fs;
use std::collections::BTreeMap;

/// The directory holding the live message blocks.
pub const MSGS_DIR: &str = "msgs";

/// Where a purge builds the new block set before the swap.
pub const PURGE_NEW: &str = "purge.new";

/// Where the old block set goes during the swap, until it is removed.
pub const PURGE_OLD: &str = "purge.old";

/// The state snapshot.
pub const INDEX_FILE: &str = "index.db";

/// The snapshot being written.
pub const INDEX_TMP: &str = "index.db.tmp";

/// The store's lock ([`crate::Fs::lock`]): one process owns a store from open to close.
pub const LOCK_FILE: &str = "LOCK";

/// Whether `name` in the root is the lock's: [`LOCK_FILE`] or a name a backend keeps beside
/// it (`LOCK.…`, e.g. host-fs's WASI marker). Never data; ignored wherever the root is listed.
pub fn is_lock_name(name: &str) -> bool {
    name == LOCK_FILE
        || name
            .strip_prefix(LOCK_FILE)
            .is_some_and(|rest| rest.starts_with('.'))
}

pub(crate) fn block_path(dir: &str, index: u64) -> String {
    format!("{dir}/{index}.blk")
}

/// Where a block being sealed through the crypt layer is rewritten before its rename
/// (`seal.rs`).
pub(crate) fn seal_tmp_path(index: u64) -> String {
    format!("{MSGS_DIR}/{index}.seal")
}

/// Whether `name` in `msgs/` is a rewrite's leftover (`N.seal`).
pub(crate) fn is_seal_tmp(name: &str) -> bool {
    name.strip_suffix(".seal")
        .and_then(parse_block_number)
        .is_some()
}

pub(crate) fn parse_block_name(name: &str) -> Option<u64> {
    parse_block_number(name.strip_suffix(".blk")?)
}

/// A block number as names spell it: decimal, no leading zero, above 0.
fn parse_block_number(n: &str) -> Option<u64> {
    if n.is_empty() || n.len() > 19 || !n.bytes().all(|b| b.is_ascii_digit()) || n.starts_with('0')
    {
        return None;
    }
    n.parse().ok().filter(|&i| i > 0)
}

impl<F: Fs> Store<F> {
    pub(super) fn root_names(&self) -> Result<BTreeMap<String, bool>> {
        Ok(io_at(self.fs.read_dir(""), "read_dir", "")?
            .into_iter()
            .map(|e| (e.name, e.is_dir))
            .collect())
    }

    /// Lists `msgs/`: block indexes in order; anything else is reported and left alone.
    pub(super) fn list_blocks(&mut self) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        for e in io_at(self.fs.read_dir(MSGS_DIR), "read_dir", MSGS_DIR)? {
            match parse_block_name(&e.name) {
                Some(i) if !e.is_dir => out.push(i),
                // a seal's rewrite that never got its rename: the block it copies is whole
                None if !e.is_dir && is_seal_tmp(&e.name) => {
                    let path = format!("{MSGS_DIR}/{}", e.name);
                    let r = self.fs.remove_file(&path);
                    self.dur.latch(r, "remove_file", &path)?;
                }
                _ => self.report.ignored.push(format!("{MSGS_DIR}/{}", e.name)),
            }
        }
        for (name, _) in self.root_names()? {
            if !is_lock_name(&name)
                && ![
                    MSGS_DIR,
                    INDEX_FILE,
                    INDEX_TMP,
                    crate::consumer::CONSUMERS_DIR,
                ]
                .contains(&name.as_str())
            {
                self.report.ignored.push(name);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    pub(super) fn list_blocks_quiet(&mut self) -> Result<Vec<u64>> {
        let ignored = self.report.ignored.len();
        let v = self.list_blocks()?;
        self.report.ignored.truncate(ignored);
        Ok(v)
    }
}
