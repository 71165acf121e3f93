//! The rebuild's worker side: one block read, framed, checked (crc32, every field, the
//! subject's UTF-8, once per name) and decoded on a thread of its own, into what the opening
//! thread applies in order (`pipeline.rs`).
//!
//! The worker does the work of a block that depends on nothing before it: the scan (the one
//! every other path uses, [`scan_raw`]), its messages as entries whose subjects are
//! numbered within the block, and the block's other records. What depends on the blocks
//! before (the replay's verdicts, the store's subject ids, tombstones that reach back) is left
//! to the opening thread, so the result is the single-threaded rebuild's.

use super::blocks::reserve_by_density;
use super::entries::Entry;
use super::recover::Other;
use super::scan::{scan_raw, Reads, ScanEnd, Step, READ_CHUNK};
use super::subjects::{SubjectMemo, SubjectTable};
use crate::error::Result;
use crate::fs::FsFile;
use crate::record::{Kind, BLOCK_HEADER_LEN, FLAG_ERASED};

/// A block to scan: its file (moved to the worker and back), path and length.
pub(super) struct Job<H> {
    pub(super) file: H,
    pub(super) path: String,
    pub(super) flen: u64,
}

/// A record other than a message, and where it stands among the block's messages.
#[derive(Clone, Copy, Debug)]
pub(super) struct Event {
    /// How many of the block's message records come before it.
    pub(super) before: usize,
    pub(super) off: u64,
    pub(super) other: Other,
}

/// What the worker found in a block.
pub(super) struct Prescanned<H> {
    pub(super) job: Job<H>,
    /// Every message record, in order, `subj` numbering `names`, `deleted` its erased flag.
    pub(super) entries: Vec<Entry>,
    /// The deadlines of the messages with a time to live (not erased): (entry, deadline).
    pub(super) ttls: Vec<(usize, i64)>,
    pub(super) events: Vec<Event>,
    /// The block's subjects, in order of first appearance.
    pub(super) names: Vec<String>,
    pub(super) max_seq: u64,
    /// The crc of the last record read (`None`: none was).
    pub(super) last_crc: Option<u32>,
    pub(super) skipped: Vec<(u64, String, Option<u64>)>,
    pub(super) end: Result<ScanEnd>,
}

/// Scans `job`'s block from its header to its end (the worker's whole task). `buf`: the
/// worker's read buffer, reused from block to block.
pub(super) fn prescan<H: FsFile>(job: Job<H>, buf: &mut Vec<u8>) -> Prescanned<H> {
    let (mut entries, mut ttls, mut events) = (Vec::new(), Vec::new(), Vec::new());
    let (mut names, mut memo) = (SubjectTable::new(), SubjectMemo::new());
    let (mut max_seq, mut last_crc, mut skipped) = (0u64, None, Vec::new());
    let flen = job.flen;
    let end = scan_raw(
        &job.file,
        &job.path,
        BLOCK_HEADER_LEN,
        flen,
        Reads::upto(READ_CHUNK),
        buf,
        |off, r| {
            // (only a message has a subject: the other kinds' are empty)
            let subj = match r.kind {
                Kind::Msg => match names.intern_bytes(&mut memo, r.subject, r.flags) {
                    Ok(id) => Some(id),
                    Err(reason) => return Ok(Step::Refuse(reason)),
                },
                _ => None,
            };
            last_crc = Some(r.crc);
            max_seq = max_seq.max(r.seq);
            let Some(subj) = subj else {
                let other = Other::of(r);
                let before = entries.len();
                events.push(Event { before, off, other });
                return Ok(Step::Next);
            };
            if entries.len() == entries.capacity() {
                reserve_by_density(&mut entries, off + r.len as u64, flen);
            }
            let erased = r.flags & FLAG_ERASED != 0;
            if let (false, Some(d)) = (erased, r.deadline()) {
                ttls.push((entries.len(), d));
            }
            entries.push(Entry::of(off, r, subj, false));
            Ok(Step::Next)
        },
        |off, reason, seq| {
            skipped.push((off, reason.to_string(), seq));
            Ok(())
        },
    );
    Prescanned {
        job,
        entries,
        ttls,
        events,
        names: names.into_names(),
        max_seq,
        last_crc,
        skipped,
        end,
    }
}
