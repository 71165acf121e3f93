//! [`ApiError`]: an error answer, `{"error": {"kind", "message"}}` with its HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use openraft::BasicNode;
use seqstore_client::wire::{kind, node_url, ErrorBody, ErrorInfo};
use seqstore_raft::ApplyError;

/// An error answer. Every one of them means nothing changed, but `unknown_outcome`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    info: ErrorInfo,
}

impl ApiError {
    /// An answer of this status, kind and message.
    pub fn new(status: StatusCode, kind: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            info: ErrorInfo {
                kind: kind.to_string(),
                message: message.into(),
                leader_id: None,
                leader_url: None,
            },
        }
    }

    /// The status and the body's error (a batch's per-message result).
    pub fn into_parts(self) -> (StatusCode, ErrorInfo) {
        (self.status, self.info)
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, kind::BAD_REQUEST, message)
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, kind::INTERNAL, message)
    }

    /// 503: nothing was done; try again or elsewhere.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, kind::UNAVAILABLE, message)
    }

    /// 503: a write was proposed and may or may not be committed.
    pub fn unknown_outcome(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            kind::UNKNOWN_OUTCOME,
            message,
        )
    }

    /// 404 `unknown_stream`.
    pub fn unknown_stream(name: &str) -> Self {
        let m = format!("no stream {name:?}");
        Self::new(StatusCode::NOT_FOUND, kind::UNKNOWN_STREAM, m)
    }

    /// 404 `no_message`.
    pub fn no_message(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, kind::NO_MESSAGE, message)
    }

    /// 421 `not_leader`, with the leader when this node knows it.
    pub fn not_leader(leader: Option<u64>, node: Option<&BasicNode>) -> Self {
        let mut e = Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            kind::NOT_LEADER,
            match leader {
                Some(l) => format!("not the leader; node {l} is"),
                None => "not the leader; no leader known".to_string(),
            },
        );
        e.info.leader_id = leader;
        e.info.leader_url = node.map(|n| node_url(&n.addr));
        e
    }

    /// The store's error for a read: a bad filter or argument is the request's (400), a
    /// missing sequence 404, anything else the node's (500).
    pub fn from_store(e: seqstore_core::Error) -> Self {
        use seqstore_core::Error as E;
        match e {
            E::NotFound { seq } => Self::no_message(format!("no message at {seq}")),
            E::InvalidSubject { .. } | E::InvalidArgument(_) | E::TooManyResults { .. } => {
                Self::bad_request(e.to_string())
            }
            e => Self::internal(e.to_string()),
        }
    }
}

impl From<ApplyError> for ApiError {
    fn from(e: ApplyError) -> Self {
        let m = e.to_string();
        match e {
            ApplyError::UnknownStream(n) => Self::unknown_stream(&n),
            ApplyError::StreamExists(_) => Self::new(StatusCode::CONFLICT, kind::STREAM_EXISTS, m),
            ApplyError::InvalidStreamName(_) => {
                Self::new(StatusCode::BAD_REQUEST, kind::INVALID_STREAM_NAME, m)
            }
            ApplyError::UnknownConsumer { .. } => {
                Self::new(StatusCode::NOT_FOUND, kind::UNKNOWN_CONSUMER, m)
            }
            ApplyError::ConsumerExists { .. } => {
                Self::new(StatusCode::CONFLICT, kind::CONSUMER_EXISTS, m)
            }
            ApplyError::InvalidConsumerName(_) => {
                Self::new(StatusCode::BAD_REQUEST, kind::INVALID_CONSUMER_NAME, m)
            }
            ApplyError::NotPending { .. } => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, kind::NOT_PENDING, m)
            }
            _ => Self::new(StatusCode::UNPROCESSABLE_ENTITY, kind::REFUSED, m),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody { error: self.info })).into_response()
    }
}
