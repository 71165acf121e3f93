//! `raft-unsynced`: the first stream sequence of the log that a failed write or fsync left in
//! doubt, recorded when it failed and read at the next open (`LogCore::open` drops the log from
//! there on, then removes the file).
//!
//! Format: [`crate::meta`]'s frame with magic `b"SQRU"` around the sequence (`u64`, LE).
//! Replaced crash-atomically and durably, as the metadata file is.

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

/// The sequence recorded, if the file exists.
pub(crate) fn read<F: Fs>(fs: &F) -> Result<Option<u64>> {
    let Some(b) = read_file(fs, UNSYNCED_FILE)? else {
        return Ok(None);
    };
    let body = unframe(MAGIC, UNSYNCED_FILE, &b)?;
    let from = <[u8; 8]>::try_from(body)
        .map(u64::from_le_bytes)
        .map_err(|_| Error::corrupt(UNSYNCED_FILE, "not one sequence"))?;
    if from == 0 {
        return Err(Error::corrupt(UNSYNCED_FILE, "sequence 0"));
    }
    Ok(Some(from))
}

/// Removes the record, durably (once the log no longer holds what it put in doubt).
pub(crate) fn remove<F: Fs>(fs: &F) -> Result<()> {
    match fs.remove_file(UNSYNCED_FILE) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("remove_file", UNSYNCED_FILE, e)),
    }
    fs.sync_dir("").map_err(|e| Error::io("sync_dir", "", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use seqstore_fault_fs::{FaultFs, Model};

    #[test]
    fn the_lowest_sequence_in_doubt_is_kept_until_removed() {
        let fs = FaultFs::new(Model::Posix);
        assert_eq!(read(&fs).unwrap(), None);
        note(&fs, 9).unwrap();
        note(&fs, 12).unwrap();
        assert_eq!(read(&fs).unwrap(), Some(9));
        note(&fs, 4).unwrap();
        assert_eq!(read(&fs).unwrap(), Some(4));
        remove(&fs).unwrap();
        assert_eq!(read(&fs).unwrap(), None);
        remove(&fs).unwrap();
    }
}
