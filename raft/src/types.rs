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
        #[serde(with = "crate::bytes")]
        headers: Vec<u8>,
        /// Its payload.
        #[serde(with = "crate::bytes")]
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
    /// Creates consumer `name` on `stream` (`Store::consumer_add`): [`Response::Done`]; the
    /// same again is `Done` too, another config for the name `ConsumerExists`.
    ConsumerAdd {
        /// The stream.
        stream: String,
        /// The durable name: 1 to 64 of `A-Z a-z 0-9 _ -`.
        name: String,
        /// Its ack policy and delivery limit.
        config: ConsumerConfig,
    },
    /// Removes consumer `name` and its state: [`Response::Done`].
    ConsumerDelete {
        /// The stream.
        stream: String,
        /// The consumer.
        name: String,
    },
    /// A pull of up to `batch` messages, decided by the state machine from the replicated
    /// state at the log's time (`Request::ts`): first the pending messages whose last
    /// delivery is at least `ack_wait_ms` old (0: none are redelivered) and that have
    /// deliveries left (`max_deliver`), oldest stream sequence first; then the next messages
    /// after the consumer's last delivered stream sequence that exist and match `filter`.
    /// Each is recorded with `Store::update_delivered` at the log's time:
    /// [`Response::Delivered`] (empty when there is nothing to deliver).
    ConsumerNext {
        /// The stream.
        stream: String,
        /// The consumer.
        name: String,
        /// A subject filter for new deliveries (`>` or empty: all).
        filter: String,
        /// Most messages delivered: 1 to [`MAX_BATCH`].
        batch: u32,
        /// How long a delivery waits for its ack before this pull redelivers it, in ms of
        /// the log's time (0: no redeliveries).
        ack_wait_ms: u64,
    },
    /// Acknowledges stream sequence `stream_seq` (`Store::update_acks`, as delivered last):
    /// [`Response::Done`]; one not pending is `NotPending`.
    ConsumerAck {
        /// The stream.
        stream: String,
        /// The consumer.
        name: String,
        /// The stream sequence acknowledged.
        stream_seq: u64,
    },
}

/// The most messages one [`Op::ConsumerNext`] delivers.
pub const MAX_BATCH: u32 = 256;

/// How a consumer's messages are acknowledged: store-core's own type.
pub use seqstore_core::AckPolicy;

/// A consumer's configuration without the name, which the request carries: store-core's
/// own type.
pub use seqstore_core::ConsumerSettings as ConsumerConfig;

/// One message a [`Op::ConsumerNext`] delivered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// Its stream sequence.
    pub stream_seq: u64,
    /// The consumer sequence of this delivery.
    pub consumer_seq: u64,
    /// How many times it has been delivered, this one included (1: first delivery).
    pub delivery_count: u64,
    /// Its subject.
    pub subject: String,
    /// Its timestamp.
    pub ts: i64,
    /// Its headers.
    #[serde(with = "crate::bytes")]
    pub headers: Vec<u8>,
    /// Its payload.
    #[serde(with = "crate::bytes")]
    pub payload: Vec<u8>,
}

/// A consumer sequence and the stream sequence it delivered: store-core's own type.
pub use seqstore_core::SequencePair;

/// A delivered message awaiting its ack: store-core's own type.
pub use seqstore_core::PendingAck;

/// A consumer's config and state, in line with its stream (`Store::consumer_state`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerInfo {
    /// Its config.
    pub config: ConsumerConfig,
    /// The last delivery.
    pub delivered: SequencePair,
    /// Everything at or below this is acknowledged.
    pub ack_floor: SequencePair,
    /// The messages awaiting an ack, by stream sequence.
    pub pending: Vec<PendingAck>,
}

impl ConsumerInfo {
    /// The wire form of store-core's config and state.
    pub fn from_core(
        cfg: &seqstore_core::ConsumerConfig,
        st: &seqstore_core::ConsumerState,
    ) -> Self {
        let pending = (st.pending.iter())
            .map(|(&q, p)| PendingAck {
                stream_seq: q,
                consumer_seq: p.sequence,
                ts: p.timestamp,
                redelivered: st.redelivered.get(&q).copied().unwrap_or(0),
            })
            .collect();
        ConsumerInfo {
            config: cfg.settings(),
            delivered: st.delivered,
            ack_floor: st.ack_floor,
            pending,
        }
    }

    /// Whether stream sequence `seq` is acknowledged: at or below the ack floor, or
    /// delivered and no longer pending.
    pub fn is_acked(&self, seq: u64) -> bool {
        seq <= self.ack_floor.stream
            || (seq <= self.delivered.stream && self.pending.iter().all(|p| p.stream_seq != seq))
    }
}

/// What a stream keeps: store-core's [`StreamConfig`] (its limits in plain numbers, the form
/// the log and the HTTP API carry).
pub use seqstore_core::StreamConfig;

/// The store-core configuration of a stream's store: its limits, and no fsync on append (the
/// raft log is the durable record, and the state machine's checkpoint is its snapshot file).
pub fn store_config(c: &StreamConfig) -> seqstore_core::Config {
    c.config().with_sync(seqstore_core::SyncPolicy::Never)
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
    /// The message's sequence (`Append`), or the stream's new last sequence (`Skip`).
    Seq(u64),
    /// How many messages were removed (`Delete`: 1; purges, compact, truncate, expire).
    Removed(u64),
    /// The request was refused; nothing changed.
    Err(ApplyError),
    /// One response per operation of an [`Op::Batch`], in order.
    Batch(Vec<Response>),
    /// The messages a `ConsumerNext` delivered, redeliveries first. (After `Err`: variants
    /// are appended, so that the postcard shapes of the older ones do not change.)
    Delivered(Vec<Delivery>),
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
    /// No consumer of that name on the stream.
    #[error("no consumer {name:?} on stream {stream:?}")]
    UnknownConsumer {
        /// The stream.
        stream: String,
        /// The consumer.
        name: String,
    },
    /// `ConsumerAdd` of a name in use with another config.
    #[error("consumer {name:?} on stream {stream:?} exists with another config")]
    ConsumerExists {
        /// The stream.
        stream: String,
        /// The consumer.
        name: String,
    },
    /// A consumer name outside `[A-Za-z0-9_-]{1,64}`.
    #[error("invalid consumer name {0:?}")]
    InvalidConsumerName(String),
    /// A `ConsumerAck` of a stream sequence the consumer has not delivered or has already
    /// acknowledged.
    #[error("stream sequence {stream_seq} is not pending for consumer {name:?} on {stream:?}")]
    NotPending {
        /// The stream.
        stream: String,
        /// The consumer.
        name: String,
        /// The sequence.
        stream_seq: u64,
    },
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
