//! `index.db`: a snapshot of the stream state, so that open does not have to read every block.
//!
//! It is an accelerator, never the only holder of a fact: every number in it can be rebuilt from
//! the blocks, and open rebuilds whenever the snapshot does not match them (see
//! `Store::open`). Layout, little-endian:
//!
//! ```text
//!   0  4  magic "SQIX"
//!   4  4  version (3; versions 1 and 2 are still read, see below)
//!   8  8  first_seq      16 8 first_ts      24 8 last_seq     32 8 last_ts
//!  40  8  floor          48 8 msgs          56 8 bytes
//!  64  4  block count B, then B times:
//!         index u64, len u64, msg_first u64, msg_last u64, max_seq u64, live u64,
//!         live_bytes u64, (version 3) ts_hi i64, last_crc u32, deleted count D u32,
//!         D deleted seqs u64
//!      4  subject count S, then S times: name_len u16, name, msgs u64, first u64, last u64
//!      4  (version 2) ttl count T, then T times: seq u64, deadline i64 (ns), seqs ascending
//! end-4 4 crc32 of every preceding byte
//! ```
//!
//! The ttl section holds the deadline of every message with a time to live (`ts + ttl`, by
//! the store's clock), so that a store with ttls pending opens from the index instead of
//! rebuilding from its blocks to find them.
//!
//! `ts_hi` (version 3) is the timestamp of the last message record written to the block
//! (`i64::MIN` if none, `i64::MAX` if not known): `seq_from_time` searches the blocks by it
//! without reading any. Version 2 is version 3 without it, version 1 version 2 without the
//! ttl section; both are still read, every `ts_hi` "not known" (found on first use).

// Parses bytes read from a disk: no index that a damaged file could put out of range.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use crate::error::{Error, Result};

/// Magic of `index.db`.
pub const INDEX_MAGIC: [u8; 4] = *b"SQIX";
/// Version written by this code.
pub const INDEX_VERSION: u32 = 3;
/// The version before the ttl section: still read (as a snapshot without ttls, which is
/// what a build of that version wrote: it wrote no index.db while ttls were pending).
pub const INDEX_VERSION_NO_TTL: u32 = 1;
/// The version before the blocks' `ts_hi`: still read, every block's `ts_hi` not known.
pub const INDEX_VERSION_NO_TS_HI: u32 = 2;
/// A `ts_hi` of "not known" as written (`BlockSummary::ts_hi` is `None`).
const TS_HI_UNKNOWN: i64 = i64::MAX;

/// One block as the snapshot saw it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BlockSummary {
    pub number: u64,
    pub len: u64,
    pub msg_first: u64,
    pub msg_last: u64,
    pub max_seq: u64,
    pub live: u64,
    pub live_bytes: u64,
    /// The timestamp of the last message record written to the block (`i64::MIN`: none),
    /// or `None` if not known (an index before version 3).
    pub ts_hi: Option<i64>,
    pub last_crc: u32,
    pub deleted: Vec<u64>,
}

/// Per-subject counters.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SubjectSummary {
    pub name: String,
    pub msgs: u64,
    pub first: u64,
    pub last: u64,
}

/// The whole snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub first_seq: u64,
    pub first_ts: i64,
    pub last_seq: u64,
    pub last_ts: i64,
    pub floor: u64,
    pub msgs: u64,
    pub bytes: u64,
    pub blocks: Vec<BlockSummary>,
    pub subjects: Vec<SubjectSummary>,
    /// `(seq, deadline)` of the messages with a ttl, ascending by sequence.
    pub ttls: Vec<(u64, i64)>,
}

impl Snapshot {
    /// Encodes with magic, version ([`INDEX_VERSION`]) and trailing crc.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_version(INDEX_VERSION)
    }

    /// Encodes in layout `version` (1, 2 or 3): version 1 has no ttl section, so `ttls` are
    /// not written, and versions 1 and 2 no `ts_hi` (tests and the fuzz target use it to
    /// check that the older versions are still read).
    pub fn encode_version(&self, version: u32) -> Vec<u8> {
        let mut o = Vec::with_capacity(
            128 + self.blocks.len() * 72 + self.subjects.len() * 40 + self.ttls.len() * 16,
        );
        o.extend_from_slice(&INDEX_MAGIC);
        o.extend_from_slice(&version.to_le_bytes());
        for v in [
            self.first_seq,
            self.first_ts as u64,
            self.last_seq,
            self.last_ts as u64,
            self.floor,
            self.msgs,
            self.bytes,
        ] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        o.extend_from_slice(&(self.blocks.len() as u32).to_le_bytes());
        for b in &self.blocks {
            for v in [
                b.number,
                b.len,
                b.msg_first,
                b.msg_last,
                b.max_seq,
                b.live,
                b.live_bytes,
            ] {
                o.extend_from_slice(&v.to_le_bytes());
            }
            if version > INDEX_VERSION_NO_TS_HI {
                let ts_hi = b.ts_hi.unwrap_or(TS_HI_UNKNOWN);
                o.extend_from_slice(&ts_hi.to_le_bytes());
            }
            o.extend_from_slice(&b.last_crc.to_le_bytes());
            o.extend_from_slice(&(b.deleted.len() as u32).to_le_bytes());
            for d in &b.deleted {
                o.extend_from_slice(&d.to_le_bytes());
            }
        }
        o.extend_from_slice(&(self.subjects.len() as u32).to_le_bytes());
        for s in &self.subjects {
            o.extend_from_slice(&(s.name.len() as u16).to_le_bytes());
            o.extend_from_slice(s.name.as_bytes());
            for v in [s.msgs, s.first, s.last] {
                o.extend_from_slice(&v.to_le_bytes());
            }
        }
        if version >= 2 {
            o.extend_from_slice(&(self.ttls.len() as u32).to_le_bytes());
            for &(seq, deadline) in &self.ttls {
                o.extend_from_slice(&seq.to_le_bytes());
                o.extend_from_slice(&deadline.to_le_bytes());
            }
        }
        let crc = crate::record::crc32(&o);
        o.extend_from_slice(&crc.to_le_bytes());
        o
    }

    /// Decodes and checks magic, version, crc, and every count against the bytes left (so a
    /// damaged count never allocates more than the file holds). Longer than 70 lines: one
    /// reader walks the fields in the order of the byte layout (ARCHITECTURE.md, index.db), so
    /// the code reads as the layout does.
    pub fn decode(file: &str, b: &[u8]) -> Result<Snapshot> {
        let (Some(([m0, m1, m2, m3, v0, v1, v2, v3], _)), Some((body, stored)), true) = (
            b.split_first_chunk::<8>(),
            b.split_last_chunk::<4>(),
            b.len() >= 8 + 56 + 8 + 4,
        ) else {
            return Err(Error::corrupt(file, 0, "index too short"));
        };
        if [*m0, *m1, *m2, *m3] != INDEX_MAGIC {
            return Err(Error::corrupt(file, 0, "not a seqstore index (bad magic)"));
        }
        let version = u32::from_le_bytes([*v0, *v1, *v2, *v3]);
        if !(INDEX_VERSION_NO_TTL..=INDEX_VERSION).contains(&version) {
            return Err(Error::corrupt(
                file,
                4,
                format!(
                    "index version {version}, this build reads {INDEX_VERSION_NO_TTL} to \
                     {INDEX_VERSION}"
                ),
            ));
        }
        let stored = u32::from_le_bytes(*stored);
        if crate::record::crc32(body) != stored {
            return Err(Error::corrupt(
                file,
                (b.len() - 4) as u64,
                "index checksum mismatch",
            ));
        }
        let mut r = Reader {
            b: body,
            at: 8,
            file,
        };
        let mut s = Snapshot {
            first_seq: r.u64()?,
            first_ts: r.u64()? as i64,
            last_seq: r.u64()?,
            last_ts: r.u64()? as i64,
            floor: r.u64()?,
            msgs: r.u64()?,
            bytes: r.u64()?,
            ..Default::default()
        };
        let nblocks = r.count(if version > INDEX_VERSION_NO_TS_HI {
            72
        } else {
            64
        })?;
        for _ in 0..nblocks {
            let mut bs = BlockSummary {
                number: r.u64()?,
                len: r.u64()?,
                msg_first: r.u64()?,
                msg_last: r.u64()?,
                max_seq: r.u64()?,
                live: r.u64()?,
                live_bytes: r.u64()?,
                ts_hi: match version > INDEX_VERSION_NO_TS_HI {
                    true => Some(r.u64()? as i64).filter(|&t| t != TS_HI_UNKNOWN),
                    false => None,
                },
                last_crc: r.u32()?,
                deleted: Vec::new(),
            };
            let nd = r.count(8)?;
            bs.deleted.reserve(nd);
            for _ in 0..nd {
                bs.deleted.push(r.u64()?);
            }
            s.blocks.push(bs);
        }
        let nsub = r.count(26)?;
        for _ in 0..nsub {
            let n = r.u16()? as usize;
            let name = r.take(n)?;
            let name = std::str::from_utf8(name)
                .map_err(|_| Error::corrupt(file, r.at as u64, "subject not UTF-8"))?
                .to_string();
            s.subjects.push(SubjectSummary {
                name,
                msgs: r.u64()?,
                first: r.u64()?,
                last: r.u64()?,
            });
        }
        if version >= 2 {
            s.ttls = decode_ttls(&mut r)?;
        }
        if r.at != body.len() {
            return Err(Error::corrupt(file, r.at as u64, "trailing bytes in index"));
        }
        Ok(s)
    }
}

/// The ttl section: `(seq, deadline)` pairs, sequences strictly ascending (so that one
/// encoding is the only one, and a forged list cannot name a sequence twice).
fn decode_ttls(r: &mut Reader<'_>) -> Result<Vec<(u64, i64)>> {
    let n = r.count(16)?;
    let mut ttls: Vec<(u64, i64)> = Vec::with_capacity(n);
    for _ in 0..n {
        let at = r.at;
        let seq = r.u64()?;
        let deadline = r.u64()? as i64;
        if ttls.last().is_some_and(|&(prev, _)| prev >= seq) {
            return Err(Error::corrupt(
                r.file,
                at as u64,
                "ttl sequences not ascending",
            ));
        }
        ttls.push((seq, deadline));
    }
    Ok(ttls)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    file: &'a str,
}

impl<'a> Reader<'a> {
    fn cut_short(&self) -> Error {
        Error::corrupt(self.file, self.at as u64, "index cut short")
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let Some(s) = self.b.get(self.at..).and_then(|rest| rest.get(..n)) else {
            return Err(self.cut_short());
        };
        self.at += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let Some(&a) = self
            .b
            .get(self.at..)
            .and_then(|rest| rest.first_chunk::<N>())
        else {
            return Err(self.cut_short());
        };
        self.at += N;
        Ok(a)
    }
    fn u16(&mut self) -> Result<u16> {
        self.array().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Result<u32> {
        self.array().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Result<u64> {
        self.array().map(u64::from_le_bytes)
    }
    /// A count of elements each at least `min_size` bytes: refused if the rest cannot hold them.
    fn count(&mut self, min_size: usize) -> Result<usize> {
        let at = self.at;
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size) > self.b.len() - self.at {
            return Err(Error::corrupt(
                self.file,
                at as u64,
                "count larger than the index",
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            first_seq: 3,
            first_ts: 10,
            last_seq: 9,
            last_ts: -5,
            floor: 2,
            msgs: 5,
            bytes: 500,
            blocks: vec![BlockSummary {
                number: 1,
                len: 900,
                msg_first: 1,
                msg_last: 9,
                max_seq: 9,
                live: 5,
                live_bytes: 500,
                ts_hi: Some(-5),
                last_crc: 0xdead,
                deleted: vec![4, 6],
            }],
            subjects: vec![SubjectSummary {
                name: "a.b".into(),
                msgs: 5,
                first: 3,
                last: 9,
            }],
            ttls: vec![(3, 1_000), (7, -2)],
        }
    }

    #[test]
    fn version_1_is_still_read_without_ttls() {
        let s = sample();
        let v1 = s.encode_version(INDEX_VERSION_NO_TTL);
        let back = Snapshot::decode("i", &v1).unwrap();
        assert!(back.ttls.is_empty());
        assert_eq!(back.encode_version(1), v1);
        let mut expect = s.clone();
        expect.ttls.clear();
        expect.blocks[0].ts_hi = None;
        assert_eq!(back, expect);
        // version 4 is refused
        let mut v4 = s.encode();
        v4[4..8].copy_from_slice(&4u32.to_le_bytes());
        let n = v4.len();
        let crc = crate::record::crc32(&v4[..n - 4]);
        v4[n - 4..].copy_from_slice(&crc.to_le_bytes());
        assert!(Snapshot::decode("i", &v4).is_err());
    }

    #[test]
    fn version_2_is_still_read_without_ts_hi() {
        let s = sample();
        let v2 = s.encode_version(INDEX_VERSION_NO_TS_HI);
        let back = Snapshot::decode("i", &v2).unwrap();
        assert_eq!(back.encode_version(2), v2);
        let mut expect = s.clone();
        expect.blocks[0].ts_hi = None;
        assert_eq!(back, expect);
        // an unknown ts_hi round-trips through version 3
        assert_eq!(Snapshot::decode("i", &back.encode()).unwrap(), back);
    }

    #[test]
    fn ttls_out_of_order_are_refused() {
        let mut s = sample();
        s.ttls = vec![(7, 1), (3, 2)];
        assert!(Snapshot::decode("i", &s.encode()).is_err());
        s.ttls = vec![(3, 1), (3, 2)];
        assert!(Snapshot::decode("i", &s.encode()).is_err());
    }

    #[test]
    fn round_trip_and_damage() {
        let s = sample();
        let b = s.encode();
        assert_eq!(Snapshot::decode("i", &b).unwrap(), s);
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(Snapshot::decode("i", &c).is_err(), "flip at {i}");
        }
        for n in 0..b.len() {
            assert!(Snapshot::decode("i", &b[..n]).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn huge_count_does_not_allocate() {
        let mut s = sample();
        s.blocks.clear();
        s.subjects.clear();
        let mut b = s.encode();
        // overwrite the block count with u32::MAX and fix the crc: decode must refuse it
        b[64..68].copy_from_slice(&u32::MAX.to_le_bytes());
        let n = b.len();
        let crc = crate::record::crc32(&b[..n - 4]);
        b[n - 4..].copy_from_slice(&crc.to_le_bytes());
        assert!(Snapshot::decode("i", &b).is_err());
    }
}
