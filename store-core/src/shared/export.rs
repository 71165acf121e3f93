//! `SharedStore::snapshot_to`: a snapshot that lets appends go on while it streams.
//!
//! Under the lock it syncs and fixes the snapshot point (state, subjects, each block's handle
//! and length: `Store::export_plan`), then streams without the lock. What may run meanwhile is
//! what cannot change the bytes `[0, len)` of a fixed block:
//! - appends (and `sync`, and the group commit's fsyncs) write only past the newest block's
//!   fixed length, or into new blocks;
//! - the reads, and `purge`, which writes a new block and renames/removes old files: the
//!   snapshot reads them through the handles it holds, which see the old bytes (POSIX
//!   semantics of an open file that is renamed or unlinked; every backend here has them).
//!
//! What could change them — `erase` (in place), `truncate` (cuts a block), anything else run
//! through `with` — waits: `with` blocks while a snapshot streams. So the archive is exactly
//! the store at the snapshot point, as with `Store::snapshot_to`, but writers do not wait for
//! the copy. Do not call `with` on the same store from inside the snapshot's writer: it would
//! wait for itself.

use super::{lock, Inner, SharedStore};
use crate::error::Result;
use crate::fs::Fs;
use crate::store::{write_export, SnapshotInfo};
use std::io::Write;
use std::sync::atomic::Ordering;

/// Unpins on every exit (an error or an unwinding writer too): decrements the count of
/// snapshots streaming under the lock, then wakes the callers of `with` waiting for it.
struct Pin<'a, F: Fs> {
    inner: &'a Inner<F>,
}

impl<F: Fs> Drop for Pin<'_, F> {
    fn drop(&mut self) {
        let g = lock(&self.inner.state);
        self.inner.exports.fetch_sub(1, Ordering::AcqRel);
        drop(g);
        self.inner.export_done.notify_all();
    }
}

impl<F: Fs> SharedStore<F> {
    /// `Store::snapshot_to`, with appends, reads, `sync` and `purge` going on while it streams;
    /// `with` waits until it is done (see the module docs). The snapshot holds exactly what was
    /// acknowledged when it started.
    pub fn snapshot_to<W: Write>(&self, out: W) -> Result<SnapshotInfo> {
        let plan = {
            let mut g = self.wait_exports(lock(&self.inner.state));
            let plan = g.store.export_plan()?;
            // pinned under the same lock hold as the plan was fixed
            self.inner.exports.fetch_add(1, Ordering::AcqRel);
            plan
        };
        let _pin = Pin { inner: &self.inner };
        write_export(&plan, out)
    }
}
