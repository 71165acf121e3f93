//! Fsync ablation switches: **these break durability on purpose.**
//!
//! Only compiled with the `ablation` cargo feature, which the crash-matrix tests and the
//! `seqstore demo` turn on to show, by removing one fsync at a time, that each fsync the store
//! does is the one that keeps the sequence. An application that does not enable the feature
//! cannot reach them: the `Config::ablation` field does not exist without it.

use crate::site::SyncSite;
use std::fmt;
use std::str::FromStr;

/// Which fsync call sites to skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum Ablation {
    /// No switch: the real store.
    #[default]
    Full,
    /// The purge's new block (the last-sequence tombstone) is written but not fsynced: the NATS
    /// default outside `sync: always`.
    NoTombstoneSync,
    /// Files are fsynced but no directory ever is (what nats-server PR #7675 proposed).
    NoDirSync,
    /// Exactly one named fsync call site is skipped, to show what that one fsync protects.
    Skip(SyncSite),
    /// Not an fsync: recovery finishes an interrupted purge the wrong way, moving `purge.new`'s
    /// block files one by one into a new `msgs/` and removing `purge.new`, instead of renaming
    /// the directory. Without a crash it works (every test that recovers once passes); a crash
    /// during or right after that recovery loses the stream, because a file renamed out of a
    /// directory that is then removed, never fsynced, never becomes durable. The negative
    /// control of the crash-during-recovery test (`tests/tests/recovery_crash.rs`).
    MovePurgeBlocks,
    /// Not an fsync: the compact fix reverted. `compact(seq)` returns early, writing and syncing
    /// nothing, when memory already shows every sequence below `seq` removed — although the
    /// removals it sees may be deletes that were never synced, so a crash brings them back and
    /// can lose the last sequence. The negative control of the random-workload explorer
    /// (`tests/tests/random_workloads.rs`).
    CompactEarlyReturn,
    /// Not an fsync: `Store::open` takes no lock ([`crate::Fs::lock`]), so two processes can
    /// open one store and write over each other. The negative control of the multi-process
    /// test (`cli/tests/processes.rs`).
    NoStoreLock,
    /// Not an fsync: the fix for a block name lost with a failed fsync of `msgs/` reverted.
    /// An open not vouched for by `index.db` appends to the newest block it found instead of
    /// beginning one of its own, and a block whose name a failed directory fsync dropped for
    /// good takes what this process acknowledges in it at the next power cut. The negative
    /// control of `tests/tests/robustness_faults.rs`'s failed `msgs/` fsync test.
    AppendToFoundBlock,
}

impl Ablation {
    /// The rows of the demo's ablation table, in table order. The other switches (`Skip` of
    /// one site, `MovePurgeBlocks`, `CompactEarlyReturn`, `NoStoreLock`, `AppendToFoundBlock`)
    /// are the negative controls of single tests.
    pub const ALL: [Ablation; 3] = [
        Ablation::Full,
        Ablation::NoTombstoneSync,
        Ablation::NoDirSync,
    ];
    /// The switch's name as the CLI and reports spell it (`skip:<site>` for one site).
    pub fn name(self) -> String {
        match self {
            Ablation::Full => "full".into(),
            Ablation::NoTombstoneSync => "no-tombstone-sync".into(),
            Ablation::NoDirSync => "no-dir-sync".into(),
            Ablation::Skip(s) => format!("skip:{s}"),
            Ablation::MovePurgeBlocks => "move-purge-blocks".into(),
            Ablation::CompactEarlyReturn => "compact-early-return".into(),
            Ablation::NoStoreLock => "no-store-lock".into(),
            Ablation::AppendToFoundBlock => "append-to-found-block".into(),
        }
    }
}

impl fmt::Display for Ablation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for Ablation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(site) = s.strip_prefix("skip:") {
            return SyncSite::from_name(site)
                .map(Ablation::Skip)
                .ok_or_else(|| format!("unknown fsync site {site:?}"));
        }
        Ablation::ALL
            .into_iter()
            .chain([
                Ablation::MovePurgeBlocks,
                Ablation::CompactEarlyReturn,
                Ablation::NoStoreLock,
                Ablation::AppendToFoundBlock,
            ])
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown ablation {s:?} (full, no-tombstone-sync, no-dir-sync, skip:<site>)"
                )
            })
    }
}

impl Ablation {
    /// Whether this switch removes the fsync at `site`.
    pub fn skips(self, site: SyncSite) -> bool {
        match self {
            Ablation::Full => false,
            Ablation::NoTombstoneSync => site == SyncSite::PurgeTombstone,
            Ablation::NoDirSync => site.is_dir(),
            Ablation::Skip(s) => s == site,
            Ablation::MovePurgeBlocks
            | Ablation::CompactEarlyReturn
            | Ablation::NoStoreLock
            | Ablation::AppendToFoundBlock => false,
        }
    }
}
