//! The log as the threaded adapter behaves, on one thread: `append` returns once the entries
//! are written, and the fsync and the `LogFlushed` callback come later, after a simulated disk
//! latency, in order. (The simulation's log runs inline I/O, which fsyncs before `append`
//! returns.) The log underneath is opened with `AckBeforeSync`, so it never fsyncs an append
//! itself: this wrapper's flusher does, through `LogStore::sync_now`.

use openraft::storage::LogFlushed;
use openraft::StorageError;
use seqstore_core::Fs;
use seqstore_raft::{Entry, LogStore, TypeConfig};
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

delegate_to_log!(DeferredLog);

impl<F: Fs + 'static> DeferredLog<F> {
    /// Writes the entries and leaves their fsync and callback to the flusher.
    async fn append_vec(
        &mut self,
        entries: Vec<Entry>,
        cb: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<u64>> {
        // written, not synced (AckBeforeSync underneath): the flusher syncs, then calls back
        self.log
            .append_with(entries, Box::new(|_| {}))
            .await
            .map_err(|e| e.to_storage(openraft::ErrorSubject::Logs, openraft::ErrorVerb::Write))?;
        let _ = self.tx.send(cb);
        Ok(())
    }
}
