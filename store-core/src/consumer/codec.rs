//! The byte layouts of the consumer files (little-endian; ARCHITECTURE.md, "Consumer files").
//!
//! Journal `consumers/journal.<gen>`: a 16-byte header (`SQCJ`, version u32 = 1, gen u64),
//! then records framed as `len u32 | crc u32 | body`, where crc is the crc32 of the previous
//! record's crc (of the header's crc32 for the first record) followed by the body — a chain,
//! so that after a cut tail is overwritten, an old record that happens to line up again
//! cannot replay — and body is
//! `kind u8 | name_len u8 | name | stream_first u64 | stream_last u64 | fields`.
//!
//! Checkpoint `consumers/state`: `SQCS | version u32 = 1 | gen u64 | count u32 | consumer* |
//! crc32 u32` of everything before it; a consumer is `name_len u8 | name | ack u8 |
//! max_deliver u64 | delivered (consumer u64, stream u64) | ack floor (u64, u64) | n u32 |
//! (sseq u64, dseq u64, ts i64)^n | m u32 | (sseq u64, count u64)^m`.

// Parses bytes read from a disk: no index that a damaged file could put out of range.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use super::state::{AckPolicy, ConsumerConfig, ConsumerState, Pending, SequencePair};
use crate::record::crc32;
use std::collections::BTreeMap;

pub(crate) const JOURNAL_MAGIC: &[u8; 4] = b"SQCJ";
pub(crate) const STATE_MAGIC: &[u8; 4] = b"SQCS";
pub(crate) const VERSION: u32 = 1;
pub(crate) const JOURNAL_HEADER_LEN: usize = 16;
/// The frame before a record's body: its length and its crc.
pub(crate) const FRAME_LEN: usize = 8;
/// No record body is longer (the longest: a delivery with a 64-byte name is 115 bytes).
pub(crate) const MAX_BODY: u32 = 256;

/// What one journal record does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Add {
        ack: AckPolicy,
        max_deliver: u64,
    },
    Config {
        max_deliver: u64,
    },
    Delivered {
        dseq: u64,
        sseq: u64,
        dc: u64,
        ts: i64,
    },
    Ack {
        dseq: u64,
        sseq: u64,
    },
    Reset {
        start: u64,
    },
    Delete,
}

/// One journal record: an operation on consumer `name`, with the first and last sequence
/// the live call clamped the consumer to (replay clamps to them first, as the live call did:
/// [`super::ConsumerState::clamp_to_stream`]). `first` is the stream's purge floor + 1, and for
/// an add or a reset the stream's first sequence (a new consumer starts there, as in NATS).
/// Journals written before that rule carry the stream's first sequence in every record, and
/// replay as they were written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rec {
    pub(crate) name: String,
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) op: Op,
}

pub(crate) fn journal_header(gen: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(JOURNAL_HEADER_LEN);
    v.extend_from_slice(JOURNAL_MAGIC);
    v.extend_from_slice(&VERSION.to_le_bytes());
    v.extend_from_slice(&gen.to_le_bytes());
    v
}

/// The generation a journal header names, if it is one.
pub(crate) fn parse_journal_header(b: &[u8]) -> Option<u64> {
    let mut r = Reader(b);
    (r.take(4)? == JOURNAL_MAGIC && r.u32()? == VERSION).then_some(())?;
    r.u64()
}

/// The chained crc of a record body after the record whose crc is `prev`.
pub(crate) fn chain_crc(prev: u32, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&prev.to_le_bytes());
    h.update(body);
    h.finalize()
}

/// Appends `rec`, framed and chained after the record whose crc is `prev`, to `out`;
/// returns its crc.
pub(crate) fn encode_rec(rec: &Rec, prev: u32, out: &mut Vec<u8>) -> u32 {
    let mut b = Vec::with_capacity(64);
    let (kind, fields): (u8, Vec<u64>) = match rec.op {
        Op::Add { ack, max_deliver } => (1, vec![ack.code() as u64, max_deliver]),
        Op::Config { max_deliver } => (2, vec![max_deliver]),
        Op::Delivered { dseq, sseq, dc, ts } => (3, vec![dseq, sseq, dc, ts as u64]),
        Op::Ack { dseq, sseq } => (4, vec![dseq, sseq]),
        Op::Reset { start } => (5, vec![start]),
        Op::Delete => (6, vec![]),
    };
    b.push(kind);
    b.push(rec.name.len() as u8);
    b.extend_from_slice(rec.name.as_bytes());
    b.extend_from_slice(&rec.first.to_le_bytes());
    b.extend_from_slice(&rec.last.to_le_bytes());
    for f in fields {
        b.extend_from_slice(&f.to_le_bytes());
    }
    let crc = chain_crc(prev, &b);
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&b);
    crc
}

/// Decodes the record framed at the start of `buf`, chained after `prev`: the record, its
/// framed length and its crc, or `None` if the bytes there are not a whole, intact record
/// of this chain (a torn tail).
pub(crate) fn decode_rec(buf: &[u8], prev: u32) -> Option<(Rec, usize, u32)> {
    let mut r = Reader(buf);
    let len = r.u32()?;
    let crc = r.u32()?;
    if len > MAX_BODY {
        return None;
    }
    let body = r.take(len as usize)?;
    if chain_crc(prev, body) != crc {
        return None;
    }
    let mut r = Reader(body);
    let kind = r.u8()?;
    let name = r.name()?;
    let (first, last) = (r.u64()?, r.u64()?);
    let op = match kind {
        1 => Op::Add {
            ack: AckPolicy::from_code(u8::try_from(r.u64()?).ok()?)?,
            max_deliver: r.u64()?,
        },
        2 => Op::Config {
            max_deliver: r.u64()?,
        },
        3 => Op::Delivered {
            dseq: r.u64()?,
            sseq: r.u64()?,
            dc: r.u64()?,
            ts: r.u64()? as i64,
        },
        4 => Op::Ack {
            dseq: r.u64()?,
            sseq: r.u64()?,
        },
        5 => Op::Reset { start: r.u64()? },
        6 => Op::Delete,
        _ => return None,
    };
    r.0.is_empty().then_some(())?;
    let rec = Rec {
        name,
        first,
        last,
        op,
    };
    Some((rec, FRAME_LEN + len as usize, crc))
}

/// One consumer as the checkpoint holds it.
pub(crate) type Entry = (ConsumerConfig, ConsumerState);

pub(crate) fn encode_state(gen: u64, all: &BTreeMap<String, Entry>) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(STATE_MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&gen.to_le_bytes());
    b.extend_from_slice(&(all.len() as u32).to_le_bytes());
    let put = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
    for (cfg, st) in all.values() {
        b.push(cfg.name.len() as u8);
        b.extend_from_slice(cfg.name.as_bytes());
        b.push(cfg.ack_policy.code());
        put(&mut b, cfg.max_deliver);
        for p in [st.delivered, st.ack_floor] {
            put(&mut b, p.consumer);
            put(&mut b, p.stream);
        }
        b.extend_from_slice(&(st.pending.len() as u32).to_le_bytes());
        for (s, p) in &st.pending {
            put(&mut b, *s);
            put(&mut b, p.sequence);
            put(&mut b, p.timestamp as u64);
        }
        b.extend_from_slice(&(st.redelivered.len() as u32).to_le_bytes());
        for (s, n) in &st.redelivered {
            put(&mut b, *s);
            put(&mut b, *n);
        }
    }
    let crc = crc32(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a checkpoint: its generation and consumers, or why it is not one.
pub(crate) fn decode_state(buf: &[u8]) -> Result<(u64, BTreeMap<String, Entry>), String> {
    if buf.len() < 24 {
        return Err(format!("{} bytes: too short", buf.len()));
    }
    let (body, tail) = buf.split_at(buf.len() - 4);
    if crc32(body).to_le_bytes() != tail {
        return Err("checksum mismatch".into());
    }
    let mut r = Reader(body);
    if r.take(4) != Some(STATE_MAGIC) || r.u32() != Some(VERSION) {
        return Err("not a consumer checkpoint of version 1".into());
    }
    let bad = || "truncated or malformed consumer entry".to_string();
    let gen = r.u64().ok_or_else(bad)?;
    let n = r.u32().ok_or_else(bad)?;
    let mut all = BTreeMap::new();
    for _ in 0..n {
        let e = decode_entry(&mut r).ok_or_else(bad)?;
        super::check_name(&e.0.name).map_err(|e| e.to_string())?;
        all.insert(e.0.name.clone(), e);
    }
    if !r.0.is_empty() {
        return Err("trailing bytes".into());
    }
    Ok((gen, all))
}

fn decode_entry(r: &mut Reader<'_>) -> Option<Entry> {
    let name = r.name()?;
    let ack_policy = AckPolicy::from_code(r.u8()?)?;
    let max_deliver = r.u64()?;
    let mut pair = || {
        Some(SequencePair {
            consumer: r.u64()?,
            stream: r.u64()?,
        })
    };
    let (delivered, ack_floor) = (pair()?, pair()?);
    let mut st = ConsumerState {
        delivered,
        ack_floor,
        ..ConsumerState::default()
    };
    for _ in 0..r.u32()? {
        let (s, sequence, ts) = (r.u64()?, r.u64()?, r.u64()? as i64);
        let p = Pending {
            sequence,
            timestamp: ts,
        };
        st.pending.insert(s, p);
    }
    for _ in 0..r.u32()? {
        let (s, n) = (r.u64()?, r.u64()?);
        st.redelivered.insert(s, n);
    }
    let cfg = ConsumerConfig {
        name,
        ack_policy,
        max_deliver,
    };
    Some((cfg, st))
}

/// A bounds-checked little-endian reader: every read past the end is `None`, never a panic.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn name(&mut self) -> Option<String> {
        let n = self.u8()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}
