//! `raft-damaged`: the log index through which a node's log must be filled again before the
//! node votes or stands for election, written when recovery found damage to entries that were
//! durable (see `LogCore::open`), cleared once the log holds that index durably again.
//!
//! Damage is told from a power cut by what the log's own records vouch for: every entry
//! record carries, in its headers, the last stream sequence that was durable (an fsync had
//! succeeded) when it was written. A power cut takes only what no fsync covered, so a hole at
//! or below a surviving record's vouched sequence is damage to data at rest (bit rot, a
//! misdirected write), not a power cut. The node may have acknowledged what it lost; until it
//! has it again, its vote could elect a leader without it.
//!
//! Format: [`crate::meta`]'s frame with magic `b"SQRD"` around the index (`u64`, LE), or
//! around nothing (cleared).
//! Replaced crash-atomically and durably, as the metadata file is.

use crate::error::Result;
use crate::meta::{read_number, write_number};
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
    write_number(fs, DAMAGED_FILE, DAMAGED_TMP, MAGIC, Some(through))
}

/// The index recorded, if the file exists and is not cleared.
pub(crate) fn read<F: Fs>(fs: &F) -> Result<Option<u64>> {
    Ok(read_number(fs, DAMAGED_FILE, MAGIC)?.flatten())
}

/// Clears the record, durably (once the log holds the index again), by an empty record, as
/// `raft-unsynced` is cleared: a removal lost with a failed directory fsync would come back
/// with a power cut and hold the node again.
pub(crate) fn clear<F: Fs>(fs: &F) -> Result<()> {
    write_number(fs, DAMAGED_FILE, DAMAGED_TMP, MAGIC, None)
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
    fn the_highest_index_to_refill_is_kept_until_cleared() {
        let fs = FaultFs::new(Model::Posix);
        assert_eq!(read(&fs).unwrap(), None);
        note(&fs, 9).unwrap();
        note(&fs, 4).unwrap();
        assert_eq!(read(&fs).unwrap(), Some(9));
        note(&fs, 12).unwrap();
        assert_eq!(read(&fs).unwrap(), Some(12));
        clear(&fs).unwrap();
        assert_eq!(read(&fs).unwrap(), None);
        clear(&fs).unwrap();
        assert_eq!(vouched(b""), 0);
        assert_eq!(vouched(&7u64.to_le_bytes()), 7);
    }
}
