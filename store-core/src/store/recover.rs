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
        for (i, &index) in indexes.iter().enumerate() {
            let newest = i + 1 == indexes.len();
            if let Some((file, path, flen)) = self.open_for_rebuild(index)? {
                let b = self.rebuild_block(&mut rb, &mut memo, &mut scan_buf, file, path, flen)?;
                self.finish_rebuilt_block(b, index, newest)?;
            }
        }
        if let Some((bpos, off)) = rb.void_from {
            return Ok(Some((bpos, off, rb.truncate_block)));
        }
        self.count_rebuilt(&rb)?;
        // Lost: gaps between message records not explained by the floor or a tombstone.
        self.report.lost = rb.replay.lost();
        Ok(None)
    }

    /// Opens block `index` for the rebuild. A block whose header never became durable is
    /// removed (nothing after it counts either; data there is reported as cut): `None`.
    fn open_for_rebuild(&mut self, index: u64) -> Result<Option<(F::File, String, u64)>> {
        let path = block_path(MSGS_DIR, index);
        let rw = OpenOptions::new().read(true).write(true);
        let file = ioe(self.fs.open(&path, rw), "open", &path)?;
        let flen = ioe(file.len(), "len", &path)?;
        let mut h = [0u8; BLOCK_HEADER_LEN as usize];
        let hn = (flen as usize).min(h.len());
        ioe(file.read_exact_at(&mut h[..hn], 0), "read", &path)?;
        if check_block_header(&path, &h[..hn], index)? != Header::Blank {
            return Ok(Some((file, path, flen)));
        }
        let nonzero = flen > BLOCK_HEADER_LEN && !all_zero(&file, &path, flen)?;
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
        ioe(self.fs.remove_file(&path), "remove_file", &path)?;
        self.report.removed_blank.push(path);
        Ok(None)
    }

    /// Scans one block through the replay rules, building its entries.
    fn rebuild_block(
        &mut self,
        rb: &mut Rebuild,
        memo: &mut SubjMemo,
        scan_buf: &mut Vec<u8>,
        file: F::File,
        path: String,
        flen: u64,
    ) -> Result<ScannedBlock<F::File>> {
        rb.replay.start_block();
        let pos = self.blocks.len();
        let Store {
            blocks,
            subj_names,
            subj_ids,
            subj,
            report,
            ..
        } = &mut *self;
        let mut tables = Tables {
            memo,
            names: subj_names,
            ids: subj_ids,
            info: subj,
        };
        let mut skipped = Vec::new();
        let (mut entries, mut max_seq, mut last_crc) = (Vec::new(), 0u64, 0u32);
        let end = scan_block_chunked(
            &file,
            &path,
            BLOCK_HEADER_LEN,
            flen,
            READ_CHUNK,
            scan_buf,
            |off, r| {
                last_crc = r.crc;
                let at = RecordAt {
                    off,
                    flen,
                    pos,
                    path: &path,
                };
                visit_record(rb, &mut tables, blocks, &mut entries, report, &at, r)?;
                max_seq = max_seq.max(r.seq);
                Ok(())
            },
            |off, reason, seq| {
                skipped.push((off, reason.to_string(), seq));
                Ok(())
            },
        )?;
        Ok(ScannedBlock {
            file,
            path,
            len: flen,
            entries,
            max_seq,
            last_crc,
            skipped,
            end,
        })
    }

    /// Reports what the scan of a block skipped, cuts its damaged or unwritten tail, and adds
    /// it to the blocks.
    fn finish_rebuilt_block(
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
            self.report.skipped.push((sb.path.clone(), off, reason));
        }
        match std::mem::replace(&mut sb.end, ScanEnd::Clean) {
            ScanEnd::Clean => {}
            ScanEnd::Zeros { offset } => {
                ioe(sb.file.set_len(offset), "set_len", &sb.path)?;
                sb.len = offset;
            }
            ScanEnd::Damaged { offset, reason } => {
                if strict && !newest {
                    return Err(Error::corrupt(sb.path, offset, reason));
                }
                ioe(sb.file.set_len(offset), "set_len", &sb.path)?;
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
        let hi = self.blocks.last().map_or(0, |b| b.hi);
        self.blocks.push(Block {
            index,
            path: sb.path,
            file: Arc::new(sb.file),
            len: sb.len,
            msg_first: entries.first().map_or(0, |e| e.seq),
            msg_last: entries.last().map_or(0, |e| e.seq),
            hi: hi.max(entries.last().map_or(0, |e| e.seq)),
            max_seq: sb.max_seq,
            live: 0,
            live_bytes: 0,
            last_crc: sb.last_crc,
            entries: Some(entries),
            dmap: Vec::new(),
            // a previous process may never have synced it: the next sync does
            dirty: true,
            cache: None,
            heat: 0,
            uncached_reads: 0,
        });
        Ok(())
    }

    /// Applies the floor to the rebuilt blocks and counts what is live, per block, per
    /// subject and in all.
    fn count_rebuilt(&mut self, rb: &Rebuild) -> Result<()> {
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
        self.set_first_from(0)
    }
}

/// One block as the rebuild scan left it, before its tail is cut and it joins the blocks.
pub(super) struct ScannedBlock<H> {
    file: H,
    path: String,
    len: u64,
    entries: Vec<Entry>,
    max_seq: u64,
    last_crc: u32,
    skipped: Vec<(u64, String, Option<u64>)>,
    end: ScanEnd,
}

/// The subject tables a rebuild interns into.
struct Tables<'a> {
    memo: &'a mut SubjMemo,
    names: &'a mut Vec<String>,
    ids: &'a mut SubjMap,
    info: &'a mut Vec<SubjInfo>,
}

/// Where a record is: its offset, in which block (position among the blocks so far, path,
/// length of the file).
struct RecordAt<'a> {
    off: u64,
    flen: u64,
    pos: usize,
    path: &'a str,
}

/// One record of the rebuild scan: the replay rules decide whether it counts; a message
/// becomes an entry, a tombstone marks one (in this block or an earlier one), a truncate
/// notes where its void records start.
fn visit_record<H>(
    rb: &mut Rebuild,
    tables: &mut Tables<'_>,
    blocks: &mut [Block<H>],
    entries: &mut Vec<Entry>,
    report: &mut RecoveryReport,
    at: &RecordAt<'_>,
    r: &record::Record<'_>,
) -> Result<()> {
    match r.kind {
        Kind::Msg => {
            if rb.replay.message(r.seq, r.ts) == Verdict::OutOfOrder {
                report.out_of_order.push((at.path.to_string(), at.off));
                return Ok(());
            }
            let sid = tables
                .memo
                .intern(tables.names, tables.ids, tables.info, r.subject);
            if entries.len() == entries.capacity() {
                reserve_by_density(entries, at.off + r.len as u64, at.flen);
            }
            entries.push(Entry {
                seq: r.seq,
                ts: r.ts,
                off: at.off as u32,
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
            match rb.replay.truncate_verdict(r.seq) {
                Verdict::Apply => {}
                Verdict::OutOfOrder => {
                    report.out_of_order.push((at.path.to_string(), at.off));
                    return Ok(());
                }
                Verdict::Damaged(why) => return Err(Error::corrupt(at.path, at.off, why)),
            }
            if rb.void_from.is_none() {
                rb.void_from = first_void(blocks, r.seq);
                rb.truncate_block = at.pos;
            }
            rb.replay.truncate(r.seq, r.ts);
        }
    }
    Ok(())
}
