//! Per-message time to live (NATS `StoreMsg` with a ttl): the append, the in-memory index of
//! deadlines, the expiry (shared with `Limits::max_age` through `enforce_limits`) and the check
//! every read makes before it hands a message out.
//!
//! On disk a ttl is the record flag `FLAG_TTL` and 8 bytes before the crc (record.rs); the
//! deadline is the record's `ts + ttl`, by the store's `Clock`. The index is rebuilt by the
//! block scan at open, or read from `index.db` (its version-2 ttl section, snapshot.rs), and
//! open then expires what is due.

use super::{append, Store};
use crate::admit::Admission;
use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::record::{self, Kind, FLAG_ERASED};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The messages with a time to live: `seq -> deadline`, and `(deadline, seq)` in order. An
/// entry may outlive its message (deleted, purged): expiry and reads check the message is
/// still there; `truncate` forgets the entries above its cut (those sequences are reissued).
#[derive(Default)]
pub(super) struct TtlIndex {
    by_seq: BTreeMap<u64, i64>,
    by_deadline: BTreeSet<(i64, u64)>,
}

impl TtlIndex {
    pub(super) fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    pub(super) fn insert(&mut self, seq: u64, deadline: i64) {
        if let Some(old) = self.by_seq.insert(seq, deadline) {
            self.by_deadline.remove(&(old, seq));
        }
        self.by_deadline.insert((deadline, seq));
    }

    pub(super) fn clear(&mut self) {
        self.by_seq.clear();
        self.by_deadline.clear();
    }

    /// Forgets every entry above `seq` (a truncate reissues those sequences).
    pub(super) fn forget_above(&mut self, seq: u64) {
        let gone = self.by_seq.split_off(&seq.saturating_add(1));
        for (s, d) in gone {
            self.by_deadline.remove(&(d, s));
        }
    }

    /// The entries at or above `seq`, ascending by sequence (what `index.db` records).
    pub(super) fn at_or_above(&self, seq: u64) -> impl Iterator<Item = (u64, i64)> + '_ {
        self.by_seq.range(seq..).map(|(&s, &d)| (s, d))
    }

    /// The deadline of `seq`, if it has a ttl.
    pub(super) fn deadline(&self, seq: u64) -> Option<i64> {
        self.by_seq.get(&seq).copied()
    }

    /// The sequences whose deadline is at or before `now`, earliest deadline first (left in).
    fn due(&self, now: i64) -> impl Iterator<Item = u64> + '_ {
        self.by_deadline
            .iter()
            .take_while(move |&&(d, _)| d <= now)
            .map(|&(_, s)| s)
    }

    /// Takes the entries whose deadline is at or before `now`, earliest first.
    fn take_due(&mut self, now: i64) -> Vec<u64> {
        let mut due = Vec::new();
        while let Some(&(d, s)) = self.by_deadline.first() {
            if d > now {
                break;
            }
            self.by_deadline.pop_first();
            self.by_seq.remove(&s);
            due.push(s);
        }
        due
    }
}

/// A ttl as the record's u64 of nanoseconds (saturating; zero is refused by the caller).
pub(super) fn ttl_ns(ttl: Duration) -> u64 {
    ttl.as_nanos().min(u64::MAX as u128) as u64
}

impl<F: Fs> Store<F> {
    /// Appends a message that expires `ttl` after its timestamp (NATS `StoreMsg` with a ttl):
    /// from its deadline on, by the store's `Clock`, no read returns it, and `tick()` (or the
    /// next open) removes it with a tombstone, as a delete would, with a delete's durability.
    /// Otherwise exactly [`Store::append`] (checks, sequence, sync policy). A zero ttl is
    /// `InvalidArgument`. The ttl is on disk: it survives reopen.
    pub fn append_with_ttl(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        ttl: Duration,
    ) -> Result<u64> {
        self.append_with_ttl_inner(subject, headers, payload, ttl, true)
    }

    /// `append_with_ttl` without its `Always` fsync, for `SharedStore`'s group commit (as
    /// `append_buffered`): the sequence and the write number that must be durable before it
    /// is acknowledged.
    pub(crate) fn append_with_ttl_buffered(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        ttl: Duration,
    ) -> Result<(u64, u64)> {
        let seq = self.append_with_ttl_inner(subject, headers, payload, ttl, false)?;
        Ok((seq, self.dur.writes()))
    }

    fn append_with_ttl_inner(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        ttl: Duration,
        sync_always: bool,
    ) -> Result<u64> {
        if ttl.is_zero() {
            return Err(Error::InvalidArgument("append_with_ttl: a zero ttl".into()));
        }
        self.check_writable()?;
        self.check_message(subject, headers, payload)?;
        let seq = self.seq.last().saturating_add(1);
        let ts = self.now().max(self.seq.last_ts());
        let ttl = ttl_ns(ttl);
        let mut rec = Vec::new();
        let crc = record::encode_with_ttl(
            &mut rec,
            0,
            seq,
            ts,
            subject.as_bytes(),
            headers,
            payload,
            ttl,
        );
        let enc = append::Encoded {
            bytes: &rec,
            seq,
            ts,
            crc,
        };
        let got = self.append_inner(
            append::Subj::Name(subject),
            headers,
            payload,
            sync_always,
            Some(enc),
        )?;
        self.ttl.insert(got, record::deadline(ts, ttl));
        Ok(got)
    }

    /// The checks `append_inner` makes of a message, made before a caller encodes its record
    /// itself (the encoder asserts the bounds): subject, payload and header sizes.
    pub(super) fn check_message(
        &self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<()> {
        Admission::new(&self.cfg).message(subject, false, headers.len(), payload.len())
    }

    /// Whether message `seq` has a ttl that has run out by the clock now: reads treat it as
    /// gone before `tick` removes it. One map lookup when ttls exist, nothing otherwise.
    #[inline]
    pub(super) fn ttl_expired(&self, seq: u64) -> bool {
        !self.ttl.is_empty() && self.ttl.deadline(seq).is_some_and(|d| d <= self.now())
    }

    /// Whether a message past its deadline is still stored (`tick` has not removed it yet):
    /// the reads that answer from counters (subject counts, firsts and lasts) must then walk
    /// the messages instead, since the counters still include it. Nothing when no ttl is
    /// due; else a look-up per due entry (entries of messages removed otherwise included).
    pub(super) fn expired_pending(&mut self) -> Result<bool> {
        if self.ttl.is_empty() {
            return Ok(false);
        }
        let now = self.now();
        let due: Vec<u64> = self.ttl.due(now).collect();
        for seq in due {
            if self.find(seq)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Removes every message whose ttl ran out: a tombstone each (durable as a delete's, by
    /// the caller's sync). Returns how many it removed.
    pub(super) fn expire_ttls(&mut self) -> Result<u64> {
        let now = self.now();
        let due = self.ttl.take_due(now);
        let mut n = 0;
        for (k, &seq) in due.iter().enumerate() {
            let found = match self.find(seq) {
                Ok(f) => f,
                Err(e) => {
                    // not removed: keep the rest for the next tick
                    self.requeue(&due[k..]);
                    return Err(e);
                }
            };
            let Some((pos, i)) = found else { continue };
            let ts = self.marker_ts(seq, self.now());
            if let Err(e) = self.marker(Kind::Tombstone, seq, ts) {
                self.requeue(&due[k..]);
                return Err(e);
            }
            self.mark_deleted(pos, i);
            if seq == self.seq.first() {
                self.set_first_from(seq + 1)?;
            }
            n += 1;
        }
        Ok(n)
    }

    /// Puts taken entries back (an expiry that failed part way): already due, they go first.
    fn requeue(&mut self, seqs: &[u64]) {
        for &s in seqs {
            self.ttl.insert(s, i64::MIN);
        }
    }

    /// A message record read by the rebuild scan: remembers its deadline if it has a ttl.
    pub(super) fn note_ttl(&mut self, r: &record::RawRecord<'_>) {
        if r.flags & FLAG_ERASED == 0 {
            if let Some(d) = r.deadline() {
                self.ttl.insert(r.seq, d);
            }
        }
    }
}
