//! The negative control "a state machine that applies before commit", built in the test from
//! the real parts: the log storage hands every entry to the state machine as soon as it is
//! appended (speculative apply, never rolled back), and openraft's `apply` later answers those
//! entries from what that early apply returned. An entry of a deposed leader that is truncated
//! afterwards stays applied, and a snapshot can hold entries that never committed.

use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{BasicNode, OptionalSend, SnapshotMeta, StorageError, StoredMembership};
use seqstore_core::Fs;
use seqstore_raft::streams::StreamSnapshotBuilder;
use seqstore_raft::{Entry, LogId, LogStore, Response, StreamStateMachine, TypeConfig};
use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex};

type Early = Arc<Mutex<BTreeMap<u64, Response>>>;

/// The log, applying on append.
pub struct EagerLog<F: Fs + 'static> {
    pub log: LogStore<F>,
    pub sm: StreamStateMachine<F>,
    pub early: Early,
}

/// The state machine, answering early-applied entries from the early answers.
pub struct EagerSm<F: Fs + 'static> {
    pub sm: StreamStateMachine<F>,
    pub early: Early,
}

delegate_to_log!(EagerLog);

impl<F: Fs + 'static> EagerLog<F> {
    /// Appends, then applies the entries at once (before anything commits them).
    async fn append_vec(
        &mut self,
        entries: Vec<Entry>,
        cb: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<u64>> {
        self.log.append(entries.clone(), cb).await?;
        let mut early = self.early.lock().unwrap();
        self.sm.with_core(|c| {
            for e in entries {
                let index = e.log_id.index;
                if let Ok(r) = c.apply(e) {
                    early.insert(index, r);
                }
            }
        });
        Ok(())
    }
}

impl<F: Fs + 'static> RaftStateMachine<TypeConfig> for EagerSm<F> {
    type SnapshotBuilder = StreamSnapshotBuilder<F>;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        self.sm.applied_state().await
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut out = Vec::new();
        for e in entries {
            let early = self.early.lock().unwrap().remove(&e.log_id.index);
            match early {
                Some(r) => out.push(r),
                None => out.extend(self.sm.apply([e]).await?),
            }
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> StreamSnapshotBuilder<F> {
        self.sm.get_snapshot_builder().await
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        self.sm.begin_receiving_snapshot().await
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        self.sm.install_snapshot(meta, snapshot).await
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        self.sm.get_current_snapshot().await
    }
}
