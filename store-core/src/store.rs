//! The stream store. See ARCHITECTURE.md for the data flow, the write path with every fsync,
//! and the byte layouts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (rustc's): a few ns for a 16-byte subject where SipHash takes ~20.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);
impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}
impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut c = bytes.chunks_exact(8);
        for w in &mut c {
            self.add(u64::from_le_bytes(w.try_into().expect("8")));
        }
        let r = c.remainder();
        if !r.is_empty() {
            let mut b = [0u8; 8];
            b[..r.len()].copy_from_slice(r);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}
pub(crate) type SubjMap = HashMap<String, u32, BuildHasherDefault<FxHasher>>;
use std::io;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::{Config, Discard, RecoveryMode, SyncPolicy};
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenOptions, WriteSyncError};
use crate::index::{BlockSummary, Snapshot, SubjectSummary};
use crate::record::{
    self, check_block_header, decode, encode, encoded_len, Decoded, Header, Kind, BLOCK_HEADER_LEN,
    FLAG_ERASED, HARD_MAX_RECORD, REC_OVERHEAD,
};
use crate::subject;

/// The directory holding the live message blocks.
pub const MSGS_DIR: &str = "msgs";
/// Where a purge builds the new block set before the swap.
pub const PURGE_NEW: &str = "purge.new";
/// Where the old block set goes during the swap, until it is removed.
pub const PURGE_OLD: &str = "purge.old";
/// The state snapshot.
pub const INDEX_FILE: &str = "index.db";
/// The snapshot being written.
pub const INDEX_TMP: &str = "index.db.tmp";

const READ_CHUNK: usize = 1 << 20;

/// A named fsync call site: the data half (block files) and the directory half (`msgs/`).
/// Every fsync the store does has a name, so the crash matrix can remove each one alone and
/// show what it protects (ablation feature), and reports can name it.
#[derive(Clone, Copy, Debug)]
struct Site {
    data: &'static str,
    dir: &'static str,
}

const S_APPEND: Site = Site {
    data: "append.data",
    dir: "append.dir",
};
const S_POLICY: Site = Site {
    data: "policy.data",
    dir: "policy.dir",
};
const S_ERASE: Site = Site {
    data: "erase.tombstone-data",
    dir: "erase.tombstone-dir",
};
const S_SYNC: Site = Site {
    data: "sync.data",
    dir: "sync.dir",
};
const S_DROP: Site = Site {
    data: "drop-blocks.data",
    dir: "drop-blocks.dir",
};
const S_PURGE_EX: Site = Site {
    data: "purge-ex.data",
    dir: "purge-ex.dir",
};
const S_COMPACT: Site = Site {
    data: "compact.data",
    dir: "compact.dir",
};
const S_OPEN_LIMITS: Site = Site {
    data: "open.limits-data",
    dir: "open.limits-dir",
};
const S_TRUNCATE_COMMIT: Site = Site {
    data: "truncate.commit-data",
    dir: "truncate.commit-dir",
};

/// Every named fsync call site of the store, in write-path order (see ARCHITECTURE.md).
pub const SYNC_SITES: &[&str] = &[
    "open.msgs-dir",
    "open.root-dir",
    "open.limits-data",
    "open.limits-dir",
    "append.data",
    "append.dir",
    "policy.data",
    "policy.dir",
    "sync.data",
    "sync.dir",
    "drop-blocks.data",
    "drop-blocks.dir",
    "erase.tombstone-data",
    "erase.tombstone-dir",
    "purge.tombstone",
    "purge.new-dir",
    "purge.swap-dir",
    "purge-ex.data",
    "purge-ex.dir",
    "compact.data",
    "compact.dir",
    "truncate.commit-data",
    "truncate.commit-dir",
];

/// A message read back from the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMsg {
    /// Its sequence.
    pub seq: u64,
    /// Its timestamp (ns since the epoch, from the store's clock).
    pub ts: i64,
    /// Its subject.
    pub subject: String,
    /// Its opaque header bytes.
    pub headers: Vec<u8>,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// The stream's counters, as NATS reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamState {
    /// Messages stored.
    pub msgs: u64,
    /// Bytes stored (encoded record sizes).
    pub bytes: u64,
    /// Lowest stored sequence, or `last_seq + 1` when empty (0 for a stream that never had a
    /// sequence, as NATS reports it).
    pub first_seq: u64,
    /// Timestamp of the first stored message (0 when empty).
    pub first_ts: i64,
    /// Highest sequence ever assigned (survives deletes and purges).
    pub last_seq: u64,
    /// Timestamp of the last sequence's record.
    pub last_ts: i64,
    /// Sequences between first and last that are deleted.
    pub num_deleted: u64,
    /// Distinct subjects with at least one stored message.
    pub num_subjects: u64,
}

/// A range of sequences, inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeqRange {
    /// First sequence.
    pub first: u64,
    /// Last sequence.
    pub last: u64,
}

/// A cut made by recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The block file.
    pub file: String,
    /// Where it was cut.
    pub offset: u64,
    /// Bytes dropped.
    pub dropped: u64,
    /// Why.
    pub reason: String,
}

/// What `open` found and did. Nothing recovery changes is hidden: every cut, every lost
/// sequence and every ignored file is listed here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// State came from `index.db` (no block was scanned).
    pub used_index: bool,
    /// Why `index.db` was not used, if it existed.
    pub index_rejected: Option<String>,
    /// An interrupted purge was completed (its new block was durable).
    pub purge_completed: bool,
    /// An interrupted purge was rolled back (its new block was not durable).
    pub purge_rolled_back: bool,
    /// Blocks cut at their first bad record.
    pub cuts: Vec<Cut>,
    /// Single damaged records skipped inside a block (file, offset, reason).
    pub skipped: Vec<(String, u64, String)>,
    /// Sequences that had records and are gone (damage, not deletes).
    pub lost: Vec<SeqRange>,
    /// Block files removed because no byte of them was durable.
    pub removed_blank: Vec<String>,
    /// Files and directories in the store that recovery does not know and left alone.
    pub ignored: Vec<String>,
    /// Records ignored because their sequence went backwards.
    pub out_of_order: Vec<(String, u64)>,
    /// Records made void by a truncate that were removed from disk by recovery.
    pub truncate_cleanup: bool,
}

impl RecoveryReport {
    /// Whether recovery had to drop anything that had been written.
    pub fn lost_data(&self) -> bool {
        !self.cuts.is_empty() || !self.skipped.is_empty() || !self.lost.is_empty()
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    seq: u64,
    ts: i64,
    off: u32,
    len: u32,
    subj: u32,
    deleted: bool,
}

struct Block<H> {
    index: u64,
    path: String,
    /// Shared so that a group commit can fsync it without holding the store (see
    /// `SharedStore`).
    file: Arc<H>,
    /// Bytes in the file (the write buffer holds more, for the newest block).
    len: u64,
    /// Sequences of the first and last message records in the block (0 if none).
    msg_first: u64,
    msg_last: u64,
    /// Highest message sequence in this or any earlier block: non-decreasing, so a lookup
    /// by sequence is a binary search over blocks.
    hi: u64,
    /// Highest sequence of any record in the block.
    max_seq: u64,
    live: u64,
    live_bytes: u64,
    last_crc: u32,
    /// `None` until the block is read (blocks known from `index.db` are read on first use).
    entries: Option<Vec<Entry>>,
    /// Deleted sequences of an unread block (from `index.db`), sorted.
    dmap: Vec<u64>,
    /// Has writes that are not fsynced.
    dirty: bool,
    /// The block's bytes `[0, cache.len())`, kept for reads (sealed blocks only; see
    /// `Store::prepare_read`). Every write inside that range updates or drops it.
    cache: Option<Box<[u8]>>,
    /// Reads of this block, halved now and then (`Store::prepare_read`): how hot it is.
    heat: u64,
    /// Reads by `pread` since the block was last cached or evicted (admission counter).
    uncached_reads: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct SubjInfo {
    msgs: u64,
    /// First and last live sequence; 0 means "not known, search".
    first: u64,
    last: u64,
}

/// A message-stream store on a filesystem `F`.
pub struct Store<F: Fs> {
    fs: F,
    cfg: Config,
    clock: Box<dyn Clock>,
    blocks: Vec<Block<F::File>>,
    /// Pending bytes of the newest block, to be written at `blocks.last().len`.
    wbuf: Vec<u8>,
    first_seq: u64,
    first_ts: i64,
    last_seq: u64,
    last_ts: i64,
    floor: u64,
    msgs: u64,
    bytes: u64,
    subj_names: Vec<String>,
    /// The appends' memo in front of `subj_ids` (reset whenever the name table is).
    subj_memo: Box<SubjMemo>,
    subj_ids: SubjMap,
    subj: Vec<SubjInfo>,
    num_subjects: u64,
    poisoned: bool,
    closed: bool,
    last_sync_ns: i64,
    /// `msgs/` has entries (new blocks, removals) that are not yet durable.
    msgs_dir_dirty: bool,
    /// Records written since open: the group commit's durability watermark (sequences can go
    /// down with `truncate`; this never does).
    writes: u64,
    report: RecoveryReport,
    /// The blocks a purge replaced (their memory) and whether `purge.old/` is still on disk:
    /// released by `cleanup` (tick, close, the next purge), not inside `purge`.
    retired: Vec<Block<F::File>>,
    purge_old_pending: bool,
    /// The files a group-commit leader is fsyncing right now, without the lock (between
    /// `begin_group_sync` and `end_group_sync`): their `dirty` flags are already clear, so a
    /// `sync` in that window fsyncs them too rather than return before they are durable.
    group_inflight: Vec<(Arc<F::File>, String)>,
    /// Reads since the block heats were last halved.
    reads_since_decay: u64,
}

/// A clock for [`Store::open`]: store-core reads no clock, so without one each call returns
/// one nanosecond more than the last. Use [`Store::open_with_clock`] for wall time.
struct LogicalClock(std::sync::atomic::AtomicI64);

impl Clock for LogicalClock {
    fn now_ns(&self) -> i64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
    }
}

pub(crate) fn block_path(dir: &str, index: u64) -> String {
    format!("{dir}/{index}.blk")
}

pub(crate) fn parse_block_name(name: &str) -> Option<u64> {
    let n = name.strip_suffix(".blk")?;
    if n.is_empty() || n.len() > 19 || !n.bytes().all(|b| b.is_ascii_digit()) || n.starts_with('0')
    {
        return None;
    }
    n.parse().ok().filter(|&i| i > 0)
}

fn ioe<T>(r: io::Result<T>, op: &'static str, path: &str) -> Result<T> {
    r.map_err(|e| Error::io(op, path, e))
}

/// A record encoded by the caller of [`Store::append_encoded`], with its decoded fields.
#[derive(Clone, Copy)]
struct Encoded<'a> {
    bytes: &'a [u8],
    seq: u64,
    ts: i64,
    crc: u32,
}

/// The subject of an append: its name, or (for a record encoded by the caller, whose bytes
/// name it) the id of a subject the store holds.
#[derive(Clone, Copy)]
enum Subj<'a> {
    Name(&'a str),
    Known(u32),
}

/// What scanning a block found at its end.
pub(crate) enum ScanEnd {
    Clean,
    /// Stopped at `offset`: everything from there is unusable.
    Stop {
        offset: u64,
        reason: String,
    },
}

/// Reads a block's records in order from `start` to `len`, in chunks (never more than one
/// record plus one chunk in memory). A record that fails its checks but is framed by a
/// plausible next record is passed to `skipped` and stepped over; any other damage ends the
/// scan.
pub(crate) fn scan_block<H: FsFile>(
    file: &H,
    path: &str,
    start: u64,
    len: u64,
    visit: impl FnMut(u64, &record::Record<'_>) -> Result<()>,
    skipped: impl FnMut(u64, &str, Option<u64>) -> Result<()>,
) -> Result<ScanEnd> {
    scan_block_chunked(
        file,
        path,
        start,
        len,
        READ_CHUNK,
        &mut Vec::new(),
        visit,
        skipped,
    )
}

/// Before a full `entries` of a block grows (the rebuild scan's, or the newest block's on
/// append): reserves room for as many entries as the block holds at the density seen so far
/// (`seen` bytes of its `len`), bounded by the most it could hold. Doubling from empty copied
/// a block's vector ~17 times, and in the wasm guest each copy touches fresh linear memory (no
/// `mremap`): page faults were a tenth of its rebuild, and of a fresh instance's appends.
fn reserve_by_density(entries: &mut Vec<Entry>, seen: u64, len: u64) {
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

/// What [`scan_block_chunked`] has read: `buf[..valid]` holds the file's bytes from `off`;
/// with batched checksums, `crcs` those of the records framed from `buf[0]`, `pre_i` the next
/// one to use and `frame_at` where its record starts in `buf`.
struct Window {
    valid: usize,
    off: u64,
    crcs: Vec<u32>,
    pre_i: usize,
    frame_at: usize,
}

/// `scan_block` reading `chunk` bytes at a time (small when the caller stops early).
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan_block_chunked<H: FsFile>(
    file: &H,
    path: &str,
    start: u64,
    len: u64,
    chunk: usize,
    buf: &mut Vec<u8>,
    mut visit: impl FnMut(u64, &record::Record<'_>) -> Result<()>,
    mut skipped: impl FnMut(u64, &str, Option<u64>) -> Result<()>,
) -> Result<ScanEnd> {
    // buf[..w.valid] holds file bytes from w.off. Every read starts at `pos`, a record
    // boundary: the few bytes of a record cut by the previous read are read again rather
    // than copied down, so that the read can land in a buffer of its own (the wasm guest's:
    // `FsFile::read_vec_at`) and be framed from its first byte. The storage is reused (never
    // re-zeroed), also across calls when the caller passes the same buffer (rebuild: one per
    // open, not a fresh 1 MiB of page faults per block).
    //
    // With a file that batches checksums (`FsFile::batch_crc32`: the wasm guest's), each read
    // comes with the crcs of the whole records it holds (`FsFile::read_framed_at`), framed
    // from its first byte by their length fields. The scan steps through records by the same
    // length fields, so the i-th record it meets from the start of a read is the i-th frame:
    // `frame_at` follows where that is (no second framing pass in the guest). A record that
    // is not where the next frame starts (after a resync jumped inside the buffer), or beyond
    // the crcs given (a host that returned fewer), is checked the ordinary way.
    let batch = file.batch_crc32();
    let mut w = Window {
        valid: 0,
        off: start,
        crcs: Vec::new(),
        pre_i: 0,
        frame_at: 0,
    };
    let mut pos = start;
    // `want` bytes from pos, at least a chunk, at most what the block has
    let fill = |buf: &mut Vec<u8>, w: &mut Window, pos: u64, want: usize| -> Result<()> {
        let n = (want.max(chunk) as u64).min(len - pos) as usize;
        if batch {
            w.crcs.clear();
            ioe(file.read_framed_at(buf, n, pos, &mut w.crcs), "read", path)?;
            w.pre_i = 0;
            w.frame_at = 0;
        } else {
            ioe(file.read_vec_at(buf, n, pos), "read", path)?;
        }
        // Checked after the read, as before a write: the scan trusts these bounds (a broken
        // `Fs` gets a typed error, not a panic).
        if buf.len() < n {
            return Err(Error::io(
                "read",
                path,
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("read_vec_at returned {} of {n} bytes", buf.len()),
                ),
            ));
        }
        w.valid = n;
        w.off = pos;
        Ok(())
    };
    while pos < len {
        let avail = (w.off + w.valid as u64).saturating_sub(pos) as usize;
        if pos < w.off || avail < REC_OVERHEAD.min((len - pos) as usize) || avail == 0 {
            fill(buf, &mut w, pos, REC_OVERHEAD)?;
        }
        let (valid, buf_off) = (w.valid, w.off);
        let at = (pos - buf_off) as usize;
        let avail = valid - at;
        let framed = batch && at == w.frame_at && w.pre_i < w.crcs.len();
        let decoded = if framed {
            record::decode_with_crc(&buf[at..valid], w.crcs[w.pre_i])
        } else {
            decode(&buf[at..valid])
        };
        // The record here spans the frame whose crc was used: the next frame follows it.
        let next_frame = |w: &mut Window, len: usize| {
            if framed {
                w.frame_at += len;
                w.pre_i += 1;
            }
        };
        match decoded {
            Decoded::Record(r) => {
                visit(pos, &r)?;
                next_frame(&mut w, r.len);
                pos += r.len as u64;
            }
            Decoded::Short(n) => {
                if pos + n as u64 > len {
                    // a torn tail, or a damaged length field with valid records after it
                    if let Some(next) = resync(file, path, pos + 1, len)? {
                        skipped(pos, "record length points past the end", None)?;
                        pos = next;
                        continue;
                    }
                    return Ok(ScanEnd::Stop {
                        offset: pos,
                        reason: "record cut short (torn tail)".into(),
                    });
                }
                if avail >= n {
                    // decode only says Short when fewer than n bytes are given: never loop
                    return Ok(ScanEnd::Stop {
                        offset: pos,
                        reason: "undecodable record".into(),
                    });
                }
                fill(buf, &mut w, pos, n)?;
            }
            Decoded::End => {
                // zeros: the end of written data, if nothing but zeros follows
                let mut p = pos;
                let mut chunk = vec![0u8; 64 << 10];
                while p < len {
                    let n = ((len - p) as usize).min(chunk.len());
                    ioe(file.read_exact_at(&mut chunk[..n], p), "read", path)?;
                    if chunk[..n].iter().any(|&b| b != 0) {
                        // A hole of zeros with records after it: e.g. a write whose fsync
                        // failed and was dropped (fsyncgate) while later writes were synced.
                        // Skip to the next valid record rather than lose what follows.
                        match resync(file, path, pos, len)? {
                            Some(next) => {
                                skipped(pos, "zero length followed by data", None)?;
                                pos = next;
                                break;
                            }
                            None => {
                                return Ok(ScanEnd::Stop {
                                    offset: pos,
                                    reason: "zero length followed by data".into(),
                                })
                            }
                        }
                    }
                    p += n as u64;
                }
                if p >= len {
                    return Ok(ScanEnd::Stop {
                        offset: pos,
                        reason: "zeros at the end (unwritten space)".into(),
                    });
                }
            }
            Decoded::Bad { reason, framed } => {
                let next_ok = match framed {
                    Some(l) if pos + l as u64 == len => true,
                    Some(l) if pos + l as u64 + 4 <= len => {
                        let mut h = [0u8; REC_OVERHEAD];
                        let n = ((len - pos - l as u64) as usize).min(REC_OVERHEAD);
                        ioe(
                            file.read_exact_at(&mut h[..n], pos + l as u64),
                            "read",
                            path,
                        )?;
                        plausible_header(&h[..n])
                    }
                    _ => false,
                };
                match framed {
                    Some(l) if next_ok => {
                        let seq = (valid >= at + 16).then(|| {
                            u64::from_le_bytes(buf[at + 8..at + 16].try_into().expect("8"))
                        });
                        skipped(pos, reason, seq)?;
                        next_frame(&mut w, l);
                        pos += l as u64;
                    }
                    _ => match resync(file, path, pos + 1, len)? {
                        // damage whose framing is gone, but valid records follow
                        Some(next) => {
                            skipped(pos, reason, None)?;
                            pos = next;
                        }
                        None => {
                            return Ok(ScanEnd::Stop {
                                offset: pos,
                                reason: reason.to_string(),
                            })
                        }
                    },
                }
            }
        }
    }
    Ok(ScanEnd::Clean)
}

/// The offset of the first whole, checksum-valid record at or after `from`, if any: where a scan
/// resumes after damage that destroyed the framing. Reads the rest of the block in windows
/// (never more than one window and one record in memory); a candidate must look like a header
/// before its crc is computed, so the cost is one pass over the bytes.
fn resync<H: FsFile>(file: &H, path: &str, from: u64, len: u64) -> Result<Option<u64>> {
    const WINDOW: usize = 1 << 20;
    let mut base = from;
    let mut buf = vec![0u8; WINDOW];
    while base + REC_OVERHEAD as u64 <= len {
        let n = ((len - base) as usize).min(WINDOW);
        ioe(file.read_exact_at(&mut buf[..n], base), "read", path)?;
        // offsets whose 36-byte header lies inside this window
        let last = n.saturating_sub(REC_OVERHEAD);
        for i in 0..=last {
            if buf[i] == 0 && buf[i + 1] == 0 && buf[i + 2] == 0 && buf[i + 3] == 0 {
                continue;
            }
            if !plausible_header(&buf[i..i + REC_OVERHEAD]) {
                continue;
            }
            let rl = u32::from_le_bytes(buf[i..i + 4].try_into().expect("4")) as usize;
            let at = base + i as u64;
            if at + rl as u64 > len {
                continue;
            }
            let ok = if i + rl <= n {
                matches!(decode(&buf[i..i + rl]), Decoded::Record(_))
            } else {
                let mut rec = vec![0u8; rl];
                ioe(file.read_exact_at(&mut rec, at), "read", path)?;
                matches!(decode(&rec), Decoded::Record(_))
            };
            if ok {
                return Ok(Some(at));
            }
        }
        if n < WINDOW {
            break;
        }
        base += (last + 1) as u64;
    }
    Ok(None)
}

/// Whether bytes look like the start of a record (or the zero end marker): used only to
/// decide that a bad record is framed by a good one.
fn plausible_header(h: &[u8]) -> bool {
    if h.len() < 4 {
        return false;
    }
    let len = u32::from_le_bytes(h[0..4].try_into().expect("4")) as usize;
    if len == 0 {
        return h.iter().all(|&b| b == 0);
    }
    if h.len() < 32 || !(REC_OVERHEAD..=HARD_MAX_RECORD).contains(&len) || !(1..=4).contains(&h[4])
    {
        return false;
    }
    let s = u16::from_le_bytes([h[6], h[7]]) as usize;
    let hd = u32::from_le_bytes(h[24..28].try_into().expect("4")) as usize;
    let p = u32::from_le_bytes(h[28..32].try_into().expect("4")) as usize;
    s + hd + p + REC_OVERHEAD == len
}

/// Per-rebuild bookkeeping.
#[derive(Default)]
struct Rebuild {
    floor: u64,
    max_seq: u64,
    max_ts: i64,
    prev_msg: u64,
    gaps: Vec<SeqRange>,
    tomb_orphans: BTreeSet<u64>,
    /// A truncate record voided records that are still on disk: (block position, offset of
    /// the first void record), and the position of the block holding the truncate record.
    void_from: Option<(usize, u64)>,
    truncate_block: usize,
}

impl<F: Fs> Store<F> {
    /// Opens (or creates) the store at the root of `fs`, stamping messages with a logical clock
    /// (store-core reads no clock). Most users want [`Store::open_with_clock`].
    pub fn open(fs: F, cfg: Config) -> Result<Self> {
        Self::open_with_clock(fs, cfg, Box::new(LogicalClock(0.into())))
    }

    /// Opens (or creates) the store at the root of `fs`, taking time from `clock`.
    ///
    /// Recovery, in order: finish or roll back an interrupted purge (from the directories it
    /// finds); load `index.db` if it matches the blocks exactly, else rebuild from the blocks
    /// (cutting torn tails, reporting lost sequences); fsync both directories so that nothing
    /// acknowledged later can depend on a name that is not durable; re-enforce limits, and
    /// fsync what they removed.
    pub fn open_with_clock(fs: F, cfg: Config, clock: Box<dyn Clock>) -> Result<Self> {
        cfg.validate().map_err(Error::InvalidConfig)?;
        let now = clock.now_ns();
        let mut s = Store {
            fs,
            cfg,
            clock,
            blocks: Vec::new(),
            wbuf: Vec::new(),
            first_seq: 1,
            first_ts: 0,
            last_seq: 0,
            last_ts: 0,
            floor: 0,
            msgs: 0,
            bytes: 0,
            subj_names: Vec::new(),
            subj_memo: Box::new(SubjMemo::new()),
            subj_ids: SubjMap::default(),
            subj: Vec::new(),
            num_subjects: 0,
            poisoned: false,
            closed: false,
            last_sync_ns: now,
            msgs_dir_dirty: false,
            writes: 0,
            report: RecoveryReport::default(),
            retired: Vec::new(),
            purge_old_pending: false,
            group_inflight: Vec::new(),
            reads_since_decay: 0,
        };
        s.recover_purge()?;
        s.load()?;
        // Make the structure we found durable before anything new is acknowledged on top of
        // it: the names may have been created by a process that never synced them.
        s.sync_dir(MSGS_DIR, "open.msgs-dir")?;
        s.sync_dir("", "open.root-dir")?;
        s.msgs_dir_dirty = false;
        // The newest block (like every block known from index.db) is read on first use: the
        // first append or read that needs it, not here, so that open does not depend on how
        // full it is.
        // What the limits remove at open is a structural change like a compact: durable before
        // open returns, in every policy, so no reader of this instance sees a message gone
        // that a crash brings back.
        let writes = s.writes;
        s.enforce_limits_all()?;
        if s.writes != writes {
            s.sync_inner(S_OPEN_LIMITS)?;
        }
        s.maybe_sync()?;
        Ok(s)
    }

    /// What recovery found and did at open.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    fn root_names(&self) -> Result<BTreeMap<String, bool>> {
        Ok(ioe(self.fs.read_dir(""), "read_dir", "")?
            .into_iter()
            .map(|e| (e.name, e.is_dir))
            .collect())
    }

    /// Whether `purge.new` holds a block whose records all check out and include a floor
    /// record: the purge's commit point.
    fn purge_block_valid(&self) -> Result<bool> {
        let entries = match self.fs.read_dir(PURGE_NEW) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io("read_dir", PURGE_NEW, e)),
        };
        for e in entries {
            let Some(index) = parse_block_name(&e.name) else {
                continue;
            };
            let path = block_path(PURGE_NEW, index);
            let f = ioe(self.fs.open(&path, OpenOptions::read_only()), "open", &path)?;
            let len = ioe(f.len(), "len", &path)?;
            let mut h = [0u8; BLOCK_HEADER_LEN as usize];
            let n = (len as usize).min(h.len());
            ioe(f.read_exact_at(&mut h[..n], 0), "read", &path)?;
            if check_block_header(&path, &h[..n], index).ok() != Some(Header::Valid) {
                continue;
            }
            let mut has_floor = false;
            let end = scan_block(
                &f,
                &path,
                BLOCK_HEADER_LEN,
                len,
                |_, r| {
                    has_floor |= r.kind == Kind::Floor;
                    Ok(())
                },
                |_, _, _| Ok(()),
            )?;
            if has_floor && matches!(end, ScanEnd::Clean) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Finishes or undoes a purge that a crash interrupted (see ARCHITECTURE.md, "Purge").
    fn recover_purge(&mut self) -> Result<()> {
        let names = self.root_names()?;
        let has = |n: &str| names.get(n).copied() == Some(true);
        let (msgs, new, old) = (has(MSGS_DIR), has(PURGE_NEW), has(PURGE_OLD));
        if !(new || old) {
            if !msgs {
                // made durable by open's root fsync ("open.root-dir")
                ioe(self.fs.create_dir(MSGS_DIR), "create_dir", MSGS_DIR)?;
            }
            return Ok(());
        }
        if new && self.purge_block_valid()? {
            // Committed: the new block with the last sequence is durable. Finish the swap.
            if msgs {
                if old {
                    ioe(
                        self.fs.remove_dir_all(PURGE_OLD),
                        "remove_dir_all",
                        PURGE_OLD,
                    )?;
                }
                ioe(self.fs.rename(MSGS_DIR, PURGE_OLD), "rename", MSGS_DIR)?;
            }
            self.install_purge_new()?;
            if msgs || old {
                ioe(
                    self.fs.remove_dir_all(PURGE_OLD),
                    "remove_dir_all",
                    PURGE_OLD,
                )?;
            }
            self.report.purge_completed = true;
        } else {
            // Not committed (or only leftovers of a finished purge): keep the old blocks.
            if new {
                ioe(
                    self.fs.remove_dir_all(PURGE_NEW),
                    "remove_dir_all",
                    PURGE_NEW,
                )?;
                self.report.purge_rolled_back = true;
            }
            if old {
                if msgs {
                    ioe(
                        self.fs.remove_dir_all(PURGE_OLD),
                        "remove_dir_all",
                        PURGE_OLD,
                    )?;
                } else {
                    ioe(self.fs.rename(PURGE_OLD, MSGS_DIR), "rename", PURGE_OLD)?;
                    self.report.purge_rolled_back = true;
                }
            } else if !msgs {
                ioe(self.fs.create_dir(MSGS_DIR), "create_dir", MSGS_DIR)?;
            }
        }
        Ok(())
    }

    /// Makes `purge.new` the live `msgs/` (recovery finishing a committed purge): one rename.
    fn install_purge_new(&mut self) -> Result<()> {
        #[cfg(feature = "ablation")]
        if self.cfg.ablation == crate::Ablation::MovePurgeBlocks {
            return self.install_purge_new_by_moving();
        }
        ioe(self.fs.rename(PURGE_NEW, MSGS_DIR), "rename", PURGE_NEW)
    }

    /// **Deliberately wrong** (ablation `MovePurgeBlocks`, the negative control of the
    /// crash-during-recovery test): instead of renaming `purge.new`, moves its files into a
    /// new `msgs/` one by one and removes `purge.new`. The moves wait for an fsync of
    /// `purge.new` that never comes (it is removed), so after a crash `msgs/` is empty.
    #[cfg(feature = "ablation")]
    fn install_purge_new_by_moving(&mut self) -> Result<()> {
        ioe(self.fs.create_dir(MSGS_DIR), "create_dir", MSGS_DIR)?;
        for e in ioe(self.fs.read_dir(PURGE_NEW), "read_dir", PURGE_NEW)? {
            let from = format!("{PURGE_NEW}/{}", e.name);
            let to = format!("{MSGS_DIR}/{}", e.name);
            ioe(self.fs.rename(&from, &to), "rename", &from)?;
        }
        ioe(
            self.fs.remove_dir_all(PURGE_NEW),
            "remove_dir_all",
            PURGE_NEW,
        )
    }

    /// Lists `msgs/`: block indexes in order; anything else is reported and left alone.
    fn list_blocks(&mut self) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        for e in ioe(self.fs.read_dir(MSGS_DIR), "read_dir", MSGS_DIR)? {
            match parse_block_name(&e.name) {
                Some(i) if !e.is_dir => out.push(i),
                _ => self.report.ignored.push(format!("{MSGS_DIR}/{}", e.name)),
            }
        }
        for (name, _) in self.root_names()? {
            if ![MSGS_DIR, INDEX_FILE, INDEX_TMP].contains(&name.as_str()) {
                self.report.ignored.push(name);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    fn load(&mut self) -> Result<()> {
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

    fn list_blocks_quiet(&mut self) -> Result<Vec<u64>> {
        let ignored = self.report.ignored.len();
        let v = self.list_blocks()?;
        self.report.ignored.truncate(ignored);
        Ok(v)
    }

    /// Cuts block `bpos` at `off` and removes the blocks between it and the block holding
    /// the truncate record.
    fn truncate_cleanup(&mut self, bpos: usize, off: u64, tpos: usize) -> Result<()> {
        for pos in (bpos + 1..tpos).rev() {
            let path = self.blocks[pos].path.clone();
            ioe(self.fs.remove_file(&path), "remove_file", &path)?;
        }
        let b = &self.blocks[bpos];
        if bpos != tpos {
            ioe(b.file.set_len(off), "set_len", &b.path)?;
        }
        self.blocks.clear();
        Ok(())
    }

    /// Loads state from `index.db` if it matches the blocks exactly. `Ok(false)`: no index.
    fn try_index(&mut self, indexes: &[u64]) -> Result<bool> {
        let Some((snap, files)) = load_index(&self.fs, indexes, true)? else {
            return Ok(false);
        };
        let mut hi = 0;
        let mut blocks = Vec::with_capacity(snap.blocks.len());
        for (bs, file) in snap.blocks.iter().zip(files) {
            hi = hi.max(bs.msg_last);
            blocks.push(Block {
                index: bs.index,
                path: block_path(MSGS_DIR, bs.index),
                file: Arc::new(file),
                len: bs.len,
                msg_first: bs.msg_first,
                msg_last: bs.msg_last,
                hi,
                max_seq: bs.max_seq,
                live: bs.live,
                live_bytes: bs.live_bytes,
                last_crc: bs.last_crc,
                entries: None,
                dmap: bs.deleted.clone(),
                // a previous process may never have synced it: the next sync does
                dirty: true,
                cache: None,
                heat: 0,
                uncached_reads: 0,
            });
        }
        self.blocks = blocks;
        self.first_seq = snap.first_seq;
        self.first_ts = snap.first_ts;
        self.last_seq = snap.last_seq;
        self.last_ts = snap.last_ts;
        self.floor = snap.floor;
        self.msgs = snap.msgs;
        self.bytes = snap.bytes;
        for s in &snap.subjects {
            let id = self.intern(&s.name);
            self.subj[id as usize] = SubjInfo {
                msgs: s.msgs,
                first: s.first,
                last: s.last,
            };
            if s.msgs > 0 {
                self.num_subjects += 1;
            }
        }
        // The first live message is read, not trusted: it catches an index whose first_seq
        // or first_ts does not match the blocks. Only the records up to it are read (small
        // reads, stopped there), not the whole block: open must not cost a block.
        let (first, first_ts) = (self.first_seq, self.first_ts);
        let found = if self.msgs == 0 {
            Some((self.last_seq + 1, 0))
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
        Ok(true)
    }

    /// The first live message (sequence, timestamp) of an index-loaded store, read from the
    /// first block with a live message, stopping at it.
    fn first_live_probe(&self) -> Result<Option<(u64, i64)>> {
        let Some(b) = self.blocks.iter().find(|b| b.live > 0) else {
            return Ok(None);
        };
        let floor = self.floor;
        let mut found = None;
        let end = scan_block_chunked(
            &*b.file,
            &b.path,
            BLOCK_HEADER_LEN,
            b.len,
            16 << 10,
            &mut Vec::new(),
            |_, r| {
                let live = r.kind == Kind::Msg
                    && r.flags & FLAG_ERASED == 0
                    && r.seq > floor
                    && b.dmap.binary_search(&r.seq).is_err();
                if live {
                    found = Some((r.seq, r.ts));
                    // stop the scan here (the error is dropped below)
                    return Err(Error::Closed);
                }
                Ok(())
            },
            |off, reason, _| Err(Error::corrupt(b.path.clone(), off, reason)),
        );
        match (found, end) {
            (Some(f), _) => Ok(Some(f)),
            (None, Err(e)) => Err(e),
            (None, Ok(_)) => Ok(None),
        }
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.subj_ids.get(name) {
            return id;
        }
        let id = self.subj_names.len() as u32;
        self.subj_names.push(name.to_string());
        self.subj_ids.insert(name.to_string(), id);
        self.subj.push(SubjInfo::default());
        id
    }

    /// Rebuilds the whole state from the blocks. Returns where a truncate left void records
    /// on disk (they are cleaned up by the caller), else `None`.
    fn rebuild(&mut self, indexes: &[u64]) -> Result<Option<(usize, u64, usize)>> {
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
                                if r.seq <= rb.max_seq {
                                    report.out_of_order.push((path.clone(), off));
                                    return Ok(());
                                }
                                if rb.prev_msg > 0 && r.seq > rb.prev_msg + 1 {
                                    rb.gaps.push(SeqRange {
                                        first: rb.prev_msg + 1,
                                        last: r.seq - 1,
                                    });
                                }
                                rb.prev_msg = r.seq;
                                rb.max_seq = r.seq;
                                rb.max_ts = r.ts;
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
                                if !found {
                                    rb.tomb_orphans.insert(r.seq);
                                }
                                if r.seq > rb.max_seq {
                                    rb.max_seq = r.seq;
                                    rb.max_ts = r.ts;
                                }
                            }
                            Kind::Floor => {
                                rb.floor = rb.floor.max(r.seq);
                                if r.seq > rb.max_seq {
                                    rb.max_seq = r.seq;
                                    rb.max_ts = r.ts;
                                }
                            }
                            Kind::Truncate => {
                                let s = r.seq;
                                if s < rb.floor {
                                    // truncate refuses to go below first - 1 >= floor: this
                                    // record cannot have been written by the store
                                    report.out_of_order.push((path.clone(), off));
                                    return Ok(());
                                }
                                if entries.last().is_some_and(|e| e.seq > s) {
                                    return Err(Error::corrupt(
                                        path.clone(),
                                        off,
                                        "truncate record after the records it voids",
                                    ));
                                }
                                if rb.void_from.is_none() {
                                    rb.void_from = first_void(blocks, s);
                                    rb.truncate_block = pos;
                                }
                                rb.max_seq = s;
                                rb.max_ts = r.ts;
                                rb.prev_msg = rb.prev_msg.min(s);
                                rb.gaps.retain(|g| g.first <= s);
                                if let Some(g) = rb.gaps.last_mut() {
                                    g.last = g.last.min(s);
                                }
                                rb.tomb_orphans.retain(|&t| t <= s);
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
            if let ScanEnd::Stop { offset, reason } = end {
                let zeros = reason.starts_with("zeros");
                if strict && !zeros && i + 1 != n {
                    return Err(Error::corrupt(path, offset, reason));
                }
                ioe(file.set_len(offset), "set_len", &path)?;
                if !zeros {
                    self.report.cuts.push(Cut {
                        file: path.clone(),
                        offset,
                        dropped: flen - offset,
                        reason,
                    });
                }
                flen = offset;
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
        self.floor = rb.floor;
        self.last_seq = rb.max_seq;
        self.last_ts = rb.max_ts;
        self.msgs = 0;
        self.bytes = 0;
        for b in &mut self.blocks {
            let entries = b.entries.as_mut().expect("rebuild loads every block");
            for e in entries.iter_mut() {
                if e.seq <= rb.floor {
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
        self.report.lost = lost_ranges(rb.gaps, rb.floor, &rb.tomb_orphans);
        Ok(None)
    }

    /// Reads an unread block (known from `index.db`) and builds its entries. The check is
    /// inlined (every append asks, about the newest block); the load is not.
    #[inline]
    fn ensure_loaded(&mut self, pos: usize) -> Result<()> {
        if self.blocks[pos].entries.is_some() {
            return Ok(());
        }
        self.load_entries(pos)
    }

    #[inline(never)]
    fn load_entries(&mut self, pos: usize) -> Result<()> {
        let floor = self.floor;
        let Store {
            blocks,
            subj_names,
            subj_ids,
            subj,
            ..
        } = &mut *self;
        let b = &blocks[pos];
        let mut entries = Vec::with_capacity((b.live as usize).saturating_add(b.dmap.len()));
        let mut memo = SubjMemo::new();
        let mut bad: Option<(u64, String)> = None;
        let end = scan_block(
            &*b.file,
            &b.path,
            BLOCK_HEADER_LEN,
            b.len,
            |off, r| {
                if r.kind == Kind::Msg {
                    let deleted = r.flags & FLAG_ERASED != 0
                        || r.seq <= floor
                        || b.dmap.binary_search(&r.seq).is_ok();
                    entries.push(Entry {
                        seq: r.seq,
                        ts: r.ts,
                        off: off as u32,
                        len: r.len as u32,
                        subj: memo.intern(subj_names, subj_ids, subj, r.subject),
                        deleted,
                    });
                }
                Ok(())
            },
            |off, reason, _| {
                bad.get_or_insert((off, reason.to_string()));
                Ok(())
            },
        )?;
        if let ScanEnd::Stop { offset, reason } = end {
            bad.get_or_insert((offset, reason));
        }
        if let Some((off, reason)) = bad {
            return Err(Error::corrupt(b.path.clone(), off, reason));
        }
        let live = entries.iter().filter(|e| !e.deleted).count() as u64;
        if live != b.live
            || entries.first().map_or(0, |e| e.seq) != b.msg_first
            || entries.last().map_or(0, |e| e.seq) != b.msg_last
        {
            return Err(Error::corrupt(
                b.path.clone(),
                0,
                "block contents disagree with index.db",
            ));
        }
        let b = &mut blocks[pos];
        b.entries = Some(entries);
        b.dmap = Vec::new();
        Ok(())
    }

    /// Sets `first_seq`/`first_ts` to the first live message at or after `from`.
    fn set_first_from(&mut self, from: u64) -> Result<()> {
        if self.msgs == 0 {
            self.first_seq = self.last_seq + 1;
            self.first_ts = 0;
            return Ok(());
        }
        let mut pos = self.blocks.partition_point(|b| b.hi < from);
        while pos < self.blocks.len() {
            if self.blocks[pos].live > 0 {
                self.ensure_loaded(pos)?;
                let entries = self.blocks[pos].entries.as_ref().expect("loaded");
                if let Some(e) = entries.iter().find(|e| !e.deleted && e.seq >= from) {
                    self.first_seq = e.seq;
                    self.first_ts = e.ts;
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

    // ---------------------------------------------------------------- write path internals

    fn check_writable(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed);
        }
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    fn now(&self) -> i64 {
        self.clock.now_ns()
    }

    /// Whether the fsync at `site` is ablated (only ever true with the `ablation` feature and
    /// a config that asks for it).
    #[cfg(feature = "ablation")]
    fn skip(&self, site: &'static str, is_dir: bool) -> bool {
        debug_assert!(SYNC_SITES.contains(&site), "unnamed fsync site {site}");
        self.cfg.ablation.skips(site, is_dir)
    }

    #[cfg(not(feature = "ablation"))]
    fn skip(&self, _site: &'static str, _is_dir: bool) -> bool {
        false
    }

    /// Fsyncs a block's data. A failure poisons the store (fsyncgate: the kernel may have
    /// dropped the pages, and a retry would report success without writing them).
    #[track_caller]
    fn sync_file(&mut self, pos: usize, site: &'static str) -> Result<()> {
        if self.skip(site, false) {
            return Ok(());
        }
        let b = &mut self.blocks[pos];
        match b.file.sync_data() {
            Ok(()) => {
                b.dirty = false;
                Ok(())
            }
            Err(e) => {
                self.poisoned = true;
                Err(Error::io("sync_data", b.path.clone(), e))
            }
        }
    }

    /// Fsyncs a directory so its entries (creations, renames, removals) are durable.
    #[track_caller]
    fn sync_dir(&mut self, path: &str, site: &'static str) -> Result<()> {
        if self.skip(site, true) {
            return Ok(());
        }
        match self.fs.sync_dir(path) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.poisoned = true;
                Err(Error::io("sync_dir", path, e))
            }
        }
    }

    /// Writes the buffered bytes of the newest block to its file.
    #[track_caller]
    fn flush(&mut self) -> Result<()> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        let b = self.blocks.last_mut().expect("a buffer implies a block");
        // the newest block is never cached (`prepare_read`); if it ever were, drop the copy
        // rather than let it go stale
        b.cache = None;
        match b.file.write_all_at(&self.wbuf, b.len) {
            Ok(()) => {
                b.len += self.wbuf.len() as u64;
                self.wbuf.clear();
                Ok(())
            }
            Err(e) => {
                // The file's tail is now unknown: stop writing until reopened.
                self.poisoned = true;
                Err(Error::io("write", b.path.clone(), e))
            }
        }
    }

    /// The common case of [`Self::sync_inner`] under `SyncPolicy::Always`: the buffer holds
    /// the newest block's unwritten bytes and no other block needs a sync. Then the write and
    /// the fsync are one call ([`FsFile::write_all_at_sync_data`]: the same two operations,
    /// for one host crossing in the wasm guest instead of two). Returns false, having done
    /// nothing, in every other case (and when this fsync site is ablated), for the general path.
    #[track_caller]
    #[inline]
    fn write_and_sync_newest(&mut self, site: Site) -> Result<bool> {
        if self.wbuf.is_empty() || !self.group_inflight.is_empty() || self.skip(site.data, false) {
            return Ok(false);
        }
        let Some((newest, older)) = self.blocks.split_last_mut() else {
            return Ok(false);
        };
        if older.iter().any(|b| b.dirty) {
            return Ok(false);
        }
        // as `flush`: the newest block is never cached; never let a copy go stale
        newest.cache = None;
        let r = newest.file.write_all_at_sync_data(&self.wbuf, newest.len);
        match r {
            Ok(()) => {
                newest.len += self.wbuf.len() as u64;
                self.wbuf.clear();
                newest.dirty = false;
                Ok(true)
            }
            Err(WriteSyncError::Write(e)) => {
                // as `flush`: the file's tail is now unknown
                self.poisoned = true;
                Err(Error::io("write", newest.path.clone(), e))
            }
            Err(WriteSyncError::Sync(e)) => {
                // as `flush` then `sync_file`: written, and the sync failed (fsyncgate)
                newest.len += self.wbuf.len() as u64;
                self.wbuf.clear();
                self.poisoned = true;
                Err(Error::io("sync_data", newest.path.clone(), e))
            }
        }
    }

    /// Flushes and fsyncs every block with unsynced writes, then `msgs/` if its entries changed.
    #[track_caller]
    fn sync_inner(&mut self, site: Site) -> Result<()> {
        if !self.write_and_sync_newest(site)? {
            self.flush()?;
            for pos in 0..self.blocks.len() {
                if self.blocks[pos].dirty {
                    self.sync_file(pos, site.data)?;
                }
            }
        }
        if !self.group_inflight.is_empty() && !self.skip(site.data, false) {
            // a leader's fsync of these may still be running: do not rely on it
            for (f, path) in &self.group_inflight {
                if let Err(e) = f.sync_data() {
                    self.poisoned = true;
                    return Err(Error::io("sync_data", path.clone(), e));
                }
            }
        }
        if self.msgs_dir_dirty {
            self.sync_dir(MSGS_DIR, site.dir)?;
            self.msgs_dir_dirty = false;
        }
        self.note_synced();
        Ok(())
    }

    /// Remembers when the last sync ended, for `SyncPolicy::Interval`, its only reader. Under the
    /// other policies the clock is not read: in the wasm guest a reading is a host call, and two
    /// per durable append were ~15% of the guest's CPU time for one (perf, on tmpfs).
    #[inline]
    fn note_synced(&mut self) {
        if matches!(self.cfg.sync, SyncPolicy::Interval(_)) {
            self.last_sync_ns = self.now();
        }
    }

    /// First half of a group commit (under the store's lock): writes the buffer out, fsyncs
    /// `msgs/` if it has new names, and hands back the files to fsync and the last sequence
    /// they cover. The fsyncs themselves run without the lock (`SyncTicket::run`).
    pub(crate) fn begin_group_sync(&mut self) -> Result<SyncTicket<F::File>> {
        self.check_writable()?;
        self.flush()?;
        if self.msgs_dir_dirty {
            self.sync_dir(MSGS_DIR, S_APPEND.dir)?;
            self.msgs_dir_dirty = false;
        }
        let skip = self.skip(S_APPEND.data, false);
        // one leader at a time (SharedStore): the previous ticket has ended
        debug_assert!(self.group_inflight.is_empty());
        let mut files = Vec::new();
        for b in &mut self.blocks {
            if b.dirty {
                // cleared now: a write after this point marks it again for the next leader
                b.dirty = false;
                files.push((Arc::clone(&b.file), b.path.clone()));
            }
        }
        self.group_inflight.clone_from(&files);
        Ok(SyncTicket {
            files,
            upto: self.writes,
            skip,
        })
    }

    /// Second half of a group commit (under the lock again): a failed fsync poisons the store.
    pub(crate) fn end_group_sync(&mut self, result: &Result<()>) {
        self.group_inflight.clear();
        if result.is_err() {
            self.poisoned = true;
        } else {
            self.note_synced();
        }
    }

    /// Syncs if the policy asks for it now.
    #[track_caller]
    #[inline]
    fn maybe_sync(&mut self) -> Result<()> {
        match self.cfg.sync {
            SyncPolicy::Always => self.sync_inner(S_POLICY),
            SyncPolicy::Interval(d) => {
                let due = self.now().saturating_sub(self.last_sync_ns) as u128 >= d.as_nanos();
                if due {
                    self.sync_inner(S_POLICY)
                } else {
                    Ok(())
                }
            }
            SyncPolicy::Never => Ok(()),
        }
    }

    /// Starts block `last index + 1`. Its header goes into the write buffer with the first
    /// record; its name is made durable by the next sync (`msgs_dir_dirty`).
    fn roll(&mut self) -> Result<()> {
        self.flush()?;
        let index = self.blocks.last().map_or(1, |b| b.index + 1);
        let path = block_path(MSGS_DIR, index);
        let file = ioe(
            self.fs.open(
                &path,
                OpenOptions::new().read(true).write(true).create_new(true),
            ),
            "create",
            &path,
        )?;
        self.wbuf.extend_from_slice(&record::block_header(index));
        let hi = self.blocks.last().map_or(0, |b| b.hi);
        self.blocks.push(Block {
            index,
            path,
            file: Arc::new(file),
            len: 0,
            msg_first: 0,
            msg_last: 0,
            hi,
            max_seq: 0,
            live: 0,
            live_bytes: 0,
            last_crc: 0,
            entries: Some(Vec::new()),
            dmap: Vec::new(),
            dirty: true,
            cache: None,
            heat: 0,
            uncached_reads: 0,
        });
        self.msgs_dir_dirty = true;
        Ok(())
    }

    /// What writing record `seq` (checksum `crc`) into block `pos` changes in memory, whoever
    /// wrote it (`write_record_from`, or `append_in_run` for a run of records).
    #[inline(always)]
    fn note_written(&mut self, pos: usize, seq: u64, crc: u32) {
        self.writes += 1;
        let b = &mut self.blocks[pos];
        b.last_crc = crc;
        b.max_seq = b.max_seq.max(seq);
        b.dirty = true;
    }

    /// Indexes message `seq` (timestamp `ts`, subject `sid`), whose record of `len` bytes is at
    /// `off` in block `pos` (loaded): its entry and every counter an append moves, once the
    /// record is written (and, under `Always`, durable). For `append_inner` and `append_in_run`.
    #[inline(always)]
    fn index_msg(&mut self, pos: usize, seq: u64, ts: i64, off: u64, len: u64, sid: u32) {
        let block_size = self.cfg.block_size;
        let b = &mut self.blocks[pos];
        let entries = b.entries.as_mut().expect("the newest block is loaded");
        if entries.len() == entries.capacity() {
            reserve_by_density(entries, off + len, block_size.max(b.len));
        }
        entries.push(Entry {
            seq,
            ts,
            off: off as u32,
            len: len as u32,
            subj: sid,
            deleted: false,
        });
        if b.msg_first == 0 {
            b.msg_first = seq;
        }
        b.msg_last = seq;
        b.hi = seq;
        b.live += 1;
        b.live_bytes += len;
        self.msgs += 1;
        self.bytes += len;
        self.last_seq = seq;
        self.last_ts = ts;
        if self.msgs == 1 {
            self.first_seq = seq;
            self.first_ts = ts;
        }
        let s = &mut self.subj[sid as usize];
        if s.msgs == 0 {
            self.num_subjects += 1;
            s.first = seq;
        }
        s.msgs += 1;
        s.last = seq;
    }

    /// Encodes one record into the newest block (rolling over if it is full). Returns the
    /// block position, offset and length.
    #[allow(clippy::too_many_arguments)]
    fn write_record(
        &mut self,
        kind: Kind,
        seq: u64,
        ts: i64,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<(usize, u64, u32)> {
        self.write_record_from(kind, seq, ts, subject, headers, payload, None)
    }

    /// [`Self::write_record`]; `encoded` is the record already encoded (with its crc) by the
    /// caller of [`Store::append_encoded`], whose fields are these: its bytes are copied as they
    /// are.
    #[allow(clippy::too_many_arguments)]
    fn write_record_from(
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
            Some(b) => {
                let end = b.len + self.wbuf.len() as u64;
                end > BLOCK_HEADER_LEN && end + len > self.cfg.block_size
            }
        };
        if roll {
            self.roll()?;
        }
        let pos = self.blocks.len() - 1;
        // appends index into the newest block's entries: read it if open left it unread
        self.ensure_loaded(pos)?;
        let off = self.blocks[pos].len + self.wbuf.len() as u64;
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

    fn marker(&mut self, kind: Kind, seq: u64, ts: i64) -> Result<()> {
        self.write_record(kind, seq, ts, "", &[], &[]).map(|_| ())
    }

    /// Marks entry `i` of block `pos` deleted and updates every counter. `first_seq` is fixed
    /// by the caller (`set_first_from`) once a batch is done.
    fn mark_deleted(&mut self, pos: usize, i: usize) {
        let b = &mut self.blocks[pos];
        let e = &mut b.entries.as_mut().expect("loaded")[i];
        debug_assert!(!e.deleted);
        e.deleted = true;
        let (seq, len, sid) = (e.seq, e.len as u64, e.subj);
        b.live -= 1;
        b.live_bytes -= len;
        self.msgs -= 1;
        self.bytes -= len;
        let s = &mut self.subj[sid as usize];
        s.msgs -= 1;
        if s.msgs == 0 {
            s.first = 0;
            s.last = 0;
            self.num_subjects -= 1;
        } else {
            if s.first == seq {
                s.first = 0;
            }
            if s.last == seq {
                s.last = 0;
            }
        }
    }

    /// Finds the live message `seq`: (block position, entry index).
    fn find(&mut self, seq: u64) -> Result<Option<(usize, usize)>> {
        if seq == 0 || seq < self.first_seq || seq > self.last_seq {
            return Ok(None);
        }
        let pos = self.blocks.partition_point(|b| b.hi < seq);
        if pos >= self.blocks.len() || self.blocks[pos].msg_first > seq {
            return Ok(None);
        }
        self.ensure_loaded(pos)?;
        let entries = self.blocks[pos].entries.as_ref().expect("loaded");
        // Sequences in a block are consecutive unless something left a gap: try the direct
        // slot first (one memory access), search only if it is not there.
        let found = match entries.first() {
            Some(f) if seq >= f.seq => {
                let g = (seq - f.seq) as usize;
                if entries.get(g).is_some_and(|e| e.seq == seq) {
                    Ok(g)
                } else {
                    entries.binary_search_by_key(&seq, |e| e.seq)
                }
            }
            _ => Err(0),
        };
        Ok(match found {
            Ok(i) if !entries[i].deleted => Some((pos, i)),
            _ => None,
        })
    }

    /// Changes `Config::block_cache` on an open store; cached blocks beyond the new limit are
    /// dropped at once, coldest first.
    pub fn set_block_cache(&mut self, bytes: u64) {
        self.cfg.block_cache = bytes;
        let mut held = self.cache_held();
        while held > bytes {
            match self.evict_coldest(|_| true) {
                Some(freed) => held -= freed,
                None => break,
            }
        }
    }

    /// Bytes held by block caches.
    pub(crate) fn cache_held(&self) -> u64 {
        self.blocks
            .iter()
            .filter_map(|b| b.cache.as_ref().map(|c| c.len() as u64))
            .sum()
    }

    /// Drops the cached copy of the coldest cached block if `evict(its heat)` agrees; the
    /// bytes freed, or `None` (nothing cached, or refused).
    fn evict_coldest(&mut self, evict: impl FnOnce(u64) -> bool) -> Option<u64> {
        let v = self
            .blocks
            .iter_mut()
            .filter(|b| b.cache.is_some())
            .min_by_key(|b| b.heat)?;
        if !evict(v.heat) {
            return None;
        }
        v.uncached_reads = 0;
        v.cache.take().map(|c| c.len() as u64)
    }

    /// Decides whether a read of block `pos` should first cache the whole block, and does it.
    ///
    /// Why: a random get by `pread` costs a syscall, a page-cache lookup and a copy (~1 µs
    /// here, 60% of a get); from memory it is a copy. Only sealed blocks are cached (the
    /// newest still grows), within `Config::block_cache` bytes. Loading a block costs about as
    /// much as one `pread` per 4 KiB of it, so a block is admitted only after that many preads
    /// of it (ski rental). When the cache is full a block displaces the coldest cached one
    /// only if it is clearly hotter (twice the reads, counts halved every 64 reads per block):
    /// reads spread evenly over a stream larger than the cache then settle on a fixed cached
    /// set instead of reloading 8 MiB blocks over and over (measured: LRU with that churn made
    /// random gets 1.7x slower than no cache at all). A failed load is the read's error (the
    /// fault sweep holds every failed I/O to surfacing somewhere; a block that cannot be read
    /// whole is worth knowing about), and the block is not cached.
    fn prepare_read(&mut self, pos: usize) -> Result<()> {
        let limit = self.cfg.block_cache;
        if limit == 0 || pos + 1 >= self.blocks.len() {
            return Ok(());
        }
        self.reads_since_decay += 1;
        if self.reads_since_decay > 64 * self.blocks.len() as u64 {
            self.reads_since_decay = 0;
            for b in &mut self.blocks {
                b.heat /= 2;
            }
        }
        let b = &mut self.blocks[pos];
        b.heat += 1;
        if b.cache.is_some() {
            return Ok(());
        }
        b.uncached_reads += 1;
        if b.uncached_reads < (b.len / 4096).max(1) || b.len > limit {
            return Ok(());
        }
        let (need, heat) = (b.len, b.heat);
        let mut held = self.cache_held();
        while held + need > limit {
            match self.evict_coldest(|cold| cold.saturating_mul(2) < heat) {
                Some(freed) => held -= freed,
                // not clearly hotter than what is cached: stay with preads
                None => {
                    self.blocks[pos].uncached_reads = 0;
                    return Ok(());
                }
            }
        }
        let b = &mut self.blocks[pos];
        b.uncached_reads = 0;
        let mut bytes = vec![0u8; need as usize].into_boxed_slice();
        ioe(b.file.read_exact_at(&mut bytes, 0), "read", &b.path)?;
        b.cache = Some(bytes);
        Ok(())
    }

    /// Whether any block cache holds `needle` (tests: an erased payload must not).
    #[cfg(test)]
    pub(crate) fn cache_contains(&self, needle: &[u8]) -> bool {
        self.blocks
            .iter()
            .filter_map(|b| b.cache.as_deref())
            .any(|c| c.windows(needle.len()).any(|w| w == needle))
    }

    /// Reads and checks the record of entry `i` in block `pos` (checked after the read: crc,
    /// kind and sequence), from the write buffer, the block's cache or the file.
    fn read_entry(&self, pos: usize, i: usize) -> Result<StoredMsg> {
        let b = &self.blocks[pos];
        let e = b.entries.as_ref().expect("loaded")[i];
        let off = e.off as u64;
        let len = e.len as usize;
        let mut owned = Vec::new();
        let bytes: &[u8] = if off >= b.len {
            let at = (off - b.len) as usize;
            &self.wbuf[at..at + len]
        } else if let Some(c) = b.cache.as_deref().filter(|c| off as usize + len <= c.len()) {
            &c[off as usize..off as usize + len]
        } else {
            owned.resize(len, 0);
            ioe(b.file.read_exact_at(&mut owned, off), "read", &b.path)?;
            &owned
        };
        match decode(bytes) {
            Decoded::Record(r) if r.kind == Kind::Msg && r.seq == e.seq => Ok(StoredMsg {
                seq: r.seq,
                ts: r.ts,
                subject: r.subject.to_string(),
                headers: r.headers.to_vec(),
                payload: r.payload.to_vec(),
            }),
            Decoded::Record(_) => Err(Error::corrupt(b.path.clone(), off, "wrong record here")),
            Decoded::Bad { reason, .. } => Err(Error::corrupt(b.path.clone(), off, reason)),
            _ => Err(Error::corrupt(b.path.clone(), off, "record cut short")),
        }
    }

    /// Removes leading blocks with no live message (never the newest). Before each removal
    /// everything is fsynced (the tombstones and floors that emptied it, and the previous
    /// removal): a removed block must never be the only record of the last sequence, and a
    /// block whose removal is undone by a crash must come back with the tombstones that
    /// delete its messages. If the blocks going away hold the last sequence, a floor record
    /// for it is written first (nothing live is at or below it then).
    fn drop_empty_front_blocks(&mut self) -> Result<()> {
        let n = self
            .blocks
            .iter()
            .take(self.blocks.len().saturating_sub(1))
            .take_while(|b| b.live == 0)
            .count();
        if n == 0 {
            return Ok(());
        }
        let kept_max = self.blocks[n..]
            .iter()
            .map(|b| b.max_seq)
            .max()
            .unwrap_or(0);
        if kept_max < self.last_seq {
            debug_assert_eq!(self.msgs, 0, "live messages above the dropped blocks");
            let (l, ts) = (self.last_seq, self.last_ts);
            self.marker(Kind::Floor, l, ts)?;
            self.floor = self.floor.max(l);
        }
        for _ in 0..n {
            self.sync_inner(S_DROP)?;
            let path = self.blocks[0].path.clone();
            if let Err(e) = self.fs.remove_file(&path) {
                self.poisoned = true;
                return Err(Error::io("remove_file", path, e));
            }
            self.blocks.remove(0);
            self.msgs_dir_dirty = true;
        }
        Ok(())
    }

    // ---------------------------------------------------------------- limits

    fn subject_first(&mut self, sid: u32) -> Result<Option<u64>> {
        let s = self.subj[sid as usize];
        if s.msgs == 0 {
            return Ok(None);
        }
        if s.first != 0 {
            return Ok(Some(s.first));
        }
        let start = self.blocks.partition_point(|b| b.hi < self.first_seq);
        for pos in start..self.blocks.len() {
            if self.blocks[pos].live == 0 {
                continue;
            }
            self.ensure_loaded(pos)?;
            let entries = self.blocks[pos].entries.as_ref().expect("loaded");
            if let Some(e) = entries.iter().find(|e| !e.deleted && e.subj == sid) {
                self.subj[sid as usize].first = e.seq;
                return Ok(Some(e.seq));
            }
        }
        Err(Error::corrupt(
            MSGS_DIR,
            0,
            "subject count without messages",
        ))
    }

    fn subject_last(&mut self, sid: u32) -> Result<Option<u64>> {
        let s = self.subj[sid as usize];
        if s.msgs == 0 {
            return Ok(None);
        }
        if s.last != 0 {
            return Ok(Some(s.last));
        }
        for pos in (0..self.blocks.len()).rev() {
            if self.blocks[pos].live == 0 {
                continue;
            }
            self.ensure_loaded(pos)?;
            let entries = self.blocks[pos].entries.as_ref().expect("loaded");
            if let Some(e) = entries.iter().rev().find(|e| !e.deleted && e.subj == sid) {
                self.subj[sid as usize].last = e.seq;
                return Ok(Some(e.seq));
            }
        }
        Err(Error::corrupt(
            MSGS_DIR,
            0,
            "subject count without messages",
        ))
    }

    /// Deletes every live message with a sequence `<= f` (in memory; the caller writes the
    /// floor record). Returns how many.
    fn apply_floor(&mut self, f: u64) -> Result<u64> {
        let mut n = 0;
        for pos in 0..self.blocks.len() {
            let b = &self.blocks[pos];
            if b.msg_first > f || b.msg_first == 0 {
                if b.msg_first > f {
                    break;
                }
                continue;
            }
            if b.live == 0 {
                continue;
            }
            self.ensure_loaded(pos)?;
            let idx: Vec<usize> = self.blocks[pos]
                .entries
                .as_ref()
                .expect("loaded")
                .iter()
                .enumerate()
                .filter(|(_, e)| !e.deleted && e.seq <= f)
                .map(|(i, _)| i)
                .collect();
            for i in idx {
                self.mark_deleted(pos, i);
                n += 1;
            }
        }
        self.floor = self.floor.max(f);
        Ok(n)
    }

    /// Removes what the limits no longer allow. `sid`: only that subject's per-subject limit
    /// (after an append); `None`: every subject (on open).
    fn enforce_limits(&mut self, sid: Option<u32>) -> Result<()> {
        let l = self.cfg.limits;
        if l.max_msgs_per_subject > 0 {
            let sids: Vec<u32> = match sid {
                Some(s) => vec![s],
                None => (0..self.subj.len() as u32).collect(),
            };
            for s in sids {
                while self.subj[s as usize].msgs > l.max_msgs_per_subject {
                    let Some(seq) = self.subject_first(s)? else {
                        break;
                    };
                    let (pos, i) = self.find(seq)?.ok_or(Error::corrupt(
                        MSGS_DIR,
                        0,
                        "subject's first message missing",
                    ))?;
                    let ts = self.now();
                    self.marker(Kind::Tombstone, seq, ts)?;
                    self.mark_deleted(pos, i);
                    if seq == self.first_seq {
                        self.set_first_from(seq + 1)?;
                    }
                }
            }
        }
        let mut new_floor = 0;
        let over = |s: &Self| {
            (l.max_msgs > 0 && s.msgs > l.max_msgs) || (l.max_bytes > 0 && s.bytes > l.max_bytes)
        };
        while self.msgs > 0 && over(self) {
            new_floor = self.first_seq;
            self.apply_floor(new_floor)?;
            self.set_first_from(new_floor + 1)?;
        }
        if let Some(age) = l.max_age {
            let cutoff = self
                .now()
                .saturating_sub(age.as_nanos().min(i64::MAX as u128) as i64);
            while self.msgs > 0 && self.first_ts < cutoff {
                new_floor = self.first_seq;
                self.apply_floor(new_floor)?;
                self.set_first_from(new_floor + 1)?;
            }
        }
        if new_floor > 0 {
            let ts = self.now();
            self.marker(Kind::Floor, new_floor, ts)?;
            self.drop_empty_front_blocks()?;
        }
        Ok(())
    }

    fn enforce_limits_all(&mut self) -> Result<()> {
        if self.cfg.limits != crate::config::Limits::default() {
            self.enforce_limits(None)?;
        }
        Ok(())
    }

    // ---------------------------------------------------------------- public API

    /// Appends a message; returns its sequence (`last_seq + 1`). Under `Always` the message
    /// is durable when this returns.
    pub fn append(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> Result<u64> {
        self.append_inner(Subj::Name(subject), headers, payload, true, None)
    }

    /// `append` without its `Always` fsync: the message is written (buffered) and indexed, and
    /// becomes durable with the next sync. The group commit of `SharedStore` calls this, then
    /// shares one fsync among every writer that got here before it.
    /// Returns the sequence and the write number that must be durable before it is
    /// acknowledged.
    pub(crate) fn append_buffered(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<(u64, u64)> {
        let seq = self.append_inner(Subj::Name(subject), headers, payload, false, None)?;
        Ok((seq, self.writes))
    }

    /// Appends a message that the caller has already encoded as a record ([`record::encode`]:
    /// kind message, no flags) for the sequence and timestamp it predicted: `last_seq + 1`, and
    /// `max(clock reading at the time of its append call, last_ts)`. The store checks the
    /// message exactly as [`Store::append`] does (same errors, same order, no side effect on
    /// error), refuses a record whose sequence is not `last_seq + 1` or whose timestamp is
    /// below `last_ts` (`InvalidArgument`, nothing written), takes the timestamp from the
    /// record instead of reading its clock, and copies the bytes into the block as they are.
    ///
    /// **The crc is trusted, not recomputed**: that is the point (the wasm host encodes the
    /// guest's appends natively, where crc32 has SIMD, and sends the records in batches). A
    /// wrong crc harms only the caller's own message: every read and every recovery scan
    /// verifies it, so it comes back as `Corrupt`, never as a wrong message.
    // Inlined into the wasm guest's batch loop, its hot caller: called out of line (it has two
    // callers there) it cost ~60 more wasm instructions per append (callgrind).
    #[inline(always)]
    pub fn append_encoded(&mut self, rec: &[u8]) -> Result<u64> {
        let r = match record::decode_raw_trusting_crc(rec) {
            Ok(r) if r.len == rec.len() && r.kind == Kind::Msg && r.flags == 0 => r,
            _ => {
                return Err(Error::InvalidArgument(
                    "append_encoded: not one whole message record".into(),
                ))
            }
        };
        let enc = Encoded {
            bytes: rec,
            seq: r.seq,
            ts: r.ts,
            crc: r.crc,
        };
        // Subject bytes equal to a name the store holds are valid UTF-8 and a valid subject:
        // neither check runs (the UTF-8 check was 5% of the guest's share of an append).
        let subject = match self.subj_memo.hit(&self.subj_names, r.subject) {
            Some(id) => Subj::Known(id),
            None => match std::str::from_utf8(r.subject) {
                Ok(s) => Subj::Name(s),
                Err(_) => {
                    return Err(Error::InvalidArgument(
                        "append_encoded: not one whole message record".into(),
                    ))
                }
            },
        };
        self.append_inner(subject, r.headers, r.payload, true, Some(enc))
    }

    /// [`Store::append_encoded`] for whole message records back to back in `records` (each
    /// starts with its length field), in order: the same checks, results and bytes as one call
    /// per record. Stops at the first record refused (or whose length field runs past the
    /// buffer: `InvalidArgument`, nothing of it written) and returns how many it applied and
    /// that error. The wasm guest applies its host's batched appends through this.
    ///
    /// Under `SyncPolicy::Never` without limits a record whose subject the store holds, that
    /// fits the newest block and does not fill the write buffer, is applied in a short path
    /// (`append_in_run`) that makes `append_encoded`'s checks and updates and leaves the
    /// record's bytes where they are; consecutive such records are copied into the write
    /// buffer in one piece. Every other record, and every check that fails, goes through
    /// `append_encoded` itself, so errors are its own. In the guest an unsynced append took
    /// 12% fewer instructions, host and wasm together (callgrind: one `memory.copy` per run of
    /// records instead of one per record, no per-record call chain).
    pub fn append_encoded_run(&mut self, records: &[u8]) -> (usize, Result<()>) {
        let short = self.cfg.sync == SyncPolicy::Never
            && self.cfg.limits == crate::config::Limits::default();
        let (mut applied, mut at, mut seg) = (0usize, 0usize, 0usize);
        let result = loop {
            let Some(rest) = records.get(at..).filter(|r| !r.is_empty()) else {
                break Ok(());
            };
            let len = rest
                .get(..4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
            let Some(rec) = rest.get(..len).filter(|_| len > 0) else {
                break Err(Error::InvalidArgument(
                    "append_encoded_run: a record's length field runs past the buffer".into(),
                ));
            };
            if short && self.append_in_run(rec, at - seg) {
                applied += 1;
                at += len;
                continue;
            }
            // the records before this one are in the block, as `append_encoded` expects
            self.wbuf.extend_from_slice(&records[seg..at]);
            seg = at;
            if let Err(e) = self.append_encoded(rec) {
                break Err(e);
            }
            applied += 1;
            at += len;
            seg = at;
        };
        self.wbuf.extend_from_slice(&records[seg..at]);
        (applied, result)
    }

    /// The short path of [`Store::append_encoded_run`]: applies `rec` as `append_encoded`
    /// would, when nothing can fail — the store open and writable, the record a whole message
    /// with the next sequence and a timestamp not below the last, its subject one the memo
    /// holds (a valid name), its sizes within the limits, room for it in the newest block
    /// (loaded) and in the write buffer, where `pending` bytes of the run wait to be copied
    /// before it. Returns false, having changed nothing, otherwise: the caller then makes the
    /// ordinary call, which gives the same outcome and error as it always does.
    #[inline(always)]
    fn append_in_run(&mut self, rec: &[u8], pending: usize) -> bool {
        if self.closed || self.poisoned || self.last_seq >= record::MAX_SEQ {
            return false;
        }
        let r = match record::decode_raw_trusting_crc(rec) {
            Ok(r) if r.len == rec.len() && r.kind == Kind::Msg && r.flags == 0 => r,
            _ => return false,
        };
        let seq = self.last_seq + 1;
        if r.seq != seq
            || r.ts < self.last_ts
            || r.payload.len() > self.cfg.max_payload as usize
            || r.headers.len() > self.cfg.max_headers as usize
            || self.wbuf.len() + pending + rec.len() >= self.cfg.write_buffer
        {
            return false;
        }
        let Some(sid) = self.subj_memo.hit(&self.subj_names, r.subject) else {
            return false;
        };
        let Some(b) = self.blocks.last() else {
            return false;
        };
        let off = b.len + (self.wbuf.len() + pending) as u64;
        let len = rec.len() as u64;
        // as `write_record_from`: a roll is the ordinary path's
        if (off > BLOCK_HEADER_LEN && off + len > self.cfg.block_size) || b.entries.is_none() {
            return false;
        }
        // Nothing can fail from here: `write_record_from`'s and `append_inner`'s updates.
        let pos = self.blocks.len() - 1;
        self.note_written(pos, seq, r.crc);
        self.index_msg(pos, seq, r.ts, off, len, sid);
        true
    }

    /// Marks the store poisoned: it refuses every write (`Error::Poisoned`) until reopened, as
    /// after a failed write or fsync. For an embedder that acknowledged writes before the store
    /// applied them (the wasm host's batching of unsynced appends) and saw one of them fail:
    /// the sequences it handed out after the failed one were never assigned, and must not be
    /// assigned to other messages by this instance.
    pub fn poison(&mut self) {
        self.poisoned = true;
    }

    fn append_inner(
        &mut self,
        subj: Subj<'_>,
        headers: &[u8],
        payload: &[u8],
        sync_always: bool,
        encoded: Option<Encoded<'_>>,
    ) -> Result<u64> {
        self.check_writable()?;
        // a subject already in the index was validated when it was first stored
        let (subject, known) = match subj {
            Subj::Name(s) => (
                s,
                self.subj_memo.lookup(&self.subj_names, &self.subj_ids, s),
            ),
            // Only with the record encoded: the name is not needed to write it.
            Subj::Known(id) => {
                debug_assert!(encoded.is_some());
                ("", Some(id))
            }
        };
        if known.is_none() {
            subject::validate_subject(subject)?;
        }
        if payload.len() > self.cfg.max_payload as usize {
            return Err(Error::TooLarge {
                what: "payload",
                len: payload.len() as u64,
                max: self.cfg.max_payload as u64,
            });
        }
        if headers.len() > self.cfg.max_headers as usize {
            return Err(Error::TooLarge {
                what: "headers",
                len: headers.len() as u64,
                max: self.cfg.max_headers as u64,
            });
        }
        let len = match encoded {
            Some(e) => e.bytes.len() as u64,
            None => encoded_len(subject.len(), headers.len(), payload.len()) as u64,
        };
        let l = self.cfg.limits;
        if l.discard == Discard::New {
            if l.max_msgs > 0 && self.msgs >= l.max_msgs {
                return Err(Error::LimitExceeded { limit: "max_msgs" });
            }
            if l.max_bytes > 0 && self.bytes + len > l.max_bytes {
                return Err(Error::LimitExceeded { limit: "max_bytes" });
            }
        }
        if self.last_seq >= record::MAX_SEQ {
            return Err(Error::LimitExceeded {
                limit: "sequence space",
            });
        }
        let seq = self.last_seq + 1;
        let (ts, pre) = match encoded {
            None => (self.now().max(self.last_ts), None),
            Some(e) => {
                if e.seq != seq || e.ts < self.last_ts {
                    return Err(Error::InvalidArgument(format!(
                        "append_encoded: record for seq {} ts {}, the store is at seq {} ts {}",
                        e.seq, e.ts, self.last_seq, self.last_ts
                    )));
                }
                (e.ts, Some((e.bytes, e.crc)))
            }
        };
        let (pos, off, len) =
            self.write_record_from(Kind::Msg, seq, ts, subject, headers, payload, pre)?;
        let always = sync_always && self.cfg.sync == SyncPolicy::Always;
        if always {
            // acknowledged only once durable
            self.sync_inner(S_APPEND)?;
        }
        let sid = match known {
            Some(id) => id,
            None => self.intern(subject),
        };
        self.index_msg(pos, seq, ts, off, len as u64, sid);
        if l != crate::config::Limits::default() {
            self.enforce_limits(Some(sid))?;
            if always {
                // whatever the limits wrote; the same named site, so that removing it removes
                // it. (Without limits nothing was written since the sync above.)
                self.sync_inner(S_APPEND)?;
            }
        }
        if matches!(self.cfg.sync, SyncPolicy::Interval(_)) {
            // (not a call under `Never`: ~60 wasm instructions per append for an `Ok(())`)
            self.maybe_sync()?;
        }
        Ok(seq)
    }

    /// The message with sequence `seq`.
    pub fn get(&mut self, seq: u64) -> Result<StoredMsg> {
        self.check_open()?;
        match self.find(seq)? {
            Some((pos, i)) => {
                self.prepare_read(pos)?;
                self.read_entry(pos, i)
            }
            None => Err(Error::NotFound { seq }),
        }
    }

    /// The newest message stored under `subject` (a literal subject, no wildcards).
    pub fn last_for_subject(&mut self, subject: &str) -> Result<Option<StoredMsg>> {
        self.check_open()?;
        subject::validate_subject(subject)?;
        let Some(&sid) = self.subj_ids.get(subject) else {
            return Ok(None);
        };
        match self.subject_last(sid)? {
            Some(seq) => self.get(seq).map(Some),
            None => Ok(None),
        }
    }

    /// The first message at or after `from_seq` whose subject matches `filter` (`*` matches
    /// one token, `>` the rest).
    pub fn next_matching(&mut self, filter: &str, from_seq: u64) -> Result<Option<StoredMsg>> {
        self.check_open()?;
        subject::validate_filter(filter)?;
        let from = from_seq.max(self.first_seq).max(1);
        let literal = subject::is_literal(filter).then(|| self.subj_ids.get(filter).copied());
        if literal == Some(None) {
            return Ok(None);
        }
        // 0 unknown, 1 matches, 2 does not
        let mut cache: Vec<u8> = Vec::new();
        let mut pos = self.blocks.partition_point(|b| b.hi < from);
        while pos < self.blocks.len() {
            if self.blocks[pos].live > 0 {
                self.ensure_loaded(pos)?;
                let entries = self.blocks[pos].entries.as_ref().expect("loaded");
                let start = entries.partition_point(|e| e.seq < from);
                for (i, e) in entries.iter().enumerate().skip(start) {
                    if e.deleted {
                        continue;
                    }
                    let hit = match literal {
                        Some(Some(sid)) => e.subj == sid,
                        _ => {
                            let k = e.subj as usize;
                            if cache.len() <= k {
                                cache.resize(self.subj_names.len(), 0);
                            }
                            if cache[k] == 0 {
                                cache[k] = if subject::matches(filter, &self.subj_names[k]) {
                                    1
                                } else {
                                    2
                                };
                            }
                            cache[k] == 1
                        }
                    };
                    if hit {
                        self.prepare_read(pos)?;
                        return self.read_entry(pos, i).map(Some);
                    }
                }
            }
            pos += 1;
        }
        Ok(None)
    }

    /// Message counts per subject for the subjects matching `filter`.
    pub fn subjects_state(&self, filter: &str) -> Result<BTreeMap<String, u64>> {
        self.check_open()?;
        subject::validate_filter(filter)?;
        Ok(self
            .subj
            .iter()
            .enumerate()
            .filter(|(i, s)| s.msgs > 0 && subject::matches(filter, &self.subj_names[*i]))
            .map(|(i, s)| (self.subj_names[i].clone(), s.msgs))
            .collect())
    }

    /// The stream's counters.
    pub fn state(&self) -> StreamState {
        StreamState {
            msgs: self.msgs,
            bytes: self.bytes,
            // NATS reports a stream that never had a sequence as first=0, last=0
            first_seq: if self.last_seq == 0 {
                0
            } else {
                self.first_seq
            },
            first_ts: self.first_ts,
            last_seq: self.last_seq,
            last_ts: self.last_ts,
            num_deleted: if self.msgs == 0 {
                0
            } else {
                (self.last_seq - self.first_seq + 1) - self.msgs
            },
            num_subjects: self.num_subjects,
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Deletes message `seq` by writing a tombstone (durable per the sync policy).
    pub fn delete(&mut self, seq: u64) -> Result<()> {
        self.check_writable()?;
        let (pos, i) = self.find(seq)?.ok_or(Error::NotFound { seq })?;
        let ts = self.now();
        self.marker(Kind::Tombstone, seq, ts)?;
        self.maybe_sync()?;
        self.mark_deleted(pos, i);
        if seq == self.first_seq {
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
        let Some((pos, i)) = self.find(seq)? else {
            // Already removed, perhaps by an unsynced delete: an erase promises that the
            // message never comes back, so make the removal durable before saying so.
            self.sync_inner(S_ERASE)?;
            return Err(Error::NotFound { seq });
        };
        let e = self.blocks[pos].entries.as_ref().expect("loaded")[i];
        let old = self.read_entry(pos, i)?;
        let mut erased = Vec::with_capacity(e.len as usize);
        let crc = encode(
            &mut erased,
            Kind::Msg,
            FLAG_ERASED,
            seq,
            old.ts,
            &vec![0u8; old.subject.len()],
            &vec![0u8; old.headers.len()],
            &vec![0u8; old.payload.len()],
        );
        // check before the write: same frame, so every other record stays where it is
        assert_eq!(
            erased.len(),
            e.len as usize,
            "erase keeps the record's length"
        );
        let ts = self.now();
        self.marker(Kind::Tombstone, seq, ts)?;
        // The tombstone is durable before the overwrite starts: a torn overwrite fails its crc
        // and recovery skips the record, so without a durable tombstone for it a torn erase of
        // the last message would lose the last sequence (found by the fault sweep with records
        // larger than a sector).
        self.sync_inner(S_ERASE)?;
        let b = &mut self.blocks[pos];
        // the cached copy first: an erased payload must not live on in memory either
        if let Some(c) = b.cache.as_deref_mut() {
            let at = e.off as usize;
            if at + erased.len() <= c.len() {
                c[at..at + erased.len()].copy_from_slice(&erased);
            } else {
                b.cache = None;
            }
        }
        if let Err(err) = b.file.write_all_at(&erased, e.off as u64) {
            self.poisoned = true;
            return Err(Error::io("write", b.path.clone(), err));
        }
        if e.off as u64 + e.len as u64 == b.len {
            b.last_crc = crc;
        }
        b.dirty = true;
        self.mark_deleted(pos, i);
        if seq == self.first_seq {
            self.set_first_from(seq + 1)?;
        }
        self.maybe_sync()?;
        self.drop_empty_front_blocks()
    }

    /// Removes every message. Crash-atomic, and the sequence is kept in every sync policy:
    /// once this returns, any crash recovers `first = L + 1, last = L` (L the last sequence
    /// before the purge); a crash during it recovers the old state or the purged one.
    ///
    /// Write path (ARCHITECTURE.md, "Purge"), three fsyncs whatever the stream's size: a new
    /// block holding one floor record for L is written into `purge.new/` and fsynced;
    /// `purge.new/` is fsynced; `msgs -> purge.old`, `purge.new -> msgs`, and one root fsync
    /// makes it all durable; then `purge.old/` is removed. Recovery completes the purge if it
    /// finds `purge.new/` with its floor block, else rolls it back. Returns the number of
    /// messages removed.
    pub fn purge(&mut self) -> Result<u64> {
        self.check_writable()?;
        let purged = self.msgs;
        let (l, ts) = (self.last_seq, self.last_ts);
        // 0. leftovers of an earlier purge go first. Their removal needs no fsync of its own:
        //    if it is lost, recovery finds purge.old beside msgs (or an uncommitted purge.new)
        //    and removes it again; the root fsync of step 4 makes it durable anyway.
        let names = self.root_names()?;
        for d in [PURGE_NEW, PURGE_OLD] {
            if names.contains_key(d) {
                ioe(self.fs.remove_dir_all(d), "remove_dir_all", d)?;
            }
        }
        // 1. the new block: header + floor(L)
        ioe(self.fs.create_dir(PURGE_NEW), "create_dir", PURGE_NEW)?;
        let index = self.blocks.last().map_or(1, |b| b.index + 1);
        let new_path = block_path(PURGE_NEW, index);
        let file = ioe(
            self.fs.open(
                &new_path,
                OpenOptions::new().read(true).write(true).create_new(true),
            ),
            "create",
            &new_path,
        )?;
        let mut buf = record::block_header(index).to_vec();
        let crc = encode(&mut buf, Kind::Floor, 0, l, ts, b"", b"", b"");
        if let Err(e) = file.write_all_at(&buf, 0) {
            self.poisoned = true;
            return Err(Error::io("write", new_path, e));
        }
        // 2. fsync the tombstone: without it a crash after the swap finds an empty block and
        //    the stream comes back as 0,0 (the NATS bug).
        let tombstone_synced = !self.skip("purge.tombstone", false);
        if tombstone_synced {
            if let Err(e) = file.sync_data() {
                self.poisoned = true;
                return Err(Error::io("sync_data", new_path, e));
            }
        }
        // 3. make the block's name in purge.new durable: from now on, wherever purge.new is
        //    found (as purge.new, or already renamed to msgs), it holds the floor record.
        self.sync_dir(PURGE_NEW, "purge.new-dir")?;
        // 4. the swap, then one root fsync that makes purge.new, both renames (and the removal
        //    of leftovers) durable together. A crash before it leaves some subset of them, and
        //    recovery completes the purge if purge.new is there with its floor block, else
        //    rolls it back (ARCHITECTURE.md lists every case).
        for (from, to) in [(MSGS_DIR, PURGE_OLD), (PURGE_NEW, MSGS_DIR)] {
            if let Err(e) = self.fs.rename(from, to) {
                self.poisoned = true;
                return Err(Error::io("rename", from, e));
            }
        }
        self.sync_dir("", "purge.swap-dir")?;
        // 5. memory: one block, nothing live, floor L
        self.wbuf.clear();
        self.retired = std::mem::take(&mut self.blocks);
        self.blocks = vec![Block {
            index,
            path: block_path(MSGS_DIR, index),
            file: Arc::new(file),
            len: buf.len() as u64,
            msg_first: 0,
            msg_last: 0,
            hi: 0,
            max_seq: l,
            live: 0,
            live_bytes: 0,
            last_crc: crc,
            entries: Some(Vec::new()),
            dmap: Vec::new(),
            dirty: !tombstone_synced,
            cache: None,
            heat: 0,
            uncached_reads: 0,
        }];
        self.msgs = 0;
        self.bytes = 0;
        self.floor = l;
        self.first_seq = l + 1;
        self.first_ts = 0;
        self.num_subjects = 0;
        for s in &mut self.subj {
            *s = SubjInfo::default();
        }
        self.msgs_dir_dirty = false;
        // 6. the old blocks go only now that the purge is durable. A failure here leaves
        //    purge.old behind, which the next open or purge removes: nothing is lost.
        self.purge_old_pending = true;
        Ok(purged)
    }

    /// Releases what a purge left for later: the old blocks' memory and `purge.old/` on disk
    /// (no fsync: recovery removes a leftover again). Called by `tick` and `close`.
    pub fn cleanup(&mut self) {
        self.retired.clear();
        if std::mem::take(&mut self.purge_old_pending) {
            let _ = self.fs.remove_dir_all(PURGE_OLD);
        }
    }

    /// Removes the messages matching `filter` with a sequence below `up_to_seq` (0: no
    /// bound), keeping the newest `keep` of each subject. Tombstones, fsynced before return.
    ///
    /// The promise, in every sync policy: once this returns, no crash brings back a message
    /// that matched `filter`, was below `up_to_seq` and was not among the `keep` newest live
    /// ones of its subject — including messages that earlier unsynced deletes had removed
    /// (they are not counted in the returned number, but their removal is made durable
    /// here too, as is everything written before the call).
    pub fn purge_ex(&mut self, filter: &str, up_to_seq: u64, keep: u64) -> Result<u64> {
        self.check_writable()?;
        let filter = if filter.is_empty() { ">" } else { filter };
        subject::validate_filter(filter)?;
        if filter == ">" && up_to_seq == 0 && keep == 0 {
            return self.purge();
        }
        let mut cands: Vec<(usize, usize, u32)> = Vec::new();
        let mut cache: Vec<u8> = vec![0; self.subj_names.len()];
        for pos in 0..self.blocks.len() {
            if self.blocks[pos].live == 0 {
                continue;
            }
            if up_to_seq > 0 && self.blocks[pos].msg_first >= up_to_seq {
                break;
            }
            self.ensure_loaded(pos)?;
            cache.resize(self.subj_names.len(), 0);
            for (i, e) in self.blocks[pos]
                .entries
                .as_ref()
                .expect("loaded")
                .iter()
                .enumerate()
            {
                if e.deleted || (up_to_seq > 0 && e.seq >= up_to_seq) {
                    continue;
                }
                let k = e.subj as usize;
                if cache[k] == 0 {
                    cache[k] = if subject::matches(filter, &self.subj_names[k]) {
                        1
                    } else {
                        2
                    };
                }
                if cache[k] == 1 {
                    cands.push((pos, i, e.subj));
                }
            }
        }
        if keep > 0 {
            let mut per: HashMap<u32, u64> = HashMap::new();
            for c in &cands {
                *per.entry(c.2).or_default() += 1;
            }
            let mut seen: HashMap<u32, u64> = HashMap::new();
            cands.retain(|c| {
                let n = seen.entry(c.2).or_default();
                *n += 1;
                *n + keep <= per[&c.2]
            });
        }
        if cands.is_empty() {
            // Nothing left to remove in memory, but earlier unsynced deletes may be what
            // removed the matching messages: after `purge_ex` returns none of them may come
            // back, so make them durable (the rule for structural operations).
            self.sync_inner(S_PURGE_EX)?;
            return Ok(0);
        }
        let ts = self.now();
        for &(pos, i, _) in &cands {
            let seq = self.blocks[pos].entries.as_ref().expect("loaded")[i].seq;
            self.marker(Kind::Tombstone, seq, ts)?;
            self.mark_deleted(pos, i);
        }
        self.sync_inner(S_PURGE_EX)?;
        let first = self.first_seq;
        self.set_first_from(first)?;
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
        if seq == 0 || seq - 1 > record::MAX_SEQ {
            return Err(Error::InvalidArgument(format!("compact({seq})")));
        }
        let f = seq - 1;
        if f < self.first_seq && f <= self.last_seq {
            // Memory already shows every sequence below `seq` gone, but possibly only through
            // removals that were never synced (a delete under `Never`): a crash would bring
            // them back, and with them a last sequence below `f`. Nothing new to write; make
            // what is there durable (ARCHITECTURE.md, "The rule for structural operations").
            #[cfg(feature = "ablation")]
            if self.cfg.ablation == crate::Ablation::CompactEarlyReturn {
                return Ok(0);
            }
            self.sync_inner(S_COMPACT)?;
            return Ok(0);
        }
        let raises_last = f > self.last_seq;
        let ts = if raises_last {
            self.now().max(self.last_ts)
        } else {
            self.last_ts
        };
        self.marker(Kind::Floor, f, ts)?;
        self.sync_inner(S_COMPACT)?;
        let n = self.apply_floor(f)?;
        if raises_last {
            self.last_seq = f;
            self.last_ts = ts;
        }
        self.set_first_from(f + 1)?;
        self.drop_empty_front_blocks()?;
        Ok(n)
    }

    /// Removes every message with a sequence above `seq`; `last_seq` becomes `seq` (this is
    /// the one operation that lowers it, on purpose). Refused below `first_seq - 1`. At or
    /// above `last_seq` nothing is removed, but everything written so far is fsynced, so that
    /// in both cases a crash after return recovers `last_seq = min(seq, last_seq)`.
    ///
    /// Crash-atomic: a new block with the tombstones that must outlive the cut and one
    /// truncate record is fsynced first (the commit point); only then are the later blocks
    /// removed and the cut block shortened. Recovery finishes an interrupted cleanup.
    pub fn truncate(&mut self, seq: u64) -> Result<u64> {
        self.check_writable()?;
        if seq >= self.last_seq {
            // Nothing above `seq` to remove. The promise still holds as for a real cut: once
            // this returns, a crash recovers `last_seq = min(seq, last)` with the removals
            // made so far, so make what memory shows durable (the structural-operation rule).
            self.sync_inner(S_TRUNCATE_COMMIT)?;
            return Ok(0);
        }
        // Below first - 1 there is nothing left to remove, and lowering `last` there would
        // hand out sequences again that were already used and removed.
        if seq + 1 < self.first_seq {
            return Err(Error::InvalidArgument(format!(
                "truncate({seq}) below the first sequence {}: use purge or compact",
                self.first_seq
            )));
        }
        self.flush()?;
        // where the first message record above seq is
        let cut_pos = self.blocks.partition_point(|b| b.hi <= seq);
        let mut cut_off = None;
        if cut_pos < self.blocks.len() {
            self.ensure_loaded(cut_pos)?;
            let entries = self.blocks[cut_pos].entries.as_ref().expect("loaded");
            cut_off = entries.iter().find(|e| e.seq > seq).map(|e| e.off as u64);
        }
        // markers at or after the cut that must survive it
        let mut keep_tombs = Vec::new();
        let mut keep_floor = 0u64;
        if let Some(off) = cut_off {
            for pos in cut_pos..self.blocks.len() {
                let b = &self.blocks[pos];
                let start = if pos == cut_pos {
                    off
                } else {
                    BLOCK_HEADER_LEN
                };
                let end = scan_block(
                    &*b.file,
                    &b.path,
                    start,
                    b.len,
                    |_, r| {
                        match r.kind {
                            Kind::Tombstone if r.seq <= seq => keep_tombs.push(r.seq),
                            Kind::Floor => keep_floor = keep_floor.max(r.seq),
                            _ => {}
                        }
                        Ok(())
                    },
                    |off, reason, _| Err(Error::corrupt(b.path.clone(), off, reason)),
                )?;
                if let ScanEnd::Stop { offset, reason } = end {
                    if !reason.starts_with("zeros") {
                        return Err(Error::corrupt(b.path.clone(), offset, reason));
                    }
                }
            }
        }
        let ts = match self.find(seq)? {
            Some((p, i)) => self.blocks[p].entries.as_ref().expect("loaded")[i].ts,
            None => self.now(),
        };
        // commit: new block with the preserved markers and the truncate record, fsynced
        // together with its directory entry
        self.roll()?;
        for t in keep_tombs {
            self.marker(Kind::Tombstone, t, ts)?;
        }
        if keep_floor > 0 {
            self.marker(Kind::Floor, keep_floor, ts)?;
        }
        self.marker(Kind::Truncate, seq, ts)?;
        self.sync_inner(S_TRUNCATE_COMMIT)?;
        // memory: everything above seq goes
        let mut n = 0;
        for pos in cut_pos..self.blocks.len() {
            if self.blocks[pos].live == 0 {
                continue;
            }
            self.ensure_loaded(pos)?;
            let idx: Vec<usize> = self.blocks[pos]
                .entries
                .as_ref()
                .expect("loaded")
                .iter()
                .enumerate()
                .filter(|(_, e)| !e.deleted && e.seq > seq)
                .map(|(i, _)| i)
                .collect();
            for i in idx {
                self.mark_deleted(pos, i);
                n += 1;
            }
        }
        // disk: remove the blocks between the cut and the new block, then shorten the cut one
        if let Some(off) = cut_off {
            let new_pos = self.blocks.len() - 1;
            for pos in (cut_pos + 1..new_pos).rev() {
                let path = self.blocks[pos].path.clone();
                if let Err(e) = self.fs.remove_file(&path) {
                    self.poisoned = true;
                    return Err(Error::io("remove_file", path, e));
                }
                self.blocks.remove(pos);
            }
            let b = &mut self.blocks[cut_pos];
            b.cache = None;
            if let Err(e) = b.file.set_len(off) {
                self.poisoned = true;
                return Err(Error::io("set_len", b.path.clone(), e));
            }
            b.len = off;
            let entries = b.entries.as_mut().expect("loaded");
            entries.retain(|e| e.seq <= seq);
            b.msg_first = entries.first().map_or(0, |e| e.seq);
            b.msg_last = entries.last().map_or(0, |e| e.seq);
            b.max_seq = b.max_seq.min(seq);
            b.dirty = true;
            let mut hi = 0;
            for b in &mut self.blocks {
                hi = hi.max(b.msg_last);
                b.hi = hi;
            }
            // No fsync: the truncate record already voids what the cut removes, and recovery
            // redoes an unfinished cut. The next sync makes it durable.
            self.msgs_dir_dirty = true;
            // the cut block's last crc is no longer known without a read: re-read it
            let b = &mut self.blocks[cut_pos];
            if b.len > BLOCK_HEADER_LEN {
                let mut c = [0u8; 4];
                ioe(b.file.read_exact_at(&mut c, b.len - 4), "read", &b.path)?;
                b.last_crc = u32::from_le_bytes(c);
            }
        }
        self.last_seq = seq;
        self.last_ts = ts;
        for s in &mut self.subj {
            if s.last > seq {
                s.last = 0;
            }
        }
        let first = self.first_seq.min(seq + 1);
        self.set_first_from(first)?;
        Ok(n)
    }

    /// Makes everything written so far durable (files, then directories).
    pub fn sync(&mut self) -> Result<()> {
        self.check_writable()?;
        self.sync_inner(S_SYNC)
    }

    /// Runs time-driven work: the `max_age` limit and the `Interval` sync. Call it from a
    /// timer; store-core has no threads.
    pub fn tick(&mut self) -> Result<()> {
        self.check_writable()?;
        self.cleanup();
        if self.cfg.limits.max_age.is_some() {
            self.enforce_limits(None)?;
        }
        self.maybe_sync()
    }

    /// Syncs, then writes `index.db` (temp file, rename) so the next open need not read the
    /// blocks. No fsync of its own: the index is an accelerator; one lost or torn in a crash
    /// fails validation and open rebuilds from the blocks.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.check_writable()?;
        self.cleanup();
        self.sync_inner(S_SYNC)?;
        let snap = self.snapshot();
        let bytes = snap.encode();
        let f = ioe(
            self.fs.open(
                INDEX_TMP,
                OpenOptions::new().write(true).create(true).truncate(true),
            ),
            "create",
            INDEX_TMP,
        )?;
        ioe(f.write_all_at(&bytes, 0), "write", INDEX_TMP)?;
        drop(f);
        ioe(self.fs.rename(INDEX_TMP, INDEX_FILE), "rename", INDEX_TMP)
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            first_seq: self.first_seq,
            first_ts: self.first_ts,
            last_seq: self.last_seq,
            last_ts: self.last_ts,
            floor: self.floor,
            msgs: self.msgs,
            bytes: self.bytes,
            blocks: self
                .blocks
                .iter()
                .map(|b| BlockSummary {
                    index: b.index,
                    len: b.len,
                    msg_first: b.msg_first,
                    msg_last: b.msg_last,
                    max_seq: b.max_seq,
                    live: b.live,
                    live_bytes: b.live_bytes,
                    last_crc: b.last_crc,
                    deleted: match &b.entries {
                        Some(e) => e.iter().filter(|e| e.deleted).map(|e| e.seq).collect(),
                        None => b.dmap.clone(),
                    },
                })
                .collect(),
            subjects: self
                .subj
                .iter()
                .enumerate()
                .filter(|(_, s)| s.msgs > 0)
                .map(|(i, s)| SubjectSummary {
                    name: self.subj_names[i].clone(),
                    msgs: s.msgs,
                    first: s.first,
                    last: s.last,
                })
                .collect(),
        }
    }

    /// Syncs, writes `index.db` (see [`Store::checkpoint`]), and closes. Dropping a store without `close` writes out its
    /// buffer (no fsync).
    pub fn close(mut self) -> Result<()> {
        let r = self.checkpoint();
        self.closed = true;
        r
    }

    /// Whether an earlier I/O failure poisoned the store.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }
}

impl<F: Fs> Drop for Store<F> {
    fn drop(&mut self) {
        if !self.closed && !self.poisoned {
            let _ = self.flush();
        }
    }
}

/// Reads `index.db` and checks it against the blocks on disk: the same block files, each of
/// the recorded length and ending in the recorded crc, and consistent totals. `Ok(None)`: no
/// index. An `Err` says why it cannot be used. Returns the snapshot and each block opened
/// (read-write if `write`).
pub(crate) fn load_index<F: Fs>(
    fs: &F,
    indexes: &[u64],
    write: bool,
) -> Result<Option<(Snapshot, Vec<F::File>)>> {
    let f = match fs.open(INDEX_FILE, OpenOptions::read_only()) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", INDEX_FILE, e)),
    };
    let len = ioe(f.len(), "len", INDEX_FILE)?;
    if len > 1 << 30 {
        return Err(Error::corrupt(INDEX_FILE, 0, "index larger than 1 GiB"));
    }
    let mut b = vec![0u8; len as usize];
    ioe(f.read_exact_at(&mut b, 0), "read", INDEX_FILE)?;
    let snap = Snapshot::decode(INDEX_FILE, &b)?;
    let listed: Vec<u64> = snap.blocks.iter().map(|b| b.index).collect();
    if listed != indexes {
        return Err(Error::corrupt(INDEX_FILE, 0, "stale: block files differ"));
    }
    let (mut live, mut bytes, mut hi) = (0u64, 0u64, 0u64);
    let mut files = Vec::with_capacity(snap.blocks.len());
    for bs in &snap.blocks {
        let path = block_path(MSGS_DIR, bs.index);
        let file = ioe(
            fs.open(&path, OpenOptions::new().read(true).write(write)),
            "open",
            &path,
        )?;
        let flen = ioe(file.len(), "len", &path)?;
        if flen != bs.len || flen < BLOCK_HEADER_LEN {
            return Err(Error::corrupt(path, flen, "stale: block length differs"));
        }
        // the header too: a block the index vouches for must still be a block
        let mut h = [0u8; BLOCK_HEADER_LEN as usize];
        ioe(file.read_exact_at(&mut h, 0), "read", &path)?;
        if check_block_header(&path, &h, bs.index)? != Header::Valid {
            return Err(Error::corrupt(path, 0, "block header blank"));
        }
        if flen > BLOCK_HEADER_LEN {
            let mut c = [0u8; 4];
            ioe(file.read_exact_at(&mut c, flen - 4), "read", &path)?;
            if u32::from_le_bytes(c) != bs.last_crc {
                return Err(Error::corrupt(path, flen - 4, "stale: last record differs"));
            }
        }
        if bs.msg_first > bs.msg_last || bs.live > bs.msg_last.saturating_sub(bs.msg_first) + 1 {
            return Err(Error::corrupt(INDEX_FILE, 0, "block summary inconsistent"));
        }
        live += bs.live;
        bytes += bs.live_bytes;
        hi = hi.max(bs.msg_last);
        files.push(file);
    }
    let subj_msgs: u64 = snap.subjects.iter().map(|s| s.msgs).sum();
    if live != snap.msgs || bytes != snap.bytes || subj_msgs != snap.msgs {
        return Err(Error::corrupt(INDEX_FILE, 0, "totals inconsistent"));
    }
    // Cross-check what a crc cannot: an index.db forged (or written by a buggy build) with a
    // valid crc must still describe a possible stream.
    let first_live = snap
        .blocks
        .iter()
        .find(|b| b.live > 0)
        .map_or(0, |b| b.msg_first);
    let seqs_ok = snap.last_seq >= hi
        && snap.last_seq <= record::MAX_SEQ
        && snap.floor <= snap.last_seq
        && snap.first_seq > snap.floor
        && snap.first_seq <= snap.last_seq + 1
        && (snap.msgs == 0 || (snap.first_seq >= first_live && snap.first_seq <= hi))
        && snap.subjects.iter().all(|s| {
            // 0 is "not known" for a subject's first or last (found on first use, as after a
            // truncate that removed a subject's newest messages): only two known ones order
            s.msgs > 0
                && (s.first == 0 || s.last == 0 || s.first <= s.last)
                && (s.first == 0 || s.first >= snap.first_seq)
                && s.last <= snap.last_seq
        });
    if !seqs_ok {
        return Err(Error::corrupt(INDEX_FILE, 0, "sequences inconsistent"));
    }
    Ok(Some((snap, files)))
}

/// The sequences in `gaps` (between message records) that neither the floor nor a tombstone
/// accounts for: they had records, and the records are gone.
pub(crate) fn lost_ranges(
    gaps: Vec<SeqRange>,
    floor: u64,
    explained: &BTreeSet<u64>,
) -> Vec<SeqRange> {
    // O(gaps + tombstones), never O(sequences): a forged record at 2^62 must not make recovery
    // walk 2^62 numbers.
    let mut out = Vec::new();
    for g in gaps {
        let mut lo = g.first.max(floor.saturating_add(1));
        if lo > g.last {
            continue;
        }
        for &t in explained.range(lo..=g.last) {
            if t > lo {
                out.push(SeqRange {
                    first: lo,
                    last: t - 1,
                });
            }
            lo = t + 1;
        }
        if lo <= g.last {
            out.push(SeqRange {
                first: lo,
                last: g.last,
            });
        }
    }
    out
}

/// The fsyncs a group-commit leader runs without holding the store: every block with writes
/// not yet synced when the ticket was taken.
pub(crate) struct SyncTicket<H> {
    files: Vec<(Arc<H>, String)>,
    /// Every write numbered up to this one (`Store::writes`) is durable once `run` returns Ok.
    pub(crate) upto: u64,
    skip: bool,
}

impl<H: FsFile> SyncTicket<H> {
    /// Runs the fsyncs.
    pub(crate) fn run(&self) -> Result<()> {
        if self.skip {
            return Ok(());
        }
        for (f, path) in &self.files {
            f.sync_data()
                .map_err(|e| Error::io("sync_data", path.clone(), e))?;
        }
        Ok(())
    }
}

/// A two-way set-associative memo in front of the subject map, for the block scans of open
/// and for appends: most records repeat a recent subject, and a hit costs one multiply and a
/// short compare where the map costs a full hash, a probe and a `memcmp` call (the map lookup
/// was 22% of a rebuild; in the wasm guest `memcmp` is a byte loop). Two ways per set because
/// direct-mapped, two subjects of a round-robin that share a slot evict each other on every
/// record (4 of the bench's 64 subjects did: 6% of appends missed). A miss falls through to
/// the map: the memo only ever holds ids the map gave for the current name table (which only
/// grows; the store's memo is reset with it in `rebuild`), and a hit is checked against the
/// name (its first 16 bytes here, the rest against the interned string), so it cannot change
/// an answer.
struct SubjMemo([MemoSlot; 2 * MEMO_SETS]);

/// Sets of [`SubjMemo`] (a power of two: the set is the top bits of a multiplicative hash).
const MEMO_SETS: usize = 256;

/// A memo slot: the id, and the name's length and first 16 bytes (zero-padded), so that a hit
/// on a short subject is decided without touching the interned string.
#[derive(Clone, Copy)]
struct MemoSlot {
    id: u32,
    len: usize,
    head: [u64; 2],
}

impl SubjMemo {
    fn new() -> Self {
        SubjMemo(
            [MemoSlot {
                id: u32::MAX,
                len: usize::MAX,
                head: [0; 2],
            }; 2 * MEMO_SETS],
        )
    }

    /// The first 16 bytes of `name` as two little-endian words, zero-padded. Built without a
    /// variable-length copy: in the wasm guest that is a `memory.copy` libcall per subject.
    #[inline]
    fn head(name: &[u8]) -> [u64; 2] {
        if let Some(h) = name.get(..16) {
            return [
                u64::from_le_bytes(h[..8].try_into().expect("8")),
                u64::from_le_bytes(h[8..].try_into().expect("8")),
            ];
        }
        let mut w = [0u64; 2];
        for (i, &c) in name.iter().enumerate() {
            w[i / 8] |= u64::from(c) << (8 * (i % 8));
        }
        w
    }

    /// The set for `name`, its head, and the id there if it holds `name`.
    #[inline]
    fn probe(&self, names: &[String], b: &[u8]) -> (usize, [u64; 2], Option<u32>) {
        let head = Self::head(b);
        let k = ((head[0] ^ head[1].rotate_left(29) ^ b.len() as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            >> (64 - MEMO_SETS.trailing_zeros())) as usize;
        // The heads are compared as words, the rest of a long name by `same_bytes`: a slice
        // `==` is a call to `memcmp`, which in the wasm guest is a byte loop (16% of the
        // guest's rebuild for 17-byte subjects).
        let holds = |m: &MemoSlot| {
            m.len == b.len()
                && ((m.head[0] ^ head[0]) | (m.head[1] ^ head[1])) == 0
                && (b.len() <= 16
                    || names
                        .get(m.id as usize)
                        .is_some_and(|n| same_bytes(&n.as_bytes()[16.min(n.len())..], &b[16..])))
        };
        let hit = self.0[2 * k..2 * k + 2]
            .iter()
            .find(|m| holds(m))
            .map(|m| m.id);
        (k, head, hit)
    }

    /// Remembers `id` for the name of length `len` and head `head` in set `k`: the newest
    /// in way 0, the one it displaces in way 1 (the older of way 1 is forgotten).
    #[inline]
    fn remember(&mut self, k: usize, id: u32, len: usize, head: [u64; 2]) {
        self.0[2 * k + 1] = self.0[2 * k];
        self.0[2 * k] = MemoSlot { id, len, head };
    }

    /// The id of `name`, interning it if new.
    #[inline]
    fn intern(
        &mut self,
        names: &mut Vec<String>,
        ids: &mut SubjMap,
        subj: &mut Vec<SubjInfo>,
        name: &str,
    ) -> u32 {
        let (k, head, hit) = self.probe(names, name.as_bytes());
        if let Some(id) = hit {
            return id;
        }
        let id = intern_in(names, ids, subj, name);
        self.remember(k, id, name.len(), head);
        id
    }

    /// The id of the subject whose name is `name`, if the memo holds it (no map lookup).
    #[inline]
    fn hit(&self, names: &[String], name: &[u8]) -> Option<u32> {
        self.probe(names, name).2
    }

    /// The id of `name` if the store holds it (memo, then map; a map hit is remembered).
    #[inline]
    fn lookup(&mut self, names: &[String], ids: &SubjMap, name: &str) -> Option<u32> {
        let (k, head, hit) = self.probe(names, name.as_bytes());
        if hit.is_some() {
            return hit;
        }
        let id = *ids.get(name)?;
        self.remember(k, id, name.len(), head);
        Some(id)
    }
}

/// `a == b`, eight bytes at a time and without a call to `memcmp` (a byte loop in wasm).
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut wa, mut wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let mut diff = 0u64;
    for (x, y) in (&mut wa).zip(&mut wb) {
        diff |= u64::from_le_bytes(x.try_into().expect("8 bytes"))
            ^ u64::from_le_bytes(y.try_into().expect("8 bytes"));
    }
    for (x, y) in wa.remainder().iter().zip(wb.remainder()) {
        diff |= u64::from(x ^ y);
    }
    diff == 0
}

fn intern_in(
    names: &mut Vec<String>,
    ids: &mut SubjMap,
    subj: &mut Vec<SubjInfo>,
    name: &str,
) -> u32 {
    if let Some(&id) = ids.get(name) {
        return id;
    }
    let id = names.len() as u32;
    names.push(name.to_string());
    ids.insert(name.to_string(), id);
    subj.push(SubjInfo::default());
    id
}

/// Marks message `seq` deleted in fully loaded blocks (rebuild). Whether it was found.
fn mark_in<H>(blocks: &mut [Block<H>], seq: u64) -> bool {
    let pos = blocks.partition_point(|b| b.hi < seq);
    if let Some(b) = blocks.get_mut(pos) {
        if let Some(entries) = b.entries.as_mut() {
            if let Ok(i) = entries.binary_search_by_key(&seq, |e| e.seq) {
                entries[i].deleted = true;
                return true;
            }
        }
    }
    false
}

/// The first message record above `s` in fully loaded blocks: (block position, offset).
fn first_void<H>(blocks: &[Block<H>], s: u64) -> Option<(usize, u64)> {
    let pos = blocks.partition_point(|b| b.hi <= s);
    let b = blocks.get(pos)?;
    let e = b.entries.as_ref()?.iter().find(|e| e.seq > s)?;
    Some((pos, e.off as u64))
}

fn all_zero<H: FsFile>(file: &H, path: &str, len: u64) -> Result<bool> {
    let mut chunk = vec![0u8; 64 << 10];
    let mut p = 0;
    while p < len {
        let n = ((len - p) as usize).min(chunk.len());
        ioe(file.read_exact_at(&mut chunk[..n], p), "read", path)?;
        if chunk[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        p += n as u64;
    }
    Ok(true)
}

#[cfg(test)]
mod memo_tests {
    use super::{same_bytes, SubjMap, SubjMemo, MEMO_SETS};

    #[test]
    fn memo_answers_as_the_map_does() {
        // Names of every length up to 40, sharing long prefixes, in more sets than there are:
        // many collide. Interned through the memo twice over, then looked up.
        let names: Vec<String> = (0..3 * MEMO_SETS)
            .map(|i| {
                let base = format!("orders.eu.{i:06}.tail-for-length");
                base[..1 + i % base.len()].to_string() + &"x".repeat(i % 7)
            })
            .collect();
        let (mut table, mut ids, mut subj) = (Vec::new(), SubjMap::default(), Vec::new());
        let mut memo = SubjMemo::new();
        let mut got = Vec::new();
        for _ in 0..2 {
            for n in &names {
                got.push(memo.intern(&mut table, &mut ids, &mut subj, n));
            }
        }
        for (i, n) in names.iter().chain(&names).enumerate() {
            assert_eq!(got[i], ids[n.as_str()], "{n:?}");
            assert_eq!(table[got[i] as usize], *n);
            assert_eq!(memo.lookup(&table, &ids, n), Some(ids[n.as_str()]), "{n:?}");
        }
        assert_eq!(memo.lookup(&table, &ids, "not.interned"), None);
        // Two names of one set, alternating: both stay remembered (two ways).
        let first = names[0].as_str();
        let (k, _, _) = memo.probe(&table, first.as_bytes());
        let other = names[1..]
            .iter()
            .find(|n| memo.probe(&table, n.as_bytes()).0 == k)
            .expect("3x more names than sets: some share a set");
        memo.lookup(&table, &ids, first);
        memo.lookup(&table, &ids, other);
        for _ in 0..3 {
            assert_eq!(memo.hit(&table, first.as_bytes()), Some(ids[first]));
            assert_eq!(
                memo.hit(&table, other.as_bytes()),
                Some(ids[other.as_str()])
            );
        }
    }

    #[test]
    fn agrees_with_slice_eq() {
        // every length up to 40 (whole words and remainders), equal and differing at each byte
        let a: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37) ^ 0x55).collect();
        for n in 0..=a.len() {
            let x = &a[..n];
            assert!(same_bytes(x, &a[..n]), "len {n}");
            for i in 0..n {
                let mut y = x.to_vec();
                y[i] ^= 0x80;
                assert!(!same_bytes(x, &y), "len {n}, differing at {i}");
            }
            if n > 0 {
                assert!(!same_bytes(x, &a[..n - 1]), "len {n} against {}", n - 1);
            }
        }
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
