//! The NATS `StreamStore` reads beyond `get`/`next_matching`: the previous match,
//! matches of several filters, sequence by time, filtered and per-subject state, the last
//! sequences of many subjects, pending counts and batches.
//!
//! Every read here goes through `visit_live`, which loads a block with `ensure_loaded` and
//! uses its entries only until it moves on to the next block, and returns sequences, never
//! positions: messages are then read with `get`, which finds them again. Nothing here holds a
//! reference or an index into a block's entries across a call, so a block's entries may be
//! dropped between calls (an evictable entry cache) and re-read on demand.

use super::entries::{Entry, EMPTY};
use super::layout::MSGS_DIR;
use super::subjects::SubjectInfo;
use super::types::{FilteredState, StoredMsg};
use super::Store;
use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::subject;
use std::collections::BTreeMap;

/// What a list of filters selects, decided once per subject id and remembered: matching a
/// filter token by token costs far more than one look-up, and a scan meets the same few
/// subjects over and over.
pub(super) struct Matcher<'a> {
    filters: Vec<&'a str>,
    /// An empty list or a `>`: every subject matches, nothing to decide.
    all: bool,
    /// Per subject id: 0 not decided yet, 1 matches, 2 does not.
    memo: Vec<u8>,
}

impl<'a> Matcher<'a> {
    /// Validates every filter (`Error::InvalidSubject` for the first bad one). An empty list
    /// selects every subject, as NATS's `MultiLastSeqs` does with no filters.
    pub(super) fn new(filters: &[&'a str]) -> Result<Self> {
        for f in filters {
            subject::validate_filter(f)?;
        }
        Ok(Matcher {
            all: filters.is_empty() || filters.contains(&">"),
            filters: filters.to_vec(),
            memo: Vec::new(),
        })
    }

    /// Whether the subject with id `sid` (named `names[sid]`) matches any of the filters.
    pub(super) fn hit(&mut self, names: &[String], sid: u32) -> bool {
        if self.all {
            return true;
        }
        let k = sid as usize;
        let Some(name) = names.get(k) else {
            return false;
        };
        if self.memo.len() <= k {
            self.memo.resize(names.len().max(k + 1), 0);
        }
        if self.memo[k] == 0 {
            let yes = self.filters.iter().any(|f| subject::matches(f, name));
            self.memo[k] = if yes { 1 } else { 2 };
        }
        self.memo[k] == 1
    }
}

impl<F: Fs> Store<F> {
    /// Calls `visit` on every live message entry with a sequence in `from..=to`, in ascending
    /// order (descending when `rev`), until it returns `false`. Skips blocks without live
    /// messages and everything below the first sequence (the floor). A block's entries are
    /// used only between its `ensure_loaded` and the move to the next block.
    pub(super) fn visit_live(
        &mut self,
        from: u64,
        to: u64,
        rev: bool,
        mut visit: impl FnMut(&Entry, &[String]) -> bool,
    ) -> Result<()> {
        let (from, to) = (from.max(self.seq.first()).max(1), to.min(self.seq.last()));
        if from > to || self.seq.msgs() == 0 || self.blocks.is_empty() {
            return Ok(());
        }
        // message sequences rise from block to block, so the blocks that can hold `from..=to`
        // are those from the first whose `seq_ceiling` reaches `from` to the first whose `seq_ceiling` reaches `to`
        let lo = self.blocks.partition_point(|b| b.span.seq_ceiling < from);
        let hi = self
            .blocks
            .partition_point(|b| b.span.seq_ceiling < to)
            .min(self.blocks.len() - 1);
        if lo > hi {
            return Ok(());
        }
        let first = self.seq.first();
        for k in 0..=hi - lo {
            let pos = if rev { hi - k } else { lo + k };
            if self.blocks[pos].span.live == 0 {
                continue;
            }
            // a walk may pass every block: keep the entry cache bounded (nothing here holds a
            // position into entries between blocks)
            self.trim_entries();
            self.ensure_loaded(pos)?;
            let Some(entries) = self.blocks[pos].index.entries.as_ref() else {
                return Err(Error::corrupt(MSGS_DIR, 0, "block entries not loaded"));
            };
            let start = entries.seq_point(from);
            let end = entries.seq_point(to.saturating_add(1)).max(start);
            // a message whose ttl ran out is gone to every read, before `tick` removes it
            let ttl_now = (!self.ttl.is_empty()).then(|| self.now());
            let ttl = &self.ttl;
            let expired =
                |seq| ttl_now.is_some_and(|now| ttl.deadline(seq).is_some_and(|d| d <= now));
            let live = |e: &Entry| !e.deleted && e.seq >= first && !expired(e.seq);
            let names = self.subjects.names();
            let run = entries.range(start, end);
            let more = if rev {
                run.rev().filter(live).all(|e| visit(&e, names))
            } else {
                run.filter(live).all(|e| visit(&e, names))
            };
            if !more {
                break;
            }
        }
        Ok(())
    }
}

impl<F: Fs> Store<F> {
    /// What every read here does first: refuse a closed store, and trim the entry cache
    /// (a public call holds no position into entries yet).
    fn begin_read(&mut self) -> Result<()> {
        self.check_open()?;
        self.trim_entries();
        Ok(())
    }

    /// The first (or, `rev`, the last) live sequence in `from..=to` whose subject `m` selects.
    fn first_hit(&mut self, m: &mut Matcher, from: u64, to: u64, rev: bool) -> Result<Option<u64>> {
        let mut found = None;
        self.visit_live(from, to, rev, |e, names| {
            if m.hit(names, e.subj) {
                found = Some(e.seq);
            }
            found.is_none()
        })?;
        Ok(found)
    }

    /// The ids of the subjects with live messages that `m` selects, ascending.
    fn matching_sids(&self, m: &mut Matcher) -> Vec<u32> {
        (0..self.subjects.len() as u32)
            .filter(|&i| self.subjects.info(i).msgs > 0 && m.hit(self.subjects.names(), i))
            .collect()
    }

    /// The highest stored message with sequence ≤ `from_seq` whose subject matches `filter`
    /// (`*`, `>` wildcards), or `None`. NATS's `LoadPrevMsg` with a filter; `from_seq` above
    /// the last sequence starts from the last.
    pub fn prev_matching(&mut self, filter: &str, from_seq: u64) -> Result<Option<StoredMsg>> {
        self.prev_matching_multi(&[filter], from_seq)
    }

    /// The first stored message at or after `from_seq` whose subject matches any of
    /// `filters` (NATS's `LoadNextMsgMulti`). An empty list matches every subject; a bad
    /// filter is `Error::InvalidSubject`.
    pub fn next_matching_multi(
        &mut self,
        filters: &[&str],
        from_seq: u64,
    ) -> Result<Option<StoredMsg>> {
        self.first_message(filters, from_seq, u64::MAX, false)
    }

    /// The highest stored message with sequence ≤ `from_seq` whose subject matches any of
    /// `filters` (NATS's `LoadPrevMsgMulti`). An empty list matches every subject.
    pub fn prev_matching_multi(
        &mut self,
        filters: &[&str],
        from_seq: u64,
    ) -> Result<Option<StoredMsg>> {
        self.first_message(filters, 0, from_seq, true)
    }

    /// The first (`rev`: last) stored message in `from..=to` matching any of `filters`.
    fn first_message(
        &mut self,
        filters: &[&str],
        from: u64,
        to: u64,
        rev: bool,
    ) -> Result<Option<StoredMsg>> {
        self.begin_read()?;
        let mut m = Matcher::new(filters)?;
        match self.first_hit(&mut m, from, to, rev)? {
            Some(seq) => self.get(seq).map(Some),
            None => Ok(None),
        }
    }

    /// The first stored sequence whose timestamp is ≥ `ts` (ns since the epoch), or
    /// `last_seq + 1` when there is none (NATS's `GetSeqFromTime`).
    ///
    /// Appends stamp `max(clock, last timestamp)`, so timestamps do not decrease with the
    /// sequence and this is a binary search: over the blocks by their `ts_hi` (in memory: no
    /// block is read), then over the chosen block's entries, whose packed form keeps a time
    /// sample every `RUN` messages (the run's smallest timestamp), so that only one run's
    /// records are read. If stored timestamps do go backwards (a clock stepped back before a
    /// `truncate` to a deleted sequence stamps its marker, and so the next appends, with the
    /// clock's time; or files written by another program), the answer is still a stored
    /// sequence with a timestamp ≥ `ts` (or `last_seq + 1`), but not necessarily the first.
    pub fn seq_from_time(&mut self, ts: i64) -> Result<u64> {
        self.begin_read()?;
        let none = self.seq.last() + 1;
        if self.seq.msgs() == 0 {
            return Ok(none);
        }
        if ts <= self.seq.first_ts() {
            return self.unexpired_from(self.seq.first());
        }
        let (mut lo, mut hi) = (0, self.blocks.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.block_ts_hi(mid)? < ts {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // the first block may hold no live message at or after `ts` (deleted, or `ts_hi` is
        // a bound a truncate left high): the next live one's first live message then is it
        for pos in lo..self.blocks.len() {
            if self.blocks[pos].span.live == 0 {
                continue;
            }
            if let Some(seq) = self.first_in_block_from_time(pos, ts)? {
                return self.unexpired_from(seq);
            }
        }
        Ok(none)
    }

    /// Block `pos`'s `ts_hi`, found (and kept) if not known: the timestamp of its last message
    /// record, or of the blocks before it if it has none (loading them).
    fn block_ts_hi(&mut self, pos: usize) -> Result<i64> {
        if let Some(t) = self.blocks[pos].span.ts_hi {
            return Ok(t);
        }
        self.trim_entries();
        self.ensure_loaded(pos)?;
        let n = self.blocks[pos]
            .index
            .entries
            .as_ref()
            .map_or(0, |e| e.len());
        let t = match (n, pos) {
            (0, 0) => i64::MIN,
            (0, _) => self.block_ts_hi(pos - 1)?,
            _ => self.entry_ts(pos, n - 1)?,
        };
        self.blocks[pos].span.ts_hi = Some(t);
        Ok(t)
    }

    /// The first live sequence ≥ `first_seq` of block `pos` whose timestamp is ≥ `ts`.
    fn first_in_block_from_time(&mut self, pos: usize, ts: i64) -> Result<Option<u64>> {
        self.ensure_loaded(pos)?;
        let first = self.seq.first();
        let entries = self.blocks[pos].index.entries.as_ref().unwrap_or(&EMPTY);
        let start = entries.ts_point(ts);
        if entries.ts_exact() {
            return Ok(entries
                .range(start, entries.len())
                .find(|e| !e.deleted && e.seq >= first && e.ts >= ts)
                .map(|e| e.seq));
        }
        self.first_at_or_after(pos, start, first, ts)
    }

    /// In block `pos`, whose packed entries hold only their runs' smallest timestamps: the
    /// first live sequence ≥ `first` whose timestamp is ≥ `ts`, given that `start` is the
    /// first entry whose lower bound is ≥ `ts`. Only the run before `start` can hold an
    /// earlier one (a later run's smallest timestamp bounds every earlier one's): its
    /// records are read for their timestamps.
    fn first_at_or_after(
        &self,
        pos: usize,
        start: usize,
        first: u64,
        ts: i64,
    ) -> Result<Option<u64>> {
        let entries = self.blocks[pos].index.entries.as_ref().unwrap_or(&EMPTY);
        let from = start.saturating_sub(1) / super::entries::RUN * super::entries::RUN;
        for i in from..entries.len() {
            let e = entries.at(i);
            if e.deleted || e.seq < first {
                continue;
            }
            if (i >= start && e.ts >= ts) || self.entry_ts(pos, i)? >= ts {
                return Ok(Some(e.seq));
            }
        }
        Ok(None)
    }

    /// `seq` if it is not a message past its ttl's deadline, else the next stored message
    /// after it that is not (`last_seq + 1` if none): timestamps do not decrease with the
    /// sequence, so that one is the first at or after the time too.
    fn unexpired_from(&mut self, seq: u64) -> Result<u64> {
        if seq > self.seq.last() || !self.ttl_expired(seq) {
            return Ok(seq);
        }
        let mut all = Matcher::new(&[])?;
        Ok(self
            .first_hit(&mut all, seq + 1, u64::MAX, false)?
            .unwrap_or(self.seq.last() + 1))
    }

    /// How many stored messages at or after `from_seq` match `filter`, and the first and last
    /// of their sequences (NATS's `FilteredState`; all zero when none).
    pub fn filtered_state(&mut self, filter: &str, from_seq: u64) -> Result<FilteredState> {
        self.filtered_state_multi(&[filter], from_seq)
    }

    /// `filtered_state` for the messages matching any of `filters` (an empty list: all).
    pub fn filtered_state_multi(
        &mut self,
        filters: &[&str],
        from_seq: u64,
    ) -> Result<FilteredState> {
        self.begin_read()?;
        let mut m = Matcher::new(filters)?;
        self.filtered(&mut m, from_seq, true)
    }

    /// `edges`: the first and last are wanted too (not by `num_pending`).
    fn filtered(&mut self, m: &mut Matcher, from_seq: u64, edges: bool) -> Result<FilteredState> {
        let mut st = FilteredState::default();
        // (the counters still count a message past its deadline until `tick` removes it)
        let pending = self.expired_pending()?;
        if from_seq > self.seq.first() && !pending {
            // per-block subject counts: O(blocks × matching subjects), no walk
            let sids = self.matching_sids(m);
            let all = sids.len() as u64 == self.subjects.live();
            let t = self.tally(&sids, all, from_seq, edges)?;
            return Ok(FilteredState {
                msgs: t.msgs,
                first: t.first,
                last: t.last,
            });
        }
        if !pending {
            // the whole stream: the count from the subject counters, first and last from the
            // two ends (each scan stops at its first match), unless every matching subject
            // knows its own first (last) sequence already
            let sids = self.matching_sids(m);
            let info: Vec<SubjectInfo> = sids.iter().map(|&i| self.subjects.info(i)).collect();
            st.msgs = info.iter().map(|s| s.msgs).sum();
            if st.msgs == 0 || !edges {
                return Ok(st);
            }
            st.first = match info.iter().all(|s| s.first != 0) {
                true => info.iter().map(|s| s.first).min().unwrap_or(0),
                false => self.first_hit(m, 0, u64::MAX, false)?.unwrap_or(0),
            };
            st.last = match info.iter().all(|s| s.last != 0) {
                true => info.iter().map(|s| s.last).max().unwrap_or(0),
                false => self.first_hit(m, 0, u64::MAX, true)?.unwrap_or(0),
            };
            return Ok(st);
        }
        self.visit_live(from_seq, u64::MAX, false, |e, names| {
            if m.hit(names, e.subj) {
                st.count(e.seq);
            }
            true
        })?;
        Ok(st)
    }

    /// Per subject matching `filter`: its message count and first and last sequence (NATS's
    /// `SubjectsState`). Subjects without stored messages are not listed.
    pub fn subjects_state_detail(
        &mut self,
        filter: &str,
    ) -> Result<BTreeMap<String, FilteredState>> {
        self.begin_read()?;
        let mut m = Matcher::new(&[filter])?;
        if self.expired_pending()? {
            return self.detail_by_walk(&mut m);
        }
        let mut out = BTreeMap::new();
        for sid in self.matching_sids(&mut m) {
            let st = FilteredState {
                msgs: self.subjects.info(sid).msgs,
                first: self.subject_first(sid)?.unwrap_or(0),
                last: self.subject_last(sid)?.unwrap_or(0),
            };
            out.insert(self.subjects.name(sid).to_string(), st);
        }
        Ok(out)
    }

    /// The last sequence at or below `max_seq` (0: the last sequence) of every subject that
    /// matches any of `filters` (an empty list: all), ascending (NATS's `MultiLastSeqs`).
    /// `Error::TooManyResults` if there are more than `max_count` of them (0: no limit).
    pub fn multi_last_seqs(
        &mut self,
        filters: &[&str],
        max_seq: u64,
        max_count: usize,
    ) -> Result<Vec<u64>> {
        self.begin_read()?;
        let mut m = Matcher::new(filters)?;
        let too_many = |n: usize| max_count > 0 && n > max_count;
        let sids = self.matching_sids(&mut m);
        let mut out = Vec::new();
        let whole = max_seq == 0 || max_seq >= self.seq.last();
        if whole && !self.expired_pending()? {
            if too_many(sids.len()) {
                return Err(Error::TooManyResults {
                    max: max_count as u64,
                });
            }
            for sid in sids {
                out.extend(self.subject_last(sid)?);
            }
        } else {
            let top = if max_seq == 0 { u64::MAX } else { max_seq };
            out = self.lasts_by_walk(&sids, top, too_many)?;
        }
        if too_many(out.len()) {
            return Err(Error::TooManyResults {
                max: max_count as u64,
            });
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The last sequence of every subject, ascending (NATS's `AllLastSeqs`): what
    /// `multi_last_seqs(&[">"], 0, 0)` answers, from the index when no ttl is due.
    pub fn all_last_seqs(&mut self) -> Result<Vec<u64>> {
        self.multi_last_seqs(&[">"], 0, 0)
    }

    /// The subject of the stored message `seq` (NATS's `SubjectForSeq`), from the index (no
    /// record read); `Error::NotFound` if it is not stored.
    pub fn subject_for_seq(&mut self, seq: u64) -> Result<String> {
        self.begin_read()?;
        if self.ttl_expired(seq) {
            return Err(Error::NotFound { seq });
        }
        let Some((pos, i)) = self.find(seq)? else {
            return Err(Error::NotFound { seq });
        };
        let sid = self.blocks[pos]
            .index
            .entries
            .as_ref()
            .and_then(|e| e.get(i))
            .map(|e| e.subj);
        match sid.and_then(|s| self.subjects.names().get(s as usize)) {
            Some(name) => Ok(name.clone()),
            None => Err(Error::NotFound { seq }),
        }
    }

    /// How many stored messages at or after `from_seq` match `filter` — with
    /// `last_per_subject`, how many matching subjects have their last message there — and the
    /// last sequence, through which the count is valid (NATS's `NumPending`).
    pub fn num_pending(
        &mut self,
        from_seq: u64,
        filter: &str,
        last_per_subject: bool,
    ) -> Result<(u64, u64)> {
        self.num_pending_multi(from_seq, &[filter], last_per_subject)
    }

    /// `num_pending` for the messages matching any of `filters` (NATS's `NumPendingMulti`;
    /// an empty list: all).
    pub fn num_pending_multi(
        &mut self,
        from_seq: u64,
        filters: &[&str],
        last_per_subject: bool,
    ) -> Result<(u64, u64)> {
        self.begin_read()?;
        let mut m = Matcher::new(filters)?;
        let n = if last_per_subject {
            let sids = self.matching_sids(&mut m);
            if self.expired_pending()? {
                let lasts = self.lasts_by_walk(&sids, u64::MAX, |_| false)?;
                lasts.iter().filter(|&&l| l >= from_seq).count() as u64
            } else {
                let mut n = 0;
                for sid in sids {
                    if self.subject_last(sid)?.is_some_and(|l| l >= from_seq) {
                        n += 1;
                    }
                }
                n
            }
        } else {
            self.filtered(&mut m, from_seq, false)?.msgs
        };
        Ok((n, self.seq.last()))
    }

    /// The last live sequence at or below `top` of each subject in `sids`, ascending, by a
    /// walk back from `top` (the first message met of a subject is its last), stopping once
    /// every subject is found or `stop(found so far)`. What the counter-based answers become
    /// while a message past its deadline is still stored, or below the last sequence.
    fn lasts_by_walk(
        &mut self,
        sids: &[u32],
        top: u64,
        stop: impl Fn(usize) -> bool,
    ) -> Result<Vec<u64>> {
        let mut want = vec![false; self.subjects.len()];
        for &sid in sids {
            want[sid as usize] = true;
        }
        let (mut left, mut out) = (sids.len(), Vec::new());
        if left > 0 {
            self.visit_live(0, top, true, |e, _| {
                if let Some(w) = want.get_mut(e.subj as usize).filter(|w| **w) {
                    *w = false;
                    left -= 1;
                    out.push(e.seq);
                }
                left > 0 && !stop(out.len())
            })?;
        }
        out.sort_unstable();
        Ok(out)
    }

    /// `subjects_state_detail` by a walk over every live message (hiding those past their
    /// deadline), for when the counters still count one.
    fn detail_by_walk(&mut self, m: &mut Matcher) -> Result<BTreeMap<String, FilteredState>> {
        let mut per: BTreeMap<u32, FilteredState> = BTreeMap::new();
        self.visit_live(0, u64::MAX, false, |e, names| {
            if m.hit(names, e.subj) {
                per.entry(e.subj).or_default().count(e.seq);
            }
            true
        })?;
        Ok(per
            .into_iter()
            .map(|(sid, st)| (self.subjects.name(sid).to_string(), st))
            .collect())
    }

    /// Up to `max_msgs` stored messages at or after `from_seq` matching `filter`, in order,
    /// stopping before the message that would take their total size past `max_bytes` (0: no
    /// byte limit; the first message is returned whatever its size, so a reader always moves
    /// on). Sizes are the encoded record sizes, as `StreamState::bytes` counts them. One call
    /// for what would be many `next_matching` calls (a wasm guest crosses its boundary once).
    pub fn get_batch(
        &mut self,
        from_seq: u64,
        filter: &str,
        max_msgs: usize,
        max_bytes: u64,
    ) -> Result<Vec<StoredMsg>> {
        let seqs = self.batch_seqs(from_seq, filter, max_msgs, max_bytes)?;
        let mut out = Vec::with_capacity(seqs.len());
        self.for_each_record(&seqs, |_, r| out.push(r.owned_msg()))?;
        Ok(out)
    }

    /// `get_batch`, the messages' records appended to `out` as stored (whole message records
    /// back to back, each checked: crc, kind, sequence; `record::decode` reads them). Returns
    /// how many. For a caller that moves them on as bytes: the wasm guest returns them to its
    /// host in one list, which decodes them natively (`seqstore_wasm::GuestStore::get_batch`).
    pub(crate) fn get_batch_records(
        &mut self,
        from_seq: u64,
        filter: &str,
        max_msgs: usize,
        max_bytes: u64,
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        let seqs = self.batch_seqs(from_seq, filter, max_msgs, max_bytes)?;
        self.for_each_record(&seqs, |rec, _| out.extend_from_slice(rec))?;
        Ok(seqs.len())
    }

    /// The sequences `get_batch` returns.
    fn batch_seqs(
        &mut self,
        from_seq: u64,
        filter: &str,
        max_msgs: usize,
        max_bytes: u64,
    ) -> Result<Vec<u64>> {
        self.begin_read()?;
        let mut m = Matcher::new(&[filter])?;
        let mut seqs = Vec::new();
        if max_msgs > 0 {
            let mut bytes = 0u64;
            self.visit_live(from_seq, u64::MAX, false, |e, names| {
                if !m.hit(names, e.subj) {
                    return true;
                }
                let len = u64::from(e.len);
                if max_bytes > 0 && !seqs.is_empty() && bytes.saturating_add(len) > max_bytes {
                    return false;
                }
                bytes = bytes.saturating_add(len);
                seqs.push(e.seq);
                seqs.len() < max_msgs
            })?;
        }
        Ok(seqs)
    }
}
