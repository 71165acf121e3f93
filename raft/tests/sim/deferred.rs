//! The log as the threaded adapter behaves, on one thread: `append` returns once the entries
//! are written, and the fsync and the `LogFlushed` callback come later, after a simulated disk
//! latency, in order. (The simulation's log runs inline I/O, which fsyncs before `append`
//! returns.) The log underneath is opened with `AckBeforeSync`, so it never fsyncs an append
//! itself: this wrapper's flusher does, through `LogStore::sync_now`.

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageError};
use seqstore_core::Fs;
use seqstore_raft::{Entry, LogId, LogReader, LogStore, TypeConfig, Vote};
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::time::Duration;
use tokio::sync::mpsc;

pub struct DeferredLog<F: Fs + 'static> {
    log: LogStore<F>,
    tx: mpsc::UnboundedSender<LogFlushed<TypeConfig>>,
}

impl<F: Fs + 'static> DeferredLog<F> {
    /// Starts the flusher: `latency` after the first waiting callback, one fsync for all the
    /// appends written by then, then their callbacks, in order.
    pub fn new(log: LogStore<F>, latency: Duration) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<LogFlushed<TypeConfig>>();
        let l = log.clone();
        tokio::spawn(async move {
            while let Some(cb) = rx.recv().await {
                tokio::time::sleep(latency).await;
                // group commit: one fsync for every append written meanwhile
                let mut cbs = vec![cb];
                while let Ok(c) = rx.try_recv() {
                    cbs.push(c);
                }
                let r = l.sync_now().await;
                for c in cbs {
                    c.log_io_completed(r.as_ref().map(|_| ()).map_err(|e| e.to_io()));
                }
            }
        });
        DeferredLog { log, tx }
    }
}

impl<F: Fs + 'static> RaftLogReader<TypeConfig> for DeferredLog<F> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<u64>> {
        self.log.try_get_log_entries(range).await
    }
}

impl<F: Fs + 'static> RaftLogStorage<TypeConfig> for DeferredLog<F> {
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
        // written, not synced (AckBeforeSync underneath): the flusher syncs, then calls back
        self.log
            .append_with(entries, Box::new(|_| {}))
            .await
            .map_err(|e| e.to_storage(openraft::ErrorSubject::Logs, openraft::ErrorVerb::Write))?;
        let _ = self.tx.send(cb);
        Ok(())
    }
    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        self.log.truncate(log_id).await
    }
    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        self.log.purge(log_id).await
    }
}
