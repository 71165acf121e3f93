//! `SharedStore`: one store, many threads, and group commit.
//!
//! store-core starts no threads; this type only makes a `Store` safe to share. Under
//! `SyncPolicy::Always`, concurrent appends share fsyncs: each writer appends under the store's
//! lock (buffered, not yet durable), then waits until a sync covers its write. The first waiter
//! that finds no sync running becomes the leader: it takes a `SyncTicket` under the lock (the
//! buffer written out, `msgs/` fsynced if it has new names, the list of block files to fsync),
//! releases the lock so that others keep appending, runs the fsyncs, and wakes everyone whose
//! write it covered. Every caller returns only when its own message is durable; a failed fsync
//! poisons the store and every waiter gets the error.
//!
//! Lock order: never the sync state and the store at once.

use crate::config::SyncPolicy;
use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::store::{Store, StoredMsg, StreamState};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

#[derive(Default)]
struct Commit {
    /// Every write numbered up to this is durable.
    durable: u64,
    /// A leader is running fsyncs.
    syncing: bool,
    /// A group fsync failed: the store is poisoned.
    failed: bool,
}

struct Inner<F: Fs> {
    store: Mutex<Store<F>>,
    commit: Mutex<Commit>,
    wake: Condvar,
    always: bool,
}

/// A `Store` shared between threads (`Send + Sync`, cheap to clone), with group commit.
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

impl<F: Fs> SharedStore<F> {
    /// Shares `store`.
    pub fn new(store: Store<F>) -> Self {
        let always = store.config().sync == SyncPolicy::Always;
        SharedStore {
            inner: Arc::new(Inner {
                store: Mutex::new(store),
                commit: Mutex::new(Commit::default()),
                wake: Condvar::new(),
                always,
            }),
        }
    }

    /// Appends a message; under `Always` returns once it is durable, sharing the fsync with
    /// every concurrent writer.
    pub fn append(&self, subject: &str, headers: &[u8], payload: &[u8]) -> Result<u64> {
        if !self.inner.always {
            return lock(&self.inner.store).append(subject, headers, payload);
        }
        let (seq, write) = lock(&self.inner.store).append_buffered(subject, headers, payload)?;
        self.wait_durable(write)?;
        Ok(seq)
    }

    fn wait_durable(&self, write: u64) -> Result<()> {
        let inner = &*self.inner;
        let mut c = lock(&inner.commit);
        loop {
            if c.durable >= write {
                return Ok(());
            }
            if c.failed {
                return Err(Error::Poisoned);
            }
            if c.syncing {
                c = inner.wake.wait(c).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            c.syncing = true;
            drop(c);
            // the leader: ticket under the store lock, fsyncs without it
            let ticket = lock(&inner.store).begin_group_sync();
            let (result, upto) = match ticket {
                Ok(t) => (t.run(), t.upto),
                Err(e) => (Err(e), 0),
            };
            lock(&inner.store).end_group_sync(&result);
            c = lock(&inner.commit);
            c.syncing = false;
            match result {
                Ok(()) => c.durable = c.durable.max(upto),
                Err(_) => c.failed = true,
            }
            inner.wake.notify_all();
            result?;
        }
    }

    /// Runs `f` on the store under its lock (reads, purge, compact, …).
    pub fn with<T>(&self, f: impl FnOnce(&mut Store<F>) -> T) -> T {
        f(&mut lock(&self.inner.store))
    }

    /// `Store::get`.
    pub fn get(&self, seq: u64) -> Result<StoredMsg> {
        self.with(|s| s.get(seq))
    }

    /// `Store::state`.
    pub fn state(&self) -> StreamState {
        self.with(|s| s.state())
    }

    /// `Store::sync`.
    pub fn sync(&self) -> Result<()> {
        self.with(|s| s.sync())
    }

    /// `Store::purge`.
    pub fn purge(&self) -> Result<u64> {
        self.with(|s| s.purge())
    }
}
