//! Open after a crash: the state `index.db` vouches for, plus the records written after it.
//!
//! `index.db` is written by `close` and `checkpoint`, after every block is fsynced. A process
//! that goes on appending and then dies leaves the blocks `index.db` lists as they were, except
//! the last one, which may have grown, and new blocks after it. Open trusts the listed blocks as
//! a clean open does (`snapshot.rs` checks each block's length, header and last record; for the
//! last one, the record at its recorded length) and reads only what follows: the grown block
//! from its recorded length, then each newer block, through the rebuild's replay rules
//! (`recover.rs`), on top of the state `index.db` holds.
//!
//! Anything the rebuild would report (a skipped or damaged record, a gap, a sequence out of
//! order, a truncate, a block that disagrees with `index.db`) stops this path: open then
//! rebuilds from every block, as without `index.db`, and reports what that finds. So the tail
//! path only ever takes the common case, records appended in order (messages, tombstones,
//! floors, skips) and the unwritten space after them, and leaves the rest to the rebuild.

use super::entries::Entry;
use super::layout::INDEX_FILE;
use super::recover::{count_live, Rebuild};
use super::replay::Replay;
use super::scan::ScanEnd;
use super::subjects::SubjectMemo;
use super::{io_at, Store};
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenOptions};
use crate::record::BLOCK_HEADER_LEN;

/// What a valid `index.db` does not vouch for.
#[derive(Debug, Default)]
pub(super) struct Tail {
    /// The last block it lists has grown to this length.
    pub(super) grown_to: Option<u64>,
    /// Block files after the ones it lists.
    pub(super) new_blocks: Vec<u64>,
}

impl Tail {
    pub(super) fn is_empty(&self) -> bool {
        self.grown_to.is_none() && self.new_blocks.is_empty()
    }
}

/// Why the tail path gave way to the rebuild (`RecoveryReport::index_rejected`).
fn give_way(why: impl Into<String>) -> Error {
    Error::corrupt(INDEX_FILE, 0, format!("tail: {}", why.into()))
}

impl<F: Fs> Store<F> {
    /// Applies `tail` to the state just loaded from `index.db`. An error leaves the state
    /// half-applied: the caller rebuilds from the blocks (which resets all of it).
    pub(super) fn replay_tail(&mut self, tail: &Tail) -> Result<()> {
        let out_of_order = self.report.out_of_order.len();
        let r = self.replay_tail_inner(tail, out_of_order);
        if r.is_err() {
            // the rebuild finds them again
            self.report.out_of_order.truncate(out_of_order);
        }
        r
    }

    fn replay_tail_inner(&mut self, tail: &Tail, out_of_order: usize) -> Result<()> {
        let (first, msgs) = (self.seq.first(), self.seq.msgs());
        let mut rb = Rebuild {
            replay: Replay::resume(self.seq.floor(), self.seq.last(), self.seq.last_ts()),
            ..Default::default()
        };
        let mut memo = SubjectMemo::new();
        let mut buf = Vec::new();
        let mut added = 0;
        if let Some(flen) = tail.grown_to {
            added += self.extend_last_block(&mut rb, &mut memo, &mut buf, flen)?;
        }
        for (i, &index) in tail.new_blocks.iter().enumerate() {
            let newest = i + 1 == tail.new_blocks.len();
            let Some((file, path, flen)) = self.open_for_rebuild(index)? else {
                continue;
            };
            self.report.tail_scanned += flen.saturating_sub(BLOCK_HEADER_LEN);
            let sb = self.rebuild_block(&mut rb, &mut memo, &mut buf, file, path, flen)?;
            if let Some(why) = sb.unclean() {
                return Err(give_way(why));
            }
            self.finish_rebuilt_block(sb, index, newest)?;
            added += self.blocks.last().map_or(0, |b| b.span.live);
            self.trim_entries();
        }
        self.check_replayed(&rb, out_of_order)?;
        self.seq.set_last(rb.replay.max_seq, rb.replay.max_ts);
        // the first message moves only if the tail removed messages or the stream was empty
        if msgs == 0 || self.seq.msgs() != msgs + added {
            self.set_first_from(first)?;
        }
        // what the tail read must leave a possible stream, else the blocks are read again
        match self.seq.broken() {
            Some(why) => Err(give_way(why)),
            None => Ok(()),
        }
    }

    /// What the replay of the tail found that only the rebuild reports (`out_of_order`: the
    /// findings before the tail).
    fn check_replayed(&self, rb: &Rebuild, out_of_order: usize) -> Result<()> {
        if self.report.out_of_order.len() > out_of_order {
            return Err(give_way("a sequence out of order"));
        }
        if rb.truncates > 0 {
            return Err(give_way("a truncate record"));
        }
        let lost = rb.replay.lost();
        if let Some(r) = lost.first() {
            return Err(give_way(format!(
                "sequences {}..={} missing",
                r.first, r.last
            )));
        }
        Ok(())
    }

    /// Reads the last block `index.db` lists from its recorded length to `flen` and adds what
    /// is there to it. Its entries stay unread unless a record in the tail removes a message
    /// before that length (then they are read, as any removal reads them). Returns the number
    /// of live messages added.
    fn extend_last_block(
        &mut self,
        rb: &mut Rebuild,
        memo: &mut SubjectMemo,
        buf: &mut Vec<u8>,
        flen: u64,
    ) -> Result<u64> {
        let pos = self.blocks.len() - 1;
        let (path, from) = (self.blocks[pos].path.clone(), self.blocks[pos].span.len);
        let rw = OpenOptions::new().read(true).write(true);
        let file = io_at(self.fs.open(&path, rw), "open", &path)?;
        self.report.tail_scanned += flen - from;
        let sb = self.rebuild_scan(rb, memo, buf, (file, path, flen), (pos, from))?;
        if let Some(why) = sb.unclean() {
            return Err(give_way(why));
        }
        let len = match sb.end {
            ScanEnd::Zeros { offset } => {
                io_at(sb.file.set_len(offset), "set_len", &sb.path)?;
                offset
            }
            // (unclean above: damaged; the rebuild's visitor never stops)
            _ => flen,
        };
        let (max_seq, last_crc) = (sb.max_seq, sb.last_crc);
        let b = &mut self.blocks[pos];
        b.span.len = len;
        b.span.alloc = len;
        b.span.max_seq = b.span.max_seq.max(max_seq);
        if let Some(crc) = last_crc {
            b.span.last_crc = crc;
        }
        // what this process reads back may be in the page cache only: the next sync fsyncs it
        b.handle.dirty = true;
        Ok(self.add_tail_entries(pos, sb.entries))
    }

    /// Adds the messages read past a block's recorded length to it: its counts, the
    /// subjects' and the stream's, and its entries (or, unread, its deleted sequences).
    fn add_tail_entries(&mut self, pos: usize, mut entries: Vec<Entry>) -> u64 {
        let Some(last) = entries.last().copied() else {
            return 0;
        };
        let floor = self.seq.floor();
        let Store {
            blocks,
            subjects,
            seq,
            entry_budget,
            ..
        } = &mut *self;
        let b = &mut blocks[pos];
        if b.span.msg_first == 0 {
            b.span.msg_first = entries[0].seq;
        }
        b.span.msg_last = last.seq;
        b.span.seq_ceiling = b.span.seq_ceiling.max(last.seq);
        b.span.ts_hi = Some(last.ts);
        let unread = b.index.entries.is_none();
        let deleted_seqs = &mut b.index.deleted_seqs;
        let (live, live_bytes) = count_live(&mut entries, floor, subjects, |s| {
            if unread {
                deleted_seqs.push(s);
            }
        });
        b.span.live += live;
        b.span.live_bytes += live_bytes;
        seq.counted(live, live_bytes);
        if let Some(loaded) = b.index.entries.as_mut() {
            loaded.full_mut().extend_from_slice(&entries);
            entry_budget.loaded(entries.len());
        }
        live
    }
}
