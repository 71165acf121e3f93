//! Fuzz target bodies and the helpers the robustness tests share.
//!
//! The bodies of the fuzz targets live here so that two harnesses share them: cargo-fuzz (the
//! separate `fuzz/` workspace calls `seqstore_crash_matrix::robust::fuzz_*`) and plain `cargo test`
//! (`tests/tests/robustness_corpus.rs` runs them on every file of `fuzz/corpus/<target>/`).

use super::{check_image, config, payload, payload_id, Event, Native, Runner, Step};
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_core::internal::index::{Snapshot, INDEX_MAGIC, INDEX_VERSION};
use seqstore_core::internal::record::{
    self, decode, encode, encoded_len, Decoded, Kind, HARD_MAX_RECORD, REC_OVERHEAD,
};
use seqstore_core::{
    Ablation, Config, Error, ManualClock, RecoveryMode, Store, StreamState, SyncPolicy,
};
use seqstore_fault_fs::{ExploreConfig, FaultFs, Journal, Model};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// A fuzz target body.
pub type Target = fn(&[u8]);

/// The fuzz targets, by the name of their `fuzz/fuzz_targets/<name>.rs` and corpus folder.
pub const TARGETS: &[(&str, Target)] = &[
    ("record_decode", fuzz_record_decode),
    ("index_decode", fuzz_index_decode),
    ("recover_dir", fuzz_recover_dir),
    ("model_ops", fuzz_model_ops),
    ("restore_archive", fuzz_restore_archive),
];

/// A cursor over fuzz input that yields zeros once it is exhausted (so every input is a
/// valid program).
#[derive(Debug)]
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// Reads `data` from the start.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }
    /// Whether every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    /// One byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    /// Two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    /// Four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// Eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }
    /// A length-prefixed (u16) run of at most `max` bytes.
    pub fn bytes(&mut self, max: usize) -> &'a [u8] {
        let n = (self.u16() as usize) % (max + 1);
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos = start + n;
        &self.data[start..end]
    }
    /// `k % n` for a byte `k` (0 when `n == 0`).
    pub fn pick(&mut self, n: usize) -> usize {
        let k = self.u8() as usize;
        if n == 0 {
            0
        } else {
            k % n
        }
    }
}

/// The text of a panic payload.
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic)".into())
}

mod archive;
mod dirs;
mod index;
mod model;
mod records;

pub use archive::*;
pub use dirs::*;
pub use index::*;
pub use model::*;
pub use records::*;
