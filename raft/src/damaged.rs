//! `raft-damaged`: the log index through which a node's log must be filled again before the
//! node votes or stands for election, written when recovery found damage to entries that were
//! durable (see `LogCore::open`), removed once the log holds that index durably again.
//!
//! Damage is told from a power cut by what the log's own records vouch for: every entry
//! record carries, in its headers, the last stream sequence that was durable (an fsync had
//! succeeded) when it was written. A power cut takes only what no fsync covered, so a hole at
//! or below a surviving record's vouched sequence is damage to data at rest (bit rot, a
//! misdirected write), not a power cut. The node may have acknowledged what it lost; until it
//! has it again, its vote could elect a leader without it.
//!
//! Format: [`crate::meta`]'s frame with magic `b"SQRD"` around the index (`u64`, LE).
//! Replaced crash-atomically and durably, as the metadata file is.

use crate::error::{Error, Result};
use crate::meta::{frame, read_file, replace_file, unframe};
use seqstore_core::Fs;

/// The file's name (in the log's root directory).
pub const DAMAGED_FILE: &str = "raft-damaged";
const DAMAGED_TMP: &str = "raft-damaged.tmp";
const MAGIC: &[u8; 4] = b"SQRD";

/// Records, durably, that the log must hold index `through` again; a record of a higher
/// index stays.
pub(crate) fn note<F: Fs>(fs: &F, through: u64) -> Result<()> {
    if read(fs)?.is_some_and(|old| old >= through) {
        return Ok(());
    }
    let body = through.to_le_bytes();
    replace_file(fs, DAMAGED_FILE, DAMAGED_TMP, &frame(MAGIC, &body), true)
}

/// The index recorded, if the file exists.
pub(crate) fn read<F: Fs>(fs: &F) -> Result<Option<u64>> {
    let Some(b) = read_file(fs, DAMAGED_FILE)? else {
        return Ok(None);
    };
    let body = unframe(MAGIC, DAMAGED_FILE, &b)?;
    let through = <[u8; 8]>::try_from(body)
        .map(u64::from_le_bytes)
        .map_err(|_| Error::corrupt(DAMAGED_FILE, "not one index"))?;
    Ok(Some(through))
}

/// Removes the record, durably (once the log holds the index again).
pub(crate) fn remove<F: Fs>(fs: &F) -> Result<()> {
    match fs.remove_file(DAMAGED_FILE) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("remove_file", DAMAGED_FILE, e)),
    }
    fs.sync_dir("").map_err(|e| Error::io("sync_dir", "", e))
}

/// The sequence an entry record's headers vouch for: durable when it was written (empty
/// headers, as a log written before the field existed has them: nothing).
pub(crate) fn vouched(headers: &[u8]) -> u64 {
    <[u8; 8]>::try_from(headers).map_or(0, u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seqstore_fault_fs::{FaultFs, Model};

    #[test]
    fn the_highest_index_to_refill_is_kept_until_removed() {
        let fs = FaultFs::new(Model::Posix);
        assert_eq!(read(&fs).unwrap(), None);
        note(&fs, 9).unwrap();
        note(&fs, 4).unwrap();
        assert_eq!(read(&fs).unwrap(), Some(9));
        note(&fs, 12).unwrap();
        assert_eq!(read(&fs).unwrap(), Some(12));
        remove(&fs).unwrap();
        assert_eq!(read(&fs).unwrap(), None);
        remove(&fs).unwrap();
        assert_eq!(vouched(b""), 0);
        assert_eq!(vouched(&7u64.to_le_bytes()), 7);
    }
}
