//! The HTTP service: the stream API (`/streams`), the admin calls (`/admin`), a replica's dump
//! (`/debug/dump`) and raft's RPCs (`/raft`), all behind the bearer token when one is set.

pub mod admin;
pub mod consumers;
pub mod error;
pub mod extract;
pub mod raft;
pub mod streams;

use crate::node::{NodeRaft, Sm};
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response as HttpResponse};
use axum::Router;
use error::ApiError;
use openraft::error::{CheckIsLeaderError, RaftError};
use seqstore_client::wire::kind;
use seqstore_raft::batch::{Batcher, WriteError, Written};
use seqstore_raft::{Op, Response};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A raft RPC body may carry a batch of entries or a snapshot chunk: far above a client's.
pub const RAFT_MAX_BODY: usize = 64 << 20;

/// What every handler shares.
#[derive(Clone)]
pub struct App(Arc<Inner>);

/// The node's parts.
pub struct Inner {
    /// openraft.
    pub raft: NodeRaft,
    /// The state machine (reads).
    pub sm: Sm,
    /// The raft log (its damage gate: `seqstore_raft::gate`).
    pub log: crate::node::Log,
    /// This node's id.
    pub id: u64,
    /// The bearer token, if any.
    pub token: Option<String>,
    /// How long a write waits to be committed before it answers `unknown_outcome`.
    pub write_timeout: Duration,
    /// Gathers concurrent writes into one log entry (`seqstore_raft::batch`).
    pub batcher: Batcher,
}

impl std::ops::Deref for App {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl App {
    /// The app of these parts.
    pub fn new(inner: Inner) -> Self {
        App(Arc::new(inner))
    }

    /// `not_leader` unless this node leads now (nothing is proposed then).
    fn check_leader(&self) -> Result<(), ApiError> {
        let m = self.raft.metrics().borrow().clone();
        match m.current_leader {
            Some(l) if l == self.id => Ok(()),
            l => {
                let node = l.and_then(|l| m.membership_config.membership().get_node(&l));
                Err(ApiError::not_leader(l, node))
            }
        }
    }

    /// Proposes `op` (with the writes queued beside it, in one entry stamped with this
    /// node's clock); its response once committed and applied. `not_leader` means not
    /// committed: openraft answers it before proposing, or when the next leader removed the
    /// entry. Any other failure after the proposal is `unknown_outcome`: the entry may still
    /// be committed by this or a later leader.
    pub async fn write(&self, op: Op) -> Result<Response, ApiError> {
        let mut all = self.write_all(vec![op]).await?;
        all.pop()
            .unwrap_or_else(|| Err(ApiError::internal("a write without a response")))
    }

    /// Proposes `ops` in their order (consecutive in the log, sharing entries with whatever
    /// else is queued) and returns each one's response as [`App::write`] would. The outer
    /// error is the whole request's: nothing proposed (`not_leader`, `too_large`), or not all
    /// committed in time (`unknown_outcome`: each may or may not be).
    pub async fn write_all(
        &self,
        ops: Vec<Op>,
    ) -> Result<Vec<Result<Response, ApiError>>, ApiError> {
        self.check_leader()?;
        let queued = self.batcher.write_all(ops).map_err(written_error)?;
        let all = async {
            let mut out = Vec::with_capacity(queued.len());
            for q in queued {
                out.push(q.await);
            }
            out
        };
        let written = tokio::time::timeout(self.write_timeout, all)
            .await
            .map_err(|_| ApiError::unknown_outcome("not committed in time"))?;
        let one = |w: Result<Written, WriteError>| match w.map_err(written_error)?.response {
            Response::Err(e) => Err(e.into()),
            r => Ok(r),
        };
        Ok(written.into_iter().map(one).collect())
    }

    /// Waits until a read here is linearizable: this node is the leader (confirmed by a
    /// quorum's heartbeat answers) and has applied everything committed before the call.
    pub async fn linearize(&self) -> Result<(), ApiError> {
        match self.raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                Err(ApiError::not_leader(f.leader_id, f.leader_node.as_ref()))
            }
            Err(e) => Err(ApiError::unavailable(e.to_string())),
        }
    }

    /// Runs `f` on the state machine on tokio's blocking pool (it reads files).
    pub async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut seqstore_raft::StreamCore<seqstore_fs::HostFs>) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let sm = self.sm.clone();
        tokio::task::spawn_blocking(move || sm.with_core(f))
            .await
            .map_err(|e| ApiError::internal(format!("read task: {e}")))
    }
}

/// The answer for a write the batcher did not commit (see [`App::write`]).
fn written_error(e: WriteError) -> ApiError {
    match e {
        WriteError::NotLeader { leader, node } => ApiError::not_leader(leader, node.as_ref()),
        e @ WriteError::TooLarge { .. } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            kind::TOO_LARGE,
            e.to_string(),
        ),
        WriteError::Closed => ApiError::unavailable("shutting down"),
        e => ApiError::unknown_outcome(e.to_string()),
    }
}

/// The whole service; client bodies at most `max_body` bytes.
pub fn router(app: App, max_body: usize) -> Router {
    let client = streams::routes()
        .merge(consumers::routes())
        .merge(admin::routes())
        .layer(DefaultBodyLimit::max(max_body));
    let peers = raft::routes().layer(DefaultBodyLimit::max(RAFT_MAX_BODY));
    client
        .merge(peers)
        .fallback(no_route)
        .layer(middleware::from_fn_with_state(app.clone(), auth))
        .with_state(app)
}

async fn no_route() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, kind::NO_ROUTE, "no such endpoint")
}

/// Refuses (401, logged on stderr) a request without `Authorization: Bearer <token>` when
/// the node has a token.
async fn auth(State(app): State<App>, req: Request, next: Next) -> HttpResponse {
    let Some(token) = &app.token else {
        return next.run(req).await;
    };
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    if given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
        return next.run(req).await;
    }
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or("?".to_string(), |c| c.0.to_string());
    let why = if given.is_some() { "wrong" } else { "no" };
    eprintln!(
        "refused {} {} from {peer}: {why} bearer token",
        req.method(),
        req.uri().path()
    );
    let m = "a bearer token is required (Authorization: Bearer ...)";
    ApiError::new(StatusCode::UNAUTHORIZED, kind::UNAUTHORIZED, m).into_response()
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is case-insensitive
/// and followed by one or more spaces (RFC 9110, 11.4 and 11.6.2).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    let token = rest.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Compares without an early exit on the first differing byte (the time does not tell how
/// much of a guessed token was right).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    /// RFC 9110: the scheme is case-insensitive, one or more spaces before the token.
    #[test]
    fn the_bearer_scheme_is_read_case_insensitively() {
        for v in ["Bearer t0k", "bearer t0k", "BEARER t0k", "BeArEr   t0k"] {
            assert_eq!(bearer_token(v), Some("t0k"), "{v:?}");
        }
        for v in [
            "Bearer",
            "Bearer ",
            "Basic t0k",
            "Bearert0k",
            "Bearer\tt0k",
            "",
        ] {
            assert_eq!(bearer_token(v), None, "{v:?}");
        }
    }
}
