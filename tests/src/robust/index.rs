//! The `index_decode` target: arbitrary `index.db` contents through its decoder and checks.

use super::*;

/// `Snapshot::decode` on arbitrary bytes, raw and wrapped in a valid magic, version and
/// crc (so the fuzzer reaches the body parser): `Ok` only for what `encode` writes (exact
/// round trip), else a `Corrupt` naming index.db at an offset inside the input. Counts are
/// bounded by the bytes left, so no input allocates more than it holds.
pub fn fuzz_index_decode(data: &[u8]) {
    check_index(data);
    check_index(&wrap_index(data));
}

/// `SQIX`, the current version, `body`, crc32: an index.db that passes the magic, version and crc
/// checks whatever `body` holds.
pub fn wrap_index(body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(body.len() + 12);
    v.extend_from_slice(&INDEX_MAGIC);
    v.extend_from_slice(&INDEX_VERSION.to_le_bytes());
    v.extend_from_slice(body);
    let crc = crc32(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v
}

/// Recomputes the trailing crc32 of an index.db image in place.
pub fn fix_index_crc(v: &mut [u8]) {
    if v.len() >= 4 {
        let n = v.len();
        let crc = crc32(&v[..n - 4]);
        v[n - 4..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// crc32 (IEEE) through the record encoder's own implementation, so this crate needs no
/// crc dependency of its own: a tombstone record's last 4 bytes are the crc of its first 32.
pub fn crc32(bytes: &[u8]) -> u32 {
    // crc32 of arbitrary bytes via the public API is not available; compute it directly
    // (bitwise, the IEEE reflected polynomial; inputs here are small)
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn check_index(b: &[u8]) {
    match Snapshot::decode("index.db", b) {
        // in the layout version it was read as (1, without the ttl section, is still read)
        Ok(s) => {
            let version = u32::from_le_bytes(b[4..8].try_into().expect("decoded: 4 bytes"));
            assert!(
                s.encode_version(version) == b,
                "accepted index.db (version {version}) does not round-trip"
            )
        }
        Err(Error::Corrupt { file, offset, .. }) => {
            assert_eq!(file, "index.db");
            assert!(offset <= b.len() as u64, "offset {offset} past {}", b.len());
        }
        Err(e) => panic!("index decode: unexpected error {e:?}"),
    }
}
