//! The blocks in memory: entries, loading them lazily, finding a sequence, marking removals.

use super::entries::{Entries, Entry};
use super::layout::{block_path, MSGS_DIR};
use super::scan::{scan_raw, Reads, ScanEnd, Step, READ_CHUNK};
use super::subjects::SubjectMemo;
use super::Store;
use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::record::{self, Kind, BLOCK_HEADER_LEN};
use std::sync::Arc;

/// A block of `msgs/` in memory: its number and path, and four parts that change apart, so
/// that a function shows which it touches and can borrow two at once.
pub(super) struct Block<H> {
    pub(super) number: u64,
    pub(super) path: String,
    /// What the block holds on disk: its length, its sequences and what of it is live.
    pub(super) span: BlockSpan,
    /// The open file and whether its writes are durable.
    pub(super) handle: BlockHandle<H>,
    /// The loaded index of its records, and what stands in for it when the entry cache
    /// dropped it.
    pub(super) index: BlockIndex,
    /// Copies of its bytes kept for reads and for sealing, and how often it is read.
    pub(super) copies: BlockCopies,
}

/// What a block holds on disk: its length, the sequences and timestamps in it, and what is
/// live. Changes with each record written to the block (append, seal, truncate) and each
/// message removed from it; never dropped while the block is in memory.
pub(super) struct BlockSpan {
    /// Bytes of records in the file (the write buffer holds more, for the newest block).
    pub(super) len: u64,
    /// The file's length: `len`, or more for the newest block, whose file is filled with
    /// zeros ahead of `len` (`Config::preallocate`). Sealed blocks end at `len`.
    pub(super) alloc: u64,
    /// Sequences of the first and last message records in the block (0 if none).
    pub(super) msg_first: u64,
    pub(super) msg_last: u64,
    /// Highest message sequence in this or any earlier block: non-decreasing, so a lookup
    /// by sequence is a binary search over blocks.
    pub(super) seq_ceiling: u64,
    /// Highest sequence of any record in the block.
    pub(super) max_seq: u64,
    /// The timestamp of the last message record written to this block or, if it has none, to
    /// the blocks before it (`i64::MIN`: none at all); `None` when not known (an index.db
    /// before version 3): found on first use. Timestamps do not decrease along a stream
    /// written by appends, so neither does this along the blocks, and `seq_from_time` finds
    /// its block by it without reading one. Not lowered when a truncate cuts the block.
    pub(super) ts_hi: Option<i64>,
    pub(super) live: u64,
    pub(super) live_bytes: u64,
    pub(super) last_crc: u32,
}

/// What a block's summary claims that no block holds (`None`: nothing), for a span of
/// messages `msg_first..=msg_last` (0, 0: none) of which `live` remain, of `live_bytes` record
/// bytes. Checked on both sides of the disk: `index.db`'s summaries are refused at open when
/// they fail it (`snapshot.rs`), and the store asserts it of the summaries it makes (a rebuilt
/// block, the summaries `index.db` is written from).
pub(super) fn summary_broken(
    msg_first: u64,
    msg_last: u64,
    live: u64,
    live_bytes: u64,
) -> Option<&'static str> {
    if msg_first > msg_last {
        return Some("first message after the last");
    }
    if (msg_first == 0) != (msg_last == 0) {
        return Some("one end of the message range missing");
    }
    let span = match msg_last {
        0 => 0,
        _ => msg_last - msg_first + 1,
    };
    if live > span {
        return Some("more live messages than the range holds");
    }
    // (a record is never empty: live messages have bytes, and bytes are live messages')
    if (live == 0) != (live_bytes == 0) {
        return Some("live messages and live bytes disagree");
    }
    None
}

impl BlockSpan {
    /// [`summary_broken`] of this span.
    pub(super) fn broken(&self) -> Option<&'static str> {
        summary_broken(self.msg_first, self.msg_last, self.live, self.live_bytes)
    }
}

/// A block's open file and its durability. Changes when the file is opened or closed
/// (`files.rs`), written (`dirty`, `written` set) or fsynced (cleared).
pub(super) struct BlockHandle<H> {
    /// The open file, or `None` when closed (`files.rs`: opened on use, at most
    /// `Config::open_blocks` held). Shared so that a group commit can fsync it without
    /// holding the store (see `SharedStore`).
    pub(super) file: Option<Arc<H>>,
    /// When `file` was last used (`FileBound`'s tick): the least recent is closed first.
    pub(super) file_used: u64,
    /// Has writes that are not fsynced (by this process, or by one before it: every block
    /// open finds is fsynced by the next sync).
    pub(super) dirty: bool,
    /// This process wrote it through `file` since its last fsync: the handle stays open until
    /// that fsync (`files.rs`).
    pub(super) written: bool,
}

/// A block's loaded index: its entries and the subject views built from them, or, while the
/// entry cache has dropped them (`entry_cache.rs`), what lets a read do without them.
/// Changes when the entries are loaded, packed, dropped or rebuilt, and as messages in the
/// block are written or removed.
pub(super) struct BlockIndex {
    /// `None` until the block is read (blocks known from `index.db` are read on first use).
    pub(super) entries: Option<Entries>,
    /// Deleted sequences of an unread block (from `index.db`, or kept when the entry cache
    /// dropped its entries), sorted.
    pub(super) deleted_seqs: Vec<u64>,
    /// When the entry cache dropped its entries: every `MARK_EVERY`-th message record's
    /// (sequence − `msg_first`, offset), so that a get finds its record by reading a few
    /// records instead of the whole block (empty otherwise).
    pub(super) marks: Vec<(u32, u32)>,
    /// When `entries` were last used (`EntryBudget`'s tick): the least recent leave first.
    pub(super) used: u64,
    /// Sealed by a roll with its full entries: they are packed when a read first uses them
    /// (`ensure_loaded`), or dropped unpacked if the entry cache evicts them first, so that
    /// a stream only appended to never pays for packing on its append path.
    pub(super) pack_pending: bool,
    /// Its entries cannot be built again by `load_entries` (the rebuild skipped damaged or
    /// out-of-order records in it, which a plain scan would refuse or count): never evicted.
    pub(super) pinned: bool,
    /// Live messages per subject id, sorted by id, once asked for (`subj_counts.rs`).
    pub(super) subj_counts: Option<Vec<(u32, u32)>>,
    /// Live sequences per subject id, once asked for; dropped with the entries.
    pub(super) by_subj: Option<Box<super::subj_counts::SubjectSeqs>>,
}

/// Copies of a block's bytes kept in memory for reads (`cache.rs`) and for sealing
/// (`seal.rs`), with the read counts that decide what is cached. Changes on reads (counts,
/// caching, eviction) and with every write to the block (a copy is patched, extended or
/// dropped).
pub(super) struct BlockCopies {
    /// The block's bytes `[0, cache.len())`, kept for reads (sealed blocks only; see
    /// `Store::prepare_read`). Every write inside that range updates or drops it.
    pub(super) cache: Option<Box<[u8]>>,
    /// The newest block's bytes `[0, len)` as written, kept through the crypt layer under
    /// `Always`/`Interval` so that sealing can rewrite the block without decrypting it back
    /// (`seal.rs`). `None` otherwise, and from any write it does not follow (it is dropped).
    pub(super) shadow: Option<Vec<u8>>,
    /// Reads of this block, halved now and then (`Store::prepare_read`): how hot it is.
    pub(super) heat: u64,
    /// Reads by `pread` since the block was last cached or evicted (admission counter).
    pub(super) uncached_reads: u64,
}

/// The blocks in memory, oldest first (`list`, which `Blocks` derefs to), with the
/// bookkeeping of the two caches over them and the blocks a purge replaced.
pub(super) struct Blocks<H> {
    pub(super) list: Vec<Block<H>>,
    /// The blocks a purge replaced (their memory) and whether `purge.old/` is still on disk:
    /// released by `cleanup` (tick, close, the next purge), not inside `purge`.
    pub(super) retired: Vec<Block<H>>,
    pub(super) purge_old_pending: bool,
    /// Reads since the block heats were last halved (the block cache, `cache.rs`).
    pub(super) reads_since_decay: u64,
}

impl<H> Blocks<H> {
    pub(super) fn new() -> Self {
        Blocks {
            list: Vec::new(),
            retired: Vec::new(),
            purge_old_pending: false,
            reads_since_decay: 0,
        }
    }
}

impl<H> std::ops::Deref for Blocks<H> {
    type Target = Vec<Block<H>>;
    fn deref(&self) -> &Vec<Block<H>> {
        &self.list
    }
}

impl<H> std::ops::DerefMut for Blocks<H> {
    fn deref_mut(&mut self) -> &mut Vec<Block<H>> {
        &mut self.list
    }
}

/// Writes `bytes` at `at` into a copy of a block's bytes (`cache`, `shadow`), or drops the
/// copy if it does not reach that far: a copy never holds bytes the file no longer does.
pub(super) fn patch_copy<T: AsMut<[u8]>>(copy: &mut Option<T>, at: usize, bytes: &[u8]) {
    let patched = copy.as_mut().is_some_and(|c| {
        let c = c.as_mut();
        let fits = at + bytes.len() <= c.len();
        if fits {
            c[at..at + bytes.len()].copy_from_slice(bytes);
        }
        fits
    });
    if !patched {
        *copy = None;
    }
}

impl BlockIndex {
    /// The entries, loaded: one `ensure_loaded` made so in this operation (the entry cache
    /// drops none before the operation returns, `entry_cache.rs`), or the newest block's
    /// (never dropped), or ones a rebuild just read. (A method of the index part, so that a
    /// caller can hold them and still touch the block's other parts.)
    #[allow(clippy::expect_used)] // the invariant above; a miss is a bug in the store, not input
    #[inline]
    pub(super) fn loaded(&self) -> &Entries {
        self.entries.as_ref().expect("loaded")
    }

    /// [`BlockIndex::loaded`], mutable.
    #[allow(clippy::expect_used)] // as `loaded`
    #[inline]
    pub(super) fn loaded_mut(&mut self) -> &mut Entries {
        self.entries.as_mut().expect("loaded")
    }
}

impl<H> Block<H> {
    /// The block's entries, loaded ([`BlockIndex::loaded`]).
    #[inline]
    pub(super) fn loaded(&self) -> &Entries {
        self.index.loaded()
    }

    /// [`Block::loaded`], mutable.
    #[inline]
    pub(super) fn loaded_mut(&mut self) -> &mut Entries {
        self.index.loaded_mut()
    }

    /// After `bytes` were written at `len` (the block's end): extends the shadow copy, or
    /// drops it if it does not end where they begin.
    #[inline]
    pub(super) fn shadow_append(&mut self, bytes: &[u8]) {
        if let Some(sh) = self.copies.shadow.as_mut() {
            if sh.len() as u64 == self.span.len {
                sh.extend_from_slice(bytes);
            } else {
                self.copies.shadow = None;
            }
        }
    }

    /// Block `index` of `msgs/` on `file` (`None`: opened on first use), `len` bytes, with
    /// no message yet and its entries loaded (empty), marked as having unsynced writes (not
    /// this process's); `seq_ceiling` is the previous block's. Each place that makes a block
    /// sets what it knows beyond that.
    pub(super) fn new(number: u64, file: Option<H>, len: u64, seq_ceiling: u64) -> Self {
        Block {
            number,
            path: block_path(MSGS_DIR, number),
            span: BlockSpan {
                len,
                alloc: len,
                msg_first: 0,
                msg_last: 0,
                seq_ceiling,
                max_seq: 0,
                ts_hi: Some(i64::MIN),
                live: 0,
                live_bytes: 0,
                last_crc: 0,
            },
            handle: BlockHandle {
                file: file.map(Arc::new),
                file_used: 0,
                dirty: true,
                written: false,
            },
            index: BlockIndex {
                entries: Some(Entries::Full(Vec::new())),
                deleted_seqs: Vec::new(),
                marks: Vec::new(),
                used: 0,
                pack_pending: false,
                pinned: false,
                subj_counts: None,
                by_subj: None,
            },
            copies: BlockCopies {
                cache: None,
                shadow: None,
                heat: 0,
                uncached_reads: 0,
            },
        }
    }
}

/// Before a full `entries` of a block grows (the rebuild scan's, or the newest block's on
/// append): reserves room for as many entries as the block holds at the density seen so far
/// (`seen` bytes of its `len`), bounded by the most it could hold. Doubling from empty copied
/// a block's vector ~17 times, and in the wasm guest each copy touches fresh linear memory (no
/// `mremap`): page faults were a tenth of its rebuild, and of a fresh instance's appends.
pub(super) fn reserve_by_density(entries: &mut Vec<Entry>, seen: u64, len: u64) {
    // One estimate reserves at most this many entries beyond what the vector holds (8 MiB):
    // a huge block's first, tiny record must not reserve for the whole block at once.
    const MAX_STEP: u64 = 1 << 18;
    let body = |x: u64| x.saturating_sub(BLOCK_HEADER_LEN).max(1);
    let n = entries.len() as u64 + 1;
    let most = body(len) / record::REC_OVERHEAD as u64;
    // (the estimate over-reserves by up to 1/8 rather than grow again for a few records; it
    // never grows by less than doubling would, in case records shrink along the block)
    let est = (n.saturating_mul(body(len)) / body(seen)).saturating_mul(9) / 8;
    let want = est.min(n + MAX_STEP).max(2 * n).min(most.max(n));
    entries.reserve(want as usize - entries.len());
}

impl<F: Fs> Store<F> {
    /// Reads an unread block (known from `index.db`) and builds its entries. The check is
    /// inlined (every append asks, about the newest block); the load is not.
    #[inline]
    pub(super) fn ensure_loaded(&mut self, pos: usize) -> Result<()> {
        self.touch_entries(pos);
        let b = &mut self.blocks[pos];
        if let Some(e) = &mut b.index.entries {
            if b.index.pack_pending {
                b.index.pack_pending = false;
                e.pack();
            }
            return Ok(());
        }
        self.load_entries(pos)
    }

    #[inline(never)]
    pub(super) fn load_entries(&mut self, pos: usize) -> Result<()> {
        let file = self.open_block(pos)?;
        let floor = self.seq.floor();
        let Store {
            blocks, subjects, ..
        } = &mut *self;
        let b = &blocks[pos];
        let mut entries =
            Vec::with_capacity((b.span.live as usize).saturating_add(b.index.deleted_seqs.len()));
        let mut memo = SubjectMemo::new();
        let mut bad: Option<(u64, String)> = None;
        let end = scan_raw(
            &*file,
            &b.path,
            BLOCK_HEADER_LEN,
            b.span.len,
            Reads::upto(READ_CHUNK),
            &mut Vec::new(),
            |off, r| {
                if r.kind == Kind::Msg {
                    let deleted =
                        r.seq <= floor || b.index.deleted_seqs.binary_search(&r.seq).is_ok();
                    let subj = match subjects.intern_bytes(&mut memo, r.subject, r.flags) {
                        Ok(id) => id,
                        Err(reason) => return Ok(Step::Refuse(reason)),
                    };
                    entries.push(Entry::of(off, r, subj, deleted));
                }
                Ok(Step::Next)
            },
            |off, reason, _| {
                bad.get_or_insert((off, reason.to_string()));
                Ok(())
            },
        )?;
        match end {
            // (this visitor never stops the scan)
            ScanEnd::Clean | ScanEnd::Stopped { .. } => {}
            // index.db vouched for this length: unwritten space inside it is damage too
            ScanEnd::Zeros { offset } => {
                bad.get_or_insert((offset, "zeros at the end (unwritten space)".into()));
            }
            ScanEnd::Damaged { offset, reason } => {
                bad.get_or_insert((offset, reason));
            }
        }
        if let Some((off, reason)) = bad {
            return Err(Error::corrupt(b.path.clone(), off, reason));
        }
        let live = entries.iter().filter(|e| !e.deleted).count() as u64;
        if live != b.span.live
            || entries.first().map_or(0, |e| e.seq) != b.span.msg_first
            || entries.last().map_or(0, |e| e.seq) != b.span.msg_last
        {
            return Err(Error::corrupt(
                b.path.clone(),
                0,
                "block contents disagree with index.db",
            ));
        }
        self.entry_budget.loaded(entries.len());
        let mut entries = Entries::from(entries);
        // a sealed block's entries only take deleted marks: packed (`entries.rs`)
        if pos + 1 < self.blocks.len() {
            entries.pack();
        }
        let b = &mut self.blocks[pos];
        b.index.entries = Some(entries);
        b.index.by_subj = None;
        b.index.deleted_seqs = Vec::new();
        b.index.marks = Vec::new();
        Ok(())
    }

    /// Sets the sequence's first message to the first live message at or after `from`.
    pub(super) fn set_first_from(&mut self, from: u64) -> Result<()> {
        if self.seq.msgs() == 0 {
            self.seq.set_first(None);
            return Ok(());
        }
        let mut pos = self.blocks.partition_point(|b| b.span.seq_ceiling < from);
        while pos < self.blocks.len() {
            if self.blocks[pos].span.live > 0 {
                self.ensure_loaded(pos)?;
                let entries = self.blocks[pos].loaded();
                let start = entries.seq_point(from);
                let hit = entries.range(start, entries.len()).position(|e| !e.deleted);
                if let Some(i) = hit.map(|k| start + k) {
                    let first = entries.seq_at(i);
                    let ts = self.entry_ts(pos, i)?;
                    self.seq.set_first(Some((first, ts)));
                    return Ok(());
                }
            }
            pos += 1;
        }
        Err(Error::corrupt(
            MSGS_DIR,
            0,
            "message count says more messages than the blocks hold",
        ))
    }

    /// The timestamp of entry `i` of block `pos` (loaded): from the entry, or from the record
    /// where the block packed its entries without timestamps (`Entries::ts_exact`).
    pub(super) fn entry_ts(&self, pos: usize, i: usize) -> Result<i64> {
        let entries = self.blocks[pos].loaded();
        if entries.ts_exact() {
            return Ok(entries.at(i).ts);
        }
        Ok(self.read_entry(pos, i)?.ts)
    }

    /// Marks the live messages of block `pos` whose sequence `which` selects deleted (in
    /// memory; the caller writes the records that make it so). Returns how many.
    pub(super) fn delete_in_block(
        &mut self,
        pos: usize,
        which: impl Fn(u64) -> bool,
    ) -> Result<u64> {
        if self.blocks[pos].span.live == 0 {
            return Ok(0);
        }
        self.ensure_loaded(pos)?;
        let idx: Vec<usize> = self.blocks[pos]
            .loaded()
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.deleted && which(e.seq))
            .map(|(i, _)| i)
            .collect();
        for &i in &idx {
            self.mark_deleted(pos, i);
        }
        Ok(idx.len() as u64)
    }

    /// Marks entry `i` of block `pos` deleted and updates every counter. `first_seq` is fixed
    /// by the caller (`set_first_from`) once a batch is done.
    pub(super) fn mark_deleted(&mut self, pos: usize, i: usize) {
        let b = &mut self.blocks[pos];
        let entries = b.loaded_mut();
        let e = entries.at(i);
        debug_assert!(!e.deleted);
        entries.set_deleted(i);
        let (seq, len, sid) = (e.seq, e.len as u64, e.subj);
        if let Some(c) = b.index.subj_counts.as_mut() {
            super::subj_counts::bump(c, sid, -1);
        }
        b.index.by_subj = None;
        b.span.live -= 1;
        b.span.live_bytes -= len;
        self.seq.removed(len);
        self.subjects.removed(sid, seq);
        // a consumer with it pending sees it acknowledged (NATS's consumers do the same)
        self.note_removed(seq);
    }

    /// Finds the live message `seq`: (block position, entry index).
    pub(super) fn find(&mut self, seq: u64) -> Result<Option<(usize, usize)>> {
        if seq == 0 || seq < self.seq.first() || seq > self.seq.last() {
            return Ok(None);
        }
        let pos = self.blocks.partition_point(|b| b.span.seq_ceiling < seq);
        if pos >= self.blocks.len() || self.blocks[pos].span.msg_first > seq {
            return Ok(None);
        }
        self.ensure_loaded(pos)?;
        let entries = self.blocks[pos].loaded();
        Ok(match entries.index_of(seq) {
            Ok(i) if !entries.at(i).deleted => Some((pos, i)),
            _ => None,
        })
    }
}

#[cfg(test)]
mod reserve_tests {
    use super::{reserve_by_density, Entry, BLOCK_HEADER_LEN};

    fn entry(seq: u64) -> Entry {
        Entry {
            seq,
            ts: 0,
            off: 0,
            len: 0,
            subj: 0,
            deleted: false,
        }
    }

    /// Fills a block of `len` bytes with records of `rec(i)` bytes as the rebuild scan does,
    /// growing the vector only through `reserve_by_density`; returns (grows, final capacity).
    fn fill(len: u64, rec: impl Fn(u64) -> u64) -> (usize, usize, usize) {
        let (mut v, mut grows, mut off) = (Vec::new(), 0, BLOCK_HEADER_LEN);
        while off + rec(v.len() as u64) <= len {
            let r = rec(v.len() as u64);
            if v.len() == v.capacity() {
                reserve_by_density(&mut v, off + r, len);
                grows += 1;
            }
            assert!(v.capacity() > v.len(), "reserve must make room");
            v.push(entry(v.len() as u64));
            off += r;
        }
        (grows, v.len(), v.capacity())
    }

    #[test]
    fn uniform_records_reserve_once_and_close_to_the_count() {
        let (grows, n, cap) = fill(8 << 20, |_| 180);
        assert_eq!(grows, 1, "n {n} cap {cap}");
        assert!(cap >= n && cap <= n + n / 8 + 1, "n {n} cap {cap}");
    }

    #[test]
    fn growing_records_are_bounded_by_the_most_a_block_holds() {
        // One tiny record, then big ones: the first estimate is the worst case, and is capped
        // by what the block could hold at the smallest record size.
        let len = 1 << 20;
        let (grows, n, cap) = fill(len, |i| if i == 0 { 36 } else { 64 << 10 });
        assert_eq!(n, 16);
        assert_eq!(grows, 1);
        assert!(cap as u64 <= (len - BLOCK_HEADER_LEN) / 36, "cap {cap}");
        // Shrinking records: the estimate runs out and is made again, growing at least as
        // doubling would (6 times to 16k entries here; doubling from empty: 15).
        let (grows, n, cap) = fill(len, |i| if i < 100 { 4096 } else { 40 });
        assert!(grows <= 6, "grows {grows} n {n} cap {cap}");
        assert!(cap as u64 <= (len - BLOCK_HEADER_LEN) / 36, "cap {cap}");
    }
}

#[cfg(test)]
mod summary_tests {
    use super::summary_broken;

    #[test]
    fn a_summary_is_refused_for_each_claim_no_block_holds() {
        // (msg_first, msg_last, live, live_bytes)
        let holds = [
            (0, 0, 0, 0),
            (5, 5, 1, 40),
            (5, 9, 0, 0),
            (5, 9, 5, 200),
            (1, 1, 0, 0),
        ];
        for (f, l, n, b) in holds {
            assert_eq!(
                summary_broken(f, l, n, b),
                None,
                "{f}..={l}, {n} live, {b} bytes"
            );
        }
        let broken = [
            (9, 5, 0, 0),   // first after last
            (0, 5, 0, 0),   // an end missing
            (5, 0, 0, 0),   // the other end
            (0, 0, 1, 40),  // live messages in no range
            (5, 9, 6, 240), // more live than the range
            (5, 9, 2, 0),   // live messages without bytes
            (5, 9, 0, 40),  // bytes without live messages
        ];
        for (f, l, n, b) in broken {
            assert!(
                summary_broken(f, l, n, b).is_some(),
                "{f}..={l}, {n} live, {b} bytes"
            );
        }
    }
}
