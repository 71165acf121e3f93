//! [`StreamStateMachine`]: openraft's `RaftStateMachine` and `RaftSnapshotBuilder` on a
//! [`StreamCore`], whose file I/O runs on tokio's blocking pool under one lock.

use super::{SnapshotFile, StreamCore, StreamDump};
use crate::error::{Error, Result};
use crate::types::{ConsumerInfo, Entry, LogId, Response, TypeConfig};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StoredMembership,
};
use seqstore_core::{Fs, StoredMsg};
use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex, MutexGuard};

/// The stream state machine. Clones share it (the node's API reads through a clone).
pub struct StreamStateMachine<F: Fs + 'static> {
    core: Arc<Mutex<StreamCore<F>>>,
    inline: bool,
    apply_inline: bool,
}

impl<F: Fs + 'static> Clone for StreamStateMachine<F> {
    fn clone(&self) -> Self {
        StreamStateMachine {
            core: Arc::clone(&self.core),
            inline: self.inline,
            apply_inline: self.apply_inline,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The lock if nobody holds it (a poisoned lock is taken, as [`lock`] does).
fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

fn sm_err(e: Error) -> StorageError<u64> {
    e.to_storage(ErrorSubject::StateMachine, ErrorVerb::Write)
}

fn to_snapshot(f: &SnapshotFile) -> Snapshot<TypeConfig> {
    Snapshot {
        meta: f.meta.clone(),
        snapshot: Box::new(Cursor::new(f.data.clone())),
    }
}

impl<F: Fs + 'static> StreamStateMachine<F> {
    /// Opens the state machine on `fs` (its own directory); see [`StreamCore::open`].
    pub fn open(fs: F) -> Result<Self> {
        Ok(Self::from_core(StreamCore::open(fs)?))
    }

    /// **Breaks crash safety on purpose** (feature `ablation`, tests only).
    #[cfg(feature = "ablation")]
    pub fn open_ablated(fs: F, ablation: super::SmAblation) -> Result<Self> {
        Ok(Self::from_core(StreamCore::open_ablated(fs, ablation)?))
    }

    fn from_core(core: StreamCore<F>) -> Self {
        StreamStateMachine {
            core: Arc::new(Mutex::new(core)),
            inline: false,
            apply_inline: false,
        }
    }

    /// Runs the file I/O on the calling task instead of tokio's blocking pool (default
    /// `false`): for a filesystem in memory or a single-threaded embedder that wants no OS
    /// threads (the whole-cluster simulation, so that a run replays from its seed). With a
    /// real disk it stalls the executor while a snapshot is written.
    pub fn with_inline_io(mut self, inline: bool) -> Self {
        self.inline = inline;
        self
    }

    /// Applies committed entries on the calling task when nothing else holds the state
    /// machine (default `false`), else on the blocking pool; snapshots are built and
    /// installed on the pool either way. It saves the two thread hand-offs per apply that the
    /// pool costs: on a node whose runtime is one thread, a large part of an entry's cost.
    /// The executor stalls for the apply: usually one entry (at most a batch of 512
    /// operations), more when a follower catches up on many entries at once.
    pub fn with_inline_apply(mut self, inline: bool) -> Self {
        self.apply_inline = inline;
        self
    }

    /// Runs `f` on the core on the blocking pool (inline with [`Self::with_inline_io`]).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut StreamCore<F>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        if self.inline {
            return f(&mut lock(&self.core));
        }
        let core = Arc::clone(&self.core);
        tokio::task::spawn_blocking(move || f(&mut lock(&core)))
            .await
            .map_err(|e| Error::Join(e.to_string()))?
    }

    /// Message `seq` of `stream` as applied here (`None` if either does not exist).
    pub fn get(&self, stream: &str, seq: u64) -> Result<Option<StoredMsg>> {
        lock(&self.core).get(stream, seq)
    }

    /// How far the durable snapshot covers the log: give it to
    /// [`crate::LogStore::with_snapshot_floor`] (see [`crate::floor`]).
    pub fn snapshot_floor(&self) -> crate::floor::SnapshotFloor {
        lock(&self.core).snapshot_floor()
    }

    /// The last applied log id.
    pub fn last_applied(&self) -> Option<LogId> {
        lock(&self.core).applied().0
    }

    /// Consumer `name` of `stream` as applied here (`None` if either does not exist).
    pub fn consumer_info(&self, stream: &str, name: &str) -> Result<Option<ConsumerInfo>> {
        lock(&self.core).consumer_info(stream, name)
    }

    /// Every stream's messages and counters.
    pub fn dump(&self) -> Result<BTreeMap<String, StreamDump>> {
        lock(&self.core).dump()
    }

    /// Runs `f` on the core under the lock (tests, embedders that read directly).
    pub fn with_core<T>(&self, f: impl FnOnce(&mut StreamCore<F>) -> T) -> T {
        f(&mut lock(&self.core))
    }
}

/// Builds snapshots of a [`StreamStateMachine`].
pub struct StreamSnapshotBuilder<F: Fs + 'static> {
    sm: StreamStateMachine<F>,
}

impl<F: Fs + 'static> RaftSnapshotBuilder<TypeConfig> for StreamSnapshotBuilder<F> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let file = self
            .sm
            .blocking(|c| c.build_snapshot())
            .await
            .map_err(sm_err)?;
        Ok(to_snapshot(&file))
    }
}

impl<F: Fs + 'static> RaftStateMachine<TypeConfig> for StreamStateMachine<F> {
    type SnapshotBuilder = StreamSnapshotBuilder<F>;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        Ok(lock(&self.core).applied())
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let apply = move |c: &mut StreamCore<F>| {
            let out: Result<Vec<Response>> = entries.into_iter().map(|e| c.apply(e)).collect();
            c.after_batch()?;
            out
        };
        if self.apply_inline {
            if let Some(mut c) = try_lock(&self.core) {
                return apply(&mut c).map_err(sm_err);
            }
        }
        self.blocking(apply).await.map_err(sm_err)
    }

    async fn get_snapshot_builder(&mut self) -> StreamSnapshotBuilder<F> {
        StreamSnapshotBuilder { sm: self.clone() }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let file = SnapshotFile {
            meta: meta.clone(),
            data: snapshot.into_inner(),
        };
        self.blocking(move |c| c.install_snapshot(file))
            .await
            .map_err(sm_err)
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        Ok(lock(&self.core).current_snapshot().map(to_snapshot))
    }
}
