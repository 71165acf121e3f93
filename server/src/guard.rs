//! The amnesia guard: a node whose directory holds no raft state must not come back as a
//! voter the cluster still counts on. Such a node has forgotten its votes and the entries it
//! acknowledged; as a voter it could help elect a leader without committed entries, or vote
//! twice in a term.
//!
//! The rule, checked before openraft starts on an empty directory: ask every other peer of
//! `--peers` for its status (`GET /admin/status`).
//! - Some answering peer lists this id among its voters: **refuse** (exit non-zero). An
//!   operator removes the id with `POST /admin/membership` first (or starts it under a new
//!   id); then it starts empty and is re-added with `POST /admin/learners`.
//! - With `--bootstrap`, some answering peer is already in a cluster: **refuse** (a second
//!   initialization would start a second cluster's history under the same ids).
//! - No peer answers: without `--bootstrap`, keep asking until `join_timeout`, then
//!   **refuse** (it cannot tell); with `--bootstrap`, start (the first start of a new cluster,
//!   whose other nodes are not up yet).
//! - Otherwise start.
//!
//! What it does not cover: it trusts the peers' views (a peer that itself lags may not know
//! the latest membership), and a node whose directory is damaged but not empty is not
//! "empty" here (its log's own checks apply).

use crate::error::Error;
use crate::node::NodeOpts;
use seqstore_client::wire::{node_url, Status};
use seqstore_client::Transport;
use std::time::{Duration, Instant};

/// How long one status request may take.
const ASK: Duration = Duration::from_secs(1);
/// With `--bootstrap`, how long to look for an existing cluster.
const BOOTSTRAP_LOOK: Duration = Duration::from_secs(2);

async fn ask(t: &Transport, addr: &str) -> Result<Status, String> {
    let url = format!("{}/admin/status", node_url(addr));
    let get = t.send(
        axum::http::Method::GET,
        &url,
        "application/json",
        Default::default(),
        ASK,
    );
    let (status, body) = get.await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{url}: HTTP {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: {e}"))
}

/// Refuses an empty node's start per the module's rule.
pub async fn check(o: &NodeOpts) -> Result<(), Error> {
    let others: Vec<(u64, &String)> = o
        .peers
        .iter()
        .filter(|(id, _)| **id != o.id)
        .map(|(id, a)| (*id, a))
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    let t = Transport::new(o.token.clone());
    let limit = if o.bootstrap {
        BOOTSTRAP_LOOK
    } else {
        o.join_timeout
    };
    let start = Instant::now();
    loop {
        let mut answered = false;
        let mut errors = Vec::new();
        for (pid, addr) in &others {
            match ask(&t, addr).await {
                Ok(s) => {
                    judge(o, *pid, &s)?;
                    answered = true;
                }
                Err(e) => errors.push(e),
            }
        }
        if answered || (o.bootstrap && start.elapsed() >= limit) {
            return Ok(());
        }
        if start.elapsed() >= limit {
            return Err(Error::Amnesia(format!(
                "node {}'s directory {:?} is empty and no peer answered within {limit:?}, so it \
                 cannot tell whether id {} is still a voter ({})",
                o.id,
                o.dir,
                o.id,
                errors.join("; ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One peer's answer against the rule.
fn judge(o: &NodeOpts, pid: u64, s: &Status) -> Result<(), Error> {
    if s.voters.contains(&o.id) {
        return Err(Error::Amnesia(format!(
            "node {}'s directory {:?} is empty, but node {pid} lists id {} as a voter \
             (voters {:?}): its log and votes are lost. Remove it first \
             (POST /admin/membership with the other voters), or start it under a new id; then \
             re-add it with POST /admin/learners",
            o.id, o.dir, o.id, s.voters
        )));
    }
    if o.bootstrap && !s.voters.is_empty() {
        return Err(Error::Amnesia(format!(
            "--bootstrap with an empty directory, but node {pid} is already in a cluster \
             (voters {:?}): start without --bootstrap and add this node with the admin calls",
            s.voters
        )));
    }
    Ok(())
}
