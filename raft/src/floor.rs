//! [`SnapshotFloor`]: how far the state machine's durable snapshot covers the log, so that the
//! log is never purged past it.
//!
//! openraft 0.9.25 purges a follower's log up to a snapshot it received *without waiting* for
//! the state machine to install it (`install_full_snapshot` queues the install to the state
//! machine worker, then runs `PurgeLog` at once, with no condition). A node that stops in
//! between (a crash, a failed install) restarts with its state machine at its older snapshot
//! and its log purged beyond it: the entries in between are gone from both, and openraft
//! cannot start ("Failed to get log entries"). The whole-cluster simulation found it
//! (`tests/sim.rs`, `snapshot_install_then_purge`). With a floor
//! ([`crate::LogStore::with_snapshot_floor`], given [`crate::StreamStateMachine::snapshot_floor`])
//! `purge(upto)` waits until the state machine's snapshot file, durable, covers `upto`, and
//! fails if installing a snapshot failed (the node stops, as openraft stops on that failure).

use crate::error::{Error, Result};
use crate::types::LogId;
use tokio::sync::watch;

/// (the first log index the durable snapshot does not cover, a snapshot install failed).
type State = (u64, bool);

/// Shared by the state machine (which raises it) and the log (which waits for it).
#[derive(Clone, Debug)]
pub struct SnapshotFloor {
    tx: watch::Sender<State>,
}

impl Default for SnapshotFloor {
    fn default() -> Self {
        SnapshotFloor {
            tx: watch::Sender::new((0, false)),
        }
    }
}

impl SnapshotFloor {
    /// The durable snapshot now covers the log up to `last` (never lowers the floor).
    pub fn raise(&self, last: Option<LogId>) {
        let next = last.map_or(0, |l| l.index + 1);
        self.tx.send_if_modified(|s| {
            let up = next > s.0;
            s.0 = s.0.max(next);
            up
        });
    }

    /// Installing a snapshot failed: purges waiting for it fail too.
    pub fn fail(&self) {
        self.tx.send_modify(|s| s.1 = true);
    }

    /// Waits until the durable snapshot covers index `upto`.
    pub async fn covers(&self, upto: u64) -> Result<()> {
        let mut rx = self.tx.subscribe();
        let s =
            rx.wait_for(|s| s.0 > upto || s.1)
                .await
                .map_err(|_| Error::SnapshotNotInstalled {
                    upto,
                    reason: "the state machine is gone",
                })?;
        if s.0 > upto {
            Ok(())
        } else {
            Err(Error::SnapshotNotInstalled {
                upto,
                reason: "installing the snapshot that covers it failed",
            })
        }
    }
}
