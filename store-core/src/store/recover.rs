//! Recovery from the blocks: the rebuild scan and the sequences it finds lost.

use super::blocks::{first_void, mark_in, reserve_by_density, Block, Entry};
use super::scan::{all_zero, scan_block_chunked, READ_CHUNK};
use super::subjects::SubjMemo;
use super::*;

/// Per-rebuild bookkeeping beside the replay's rules.
#[derive(Default)]
pub(super) struct Rebuild {
    pub(super) replay: Replay,
    /// A truncate record voided records that are still on disk: (block position, offset of
    /// the first void record), and the position of the block holding the truncate record.
    pub(super) void_from: Option<(usize, u64)>,
    pub(super) truncate_block: usize,
}

impl<F: Fs> Store<F> {
    pub(super) fn load(&mut self) -> Result<()> {
        let indexes = self.list_blocks()?;
        match self.try_index(&indexes) {
            Ok(true) => {
                self.report.used_index = true;
                return Ok(());
            }
            Ok(false) => {}
            Err(e) => self.report.index_rejected = Some(e.to_string()),
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

    /// Rebuilds the whole state from the blocks. Returns where a truncate left void records
    /// on disk (they are cleaned up by the caller), else `None`.
    pub(super) fn rebuild(&mut self, indexes: &[u64]) -> Result<Option<(usize, u64, usize)>> {
        let strict = self.cfg.recovery == RecoveryMode::Strict;
        let mut rb = Rebuild::default();
        self.blocks.clear();
        self.subj_names.clear();
        self.subj_ids.clear();
        // its ids are those of the table just cleared
        *self.subj_memo = SubjMemo::new();
        self.subj.clear();
        self.num_subjects = 0;
        let mut memo = SubjMemo::new();
        let mut scan_buf = Vec::new();
        let n = indexes.len();
        for (i, &index) in indexes.iter().enumerate() {
            let path = block_path(MSGS_DIR, index);
            let file = ioe(
                self.fs
                    .open(&path, OpenOptions::new().read(true).write(true)),
                "open",
                &path,
            )?;
            let mut flen = ioe(file.len(), "len", &path)?;
            let mut h = [0u8; BLOCK_HEADER_LEN as usize];
            let hn = (flen as usize).min(h.len());
            ioe(file.read_exact_at(&mut h[..hn], 0), "read", &path)?;
            if check_block_header(&path, &h[..hn], index)? == Header::Blank {
                // The header never became durable, so nothing after it counts either.
                let nonzero = flen > BLOCK_HEADER_LEN && !all_zero(&file, &path, flen)?;
                if nonzero {
                    if strict {
                        return Err(Error::corrupt(path, 0, "data after a blank header"));
                    }
                    self.report.cuts.push(Cut {
                        file: path.clone(),
                        offset: 0,
                        dropped: flen,
                        reason: "block header missing".into(),
                    });
                }
                ioe(self.fs.remove_file(&path), "remove_file", &path)?;
                self.report.removed_blank.push(path);
                continue;
            }
            let pos = self.blocks.len();
            rb.replay.start_block();
            let mut entries: Vec<Entry> = Vec::new();
            let (mut block_max, mut last_crc) = (0u64, 0u32);
            let mut skipped_here = Vec::new();
            let end = {
                let Store {
                    blocks,
                    subj_names,
                    subj_ids,
                    subj,
                    report,
                    ..
                } = &mut *self;
                scan_block_chunked(
                    &file,
                    &path,
                    BLOCK_HEADER_LEN,
                    flen,
                    READ_CHUNK,
                    &mut scan_buf,
                    |off, r| {
                        last_crc = r.crc;
                        match r.kind {
                            Kind::Msg => {
                                if rb.replay.message(r.seq, r.ts) == Verdict::OutOfOrder {
                                    report.out_of_order.push((path.clone(), off));
                                    return Ok(());
                                }
                                let sid = memo.intern(subj_names, subj_ids, subj, r.subject);
                                if entries.len() == entries.capacity() {
                                    reserve_by_density(&mut entries, off + r.len as u64, flen);
                                }
                                entries.push(Entry {
                                    seq: r.seq,
                                    ts: r.ts,
                                    off: off as u32,
                                    len: r.len as u32,
                                    subj: sid,
                                    deleted: r.flags & FLAG_ERASED != 0,
                                });
                            }
                            Kind::Tombstone => {
                                let found = match entries.binary_search_by_key(&r.seq, |e| e.seq) {
                                    Ok(i) => {
                                        entries[i].deleted = true;
                                        true
                                    }
                                    Err(_) => mark_in(blocks, r.seq),
                                };
                                rb.replay.tombstone(r.seq, r.ts, found);
                            }
                            Kind::Floor => rb.replay.floor(r.seq, r.ts),
                            Kind::Truncate => {
                                let s = r.seq;
                                match rb.replay.truncate_verdict(s) {
                                    Verdict::Apply => {}
                                    Verdict::OutOfOrder => {
                                        report.out_of_order.push((path.clone(), off));
                                        return Ok(());
                                    }
                                    Verdict::Damaged(why) => {
                                        return Err(Error::corrupt(path.clone(), off, why))
                                    }
                                }
                                if rb.void_from.is_none() {
                                    rb.void_from = first_void(blocks, s);
                                    rb.truncate_block = pos;
                                }
                                rb.replay.truncate(s, r.ts);
                            }
                        }
                        block_max = block_max.max(r.seq);
                        Ok(())
                    },
                    |off, reason, seq| {
                        skipped_here.push((off, reason.to_string(), seq));
                        Ok(())
                    },
                )?
            };
            for (off, reason, _seq) in skipped_here {
                if strict {
                    return Err(Error::corrupt(path, off, reason));
                }
                self.report.skipped.push((path.clone(), off, reason));
            }
            match end {
                ScanEnd::Clean => {}
                ScanEnd::Zeros { offset } => {
                    ioe(file.set_len(offset), "set_len", &path)?;
                    flen = offset;
                }
                ScanEnd::Damaged { offset, reason } => {
                    if strict && i + 1 != n {
                        return Err(Error::corrupt(path, offset, reason));
                    }
                    ioe(file.set_len(offset), "set_len", &path)?;
                    self.report.cuts.push(Cut {
                        file: path.clone(),
                        offset,
                        dropped: flen - offset,
                        reason,
                    });
                    flen = offset;
                }
            }
            if entries.capacity() - entries.len() > entries.len() / 8 {
                // `reserve_by_density` guessed high (records grew along the block)
                entries.shrink_to_fit();
            }
            let hi = self.blocks.last().map_or(0, |b| b.hi);
            self.blocks.push(Block {
                index,
                path,
                file: Arc::new(file),
                len: flen,
                msg_first: entries.first().map_or(0, |e| e.seq),
                msg_last: entries.last().map_or(0, |e| e.seq),
                hi: hi.max(entries.last().map_or(0, |e| e.seq)),
                max_seq: block_max,
                live: 0,
                live_bytes: 0,
                last_crc,
                entries: Some(entries),
                dmap: Vec::new(),
                // a previous process may never have synced it: the next sync does
                dirty: true,
                cache: None,
                heat: 0,
                uncached_reads: 0,
            });
        }
        if let Some((bpos, off)) = rb.void_from {
            return Ok(Some((bpos, off, rb.truncate_block)));
        }
        // Apply the floor, then count what is live.
        let floor = rb.replay.floor;
        self.floor = floor;
        self.last_seq = rb.replay.max_seq;
        self.last_ts = rb.replay.max_ts;
        self.msgs = 0;
        self.bytes = 0;
        for b in &mut self.blocks {
            let entries = b.entries.as_mut().expect("rebuild loads every block");
            for e in entries.iter_mut() {
                if e.seq <= floor {
                    e.deleted = true;
                }
                if !e.deleted {
                    b.live += 1;
                    b.live_bytes += e.len as u64;
                    let s = &mut self.subj[e.subj as usize];
                    if s.msgs == 0 {
                        s.first = e.seq;
                        self.num_subjects += 1;
                    }
                    s.msgs += 1;
                    s.last = e.seq;
                }
            }
            self.msgs += b.live;
            self.bytes += b.live_bytes;
        }
        self.set_first_from(0)?;
        // Lost: gaps between message records not explained by the floor or a tombstone.
        self.report.lost = rb.replay.lost();
        Ok(None)
    }
}
