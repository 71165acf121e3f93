//! Removals: delete, erase, purge by subject, compact, and dropping empty front blocks.

use super::blocks::patch_copy;
use super::sync::{S_COMPACT, S_DROP, S_ERASE, S_PURGE_EX};
use super::Store;
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile};
use crate::record::{self, Kind};
use crate::subject;

impl<F: Fs> Store<F> {
    /// Removes leading blocks with no live message (never the newest). Before each removal
    /// everything is fsynced (the tombstones and floors that emptied it, and the previous
    /// removal): a removed block must never be the only record of the last sequence, and a
    /// block whose removal is undone by a crash must come back with the tombstones that
    /// delete its messages. If the blocks going away hold the last sequence, a floor record
    /// for it is written first (nothing live is at or below it then).
    pub(super) fn drop_empty_front_blocks(&mut self) -> Result<()> {
        let n = self
            .blocks
            .iter()
            .take(self.blocks.len().saturating_sub(1))
            .take_while(|b| b.span.live == 0)
            .count();
        if n == 0 {
            return Ok(());
        }
        let kept_max = self.blocks[n..]
            .iter()
            .map(|b| b.span.max_seq)
            .max()
            .unwrap_or(0);
        if kept_max < self.seq.last() {
            debug_assert_eq!(self.seq.msgs(), 0, "live messages above the dropped blocks");
            let (l, ts) = (self.seq.last(), self.seq.last_ts());
            self.marker(Kind::Floor, l, ts)?;
            self.seq.raise_floor(l);
        } else if self.seq.floor() > 0
            && self
                .seq
                .floor_held_by()
                .is_none_or(|b| b < self.blocks[n].number)
        {
            // the floor's record may be in a dropped block: without it recovery would find
            // no floor, and the consumers, clamped above it, would go back on reopen
            let (f, ts) = (self.seq.floor(), self.seq.last_ts());
            self.marker(Kind::Floor, f, ts)?;
        }
        for _ in 0..n {
            self.sync_inner(S_DROP)?;
            let path = self.blocks[0].path.clone();
            let r = self.fs.remove_file(&path);
            self.dur.latch(r, "remove_file", &path)?;
            self.blocks.remove(0);
            self.dur.names_changed();
        }
        Ok(())
    }

    /// The highest floor: every sequence at or below it was removed by a purge, a compact,
    /// a `purge_ex` that consumers saw, the limits or the removal of the blocks holding
    /// everything. Consumers are clamped above it (not above the first sequence: a delete
    /// does not move them, as in NATS).
    pub(crate) fn consumer_floor(&self) -> u64 {
        self.seq.floor()
    }

    /// The live message `seq`, if there is one (block position, entry index).
    pub(crate) fn find_live(&mut self, seq: u64) -> Result<Option<(usize, usize)>> {
        self.find(seq)
    }

    /// NATS moves every consumer up to the stream's first sequence at every purge and
    /// compact, also where that purge removed nothing below it (the messages there were
    /// deleted before). Where consumers exist and the first sequence is above the floor, a
    /// floor record for `first - 1` keeps that (it removes nothing: nothing is live below
    /// the first sequence); the caller's fsync makes it durable. Without consumers nothing
    /// reads it, and nothing is written.
    fn floor_for_consumers(&mut self) -> Result<()> {
        let target = self.seq.first().saturating_sub(1).min(self.seq.last());
        if self.consumers.all.is_empty() || target <= self.seq.floor() {
            return Ok(());
        }
        let ts = self.seq.last_ts();
        self.marker(Kind::Floor, target, ts)?;
        self.seq.raise_floor(target);
        Ok(())
    }

    /// Deletes every live message with a sequence `<= f` (in memory; the caller writes the
    /// floor record). Returns how many.
    pub(super) fn apply_floor(&mut self, f: u64) -> Result<u64> {
        let mut n = 0;
        for pos in 0..self.blocks.len() {
            let b = &self.blocks[pos];
            if b.span.msg_first > f || b.span.msg_first == 0 {
                if b.span.msg_first > f {
                    break;
                }
                continue;
            }
            n += self.delete_in_block(pos, |seq| seq <= f)?;
        }
        self.seq.raise_floor(f);
        Ok(n)
    }

    /// Deletes message `seq` by writing a tombstone (durable per the sync policy).
    pub fn delete(&mut self, seq: u64) -> Result<()> {
        self.check_writable()?;
        self.trim_entries();
        let (pos, i) = self.find(seq)?.ok_or(Error::NotFound { seq })?;
        let ts = self.marker_ts(seq, self.now());
        self.marker(Kind::Tombstone, seq, ts)?;
        self.maybe_sync()?;
        self.mark_deleted(pos, i);
        if seq == self.seq.first() {
            self.set_first_from(seq + 1)?;
        }
        self.drop_empty_front_blocks()
    }

    /// Deletes message `seq` and overwrites its subject, headers and payload on disk with
    /// zeros. The tombstone is made durable before the overwrite, so an interrupted overwrite
    /// recovers as an erased message, never as a lost one. A message already removed is
    /// `NotFound`, and its removal (perhaps an unsynced delete) is fsynced first: it does not
    /// come back after a crash either. Its bytes are not overwritten: erase, not delete, when
    /// the payload must go.
    pub fn erase(&mut self, seq: u64) -> Result<()> {
        self.check_writable()?;
        self.trim_entries();
        let Some((pos, i)) = self.find(seq)? else {
            // Already removed, perhaps by an unsynced delete: an erase promises that the
            // message never comes back, so make the removal durable before saying so.
            self.sync_inner(S_ERASE)?;
            return Err(Error::NotFound { seq });
        };
        let e = self.blocks[pos].loaded().at(i);
        let old = self.read_entry(pos, i)?;
        let lens = (old.subject.len(), old.headers.len(), old.payload.len());
        // a message with a ttl: its frame is the ttl field longer, and that field is zeroed too
        let with_ttl =
            record::encoded_len(lens.0, lens.1, lens.2) + record::TTL_LEN == e.len as usize;
        let mut erased = Vec::with_capacity(e.len as usize);
        let crc = record::encode_erased(&mut erased, seq, old.ts, lens, with_ttl);
        // check before the write: same frame, so every other record stays where it is
        assert_eq!(
            erased.len(),
            e.len as usize,
            "erase keeps the record's length"
        );
        let ts = self.marker_ts(seq, self.now());
        self.marker(Kind::Tombstone, seq, ts)?;
        // The tombstone is durable before the overwrite starts: a torn overwrite fails its crc
        // and recovery skips the record, so without a durable tombstone for it a torn erase of
        // the last message would lose the last sequence (found by the fault sweep with records
        // larger than a sector).
        self.sync_inner(S_ERASE)?;
        let file = self.open_block(pos)?;
        let b = &mut self.blocks[pos];
        // the copies first: an erased payload must not live on in memory (the block cache),
        // nor be written back when the newest block is sealed (its shadow copy)
        patch_copy(&mut b.copies.cache, e.off as usize, &erased);
        patch_copy(&mut b.copies.shadow, e.off as usize, &erased);
        let r = file.write_all_at(&erased, e.off as u64);
        b.handle.written = true;
        self.dur.latch(r, "write", &b.path)?;
        if e.off as u64 + e.len as u64 == b.span.len {
            b.span.last_crc = crc;
        }
        b.handle.dirty = true;
        // Through the crypt layer the record's old frame is still in the file (the layer
        // never writes over a frame): a sealed block is rewritten without it now, the newest
        // when it is sealed.
        if pos + 1 < self.blocks.len() {
            self.rewrite_block(pos)?;
        }
        self.mark_deleted(pos, i);
        if seq == self.seq.first() {
            self.set_first_from(seq + 1)?;
        }
        self.maybe_sync()?;
        self.drop_empty_front_blocks()
    }

    /// Removes messages as NATS's `PurgeEx(filter, up_to_seq, keep)` does. `up_to_seq` is
    /// exclusive (0: no bound; 1: nothing to remove); `keep` counts across the filter, not
    /// per subject:
    /// - no filter (`>` or empty): without `up_to_seq` and `keep`, [`Store::purge`]; with
    ///   `up_to_seq > 1`, [`Store::compact`]`(up_to_seq)` (`keep` is ignored, as NATS ignores
    ///   it, and a bound past the end raises the last sequence);
    /// - otherwise the oldest matching messages below `up_to_seq` go, at most as many as
    ///   leave the `keep` newest of all the matching messages (wherever they are).
    ///
    /// Tombstones, fsynced before return. The promise, in every sync policy: once this
    /// returns, no crash brings back a message it removed — nor a matching message below
    /// `up_to_seq` that earlier unsynced deletes had removed (they are not counted in the
    /// returned number, but their removal is made durable here too, as is everything written
    /// before the call).
    pub fn purge_ex(&mut self, filter: &str, up_to_seq: u64, keep: u64) -> Result<u64> {
        self.check_writable()?;
        self.trim_entries();
        let filter = if filter.is_empty() { ">" } else { filter };
        subject::validate_filter(filter)?;
        if filter == ">" && up_to_seq == 0 && keep == 0 {
            return self.purge();
        }
        if filter == ">" && up_to_seq > 1 {
            return self.compact(up_to_seq);
        }
        let mut cands: Vec<(usize, usize)> = Vec::new();
        // how many messages match in the whole stream: what `keep` counts against
        let mut total = 0u64;
        if up_to_seq != 1 {
            let mut cache: Vec<u8> = vec![0; self.subjects.len()];
            for pos in 0..self.blocks.len() {
                if self.blocks[pos].span.live == 0 {
                    continue;
                }
                if keep == 0 && up_to_seq > 0 && self.blocks[pos].span.msg_first >= up_to_seq {
                    break;
                }
                self.ensure_loaded(pos)?;
                cache.resize(self.subjects.len(), 0);
                for (i, e) in self.blocks[pos].loaded().iter().enumerate() {
                    if e.deleted {
                        continue;
                    }
                    let k = e.subj as usize;
                    if cache[k] == 0 {
                        cache[k] = if subject::matches(filter, &self.subjects.names()[k]) {
                            1
                        } else {
                            2
                        };
                    }
                    if cache[k] == 1 {
                        total += 1;
                        if up_to_seq == 0 || e.seq < up_to_seq {
                            cands.push((pos, i));
                        }
                    }
                }
            }
        }
        if keep > 0 {
            // the oldest go first, and `keep` of all the matching messages stay
            cands.truncate(total.saturating_sub(keep) as usize);
        }
        if cands.is_empty() {
            // Nothing left to remove in memory, but earlier unsynced deletes may be what
            // removed the matching messages: after `purge_ex` returns none of them may come
            // back, so make them durable (the rule for structural operations).
            self.floor_for_consumers()?;
            self.sync_inner(S_PURGE_EX)?;
            return Ok(0);
        }
        let now = self.now();
        for &(pos, i) in &cands {
            let seq = self.blocks[pos].loaded().seq_at(i);
            let ts = self.marker_ts(seq, now);
            self.marker(Kind::Tombstone, seq, ts)?;
            self.mark_deleted(pos, i);
        }
        let first = self.seq.first();
        self.set_first_from(first)?;
        self.floor_for_consumers()?;
        self.sync_inner(S_PURGE_EX)?;
        self.drop_empty_front_blocks()?;
        Ok(cands.len() as u64)
    }

    /// Removes every message with a sequence below `seq`; `first_seq` becomes at least `seq`
    /// (and `last_seq` too, `seq - 1`, if it was lower). One floor record, fsynced before
    /// return; when memory already shows nothing below `seq`, no record is needed, but what
    /// removed it (perhaps unsynced deletes) is fsynced instead. Either way, once this returns
    /// no crash recovers a message below `seq` or a last sequence below `seq - 1`. Returns the
    /// number of messages removed.
    pub fn compact(&mut self, seq: u64) -> Result<u64> {
        self.check_writable()?;
        self.trim_entries();
        if seq == 0 || seq - 1 > record::MAX_SEQ {
            return Err(Error::InvalidArgument(format!("compact({seq})")));
        }
        let f = seq - 1;
        if f < self.seq.first() && f <= self.seq.last() {
            // Memory already shows every sequence below `seq` gone, but possibly only through
            // removals that were never synced (a delete under `Never`): a crash would bring
            // them back, and with them a last sequence below `f`. Nothing new to write; make
            // what is there durable (ARCHITECTURE.md, "The rule for structural operations").
            #[cfg(feature = "ablation")]
            if self.cfg.ablation == crate::Ablation::CompactEarlyReturn {
                return Ok(0);
            }
            self.floor_for_consumers()?;
            self.sync_inner(S_COMPACT)?;
            return Ok(0);
        }
        let raises_last = f > self.seq.last();
        let ts = if raises_last {
            self.now().max(self.seq.last_ts())
        } else {
            self.seq.last_ts()
        };
        self.marker(Kind::Floor, f, ts)?;
        self.sync_inner(S_COMPACT)?;
        let n = self.apply_floor(f)?;
        if raises_last {
            self.seq.set_last(f, ts);
        }
        self.set_first_from(f + 1)?;
        if self.seq.first() - 1 > self.seq.floor() && !self.consumers.all.is_empty() {
            // the compact landed on deleted messages: the consumers move up to the first
            // message after them, as NATS's do
            self.floor_for_consumers()?;
            self.sync_inner(S_COMPACT)?;
        }
        self.drop_empty_front_blocks()?;
        Ok(n)
    }
}
