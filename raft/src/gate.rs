//! The damage gate: a node whose log recovery found damage to entries that were durable
//! ([`crate::damaged`]) may have acknowledged what it lost. Until its log holds that index
//! again, fetched from a leader, it neither grants a vote nor stands for election: with a
//! lagging peer it could otherwise elect a leader without an acknowledged entry ("Protocol-
//! Aware Recovery for Consensus-Based Storage": a node never answers for data it can no
//! longer prove it has). It still takes a leader's appends and snapshots, which repair it.
//!
//! openraft 0.9 has no such state of its own: the vote request is answered here, before
//! openraft sees it (every transport calls [`vote`] instead of `Raft::vote`), and elections
//! are held off with its runtime switch ([`hold_elections`]). A damaged minority costs the
//! cluster nothing; a damaged majority stops it until a leader can be elected, rather than
//! lose what it acknowledged.

use crate::adapter::LogStore;
use crate::types::TypeConfig;
use openraft::error::RaftError;
use openraft::raft::{VoteRequest, VoteResponse};
use openraft::{BasicNode, Raft, RaftMetrics, Vote};
use seqstore_core::Fs;
use std::time::Duration;

/// How often a held node looks whether its log is whole again.
const LOOK: Duration = Duration::from_millis(50);

/// `raft.vote(rpc)`, or a refusal while `log` is damaged: the node's own vote and last log
/// id, not granted (what openraft's candidate takes as a vote lost to a longer log or a
/// leader's lease; the node's vote and term are left as they are).
pub async fn vote<F: Fs + 'static>(
    raft: &Raft<TypeConfig>,
    log: &LogStore<F>,
    rpc: VoteRequest<u64>,
) -> Result<VoteResponse<u64>, RaftError<u64>> {
    if log.damaged().is_none() {
        return raft.vote(rpc).await;
    }
    let (vote, last_log_id) = log.vote_and_last();
    Ok(VoteResponse {
        vote: vote.unwrap_or_else(|| Vote::new(0, 0)),
        vote_granted: false,
        last_log_id,
    })
}

/// Keeps `raft` from standing for election while `log` is damaged, from now until the log
/// holds its index again (a task on the current tokio runtime, which ends with the node).
/// Call it right after `Raft::new`, before its first election timeout. A node that is its
/// cluster's only voter is let go at once: no other copy can fill it, and held it would
/// never serve again.
pub fn hold_elections<F: Fs + 'static>(raft: &Raft<TypeConfig>, log: &LogStore<F>) {
    if log.damaged().is_none() {
        return;
    }
    raft.runtime_config().elect(false);
    let (raft, log) = (raft.clone(), log.clone());
    tokio::spawn(async move {
        let mut metrics = raft.metrics();
        loop {
            tokio::select! {
                // the node stopped: its metrics' sender is gone
                changed = metrics.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(LOOK) => {}
            }
            if log.damaged().is_none() || alone(&metrics.borrow()) {
                raft.runtime_config().elect(true);
                return;
            }
        }
    });
}

/// Whether the node is the only voter of its membership.
fn alone(m: &RaftMetrics<u64, BasicNode>) -> bool {
    let mut voters = m.membership_config.membership().voter_ids();
    voters.next() == Some(m.id) && voters.next().is_none()
}
