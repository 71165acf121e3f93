//! `#[serde(with = "crate::bytes")]` for `Vec<u8>` fields: serialized as one byte string, not
//! as a sequence of numbers. In postcard (the log, the snapshot file, the raft RPCs) the
//! encoding is the same either way (a length, then the bytes), so nothing stored changes;
//! what changes is the cost: serde's default walks a `Vec<u8>` element by element, which was
//! a fifth of the server's own CPU time under load (payloads, and the snapshot images).

use serde::de::{SeqAccess, Visitor};
use serde::{Deserializer, Serializer};
use std::fmt;

/// Serializes `v` as a byte string.
pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(v)
}

/// Deserializes a byte string (or, from a format that has no byte strings, a sequence).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    d.deserialize_byte_buf(Bytes)
}

struct Bytes;

impl<'de> Visitor<'de> for Bytes {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("bytes")
    }

    fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(b) = seq.next_element()? {
            out.push(b);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Plain(Vec<u8>, u32);

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Fast(#[serde(with = "crate::bytes")] Vec<u8>, u32);

    /// The same postcard bytes both ways, and each reads the other's: nothing stored changes.
    #[test]
    fn postcard_encoding_is_unchanged() {
        for len in [0usize, 1, 127, 128, 300, 70_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let plain = postcard::to_stdvec(&Plain(data.clone(), 7)).expect("plain");
            let fast = postcard::to_stdvec(&Fast(data.clone(), 7)).expect("fast");
            assert_eq!(plain, fast, "len {len}");
            let back: Fast = postcard::from_bytes(&plain).expect("read plain");
            assert_eq!(back, Fast(data.clone(), 7));
            let back: Plain = postcard::from_bytes(&fast).expect("read fast");
            assert_eq!(back, Plain(data, 7));
        }
    }
}
