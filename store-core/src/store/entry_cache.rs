//! The entry cache: the in-memory entries of sealed blocks, bounded by `Config::entry_cache`.
//!
//! A block's entries (one [`Entry`] a message) are what finds a sequence, a subject or a
//! deleted mark without reading the block. Kept for every block ever used, they grow with the
//! stream (32 bytes a message: 3 GiB for 100M messages). So the entries of sealed blocks are a
//! cache: past the budget the least recently used block gives its entries up and keeps only
//! its deleted sequences (`dmap`), as a block known from `index.db` starts out; its next use
//! reads them again from the block (`load_entries`, which checks the scan against the block's
//! counters). The newest block keeps its entries: every append indexes into them.
//!
//! Trimming happens only where no caller holds a position into entries: at the start of a
//! public operation, between the blocks of a rebuild, and at the top of the loops that walk
//! blocks one at a time. Inside an operation, a block loaded by `ensure_loaded` stays loaded
//! until the operation returns, so the `expect("loaded")`s after it hold.

use super::blocks::Entry;
use super::*;

/// Bytes one loaded entry costs.
const ENTRY_BYTES: u64 = std::mem::size_of::<Entry>() as u64;

impl<F: Fs> Store<F> {
    /// Trims the entry cache to its budget if enough was loaded since the last trim to
    /// matter (an eighth of the budget, at least one block's worth of work): one compare on
    /// the hot paths.
    #[inline]
    pub(super) fn trim_entries(&mut self) {
        if self.untrimmed.saturating_mul(ENTRY_BYTES) > self.cfg.entry_cache / 8 {
            self.trim_entries_now();
        }
    }

    /// Drops the entries of the least recently used sealed blocks until those left fit
    /// `Config::entry_cache`.
    #[inline(never)]
    pub(super) fn trim_entries_now(&mut self) {
        self.untrimmed = 0;
        let sealed = self.blocks.len().saturating_sub(1);
        let mut loaded: Vec<(u64, usize, u64)> = self.blocks[..sealed]
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.pinned)
            .filter_map(|(p, b)| b.entries.as_ref().map(|e| (b.used, p, e.len() as u64)))
            .collect();
        let mut held: u64 = loaded.iter().map(|l| l.2 * ENTRY_BYTES).sum();
        if held <= self.cfg.entry_cache {
            return;
        }
        loaded.sort_unstable();
        for (_, pos, n) in loaded {
            if held <= self.cfg.entry_cache {
                break;
            }
            self.evict_entries(pos);
            held -= n * ENTRY_BYTES;
        }
    }

    /// Gives up the entries of block `pos`, keeping what `load_entries` needs to build them
    /// again: the deleted sequences (all of them, as `index.db` lists a loaded block's, so
    /// that what a checkpoint writes does not depend on what the cache held).
    fn evict_entries(&mut self, pos: usize) {
        debug_assert!(pos + 1 < self.blocks.len() && !self.blocks[pos].pinned);
        let b = &mut self.blocks[pos];
        if let Some(entries) = b.entries.take() {
            b.dmap = entries
                .iter()
                .filter(|e| e.deleted)
                .map(|e| e.seq)
                .collect();
            debug_assert_eq!(entries.iter().filter(|e| !e.deleted).count() as u64, b.live);
        }
    }

    /// Marks the entries of block `pos` used now (the cache's recency).
    #[inline]
    pub(super) fn touch_entries(&mut self, pos: usize) {
        self.entry_tick += 1;
        self.blocks[pos].used = self.entry_tick;
    }

    /// Changes `Config::entry_cache` on an open store, trimming to it at once.
    pub fn set_entry_cache(&mut self, bytes: u64) {
        self.cfg.entry_cache = bytes;
        self.trim_entries_now();
    }

    /// Messages whose entries are loaded, in sealed blocks and in all (tests, and the bench's
    /// memory figures).
    pub fn loaded_entries(&self) -> (u64, u64) {
        let count = |bs: &[Block<F::File>]| -> u64 {
            bs.iter()
                .filter_map(|b| b.entries.as_ref().map(|e| e.len() as u64))
                .sum()
        };
        let sealed = self.blocks.len().saturating_sub(1);
        (count(&self.blocks[..sealed]), count(&self.blocks))
    }
}
