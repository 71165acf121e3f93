//! Reading a block file record by record: the scan, its chunked form, and resync over damage.

// Parses bytes read from a disk: no index that a damaged file could put out of range.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use super::io_at;
use crate::error::{Error, Result};
use crate::fast;
use crate::fs::FsFile;
use crate::record::{self, decode, Decoded, RawRecord, HARD_MAX_RECORD, REC_OVERHEAD};
use std::io;
use std::ops::ControlFlow;

pub(super) const READ_CHUNK: usize = 1 << 20;

/// How much a scan reads at a time: `first` bytes, then twice as much at each read, up to
/// `max`. A block that holds little before its preallocated zeros (the live block) is then
/// checked through small reads into a small buffer, not one read of the whole block: in a
/// wasm guest every byte read crosses into its memory, and a MiB of buffer is that much guest
/// memory the runtime must reset after the run. A full block costs a few more reads (64 KiB,
/// 128 KiB, ... before the first whole chunk).
#[derive(Clone, Copy, Debug)]
pub(super) struct Reads {
    pub(super) first: usize,
    pub(super) max: usize,
}

impl Reads {
    /// Up to `max` bytes a read, starting at 64 KiB (or `max` if smaller).
    pub(super) fn upto(max: usize) -> Reads {
        Reads {
            first: max.min(64 << 10),
            max,
        }
    }
}

/// What scanning a block found at its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ScanEnd {
    /// Every record up to the end checked out.
    Clean,
    /// From `offset` on the file holds only zeros: space that was never written (the tail of
    /// an append the power cut, preallocated space). Nothing is lost there.
    Zeros { offset: u64 },
    /// Stopped at `offset` by damage that no valid record after it frames: everything from
    /// there is unusable.
    Damaged { offset: u64, reason: String },
    /// The visitor asked to stop at the record at `offset` (it had found what it looked for);
    /// nothing was checked beyond it.
    Stopped { offset: u64 },
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
    visit: impl FnMut(u64, &record::Record<'_>) -> Result<ControlFlow<()>>,
    skipped: impl FnMut(u64, &str, Option<u64>) -> Result<()>,
) -> Result<ScanEnd> {
    scan_raw(
        file,
        path,
        start,
        len,
        Reads::upto(READ_CHUNK),
        &mut Vec::new(),
        checked(visit),
        skipped,
    )
}

/// What [`scan_raw`] has read: `buf[..valid]` holds the file's bytes from `off`;
/// with batched checksums, `crcs` those of the records framed from `buf[0]`, `pre_i` the next
/// one to use and `frame_at` where its record starts in `buf`.
pub(super) struct Window {
    pub(super) valid: usize,
    pub(super) off: u64,
    pub(super) crcs: Vec<u32>,
    pub(super) pre_i: usize,
    pub(super) frame_at: usize,
}

/// A [`scan_raw`] visitor made of one that reads checked records: every subject's UTF-8 is
/// checked before `visit` sees the record (one that is not UTF-8 is refused).
pub(crate) fn checked(
    mut visit: impl FnMut(u64, &record::Record<'_>) -> Result<ControlFlow<()>>,
) -> impl FnMut(u64, &RawRecord<'_>) -> Result<Step> {
    move |off, r| match r.checked() {
        Ok(r) => Ok(match visit(off, &r)? {
            ControlFlow::Continue(()) => Step::Next,
            ControlFlow::Break(()) => Step::Stop,
        }),
        Err(reason) => Ok(Step::Refuse(reason)),
    }
}

/// What a [`scan_raw`] visitor makes of a record.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// Go on to the next record.
    Next,
    /// Stop here ([`ScanEnd::Stopped`]).
    Stop,
    /// The record is not valid after all (its subject is not UTF-8): skipped or ending the
    /// scan exactly as a record that failed its decode's checks.
    Refuse(&'static str),
}

/// `scan_block` with the read sizes given (small when the caller stops early), whose visitor
/// gets each record with its subject unchecked, and checks it itself ([`checked`]) or knows
/// its bytes (a rebuild's memo of the names it interned): a subject a scan has seen is not
/// checked again.
///
/// One loop over the window of bytes read, longer than 70 lines on purpose: every arm (a
/// record, a short read, zeros, damage and resync) moves the same window and offset, and
/// recovery's speed is this loop's (a split into functions passing the window state back
/// and forth is what the rebuild figures would pay for).
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan_raw<H: FsFile>(
    file: &H,
    path: &str,
    start: u64,
    len: u64,
    reads: Reads,
    buf: &mut Vec<u8>,
    mut visit: impl FnMut(u64, &RawRecord<'_>) -> Result<Step>,
    mut skipped: impl FnMut(u64, &str, Option<u64>) -> Result<()>,
) -> Result<ScanEnd> {
    // buf[..w.valid] holds file bytes from w.off. Every read starts at `pos`, a record
    // boundary: the few bytes of a record cut by the previous read are read again rather
    // than copied down, so that the read can land in a buffer of its own (the wasm guest's:
    // `FastPaths::read_vec_at`) and be framed from its first byte. The storage is reused (never
    // re-zeroed), also across calls when the caller passes the same buffer (rebuild: one per
    // open, not a fresh 1 MiB of page faults per block).
    //
    // With a file that batches checksums (`FastPaths::batch_crc32`: the wasm guest's), each read
    // comes with the crcs of the whole records it holds (`FastPaths::read_framed_at`), framed
    // from its first byte by their length fields. The scan steps through records by the same
    // length fields, so the i-th record it meets from the start of a read is the i-th frame:
    // `frame_at` follows where that is (no second framing pass in the guest). A record that
    // is not where the next frame starts (after a resync jumped inside the buffer), or beyond
    // the crcs given (a host that returned fewer), is checked the ordinary way.
    let batch = fast::batch_crc32(file);
    let mut w = Window {
        valid: 0,
        off: start,
        crcs: Vec::new(),
        pre_i: 0,
        frame_at: 0,
    };
    let mut pos = start;
    let mut step = reads.first.clamp(1, reads.max.max(1));
    // `want` bytes from pos, at least a step, at most what the block has
    let mut fill = |buf: &mut Vec<u8>, w: &mut Window, pos: u64, want: usize| -> Result<()> {
        let n = (want.max(step) as u64).min(len - pos) as usize;
        step = step.saturating_mul(2).min(reads.max);
        if batch {
            w.crcs.clear();
            io_at(
                fast::read_framed_at(file, buf, n, pos, &mut w.crcs),
                "read",
                path,
            )?;
            w.pre_i = 0;
            w.frame_at = 0;
        } else {
            io_at(fast::read_vec_at(file, buf, n, pos), "read", path)?;
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
        // `fill` read from `pos` or before it, `valid` bytes that it checked: the `else` is a
        // broken `Fs` (or a slip here), refused as `fill` refuses a short read
        let Some(window) = buf.get(at..valid) else {
            return Err(Error::io(
                "read",
                path,
                io::Error::new(io::ErrorKind::InvalidData, "scan window out of range"),
            ));
        };
        let avail = window.len();
        let frame_crc = match batch && at == w.frame_at {
            true => w.crcs.get(w.pre_i).copied(),
            false => None,
        };
        let framed = frame_crc.is_some();
        // The record here spans the frame whose crc was used: the next frame follows it.
        let next_frame = |w: &mut Window, len: usize| {
            if framed {
                w.frame_at += len;
                w.pre_i += 1;
            }
        };
        let not_record = match record::decode_unchecked_subject(window, frame_crc) {
            Ok(r) => match visit(pos, &r)? {
                Step::Next => {
                    next_frame(&mut w, r.len);
                    pos += r.len as u64;
                    continue;
                }
                Step::Stop => return Ok(ScanEnd::Stopped { offset: pos }),
                Step::Refuse(reason) => Decoded::Bad {
                    reason,
                    framed: Some(r.len),
                },
            },
            Err(d) => d,
        };
        match not_record {
            // (the decode's `Err` is never a record)
            Decoded::Record(_) => {
                return Err(Error::io(
                    "read",
                    path,
                    io::Error::new(io::ErrorKind::InvalidData, "scan decode out of order"),
                ))
            }
            Decoded::Short(n) => {
                if pos + n as u64 > len {
                    // a torn tail, or a damaged length field with valid records after it
                    if let Some(next) = resync(file, path, pos + 1, len)? {
                        skipped(pos, "record length points past the end", None)?;
                        pos = next;
                        continue;
                    }
                    return Ok(ScanEnd::Damaged {
                        offset: pos,
                        reason: "record cut short (torn tail)".into(),
                    });
                }
                if avail >= n {
                    // decode only says Short when fewer than n bytes are given: never loop
                    return Ok(ScanEnd::Damaged {
                        offset: pos,
                        reason: "undecodable record".into(),
                    });
                }
                fill(buf, &mut w, pos, n)?;
            }
            Decoded::End => {
                // zeros: the end of written data, if nothing but zeros follows (the bytes
                // already read first: a block's preallocated zeros are usually all there)
                let read_to = buf_off + valid as u64;
                if is_zero(window) && zeros_between(file, path, read_to, len)? {
                    return Ok(ScanEnd::Zeros { offset: pos });
                }
                // A hole of zeros with records after it: e.g. a write whose fsync failed and
                // was dropped (fsyncgate) while later writes were synced. Skip to the next
                // valid record rather than lose what follows.
                match resync(file, path, pos, len)? {
                    Some(next) => {
                        skipped(pos, "zero length followed by data", None)?;
                        pos = next;
                    }
                    None => {
                        return Ok(ScanEnd::Damaged {
                            offset: pos,
                            reason: "zero length followed by data".into(),
                        })
                    }
                }
            }
            Decoded::Bad { reason, framed } => {
                let next_ok = match framed {
                    Some(l) if pos + l as u64 == len => true,
                    Some(l) if pos + l as u64 + 4 <= len => {
                        let mut h = [0u8; REC_OVERHEAD];
                        let n = ((len - pos - l as u64) as usize).min(REC_OVERHEAD);
                        match h.get_mut(..n) {
                            Some(h) => {
                                io_at(file.read_exact_at(h, pos + l as u64), "read", path)?;
                                plausible_header(h)
                            }
                            None => false, // (n <= REC_OVERHEAD)
                        }
                    }
                    _ => false,
                };
                // A frame that adds up may still hold a damaged length that jumps over the
                // records after it (into a block's preallocated zeros, say): a valid record
                // inside the frame means the frame is not this record's. Resume there. Decided
                // by the frame's own bytes, so that what is appended after it later cannot
                // change the reading (recovery stays idempotent).
                if let (Some(l), true) = (framed, next_ok) {
                    if let Some(next) = resync(file, path, pos + 1, pos + l as u64)? {
                        skipped(pos, reason, None)?;
                        pos = next;
                        continue;
                    }
                }
                match framed {
                    Some(l) if next_ok => {
                        let seq = window
                            .get(8..)
                            .and_then(|s| s.first_chunk::<8>())
                            .map(|s| u64::from_le_bytes(*s));
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
                            return Ok(ScanEnd::Damaged {
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
pub(super) fn resync<H: FsFile>(file: &H, path: &str, from: u64, len: u64) -> Result<Option<u64>> {
    const WINDOW: usize = 1 << 20;
    let mut base = from;
    let mut buf = vec![0u8; WINDOW];
    while base + REC_OVERHEAD as u64 <= len {
        let n = ((len - base) as usize).min(WINDOW);
        let Some(window) = buf.get_mut(..n) else {
            break; // (n <= WINDOW)
        };
        io_at(file.read_exact_at(window, base), "read", path)?;
        let window = &*window;
        // offsets whose 36-byte header lies inside this window (n >= REC_OVERHEAD)
        let last = n.saturating_sub(REC_OVERHEAD);
        for (i, header) in window.windows(REC_OVERHEAD).enumerate() {
            if header.first_chunk::<4>() == Some(&[0; 4]) {
                continue;
            }
            if !plausible_header(header) {
                continue;
            }
            let Some(rl) = record::len_field(header) else {
                continue;
            };
            let at = base + i as u64;
            if at + rl as u64 > len {
                continue;
            }
            let ok = if let Some(rec) = window.get(i..i + rl) {
                matches!(decode(rec), Decoded::Record(_))
            } else {
                let mut rec = vec![0u8; rl];
                io_at(file.read_exact_at(&mut rec, at), "read", path)?;
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
pub(super) fn plausible_header(h: &[u8]) -> bool {
    let Some(len) = record::len_field(h) else {
        return false;
    };
    if len == 0 {
        return h.iter().all(|&b| b == 0);
    }
    let Some(f) = h.first_chunk().map(record::Fixed::parse) else {
        return false;
    };
    if !(REC_OVERHEAD..=HARD_MAX_RECORD).contains(&len) || !(1..=5).contains(&f.kind) {
        return false;
    }
    // kind 5 is a skip; the ttl flag adds its 8-byte field to the frame (record.rs)
    let ttl = if f.flags & record::FLAG_TTL != 0 {
        record::TTL_LEN
    } else {
        0
    };
    // in u64: two u32 lengths may overflow a 32-bit usize (the wasm guest's)
    f.subj_len as u64 + f.hdr_len as u64 + f.pay_len as u64 + (REC_OVERHEAD + ttl) as u64
        == len as u64
}

/// Whether `file` holds only zeros from `from` to `to` (read 64 KiB at a time).
pub(super) fn zeros_between<H: FsFile>(file: &H, path: &str, from: u64, to: u64) -> Result<bool> {
    let mut chunk = vec![0u8; (to.saturating_sub(from) as usize).min(64 << 10)];
    let mut p = from;
    while p < to {
        let n = ((to - p) as usize).min(chunk.len());
        let Some(part) = chunk.get_mut(..n) else {
            break; // (n <= chunk.len())
        };
        io_at(file.read_exact_at(part, p), "read", path)?;
        if !is_zero(part) {
            return Ok(false);
        }
        p += n as u64;
    }
    Ok(true)
}

/// Whether every byte of `b` is zero: 64 bytes at a time as eight words or'ed together (a
/// loop the compiler vectorizes natively, and eight loads per 64 bytes in a wasm guest),
/// since recovery checks every preallocated byte of a block this way.
fn is_zero(b: &[u8]) -> bool {
    let (blocks, rest) = b.as_chunks::<64>();
    for block in blocks {
        let mut acc = 0u64;
        for w in block.as_chunks::<8>().0 {
            acc |= u64::from_le_bytes(*w);
        }
        if acc != 0 {
            return false;
        }
    }
    rest.iter().all(|&x| x == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Fs, OpenOptions};
    use crate::memfs::MemFs;
    use crate::record::Kind;

    #[test]
    fn is_zero_agrees_with_a_byte_loop() {
        // random slices (any start, so any alignment; lengths around the 64-byte step), with
        // no, one or a few bytes set, inside or outside the slice
        let (seed, mut next) = crate::seeded_rng(0x2e60);
        for case in 0..20_000 {
            let mut b = vec![0u8; 640];
            for _ in 0..next() % 3 {
                let at = (next() % 640) as usize;
                b[at] = 1 + (next() % 255) as u8;
            }
            let start = (next() % 130) as usize;
            let len = (next() % 500) as usize;
            let s = &b[start..start + len];
            assert_eq!(
                is_zero(s),
                s.iter().all(|&x| x == 0),
                "SEQSTORE_SEED={seed} case {case}: start {start} len {len}"
            );
        }
    }

    /// Records, a hole of zeros, records, then zeros: the bytes of a block whose middle write
    /// was lost while later ones were kept. Returns the bytes and each record's offset.
    fn holed_block(next: &mut impl FnMut() -> u64) -> (Vec<u8>, Vec<u64>, u64) {
        let mut b = Vec::new();
        let mut offs = Vec::new();
        let mut hole = 0;
        for part in 0..2 {
            for i in 0..1 + next() % 6 {
                offs.push(b.len() as u64);
                let payload = vec![b'p'; (next() % 3000) as usize];
                record::encode(&mut b, Kind::Msg, 0, i + 1, 0, b"s", b"", &payload);
            }
            if part == 0 {
                hole = b.len() as u64;
                b.resize(b.len() + 4 + (next() % 5000) as usize, 0);
            }
        }
        b.resize(b.len() + (next() % 9000) as usize, 0);
        (b, offs, hole)
    }

    #[test]
    fn a_zero_hole_resyncs_and_zeros_end_wherever_the_reads_fall() {
        // The end-of-data check looks at the bytes already read, then reads the rest: with
        // any read size (the hole and the records after it inside the first read, straddling
        // it, or past it) the scan visits every record, skips the hole once, and ends in
        // zeros (or cleanly, when no zeros follow).
        let (seed, mut next) = crate::seeded_rng(0x401e);
        for case in 0..300 {
            let (bytes, offs, hole) = holed_block(&mut next);
            let fs = MemFs::new();
            let f = fs.open("b", OpenOptions::read_write_create()).unwrap();
            f.write_all_at(&bytes, 0).unwrap();
            // the first read anywhere in the block, the largest up to twice the block
            let first = 1 + (next() % bytes.len() as u64) as usize;
            let reads = Reads {
                first,
                max: first + (next() % (2 * bytes.len() as u64)) as usize,
            };
            let (mut seen, mut skipped) = (Vec::new(), Vec::new());
            let end = scan_raw(
                &f,
                "b",
                0,
                bytes.len() as u64,
                reads,
                &mut Vec::new(),
                checked(|off, _| {
                    seen.push(off);
                    Ok(ControlFlow::Continue(()))
                }),
                |off, why, _| {
                    skipped.push((off, why.to_string()));
                    Ok(())
                },
            )
            .unwrap();
            let ctx = format!("SEQSTORE_SEED={seed} case {case}: {reads:?}");
            assert_eq!(seen, offs, "{ctx}");
            assert_eq!(
                skipped,
                [(hole, "zero length followed by data".to_string())],
                "{ctx}"
            );
            let last_end = {
                let mut n = *offs.last().unwrap() as usize;
                n += u32::from_le_bytes(bytes[n..n + 4].try_into().unwrap()) as usize;
                n as u64
            };
            let want = if last_end == bytes.len() as u64 {
                ScanEnd::Clean
            } else {
                ScanEnd::Zeros { offset: last_end }
            };
            assert_eq!(end, want, "{ctx}");
        }
    }

    /// A record whose length fields were damaged to jump into the block's zeros (preallocated
    /// room, or the zeros after the last record): the frame adds up and only its crc fails,
    /// but valid records lie inside it, and the scan resumes at the first of them rather than
    /// taking the zeros for the end and everything between for gone, whatever follows the
    /// frame.
    #[test]
    fn a_length_damaged_to_reach_the_zeros_does_not_hide_the_records_it_jumps() {
        let (seed, mut next) = crate::seeded_rng(0x1e17);
        for case in 0..300 {
            let mut b = Vec::new();
            let mut offs = Vec::new();
            for i in 0..2 + next() % 8 {
                offs.push(b.len() as u64);
                let payload = vec![b'p'; (next() % 300) as usize];
                record::encode(&mut b, Kind::Msg, 0, i + 1, 0, b"s", b"", &payload);
            }
            let data_end = b.len();
            b.resize(data_end + 64 + (next() % 4000) as usize, 0);
            // a record before the last, its frame now ending somewhere in the zeros
            let victim = (next() % (offs.len() as u64 - 1)) as usize;
            let at = offs[victim] as usize;
            let to = data_end + 1 + (next() % (b.len() - data_end - 40) as u64) as usize;
            // the length and the payload length both, so that the frame still adds up: only
            // the checksum tells it is damaged
            let old = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
            let pay = u32::from_le_bytes(b[at + 28..at + 32].try_into().unwrap()) as usize;
            b[at..at + 4].copy_from_slice(&((to - at) as u32).to_le_bytes());
            b[at + 28..at + 32].copy_from_slice(&((pay + to - at - old) as u32).to_le_bytes());
            // half the time a record appended later lands right where the frame ends: the
            // reading must not change (recovery is idempotent)
            let mut after = None;
            if next() % 2 == 0 {
                let mut rec = Vec::new();
                record::encode(&mut rec, Kind::Msg, 0, 99, 0, b"s", b"", b"later");
                b.resize(b.len().max(to + rec.len() + 64), 0);
                b[to..to + rec.len()].copy_from_slice(&rec);
                after = Some((to as u64, (to + rec.len()) as u64));
            }
            let fs = MemFs::new();
            let f = fs.open("b", OpenOptions::read_write_create()).unwrap();
            f.write_all_at(&b, 0).unwrap();
            let (mut seen, mut skipped) = (Vec::new(), Vec::new());
            let end = scan_raw(
                &f,
                "b",
                0,
                b.len() as u64,
                Reads::upto(1 << 20),
                &mut Vec::new(),
                checked(|off, _| {
                    seen.push(off);
                    Ok(ControlFlow::Continue(()))
                }),
                |off, _, _| {
                    skipped.push(off);
                    Ok(())
                },
            )
            .unwrap();
            let ctx = format!("SEQSTORE_SEED={seed} case {case}: record {victim} to {to}");
            let mut want = offs.clone();
            want.remove(victim);
            let (mut want_skipped, mut want_end) = (vec![offs[victim]], data_end as u64);
            if let Some((at, end)) = after {
                want.push(at);
                if at > data_end as u64 {
                    want_skipped.push(data_end as u64); // the zeros between: a hole
                }
                want_end = end;
            }
            assert_eq!(seen, want, "{ctx}");
            assert_eq!(skipped, want_skipped, "{ctx}");
            assert_eq!(end, ScanEnd::Zeros { offset: want_end }, "{ctx}");
        }
    }
}
