//! The byte layout of message blocks (`msgs/N.blk`). All integers little-endian.
//!
//! ```text
//! block header (16 bytes):
//!   0  4  magic "SQBK"
//!   4  2  version (1)
//!   6  2  reserved (0)
//!   8  8  block index N (must equal the file name)
//! record (36 bytes + subject + headers + payload):
//!   0  4  rec_len: total bytes of this record, crc included
//!   4  1  kind: 1 message, 2 tombstone (seq deleted), 3 floor (every seq <= seq removed),
//!           4 truncate (every record before it with a seq > seq is void; last = seq),
//!           5 skip (sequences seq - count + 1 ..= seq used without a message; last >= seq)
//!   5  1  flags: bit 0 erased (payload overwritten); bit 1 ttl (messages only: 8 more
//!           bytes, the ttl in ns as a u64, after the payload); other bits 0
//!   6  2  subj_len
//!   8  8  seq
//!  16  8  ts, ns since the epoch
//!  24  4  hdr_len
//!  28  4  payload_len
//!  32  .  subject (UTF-8), headers, payload
//!  end-4 4 crc32 (IEEE, crc32fast) of every preceding byte of the record, lengths included
//! ```
//! A skip record has no subject or headers and an 8-byte payload: the count (≥ 1, ≤ seq).
//! `rec_len == 36 + subj_len + hdr_len + payload_len (+ 8 with the ttl flag)` is checked on both sides of the disk, as
//! is the crc. A zero `rec_len` marks the end of the written part of a block.

// Parses bytes read from a disk: no index that a damaged file could put out of range.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use crate::error::{Error, Result};
pub(crate) use crate::framing::len_field;
pub use crate::framing::{crc32, frame, framed_crcs, HARD_MAX_RECORD, REC_OVERHEAD};

/// Block file magic.
pub const BLOCK_MAGIC: [u8; 4] = *b"SQBK";
/// Block format version written by this code.
pub const BLOCK_VERSION: u16 = 1;
/// Bytes of the block header.
pub const BLOCK_HEADER_LEN: u64 = 16;

/// What a record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A stored message.
    Msg = 1,
    /// The message `seq` is deleted.
    Tombstone = 2,
    /// Every sequence `<= seq` is removed; the stream's last sequence is at least `seq`.
    Floor = 3,
    /// Every earlier record with a sequence `> seq` is void; the last sequence becomes `seq`.
    Truncate = 4,
    /// The sequences `seq - count + 1 ..= seq` were used without a message (NATS `SkipMsgs`);
    /// the last sequence is at least `seq`. The payload is the count (u64).
    Skip = 5,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Msg,
            2 => Kind::Tombstone,
            3 => Kind::Floor,
            4 => Kind::Truncate,
            5 => Kind::Skip,
            _ => return None,
        })
    }
}

/// The highest sequence a record may carry: `last + 1` and `floor + 1` must never wrap, and a
/// larger value is damage (or a forgery), never a sequence the store issued.
pub const MAX_SEQ: u64 = (1 << 63) - 1;

/// Flag bit: the message's subject, headers and payload were overwritten with zeros.
pub const FLAG_ERASED: u8 = 1;

/// Flag bit (messages only): the record carries a time to live, 8 bytes (u64 LE, ns) between
/// the payload and the crc; the message expires at `ts + ttl`. Records without it are the
/// bytes they always were.
pub const FLAG_TTL: u8 = 2;

/// Bytes of a record's ttl field (present with [`FLAG_TTL`]).
pub const TTL_LEN: usize = 8;

/// Bytes of a skip record's payload: the count.
pub const SKIP_LEN: usize = 8;

/// A decoded record borrowing from the buffer it was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// What it is.
    pub kind: Kind,
    /// Flag bits.
    pub flags: u8,
    /// Sequence.
    pub seq: u64,
    /// Timestamp (ns).
    pub ts: i64,
    /// Subject (messages only).
    pub subject: &'a str,
    /// Headers (messages only).
    pub headers: &'a [u8],
    /// Payload (messages only).
    pub payload: &'a [u8],
    /// Total encoded length.
    pub len: usize,
    /// The stored crc.
    pub crc: u32,
    /// The time to live in ns (messages with [`FLAG_TTL`]), else 0.
    pub ttl: u64,
}

impl Record<'_> {
    /// When the message expires (ns since the epoch): `ts + ttl`, or `None` without a ttl.
    pub fn deadline(&self) -> Option<i64> {
        message_deadline(self.flags, self.ts, self.ttl)
    }

    /// The message it holds, owned: sequence, timestamp, subject, headers and payload (all
    /// a message record keeps; other kinds have an empty subject, headers and payload).
    pub fn owned_msg(&self) -> crate::StoredMsg {
        crate::StoredMsg {
            seq: self.seq,
            ts: self.ts,
            subject: self.subject.to_string(),
            headers: self.headers.to_vec(),
            payload: self.payload.to_vec(),
        }
    }

    /// The range a skip record covers: `(first, last)`; `None` for other kinds.
    pub fn skipped(&self) -> Option<(u64, u64)> {
        skip_range(self.kind, self.seq, self.payload)
    }
}

/// [`Record::deadline`] of a record's parts.
#[inline]
fn message_deadline(flags: u8, ts: i64, ttl: u64) -> Option<i64> {
    (flags & FLAG_TTL != 0).then(|| deadline(ts, ttl))
}

/// [`Record::skipped`] of a record's parts.
fn skip_range(kind: Kind, seq: u64, payload: &[u8]) -> Option<(u64, u64)> {
    // (saturating: a `Record` built by hand need not hold decode's checked count)
    let back = skip_count(payload).saturating_sub(1);
    (kind == Kind::Skip).then(|| (seq.saturating_sub(back), seq))
}

/// A record's subject as text: `Err` when its bytes are not UTF-8, except in an erased
/// record, whose subject then reads as empty.
#[inline]
pub(crate) fn subject_text(bytes: &[u8], flags: u8) -> Result<&str, &'static str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(_) if flags & FLAG_ERASED != 0 => Ok(""),
        Err(_) => Err("subject is not UTF-8"),
    }
}

/// The deadline of a message stamped `ts` with time to live `ttl` ns (saturating).
pub fn deadline(ts: i64, ttl: u64) -> i64 {
    ts.saturating_add(ttl.min(i64::MAX as u64) as i64)
}

/// The count a skip record's payload holds (decode checked it is 8 bytes).
fn skip_count(payload: &[u8]) -> u64 {
    payload.try_into().map(u64::from_le_bytes).unwrap_or(1)
}

/// Encodes a message record with a time to live ([`FLAG_TTL`], `extra_flags` besides):
/// [`encode`]'s layout plus the 8-byte ttl before the crc. Returns its crc.
#[allow(clippy::too_many_arguments)]
pub fn encode_with_ttl(
    out: &mut Vec<u8>,
    extra_flags: u8,
    seq: u64,
    ts: i64,
    subject: &[u8],
    headers: &[u8],
    payload: &[u8],
    ttl: u64,
) -> u32 {
    encode_parts(
        out,
        Kind::Msg,
        extra_flags | FLAG_TTL,
        seq,
        ts,
        subject,
        headers,
        payload,
        Some(ttl),
    )
}

/// Encodes the erased form of message record `seq` stamped `ts`: the same frame, flagged
/// [`FLAG_ERASED`], with a subject, headers and payload of these lengths all zeros, and with
/// `with_ttl`, the ttl field ([`FLAG_TTL`]) zeroed too. Returns its crc.
pub fn encode_erased(
    out: &mut Vec<u8>,
    seq: u64,
    ts: i64,
    (subject, headers, payload): (usize, usize, usize),
    with_ttl: bool,
) -> u32 {
    let flags = if with_ttl {
        FLAG_ERASED | FLAG_TTL
    } else {
        FLAG_ERASED
    };
    let (s, h, p) = (vec![0u8; subject], vec![0u8; headers], vec![0u8; payload]);
    encode_parts(
        out,
        Kind::Msg,
        flags,
        seq,
        ts,
        &s,
        &h,
        &p,
        with_ttl.then_some(0),
    )
}

/// Encodes a skip record for the sequences `last - count + 1 ..= last` (`1 <= count <= last`).
pub fn encode_skip(out: &mut Vec<u8>, last: u64, count: u64, ts: i64) -> u32 {
    debug_assert!(count >= 1 && count <= last);
    encode(out, Kind::Skip, 0, last, ts, b"", b"", &count.to_le_bytes())
}

/// Encoded length of a record.
pub fn encoded_len(subject: usize, headers: usize, payload: usize) -> usize {
    REC_OVERHEAD + subject + headers + payload
}

/// Appends one encoded record to `out`; returns its crc. The caller has bounded the lengths
/// (the debug assertion re-checks before the bytes go to disk).
#[allow(clippy::too_many_arguments)]
pub fn encode(
    out: &mut Vec<u8>,
    kind: Kind,
    flags: u8,
    seq: u64,
    ts: i64,
    subject: &[u8],
    headers: &[u8],
    payload: &[u8],
) -> u32 {
    encode_parts(out, kind, flags, seq, ts, subject, headers, payload, None)
}

/// [`encode`], with the ttl field when `ttl` is given (the caller sets [`FLAG_TTL`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn encode_parts(
    out: &mut Vec<u8>,
    kind: Kind,
    flags: u8,
    seq: u64,
    ts: i64,
    subject: &[u8],
    headers: &[u8],
    payload: &[u8],
    ttl: Option<u64>,
) -> u32 {
    let ttl = ttl.map(u64::to_le_bytes);
    let ttl: &[u8] = ttl.as_ref().map_or(&[], |t| t);
    let len = encoded_len(subject.len(), headers.len(), payload.len());
    assert!(
        len <= HARD_MAX_RECORD && subject.len() <= u16::MAX as usize,
        "record bounds are checked before encoding"
    );
    let len = len + ttl.len();
    debug_assert!(len <= HARD_MAX_RECORD);
    let start = out.len();
    out.reserve(len);
    // the fixed fields built on the stack and copied once: each `Vec` push checks capacity
    let mut h = [0u8; REC_FIXED];
    h[0..4].copy_from_slice(&(len as u32).to_le_bytes());
    h[4] = kind as u8;
    h[5] = flags;
    h[6..8].copy_from_slice(&(subject.len() as u16).to_le_bytes());
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h[16..24].copy_from_slice(&ts.to_le_bytes());
    h[24..28].copy_from_slice(&(headers.len() as u32).to_le_bytes());
    h[28..32].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    for part in [&h[..], subject, headers, payload, ttl] {
        out.extend_from_slice(part);
    }
    // one pass over the record's bytes once they are contiguous: crc32fast folds 64 bytes
    // at a time with carry-less multiplies, but a piece shorter than that (the fixed
    // fields, a subject) goes through its byte-table loop, several times slower
    // (`start` was `out.len()` before the pushes: the range is always there)
    let crc = crc32(out.get(start..).unwrap_or_default());
    out.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(out.len() - start, len);
    crc
}

/// Result of decoding at one position.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole, valid record.
    Record(Record<'a>),
    /// The buffer holds only part of a record of this total length (read more, or: torn tail).
    Short(usize),
    /// A zero length: the end of the written data.
    End,
    /// Not a valid record. `framed` is `Some(len)` when the length field is plausible and the
    /// fixed fields are consistent, so the next record may start at `len` (e.g. an interrupted
    /// in-place erase: only the crc is wrong).
    Bad {
        /// Why.
        reason: &'static str,
        /// The length to skip, if the framing looks intact.
        framed: Option<usize>,
    },
}

/// Bytes of a record's fixed fields (before its subject): [`REC_OVERHEAD`] less the crc.
pub(crate) const REC_FIXED: usize = REC_OVERHEAD - 4;

/// The fixed fields of a record (its first [`REC_FIXED`] bytes) as they are, nothing checked
/// (the length is [`len_field`]'s).
/// Read by destructuring the array: no index into bytes from a disk, so nothing to panic.
#[derive(Clone, Copy)]
pub(crate) struct Fixed {
    pub kind: u8,
    pub flags: u8,
    pub subj_len: u16,
    pub seq: u64,
    pub ts: u64,
    pub hdr_len: u32,
    pub pay_len: u32,
}

impl Fixed {
    #[inline(always)]
    pub(crate) fn parse(h: &[u8; REC_FIXED]) -> Fixed {
        // 0 len (read by `len_field`), 4 kind, 5 flags, 6 subj_len, 8 seq, 16 ts, 24 hdr_len,
        // 28 payload_len
        let [_, _, _, _, kind, flags, s0, s1, rest @ ..] = *h;
        let [q0, q1, q2, q3, q4, q5, q6, q7, rest @ ..] = rest;
        let [t0, t1, t2, t3, t4, t5, t6, t7, rest @ ..] = rest;
        let [h0, h1, h2, h3, p0, p1, p2, p3] = rest;
        Fixed {
            kind,
            flags,
            subj_len: u16::from_le_bytes([s0, s1]),
            seq: u64::from_le_bytes([q0, q1, q2, q3, q4, q5, q6, q7]),
            ts: u64::from_le_bytes([t0, t1, t2, t3, t4, t5, t6, t7]),
            hdr_len: u32::from_le_bytes([h0, h1, h2, h3]),
            pay_len: u32::from_le_bytes([p0, p1, p2, p3]),
        }
    }
}

/// Decodes the record at the start of `buf`, checking every field and the crc.
pub fn decode(buf: &[u8]) -> Decoded<'_> {
    decode_inner(buf, CrcCheck::Compute)
}

/// [`decode`], with the crc32 of the record's bytes before its crc field (`buf[..len - 4]`,
/// `len` its length field) computed by the caller, elsewhere (the wasm guest's block scan has
/// its host checksum many records in one call: crc32 in wasm has no SIMD). It is compared with
/// the stored crc exactly as [`decode`] compares its own. A `computed` for other bytes fails the
/// record (`checksum mismatch`), never accepts a damaged one unless the caller lied.
pub fn decode_with_crc(buf: &[u8], computed: u32) -> Decoded<'_> {
    decode_inner(buf, CrcCheck::Given(computed))
}

/// Decodes a record that this process's caller encoded itself ([`encode`], maybe in another
/// process that shares this code: the wasm host encodes the guest's appends), checking every
/// field **except the crc**, which is trusted. For `Store::append_encoded` only; never for
/// bytes read from a disk. A wrong crc is still caught when the record is read back (every
/// read and every recovery scan verifies it).
pub fn decode_trusting_crc(buf: &[u8]) -> Decoded<'_> {
    decode_inner(buf, CrcCheck::Trust)
}

/// How [`decode_inner`] checks the crc.
#[derive(Clone, Copy)]
enum CrcCheck {
    /// Computes it here.
    Compute,
    /// The caller computed it.
    Given(u32),
    /// The caller encoded the record: no check.
    Trust,
}

/// A record whose every field [`decode_raw`] checked but the subject's UTF-8.
#[derive(Clone, Copy)]
pub(crate) struct RawRecord<'a> {
    pub kind: Kind,
    pub flags: u8,
    pub seq: u64,
    pub ts: i64,
    pub subject: &'a [u8],
    pub headers: &'a [u8],
    pub payload: &'a [u8],
    pub len: usize,
    pub crc: u32,
    pub ttl: u64,
}

impl<'a> RawRecord<'a> {
    /// The record with its subject checked as text ([`subject_text`]'s refusal on `Err`).
    #[inline]
    pub(crate) fn checked(&self) -> Result<Record<'a>, &'static str> {
        Ok(Record {
            kind: self.kind,
            flags: self.flags,
            seq: self.seq,
            ts: self.ts,
            subject: subject_text(self.subject, self.flags)?,
            headers: self.headers,
            payload: self.payload,
            len: self.len,
            crc: self.crc,
            ttl: self.ttl,
        })
    }

    /// [`Record::deadline`].
    #[inline]
    pub(crate) fn deadline(&self) -> Option<i64> {
        message_deadline(self.flags, self.ts, self.ttl)
    }

    /// [`Record::skipped`].
    pub(crate) fn skipped(&self) -> Option<(u64, u64)> {
        skip_range(self.kind, self.seq, self.payload)
    }
}

/// [`decode_trusting_crc`] without the subject's UTF-8 check, for a caller that recognises
/// the subject's bytes as a name it holds (`Store::append_encoded`); `Err` is the outcome that
/// is not a record.
#[inline]
pub(crate) fn decode_raw_trusting_crc(buf: &[u8]) -> Result<RawRecord<'_>, Decoded<'_>> {
    decode_raw(buf, CrcCheck::Trust)
}

/// [`decode`] (or, with `computed`, [`decode_with_crc`]) without the subject's UTF-8 check,
/// for a scan whose visitor checks it only for a subject it does not already hold
/// ([`RawRecord::checked`], or a name table's bytes); `Err` is the outcome that is not a
/// record.
#[inline(always)]
pub(crate) fn decode_unchecked_subject(
    buf: &[u8],
    computed: Option<u32>,
) -> Result<RawRecord<'_>, Decoded<'_>> {
    let check = match computed {
        Some(c) => CrcCheck::Given(c),
        None => CrcCheck::Compute,
    };
    decode_raw(buf, check)
}

#[inline(always)]
fn decode_inner(buf: &[u8], check: CrcCheck) -> Decoded<'_> {
    let r = match decode_raw(buf, check) {
        Ok(r) => r,
        Err(d) => return d,
    };
    match r.checked() {
        Ok(r) => Decoded::Record(r),
        Err(reason) => Decoded::Bad {
            reason,
            framed: Some(r.len),
        },
    }
}

/// Checks every field of the record at the start of `buf` ([`decode`]) but the subject's
/// UTF-8, which the caller checks (or knows). Longer than 70 lines: one pass over the frame,
/// each check in the order of its bytes, inlined into every scan (a rebuild's speed is this
/// function's); the parts of a split would pass the frame's offsets back and forth.
#[inline(always)]
fn decode_raw(buf: &[u8], check: CrcCheck) -> Result<RawRecord<'_>, Decoded<'_>> {
    let Some(len) = len_field(buf) else {
        if buf.iter().all(|&b| b == 0) {
            return Err(Decoded::End);
        }
        return Err(Decoded::Short(REC_OVERHEAD));
    };
    if len == 0 {
        return Err(Decoded::End);
    }
    if !(REC_OVERHEAD..=HARD_MAX_RECORD).contains(&len) {
        return Err(Decoded::Bad {
            reason: "record length out of range",
            framed: None,
        });
    }
    let Some(b) = buf.get(..len) else {
        return Err(Decoded::Short(len));
    };
    // `len >= REC_OVERHEAD`: the fixed fields and the crc are both there (the `else` cannot
    // happen; it keeps a slip in the checks above a refusal instead of a panic)
    let (Some((h, body)), Some((covered, stored))) = (
        b.split_first_chunk::<REC_FIXED>(),
        b.split_last_chunk::<4>(),
    ) else {
        return Err(Decoded::Short(REC_OVERHEAD));
    };
    let f = Fixed::parse(h);
    let subj_len = f.subj_len as usize;
    let hdr_len = f.hdr_len as usize;
    let pay_len = f.pay_len as usize;
    let kind = Kind::from_u8(f.kind);
    // the ttl field is inside the frame: covered by the lengths check like the body
    let ttl_len = if f.flags & FLAG_TTL != 0 { TTL_LEN } else { 0 };
    let consistent = subj_len
        .checked_add(hdr_len)
        .and_then(|x| x.checked_add(pay_len))
        .and_then(|x| x.checked_add(REC_OVERHEAD + ttl_len))
        == Some(len);
    if !consistent {
        return Err(Decoded::Bad {
            reason: "record lengths disagree",
            framed: None,
        });
    }
    let Some(kind) = kind else {
        return Err(Decoded::Bad {
            reason: "unknown record kind",
            framed: None,
        });
    };
    let stored = u32::from_le_bytes(*stored);
    let computed = match check {
        CrcCheck::Compute => crc32(covered),
        CrcCheck::Given(c) => c,
        CrcCheck::Trust => stored,
    };
    if computed != stored {
        return Err(Decoded::Bad {
            reason: "checksum mismatch",
            framed: Some(len),
        });
    }
    let seq = f.seq;
    if seq > MAX_SEQ || (seq == 0 && kind != Kind::Floor && kind != Kind::Truncate) {
        return Err(Decoded::Bad {
            reason: "sequence out of range",
            framed: Some(len),
        });
    }
    let flags = f.flags;
    if flags & !(FLAG_ERASED | FLAG_TTL) != 0 {
        return Err(Decoded::Bad {
            reason: "unknown flag bits",
            framed: Some(len),
        });
    }
    let body_ok = match kind {
        Kind::Msg => true,
        Kind::Skip => len == REC_OVERHEAD + SKIP_LEN && pay_len == SKIP_LEN && flags == 0,
        _ => len == REC_OVERHEAD && flags == 0,
    };
    if !body_ok {
        return Err(Decoded::Bad {
            reason: "marker record with a body",
            framed: Some(len),
        });
    }
    // subject, headers, payload and ttl: their lengths add up to the body's (checked above),
    // so every split succeeds
    let parts = body.split_at_checked(subj_len).and_then(|(subject, rest)| {
        let (headers, rest) = rest.split_at_checked(hdr_len)?;
        let (payload, rest) = rest.split_at_checked(pay_len)?;
        let (ttl, _crc) = rest.split_at_checked(ttl_len)?;
        Some((subject, headers, payload, ttl))
    });
    let Some((subject, headers, payload, ttl)) = parts else {
        return Err(Decoded::Bad {
            reason: "record lengths disagree",
            framed: None,
        });
    };
    if kind == Kind::Skip {
        let count = skip_count(payload);
        if count == 0 || count > seq {
            return Err(Decoded::Bad {
                reason: "skip count out of range",
                framed: Some(len),
            });
        }
    }
    // exactly 8 bytes with the flag, none without
    let ttl = <[u8; TTL_LEN]>::try_from(ttl).map_or(0, u64::from_le_bytes);
    Ok(RawRecord {
        kind,
        flags,
        seq,
        ts: f.ts as i64,
        subject,
        headers,
        payload,
        len,
        crc: stored,
        ttl,
    })
}

/// The block header for block `index`.
pub fn block_header(index: u64) -> [u8; BLOCK_HEADER_LEN as usize] {
    let mut h = [0u8; BLOCK_HEADER_LEN as usize];
    h[0..4].copy_from_slice(&BLOCK_MAGIC);
    h[4..6].copy_from_slice(&BLOCK_VERSION.to_le_bytes());
    h[8..16].copy_from_slice(&index.to_le_bytes());
    h
}

/// What a block's first bytes say.
#[derive(Debug, PartialEq, Eq)]
pub enum Header {
    /// A valid header for the expected index.
    Valid,
    /// Empty or all zeros: a block whose header never became durable.
    Blank,
}

/// Checks a block header read from `file`. A wrong magic, version or index is `Corrupt`.
pub fn check_block_header(file: &str, bytes: &[u8], index: u64) -> Result<Header> {
    if bytes.iter().all(|&b| b == 0) {
        return Ok(Header::Blank);
    }
    let Some(header) = bytes.first_chunk::<{ BLOCK_HEADER_LEN as usize }>() else {
        return Err(Error::corrupt(file, 0, "block header cut short"));
    };
    let [m0, m1, m2, m3, v0, v1, _, _, i0, i1, i2, i3, i4, i5, i6, i7] = *header;
    if [m0, m1, m2, m3] != BLOCK_MAGIC {
        if crate::layer::is_layered_header(bytes) {
            // an encrypted or compressed store opened without its layer: say so, not "damage"
            return Err(Error::WrongKey {
                file: file.to_string(),
                reason: if cfg!(feature = "crypt") {
                    "the store is encrypted or compressed; open it with its key and \
                     compression (StoreBuilder::open_layered, the CLI's --key-file/--compress)"
                } else {
                    "the store is encrypted or compressed, and this build of seqstore-core \
                     lacks its `crypt` feature"
                }
                .to_string(),
            });
        }
        return Err(Error::corrupt(file, 0, "not a seqstore block (bad magic)"));
    }
    let version = u16::from_le_bytes([v0, v1]);
    if version != BLOCK_VERSION {
        return Err(Error::corrupt(
            file,
            4,
            format!("block format version {version}, this build reads {BLOCK_VERSION}"),
        ));
    }
    let stored = u64::from_le_bytes([i0, i1, i2, i3, i4, i5, i6, i7]);
    if stored != index {
        return Err(Error::corrupt(
            file,
            8,
            format!("header says block {stored}, file name says {index}"),
        ));
    }
    Ok(Header::Valid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(kind: Kind, seq: u64, subj: &str, hdr: &[u8], pay: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode(&mut v, kind, 0, seq, 77, subj.as_bytes(), hdr, pay);
        v
    }

    #[test]
    fn round_trip() {
        let v = one(Kind::Msg, 5, "a.b", b"h", b"payload");
        assert_eq!(v.len(), encoded_len(3, 1, 7));
        match decode(&v) {
            Decoded::Record(r) => {
                assert_eq!(
                    (r.kind, r.seq, r.ts, r.subject, r.headers, r.payload),
                    (Kind::Msg, 5, 77, "a.b", &b"h"[..], &b"payload"[..])
                );
                assert_eq!(r.len, v.len());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_single_bit_flip_is_caught() {
        let v = one(Kind::Msg, 9, "x.y", b"", b"0123456789");
        for bit in 0..v.len() * 8 {
            let mut w = v.clone();
            w[bit / 8] ^= 1 << (bit % 8);
            assert!(
                !matches!(decode(&w), Decoded::Record(_)),
                "bit {bit} flip not detected"
            );
        }
    }

    #[test]
    fn short_end_and_bad_lengths() {
        let v = one(Kind::Tombstone, 3, "", b"", b"");
        assert_eq!(v.len(), REC_OVERHEAD);
        assert_eq!(decode(&v[..10]), Decoded::Short(REC_OVERHEAD));
        assert_eq!(decode(&[0u8; 64]), Decoded::End);
        assert_eq!(decode(&[]), Decoded::End);
        let mut huge = v.clone();
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&huge), Decoded::Bad { framed: None, .. }));
        let mut crc = v.clone();
        let n = crc.len();
        crc[n - 1] ^= 0xff;
        assert!(matches!(
            decode(&crc),
            Decoded::Bad {
                framed: Some(36),
                ..
            }
        ));
    }

    #[test]
    fn framing_agrees_with_decoding_on_damaged_buffers() {
        // `frame` (the host's framing for the guest's recovery scan) on records with random
        // damage, cut at random ends: never panics, frames are contiguous from 0 and inside
        // the buffer, each covers its record's bytes but the crc, and `framed_crcs` gives
        // the crc `decode_with_crc` accepts for exactly the records `decode` accepts.
        let (seed, mut next) = crate::seeded_rng(0x5eed_f4a3u64);
        for case in 0..2000 {
            let mut buf = Vec::new();
            for i in 0..(next() % 6) {
                let pay = vec![i as u8; (next() % 300) as usize];
                encode(&mut buf, Kind::Msg, 0, 1 + i, 5, b"s.t", b"", &pay);
            }
            for _ in 0..(next() % 3) {
                if !buf.is_empty() {
                    let at = (next() % buf.len() as u64) as usize;
                    buf[at] = next() as u8;
                }
            }
            buf.truncate((next() % (buf.len() as u64 + 1)) as usize);
            let ctx = format!("seed {seed} case {case}");
            let mut frames = Vec::new();
            frame(&buf, &mut frames);
            let mut crcs = Vec::new();
            framed_crcs(&buf, &mut crcs);
            assert_eq!(frames.len(), crcs.len(), "{ctx}");
            let mut p = 0usize;
            for (&(s, l), &c) in frames.iter().zip(&crcs) {
                let (s, l) = (s as usize, l as usize);
                assert_eq!(s, p, "{ctx}: frames are contiguous");
                assert!(s + l + 4 <= buf.len(), "{ctx}: frame inside the buffer");
                assert_eq!(c, crc32(&buf[s..s + l]), "{ctx}");
                let plain = matches!(decode(&buf[s..]), Decoded::Record(_));
                let given = matches!(decode_with_crc(&buf[s..], c), Decoded::Record(_));
                assert_eq!(plain, given, "{ctx}: at {s}");
                p = s + l + 4;
            }
        }
    }

    #[test]
    fn headers() {
        let h = block_header(7);
        assert_eq!(check_block_header("f", &h, 7).unwrap(), Header::Valid);
        assert!(check_block_header("f", &h, 8).is_err());
        assert_eq!(check_block_header("f", &[0; 16], 7).unwrap(), Header::Blank);
        assert_eq!(check_block_header("f", &[], 7).unwrap(), Header::Blank);
        assert!(check_block_header("f", b"garbage garbage!", 7).is_err());
    }
}
