//! openraft's `RaftLogStorage` and `RaftLogReader` on [`LogCore`].
//!
//! **Where the I/O runs, and why the order is safe.** openraft calls are async; the log's file
//! I/O is blocking. Every write (append, sync, truncate, purge, vote, committed) is sent as a
//! job to one dedicated I/O thread per log over a FIFO channel, and runs there in the order it
//! was sent: "all write-IO must be serialized" holds by construction, even if openraft dropped
//! a future after sending its job (a job once sent runs; the next one runs after it). Reads run
//! on tokio's blocking pool and take the same lock as the jobs, so a read sees every write
//! whose call returned.
//!
//! **Group commit.** `append` writes its entries (readable at once) and returns; its callback
//! waits for the fsync. Before the I/O thread blocks for its next job it fsyncs once and fires
//! every callback waiting: appends that queued while an fsync ran share the next one. Any other
//! write job first makes pending appends durable and fires their callbacks, so a vote, a
//! truncate or a purge is never durable ahead of an append sent before it. (`save_committed`
//! changes memory only and does not wait.)
//!
//! **Inline I/O** ([`LogConfig::with_inline_io`]): no thread and no blocking pool; each job
//! runs on the calling task, then the fsync of its appends and their callbacks, so the order
//! and durability arguments above hold unchanged (a queue that is empty after every job).

use crate::error::{Error, Result};
use crate::floor::SnapshotFloor;
use crate::log::{LogConfig, LogCore};
use crate::types::{Entry, LogId, TypeConfig, Vote};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader, StorageError};
use seqstore_core::Fs;
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use tokio::sync::oneshot;

type Core<F> = Arc<Mutex<LogCore<F>>>;
/// Called once the entries of one append are durable (or failed to become so).
pub type OnDurable = Box<dyn FnOnce(io::Result<()>) + Send>;
type WriteFn<F> = Box<dyn FnOnce(&mut LogCore<F>) + Send>;

enum Job<F: Fs> {
    /// Write the entries, answer `written`, and call `durable` after the next fsync.
    Append {
        entries: Vec<Entry>,
        written: oneshot::Sender<Result<()>>,
        durable: OnDurable,
    },
    /// Any other write: runs after the pending appends are durable.
    Write(WriteFn<F>),
    /// A change in memory only (the committed id): runs in order, without waiting for the
    /// pending appends' fsync.
    Light(WriteFn<F>),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // a panicking job leaves the log's memory possibly half-updated; the store poisons itself
    // on I/O errors, which is what protects the disk
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The I/O thread's handle: closing the channel ends the thread, which is joined on drop (so
/// that the store is closed before the log can be reopened).
struct Worker<F: Fs> {
    tx: Option<mpsc::Sender<Job<F>>>,
    thread: Option<JoinHandle<()>>,
}

impl<F: Fs> Drop for Worker<F> {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Appends whose callbacks may wait for one shared fsync, at most.
const MAX_PENDING: usize = 64;

/// The I/O thread: runs jobs in order, one fsync per burst of appends (at most
/// [`MAX_PENDING`] of them).
fn io_thread<F: Fs>(core: Core<F>, rx: mpsc::Receiver<Job<F>>, ack_early: bool) {
    let mut pending: Vec<OnDurable> = Vec::new();
    loop {
        // a steady stream of appends must not hold back their callbacks for ever
        if pending.len() >= MAX_PENDING {
            flush(&core, &mut pending);
        }
        let job = match rx.try_recv() {
            Ok(j) => j,
            Err(mpsc::TryRecvError::Empty) => {
                flush(&core, &mut pending);
                match rx.recv() {
                    Ok(j) => j,
                    Err(_) => break,
                }
            }
            Err(mpsc::TryRecvError::Disconnected) => break,
        };
        run_job(&core, &mut pending, job, ack_early);
    }
    flush(&core, &mut pending);
}

/// Runs one job; an append's callback joins `pending` (fired by the next [`flush`]).
/// `ack_early` is the `AckBeforeSync` ablation: the callback fires at once, unsynced.
fn run_job<F: Fs>(core: &Core<F>, pending: &mut Vec<OnDurable>, job: Job<F>, ack_early: bool) {
    match job {
        Job::Append {
            entries,
            written,
            durable,
        } => {
            let r = lock(core).append_buffered(entries);
            match &r {
                Ok(()) if ack_early => durable(Ok(())),
                Ok(()) => pending.push(durable),
                Err(e) => durable(Err(e.to_io())),
            }
            let _ = written.send(r);
        }
        Job::Write(f) => {
            flush(core, pending);
            f(&mut lock(core));
        }
        Job::Light(f) => f(&mut lock(core)),
    }
}

/// Makes every written entry durable and fires the waiting callbacks with the outcome.
fn flush<F: Fs>(core: &Core<F>, pending: &mut Vec<OnDurable>) {
    if pending.is_empty() {
        return;
    }
    let r = lock(core).sync();
    for cb in pending.drain(..) {
        cb(r.as_ref().map_err(|e| e.to_io()).copied());
    }
}

/// Where the write jobs run.
enum Exec<F: Fs> {
    /// On the log's I/O thread.
    Thread(Worker<F>),
    /// On the calling task, each job followed by the fsync of its appends
    /// ([`LogConfig::with_inline_io`]).
    Inline { ack_early: bool },
}

/// seqstore as openraft's log storage. Cheap to clone (clones share the log).
pub struct LogStore<F: Fs + 'static> {
    core: Core<F>,
    exec: Arc<Exec<F>>,
    floor: Option<SnapshotFloor>,
}

impl<F: Fs + 'static> Clone for LogStore<F> {
    fn clone(&self) -> Self {
        LogStore {
            core: Arc::clone(&self.core),
            exec: Arc::clone(&self.exec),
            floor: self.floor.clone(),
        }
    }
}

/// A reader of the log (openraft's `LogReader`): reads only, on the blocking pool.
pub struct LogReader<F: Fs + 'static> {
    core: Core<F>,
    inline: bool,
}

impl<F: Fs + 'static> LogStore<F> {
    /// Opens (recovers) the log on `fs` and starts its I/O thread (none with
    /// [`LogConfig::with_inline_io`]).
    pub fn open(fs: F, cfg: LogConfig) -> Result<Self> {
        let ack_early = cfg.ablated("ack-before-sync");
        let inline = cfg.inline_io;
        let core = Arc::new(Mutex::new(LogCore::open(fs, cfg)?));
        let exec = if inline {
            Exec::Inline { ack_early }
        } else {
            let (tx, rx) = mpsc::channel();
            let c = Arc::clone(&core);
            let thread = std::thread::Builder::new()
                .name("seqstore-raft-log".into())
                .spawn(move || io_thread(c, rx, ack_early))
                .map_err(|e| Error::io("spawn", "seqstore-raft-log", e))?;
            Exec::Thread(Worker {
                tx: Some(tx),
                thread: Some(thread),
            })
        };
        Ok(LogStore {
            core,
            exec: Arc::new(exec),
            floor: None,
        })
    }

    /// Never purges past the state machine's durable snapshot: `purge(upto)` first waits until
    /// `floor` covers `upto` (and fails if installing that snapshot failed). Without it,
    /// openraft 0.9.25 can purge a follower's log before the snapshot it received is installed,
    /// and a node that stops in between cannot start again; see [`crate::floor`].
    pub fn with_snapshot_floor(mut self, floor: SnapshotFloor) -> Self {
        self.floor = Some(floor);
        self
    }

    fn send(&self, job: Job<F>) -> Result<()> {
        match &*self.exec {
            Exec::Thread(w) => {
                let tx = w.tx.as_ref().expect("set until drop");
                tx.send(job)
                    .map_err(|_| Error::Join("the log's I/O thread is gone".into()))
            }
            Exec::Inline { ack_early } => {
                // the I/O thread with a queue that is empty after every job
                let mut pending = Vec::new();
                run_job(&self.core, &mut pending, job, *ack_early);
                flush(&self.core, &mut pending);
                Ok(())
            }
        }
    }

    /// Runs `f` on the I/O thread after every write sent before it (and their fsync).
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut LogCore<F>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Write(Box::new(move |c| {
            let _ = tx.send(f(c));
        })))?;
        rx.await
            .map_err(|_| Error::Join("write job dropped".into()))?
    }

    /// `append` with any completion: returns once the entries are written (readable);
    /// `durable` is called once they are durable (what openraft's callback is given). The
    /// crash tests call this to note when each append became durable. With inline I/O the
    /// fsync runs before this returns, and a failed fsync fails the append too (as well as
    /// the callback), so a caller that does not wait for the callback cannot take an append
    /// over a failed fsync for a good one. (openraft itself waits for the callback before
    /// answering a leader: `tests/follower_ack.rs`.)
    pub async fn append_with(&self, entries: Vec<Entry>, durable: OnDurable) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        let synced: Arc<Mutex<Option<String>>> = Arc::default();
        let durable: OnDurable = match &*self.exec {
            Exec::Inline { .. } => {
                let s = Arc::clone(&synced);
                Box::new(move |r: io::Result<()>| {
                    if let Err(e) = &r {
                        *lock(&s) = Some(e.to_string());
                    }
                    durable(r)
                })
            }
            Exec::Thread(_) => durable,
        };
        self.send(Job::Append {
            entries,
            written: tx,
            durable,
        })?;
        rx.await
            .map_err(|_| Error::Join("append job dropped".into()))??;
        let failed = lock(&synced).take();
        match failed {
            Some(e) => Err(Error::io("sync", "log", io::Error::other(e))),
            None => Ok(()),
        }
    }

    /// Makes every entry written so far durable (one fsync), after every write sent before.
    pub async fn sync_now(&self) -> Result<()> {
        self.write(|c| c.sync()).await
    }

    /// Saves the vote, durable before return.
    pub async fn save_vote_now(&self, vote: Vote) -> Result<()> {
        self.write(move |c| c.save_vote(&vote)).await
    }

    /// Truncates from `log_id` on, durable before return.
    pub async fn truncate_now(&self, log_id: LogId) -> Result<()> {
        self.write(move |c| c.truncate(log_id)).await
    }

    /// Purges up to `log_id`, durable before return (once the snapshot floor, if any, covers
    /// it).
    pub async fn purge_now(&self, log_id: LogId) -> Result<()> {
        if let Some(f) = &self.floor {
            f.covers(log_id.index).await?;
        }
        self.write(move |c| c.purge(log_id)).await
    }

    /// `(last_purged, last_log)` once every write sent before is done.
    pub async fn state_now(&self) -> Result<(Option<LogId>, Option<LogId>)> {
        self.write(|c| Ok(c.log_state())).await
    }

    /// The index the log must hold durably again before this node votes or stands for
    /// election, if its recovery found damage to durable entries ([`crate::damaged`]);
    /// `None` once it does. [`crate::gate`] keeps a node to this.
    pub fn damaged(&self) -> Option<u64> {
        lock(&self.core).damaged()
    }

    /// The vote last saved and the id of the last entry present (or last purged), as they
    /// are now (a gated vote request's answer: see [`crate::gate`]).
    pub fn vote_and_last(&self) -> (Option<Vote>, Option<LogId>) {
        let core = lock(&self.core);
        (core.vote(), core.log_state().1)
    }

    /// A reader sharing this log.
    pub fn reader(&self) -> LogReader<F> {
        LogReader {
            core: Arc::clone(&self.core),
            inline: matches!(*self.exec, Exec::Inline { .. }),
        }
    }
}

/// `start..end` of a range of indices.
fn bounds(r: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match r.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match r.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

async fn read_range<F: Fs + 'static>(
    core: &Core<F>,
    inline: bool,
    start: u64,
    end: u64,
) -> Result<Vec<Entry>> {
    if inline {
        return lock(core).read(start, end);
    }
    let core = Arc::clone(core);
    tokio::task::spawn_blocking(move || lock(&core).read(start, end))
        .await
        .map_err(|e| Error::Join(e.to_string()))?
}

fn read_err(e: Error) -> StorageError<u64> {
    e.to_storage(ErrorSubject::Logs, ErrorVerb::Read)
}

impl<F: Fs + 'static> RaftLogReader<TypeConfig> for LogReader<F> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<u64>> {
        let (s, e) = bounds(&range);
        read_range(&self.core, self.inline, s, e)
            .await
            .map_err(read_err)
    }
}

impl<F: Fs + 'static> RaftLogReader<TypeConfig> for LogStore<F> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<u64>> {
        let inline = matches!(*self.exec, Exec::Inline { .. });
        let (s, e) = bounds(&range);
        read_range(&self.core, inline, s, e).await.map_err(read_err)
    }
}

impl<F: Fs + 'static> RaftLogStorage<TypeConfig> for LogStore<F> {
    type LogReader = LogReader<F>;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<u64>> {
        let (last_purged_log_id, last_log_id) = lock(&self.core).log_state();
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> LogReader<F> {
        self.reader()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError<u64>> {
        self.save_vote_now(*vote)
            .await
            .map_err(|e| e.to_storage(ErrorSubject::Vote, ErrorVerb::Write))
    }

    /// The vote last saved; while the log is damaged ([`crate::gate`]), never a committed one:
    /// openraft restarts a node whose committed vote is its own as that term's leader, and a
    /// leader that lost entries of its own term would write other entries under their ids.
    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError<u64>> {
        let core = lock(&self.core);
        let vote = core.vote();
        Ok(match core.damaged() {
            Some(_) => vote.map(|v| Vote {
                committed: false,
                ..v
            }),
            None => vote,
        })
    }

    async fn save_committed(&mut self, c: Option<LogId>) -> Result<(), StorageError<u64>> {
        // kept in memory, written with the next metadata write (openraft makes it optional):
        // no reason to wait behind an fsync for it
        self.send(Job::Light(Box::new(move |core| core.save_committed(c))))
            .map_err(|e| e.to_storage(ErrorSubject::Store, ErrorVerb::Write))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError<u64>> {
        Ok(lock(&self.core).committed())
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
        self.append_with(entries, Box::new(move |r| cb.log_io_completed(r)))
            .await
            .map_err(|e| e.to_storage(ErrorSubject::Logs, ErrorVerb::Write))
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        self.truncate_now(log_id)
            .await
            .map_err(|e| e.to_storage(ErrorSubject::Logs, ErrorVerb::Delete))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        self.purge_now(log_id)
            .await
            .map_err(|e| e.to_storage(ErrorSubject::Logs, ErrorVerb::Delete))
    }
}
