//! Truncate, and beside it the half of recovery that finishes an interrupted cleanup.

use super::scan::{scan_block, ScanEnd};
use super::sync::{S_TRUNCATE_COMMIT, S_TRUNCATE_MARKERS};
use super::{io_at, Store};
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile};
use crate::record::{Kind, BLOCK_HEADER_LEN};
use std::ops::ControlFlow;

impl<F: Fs> Store<F> {
    /// Cuts block `bpos` at `off` and removes the blocks between it and the block holding
    /// the truncate record that hold message records (all above the truncate's sequence:
    /// void). A block without one is kept: the truncate's own tombstones may have filled
    /// blocks before the one its record landed in, and an older block of markers only is
    /// harmless, its records coming before the truncate record that voids what it must.
    pub(super) fn truncate_cleanup(&mut self, bpos: usize, off: u64, tpos: usize) -> Result<()> {
        for pos in (bpos + 1..tpos).rev() {
            if self.blocks[pos].span.msg_first == 0 {
                continue;
            }
            let path = self.blocks[pos].path.clone();
            io_at(self.fs.remove_file(&path), "remove_file", &path)?;
        }
        if bpos != tpos {
            let file = self.open_block(bpos)?;
            let b = &mut self.blocks[bpos];
            b.handle.written = true;
            io_at(file.set_len(off), "set_len", &b.path)?;
        }
        self.blocks.clear();
        Ok(())
    }

    /// Removes every message with a sequence above `seq`; `last_seq` becomes `seq` (this is
    /// the one operation that lowers it, on purpose). Refused below `first_seq - 1`. At or
    /// above `last_seq` nothing is removed, but everything written so far is fsynced, so that
    /// in both cases a crash after return recovers `last_seq = min(seq, last_seq)`.
    ///
    /// Crash-atomic: a new block with the tombstones that must outlive the cut and one
    /// truncate record is fsynced first (the commit point); only then are the later blocks
    /// removed and the cut block shortened. Recovery finishes an interrupted cleanup.
    pub fn truncate(&mut self, seq: u64) -> Result<u64> {
        // a removal above the cut acknowledged what a consumer had pending (under `All`,
        // also the messages below the cut): recorded before the cut takes it away
        self.settle_removals_above(seq)?;
        let n = self.truncate_stream(seq)?;
        // consumers that delivered past the cut come back to it, durably
        self.truncate_consumers()?;
        Ok(n)
    }

    fn truncate_stream(&mut self, seq: u64) -> Result<u64> {
        self.check_writable()?;
        self.trim_entries();
        if seq >= self.seq.last() {
            // Nothing above `seq` to remove. The promise still holds as for a real cut: once
            // this returns, a crash recovers `last_seq = min(seq, last)` with the removals
            // made so far, so make what memory shows durable (the structural-operation rule).
            self.sync_inner(S_TRUNCATE_COMMIT)?;
            return Ok(0);
        }
        // Below first - 1 there is nothing left to remove, and lowering `last` there would
        // hand out sequences again that were already used and removed.
        if seq + 1 < self.seq.first() {
            return Err(Error::InvalidArgument(format!(
                "truncate({seq}) below the first sequence {}: use purge or compact",
                self.seq.first()
            )));
        }
        self.flush()?;
        // where the first message record above seq is
        let cut_pos = self.blocks.partition_point(|b| b.span.seq_ceiling <= seq);
        let mut cut_off = None;
        if cut_pos < self.blocks.len() {
            self.ensure_loaded(cut_pos)?;
            let entries = self.blocks[cut_pos].loaded();
            cut_off = entries.iter().find(|e| e.seq > seq).map(|e| e.off as u64);
        }
        let (keep_tombs, keep_floor) = match cut_off {
            Some(off) => self.markers_past_cut(seq, cut_pos, off)?,
            None => (Vec::new(), 0),
        };
        let ts = match self.find(seq)? {
            Some((p, i)) => self.entry_ts(p, i)?,
            None => self.now(),
        };
        // commit: new block with the preserved markers and the truncate record, fsynced
        // together with its directory entry (more than one new block if the markers fill
        // one: the cleanup keeps them all)
        let first_new = self.blocks.len();
        self.roll()?;
        for t in keep_tombs {
            self.marker(Kind::Tombstone, t, ts)?;
        }
        if keep_floor > 0 {
            self.marker(Kind::Floor, keep_floor, ts)?;
        }
        // The truncate record must not become durable without the markers before it: if
        // they reached the disk apart from it (they filled a block, or the write buffer), a
        // crash could keep its write and lose theirs, and the cleanup would then remove the
        // only tombstones left of those sequences. Make them durable first.
        if self.blocks.len() > first_new + 1 || self.blocks[first_new].span.len > 0 {
            self.sync_inner(S_TRUNCATE_MARKERS)?;
        }
        self.marker(Kind::Truncate, seq, ts)?;
        self.sync_inner(S_TRUNCATE_COMMIT)?;
        let n = self.remove_above(seq, cut_pos)?;
        if let Some(off) = cut_off {
            self.cut_blocks(seq, cut_pos, off, first_new)?;
        }
        self.seq.set_last(seq, ts);
        // the sequences above the cut are issued again: their old ttls must not apply
        self.ttl.forget_above(seq);
        self.subjects.forget_last_above(seq);
        let first = self.seq.first().min(seq + 1);
        self.set_first_from(first)?;
        Ok(n)
    }

    /// The markers at or after the cut (block `cut_pos`, offset `off`) that must outlive it:
    /// tombstones of sequences at or below `seq`, and the highest floor.
    fn markers_past_cut(&self, seq: u64, cut_pos: usize, off: u64) -> Result<(Vec<u64>, u64)> {
        let (mut keep_tombs, mut keep_floor) = (Vec::new(), 0u64);
        for pos in cut_pos..self.blocks.len() {
            let b = &self.blocks[pos];
            let start = if pos == cut_pos {
                off
            } else {
                BLOCK_HEADER_LEN
            };
            let file = self.block_file(pos)?;
            let end = scan_block(
                &*file,
                &b.path,
                start,
                b.span.len,
                |_, r| {
                    match r.kind {
                        Kind::Tombstone if r.seq <= seq => keep_tombs.push(r.seq),
                        Kind::Floor => keep_floor = keep_floor.max(r.seq),
                        _ => {}
                    }
                    Ok(ControlFlow::Continue(()))
                },
                |off, reason, _| Err(Error::corrupt(b.path.clone(), off, reason)),
            )?;
            if let ScanEnd::Damaged { offset, reason } = end {
                return Err(Error::corrupt(b.path.clone(), offset, reason));
            }
        }
        Ok((keep_tombs, keep_floor))
    }

    /// Marks every live message above `seq` (from block `cut_pos` on) deleted, in memory.
    /// Returns how many.
    fn remove_above(&mut self, seq: u64, cut_pos: usize) -> Result<u64> {
        let mut n = 0;
        for pos in cut_pos..self.blocks.len() {
            n += self.delete_in_block(pos, |s| s > seq)?;
        }
        Ok(n)
    }

    /// After the commit: removes the blocks between the cut and the first new block
    /// (`first_new`), then shortens the cut block to `off`. No fsync: the truncate record
    /// already voids what the cut removes, and recovery redoes an unfinished cut; the next
    /// sync makes it durable.
    fn cut_blocks(&mut self, seq: u64, cut_pos: usize, off: u64, first_new: usize) -> Result<()> {
        for pos in (cut_pos + 1..first_new).rev() {
            let path = self.blocks[pos].path.clone();
            let r = self.fs.remove_file(&path);
            self.dur.latch(r, "remove_file", &path)?;
            self.blocks.remove(pos);
        }
        let file = self.open_block(cut_pos)?;
        let b = &mut self.blocks[cut_pos];
        b.copies.cache = None;
        b.copies.shadow = None;
        b.handle.written = true;
        let r = file.set_len(off);
        self.dur.latch(r, "set_len", &b.path)?;
        b.span.len = off;
        b.span.alloc = off;
        // (built again from the entries left, on first use)
        b.index.subj_counts = None;
        b.index.by_subj = None;
        let entries = b.index.loaded_mut();
        entries.keep_first(entries.seq_point(seq.saturating_add(1)));
        b.span.msg_first = entries.get(0).map_or(0, |e| e.seq);
        b.span.msg_last = entries
            .len()
            .checked_sub(1)
            .map_or(0, |i| entries.seq_at(i));
        b.span.max_seq = b.span.max_seq.min(seq);
        b.handle.dirty = true;
        let mut hi = 0;
        for b in self.blocks.iter_mut() {
            hi = hi.max(b.span.msg_last);
            b.span.seq_ceiling = hi;
        }
        self.dur.names_changed();
        // the cut block's last crc is no longer known without a read: re-read it
        let b = &mut self.blocks[cut_pos];
        if b.span.len > BLOCK_HEADER_LEN {
            let mut c = [0u8; 4];
            io_at(file.read_exact_at(&mut c, b.span.len - 4), "read", &b.path)?;
            b.span.last_crc = u32::from_le_bytes(c);
        }
        Ok(())
    }
}
