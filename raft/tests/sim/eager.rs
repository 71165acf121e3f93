//! The negative control "a state machine that applies before commit", built in the test from
//! the real parts: the log storage hands every entry to the state machine as soon as it is
//! appended (speculative apply, never rolled back), and openraft's `apply` later answers those
//! entries from what that early apply returned. An entry of a deposed leader that is truncated
//! afterwards stays applied, and a snapshot can hold entries that never committed.

use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, OptionalSend, RaftLogReader, SnapshotMeta, StorageError, StoredMembership,
};
use seqstore_core::Fs;
use seqstore_raft::streams::StreamSnapshotBuilder;
use seqstore_raft::{
    Entry, LogId, LogReader, LogStore, Response, StreamStateMachine, TypeConfig, Vote,
};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::RangeBounds;
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

impl<F: Fs + 'static> RaftLogReader<TypeConfig> for EagerLog<F> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<u64>> {
        self.log.try_get_log_entries(range).await
    }
}

impl<F: Fs + 'static> RaftLogStorage<TypeConfig> for EagerLog<F> {
    type LogReader = LogReader<F>;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<u64>> {
        self.log.get_log_state().await
    }
    async fn get_log_reader(&mut self) -> LogReader<F> {
        self.log.get_log_reader().await
    }
    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError<u64>> {
        self.log.save_vote(vote).await
    }
    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError<u64>> {
        self.log.read_vote().await
    }
    async fn save_committed(&mut self, c: Option<LogId>) -> Result<(), StorageError<u64>> {
        self.log.save_committed(c).await
    }
    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError<u64>> {
        self.log.read_committed().await
    }
    async fn append<I>(
        &mut self,
        entries: I,
        cb: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
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
    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        self.log.truncate(log_id).await
    }
    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        self.log.purge(log_id).await
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
