//! How records are delimited in a run of bytes: each begins with its length and ends with the
//! crc32 of everything before the crc (the layout is in `record`). This is all of the format
//! that a file's checksum fast paths (`fs::FastPaths::crc32_ranges`, `read_framed_at`) and the
//! wasm host's framed reads need, so it depends on nothing: `fs` uses it without reaching the
//! record codec, whose errors are the store's.

// Parses bytes read from a disk: no index that a damaged file could put out of range.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

/// Fixed part of a record (header and crc): the least a length field can say.
pub const REC_OVERHEAD: usize = 36;
/// The largest record the decoder accepts, whatever the configuration: a length field beyond
/// it is damage, not a record, so a hostile 4 GiB length never allocates 4 GiB.
pub const HARD_MAX_RECORD: usize = 64 << 20;

/// The length field at the start of `b`, if it holds 4 bytes.
#[inline(always)]
pub(crate) fn len_field(b: &[u8]) -> Option<usize> {
    b.first_chunk::<4>()
        .map(|l| u32::from_le_bytes(*l) as usize)
}

/// A crc32 (IEEE) hasher. `crc32fast::Hasher::new` detects the CPU's features on every call
/// (~18 instructions, 3% of a rebuild's user time for 180-byte records); a hasher made once
/// and cloned keeps the implementation it chose.
pub(crate) fn crc32_hasher() -> crc32fast::Hasher {
    static PROTO: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    PROTO.get_or_init(crc32fast::Hasher::new).clone()
}

/// crc32 (IEEE) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut h = crc32_hasher();
    h.update(bytes);
    h.finalize()
}

/// Walks the whole records at the start of `buf` by their length fields alone: calls `each`
/// with the start of each and the bytes its crc covers (all but the crc). Stops at the first
/// length out of range (a zero: the end of the data) or past the end of `buf`.
#[inline(always)]
fn walk_frames<'a>(buf: &'a [u8], mut each: impl FnMut(usize, &'a [u8])) {
    let mut p = 0usize;
    while let Some(rest) = buf.get(p..) {
        let Some(l) = len_field(rest) else { break };
        if !(REC_OVERHEAD..=HARD_MAX_RECORD).contains(&l) {
            break;
        }
        let Some((covered, _crc)) = rest.get(..l).and_then(|r| r.split_last_chunk::<4>()) else {
            break;
        };
        each(p, covered);
        p += l;
    }
}

/// Frames the whole records at the start of `buf` by their length fields alone: appends to
/// `out`, for each, `(start, len - 4)`: the bytes its crc covers. Stops at the first length
/// out of range (a zero: the end of the data) or past the end of `buf`. The fields are not
/// checked: a caller decodes each record before it uses it (a wrong frame only wastes a
/// checksum).
pub fn frame(buf: &[u8], out: &mut Vec<(u32, u32)>) {
    walk_frames(buf, |p, covered| {
        // A record is at most HARD_MAX_RECORD bytes; a buffer of records is a read, far
        // below 4 GiB (the caller's chunk): the offsets fit in u32.
        debug_assert!(p + covered.len() + 4 <= u32::MAX as usize);
        out.push((p as u32, covered.len() as u32));
    });
}

/// Appends to `out` the crc32 of each record [`frame`] finds at the start of `buf`, in order:
/// what the wasm host computes for its guest's reads (`fs::FastPaths::read_framed_at`).
pub fn framed_crcs(buf: &[u8], out: &mut Vec<u32>) {
    walk_frames(buf, |_, covered| out.push(crc32(covered)));
}
