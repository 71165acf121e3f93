//! seqstore's storage core: a message-stream store (append with a monotonically rising
//! sequence number, subjects, tombstones, purge, recovery) modelled on the NATS JetStream file
//! store, written against the [`Fs`] trait so the same code runs on a real directory, inside a
//! WASI sandbox, or on a filesystem that simulates power loss.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use store_core::*;
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
pub mod clock;
pub mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod error;
pub mod fs;
#[allow(missing_docs)]
pub mod index;
#[cfg(test)]
mod memfs;
pub mod record;
mod shared;
pub mod store;
pub mod subject;
#[cfg(test)]
mod tests;
pub mod verify;

#[cfg(feature = "ablation")]
pub use ablation::Ablation;
pub use clock::{Clock, ManualClock};
pub use config::{Config, Discard, Limits, RecoveryMode, SyncPolicy};
pub use error::{Error, Result};
pub use fs::{DirEntry, Fs, FsFile, OpenOptions, WriteSyncError};
pub use shared::SharedStore;
pub use store::{RecoveryReport, SeqRange, Store, StoredMsg, StreamState, SYNC_SITES};
pub use verify::{verify, IndexStatus, Problem, VerifyReport};
