//! `SharedStore`: one store, many threads, and group commit.
//!
//! store-core runs nothing in the background; this type only makes a `Store` safe to share. Under
//! `SyncPolicy::Always`, concurrent appends share fsyncs. `append` goes through a combiner
//! first (`combine.rs`): one thread appends a whole batch of waiting messages and then runs
//! the group commit below once for all of them; the other acknowledged writes (and the
//! combiner itself) take the group commit directly:
//!
//! 1. A writer appends under the lock (buffered, not yet durable) and gets a write number.
//! 2. If no fsync is running, it becomes the leader at once. Otherwise it queues itself (write
//!    number, thread handle) and parks.
//! 3. The leader takes a `SyncTicket` under the lock (the buffer written out, `msgs/` fsynced
//!    if it has new names, the list of block files to fsync), releases the lock so that others
//!    keep appending and queueing, and runs the fsyncs.
//! 4. Back under the lock it records the durable write number, takes from the queue exactly
//!    the writers that fsync covered, and hands leadership to the oldest writer it did not
//!    cover (if any): that writer's thread wakes up as the next leader and its ticket covers
//!    everyone who queued during this fsync. Then it unparks the next leader first (its fsync
//!    should start as soon as possible) and the covered writers after, outside the lock.
//!
//! Why this shape: with 64 writers on 2 cores the cost of a durable append is its context
//! switches, not its fsync (one fsync covers ~60 writers). A condvar `notify_all` woke every
//! waiter after every fsync, most only to find their write not yet covered and sleep again,
//! and a second mutex for the commit state doubled the contention. Here each append parks at
//! most once and is woken exactly once, and there is one lock.
//!
//! Every caller returns only when its own message is durable; a failed fsync poisons the store
//! and every queued writer gets `Error::Poisoned`.

use crate::config::SyncPolicy;
use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::store::{RecoveryReport, Store, StreamState};
use crate::surface::StreamStore;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::Thread;
use std::time::Duration;

mod combine;
mod consumers;
mod export;

/// What a queued writer is told when it is unparked (`Slot::state`).
const WAITING: u8 = 0;
const DURABLE: u8 = 1;
const FAILED: u8 = 2;
const LEAD: u8 = 3;

/// A parked writer's mailbox: the leader stores the outcome, then unparks the thread.
struct Slot {
    state: AtomicU8,
    thread: Thread,
}

struct Waiter {
    /// The write number that must be durable before this writer returns.
    write: u64,
    slot: Arc<Slot>,
}

struct State<F: Fs> {
    store: Store<F>,
    /// Every write numbered up to this is durable.
    durable: u64,
    /// A leader is running fsyncs (or has been chosen and is waking up to run them).
    syncing: bool,
    /// A group fsync failed: the store is poisoned.
    failed: bool,
    /// Parked writers in write-number order (writes are numbered under this lock, and a
    /// writer queues under the same lock hold as its write).
    queue: VecDeque<Waiter>,
}

struct Inner<F: Fs> {
    state: Mutex<State<F>>,
    always: bool,
    /// Snapshots streaming without the lock (`export.rs`): changed under the `state` lock;
    /// `with` waits on `export_done` while it is not 0.
    exports: AtomicU32,
    export_done: Condvar,
    /// Appends waiting for a combiner (`combine.rs`).
    batch: Mutex<combine::Batch>,
}

/// A `Store` shared between threads (`Send + Sync`, cheap to clone), with group commit.
///
/// This is how one process uses a store from many threads: one process owns a store from
/// open to close (its lock, [`crate::Fs::lock`]), so a second `Store::open` of the same
/// directory, in this process or another, is [`crate::Error::Locked`]. Open once, clone this.
pub struct SharedStore<F: Fs> {
    inner: Arc<Inner<F>>,
}

impl<F: Fs> Clone for SharedStore<F> {
    fn clone(&self) -> Self {
        SharedStore {
            inner: Arc::clone(&self.inner),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves the store's memory possibly half-updated; the
    // store's own state machine (poisoning on I/O errors) is what protects the disk, and the
    // data structures are only read after their updates completed, so continue.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fails the group if a leader unwinds (a panicking `Fs`): poisons the store, clears the
/// leader flag and wakes every queued writer with `FAILED`, so that no thread parks forever.
struct LeadGuard<'a, F: Fs> {
    inner: &'a Inner<F>,
    armed: bool,
}

impl<F: Fs> Drop for LeadGuard<'_, F> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut g = lock(&self.inner.state);
        g.store.end_group_sync(&Err(Error::Poisoned));
        let queued = g.fail_group();
        drop(g);
        wake(queued, FAILED);
    }
}

impl<F: Fs> State<F> {
    /// A group fsync failed (or its leader unwound): the store is failed for good, nobody
    /// leads, and every queued writer is taken off the queue to be told `FAILED`.
    fn fail_group(&mut self) -> Vec<Arc<Slot>> {
        self.failed = true;
        self.syncing = false;
        self.queue.drain(..).map(|w| w.slot).collect()
    }
}

/// Most yields a group's gathering waits (`SharedStore::gather`, the combiner's
/// `gather_batch`).
const GATHER_YIELDS: usize = 32;

/// Runs `step` (one yield, then a count of what arrived so far) until two steps in a row
/// bring nothing new after `first`, or `GATHER_YIELDS` steps.
fn until_quiet(first: u64, mut step: impl FnMut() -> u64) {
    let (mut seen, mut idle) = (first, 0);
    for _ in 0..GATHER_YIELDS {
        let n = step();
        if n == seen {
            idle += 1;
            if idle == 2 {
                break;
            }
        } else {
            (idle, seen) = (0, n);
        }
    }
}

/// Tells parked writers `outcome` and unparks them (outside the lock).
fn wake(slots: impl IntoIterator<Item = Arc<Slot>>, outcome: u8) {
    for s in slots {
        s.state.store(outcome, Ordering::Release);
        s.thread.unpark();
    }
}

impl<F: Fs> SharedStore<F> {
    /// Shares `store`.
    pub fn new(store: Store<F>) -> Self {
        let always = store.config().sync == SyncPolicy::Always;
        SharedStore {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    store,
                    durable: 0,
                    syncing: false,
                    failed: false,
                    queue: VecDeque::new(),
                }),
                always,
                exports: AtomicU32::new(0),
                export_done: Condvar::new(),
                batch: Mutex::new(combine::Batch::default()),
            }),
        }
    }

    /// Appends a message; under `Always` returns once it is durable, sharing the fsync with
    /// every concurrent writer.
    pub fn append(&self, subject: &str, headers: &[u8], payload: &[u8]) -> Result<u64> {
        if self.inner.always {
            return self.append_combined(subject, headers, payload);
        }
        lock(&self.inner.state)
            .store
            .append(subject, headers, payload)
    }

    /// `Store::append_with_ttl`, with `append`'s group commit under `Always`.
    pub fn append_with_ttl(
        &self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        ttl: Duration,
    ) -> Result<u64> {
        self.acked(
            |s| s.append_with_ttl(subject, headers, payload, ttl),
            |s| s.append_with_ttl_buffered(subject, headers, payload, ttl),
        )
    }

    /// `Store::append_raw` (a replica's append at a given sequence and timestamp), with
    /// `append`'s group commit under `Always`.
    pub fn append_raw(
        &self,
        seq: u64,
        ts: i64,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<u64> {
        self.acked(
            |s| s.append_raw(seq, ts, subject, headers, payload),
            |s| s.append_raw_buffered(seq, ts, subject, headers, payload),
        )
    }

    /// `Store::skip_msg`.
    pub fn skip_msg(&self, seq: u64) -> Result<u64> {
        self.skip_many(seq, 1)
    }

    /// `Store::skip_many`: durable before it returns in every policy. The store fsyncs the
    /// skip itself under the lock (**skip.data**, **skip.dir**), like a structural operation;
    /// that fsync also covers whatever a group leader is fsyncing without the lock at that
    /// moment (`group_inflight`), so a skip never returns before a write it follows.
    pub fn skip_many(&self, first: u64, count: u64) -> Result<u64> {
        let mut g = lock(&self.inner.state);
        if g.failed {
            return Err(Error::Poisoned);
        }
        g.store.skip_many(first, count)
    }

    /// One acknowledged write: `direct` when the policy is not `Always` (the store's own sync
    /// policy applies), else `buffered` and then the group commit (`wait_durable`) for the
    /// write number it returns.
    fn acked(
        &self,
        direct: impl FnOnce(&mut Store<F>) -> Result<u64>,
        buffered: impl FnOnce(&mut Store<F>) -> Result<(u64, u64)>,
    ) -> Result<u64> {
        let mut g = lock(&self.inner.state);
        if !self.inner.always {
            return direct(&mut g.store);
        }
        if g.failed {
            return Err(Error::Poisoned);
        }
        let (seq, write) = buffered(&mut g.store)?;
        self.wait_durable_from(g, write, true)?;
        Ok(seq)
    }

    /// Returns once write `write` is durable: leads a group fsync if none is running, else
    /// queues and parks until a leader covers it (or hands it the lead).
    /// `gather`: whether a leader first lets other writers append (not for a combiner, whose
    /// batch already holds everyone who was waiting).
    fn wait_durable_from<'a>(
        &'a self,
        mut g: MutexGuard<'a, State<F>>,
        write: u64,
        gather: bool,
    ) -> Result<()> {
        if g.durable >= write {
            return Ok(());
        }
        if g.syncing {
            let slot = Arc::new(Slot {
                state: AtomicU8::new(WAITING),
                thread: std::thread::current(),
            });
            g.queue.push_back(Waiter {
                write,
                slot: Arc::clone(&slot),
            });
            drop(g);
            loop {
                match slot.state.load(Ordering::Acquire) {
                    DURABLE => return Ok(()),
                    FAILED => return Err(Error::Poisoned),
                    LEAD => break,
                    // `park` may return spuriously: the state word is the truth
                    _ => std::thread::park(),
                }
            }
            g = lock(&self.inner.state);
            debug_assert!(g.syncing, "the lead was handed over with the flag set");
        } else {
            g.syncing = true;
        }
        self.lead(g, write, gather)
    }

    /// Runs one group fsync as the leader (`syncing` is set and owned by this thread), then
    /// wakes the writers it covered and hands the lead on.
    fn lead<'a>(&'a self, g: MutexGuard<'a, State<F>>, write: u64, gather: bool) -> Result<()> {
        // If the `Fs` panics inside the fsync, nobody else would ever lead or wake the queue:
        // the guard fails the group instead (every queued writer gets `Poisoned`).
        let mut guard = LeadGuard {
            inner: &self.inner,
            armed: true,
        };
        // declared after the guard so that an unwind releases the lock before the guard
        // takes it
        let mut g = g;
        if gather {
            g = self.gather(g);
        }
        let (result, upto) = match g.store.begin_group_sync() {
            Ok(ticket) => {
                drop(g);
                let r = ticket.run();
                g = lock(&self.inner.state);
                (r, ticket.upto)
            }
            Err(e) => (Err(e), 0),
        };
        guard.armed = false;
        g.store.end_group_sync(&result);
        let mut covered = Vec::new();
        let mut next = None;
        match &result {
            Ok(()) => {
                // the ticket was taken after this leader's own write
                debug_assert!(upto >= write);
                g.durable = g.durable.max(upto);
                let durable = g.durable;
                while let Some(w) = g.queue.pop_front_if(|w| w.write <= durable) {
                    covered.push(w.slot);
                }
                next = g.queue.pop_front().map(|w| w.slot);
                if next.is_none() {
                    g.syncing = false;
                }
            }
            Err(_) => covered = g.fail_group(),
        }
        let outcome = if result.is_ok() { DURABLE } else { FAILED };
        drop(g);
        // the next leader first: its fsync is what everyone still queued waits for
        wake(next, LEAD);
        wake(covered, outcome);
        result
    }

    /// Lets the writers the last group woke write again before this group's fsync starts:
    /// yields the lock until two yields in a row bring no new write (at most `GATHER_YIELDS`
    /// yields). Without it the next fsync started at once with the few writes queued during
    /// the last one, and every writer woken by it waited a whole extra fsync (two per durable
    /// append). A lone writer pays two `yield_now`s (nothing else runs, so nothing arrives).
    fn gather<'a>(&'a self, g: MutexGuard<'a, State<F>>) -> MutexGuard<'a, State<F>> {
        let first = g.store.writes();
        let mut g = Some(g);
        until_quiet(first, || {
            drop(g.take());
            std::thread::yield_now();
            g.insert(lock(&self.inner.state)).store.writes()
        });
        // every step re-took the lock before it returned: `g` holds it (the `else` is never
        // taken, and would only take the lock again)
        g.unwrap_or_else(|| lock(&self.inner.state))
    }

    /// Runs `f` on the store under its lock (reads, purge, compact, …). A `sync` in `f` also
    /// fsyncs the files a group leader may be fsyncing at that moment. Waits while a
    /// `snapshot_to` streams (`f` might erase or truncate: change the bytes it copies).
    pub fn with<T>(&self, f: impl FnOnce(&mut Store<F>) -> T) -> T {
        f(&mut self.wait_exports(lock(&self.inner.state)).store)
    }

    /// Waits, releasing the lock, until no snapshot streams.
    fn wait_exports<'a>(&'a self, mut g: MutexGuard<'a, State<F>>) -> MutexGuard<'a, State<F>> {
        while self.inner.exports.load(Ordering::Acquire) > 0 {
            g = self
                .inner
                .export_done
                .wait(g)
                .unwrap_or_else(|e| e.into_inner());
        }
        g
    }

    /// The store under the lock without waiting for a snapshot: for the operations that
    /// cannot change a fixed block's bytes (reads, `sync`, `purge`; see `export.rs`).
    fn held(&self) -> Held<'_, F> {
        Held(lock(&self.inner.state))
    }

    /// The store under the lock once no snapshot streams (as [`SharedStore::with`]).
    fn waited(&self) -> Held<'_, F> {
        Held(self.wait_exports(lock(&self.inner.state)))
    }
}

/// The store under the shared lock (`SharedStore::held`, `waited`).
struct Held<'a, F: Fs>(MutexGuard<'a, State<F>>);

impl<F: Fs> std::ops::Deref for Held<'_, F> {
    type Target = Store<F>;
    fn deref(&self) -> &Store<F> {
        &self.0.store
    }
}

impl<F: Fs> std::ops::DerefMut for Held<'_, F> {
    fn deref_mut(&mut self) -> &mut Store<F> {
        &mut self.0.store
    }
}

/// The stream's operations on a handle (clone one per thread): the acknowledged writes take
/// the group commit (`append`, the skips, deliveries and acks, above), the other changes wait
/// for a streaming snapshot ([`SharedStore::with`]), the reads, `sync` and `purge` do not.
impl<F: Fs> StreamStore for SharedStore<F> {
    type Error = Error;

    fn append(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> Result<u64> {
        SharedStore::append(self, subject, headers, payload)
    }
    fn append_with_ttl(&mut self, s: &str, h: &[u8], p: &[u8], ttl: Duration) -> Result<u64> {
        SharedStore::append_with_ttl(self, s, h, p, ttl)
    }
    fn append_raw(&mut self, seq: u64, ts: i64, s: &str, h: &[u8], p: &[u8]) -> Result<u64> {
        SharedStore::append_raw(self, seq, ts, s, h, p)
    }
    fn skip_msg(&mut self, seq: u64) -> Result<u64> {
        SharedStore::skip_msg(self, seq)
    }
    fn skip_many(&mut self, first: u64, count: u64) -> Result<u64> {
        SharedStore::skip_many(self, first, count)
    }
    fn update_acks(&mut self, name: &str, dseq: u64, sseq: u64) -> Result<()> {
        SharedStore::update_acks(self, name, dseq, sseq)
    }
    fn update_delivered(&mut self, n: &str, dseq: u64, sseq: u64, dc: u64, ts: i64) -> Result<()> {
        SharedStore::update_delivered(self, n, dseq, sseq, dc, ts)
    }
    crate::forward_stream_ops!([changes] Store<F>, this => &mut this.waited(), std::convert::identity);
    crate::forward_stream_ops!([sync_purge reads] Store<F>, this => &mut this.held(), std::convert::identity);

    fn state(&mut self) -> Result<StreamState> {
        Ok(self.held().state())
    }
    fn consumer_names(&mut self) -> Result<Vec<String>> {
        Ok(self.held().consumer_names())
    }
    fn recovery_report(&self) -> RecoveryReport {
        self.held().recovery_report().clone()
    }
    /// Syncs; the last handle also writes `index.db` and closes the store (`Store::close`).
    fn close(self) -> Result<()> {
        self.held().sync()?;
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner
                .state
                .into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .store
                .close(),
            Err(_) => Ok(()),
        }
    }
}
