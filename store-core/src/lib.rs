//! seqstore's storage core: a message-stream store (append with a monotonically rising
//! sequence number, subjects, tombstones, purge, recovery) modelled on the NATS JetStream file
//! store, written against the [`Fs`] trait so the same code runs on a real directory, inside a
//! WASI sandbox, or on a filesystem that simulates power loss.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use seqstore_core::*;
//! # fn demo<F: Fs>(fs: F) -> Result<(), Error> {
//! let mut store = Store::builder(fs).config(Config::default()).open()?;
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
// Production code does not panic on what it reads from a disk or is given by a caller: no
// unwrap, expect or panic outside tests. An invariant that truly holds (a block whose entries
// were just loaded) is allowed where it is used, with a comment naming it; the public test kit
// (`conformance`) allows them, its panics being its assertions. Indexing is denied in the
// modules that parse bytes from a disk (`deny(clippy::indexing_slicing)` at their top: record,
// index, the block scan, the consumer codec and journal, the encryption layer's format and
// framed file), where an index out of range on a damaged file would be a panic on bad input.
// Elsewhere (some 230 sites) it indexes the store's own tables (blocks, entries, its write
// buffer) by positions it computed, and stays allowed. `not(test)`: tests assert by panicking.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

// Private modules: the crate root re-exports the embedding API below, and `internal` (feature
// `internal`) the rest that seqstore's own crates use; without that feature, the parts only it
// reaches are allowed to look unused.
#[cfg(feature = "ablation")]
pub mod ablation;
#[cfg_attr(not(feature = "internal"), allow(dead_code, unused_imports))]
mod admit;
mod clock;
mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
mod consumer;
#[cfg(feature = "crypt")]
#[cfg_attr(not(feature = "internal"), allow(dead_code, unused_imports))]
mod crypt;
mod error;
mod fast;
mod framing;
pub mod fs;
#[allow(missing_docs)] // an internal format (see `internal::index`)
mod index;
#[cfg(feature = "internal")]
pub mod internal;
mod layer;
#[cfg(test)]
mod memfs;
#[cfg(test)]
mod query_model;
#[cfg_attr(not(feature = "internal"), allow(dead_code, unused_imports))]
mod record;
mod shared;
#[cfg_attr(not(feature = "internal"), allow(dead_code, unused_imports))]
mod site;
#[cfg(test)]
mod snapshot_tests;
#[cfg_attr(not(feature = "internal"), allow(dead_code, unused_imports))]
mod store;
pub mod subject;
pub mod surface;
#[cfg(test)]
mod tail_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_write;
mod verify;

#[cfg(feature = "ablation")]
pub use ablation::Ablation;
pub use clock::{Clock, ManualClock};
pub use config::{Config, Discard, Limits, RecoveryMode, StreamConfig, SyncPolicy};
#[cfg(feature = "serde")]
pub use consumer::PendingAck;
pub use consumer::{
    AckPolicy, ConsumerConfig, ConsumerSettings, ConsumerState, Pending, SequencePair,
};
#[cfg(feature = "crypt")]
pub use crypt::{CryptFile, CryptFs, Entropy, OsEntropy};
pub use error::{Error, Result};
pub use fs::Fs;
pub use layer::{Cipher, Compression, Encryption, LayerConfig};
pub use shared::SharedStore;
pub use store::{restore, SnapshotInfo};
pub use store::{
    Cut, FilteredState, OutOfOrderRecord, RecoveryReport, SeqRange, SkippedRecord, Store,
    StoreBuilder, StoredMsg, StreamState,
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
    (seed, move || splitmix64(&mut x))
}

/// One splitmix64 step: advances `x` and returns the next 64 bits. The store's own copy of the
/// workspace's seeded generator (`seqstore_fault_fs::Rng`, which depends on this crate), for
/// `seeded_rng` and the crypt layer's seeded entropy.
#[cfg(any(test, feature = "ablation"))]
#[cfg_attr(all(not(test), not(feature = "crypt")), allow(dead_code))]
pub(crate) fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
