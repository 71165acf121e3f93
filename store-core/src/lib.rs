//! seqstore's storage core: a message-stream store (append with a monotonically rising
//! sequence number, subjects, tombstones, purge, recovery) modelled on the NATS JetStream file
//! store, written against the [`Fs`] trait so the same code runs on a real directory, inside a
//! WASI sandbox, or on a filesystem that simulates power loss.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use seqstore_core::*;
//! # fn demo<F: Fs>(fs: F) -> Result<(), Error> {
//! let mut store = Store::open(fs, Config::default())?;
//! let seq = store.append("orders.eu", b"", b"hello")?;
//! assert_eq!(store.get(seq)?.payload, b"hello");
//! store.purge()?; // the sequence survives: the next append gets seq + 1
//! assert_eq!(store.append("orders.eu", b"", b"again")?, seq + 1);
//! store.close()
//! # }
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "ablation")]
pub mod ablation;
mod admit;
pub mod clock;
pub mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod consumer;
pub mod crypt;
pub mod error;
pub mod fs;
// The byte layouts of index.db and of records, public for the wasm host (which encodes
// records itself), the fuzz targets and the tests that forge files: not a stable API, so
// hidden from the docs. What an embedder uses is re-exported below.
#[allow(missing_docs)]
#[doc(hidden)]
pub mod index;
#[cfg(test)]
mod memfs;
#[cfg(test)]
mod query_model;
#[doc(hidden)]
pub mod record;
mod shared;
mod site;
#[cfg(test)]
mod snapshot_tests;
#[doc(hidden)]
pub mod store;
pub mod subject;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_write;
pub mod verify;

#[cfg(feature = "ablation")]
pub use ablation::Ablation;
pub use admit::Admission;
pub use clock::{Clock, ManualClock};
pub use config::{Config, Discard, Limits, RecoveryMode, SyncPolicy};
pub use consumer::{AckPolicy, ConsumerConfig, ConsumerState, Pending, SequencePair};
pub use crypt::{Cipher, Compression, CryptFs, Encryption};
pub use error::{Error, Result};
pub use fs::{DirEntry, Fs, FsFile, FsLock, LockError, LockHolder, OpenOptions, WriteSyncError};
pub use shared::SharedStore;
pub use store::{
    is_lock_name, Cut, INDEX_FILE, INDEX_TMP, LOCK_FILE, MSGS_DIR, PURGE_NEW, PURGE_OLD,
};
pub use store::{lock_store, restore, SnapshotInfo, RESTORE_STAGE, SNAPSHOT_VERSION};
pub use store::{
    FilteredState, OutOfOrderRecord, RecoveryReport, SeqRange, SkippedRecord, Store, StoredMsg,
    StreamState, SyncSite, SYNC_SITES,
};
pub use verify::{verify, IndexStatus, Problem, VerifyReport};

/// The seed of a randomized test (`SEQSTORE_SEED` if set, to replay a failure; else
/// `default`) and a splitmix64 generator over it, the same on every platform. The caller
/// prints the seed in its failure messages.
#[cfg(test)]
pub(crate) fn seeded_rng(default: u64) -> (u64, impl FnMut() -> u64) {
    let seed = std::env::var("SEQSTORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    let mut x = seed;
    let next = move || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (seed, next)
}
