//! The log's metadata file: the vote, the last purged `LogId` and the committed `LogId`.
//!
//! One small file, `raft-meta`, replaced crash-atomically: the new contents go to
//! `raft-meta.tmp` (truncated, written, `sync_data`), which is renamed over `raft-meta`, and
//! the root directory is fsynced. After a crash the name points at the old contents or the new
//! ones, whole; the checksum catches anything else (which would be a filesystem bug).
//!
//! Format (version 1): `b"SQRM"`, `u16` version (LE), `u32` body length (LE), the body
//! (postcard of [`Meta`]), `u32` crc32 of everything before it (LE).

use crate::error::{Error, Result};
use crate::types::{LogId, Vote};
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use serde::{Deserialize, Serialize};

/// The metadata file's name (in the store's root directory).
pub const META_FILE: &str = "raft-meta";
/// Where a new version is written before the rename.
pub const META_TMP: &str = "raft-meta.tmp";
const MAGIC: &[u8; 4] = b"SQRM";
const VERSION: u16 = 1;
const HEADER: usize = 4 + 2 + 4;

/// What the metadata file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The last vote saved.
    pub vote: Option<Vote>,
    /// The whole id (term, node, index) of the last purged entry.
    pub last_purged: Option<LogId>,
    /// The committed id as last persisted (optional in openraft; may lag).
    pub committed: Option<LogId>,
    /// Log index `i` is stream sequence `i + 1 + seq_offset`. Zero unless recovery dropped
    /// unacknowledged entries right after the purge point (see `LogCore::open`): stream
    /// sequences never go back, log indices must.
    pub seq_offset: u64,
}

/// Encodes `meta` in the file format.
pub fn encode(meta: &Meta) -> Vec<u8> {
    frame(
        MAGIC,
        &postcard::to_stdvec(meta).expect("postcard encodes plain structs"),
    )
}

/// Decodes the file format; any damage is `Corrupt`.
pub fn decode(bytes: &[u8]) -> Result<Meta> {
    let body = unframe(MAGIC, META_FILE, bytes)?;
    postcard::from_bytes(body).map_err(|e| Error::corrupt(META_FILE, e))
}

/// Reads the metadata file; a missing one is the empty metadata (a new log).
pub fn read<F: Fs>(fs: &F) -> Result<Meta> {
    match read_file(fs, META_FILE)? {
        Some(b) => decode(&b),
        None => Ok(Meta::default()),
    }
}

/// Replaces the metadata file. With `durable` it is durable when this returns; without, only
/// the ablation switches call it so.
#[track_caller]
pub fn write<F: Fs>(fs: &F, meta: &Meta, durable: bool) -> Result<()> {
    replace_file(fs, META_FILE, META_TMP, &encode(meta), durable)
}

/// `magic`, `u16` version, `u32` body length, body, `u32` crc32 of all before.
pub(crate) fn frame(magic: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + body.len() + 4);
    out.extend_from_slice(magic);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The body of a [`frame`]d file, checked (magic, version, length, checksum).
pub(crate) fn unframe<'a>(magic: &[u8; 4], what: &str, bytes: &'a [u8]) -> Result<&'a [u8]> {
    let bad = |r: &str| Error::corrupt(what, r);
    if bytes.len() < HEADER + 4 || &bytes[..4] != magic {
        return Err(bad("bad magic or too short"));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != VERSION {
        return Err(bad(&format!("unknown version {version}")));
    }
    let len = u32::from_le_bytes(bytes[6..10].try_into().expect("4 bytes")) as usize;
    if bytes.len() != HEADER + len + 4 {
        return Err(bad("length mismatch"));
    }
    let (head, crc) = bytes.split_at(HEADER + len);
    if crc32fast::hash(head) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err(bad("checksum mismatch"));
    }
    Ok(&head[HEADER..])
}

/// The whole contents of `name`, or `None` if it does not exist.
pub(crate) fn read_file<F: Fs>(fs: &F, name: &str) -> Result<Option<Vec<u8>>> {
    let f = match fs.open(name, OpenOptions::read_only()) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", name, e)),
    };
    let len = f.len().map_err(|e| Error::io("len", name, e))?;
    let mut buf = vec![0u8; len as usize];
    f.read_exact_at(&mut buf, 0)
        .map_err(|e| Error::io("read", name, e))?;
    Ok(Some(buf))
}

/// A record file of one number, or of none once cleared (`raft-unsynced`, `raft-damaged`):
/// `None` when the file does not exist, `Some(None)` when it is cleared.
pub(crate) fn read_number<F: Fs>(
    fs: &F,
    name: &str,
    magic: &[u8; 4],
) -> Result<Option<Option<u64>>> {
    let Some(b) = read_file(fs, name)? else {
        return Ok(None);
    };
    let body = unframe(magic, name, &b)?;
    if body.is_empty() {
        return Ok(Some(None));
    }
    let n = <[u8; 8]>::try_from(body)
        .map(u64::from_le_bytes)
        .map_err(|_| Error::corrupt(name, "not one number"))?;
    Ok(Some(Some(n)))
}

/// Replaces the record file `name` (through `tmp`) with `number`, or clears it (`None`),
/// durably. Cleared, not removed: a removal whose directory fsync fails is lost for good while
/// the process sees the file gone, and a power cut brings the old record back; a replacement
/// is a new change of the directory, made durable by the next fsync of it.
pub(crate) fn write_number<F: Fs>(
    fs: &F,
    name: &str,
    tmp: &str,
    magic: &[u8; 4],
    number: Option<u64>,
) -> Result<()> {
    let body = number.map(u64::to_le_bytes);
    let body: &[u8] = body.as_ref().map_or(&[], |b| b);
    replace_file(fs, name, tmp, &frame(magic, body), true)
}

/// Replaces `name` crash-atomically with `bytes`: written to `tmp`, `tmp` fsynced, renamed over
/// `name`, the directory fsynced (both in the root). Without `durable` the two fsyncs are left
/// out (ablation only).
#[track_caller]
pub(crate) fn replace_file<F: Fs>(
    fs: &F,
    name: &str,
    tmp: &str,
    bytes: &[u8],
    durable: bool,
) -> Result<()> {
    let opts = OpenOptions::new().write(true).create(true).truncate(true);
    let f = fs.open(tmp, opts).map_err(|e| Error::io("open", tmp, e))?;
    f.write_all_at(bytes, 0)
        .map_err(|e| Error::io("write", tmp, e))?;
    if durable {
        f.sync_data().map_err(|e| Error::io("sync_data", tmp, e))?;
    }
    drop(f);
    fs.rename(tmp, name)
        .map_err(|e| Error::io("rename", tmp, e))?;
    if durable {
        fs.sync_dir("").map_err(|e| Error::io("sync_dir", "", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let m = Meta {
            vote: Some(Vote::new(3, 2)),
            last_purged: Some(openraft::testing::log_id(2, 1, 7)),
            committed: None,
            seq_offset: 3,
        };
        let b = encode(&m);
        assert_eq!(decode(&b).unwrap(), m);
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(decode(&c).is_err(), "flip at {i} not caught");
        }
        assert!(decode(&b[..b.len() - 1]).is_err());
    }
}
