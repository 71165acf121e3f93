//! The newest block and its write buffer: encoding records, writing out, rolling.

use super::blocks::{reserve_by_density, Block};
use super::entries::Entry;
use super::layout::{block_path, MSGS_DIR};
use super::{io_at, Store};
#[cfg(doc)]
use crate::config::Config;
use crate::config::SyncPolicy;
use crate::error::Result;
use crate::fs::{Fs, FsFile, OpenOptions};
use crate::record::{self, encode, encoded_len, Kind, BLOCK_HEADER_LEN};

impl<F: Fs> Store<F> {
    /// Writes the buffered bytes of the newest block to its file.
    #[track_caller]
    pub(super) fn flush(&mut self) -> Result<()> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        let n = self.wbuf.len();
        let alloc = self.zero_ahead();
        // a buffer implies a block: the newest
        let newest = self.blocks.len() - 1;
        let file = self.open_block(newest)?;
        let b = &mut self.blocks[newest];
        // the newest block is never cached (`prepare_read`); if it ever were, drop the copy
        // rather than let it go stale
        b.copies.cache = None;
        b.handle.written = true;
        let r = file.write_all_at(&self.wbuf, b.span.len);
        self.wbuf.truncate(n);
        // on failure the file's tail is unknown: stop writing until reopened
        self.dur.latch(r, "write", &b.path)?;
        b.shadow_append(&self.wbuf);
        b.span.len += n as u64;
        b.span.alloc = alloc.max(b.span.len);
        self.wbuf.clear();
        Ok(())
    }

    /// The step of [`Config::preallocate`] that applies to this store: 0 under `Never` (no
    /// fsync to speed up) unless [`Config::preallocate_under_never`], and through the crypt
    /// layer (whose frames zeros are not).
    fn prealloc_step(&self) -> u64 {
        let c = &self.cfg;
        if (c.sync == SyncPolicy::Never && !c.preallocate_under_never) || c.layered() {
            return 0;
        }
        c.preallocate
    }

    /// Before the write buffer goes to the newest block: if it reaches past the zeros already
    /// in the file, appends zeros up to the next multiple of the preallocation step (at most
    /// `block_size`), so that the same write fills the file ahead. Returns the file's length
    /// once the buffer is written (the block's `alloc` when nothing was added). The caller
    /// writes the whole buffer but counts only its first (record) bytes into `len`.
    pub(super) fn zero_ahead(&mut self) -> u64 {
        let Some(b) = self.blocks.last() else {
            return 0;
        };
        let end = b.span.len + self.wbuf.len() as u64;
        if end <= b.span.alloc {
            return b.span.alloc;
        }
        let step = self.prealloc_step();
        if step == 0 {
            return end;
        }
        let target = end
            .div_ceil(step)
            .saturating_mul(step)
            .min(self.cfg.block_size.max(end));
        self.wbuf
            .resize(self.wbuf.len() + (target - end) as usize, 0);
        target
    }

    /// Cuts the zeros ahead of the newest block's records (its file ends at `len` again) and
    /// marks it for the next sync, which makes the length durable: for a block being sealed,
    /// and before `index.db` records the lengths. Nothing to do when preallocation is off.
    pub(super) fn cut_zeros(&mut self) -> Result<()> {
        let Some(pos) = self.blocks.len().checked_sub(1) else {
            return Ok(());
        };
        if self.blocks[pos].span.alloc <= self.blocks[pos].span.len {
            return Ok(());
        }
        let file = self.open_block(pos)?;
        let b = &mut self.blocks[pos];
        b.handle.written = true;
        let r = file.set_len(b.span.len);
        self.dur.latch(r, "set_len", &b.path)?;
        b.span.alloc = b.span.len;
        b.handle.dirty = true;
        Ok(())
    }

    /// Starts block `last index + 1`. Its header goes into the write buffer with the first
    /// record; its name is made durable by the next sync (`msgs_dir_dirty`).
    pub(super) fn roll(&mut self) -> Result<()> {
        self.flush()?;
        self.cut_zeros()?;
        if let Some(pos) = self.blocks.len().checked_sub(1) {
            self.rewrite_block(pos)?;
        }
        // the newest block's entries become a sealed block's: the entry cache's to bound,
        // packed when a read first uses them (`BlockIndex::pack_pending`)
        if let Some(b) = self.blocks.last_mut() {
            if let Some(e) = &b.index.entries {
                b.index.pack_pending = true;
                self.entry_budget.loaded(e.len());
            }
        }
        let index = self.blocks.last().map_or(1, |b| b.number + 1);
        let path = block_path(MSGS_DIR, index);
        let file = io_at(
            self.fs.open(
                &path,
                OpenOptions::new().read(true).write(true).create_new(true),
            ),
            "create",
            &path,
        )?;
        self.wbuf.extend_from_slice(&record::block_header(index));
        let hi = self.blocks.last().map_or(0, |b| b.span.seq_ceiling);
        let mut block = Block::new(index, Some(file), 0, hi);
        block.handle.written = true;
        block.span.ts_hi = self.blocks.last().map_or(Some(i64::MIN), |b| b.span.ts_hi);
        if self.cfg.layered() && self.cfg.sync != SyncPolicy::Never {
            let cap = self.cfg.block_size.min(16 << 20) as usize;
            block.copies.shadow = Some(Vec::with_capacity(cap));
        }
        self.blocks.push(block);
        self.dur.names_changed();
        self.dur.set_own_block_first(false);
        // the new block's handle counts against the bound too (`files.rs`)
        self.note_rolled()
    }

    /// What writing record `seq` (checksum `crc`) into block `pos` changes in memory, whoever
    /// wrote it (`write_record`, or `append_in_run` for a run of records).
    #[inline(always)]
    pub(super) fn note_written(&mut self, pos: usize, seq: u64, crc: u32) {
        self.dur.wrote();
        let b = &mut self.blocks[pos];
        b.span.last_crc = crc;
        b.span.max_seq = b.span.max_seq.max(seq);
        b.handle.dirty = true;
        b.handle.written = true;
    }

    /// Indexes message `seq` (timestamp `ts`, subject `sid`), whose record of `len` bytes is at
    /// `off` in block `pos` (loaded): its entry and every counter an append moves, once the
    /// record is written (and, under `Always`, durable). For `append_inner` and `append_in_run`.
    #[inline(always)]
    pub(super) fn add_entry(
        &mut self,
        pos: usize,
        seq: u64,
        ts: i64,
        off: u64,
        len: u64,
        sid: u32,
    ) {
        let block_size = self.cfg.block_size;
        let b = &mut self.blocks[pos];
        let entries = b.index.loaded_mut().full_mut();
        if entries.len() == entries.capacity() {
            reserve_by_density(entries, off + len, block_size.max(b.span.len));
        }
        entries.push(Entry {
            seq,
            ts,
            off: off as u32,
            len: len as u32,
            subj: sid,
            deleted: false,
        });
        if let Some(c) = b.index.subj_counts.as_mut() {
            super::subj_counts::bump(c, sid, 1);
        }
        if let Some(x) = b.index.by_subj.as_mut() {
            x.push(sid, seq);
        }
        if b.span.msg_first == 0 {
            b.span.msg_first = seq;
        }
        b.span.msg_last = seq;
        b.span.seq_ceiling = seq;
        b.span.ts_hi = Some(ts);
        b.span.live += 1;
        b.span.live_bytes += len;
        self.seq.added(seq, ts, len);
        self.subjects.added(sid, seq);
    }

    /// Encodes one record into the newest block (rolling over if it is full). Returns the
    /// block position, offset and length. With `encoded`, the record is already encoded (with
    /// its crc), e.g. by the caller of [`Store::append_encoded`], and these are its fields: its
    /// bytes are copied as they are.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_record(
        &mut self,
        kind: Kind,
        seq: u64,
        ts: i64,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        encoded: Option<(&[u8], u32)>,
    ) -> Result<(usize, u64, u32)> {
        // (pre-encoded: its own length; the name may be absent, see `Subj::Known`)
        let len = match encoded {
            Some((bytes, _)) => bytes.len() as u64,
            None => encoded_len(subject.len(), headers.len(), payload.len()) as u64,
        };
        let roll = match self.blocks.last() {
            None => true,
            Some(_) if self.dur.own_block_first() => true,
            Some(b) => {
                let end = b.span.len + self.wbuf.len() as u64;
                end > BLOCK_HEADER_LEN && end + len > self.cfg.block_size
            }
        };
        if roll {
            self.roll()?;
        }
        let pos = self.blocks.len() - 1;
        // appends index into the newest block's entries: read it if open left it unread (not
        // `ensure_loaded`: the newest block is never evicted, its recency is not needed)
        if self.blocks[pos].index.entries.is_none() {
            self.load_entries(pos)?;
        }
        let off = self.blocks[pos].span.len + self.wbuf.len() as u64;
        let crc = match encoded {
            Some((bytes, crc)) => {
                self.wbuf.extend_from_slice(bytes);
                crc
            }
            None => encode(
                &mut self.wbuf,
                kind,
                0,
                seq,
                ts,
                subject.as_bytes(),
                headers,
                payload,
            ),
        };
        self.note_written(pos, seq, crc);
        if self.wbuf.len() >= self.cfg.write_buffer {
            self.flush()?;
        }
        Ok((pos, off, len as u32))
    }

    /// The time a tombstone or floor record for `seq` carries: `now`, but the last message's
    /// time for the last sequence. Such a record can be the highest one left (the blocks of
    /// the messages it removed dropped), and recovery then takes the stream's last time from
    /// it: the live store's is the last message's.
    pub(super) fn marker_ts(&self, seq: u64, now: i64) -> i64 {
        if seq == self.seq.last() {
            self.seq.last_ts()
        } else {
            now
        }
    }

    pub(super) fn marker(&mut self, kind: Kind, seq: u64, ts: i64) -> Result<()> {
        self.write_record(kind, seq, ts, "", &[], &[], None)?;
        if kind == Kind::Floor {
            self.seq
                .floor_written(seq, self.blocks.last().map(|b| b.number));
        }
        Ok(())
    }
}
