//! The purge proof: crash workloads, the invariant checker, and the fsync ablation matrix.
//!
//! A workload is a list of [`Step`]s run against a store on a live [`FaultFs`]. The crash
//! explorer (fault-fs) crashes at every operation boundary, builds every crash image the model
//! allows there, and hands each to [`check_image`], which reopens the store and asserts the
//! invariants below against what the workload had been told before the crash (the
//! [`Event`] journal):
//!
//! 1. after `purge()` returned: recovered `last_seq >= L` and nothing at or below L comes back;
//! 2. during a purge: the old state (what of it was durable) or the purged one, never 0,0 once
//!    a message was durable, never a mix (every durable old message, or none of the old ones);
//! 3. every message whose durability was acknowledged (`Always`, or `sync()` returned) is present
//!    with its payload unless a durable delete/purge/compact/truncate removed it, and every
//!    present message is one that was appended at that sequence and not durably removed;
//! 4. recovery never panics and never errors on a crash image;
//! 5. the first append after recovery gets `recovered last_seq + 1`.
//!
//! The same code drives the native store and, through [`StreamOps`], any other backend (the
//! wasm guest). [`recovery`] crashes the recovery of each crash image in turn (recovery of
//! the recovery).
#![forbid(unsafe_code)]

use seqstore_core::surface::StreamStore;
use seqstore_core::{
    Ablation, Config, ConsumerConfig, ConsumerState, Error, ManualClock, Store, StreamState,
    SyncPolicy,
};
use seqstore_fault_fs::{CrashCtx, ExploreConfig, FaultFs, Journal, Model, Report, Violation};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

mod backend;
mod cells;
mod checker;
mod consumers;
mod layered;
mod runner;
mod workload;

pub mod random;
pub mod recovery;
pub mod robust;

pub use backend::*;
pub use cells::*;
pub use checker::*;
use consumers::*;
pub use layered::*;
pub use runner::*;
pub use workload::*;
