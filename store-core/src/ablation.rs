//! Fsync ablation switches: **these break durability on purpose.**
//!
//! Only compiled with the `ablation` cargo feature, which the crash-matrix tests and the
//! `seqstore demo` turn on to show, by removing one fsync at a time, that each fsync the store
//! does is the one that keeps the sequence. An application that does not enable the feature
//! cannot reach them: the `Config::ablation` field does not exist without it.

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
}

impl Ablation {
    /// Every variant, in table order.
    pub const ALL: [Ablation; 3] = [
        Ablation::Full,
        Ablation::NoTombstoneSync,
        Ablation::NoDirSync,
    ];
    /// The switch's name as the CLI and reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            Ablation::Full => "full",
            Ablation::NoTombstoneSync => "no-tombstone-sync",
            Ablation::NoDirSync => "no-dir-sync",
        }
    }
}

impl fmt::Display for Ablation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Ablation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ablation::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| format!("unknown ablation {s:?} (full, no-tombstone-sync, no-dir-sync)"))
    }
}

impl Ablation {
    pub(crate) fn skips_dir_sync(self) -> bool {
        self == Ablation::NoDirSync
    }
    pub(crate) fn skips_tombstone_sync(self) -> bool {
        self == Ablation::NoTombstoneSync
    }
}
