//! `raft-unsynced`: the first stream sequence of the log that a failed write or fsync left in
//! doubt, recorded when it failed and read at the next open (`LogCore::open` drops the log from
//! there on, then clears the record).
//!
//! Cleared by replacing it with an empty record, not by removing it, and again at every open
//! that finds the file: a removal whose directory fsync fails is lost for good (Linux drops a
//! directory's pending changes with the error), while the process, and the next one, see the
//! file gone. A power cut would then bring the old record back after entries were acknowledged
//! at the sequences it names, and the next open would cut them. A replacement is a new change
//! of the directory, made durable by the next open's if not by its own.
//!
//! Format: [`crate::meta`]'s frame with magic `b"SQRU"` around the sequence (`u64`, LE), or
//! around nothing (cleared). Replaced crash-atomically and durably, as the metadata file is.

use crate::error::{Error, Result};
use crate::meta::{frame, read_file, replace_file, unframe};
use seqstore_core::Fs;

/// The file's name (in the log's root directory).
pub const UNSYNCED_FILE: &str = "raft-unsynced";
const UNSYNCED_TMP: &str = "raft-unsynced.tmp";
const MAGIC: &[u8; 4] = b"SQRU";

/// Records that the log is in doubt from stream sequence `from` on, durably; a record from
/// lower down stays.
pub(crate) fn note<F: Fs>(fs: &F, from: u64) -> Result<()> {
    if read(fs)?.is_some_and(|old| old <= from) {
        return Ok(());
    }
    let body = from.to_le_bytes();
    replace_file(fs, UNSYNCED_FILE, UNSYNCED_TMP, &frame(MAGIC, &body), true)
}

/// Whether the file exists (a record, or a cleared one).
pub(crate) fn exists<F: Fs>(fs: &F) -> Result<bool> {
    Ok(read_file(fs, UNSYNCED_FILE)?.is_some())
}

/// The sequence recorded, if the file exists and is not cleared.
pub(crate) fn read<F: Fs>(fs: &F) -> Result<Option<u64>> {
    let Some(b) = read_file(fs, UNSYNCED_FILE)? else {
        return Ok(None);
    };
    let body = unframe(MAGIC, UNSYNCED_FILE, &b)?;
    if body.is_empty() {
        return Ok(None); // cleared
    }
    let from = <[u8; 8]>::try_from(body)
        .map(u64::from_le_bytes)
        .map_err(|_| Error::corrupt(UNSYNCED_FILE, "not one sequence"))?;
    if from == 0 {
        return Err(Error::corrupt(UNSYNCED_FILE, "sequence 0"));
    }
    Ok(Some(from))
}

/// Clears the record, durably (once the log no longer holds what it put in doubt): an empty
/// record replaces it (see the module doc for why not a removal).
pub(crate) fn clear<F: Fs>(fs: &F) -> Result<()> {
    replace_file(fs, UNSYNCED_FILE, UNSYNCED_TMP, &frame(MAGIC, &[]), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seqstore_fault_fs::{FaultFs, Model};

    #[test]
    fn the_lowest_sequence_in_doubt_is_kept_until_cleared() {
        let fs = FaultFs::new(Model::Posix);
        assert_eq!(read(&fs).unwrap(), None);
        note(&fs, 9).unwrap();
        note(&fs, 12).unwrap();
        assert_eq!(read(&fs).unwrap(), Some(9));
        note(&fs, 4).unwrap();
        assert_eq!(read(&fs).unwrap(), Some(4));
        clear(&fs).unwrap();
        assert_eq!(read(&fs).unwrap(), None);
        assert!(exists(&fs).unwrap());
        note(&fs, 12).unwrap();
        assert_eq!(read(&fs).unwrap(), Some(12));
        clear(&fs).unwrap();
        clear(&fs).unwrap();
        assert_eq!(read(&fs).unwrap(), None);
    }
}
