//! Per-block subject counts, so that `filtered_state` and `num_pending` from a sequence cost
//! O(blocks × matching subjects) instead of a walk over every message after it (as NATS's
//! per-block subject state does). Two structures per block, both derived from its entries
//! and built on first use:
//!
//! - `BlockIndex::subj_counts`: live messages per subject id, sorted by id (8 bytes a subject
//!   present in the block). Kept when the entry cache drops the entries (it stays true: a
//!   removal loads the entries first); `mark_deleted` and `add_entry` update it in place, a
//!   truncate or a reload drops it. For the blocks a range covers whole.
//! - `BlockIndex::by_subj`: per subject id its live sequences, ascending (8 bytes a message). For
//!   the (at most two) blocks a range cuts: a count or the first and last match of a range
//!   inside the block is a binary search per matching subject. Dropped with the entries (it
//!   is as large as a quarter of them), by a removal and by a truncate; `add_entry` appends
//!   to it.
//!
//! A message past its ttl deadline is still counted in both (the removal is what changes
//! them): the callers walk the messages instead while one is pending (`expired_pending`).

use super::entries::{Entries, EMPTY};
use super::Store;
use crate::error::Result;
use crate::fs::Fs;

/// `by_subj` of a block: `(subject id, live sequences ascending)`, sorted by id.
#[derive(Default)]
pub(super) struct SubjectSeqs(Vec<(u32, Vec<u64>)>);

impl SubjectSeqs {
    fn build(entries: &Entries) -> Self {
        let mut v: Vec<(u32, Vec<u64>)> = Vec::new();
        for e in entries.iter().filter(|e| !e.deleted) {
            match v.binary_search_by_key(&e.subj, |x| x.0) {
                Ok(k) => v[k].1.push(e.seq),
                Err(k) => v.insert(k, (e.subj, vec![e.seq])),
            }
        }
        SubjectSeqs(v)
    }

    /// A message appended to the block (its sequence above every one held).
    pub(super) fn push(&mut self, sid: u32, seq: u64) {
        match self.0.binary_search_by_key(&sid, |x| x.0) {
            Ok(k) => self.0[k].1.push(seq),
            Err(k) => self.0.insert(k, (sid, vec![seq])),
        }
    }

    /// The live sequences of `sid` in `from..=to`.
    fn range(&self, sid: u32, from: u64, to: u64) -> &[u64] {
        let Ok(k) = self.0.binary_search_by_key(&sid, |x| x.0) else {
            return &[];
        };
        let s = &self.0[k].1;
        let a = s.partition_point(|&q| q < from);
        let b = s.partition_point(|&q| q <= to).max(a);
        &s[a..b]
    }
}

/// Adds one to (or, `delta` -1, takes one from) subject `sid`'s count in a sorted count list.
pub(super) fn bump(counts: &mut Vec<(u32, u32)>, sid: u32, delta: i32) {
    match counts.binary_search_by_key(&sid, |x| x.0) {
        Ok(k) => {
            let c = counts[k].1 as i64 + delta as i64;
            if c <= 0 {
                counts.remove(k);
            } else {
                counts[k].1 = c as u32;
            }
        }
        Err(k) if delta > 0 => counts.insert(k, (sid, delta as u32)),
        Err(_) => {}
    }
}

/// A count, with the first and last sequence counted (0 when none).
#[derive(Clone, Copy, Default)]
pub(super) struct Tally {
    pub(super) msgs: u64,
    pub(super) first: u64,
    pub(super) last: u64,
}

impl<F: Fs> Store<F> {
    /// Block `pos`'s live messages per subject id (built from its entries on first use).
    fn block_counts(&mut self, pos: usize) -> Result<&[(u32, u32)]> {
        if self.blocks[pos].index.subj_counts.is_none() {
            self.ensure_loaded(pos)?;
            let b = &mut self.blocks[pos];
            let mut counts = Vec::new();
            for e in b.index.entries.as_ref().unwrap_or(&EMPTY).iter() {
                if !e.deleted {
                    bump(&mut counts, e.subj, 1);
                }
            }
            b.index.subj_counts = Some(counts);
        }
        Ok(self.blocks[pos]
            .index
            .subj_counts
            .as_deref()
            .unwrap_or_default())
    }

    /// Block `pos`'s live sequences per subject id (built from its entries on first use).
    fn block_seqs(&mut self, pos: usize) -> Result<&SubjectSeqs> {
        self.ensure_loaded(pos)?;
        let b = &mut self.blocks[pos];
        let entries = &b.index.entries;
        let seqs = b.index.by_subj.get_or_insert_with(|| {
            Box::new(SubjectSeqs::build(entries.as_ref().unwrap_or(&EMPTY)))
        });
        Ok(seqs)
    }

    /// How many live messages with a sequence in `from..` have one of the subject ids `sids`
    /// (ascending; `all`: they are every subject with messages), and the first and last of
    /// them. Blocks the range covers whole are counted from `subj_counts` (their entries are
    /// not read when `all`: the block's live count is the answer); the block the range starts
    /// in by binary searches in its `by_subj`; the first and last match from the `by_subj`
    /// of the first and last block with one, only if `edges` (`num_pending` needs the count
    /// alone).
    pub(super) fn tally(
        &mut self,
        sids: &[u32],
        all: bool,
        from: u64,
        edges: bool,
    ) -> Result<Tally> {
        let mut t = Tally::default();
        let from = from.max(self.seq.first()).max(1);
        if sids.is_empty() || from > self.seq.last() || self.blocks.is_empty() {
            return Ok(t);
        }
        let lo = self.blocks.partition_point(|b| b.span.seq_ceiling < from);
        let (mut first_pos, mut last_pos) = (None, None);
        for pos in lo..self.blocks.len() {
            let b = &self.blocks[pos];
            if b.span.live == 0 {
                continue;
            }
            let whole = b.span.msg_first >= from;
            if whole && all {
                // every live message of the block matches: nothing to read
                first_pos.get_or_insert(pos);
                last_pos = Some(pos);
                t.msgs += b.span.live;
                continue;
            }
            // nothing here holds a position into entries between blocks
            self.trim_entries();
            let n = if whole {
                count_in(self.block_counts(pos)?, sids)
            } else if let Some(n) = self.all_live_from(pos, all, from) {
                n
            } else {
                let seqs = self.block_seqs(pos)?;
                sids.iter()
                    .map(|&s| seqs.range(s, from, u64::MAX).len() as u64)
                    .sum()
            };
            if n > 0 {
                first_pos.get_or_insert(pos);
                last_pos = Some(pos);
                t.msgs += n;
            }
        }
        if !edges {
            return Ok(t);
        }
        if let (Some(a), Some(z)) = (first_pos, last_pos) {
            self.trim_entries();
            let seqs = self.block_seqs(a)?;
            t.first = sids
                .iter()
                .filter_map(|&s| seqs.range(s, from, u64::MAX).first().copied())
                .min()
                .unwrap_or(0);
            let seqs = self.block_seqs(z)?;
            t.last = sids
                .iter()
                .filter_map(|&s| seqs.range(s, from, u64::MAX).last().copied())
                .max()
                .unwrap_or(0);
        }
        Ok(t)
    }
}

impl<F: Fs> Store<F> {
    /// With a filter that selects every subject, the live messages of block `pos` at or
    /// after `from` by one binary search over its entries, when they are loaded and none is
    /// deleted (else `None`: count by subject).
    fn all_live_from(&self, pos: usize, all: bool, from: u64) -> Option<u64> {
        let b = &self.blocks[pos];
        let entries = b
            .index
            .entries
            .as_ref()
            .filter(|e| all && e.len() as u64 == b.span.live)?;
        Some((entries.len() - entries.seq_point(from)) as u64)
    }
}

/// The sum of the counts of `sids` (both sorted by id): a merge, or binary searches when
/// `sids` is much the shorter.
fn count_in(counts: &[(u32, u32)], sids: &[u32]) -> u64 {
    if sids.len() * 8 < counts.len() {
        return sids
            .iter()
            .filter_map(|s| counts.binary_search_by_key(s, |x| x.0).ok())
            .map(|k| counts[k].1 as u64)
            .sum();
    }
    let (mut i, mut n) = (0, 0u64);
    for &(sid, c) in counts {
        while i < sids.len() && sids[i] < sid {
            i += 1;
        }
        if i == sids.len() {
            break;
        }
        if sids[i] == sid {
            n += c as u64;
        }
    }
    n
}
