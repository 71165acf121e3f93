//! Flat combining for `SharedStore::append` under `SyncPolicy::Always`: one thread appends
//! for everyone waiting.
//!
//! A writer puts its message in the shared batch (bytes copied, under a lock held for that
//! copy only). If nobody is combining, it becomes the combiner; otherwise it parks until its
//! result is in its mailbox. The combiner waits for the batch to stop growing (yields), takes
//! it, appends every message under the store's lock in one hold, runs the group commit for
//! the last one (`wait_durable`: its fsync covers the whole batch), hands the combining to the
//! oldest writer that queued meanwhile, and then hands every writer of its batch its own
//! result.
//!
//! Why: with many more writers than cores a durable append costs CPU and context switches
//! more than its share of the fsync, mostly each writer contending for the store's lock to
//! append its own message and being woken for its result. Here a writer takes the store's lock never, parks once
//! and is woken once; the store's lock is held by one thread per batch.
//!
//! The outcome of each message is the one `Store::append` would give it in that order: its
//! own refusal (subject, size, limits), or its sequence once durable; a failed fsync fails
//! every message of the batch (the first gets the I/O error, the rest `Poisoned`).

use super::{lock, until_quiet, SharedStore, Slot, WAITING};
use crate::error::{Error, Result};
use crate::fs::Fs;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// What a parked writer finds in its slot's state when unparked: its result is in the mail,
/// or it is to combine the next batch (the group commit's own words, in this protocol).
const DONE: u8 = super::DURABLE;
const COMBINE: u8 = super::LEAD;

/// A writer's mailbox: its result, then `DONE` in the slot, then an unpark.
struct Mail {
    slot: Slot,
    result: Mutex<Option<Result<u64>>>,
}

impl Mail {
    fn take(&self) -> Result<u64> {
        lock(&self.result).take().unwrap_or(Err(Error::Poisoned))
    }

    fn deliver(&self, r: Result<u64>) {
        *lock(&self.result) = Some(r);
        self.slot.state.store(DONE, Ordering::Release);
        self.slot.thread.unpark();
    }
}

/// One queued message: its three parts' lengths in `Batch::bytes`, in order.
struct Req {
    lens: [usize; 3],
    mail: Arc<Mail>,
}

/// The messages waiting for a combiner, and whether one is running (or chosen and waking).
#[derive(Default)]
pub(super) struct Batch {
    bytes: Vec<u8>,
    reqs: Vec<Req>,
    active: bool,
}

/// If the combiner unwinds (a panicking `Fs`), every writer of its batch is told `Poisoned`
/// and the combining is handed on or released, so that nobody parks forever.
struct CombineGuard<'a, F: Fs> {
    shared: &'a SharedStore<F>,
    reqs: Vec<Req>,
}

impl<F: Fs> Drop for CombineGuard<'_, F> {
    fn drop(&mut self) {
        if self.reqs.is_empty() {
            return;
        }
        lock(&self.shared.inner.state).failed = true;
        self.shared.hand_on();
        for r in self.reqs.drain(..) {
            r.mail.deliver(Err(Error::Poisoned));
        }
    }
}

impl<F: Fs> SharedStore<F> {
    /// `append` under `Always`: queues the message and parks, or combines (module docs).
    pub(super) fn append_combined(
        &self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<u64> {
        let mail = Arc::new(Mail {
            slot: Slot {
                state: AtomicU8::new(WAITING),
                thread: std::thread::current(),
            },
            result: Mutex::new(None),
        });
        let combine = {
            let mut b = lock(&self.inner.batch);
            for part in [subject.as_bytes(), headers, payload] {
                b.bytes.extend_from_slice(part);
            }
            b.reqs.push(Req {
                lens: [subject.len(), headers.len(), payload.len()],
                mail: Arc::clone(&mail),
            });
            !std::mem::replace(&mut b.active, true)
        };
        if !combine {
            loop {
                match mail.slot.state.load(Ordering::Acquire) {
                    DONE => return mail.take(),
                    COMBINE => break,
                    // `park` may return spuriously: the state word is the truth
                    _ => std::thread::park(),
                }
            }
        }
        self.combine(&mail);
        mail.take()
    }

    /// Runs one batch as the combiner (the caller's own message is in it).
    fn combine(&self, own: &Arc<Mail>) {
        self.gather_batch();
        let (bytes, reqs) = {
            let mut b = lock(&self.inner.batch);
            (std::mem::take(&mut b.bytes), std::mem::take(&mut b.reqs))
        };
        let mut guard = CombineGuard { shared: self, reqs };
        let results = self.apply(&bytes, &guard.reqs);
        let reqs = std::mem::take(&mut guard.reqs);
        // the next combiner first: its batch is what everyone still queued waits for
        self.hand_on();
        for (r, res) in reqs.into_iter().zip(results) {
            if Arc::ptr_eq(&r.mail, own) {
                *lock(&own.result) = Some(res);
            } else {
                r.mail.deliver(res);
            }
        }
    }

    /// Hands the combining to the oldest queued writer, or releases it if none is queued.
    fn hand_on(&self) {
        let next = {
            let mut b = lock(&self.inner.batch);
            let next = b.reqs.first().map(|r| Arc::clone(&r.mail));
            b.active = next.is_some();
            next
        };
        if let Some(m) = next {
            m.slot.state.store(COMBINE, Ordering::Release);
            m.slot.thread.unpark();
        }
    }

    /// Yields until two yields in a row bring no new message (at most `GATHER_YIELDS`): the
    /// writers the last batch woke queue their next messages into this one.
    fn gather_batch(&self) {
        let queued = || lock(&self.inner.batch).reqs.len() as u64;
        until_quiet(queued(), || {
            std::thread::yield_now();
            queued()
        });
    }

    /// Appends the batch under one hold of the store's lock, then makes it durable with one
    /// group commit. Returns each message's outcome, in order.
    fn apply(&self, bytes: &[u8], reqs: &[Req]) -> Vec<Result<u64>> {
        let mut g = lock(&self.inner.state);
        let mut out = Vec::with_capacity(reqs.len());
        let (mut at, mut last_write) = (0usize, None);
        for r in reqs {
            let [s, h, p] = r.lens;
            let (subject, rest) = bytes[at..].split_at(s);
            let (headers, rest) = rest.split_at(h);
            let payload = &rest[..p];
            at += s + h + p;
            let res = match (g.failed, std::str::from_utf8(subject)) {
                (true, _) => Err(Error::Poisoned),
                // (it was a `&str`: never taken)
                (false, Err(_)) => Err(Error::InvalidArgument("subject is not UTF-8".into())),
                (false, Ok(subject)) => g.store.append_buffered(subject, headers, payload),
            };
            out.push(res.map(|(seq, write)| {
                last_write = Some(write);
                seq
            }));
        }
        let Some(write) = last_write else {
            return out;
        };
        if let Err(e) = self.wait_durable_from(g, write, false) {
            // no message of this batch is durable: the first gets the error, the rest that
            // the store is failed
            let mut first = Some(e);
            for r in out.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(first.take().unwrap_or(Error::Poisoned));
            }
        }
        out
    }
}
