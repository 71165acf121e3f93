//! The JSON bodies of seqstore-server's HTTP API, shared by the server and this client.
//!
//! Payloads and headers are bytes. In a request, `payload` is UTF-8 text taken as is and
//! `payload_b64` is base64 (standard alphabet, padded) for anything else; in a response, a
//! message's payload is `payload` when it is valid UTF-8 and `payload_b64` otherwise, so
//! `curl` output stays readable for text and no byte string is lost.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A stream's limits (zero is unlimited for each): store-core's own type.
pub use seqstore_core::StreamConfig;

/// A stream's counters: store-core's own type, serialized with its field names.
pub use seqstore_core::StreamState;

/// `GET /streams/{name}`, and each entry of `GET /streams`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamInfo {
    /// Its name.
    pub name: String,
    /// Its limits.
    pub config: StreamConfig,
    /// Its counters.
    pub state: StreamState,
}

/// `GET /streams`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamList {
    /// Every stream, by name.
    pub streams: Vec<StreamInfo>,
}

/// `POST /streams/{name}/messages`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendRequest {
    /// The message's subject.
    pub subject: String,
    /// The payload as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// The payload as base64 (instead of `payload`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_b64: Option<String>,
    /// Headers (opaque bytes) as base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_b64: Option<String>,
    /// Hidden from reads this long after its timestamp, removed by the next expire (0: never).
    #[serde(default)]
    pub ttl_ms: u64,
}

impl AppendRequest {
    /// A message with these payload bytes (text if they are UTF-8, base64 otherwise).
    pub fn new(subject: impl Into<String>, payload: &[u8]) -> Self {
        let (payload, payload_b64) = encode_payload(payload);
        AppendRequest {
            subject: subject.into(),
            payload,
            payload_b64,
            ..Default::default()
        }
    }

    /// The payload's bytes; `Err` names what is wrong (both forms given, bad base64).
    pub fn payload_bytes(&self) -> Result<Vec<u8>, String> {
        match (&self.payload, &self.payload_b64) {
            (Some(_), Some(_)) => Err("give payload or payload_b64, not both".into()),
            (Some(t), None) => Ok(t.as_bytes().to_vec()),
            (None, Some(b)) => decode_b64("payload_b64", b),
            (None, None) => Ok(Vec::new()),
        }
    }

    /// The same request with these header bytes (none when empty).
    pub fn with_headers(mut self, headers: &[u8]) -> Self {
        self.headers_b64 = (!headers.is_empty()).then(|| B64.encode(headers));
        self
    }

    /// The headers' bytes.
    pub fn header_bytes(&self) -> Result<Vec<u8>, String> {
        match &self.headers_b64 {
            Some(b) => decode_b64("headers_b64", b),
            None => Ok(Vec::new()),
        }
    }
}

fn decode_b64(field: &str, b: &str) -> Result<Vec<u8>, String> {
    B64.decode(b).map_err(|e| format!("{field}: {e}"))
}

fn encode_payload(p: &[u8]) -> (Option<String>, Option<String>) {
    match std::str::from_utf8(p) {
        Ok(t) => (Some(t.to_string()), None),
        Err(_) => (None, Some(B64.encode(p))),
    }
}

/// A stored message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Msg {
    /// Its sequence.
    pub seq: u64,
    /// Its timestamp (ns since the epoch, the leader's clock).
    pub ts: i64,
    /// Its subject.
    pub subject: String,
    /// Its payload when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// Its payload as base64 when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_b64: Option<String>,
    /// Its headers as base64 (absent when empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_b64: Option<String>,
}

impl Msg {
    /// The JSON form of a message's parts.
    pub fn new(seq: u64, ts: i64, subject: String, headers: &[u8], payload: &[u8]) -> Self {
        let (payload, payload_b64) = encode_payload(payload);
        Msg {
            seq,
            ts,
            subject,
            payload,
            payload_b64,
            headers_b64: (!headers.is_empty()).then(|| B64.encode(headers)),
        }
    }

    /// The message as the store's type, its payload and headers decoded.
    pub fn into_stored(self) -> Result<seqstore_core::StoredMsg, crate::Error> {
        Ok(seqstore_core::StoredMsg {
            payload: self.payload_bytes().map_err(crate::Error::Decode)?,
            headers: self.header_bytes().map_err(crate::Error::Decode)?,
            seq: self.seq,
            ts: self.ts,
            subject: self.subject,
        })
    }

    /// The headers' bytes (empty when absent; `Err` on bad base64).
    pub fn header_bytes(&self) -> Result<Vec<u8>, String> {
        match &self.headers_b64 {
            Some(b) => decode_b64("headers_b64", b),
            None => Ok(Vec::new()),
        }
    }

    /// The payload's bytes (empty if the server sent neither form; `Err` on bad base64).
    pub fn payload_bytes(&self) -> Result<Vec<u8>, String> {
        match (&self.payload, &self.payload_b64) {
            (Some(t), _) => Ok(t.as_bytes().to_vec()),
            (None, Some(b)) => decode_b64("payload_b64", b),
            (None, None) => Ok(Vec::new()),
        }
    }
}

/// `{seq}`: an append's sequence, once committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqReply {
    /// The sequence.
    pub seq: u64,
}

/// `POST /streams/{name}/batch`: several appends in one request, sequenced in their order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendBatch {
    /// The messages (at most [`MAX_BATCH`]).
    pub messages: Vec<AppendRequest>,
}

/// The most messages one [`AppendBatch`] may carry.
pub const MAX_BATCH: usize = 4096;

/// The answer to an [`AppendBatch`]: one result per message, in its order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendBatchReply {
    /// Each message's sequence or why it was not stored.
    pub results: Vec<BatchResult>,
}

/// One message's result in an [`AppendBatchReply`]: `{"seq": N}` once committed, or
/// `{"error": {...}}` when this message was not stored (refused by the stream, or not
/// committed: `not_leader`) or may have been (`unknown_outcome`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResult {
    /// The sequence, when committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    /// With `error`: the HTTP status the same error has as a whole answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// `{removed}`: how many messages a delete, purge, compact or expire removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedReply {
    /// How many.
    pub removed: u64,
}

/// `{last_seq}`: the stream's last sequence after a skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastSeqReply {
    /// The last sequence.
    pub last_seq: u64,
}

/// `POST /streams/{name}/purge`: all fields absent is a whole purge, anything else
/// store-core's `purge_ex`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PurgeRequest {
    /// Only messages whose subject matches (`>`: all).
    pub filter: Option<String>,
    /// Only below this sequence (0: no bound).
    pub up_to_seq: Option<u64>,
    /// Keep this many of the newest matching messages.
    pub keep: Option<u64>,
}

/// `POST /streams/{name}/compact`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactRequest {
    /// The new lowest sequence: every message below it is removed.
    pub up_to: u64,
}

/// `POST /streams/{name}/truncate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TruncateRequest {
    /// The last sequence kept.
    pub seq: u64,
}

/// `POST /streams/{name}/skip`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkipRequest {
    /// How many sequences to mark used (at least 1).
    pub count: u64,
}

/// `GET /streams/{name}/pending`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingReply {
    /// Matching messages at or after `from` (with `last_per_subject`: matching subjects whose
    /// last message is there).
    pub pending: u64,
    /// The last sequence the count is valid through.
    pub valid_through: u64,
}

/// `GET /streams/{name}/subjects`: message count per subject.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubjectsReply {
    /// Subject -> stored messages.
    pub subjects: BTreeMap<String, u64>,
}

/// `POST /admin/learners`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LearnerRequest {
    /// The node's id.
    pub id: u64,
    /// Its `host:port`.
    pub addr: String,
}

/// `POST /admin/membership`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MembershipRequest {
    /// The voters after the change (learners not listed stay learners; a removed voter is
    /// removed from the cluster).
    pub voters: Vec<u64>,
}

/// `GET /admin/status`: one node's view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// This node's id.
    pub id: u64,
    /// `Leader`, `Follower`, `Candidate`, `Learner`, `Shutdown`.
    pub state: String,
    /// The leader it knows.
    pub leader: Option<u64>,
    /// The leader's URL, when known.
    pub leader_url: Option<String>,
    /// Its current term.
    pub term: u64,
    /// The index of the last entry applied.
    pub last_applied: Option<u64>,
    /// The index of its last log entry.
    pub last_log_index: Option<u64>,
    /// The last index its current snapshot covers.
    pub snapshot: Option<u64>,
    /// The last index purged from its log.
    pub purged: Option<u64>,
    /// The voters of its effective membership.
    pub voters: Vec<u64>,
    /// Every member (voters and learners): id -> `host:port`.
    pub nodes: BTreeMap<u64, String>,
}

/// `GET /debug/dump`: a node's whole applied state (no leader check), for comparing replicas.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dump {
    /// The index of the last entry applied.
    pub last_applied: Option<u64>,
    /// Every stream: its messages in sequence order.
    pub streams: BTreeMap<String, Vec<Msg>>,
    /// Every stream's consumers, by name.
    #[serde(default)]
    pub consumers: BTreeMap<String, BTreeMap<String, ConsumerInfo>>,
}

/// An error response's body: `{"error": {"kind": ..., "message": ...}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorInfo,
}

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// A stable, machine-readable kind; see [`kind`].
    pub kind: String,
    /// For people.
    pub message: String,
    /// With `not_leader`: the leader's id, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_id: Option<u64>,
    /// With `not_leader`: the leader's URL, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_url: Option<String>,
}

/// The error kinds the server sends.
pub mod kind {
    /// 400: malformed JSON, a bad field, a bad filter or subject.
    pub const BAD_REQUEST: &str = "bad_request";
    /// 401: no or wrong bearer token.
    pub const UNAUTHORIZED: &str = "unauthorized";
    /// 404: no stream of that name.
    pub const UNKNOWN_STREAM: &str = "unknown_stream";
    /// 404: no message there.
    pub const NO_MESSAGE: &str = "no_message";
    /// 404: no such endpoint.
    pub const NO_ROUTE: &str = "no_route";
    /// 409: the stream exists.
    pub const STREAM_EXISTS: &str = "stream_exists";
    /// 400: an invalid stream name.
    pub const INVALID_STREAM_NAME: &str = "invalid_stream_name";
    /// 413: the body is larger than the server accepts.
    pub const TOO_LARGE: &str = "too_large";
    /// 421: this node is not the leader; nothing was done. Ask `leader_url`.
    pub const NOT_LEADER: &str = "not_leader";
    /// 422: the store refused the request (full stream, message too large, missing
    /// sequence...); nothing changed.
    pub const REFUSED: &str = "refused";
    /// 503: no leader, or the cluster could not confirm a read; nothing was done.
    pub const UNAVAILABLE: &str = "unavailable";
    /// 503: a write was proposed and its outcome is unknown (leadership lost, timeout): it
    /// may or may not be committed.
    pub const UNKNOWN_OUTCOME: &str = "unknown_outcome";
    /// 404: no consumer of that name on the stream.
    pub const UNKNOWN_CONSUMER: &str = "unknown_consumer";
    /// 409: a consumer of that name exists with other settings.
    pub const CONSUMER_EXISTS: &str = "consumer_exists";
    /// 400: an invalid consumer name.
    pub const INVALID_CONSUMER_NAME: &str = "invalid_consumer_name";
    /// 422: an ack of a message that is not pending (never delivered, acked, or removed).
    pub const NOT_PENDING: &str = "not_pending";
    /// 500: the node failed.
    pub const INTERNAL: &str = "internal";
}

/// How a consumer's messages are acknowledged (`explicit`, `all`, `none`): store-core's own
/// type.
pub use seqstore_core::AckPolicy;

/// `PUT /streams/{stream}/consumers/{name}`: a durable consumer's settings, store-core's own
/// type (the name is in the path).
pub use seqstore_core::ConsumerSettings as ConsumerConfig;

/// `POST /streams/{stream}/consumers/{name}/next`: a pull, decided by the cluster at the
/// log's time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NextRequest {
    /// Most messages delivered (1 to 256; default 1).
    #[serde(default = "one")]
    pub batch: u32,
    /// A subject filter for new deliveries (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// How long a delivery waits for its ack before a pull redelivers it, ms (0: never).
    #[serde(default)]
    pub ack_wait_ms: u64,
}

fn one() -> u32 {
    1
}

impl Default for NextRequest {
    fn default() -> Self {
        NextRequest {
            batch: 1,
            filter: None,
            ack_wait_ms: 0,
        }
    }
}

/// One delivered message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// The consumer sequence of this delivery.
    pub consumer_seq: u64,
    /// How many times it has been delivered, this one included.
    pub delivery_count: u64,
    /// The message (its `seq` is the stream sequence to acknowledge).
    pub message: Msg,
}

/// A pull's answer (empty when there was nothing to deliver).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deliveries {
    /// The messages, redeliveries first.
    pub messages: Vec<Delivery>,
}

/// `POST /streams/{stream}/consumers/{name}/ack`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    /// The stream sequence acknowledged.
    pub stream_seq: u64,
}

/// A consumer sequence and the stream sequence it delivered: store-core's own type.
pub use seqstore_core::SequencePair;

/// `GET /streams/{stream}/consumers/{name}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerInfo {
    /// Its name.
    pub name: String,
    /// Its settings.
    pub config: ConsumerConfig,
    /// The last delivery.
    pub delivered: SequencePair,
    /// Everything at or below it is acknowledged.
    pub ack_floor: SequencePair,
    /// The deliveries awaiting their ack, by stream sequence.
    pub pending: Vec<PendingAck>,
}

impl ConsumerInfo {
    /// Its settings as the store's type.
    pub fn store_config(&self) -> seqstore_core::ConsumerConfig {
        self.config.named(self.name.clone())
    }

    /// Its state as the store's type (what `Store::consumer_state` returns).
    pub fn store_state(&self) -> seqstore_core::ConsumerState {
        let pending = (self.pending.iter())
            .map(|p| {
                let d = seqstore_core::Pending {
                    sequence: p.consumer_seq,
                    timestamp: p.ts,
                };
                (p.stream_seq, d)
            })
            .collect();
        let redelivered = (self.pending.iter())
            .filter(|p| p.redelivered > 0)
            .map(|p| (p.stream_seq, p.redelivered))
            .collect();
        seqstore_core::ConsumerState {
            delivered: self.delivered,
            ack_floor: self.ack_floor,
            pending,
            redelivered,
        }
    }
}

/// A delivered message awaiting its ack: store-core's own type.
pub use seqstore_core::PendingAck;

/// `GET /streams/{stream}/consumers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerList {
    /// The names.
    pub consumers: Vec<String>,
}

/// The base URL of a node's `host:port`.
pub fn node_url(addr: &str) -> String {
    format!("http://{addr}")
}
