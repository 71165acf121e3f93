//! A follower answers a leader's AppendEntries only after its log's fsync.
//!
//! `LogStore::append` returns once the entries are written and fires openraft's `LogFlushed`
//! callback after the fsync. Whether a follower's success can reach the leader before that
//! fsync is openraft's decision, not this crate's: openraft 0.9.25 runs the engine's commands
//! one at a time and its `append_to_log` awaits the callback before the next command, so the
//! `Respond` queued after `AppendInputEntries` waits for durability. If an openraft upgrade
//! answered on `append`'s return instead, a leader could count an unsynced follower toward a
//! quorum, and a power cut could lose an acknowledged entry. This test holds a follower's
//! callback back and requires that no answer arrives until it fires.
//!
//! The control: with the callback fired as soon as `append` returns (what a log that
//! acknowledged before its fsync would do), the answer does arrive while the fsync is held back,
//! so the check can fail.

use crate::nowhere;

use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
use openraft::storage::LogFlushed;
use openraft::{Config, EntryPayload, Raft, StorageError};
use seqstore_core::Fs;
use seqstore_fault_fs::{FaultFs, Model};
use seqstore_raft::{Entry, LogConfig, LogId, LogStore, StreamStateMachine, TypeConfig, Vote};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The log with its flush callbacks held until `gate` opens (or fired at once: `early`).
pub struct GatedLog<F: Fs + 'static> {
    log: LogStore<F>,
    gate: watch::Receiver<bool>,
    early: bool,
}

delegate_to_log!(GatedLog);

impl<F: Fs + 'static> GatedLog<F> {
    async fn append_vec(
        &mut self,
        entries: Vec<Entry>,
        cb: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<u64>> {
        self.log
            .append_with(entries, Box::new(|_| {}))
            .await
            .map_err(|e| e.to_storage(openraft::ErrorSubject::Logs, openraft::ErrorVerb::Write))?;
        if self.early {
            cb.log_io_completed(Ok(()));
            return Ok(());
        }
        let mut gate = self.gate.clone();
        tokio::spawn(async move {
            let _ = gate.wait_for(|open| *open).await;
            cb.log_io_completed(Ok(()));
        });
        Ok(())
    }
}

/// Node 2, a fresh follower, given leader 1's first entry with its flush held back. Returns
/// whether the answer came while held back, and the answer once the flush was let through.
async fn answer_before_flush(early: bool) -> (bool, AppendEntriesResponse<u64>) {
    let cfg = LogConfig::default().with_inline_io(true);
    let log = LogStore::open(FaultFs::new(Model::Posix), cfg).expect("log");
    let sm = StreamStateMachine::open(FaultFs::new(Model::Posix))
        .expect("state machine")
        .with_inline_io(true);
    let (open, gate) = watch::channel(false);
    let log = GatedLog { log, gate, early };
    let config = Arc::new(Config::default().validate().expect("config"));
    let raft = Raft::new(2, config, nowhere::Nowhere, log, sm)
        .await
        .expect("raft");

    let leader = Vote::new_committed(1, 1);
    let entry = Entry {
        log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), 0),
        payload: EntryPayload::Blank,
    };
    let req = AppendEntriesRequest {
        vote: leader,
        prev_log_id: None,
        entries: vec![entry],
        leader_commit: None,
    };
    let r2 = raft.clone();
    let mut answer = tokio::spawn(async move { r2.append_entries(req).await });
    // paused time: this advances the clock only once every task is idle, so a held-back
    // answer cannot be mistaken for a slow one
    let early_answer = tokio::time::timeout(Duration::from_secs(10), &mut answer).await;
    let came_early = early_answer.is_ok();
    let resp = match early_answer {
        Ok(r) => r,
        Err(_) => {
            open.send(true).expect("gate");
            answer.await
        }
    };
    let resp = resp.expect("task").expect("append_entries");
    raft.shutdown().await.expect("shutdown");
    (came_early, resp)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_follower_answers_only_after_its_fsync() {
    let (came_early, resp) = answer_before_flush(false).await;
    assert!(
        !came_early,
        "the follower answered AppendEntries before its log's fsync: {resp:?}"
    );
    assert!(resp.is_success(), "{resp:?}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn control_a_log_that_acknowledges_at_return_is_answered_early() {
    let (came_early, resp) = answer_before_flush(true).await;
    assert!(came_early, "the check cannot see an early answer");
    assert!(resp.is_success(), "{resp:?}");
}
