//! Recovery from the blocks: the rebuild scan and the sequences it finds lost.

use super::blocks::{reserve_by_density, Block};
use super::entries::Entry;
use super::layout::{block_path, INDEX_FILE, MSGS_DIR};
use super::replay::{Replay, Verdict};
use super::scan::{scan_raw, zeros_between, Reads, ScanEnd, Step, READ_CHUNK};
use super::subjects::{SubjectMemo, SubjectTable};
use super::types::{Cut, OutOfOrderRecord, SeqRange, SkippedRecord};
use super::{io_at, Store};
use crate::config::RecoveryMode;
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenOptions};
use crate::record::{self, check_block_header, Header, Kind, RawRecord, BLOCK_HEADER_LEN};
use crate::site::SyncSite;
use std::io;

/// Per-rebuild bookkeeping beside the replay's rules.
#[derive(Default)]
pub(super) struct Rebuild {
    pub(super) replay: Replay,
    /// A truncate record voided records that are still on disk: (block position, offset of
    /// the first void record), and the position of the block holding the truncate record.
    pub(super) void_from: Option<(usize, u64)>,
    pub(super) truncate_block: usize,
    /// Truncate records applied (the tail path leaves those to the rebuild).
    pub(super) truncates: u32,
}

/// Marks the entries at or below `floor` deleted and adds the live ones to `subjects`;
/// returns how many are live and their bytes. `deleted` is told each deleted sequence.
#[inline]
pub(super) fn count_live(
    entries: &mut [Entry],
    floor: u64,
    subjects: &mut SubjectTable,
    mut deleted: impl FnMut(u64),
) -> (u64, u64) {
    let (mut live, mut bytes) = (0, 0);
    for e in entries.iter_mut() {
        if e.seq <= floor {
            e.deleted = true;
        }
        if e.deleted {
            deleted(e.seq);
        } else {
            live += 1;
            bytes += e.len as u64;
            subjects.added(e.subj, e.seq);
        }
    }
    (live, bytes)
}

impl<F: Fs> Store<F> {
    pub(super) fn load(&mut self) -> Result<()> {
        let mut indexes = self.list_blocks()?;
        match self.try_index_db(&indexes) {
            Ok(true) => {
                self.report.used_index = true;
                return Ok(());
            }
            Ok(false) => {}
            // a block that cannot be read is not a stale index: the medium failed, and open
            // says so (a failure on index.db itself, an accelerator, is only a rejection).
            // Found by the recovery fault sweep once the consumer files made recoveries of
            // index.db images write.
            Err(e @ Error::Io { .. }) if !matches!(&e, Error::Io { path, .. } if path == INDEX_FILE) => {
                return Err(e)
            }
            Err(e) => {
                // (a tail path that gave way leaves its state to the rebuild below)
                self.report.index_rejected = Some(e.to_string());
                self.report.tail_scanned = 0;
                let unread = matches!(&e, Error::Io { .. });
                self.remove_rejected_index(unread)?;
                // the tail path removes a block whose header never became durable, as the
                // rebuild does: list what is left
                indexes = self.list_blocks_quiet()?;
            }
        }
        self.blocks.clear();
        let mut tries = 0;
        let mut prev: Option<(String, u64)> = None;
        loop {
            let indexes = if tries == 0 {
                indexes.clone()
            } else {
                self.list_blocks_quiet()?
            };
            match self.rebuild(&indexes)? {
                None => return Ok(()),
                Some((bpos, off, tpos)) => {
                    // A truncate voided records that are still on disk: remove them (the
                    // truncate record itself is durable, we just read it), then rebuild.
                    // Several unfinished truncates take a round each; a round that makes no
                    // progress means the records cannot be removed.
                    let here = (self.blocks[bpos].path.clone(), off);
                    if prev.as_ref() == Some(&here) || tries > indexes.len() {
                        return Err(Error::corrupt(
                            here.0,
                            off,
                            "void records survive truncate cleanup",
                        ));
                    }
                    prev = Some(here);
                    self.truncate_cleanup(bpos, off, tpos)?;
                    self.report.truncate_cleanup = true;
                    tries += 1;
                }
            }
        }
    }

    /// Removes an `index.db` open has rejected, durably, before the rebuild repairs a block.
    /// It never describes these blocks again, yet a repair (zeros trimmed, a damaged tail cut,
    /// void records removed) can give a block back the length and last record it recorded:
    /// left in place, or brought back by a crash during the rebuild, it would vouch at the
    /// next open for a record this open found damaged. `unread`: index.db could not be read
    /// (a directory, an I/O error); one that cannot be removed either vouches for nothing.
    fn remove_rejected_index(&mut self, unread: bool) -> Result<()> {
        match self.fs.remove_file(INDEX_FILE) {
            Ok(()) => self.sync_dir("", SyncSite::OpenIndexDir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(_) if unread => Ok(()),
            Err(e) => Err(Error::io("remove_file", INDEX_FILE, e)),
        }
    }

    /// Rebuilds the whole state from the blocks. Returns where a truncate left void records
    /// on disk (they are cleaned up by the caller), else `None`.
    pub(super) fn rebuild(&mut self, indexes: &[u64]) -> Result<Option<(usize, u64, usize)>> {
        let mut rb = Rebuild::default();
        self.blocks.clear();
        self.subjects.clear();
        self.ttl.clear();
        self.seq.recount();
        if !self.rebuild_on_threads(&mut rb, indexes)? {
            let mut memo = SubjectMemo::new();
            let mut scan_buf = Vec::new();
            for (i, &index) in indexes.iter().enumerate() {
                let newest = i + 1 == indexes.len();
                if let Some((file, path, flen)) = self.open_for_rebuild(index)? {
                    let b =
                        self.rebuild_block(&mut rb, &mut memo, &mut scan_buf, file, path, flen)?;
                    self.finish_rebuilt_block(b, index, newest)?;
                    // Between blocks nothing holds a position into entries: the rebuild
                    // keeps the entry cache's bound as it goes, instead of every block's.
                    self.trim_entries();
                }
            }
        }
        if let Some((bpos, off)) = rb.void_from {
            // what this round found lost stays reported: the next round reads the blocks
            // after the cleanup, and a cut made in this one no longer shows there (found by
            // verify_agrees: verify's single pass reported it, open's last round did not)
            let lost = rb.replay.lost();
            self.note_lost(lost);
            return Ok(Some((bpos, off, rb.truncate_block)));
        }
        debug_assert_eq!(self.seq.floor(), rb.replay.floor);
        self.seq.set_last(rb.replay.max_seq, rb.replay.max_ts);
        self.set_first_from(0)?;
        // Lost: gaps between message records not explained by the floor or a tombstone
        // (with what earlier rounds of a truncate cleanup found).
        let lost = rb.replay.lost();
        self.note_lost(lost);
        Ok(None)
    }

    /// Adds `more` to the reported lost ranges, merged and in order.
    fn note_lost(&mut self, more: Vec<SeqRange>) {
        let mut all = std::mem::take(&mut self.report.lost);
        all.extend(more);
        all.sort_by_key(|r| (r.first, r.last));
        let mut out: Vec<SeqRange> = Vec::with_capacity(all.len());
        for r in all {
            match out.last_mut() {
                Some(p) if r.first <= p.last.saturating_add(1) => p.last = p.last.max(r.last),
                _ => out.push(r),
            }
        }
        self.report.lost = out;
    }

    /// Opens block `index` for the rebuild. A block whose header never became durable is
    /// removed (nothing after it counts either; data there is reported as cut): `None`.
    pub(super) fn open_for_rebuild(
        &mut self,
        index: u64,
    ) -> Result<Option<(F::File, String, u64)>> {
        let opened = self.open_block_file(index)?;
        self.admit_block(index, opened)
    }

    /// The I/O half of [`Self::open_for_rebuild`]: the file, its path and length, and its
    /// header's bytes (as many as it has).
    pub(super) fn open_block_file(&mut self, index: u64) -> Result<OpenedBlock<F::File>> {
        let path = block_path(MSGS_DIR, index);
        let rw = OpenOptions::new().read(true).write(true);
        let file = io_at(self.fs.open(&path, rw), "open", &path)?;
        let flen = io_at(file.len(), "len", &path)?;
        let mut header = [0u8; BLOCK_HEADER_LEN as usize];
        let hn = (flen as usize).min(header.len());
        io_at(file.read_exact_at(&mut header[..hn], 0), "read", &path)?;
        Ok(OpenedBlock {
            file,
            path,
            flen,
            header,
        })
    }

    /// The rest of [`Self::open_for_rebuild`]: checks the header read; removes a blank block.
    pub(super) fn admit_block(
        &mut self,
        index: u64,
        opened: OpenedBlock<F::File>,
    ) -> Result<Option<(F::File, String, u64)>> {
        let OpenedBlock {
            file,
            path,
            flen,
            header: h,
        } = opened;
        let hn = (flen as usize).min(h.len());
        if check_block_header(&path, &h[..hn], index)? != Header::Blank {
            return Ok(Some((file, path, flen)));
        }
        let nonzero = flen > BLOCK_HEADER_LEN && !zeros_between(&file, &path, 0, flen)?;
        if nonzero {
            if self.cfg.recovery == RecoveryMode::Strict {
                return Err(Error::corrupt(path, 0, "data after a blank header"));
            }
            self.report.cuts.push(Cut {
                file: path.clone(),
                offset: 0,
                dropped: flen,
                reason: "block header missing".into(),
            });
        }
        io_at(self.fs.remove_file(&path), "remove_file", &path)?;
        self.report.removed_blank.push(path);
        Ok(None)
    }

    /// Scans one block through the replay rules, building its entries.
    pub(super) fn rebuild_block(
        &mut self,
        rb: &mut Rebuild,
        memo: &mut SubjectMemo,
        scan_buf: &mut Vec<u8>,
        file: F::File,
        path: String,
        flen: u64,
    ) -> Result<ScannedBlock<F::File>> {
        let at = (self.blocks.len(), BLOCK_HEADER_LEN);
        self.rebuild_scan(rb, memo, scan_buf, (file, path, flen), at)
    }

    /// [`Self::rebuild_block`] from offset `at.1` of the block at position `at.0` (a block
    /// already among the blocks, read from where `index.db` left it: `tail.rs`).
    pub(super) fn rebuild_scan(
        &mut self,
        rb: &mut Rebuild,
        memo: &mut SubjectMemo,
        scan_buf: &mut Vec<u8>,
        (file, path, flen): (F::File, String, u64),
        (pos, from): (usize, u64),
    ) -> Result<ScannedBlock<F::File>> {
        rb.replay.start_block();
        let out_of_order = self.report.out_of_order.len();
        let mut skipped = Vec::new();
        let (mut entries, mut max_seq, mut last_crc) = (Vec::new(), 0u64, None);
        let end = scan_raw(
            &file,
            &path,
            from,
            flen,
            Reads::upto(READ_CHUNK),
            scan_buf,
            |off, r| {
                let at = RecordAt {
                    off,
                    flen,
                    pos,
                    path: &path,
                };
                if let Err(reason) = self.visit_record(rb, memo, &mut entries, &at, r)? {
                    return Ok(Step::Refuse(reason));
                }
                last_crc = Some(r.crc);
                max_seq = max_seq.max(r.seq);
                Ok(Step::Next)
            },
            |off, reason, seq| {
                skipped.push((off, reason.to_string(), seq));
                Ok(())
            },
        )?;
        // `load_entries` would refuse what was skipped and count what was out of order
        let pinned = !skipped.is_empty() || self.report.out_of_order.len() > out_of_order;
        Ok(ScannedBlock {
            file,
            path,
            len: flen,
            entries,
            max_seq,
            last_crc,
            skipped,
            end,
            pinned,
        })
    }

    /// Reports what the scan of a block skipped, cuts its damaged or unwritten tail, and adds
    /// it to the blocks.
    pub(super) fn finish_rebuilt_block(
        &mut self,
        mut sb: ScannedBlock<F::File>,
        index: u64,
        newest: bool,
    ) -> Result<()> {
        let strict = self.cfg.recovery == RecoveryMode::Strict;
        for (off, reason, _seq) in std::mem::take(&mut sb.skipped) {
            if strict {
                return Err(Error::corrupt(sb.path, off, reason));
            }
            self.report.skipped.push(SkippedRecord {
                file: sb.path.clone(),
                offset: off,
                reason,
            });
        }
        match std::mem::replace(&mut sb.end, ScanEnd::Clean) {
            // (the rebuild's visitor never stops the scan)
            ScanEnd::Clean | ScanEnd::Stopped { .. } => {}
            ScanEnd::Zeros { offset } => {
                io_at(sb.file.set_len(offset), "set_len", &sb.path)?;
                sb.len = offset;
            }
            ScanEnd::Damaged { offset, reason } => {
                if strict && !newest {
                    return Err(Error::corrupt(sb.path, offset, reason));
                }
                io_at(sb.file.set_len(offset), "set_len", &sb.path)?;
                self.report.cuts.push(Cut {
                    file: sb.path.clone(),
                    offset,
                    dropped: sb.len - offset,
                    reason,
                });
                sb.len = offset;
            }
        }
        let mut entries = sb.entries;
        if entries.capacity() - entries.len() > entries.len() / 8 {
            // `reserve_by_density` guessed high (records grew along the block)
            entries.shrink_to_fit();
        }
        let hi = self.blocks.last().map_or(0, |b| b.span.seq_ceiling);
        self.entry_budget.loaded(entries.len());
        debug_assert_eq!(sb.path, block_path(MSGS_DIR, index));
        let last = entries.last().map_or(0, |e| e.seq);
        let ts_hi = match entries.last() {
            Some(e) => Some(e.ts),
            None => self.blocks.last().map_or(Some(i64::MIN), |b| b.span.ts_hi),
        };
        let mut b = Block::new(index, Some(sb.file), sb.len, hi.max(last));
        b.span.ts_hi = ts_hi;
        b.span.msg_first = entries.first().map_or(0, |e| e.seq);
        b.span.msg_last = last;
        b.span.max_seq = sb.max_seq;
        b.span.last_crc = sb.last_crc.unwrap_or(0);
        b.index.entries = Some(entries.into());
        // a previous process may never have synced it: the next sync does (`new` marks it)
        b.index.pinned = sb.pinned;
        self.blocks.push(b);
        // every block is scanned with its file open: keep at most the configured number
        self.note_opened(self.blocks.len() - 1)?;
        self.count_rebuilt_block(self.blocks.len() - 1);
        Ok(())
    }

    /// Applies the floor so far to a block the rebuild just read and counts what is live in
    /// it, in the block, per subject and in all. Later records that remove its messages (a
    /// tombstone, a higher floor) are applied to the counts by `rebuild_delete` and
    /// `rebuild_floor`, as a delete or a compact would.
    fn count_rebuilt_block(&mut self, pos: usize) {
        let floor = self.seq.floor();
        let Store {
            blocks, subjects, ..
        } = &mut *self;
        let b = &mut blocks[pos];
        let entries = b.index.loaded_mut().full_mut();
        let (live, live_bytes) = count_live(entries, floor, subjects, |_| {});
        b.span.live += live;
        b.span.live_bytes += live_bytes;
        debug_assert_eq!(b.span.broken(), None, "rebuilt block {}", b.number);
        // the block before is sealed now: packed (the newest stays full for appends)
        if let Some(prev) = pos
            .checked_sub(1)
            .and_then(|p| blocks[p].index.entries.as_mut())
        {
            prev.pack();
        }
        self.seq.counted(live, live_bytes);
    }

    /// A tombstone for `seq`, which is not in the block being read: marks it deleted in an
    /// earlier block (reading its entries again if the cache dropped them). Whether a message
    /// record holds `seq`.
    fn rebuild_delete(&mut self, seq: u64) -> Result<bool> {
        let pos = self.blocks.partition_point(|b| b.span.seq_ceiling < seq);
        if pos >= self.blocks.len() || self.blocks[pos].span.msg_first > seq {
            return Ok(false);
        }
        self.ensure_loaded(pos)?;
        let entries = self.blocks[pos].loaded();
        match entries.index_of(seq) {
            Ok(i) => {
                if !entries.at(i).deleted {
                    self.mark_deleted(pos, i);
                }
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// A floor record raised the floor to `to`: removes what it covers in the blocks read
    /// so far (the block being read applies it when it is counted).
    fn rebuild_floor(&mut self, to: u64) -> Result<()> {
        if to <= self.seq.floor() {
            return Ok(());
        }
        for pos in 0..self.blocks.len() {
            let b = &self.blocks[pos];
            if b.span.live > 0 && b.span.msg_first <= to {
                self.delete_in_block(pos, |s| s <= to)?;
            }
        }
        // after the deletes: `load_entries` (of an evicted block) applies `self.seq.floor()`, which
        // must be the floor its counts were made with
        self.seq.raise_floor(to);
        Ok(())
    }

    /// The first message record above `s` in the blocks read so far: (block position,
    /// offset).
    fn first_void(&mut self, s: u64) -> Result<Option<(usize, u64)>> {
        let pos = self.blocks.partition_point(|b| b.span.seq_ceiling <= s);
        if pos >= self.blocks.len() {
            return Ok(None);
        }
        self.ensure_loaded(pos)?;
        let entries = self.blocks[pos].loaded();
        Ok(entries
            .iter()
            .find(|e| e.seq > s)
            .map(|e| (pos, e.off as u64)))
    }

    /// One record of the rebuild scan: the replay rules decide whether it counts; a message
    /// becomes an entry, a tombstone marks one (in this block or an earlier one), a floor
    /// removes what it covers, a truncate notes where its void records start. The inner
    /// `Err`: a message whose subject is not UTF-8, refused before anything is applied (the
    /// scan then treats it as a record that failed its checks).
    fn visit_record(
        &mut self,
        rb: &mut Rebuild,
        memo: &mut SubjectMemo,
        entries: &mut Vec<Entry>,
        at: &RecordAt<'_>,
        r: &RawRecord<'_>,
    ) -> Result<std::result::Result<(), &'static str>> {
        match r.kind {
            Kind::Msg => {
                let subject = match self.subjects.read_subject(memo, r.subject, r.flags) {
                    Ok(s) => s,
                    Err(reason) => return Ok(Err(reason)),
                };
                if !self.accept_message(rb, at, r.seq, r.ts) {
                    return Ok(Ok(()));
                }
                let sid = self.subjects.intern_read(memo, r.subject, subject);
                if entries.len() == entries.capacity() {
                    reserve_by_density(entries, at.off + r.len as u64, at.flen);
                }
                entries.push(Entry::of(at.off, r, sid, false));
                self.note_ttl(r);
                Ok(Ok(()))
            }
            _ => self.visit_other(rb, entries, at, &Other::of(r)).map(Ok),
        }
    }

    /// Whether a message record at `at` counts (the replay's verdict); one out of order is
    /// reported.
    pub(super) fn accept_message(
        &mut self,
        rb: &mut Rebuild,
        at: &RecordAt<'_>,
        seq: u64,
        ts: i64,
    ) -> bool {
        if rb.replay.message(seq, ts) == Verdict::OutOfOrder {
            self.report.out_of_order.push(at.out_of_order(seq));
            return false;
        }
        true
    }

    /// A record other than a message (`entries`: the block's messages read before it).
    pub(super) fn visit_other(
        &mut self,
        rb: &mut Rebuild,
        entries: &mut [Entry],
        at: &RecordAt<'_>,
        r: &Other,
    ) -> Result<()> {
        match r.kind {
            // (messages are applied by the caller)
            Kind::Msg => {}
            Kind::Tombstone => {
                let found = match entries.binary_search_by_key(&r.seq, |e| e.seq) {
                    Ok(i) => {
                        entries[i].deleted = true;
                        true
                    }
                    Err(_) => self.rebuild_delete(r.seq)?,
                };
                rb.replay.tombstone(r.seq, r.ts, found);
            }
            Kind::Floor => {
                rb.replay.floor(r.seq, r.ts);
                self.rebuild_floor(rb.replay.floor)?;
            }
            Kind::Truncate => self.visit_truncate(rb, at, r)?,
            Kind::Skip => {
                let (first, last) = r.skipped.unwrap_or((r.seq, r.seq));
                if rb.replay.skip(first, last, r.ts) == Verdict::OutOfOrder {
                    self.report.out_of_order.push(at.out_of_order(r.seq));
                }
            }
        }
        Ok(())
    }

    fn visit_truncate(&mut self, rb: &mut Rebuild, at: &RecordAt<'_>, r: &Other) -> Result<()> {
        match rb.replay.truncate_verdict(r.seq) {
            Verdict::Apply => {}
            Verdict::OutOfOrder => {
                self.report.out_of_order.push(at.out_of_order(r.seq));
                return Ok(());
            }
            Verdict::Damaged(why) => return Err(Error::corrupt(at.path, at.off, why)),
        }
        if rb.void_from.is_none() {
            rb.void_from = self.first_void(r.seq)?;
            rb.truncate_block = at.pos;
        }
        rb.replay.truncate(r.seq, r.ts);
        rb.truncates += 1;
        Ok(())
    }
}

/// A record other than a message, as [`Store::visit_other`] applies it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Other {
    pub(super) kind: Kind,
    pub(super) seq: u64,
    pub(super) ts: i64,
    /// The sequences a skip record covers ([`record::Record::skipped`]).
    pub(super) skipped: Option<(u64, u64)>,
}

impl Other {
    /// What the replay needs of record `r`.
    pub(super) fn of(r: &record::RawRecord<'_>) -> Other {
        Other {
            kind: r.kind,
            seq: r.seq,
            ts: r.ts,
            skipped: r.skipped(),
        }
    }
}

/// A block file opened for the rebuild, its header read but not yet checked.
pub(super) struct OpenedBlock<H> {
    pub(super) file: H,
    pub(super) path: String,
    pub(super) flen: u64,
    pub(super) header: [u8; BLOCK_HEADER_LEN as usize],
}

/// One block as the rebuild scan left it, before its tail is cut and it joins the blocks.
pub(super) struct ScannedBlock<H> {
    pub(super) file: H,
    pub(super) path: String,
    pub(super) len: u64,
    pub(super) entries: Vec<Entry>,
    pub(super) max_seq: u64,
    /// The crc of the last record read (`None`: none was).
    pub(super) last_crc: Option<u32>,
    pub(super) skipped: Vec<(u64, String, Option<u64>)>,
    pub(super) end: ScanEnd,
    pub(super) pinned: bool,
}

impl<H> ScannedBlock<H> {
    /// What in this block the rebuild would report or refuse: a skipped record, damage before
    /// its end, a sequence out of order.
    pub(super) fn unclean(&self) -> Option<String> {
        if let Some((off, reason, _)) = self.skipped.first() {
            return Some(format!("{} at {off}: {reason}", self.path));
        }
        if let ScanEnd::Damaged { offset, reason } = &self.end {
            return Some(format!("{} at {offset}: {reason}", self.path));
        }
        self.pinned
            .then(|| format!("{}: a sequence out of order", self.path))
    }
}

/// Where a record is: its offset, in which block (position among the blocks so far, path,
/// length of the file).
pub(super) struct RecordAt<'a> {
    pub(super) off: u64,
    pub(super) flen: u64,
    pub(super) pos: usize,
    pub(super) path: &'a str,
}

impl RecordAt<'_> {
    /// The finding for this record, carrying `seq`, when its sequence went backwards.
    fn out_of_order(&self, seq: u64) -> OutOfOrderRecord {
        OutOfOrderRecord {
            file: self.path.to_string(),
            offset: self.off,
            seq,
        }
    }
}
