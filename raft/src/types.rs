//! The openraft type configuration of the stream service: what a log entry asks the state
//! machine to do ([`Request`]) and what applying it returned ([`Response`]).
//!
//! Every request carries `ts`, the leader's clock (ns since the epoch) when it proposed the
//! entry. The state machine's time is the latest `ts` it applied (it never goes back), and
//! every store runs on a clock showing it, so every timestamp a store writes (a message's, a
//! tombstone's, a skip's), every age it computes (`max_age`) and every ttl it applies come
//! from the leaders, never from a follower's clock: the same entry gives the same bytes on
//! every replica.

use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::time::Duration;

/// A write to the stream service: one log entry's payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The leader's clock when it proposed the entry, ns since the epoch.
    pub ts: i64,
    /// What to do.
    pub op: Op,
}

/// The largest encoded [`Request`] a log entry holds (the log's messages are limited to
/// store-core's upper bound for a payload, 32 MiB; 4 KiB of it is left for the entry's own fields).
/// A proposal above it would fail the leader's log write, and openraft stops a node whose
/// storage fails: check [`Request::encoded_len`] before proposing.
pub const MAX_REQUEST_BYTES: usize = (32 << 20) - 4096;

impl Request {
    /// The request's size in the log (postcard), to check against [`MAX_REQUEST_BYTES`].
    pub fn encoded_len(&self) -> usize {
        // postcard into a counting sink: no allocation of the payloads' size
        postcard::serialize_with_flavor(self, postcard::ser_flavors::Size::default())
            .unwrap_or(usize::MAX)
    }

    /// Whether the request fits in one log entry ([`MAX_REQUEST_BYTES`]).
    pub fn fits_in_log(&self) -> bool {
        self.encoded_len() <= MAX_REQUEST_BYTES
    }
}

/// The operations. Sequences are never in a request that assigns one: an `Append` gets the
/// stream's `last_seq + 1` at apply time, the same on every replica because every replica
/// applies the same log in order from the same state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Op {
    /// Creates a stream (an error response if it exists).
    CreateStream {
        /// Its name: 1 to 64 of `A-Z a-z 0-9 _ -`.
        name: String,
        /// Its limits.
        config: StreamConfig,
    },
    /// Removes a stream and all its messages.
    DeleteStream {
        /// The stream.
        name: String,
    },
    /// Stores a message at the stream's next sequence, stamped with the state machine's time
    /// (the latest `ts` applied) or the stream's last timestamp if that is later.
    Append {
        /// The stream.
        stream: String,
        /// The message's subject.
        subject: String,
        /// Its headers (opaque bytes).
        headers: Vec<u8>,
        /// Its payload.
        payload: Vec<u8>,
        /// Expires this long after its timestamp (0: never): hidden from reads from then on,
        /// removed by the next `Expire` (times are the log's, see `crate::streams`).
        ttl_ms: u64,
    },
    /// Removes one message (`Store::delete`).
    Delete {
        /// The stream.
        stream: String,
        /// The message's sequence.
        seq: u64,
    },
    /// Removes every message; the sequence goes on (`Store::purge`).
    Purge {
        /// The stream.
        stream: String,
    },
    /// `Store::purge_ex`: the oldest messages matching `filter` below `up_to_seq` (0: no
    /// bound), keeping the `keep` newest matching ones.
    PurgeEx {
        /// The stream.
        stream: String,
        /// A subject filter (`>` or empty: all).
        filter: String,
        /// Exclusive upper bound (0: none).
        up_to_seq: u64,
        /// How many of the newest matching messages stay.
        keep: u64,
    },
    /// Removes every message below `up_to` (`Store::compact`).
    Compact {
        /// The stream.
        stream: String,
        /// The new lowest sequence.
        up_to: u64,
    },
    /// Removes every message above `seq`; the next append gets `seq + 1` (`Store::truncate`).
    Truncate {
        /// The stream.
        stream: String,
        /// The last sequence kept.
        seq: u64,
    },
    /// Applies the stream's `max_age` and removes its expired ttl messages at the request's
    /// `ts` (the leader decides when messages expire; a follower's clock never does).
    Expire {
        /// The stream.
        stream: String,
    },
    /// Marks the next `count` sequences used without a message (`Store::skip_many`).
    Skip {
        /// The stream.
        stream: String,
        /// How many (at least 1).
        count: u64,
    },
    /// Several operations in one log entry, applied in order at the entry's `ts`, exactly as
    /// the same operations in consecutive entries with that `ts` would be; answered by
    /// [`Response::Batch`], one response each. A server gathers concurrent clients' writes
    /// into one batch because openraft 0.9 writes (and fsyncs) each proposal on its own: one
    /// entry per fsync, whatever the number of clients. A batch inside a batch is refused
    /// (its response is [`ApplyError::Refused`]), the others still apply.
    Batch {
        /// The operations, in order.
        ops: Vec<Op>,
    },
}

/// What a stream keeps: seqstore's limits (zero is unlimited for each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamConfig {
    /// Most messages kept.
    pub max_msgs: u64,
    /// Most bytes kept.
    pub max_bytes: u64,
    /// Oldest age kept, in ms of the leader's clock.
    pub max_age_ms: u64,
    /// Most messages kept per subject.
    pub max_msgs_per_subject: u64,
    /// Refuse new messages when full, instead of removing the oldest.
    pub discard_new: bool,
    /// Largest payload accepted (0: store-core's default).
    pub max_payload: u32,
}

impl StreamConfig {
    /// The store-core configuration of a stream's store. Not fsynced on append: the raft log
    /// is the durable record, and the state machine's checkpoint is its snapshot file.
    pub fn store_config(&self) -> seqstore_core::Config {
        let mut limits = seqstore_core::Limits::default();
        limits.max_msgs = self.max_msgs;
        limits.max_bytes = self.max_bytes;
        limits.max_age = Duration::from_millis(self.max_age_ms);
        limits.max_msgs_per_subject = self.max_msgs_per_subject;
        limits.discard = if self.discard_new {
            seqstore_core::Discard::New
        } else {
            seqstore_core::Discard::Old
        };
        let mut cfg = seqstore_core::Config::default()
            .with_sync(seqstore_core::SyncPolicy::Never)
            .with_limits(limits);
        if self.max_payload > 0 {
            cfg = cfg.with_max_payload(self.max_payload);
        }
        cfg
    }
}

/// What applying a [`Request`] returned. Errors here are the request's own and deterministic
/// (the same on every replica, from the same state): the state machine applied the entry (as
/// a no-op) and goes on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Response {
    /// A blank or membership entry.
    #[default]
    None,
    /// The stream was created or deleted.
    Done,
    /// The message's sequence (`Append`), or the stream's new last sequence (`Skip`,
    /// `Truncate`).
    Seq(u64),
    /// How many messages were removed (`Delete`: 1; purges, compact, expire).
    Removed(u64),
    /// The request was refused; nothing changed.
    Err(ApplyError),
    /// One response per operation of an [`Op::Batch`], in order.
    Batch(Vec<Response>),
}

/// Why a request was refused. Decided only from the request and the replicated state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// No stream of that name.
    #[error("no stream {0:?}")]
    UnknownStream(String),
    /// `CreateStream` of a name in use.
    #[error("stream {0:?} exists")]
    StreamExists(String),
    /// A stream name outside `[A-Za-z0-9_-]{1,64}`.
    #[error("invalid stream name {0:?}")]
    InvalidStreamName(String),
    /// The store refused the operation (an invalid subject or filter, a message too large, a
    /// full stream that discards new messages, a missing sequence, a bad argument).
    #[error("refused: {0}")]
    Refused(String),
}

openraft::declare_raft_types!(
    /// seqstore-raft's type configuration: u64 node ids, `BasicNode` (an address), the
    /// stream requests, in-memory snapshot data (the snapshot file is read whole), and tokio
    /// with a seedable generator ([`crate::runtime`]).
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = crate::runtime::Runtime,
);

/// A log entry of this configuration.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id (term, node, index).
pub type LogId = openraft::LogId<u64>;
/// A vote (term, node, committed).
pub type Vote = openraft::Vote<u64>;
