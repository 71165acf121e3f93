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
use crate::meta::{read_number, write_number};
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
    write_number(fs, UNSYNCED_FILE, UNSYNCED_TMP, MAGIC, Some(from))
}

/// `None` if the file does not exist; else the sequence recorded, `None` once cleared.
pub(crate) fn read_record<F: Fs>(fs: &F) -> Result<Option<Option<u64>>> {
    let r = read_number(fs, UNSYNCED_FILE, MAGIC)?;
    if r == Some(Some(0)) {
        return Err(Error::corrupt(UNSYNCED_FILE, "sequence 0"));
    }
    Ok(r)
}

/// The sequence recorded, if the file exists and is not cleared.
pub(crate) fn read<F: Fs>(fs: &F) -> Result<Option<u64>> {
    Ok(read_record(fs)?.flatten())
}

/// Clears the record, durably (once the log no longer holds what it put in doubt): an empty
/// record replaces it (see the module doc for why not a removal).
pub(crate) fn clear<F: Fs>(fs: &F) -> Result<()> {
    write_number(fs, UNSYNCED_FILE, UNSYNCED_TMP, MAGIC, None)
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
        assert_eq!(read_record(&fs).unwrap(), Some(None));
        note(&fs, 12).unwrap();
        assert_eq!(read(&fs).unwrap(), Some(12));
        clear(&fs).unwrap();
        clear(&fs).unwrap();
        assert_eq!(read(&fs).unwrap(), None);
    }
}
