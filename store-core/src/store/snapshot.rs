//! `index.db`: written at checkpoint, validated and trusted at open.

use super::blocks::{summary_broken, Block};
use super::layout::{block_path, INDEX_FILE, INDEX_TMP, MSGS_DIR};
use super::scan::{checked, scan_raw, Reads, ScanEnd};
use super::sequence::Sequence;
use super::subjects::SubjectInfo;
use super::sync::S_SYNC;
use super::tail::Tail;
use super::{io_at, Store};
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenOptions};
use crate::index::{BlockSummary, Snapshot, SubjectSummary};
use crate::record::{self, check_block_header, Header, Kind, BLOCK_HEADER_LEN, FLAG_ERASED};
use std::io;
use std::ops::ControlFlow;

/// Reads `index.db` and checks it against the blocks on disk: the same block files, each of
/// the recorded length and ending in the recorded crc, and consistent totals. `Ok(None)`: no
/// index. An `Err` says why it cannot be used. Each block is opened (read-write if `write`)
/// to be checked, and closed again: the store opens its blocks on use (`files.rs`).
pub(crate) fn load_index<F: Fs>(fs: &F, indexes: &[u64], write: bool) -> Result<Option<Snapshot>> {
    let Some(snap) = read_index(fs)? else {
        return Ok(None);
    };
    let listed: Vec<u64> = snap.blocks.iter().map(|b| b.number).collect();
    if listed != indexes {
        return Err(Error::corrupt(INDEX_FILE, 0, "stale: block files differ"));
    }
    for bs in &snap.blocks {
        // checked, then closed: the store opens its blocks on use (`files.rs`)
        open_vouched_block(fs, bs, write, false)?;
    }
    check_totals(&snap)?;
    Ok(Some(snap))
}

/// [`load_index`] for an open that reads what was written after `index.db` (`tail.rs`): the
/// blocks it lists must be the first block files, each as it recorded them, except that the
/// last may have grown (its recorded length still ending in its recorded record); the blocks
/// after them and that growth are the [`Tail`].
fn load_index_tail<F: Fs>(fs: &F, indexes: &[u64]) -> Result<Option<(Snapshot, Tail)>> {
    let Some(snap) = read_index(fs)? else {
        return Ok(None);
    };
    let n = snap.blocks.len();
    let listed = snap.blocks.iter().map(|b| b.number);
    if n > indexes.len() || !listed.eq(indexes[..n].iter().copied()) {
        return Err(Error::corrupt(INDEX_FILE, 0, "stale: block files differ"));
    }
    let mut tail = Tail {
        new_blocks: indexes[n..].to_vec(),
        ..Tail::default()
    };
    for (i, bs) in snap.blocks.iter().enumerate() {
        let last = i + 1 == n;
        let flen = open_vouched_block(fs, bs, true, last)?;
        if flen > bs.len {
            tail.grown_to = Some(flen);
        }
    }
    check_totals(&snap)?;
    Ok(Some((snap, tail)))
}

/// Reads and decodes `index.db`. `Ok(None)`: there is none.
fn read_index<F: Fs>(fs: &F) -> Result<Option<Snapshot>> {
    let f = match fs.open(INDEX_FILE, OpenOptions::read_only()) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", INDEX_FILE, e)),
    };
    let len = io_at(f.len(), "len", INDEX_FILE)?;
    if len > 1 << 30 {
        return Err(Error::corrupt(INDEX_FILE, 0, "index larger than 1 GiB"));
    }
    let mut b = vec![0u8; len as usize];
    io_at(f.read_exact_at(&mut b, 0), "read", INDEX_FILE)?;
    Snapshot::decode(INDEX_FILE, &b).map(Some)
}

/// The totals of a decoded index.db hold together: its blocks' counts sum to the stream's, its
/// subjects' too, and its sequences describe a possible stream.
fn check_totals(snap: &Snapshot) -> Result<()> {
    // a forged index.db may hold counts whose sum does not fit: inconsistent, not a panic
    let inconsistent = || Error::corrupt(INDEX_FILE, 0, "totals inconsistent");
    let (mut live, mut bytes, mut hi) = (0u64, 0u64, 0u64);
    for bs in &snap.blocks {
        live = live.checked_add(bs.live).ok_or_else(inconsistent)?;
        bytes = bytes.checked_add(bs.live_bytes).ok_or_else(inconsistent)?;
        hi = hi.max(bs.msg_last);
    }
    let subj_msgs = snap
        .subjects
        .iter()
        .try_fold(0u64, |n, s| n.checked_add(s.msgs))
        .ok_or_else(inconsistent)?;
    if live != snap.msgs || bytes != snap.bytes || subj_msgs != snap.msgs {
        return Err(inconsistent());
    }
    if !sequences_possible(snap, hi) {
        return Err(Error::corrupt(INDEX_FILE, 0, "sequences inconsistent"));
    }
    Ok(())
}

/// Opens the block a summary of index.db describes and checks that it still is that block:
/// the same length (or, if `grown` may be, at least that length), a valid header, the same
/// record at that length (its crc), a summary that holds together. Returns the file's length.
fn open_vouched_block<F: Fs>(fs: &F, bs: &BlockSummary, write: bool, grown: bool) -> Result<u64> {
    let path = block_path(MSGS_DIR, bs.number);
    let file = io_at(
        fs.open(&path, OpenOptions::new().read(true).write(write)),
        "open",
        &path,
    )?;
    let flen = io_at(file.len(), "len", &path)?;
    let len_ok = if grown {
        flen >= bs.len
    } else {
        flen == bs.len
    };
    if !len_ok || bs.len < BLOCK_HEADER_LEN {
        return Err(Error::corrupt(path, flen, "stale: block length differs"));
    }
    // the header too: a block the index vouches for must still be a block
    let mut h = [0u8; BLOCK_HEADER_LEN as usize];
    io_at(file.read_exact_at(&mut h, 0), "read", &path)?;
    if check_block_header(&path, &h, bs.number)? != Header::Valid {
        return Err(Error::corrupt(path, 0, "block header blank"));
    }
    if bs.len > BLOCK_HEADER_LEN {
        let mut c = [0u8; 4];
        io_at(file.read_exact_at(&mut c, bs.len - 4), "read", &path)?;
        if u32::from_le_bytes(c) != bs.last_crc {
            return Err(Error::corrupt(
                path,
                bs.len - 4,
                "stale: last record differs",
            ));
        }
    }
    if let Some(why) = summary_broken(bs.msg_first, bs.msg_last, bs.live, bs.live_bytes) {
        let why = format!("block summary inconsistent: {why}");
        return Err(Error::corrupt(INDEX_FILE, 0, why));
    }
    Ok(flen)
}

/// What a crc cannot check: an index.db forged (or written by a buggy build) with a valid
/// crc must still describe a possible stream. `hi`: the highest message sequence of its
/// blocks.
fn sequences_possible(snap: &Snapshot, hi: u64) -> bool {
    let first_live = snap
        .blocks
        .iter()
        .find(|b| b.live > 0)
        .map_or(0, |b| b.msg_first);
    snap.last_seq >= hi
        && snap.last_seq <= record::MAX_SEQ
        && Sequence::of_index(snap).broken().is_none()
        && (snap.msgs == 0 || (snap.first_seq >= first_live && snap.first_seq <= hi))
        && snap.subjects.iter().all(|s| {
            // 0 is "not known" for a subject's first or last (found on first use, as after a
            // truncate that removed a subject's newest messages): only two known ones order
            s.msgs > 0
                && (s.first == 0 || s.last == 0 || s.first <= s.last)
                && (s.first == 0 || s.first >= snap.first_seq)
                && s.last <= snap.last_seq
        })
        // a ttl names a message the stream can still hold (ascending is the decoder's check)
        && snap
            .ttls
            .iter()
            .all(|&(seq, _)| seq >= snap.first_seq && seq <= snap.last_seq)
}

impl<F: Fs> Store<F> {
    /// Loads state from `index.db` if it matches the blocks, then reads what was written after
    /// it (`tail.rs`). `Ok(false)`: no index.
    pub(super) fn try_index_db(&mut self, indexes: &[u64]) -> Result<bool> {
        let Some((snap, tail)) = load_index_tail(&self.fs, indexes)? else {
            return Ok(false);
        };
        self.install_snapshot(&snap, tail.grown_to)?;
        if !tail.is_empty() {
            self.replay_tail(&tail)?;
        }
        Ok(true)
    }

    /// Takes the state of `snap` (checked against the blocks by `load_index_tail`) as the
    /// store's, and reads the first live message to confirm it. `grown_to`: the length of the
    /// last block's file, if it grew after `snap` (what is past `snap`'s length is the tail's).
    fn install_snapshot(&mut self, snap: &Snapshot, grown_to: Option<u64>) -> Result<()> {
        let mut hi = 0;
        let layered = self.cfg.layered();
        let mut blocks = Vec::with_capacity(snap.blocks.len());
        for bs in &snap.blocks {
            hi = hi.max(bs.msg_last);
            let mut b = Block::new(bs.number, None, bs.len, hi);
            b.span.msg_first = bs.msg_first;
            b.span.msg_last = bs.msg_last;
            b.span.max_seq = bs.max_seq;
            b.span.ts_hi = bs.ts_hi;
            b.span.live = bs.live;
            b.span.live_bytes = bs.live_bytes;
            b.span.last_crc = bs.last_crc;
            // read on first use
            b.index.entries = None;
            b.index.deleted_seqs = bs.deleted.clone();
            // durable: index.db vouches only for blocks as `close` or `checkpoint` left them,
            // which fsync every block before they write it (a block appended to since has
            // another length and the index is refused). Through the crypt layer the next sync
            // still fsyncs it: only a sync in this process tells the layer its frames are
            // durable, so that a changed byte in them is `Corrupt` rather than a torn tail.
            b.handle.dirty = layered;
            blocks.push(b);
        }
        if let (Some(b), Some(flen)) = (blocks.last_mut(), grown_to) {
            // the length the store reopens the file at (`files.rs`)
            b.span.alloc = flen;
        }
        self.blocks.list = blocks;
        self.seq = Sequence::of_index(snap);
        for &(seq, deadline) in &snap.ttls {
            self.ttl.insert(seq, deadline);
        }
        for s in &snap.subjects {
            let known = self.subjects.len();
            let id = self.subjects.intern(&s.name);
            if self.subjects.len() == known {
                // a forged index.db listing a subject twice: its counts would be overwritten,
                // not summed, and the totals checked above would no longer hold
                return Err(Error::corrupt(INDEX_FILE, 0, "subject listed twice"));
            }
            let info = SubjectInfo {
                msgs: s.msgs,
                first: s.first,
                last: s.last,
            };
            self.subjects.set(id, info);
        }
        // The first live message is read, not trusted: it catches an index whose first_seq
        // or first_ts does not match the blocks. Only the records up to it are read (small
        // reads, stopped there), not the whole block: open must not cost a block.
        let (first, first_ts) = (self.seq.first(), self.seq.first_ts());
        let found = if self.seq.msgs() == 0 {
            Some((self.seq.last() + 1, 0))
        } else {
            self.first_live_probe()?
        };
        if found != Some((first, first_ts)) {
            return Err(Error::corrupt(
                INDEX_FILE,
                8,
                "first_seq/first_ts disagree with the blocks",
            ));
        }
        Ok(())
    }

    /// The first live message (sequence, timestamp) of an index-loaded store, read from the
    /// first block with a live message, stopping at it.
    pub(super) fn first_live_probe(&self) -> Result<Option<(u64, i64)>> {
        let Some(pos) = self.blocks.iter().position(|b| b.span.live > 0) else {
            return Ok(None);
        };
        let (b, file) = (&self.blocks[pos], self.block_file(pos)?);
        let floor = self.seq.floor();
        let mut found = None;
        let end = scan_raw(
            &*file,
            &b.path,
            BLOCK_HEADER_LEN,
            b.span.len,
            Reads::upto(16 << 10),
            &mut Vec::new(),
            checked(|_, r| {
                let live = r.kind == Kind::Msg
                    && r.flags & FLAG_ERASED == 0
                    && r.seq > floor
                    && b.index.deleted_seqs.binary_search(&r.seq).is_err();
                if live {
                    found = Some((r.seq, r.ts));
                    return Ok(ControlFlow::Break(()));
                }
                Ok(ControlFlow::Continue(()))
            }),
            |off, reason, _| Err(Error::corrupt(b.path.clone(), off, reason)),
        )?;
        debug_assert!(found.is_none() || matches!(end, ScanEnd::Stopped { .. }));
        Ok(found)
    }

    /// Syncs, then writes `index.db` (temp file, rename) so the next open need not read the
    /// blocks, the ttls pending included. No fsync of its own: the index is an accelerator;
    /// one lost or torn in a crash fails validation and open rebuilds from the blocks.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.check_writable()?;
        self.trim_entries();
        self.cleanup();
        // index.db records each block's length: the newest block's zeros go first
        self.flush()?;
        self.cut_zeros()?;
        self.sync_inner(S_SYNC)?;
        self.checkpoint_consumers()?;
        let snap = self.snapshot();
        let bytes = snap.encode();
        let f = io_at(
            self.fs.open(
                INDEX_TMP,
                OpenOptions::new().write(true).create(true).truncate(true),
            ),
            "create",
            INDEX_TMP,
        )?;
        io_at(f.write_all_at(&bytes, 0), "write", INDEX_TMP)?;
        drop(f);
        io_at(self.fs.rename(INDEX_TMP, INDEX_FILE), "rename", INDEX_TMP)
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        // the claims a reader refuses (`sequences_possible`), asserted before they are written
        self.seq.check();
        Snapshot {
            first_seq: self.seq.first(),
            first_ts: self.seq.first_ts(),
            last_seq: self.seq.last(),
            last_ts: self.seq.last_ts(),
            floor: self.seq.floor(),
            msgs: self.seq.msgs(),
            bytes: self.seq.bytes(),
            blocks: self
                .blocks
                .iter()
                .inspect(|b| debug_assert_eq!(b.span.broken(), None, "block {}", b.number))
                .map(|b| BlockSummary {
                    number: b.number,
                    len: b.span.len,
                    msg_first: b.span.msg_first,
                    msg_last: b.span.msg_last,
                    max_seq: b.span.max_seq,
                    ts_hi: b.span.ts_hi,
                    live: b.span.live,
                    live_bytes: b.span.live_bytes,
                    last_crc: b.span.last_crc,
                    deleted: match &b.index.entries {
                        Some(e) => e.iter().filter(|e| e.deleted).map(|e| e.seq).collect(),
                        None => b.index.deleted_seqs.clone(),
                    },
                })
                .collect(),
            subjects: self
                .subjects
                .infos()
                .iter()
                .enumerate()
                .filter(|(_, s)| s.msgs > 0)
                .map(|(i, s)| SubjectSummary {
                    name: self.subjects.names()[i].clone(),
                    msgs: s.msgs,
                    first: s.first,
                    last: s.last,
                })
                .collect(),
            // the entries of messages still in the stream's range (one below the first
            // sequence is of a message gone: dropped rather than carried on)
            ttls: self.ttl.at_or_above(self.seq.first()).collect(),
        }
    }
}
