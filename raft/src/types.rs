//! The openraft type configuration of the key-value service.

use serde::{Deserialize, Serialize};
use std::io::Cursor;

/// A write to the key-value service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Sets `key` to `value`.
    Set {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
}

/// What applying a [`Request`] returns: the value the key had before.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The previous value, if any.
    pub previous: Option<String>,
}

openraft::declare_raft_types!(
    /// seqstore-raft's type configuration: u64 node ids, `BasicNode` (an address), the
    /// key-value request, and in-memory snapshot data (the snapshot file is read whole).
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log entry of this configuration.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id (term, node, index).
pub type LogId = openraft::LogId<u64>;
/// A vote (term, node, committed).
pub type Vote = openraft::Vote<u64>;
