//! A read-only check of a store directory: every block, every record, every checksum, the
//! index, the sequences that are gone, and the consumer files. Nothing is written (unlike `Store::open`, which
//! repairs what it finds).

use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenOptions};
use crate::record::{check_block_header, Header, Kind, BLOCK_HEADER_LEN};
use crate::store::{
    block_path, load_index, parse_block_name, scan_block, Replay, ScanEnd, SeqRange, Verdict,
    INDEX_FILE, INDEX_TMP, MSGS_DIR, PURGE_NEW, PURGE_OLD,
};
use std::io;
use std::ops::ControlFlow;

/// One thing wrong, where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file, relative to the store root.
    pub file: String,
    /// Byte offset.
    pub offset: u64,
    /// What is wrong.
    pub what: String,
}

/// What `index.db` is worth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexStatus {
    /// There is none (open rebuilds from the blocks).
    Missing,
    /// It matches the blocks (open would use it).
    Usable,
    /// It does not, and why (open would rebuild).
    Rejected(String),
}

/// The result of [`verify`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Block files checked.
    pub blocks: usize,
    /// Records read and checked.
    pub records: u64,
    /// Message records among them (live or deleted).
    pub messages: u64,
    /// The last sequence, as open recovers it (the same per-record rules: a truncate sets it,
    /// a record out of order does not count).
    pub last_seq: u64,
    /// Damage: bad records, torn tails, bad headers.
    pub problems: Vec<Problem>,
    /// Sequences between message records that no record accounts for.
    pub lost: Vec<SeqRange>,
    /// A purge was interrupted (open would complete or roll it back).
    pub interrupted_purge: Option<String>,
    /// The index.
    pub index: IndexStatus,
    /// Files and directories the store does not know.
    pub stray: Vec<String>,
    /// Durable consumers in `consumers/`, as open would recover them (their files' damage
    /// is in `problems`).
    pub consumers: usize,
}

impl VerifyReport {
    /// No damage and no lost sequence. (A stale index, a stray file or an interrupted purge
    /// are not damage: open handles them.)
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty() && self.lost.is_empty()
    }
}

fn names<F: Fs>(fs: &F, dir: &str) -> Result<Vec<crate::fs::DirEntry>> {
    fs.read_dir(dir).map_err(|e| Error::io("read_dir", dir, e))
}

/// Checks the store at the root of `fs` without changing anything. It holds the store's lock
/// while it reads (a writer's half-written record would read as damage): a store another
/// process, or a `Store` of this one, has open is [`Error::Locked`].
pub fn verify<F: Fs>(fs: &F) -> Result<VerifyReport> {
    let _lock = crate::store::take_lock(fs)?;
    let mut r = VerifyReport {
        blocks: 0,
        records: 0,
        messages: 0,
        last_seq: 0,
        problems: Vec::new(),
        lost: Vec::new(),
        interrupted_purge: None,
        index: IndexStatus::Missing,
        stray: Vec::new(),
        consumers: 0,
    };
    let root = names(fs, "")?;
    let dir = blocks_dir(&root)?;
    note_root(&root, &mut r);
    let numbers = block_numbers(fs, dir, &mut r)?;
    r.index = match load_index(fs, &numbers, false) {
        Ok(None) => IndexStatus::Missing,
        Ok(Some(_)) => IndexStatus::Usable,
        Err(e) => IndexStatus::Rejected(e.to_string()),
    };
    // the same per-record rules as open's rebuild (store/replay.rs)
    let mut replay = Replay::default();
    for number in numbers {
        r.blocks += 1;
        let path = block_path(dir, number);
        if let Some((file, len)) = open_block(fs, &path, number, &mut r)? {
            verify_block(&file, &path, len, &mut replay, &mut r)?;
        }
    }
    r.last_seq = replay.max_seq;
    r.lost = replay.lost();
    let c = crate::consumer::journal::check(fs)?;
    r.consumers = c.consumers;
    r.problems
        .extend(
            c.problems
                .into_iter()
                .map(|(file, offset, what)| Problem { file, offset, what }),
        );
    Ok(r)
}

/// Where the blocks are: `msgs/`, or `purge.old/` when a purge was interrupted right after
/// `msgs -> purge.old` (open renames it back, so verify reads the blocks where they are).
fn blocks_dir(root: &[crate::fs::DirEntry]) -> Result<&'static str> {
    let has = |n: &str| root.iter().any(|e| e.name == n && e.is_dir);
    if has(MSGS_DIR) {
        Ok(MSGS_DIR)
    } else if has(PURGE_OLD) {
        Ok(PURGE_OLD)
    } else {
        Err(Error::io(
            "read_dir",
            MSGS_DIR,
            io::Error::new(
                io::ErrorKind::NotFound,
                "not a seqstore directory (no msgs/)",
            ),
        ))
    }
}

/// Notes an interrupted purge and the names of the root that are not the store's.
fn note_root(root: &[crate::fs::DirEntry], r: &mut VerifyReport) {
    for e in root {
        match e.name.as_str() {
            MSGS_DIR | INDEX_FILE | INDEX_TMP | crate::consumer::CONSUMERS_DIR => {}
            name if crate::store::is_lock_name(name) => {}
            PURGE_NEW | PURGE_OLD => {
                r.interrupted_purge = Some(format!("{}/ present", e.name));
            }
            other => r.stray.push(other.to_string()),
        }
    }
}

/// The block numbers in `dir`, ascending; other names are stray.
fn block_numbers<F: Fs>(fs: &F, dir: &str, r: &mut VerifyReport) -> Result<Vec<u64>> {
    let mut numbers = Vec::new();
    for e in names(fs, dir)? {
        match parse_block_name(&e.name) {
            Some(i) if !e.is_dir => numbers.push(i),
            _ => r.stray.push(format!("{dir}/{}", e.name)),
        }
    }
    numbers.sort_unstable();
    Ok(numbers)
}

/// Opens block `number` at `path` and checks its header: the file and its length, or `None`
/// (a blank or bad header, noted as a problem).
fn open_block<F: Fs>(
    fs: &F,
    path: &str,
    number: u64,
    r: &mut VerifyReport,
) -> Result<Option<(F::File, u64)>> {
    let file = fs
        .open(path, OpenOptions::read_only())
        .map_err(|e| Error::io("open", path, e))?;
    let len = file.len().map_err(|e| Error::io("len", path, e))?;
    let mut h = [0u8; BLOCK_HEADER_LEN as usize];
    let n = (len as usize).min(h.len());
    file.read_exact_at(&mut h[..n], 0)
        .map_err(|e| Error::io("read", path, e))?;
    let what = match check_block_header(path, &h[..n], number) {
        Ok(Header::Valid) => return Ok(Some((file, len))),
        Ok(Header::Blank) => "blank block (no header)".to_string(),
        Err(e) => e.to_string(),
    };
    r.problems.push(Problem {
        file: path.to_string(),
        offset: 0,
        what,
    });
    Ok(None)
}

/// What the replay makes of one record (the rebuild's rules).
fn replay_record(replay: &mut Replay, rec: &crate::record::Record<'_>) -> Verdict {
    match rec.kind {
        Kind::Msg => replay.message(rec.seq, rec.ts),
        Kind::Tombstone => {
            // whether a message record matched it does not change what is lost: a sequence
            // with a message record is in no gap
            replay.tombstone(rec.seq, rec.ts, false);
            Verdict::Apply
        }
        Kind::Floor => {
            replay.floor(rec.seq, rec.ts);
            Verdict::Apply
        }
        Kind::Skip => {
            let (first, last) = rec.skipped().unwrap_or((rec.seq, rec.seq));
            replay.skip(first, last, rec.ts)
        }
        Kind::Truncate => {
            let v = replay.truncate_verdict(rec.seq);
            if v == Verdict::Apply {
                replay.truncate(rec.seq, rec.ts);
            }
            v
        }
    }
}

/// Reads one block's records through the replay, noting every record it would not apply,
/// every skipped record and damage that ends the block.
fn verify_block<H: FsFile>(
    file: &H,
    path: &str,
    len: u64,
    replay: &mut Replay,
    r: &mut VerifyReport,
) -> Result<()> {
    replay.start_block();
    let (mut skipped, mut out_of_order) = (Vec::new(), Vec::new());
    let problem = |offset, what| Problem {
        file: path.to_string(),
        offset,
        what,
    };
    let end = scan_block(
        file,
        path,
        BLOCK_HEADER_LEN,
        len,
        |off, rec| {
            r.records += 1;
            if rec.kind == Kind::Msg {
                r.messages += 1;
            }
            let what = match replay_record(replay, rec) {
                Verdict::Apply => return Ok(ControlFlow::Continue(())),
                Verdict::OutOfOrder => format!(
                    "{:?} record of seq {} out of order (open ignores it)",
                    rec.kind, rec.seq
                ),
                Verdict::Damaged(why) => format!("{why} (open refuses the block)"),
            };
            out_of_order.push(problem(off, what));
            Ok(ControlFlow::Continue(()))
        },
        |off, reason, seq| {
            skipped.push(problem(
                off,
                match seq {
                    Some(s) => format!("{reason} (record of seq {s}, skipped)"),
                    None => format!("{reason} (record skipped)"),
                },
            ));
            Ok(())
        },
    )?;
    r.problems.extend(out_of_order);
    r.problems.extend(skipped);
    if let ScanEnd::Damaged { offset, reason } = end {
        r.problems.push(problem(
            offset,
            format!("{reason}; {} bytes after it unreadable", len - offset),
        ));
    }
    Ok(())
}
