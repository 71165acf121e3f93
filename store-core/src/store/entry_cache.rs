//! The entry cache: the in-memory entries of sealed blocks, bounded by `Config::entry_cache`.
//!
//! A block's entries (one [`Entry`] a message) are what finds a sequence, a subject or a
//! deleted mark without reading the block. Kept for every block ever used, they would grow
//! with the stream. So a sealed block's entries are packed (`entries.rs`: a few bytes a
//! message instead of the newest block's 32) and are a cache: past the budget (their heap
//! bytes) the least recently used block gives its entries up and keeps only
//! its deleted sequences (`deleted_seqs`), as a block known from `index.db` starts out; its next use
//! reads them again from the block (`load_entries`, which checks the scan against the block's
//! counters). The newest block keeps its entries: every append indexes into them.
//!
//! A get of a message in such a block does not read the entries back (uniform random gets
//! over a stream larger than the cache would then scan a whole block per get): the block
//! keeps a mark every `MARK_EVERY` messages, and the get reads the records from the mark
//! before its sequence up to the next mark, from the block cache or by one `pread`.
//!
//! Trimming happens only where no caller holds a position into entries: at the start of a
//! public operation, between the blocks of a rebuild, and at the top of the loops that walk
//! blocks one at a time. Inside an operation, a block loaded by `ensure_loaded` stays loaded
//! until the operation returns, so the `Block::loaded`s after it hold.

use super::blocks::Block;
use super::entries::Entry;
use super::types::StoredMsg;
use super::{io_at, Store};
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile};
use crate::record::{decode, Decoded, Kind, FLAG_ERASED};

/// Bytes one full entry costs: what the trim counter assumes of every entry loaded (a packed
/// one costs less, so a trim may come sooner than needed, never later).
const ENTRY_BYTES: u64 = std::mem::size_of::<Entry>() as u64;

/// One mark per this many message records of a block whose entries were dropped: half a
/// byte a message, and a get reads this many records and decodes about half of them.
pub(super) const MARK_EVERY: usize = 16;

/// The entry cache's bookkeeping: the recency stamps and when a trim is worth its walk.
pub(super) struct EntryBudget {
    /// Uses of loaded entries so far (`BlockIndex::used` stamps).
    tick: u64,
    /// Entries loaded or sealed since the entry cache was last trimmed, and how many make a
    /// trim worth its walk over the blocks.
    untrimmed: u64,
    trim_at: u64,
}

impl EntryBudget {
    pub(super) fn new(trim_at: u64) -> Self {
        EntryBudget {
            tick: 0,
            untrimmed: 0,
            trim_at,
        }
    }

    /// Counts `n` entries loaded or sealed (what a trim may have to give up).
    #[inline]
    pub(super) fn loaded(&mut self, n: usize) {
        self.untrimmed += n as u64;
    }
}

impl<F: Fs> Store<F> {
    /// Trims the entry cache to its budget if enough was loaded since the last trim to
    /// matter (an eighth of the budget, at least one block's worth of work): one compare on
    /// the hot paths.
    #[inline]
    pub(super) fn trim_entries(&mut self) {
        if self.entry_budget.untrimmed > self.entry_budget.trim_at {
            self.trim_entries_now();
        }
    }

    /// `trim_at` for `Config::entry_cache`: entries loaded past an eighth of the budget.
    pub(super) fn trim_threshold(entry_cache: u64) -> u64 {
        entry_cache / 8 / ENTRY_BYTES
    }

    /// Drops the entries of the least recently used sealed blocks until those left fit
    /// `Config::entry_cache`.
    #[inline(never)]
    pub(super) fn trim_entries_now(&mut self) {
        self.entry_budget.untrimmed = 0;
        let sealed = self.blocks.len().saturating_sub(1);
        let mut loaded: Vec<(u64, usize, u64)> = self.blocks[..sealed]
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.index.pinned)
            .filter_map(|(p, b)| {
                b.index
                    .entries
                    .as_ref()
                    .map(|e| (b.index.used, p, e.heap_bytes()))
            })
            .collect();
        let mut held: u64 = loaded.iter().map(|l| l.2).sum();
        if held <= self.cfg.entry_cache {
            return;
        }
        loaded.sort_unstable();
        for (_, pos, n) in loaded {
            if held <= self.cfg.entry_cache {
                break;
            }
            self.evict_entries(pos);
            held -= n;
        }
    }

    /// Gives up the entries of block `pos`, keeping what `load_entries` needs to build them
    /// again: the deleted sequences (all of them, as `index.db` lists a loaded block's, so
    /// that what a checkpoint writes does not depend on what the cache held).
    fn evict_entries(&mut self, pos: usize) {
        debug_assert!(pos + 1 < self.blocks.len() && !self.blocks[pos].index.pinned);
        let b = &mut self.blocks[pos];
        b.index.by_subj = None;
        if let Some(entries) = b.index.entries.take() {
            b.index.deleted_seqs = entries
                .iter()
                .filter(|e| e.deleted)
                .map(|e| e.seq)
                .collect();
            // (a sequence too far above the block's first for a u32 gets no mark: the walk
            // from the mark before it is longer, never wrong)
            let first = b.span.msg_first;
            b.index.marks = (0..entries.len())
                .step_by(MARK_EVERY)
                .filter_map(|i| {
                    let e = entries.at(i);
                    Some((u32::try_from(e.seq - first).ok()?, e.off))
                })
                .collect();
            debug_assert_eq!(
                entries.iter().filter(|e| !e.deleted).count() as u64,
                b.span.live
            );
        }
    }

    /// Marks the entries of block `pos` used now (the cache's recency).
    #[inline]
    pub(super) fn touch_entries(&mut self, pos: usize) {
        self.entry_budget.tick += 1;
        self.blocks[pos].index.used = self.entry_budget.tick;
    }

    /// Changes `Config::entry_cache` on an open store, trimming to it at once.
    pub fn set_entry_cache(&mut self, bytes: u64) {
        self.cfg.entry_cache = bytes;
        self.entry_budget.trim_at = Self::trim_threshold(bytes);
        self.trim_entries_now();
    }

    /// Messages whose entries are loaded, in sealed blocks and in all (tests, and the bench's
    /// memory figures).
    pub(crate) fn loaded_entries(&self) -> (u64, u64) {
        let count = |bs: &[Block<F::File>]| -> u64 {
            bs.iter()
                .filter_map(|b| b.index.entries.as_ref().map(|e| e.len() as u64))
                .sum()
        };
        let sealed = self.blocks.len().saturating_sub(1);
        (count(&self.blocks[..sealed]), count(&self.blocks))
    }

    /// Heap bytes held by the loaded entries of sealed blocks, and how many messages they
    /// cover (the bench's bytes-a-message figure).
    pub fn sealed_entry_bytes(&self) -> (u64, u64) {
        let sealed = self.blocks.len().saturating_sub(1);
        self.blocks[..sealed]
            .iter()
            .filter_map(|b| b.index.entries.as_ref())
            .fold((0, 0), |(bytes, n), e| {
                (bytes + e.heap_bytes(), n + e.len() as u64)
            })
    }

    /// The block that would hold `seq`, if the entry cache dropped its entries (it has
    /// marks): a get there reads by marks (`read_marked`).
    #[inline]
    pub(super) fn marked_block(&self, seq: u64) -> Option<usize> {
        if seq == 0 || seq < self.seq.first() || seq > self.seq.last() {
            return None;
        }
        let pos = self.blocks.partition_point(|b| b.span.seq_ceiling < seq);
        let b = self.blocks.get(pos)?;
        (b.index.entries.is_none() && !b.index.marks.is_empty() && b.span.msg_first <= seq)
            .then_some(pos)
    }

    /// Message `seq` of block `pos`, whose entries were dropped: the records from the mark at
    /// or before `seq` to the next mark are read (block cache or one `pread`) and walked.
    /// `None` if it is deleted (the floor, `deleted_seqs`, an erased record) or has no record. What
    /// is read is checked as `read_entry` checks a record: damage is `Corrupt`, never a wrong
    /// message.
    pub(super) fn read_marked(&self, pos: usize, seq: u64) -> Result<Option<StoredMsg>> {
        let b = &self.blocks[pos];
        if seq <= self.seq.floor() || b.index.deleted_seqs.binary_search(&seq).is_ok() {
            return Ok(None);
        }
        let Ok(rel) = u32::try_from(seq - b.span.msg_first) else {
            // beyond every mark: from the last one
            return self.walk_marked(pos, seq, b.index.marks.len());
        };
        self.walk_marked(pos, seq, b.index.marks.partition_point(|m| m.0 <= rel))
    }

    /// `read_marked` from the records between mark `m - 1` and mark `m`.
    fn walk_marked(&self, pos: usize, seq: u64, m: usize) -> Result<Option<StoredMsg>> {
        let b = &self.blocks[pos];
        let Some(&(_, from)) = m.checked_sub(1).and_then(|i| b.index.marks.get(i)) else {
            return Ok(None);
        };
        let (from, to) = (
            from as u64,
            b.index.marks.get(m).map_or(b.span.len, |n| n.1 as u64),
        );
        let mut owned = Vec::new();
        let bytes: &[u8] = match b.copies.cache.as_deref().filter(|c| to as usize <= c.len()) {
            Some(c) => &c[from as usize..to as usize],
            None => {
                owned.resize((to - from) as usize, 0);
                let file = self.block_file(pos)?;
                io_at(file.read_exact_at(&mut owned, from), "read", &b.path)?;
                &owned
            }
        };
        let mut at = 0usize;
        while at < bytes.len() {
            let off = from + at as u64;
            match decode(&bytes[at..]) {
                Decoded::Record(r) if r.kind == Kind::Msg && r.seq >= seq => {
                    if r.seq > seq || r.flags & FLAG_ERASED != 0 {
                        return Ok(None);
                    }
                    return Ok(Some(r.owned_msg()));
                }
                Decoded::Record(r) => at += r.len,
                Decoded::Bad { reason, .. } => {
                    return Err(Error::corrupt(b.path.clone(), off, reason))
                }
                _ => return Err(Error::corrupt(b.path.clone(), off, "record cut short")),
            }
        }
        Ok(None)
    }
}
