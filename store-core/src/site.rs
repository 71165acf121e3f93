//! The named fsync call sites. Every fsync the store does is one of these, so the crash matrix
//! can remove each one alone and show what it protects (the `ablation` feature), and reports
//! and errors can name it.

use std::fmt;

macro_rules! sync_sites {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $dir:literal;)*) => {
        /// One fsync call site of the store, of a file's data or of a directory.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum SyncSite {
            $($(#[$doc])* $variant,)*
        }

        impl SyncSite {
            /// Every site, in write-path order (ARCHITECTURE.md numbers them in this order).
            pub const ALL: &'static [SyncSite] = &[$(SyncSite::$variant,)*];

            /// The site's name as reports, the CLI and ARCHITECTURE.md spell it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(SyncSite::$variant => $name,)*
                }
            }

            /// Whether it fsyncs a directory (its entries) rather than a file's data.
            pub const fn is_dir(self) -> bool {
                match self {
                    $(SyncSite::$variant => $dir,)*
                }
            }
        }

        /// Every site's name, in write-path order (`SyncSite::ALL`'s names).
        pub const SYNC_SITES: &[&str] = &[$($name,)*];
    };
}

sync_sites! {
    /// Open: `msgs/` after creating it.
    OpenMsgsDir = "open.msgs-dir", true;
    /// Open: the root, after creating `msgs/`.
    OpenRootDir = "open.root-dir", true;
    /// Open: the root, after removing an `index.db` open rejected, before a block is repaired.
    OpenIndexDir = "open.index-dir", true;
    /// Open: the blocks the limits trimmed at open.
    OpenLimitsData = "open.limits-data", false;
    /// Open: `msgs/` after the limits at open removed blocks.
    OpenLimitsDir = "open.limits-dir", true;
    /// An append's block (the group commit's fsync too).
    AppendData = "append.data", false;
    /// `msgs/` after an append started a block.
    AppendDir = "append.dir", true;
    /// A sealed block's rewrite through the crypt layer, before it is renamed over the block.
    SealData = "seal.data", false;
    /// `SyncPolicy::Always`/`Interval` after a write.
    PolicyData = "policy.data", false;
    /// `msgs/` under the policy's sync.
    PolicyDir = "policy.dir", true;
    /// `Store::sync`.
    SyncData = "sync.data", false;
    /// `msgs/` under `Store::sync`.
    SyncDir = "sync.dir", true;
    /// Blocks written before removing emptied blocks.
    DropBlocksData = "drop-blocks.data", false;
    /// `msgs/` after removing emptied blocks.
    DropBlocksDir = "drop-blocks.dir", true;
    /// An erase's tombstone, before the record is overwritten.
    EraseTombstoneData = "erase.tombstone-data", false;
    /// `msgs/` before an erase overwrites.
    EraseTombstoneDir = "erase.tombstone-dir", true;
    /// A purge's new block holding the last-sequence tombstone (the NATS bug's missing fsync).
    PurgeTombstone = "purge.tombstone", false;
    /// `purge.new/` after its block was created.
    PurgeNewDir = "purge.new-dir", true;
    /// The root after the purge's directory swap.
    PurgeSwapDir = "purge.swap-dir", true;
    /// A filtered purge's tombstones.
    PurgeExData = "purge-ex.data", false;
    /// `msgs/` under a filtered purge.
    PurgeExDir = "purge-ex.dir", true;
    /// A compact's floor record.
    CompactData = "compact.data", false;
    /// `msgs/` under a compact.
    CompactDir = "compact.dir", true;
    /// A truncate's markers (tombstones of what it removes).
    TruncateMarkersData = "truncate.markers-data", false;
    /// `msgs/` under a truncate's markers.
    TruncateMarkersDir = "truncate.markers-dir", true;
    /// A truncate's commit record.
    TruncateCommitData = "truncate.commit-data", false;
    /// `msgs/` under a truncate's commit.
    TruncateCommitDir = "truncate.commit-dir", true;
    /// A skip record.
    SkipData = "skip.data", false;
    /// `msgs/` under a skip.
    SkipDir = "skip.dir", true;
    /// The root after creating `consumers/`.
    ConsumerCreateRootDir = "consumer.create-root-dir", true;
    /// `consumers/` after creating a consumer's journal.
    ConsumerCreateDir = "consumer.create-dir", true;
    /// The consumer journal under the sync policy and in a group commit.
    ConsumerJournalData = "consumer.journal-data", false;
    /// The consumer journal under `Store::sync`.
    ConsumerSyncData = "consumer.sync-data", false;
    /// A consumer checkpoint's temporary file before its rename.
    ConsumerCheckpointData = "consumer.checkpoint-data", false;
    /// `consumers/` after a checkpoint's rename.
    ConsumerCheckpointDir = "consumer.checkpoint-dir", true;
}

impl SyncSite {
    /// The site named `name`, if there is one.
    pub fn from_name(name: &str) -> Option<SyncSite> {
        SyncSite::ALL.iter().copied().find(|s| s.name() == name)
    }
}

impl fmt::Display for SyncSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        assert_eq!(SyncSite::ALL.len(), SYNC_SITES.len());
        for (i, s) in SyncSite::ALL.iter().enumerate() {
            assert_eq!(s.name(), SYNC_SITES[i]);
            assert_eq!(SyncSite::from_name(s.name()), Some(*s));
            assert_eq!(s.is_dir(), s.name().ends_with("dir"), "{s}");
        }
        assert_eq!(SyncSite::from_name("no.such-site"), None);
    }
}
