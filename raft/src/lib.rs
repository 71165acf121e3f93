//! seqstore replicated with openraft: the log storage and the state machine.
//!
//! [`LogStore`] implements openraft 0.9's `RaftLogStorage` and `RaftLogReader` on a store-core
//! [`seqstore_core::Store`], generic over [`seqstore_core::Fs`] (host-fs in production, fault-fs in
//! the crash tests). [`StreamStateMachine`] is the state machine: seqstore streams, one store
//! per stream, applied with the sequences and timestamps the log fixes, and snapshots made of
//! `Store::snapshot_to` images. The node (HTTP transport, client API, admin calls) is the
//! `seqstore-server` crate. See the crate README for the design and what is fsynced when.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod adapter;
pub mod batch;
pub mod bytes;
pub mod damaged;
pub mod error;
pub mod floor;
pub mod gate;
pub mod log;
pub mod meta;
pub mod runtime;
pub mod sharedfs;
pub mod streams;
pub mod types;
pub mod unsynced;

pub use adapter::{LogReader, LogStore};
pub use error::{Error, Result};
pub use floor::SnapshotFloor;
pub use log::{LogConfig, LogCore};
pub use streams::{StreamCore, StreamStateMachine};
pub use types::{
    store_config, AckPolicy, ApplyError, ConsumerConfig, ConsumerInfo, Delivery, Entry, LogId, Op,
    Request, Response, StreamConfig, TypeConfig, Vote, MAX_REQUEST_BYTES,
};
