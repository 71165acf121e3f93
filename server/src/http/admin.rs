//! `/admin`: status, adding a learner, setting the voters; `/debug/dump`: a replica's state.

use super::error::ApiError;
use super::extract::JsonBody;
use super::streams::msg_of;
use super::App;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::BasicNode;
use seqstore_client::wire::{node_url, Dump, LearnerRequest, MembershipRequest, Status};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How long `add_learner` may wait for the learner to catch up (a snapshot transfer).
const CATCH_UP: Duration = Duration::from_secs(30);

/// The routes.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/admin/status", get(status))
        .route("/admin/learners", post(add_learner))
        .route("/admin/membership", post(membership))
        .route("/debug/dump", get(dump))
}

/// This node's status (its own view; no leader needed).
pub fn status_of(app: &App) -> Status {
    let m = app.raft.metrics().borrow().clone();
    let membership = m.membership_config.membership();
    let nodes: BTreeMap<u64, String> = membership
        .nodes()
        .map(|(id, n)| (*id, n.addr.clone()))
        .collect();
    let leader_url = m
        .current_leader
        .and_then(|l| nodes.get(&l))
        .map(|a| node_url(a));
    Status {
        id: app.id,
        state: format!("{:?}", m.state),
        leader: m.current_leader,
        leader_url,
        term: m.current_term,
        last_applied: m.last_applied.map(|l| l.index),
        last_log_index: m.last_log_index,
        snapshot: m.snapshot.map(|l| l.index),
        purged: m.purged.map(|l| l.index),
        voters: membership.voter_ids().collect(),
        nodes,
    }
}

async fn status(State(app): State<App>) -> Json<Status> {
    Json(status_of(&app))
}

/// A membership change's error: `not_leader` (nothing done), a change in progress
/// (`unavailable`: try again), a bad request, or an unknown outcome.
fn membership_error(e: RaftError<u64, ClientWriteError<u64, BasicNode>>) -> ApiError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
            ApiError::not_leader(f.leader_id, f.leader_node.as_ref())
        }
        RaftError::APIError(ClientWriteError::ChangeMembershipError(c)) => match c {
            ChangeMembershipError::InProgress(_) => ApiError::unavailable(c.to_string()),
            c => ApiError::bad_request(c.to_string()),
        },
        e => ApiError::unknown_outcome(e.to_string()),
    }
}

async fn add_learner(
    State(app): State<App>,
    JsonBody(req): JsonBody<LearnerRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if req.addr.parse::<std::net::SocketAddr>().is_err() {
        let m = format!("addr {:?} is not host:port", req.addr);
        return Err(ApiError::bad_request(m));
    }
    let node = BasicNode::new(&req.addr);
    let added = app.raft.add_learner(req.id, node, false);
    let added = match tokio::time::timeout(app.write_timeout, added).await {
        Err(_) => return Err(ApiError::unknown_outcome("not committed in time")),
        Ok(r) => r.map_err(membership_error)?,
    };
    let caught_up = crate::node::caught_up(&app.raft, req.id, added.log_id.index);
    match tokio::time::timeout(CATCH_UP, caught_up).await {
        Ok(()) => Ok(Json(serde_json::json!({ "ok": true }))),
        Err(_) => Err(ApiError::unavailable(
            "the learner is added but did not catch up in time",
        )),
    }
}

async fn membership(
    State(app): State<App>,
    JsonBody(req): JsonBody<MembershipRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let voters: BTreeSet<u64> = req.voters.into_iter().collect();
    if voters.is_empty() {
        return Err(ApiError::bad_request("voters is empty"));
    }
    let changed = app.raft.change_membership(voters, false);
    match tokio::time::timeout(app.write_timeout, changed).await {
        Err(_) => return Err(ApiError::unknown_outcome("not committed in time")),
        Ok(r) => r.map_err(membership_error)?,
    };
    Ok(Json(serde_json::json!({ "ok": true })))
}

/// Every stream of this replica, as applied here (no leader check: for comparing replicas).
async fn dump(State(app): State<App>) -> Result<Json<Dump>, ApiError> {
    let (last_applied, streams) = app
        .blocking(|c| c.dump().map(|d| (c.applied().0, d)))
        .await?
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let consumers = (streams.iter())
        .map(|(name, d)| {
            let cs = (d.consumers.iter())
                .map(|(c, i)| (c.clone(), super::consumers::info_of(c.clone(), i.clone())))
                .collect();
            (name.clone(), cs)
        })
        .collect();
    let streams = streams
        .into_iter()
        .map(|(name, d)| {
            let msgs = d.msgs.into_iter().map(|m| {
                let sm = seqstore_core::StoredMsg {
                    seq: m.seq,
                    ts: m.ts,
                    subject: m.subject,
                    headers: m.headers,
                    payload: m.payload,
                };
                msg_of(sm)
            });
            (name, msgs.collect())
        })
        .collect();
    Ok(Json(Dump {
        last_applied: last_applied.map(|l| l.index),
        streams,
        consumers,
    }))
}
