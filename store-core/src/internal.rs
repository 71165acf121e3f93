//! **Not a stable API.** What seqstore's own crates need of the store beyond the embedding API:
//! the on-disk byte layouts (for the wasm host, which encodes and decodes records itself, the
//! fuzz targets and the tests that forge files), the directory's layout constants, the fsync
//! sites, the admission check the wasm host predicts the guest's answers with, the store's
//! hooks for a host that moves records as bytes, and how to call a file's fast paths (for a
//! host or guest that forwards files). Behind the `internal` feature: an application
//! that does not ask for it cannot reach any of this, and a release may change all of it.

pub use crate::admit::Admission;
#[cfg(feature = "crypt")]
pub use crate::crypt::NonceLog;
#[cfg(all(feature = "crypt", feature = "ablation"))]
pub use crate::crypt::SeededEntropy;
pub use crate::store::FxHasher;
pub use crate::store::{
    is_lock_name, lock_store, INDEX_FILE, INDEX_TMP, LOCK_FILE, MSGS_DIR, PURGE_NEW, PURGE_OLD,
    RESTORE_STAGE, SNAPSHOT_VERSION,
};
pub use crate::store::{SyncSite, SYNC_SITES};

/// How to call a file's optional fast paths ([`crate::fs::FastPaths`]): the offered one, or
/// what its default does.
pub mod fast {
    pub use crate::fast::*;
}

/// The record format: block header, record framing, encode and decode.
pub mod record {
    pub use crate::record::*;
}

/// The index snapshot (`index.db`) format.
pub mod index {
    pub use crate::index::*;
}

use crate::{Fs, Result, Store};

/// The store's hooks for a host that moves records as bytes (the wasm guest and its host) or
/// acknowledges writes before the store applies them.
pub trait StoreInternals {
    /// Appends one record encoded by [`record::encode`] (its sequence is the store's next; the
    /// record's own is ignored), with the checks of `Store::append`.
    fn append_encoded(&mut self, rec: &[u8]) -> Result<u64>;
    /// Appends the records packed back to back in `records`; returns how many were applied,
    /// and the first error (the rest are not applied).
    fn append_encoded_run(&mut self, records: &[u8]) -> (usize, Result<()>);
    /// `get_batch`, the messages' records appended to `out` as stored; returns how many.
    fn get_batch_records(
        &mut self,
        from_seq: u64,
        filter: &str,
        max_msgs: usize,
        max_bytes: u64,
        out: &mut Vec<u8>,
    ) -> Result<usize>;
    /// Marks the store poisoned: every write is refused (`Error::Poisoned`) until reopened,
    /// as after a failed write or fsync. For a host that acknowledged writes before the store
    /// applied them and saw one of them fail.
    fn poison(&mut self);
    /// Messages whose index entries are loaded: in sealed blocks, and in all.
    fn loaded_entries(&self) -> (u64, u64);
}

impl<F: Fs> StoreInternals for Store<F> {
    fn append_encoded(&mut self, rec: &[u8]) -> Result<u64> {
        Store::append_encoded(self, rec)
    }
    fn append_encoded_run(&mut self, records: &[u8]) -> (usize, Result<()>) {
        Store::append_encoded_run(self, records)
    }
    fn get_batch_records(
        &mut self,
        from_seq: u64,
        filter: &str,
        max_msgs: usize,
        max_bytes: u64,
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        Store::get_batch_records(self, from_seq, filter, max_msgs, max_bytes, out)
    }
    fn poison(&mut self) {
        Store::poison(self)
    }
    fn loaded_entries(&self) -> (u64, u64) {
        Store::loaded_entries(self)
    }
}
