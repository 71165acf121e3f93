//! The `StreamStore` calls on [`GuestStore`], one method per WIT call: the reads, removals
//! and syncs, the replica's writes (ttl appends, appends at a given sequence and time, skips)
//! and the other NATS reads. Each is one call into the guest; the writes go through [`GuestStore::call`]
//! (the queued appends are sent first and the host forgets what it predicted: the store's last
//! sequence and timestamp changed), the reads through [`GuestStore::call_read`].

use std::collections::BTreeMap;
use std::time::Duration;

use seqstore_core::{FilteredState, StoredMsg};

use super::*;
use crate::consumers::{
    from_consumer_error, from_wit_config, from_wit_consumer_state, to_wit_config,
};
use crate::convert::{from_wit_filtered, from_wit_msg};
use crate::error::Result;
use seqstore_core::surface::StreamStore;
use seqstore_core::{ConsumerConfig, ConsumerState, RecoveryReport};

fn owned(filters: &[&str]) -> Vec<String> {
    filters.iter().map(|f| f.to_string()).collect()
}

/// The stream's operations, each one call into the guest (the writes after the queued
/// appends).
impl StreamStore for GuestStore {
    type Error = Error;

    /// Appends a message; returns its sequence. Under `SyncPolicy::Always` it is durable when
    /// this returns. Under `Never` without limits the host batches appends, and an I/O error
    /// is then returned by the call that sent the queue (see `queue.rs`).
    fn append(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> Result<u64> {
        self.append_queued(subject, headers, payload)
    }

    /// `Store::append_with_ttl`: a message that expires `ttl` after its timestamp (by the
    /// clock the store was opened with). A ttl past `u64::MAX` nanoseconds saturates, as
    /// store-core's own does.
    fn append_with_ttl(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        ttl: Duration,
    ) -> Result<u64> {
        let ns = u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX);
        self.call(|g, s, h| g.call_append_with_ttl(s, h, subject, headers, payload, ns))
    }

    /// `Store::append_raw`: a replica's message at the sequence and timestamp its leader gave
    /// it; a sequence other than `last_seq + 1` is `seqstore_core::Error::SequenceMismatch`.
    fn append_raw(
        &mut self,
        seq: u64,
        ts: i64,
        subj: &str,
        hdr: &[u8],
        data: &[u8],
    ) -> Result<u64> {
        self.call(|g, s, h| g.call_append_raw(s, h, seq, ts, subj, hdr, data))
    }

    /// `Store::skip_msg`: `seq` (which must be `last_seq + 1`) used without a message,
    /// durable when this returns.
    fn skip_msg(&mut self, seq: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_skip_msg(s, h, seq))
    }

    /// `Store::skip_many`: `count` sequences from `first` used, durable when this returns.
    fn skip_many(&mut self, first: u64, count: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_skip_many(s, h, first, count))
    }

    fn next_matching_multi(
        &mut self,
        filters: &[&str],
        from_seq: u64,
    ) -> Result<Option<StoredMsg>> {
        let filters = owned(filters);
        self.call_read(|g, s, h| g.call_next_matching_multi(s, h, &filters, from_seq))
            .map(|m| m.map(from_wit_msg))
    }

    fn filtered_state(&mut self, filter: &str, from_seq: u64) -> Result<FilteredState> {
        self.filtered_state_multi(&[filter], from_seq)
    }

    fn filtered_state_multi(&mut self, filters: &[&str], from_seq: u64) -> Result<FilteredState> {
        let filters = owned(filters);
        self.call_read(|g, s, h| g.call_filtered_state(s, h, &filters, from_seq))
            .map(from_wit_filtered)
    }

    fn subjects_state_detail(&mut self, filter: &str) -> Result<BTreeMap<String, FilteredState>> {
        self.call_read(|g, s, h| g.call_subjects_state_detail(s, h, filter))
            .map(|v| {
                v.into_iter()
                    .map(|(k, f)| (k, from_wit_filtered(f)))
                    .collect()
            })
    }

    fn multi_last_seqs(
        &mut self,
        filters: &[&str],
        max_seq: u64,
        max_count: usize,
    ) -> Result<Vec<u64>> {
        let filters = owned(filters);
        let max_count = max_count as u64;
        self.call_read(|g, s, h| g.call_multi_last_seqs(s, h, &filters, max_seq, max_count))
    }

    fn all_last_seqs(&mut self) -> Result<Vec<u64>> {
        self.call_read(|g, s, h| g.call_all_last_seqs(s, h))
    }

    fn subject_for_seq(&mut self, seq: u64) -> Result<String> {
        self.call_read(|g, s, h| g.call_subject_for_seq(s, h, seq))
    }

    /// The message with sequence `seq`.
    fn get(&mut self, seq: u64) -> Result<StoredMsg> {
        self.call_read(|g, s, h| g.call_get(s, h, seq))
            .map(from_wit_msg)
    }

    /// The newest message stored under `subject` (a literal subject).
    fn last_for_subject(&mut self, subject: &str) -> Result<Option<StoredMsg>> {
        self.call_read(|g, s, h| g.call_last_for_subject(s, h, subject))
            .map(|m| m.map(from_wit_msg))
    }

    /// The first message at or after `from_seq` whose subject matches `filter`.
    fn next_matching(&mut self, filter: &str, from_seq: u64) -> Result<Option<StoredMsg>> {
        self.call_read(|g, s, h| g.call_next_matching(s, h, filter, from_seq))
            .map(|m| m.map(from_wit_msg))
    }

    /// The last message at or before `from_seq` whose subject matches `filter`
    /// (`Store::prev_matching`).
    fn prev_matching(&mut self, filter: &str, from_seq: u64) -> Result<Option<StoredMsg>> {
        self.prev_matching_multi(&[filter], from_seq)
    }

    /// The last message at or before `from_seq` whose subject matches any of `filters`
    /// (`Store::prev_matching_multi`; an empty list: any subject).
    fn prev_matching_multi(
        &mut self,
        filters: &[&str],
        from_seq: u64,
    ) -> Result<Option<StoredMsg>> {
        let filters: Vec<String> = filters.iter().map(|f| f.to_string()).collect();
        self.call_read(|g, s, h| g.call_prev_matching(s, h, &filters, from_seq))
            .map(|m| m.map(from_wit_msg))
    }

    /// Up to `max_msgs` messages at or after `from_seq` matching `filter`, within `max_bytes`
    /// (`Store::get_batch`), in one call into the guest: the guest returns their records
    /// (`get-batch-records`, one list of bytes, checked there) and they are decoded here,
    /// natively. `max_msgs` above `u32::MAX` asks for `u32::MAX`.
    fn get_batch(
        &mut self,
        from_seq: u64,
        filter: &str,
        max_msgs: usize,
        max_bytes: u64,
    ) -> Result<Vec<StoredMsg>> {
        let n = u32::try_from(max_msgs).unwrap_or(u32::MAX);
        let recs = self
            .call_read(|g, s, h| g.call_get_batch_records(s, h, from_seq, filter, n, max_bytes))?;
        crate::convert::decode_records(&recs).map_err(Error::Store)
    }

    /// The first sequence with a timestamp at or after `ts` (`Store::seq_from_time`).
    fn seq_from_time(&mut self, ts: i64) -> Result<u64> {
        self.call_read(|g, s, h| g.call_seq_from_time(s, h, ts))
    }

    /// How many messages at or after `from_seq` match `filter`, and the last sequence
    /// (`Store::num_pending`).
    fn num_pending(
        &mut self,
        from_seq: u64,
        filter: &str,
        last_per_subject: bool,
    ) -> Result<(u64, u64)> {
        self.num_pending_multi(from_seq, &[filter], last_per_subject)
    }

    /// `num_pending` for any of `filters` (`Store::num_pending_multi`).
    fn num_pending_multi(
        &mut self,
        from_seq: u64,
        filters: &[&str],
        last_per_subject: bool,
    ) -> Result<(u64, u64)> {
        let filters: Vec<String> = filters.iter().map(|f| f.to_string()).collect();
        self.call_read(|g, s, h| g.call_num_pending(s, h, from_seq, &filters, last_per_subject))
    }

    /// Message counts per subject for the subjects matching `filter`.
    fn subjects_state(&mut self, filter: &str) -> Result<BTreeMap<String, u64>> {
        self.call_read(|g, s, h| g.call_subjects_state(s, h, filter))
            .map(from_wit_subjects)
    }

    /// The stream's counters.
    fn state(&mut self) -> Result<StreamState> {
        self.raw_read(|g, s, h| g.call_state(s, h))
            .map(from_wit_state)
    }

    /// Deletes message `seq` (a tombstone, durable per the sync policy).
    fn delete(&mut self, seq: u64) -> Result<()> {
        self.call(|g, s, h| g.call_delete(s, h, seq))
    }

    /// Deletes message `seq` and overwrites its bytes on disk with zeros.
    fn erase(&mut self, seq: u64) -> Result<()> {
        self.call(|g, s, h| g.call_erase(s, h, seq))
    }

    /// Removes every message, keeping the sequence; crash-atomic. Returns how many.
    fn purge(&mut self) -> Result<u64> {
        self.call(|g, s, h| g.call_purge(s, h))
    }

    /// Removes the messages matching `filter` below `up_to_seq` (0: no bound), keeping the
    /// newest `keep` of each subject. Returns how many.
    fn purge_ex(&mut self, filter: &str, up_to_seq: u64, keep: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_purge_ex(s, h, filter, up_to_seq, keep))
    }

    /// Removes every message below `seq`. Returns how many.
    fn compact(&mut self, seq: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_compact(s, h, seq))
    }

    /// Removes every message above `seq` (`last_seq` becomes `seq`). Returns how many.
    fn truncate(&mut self, seq: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_truncate(s, h, seq))
    }

    /// Makes everything written so far durable.
    fn sync(&mut self) -> Result<()> {
        self.call(|g, s, h| g.call_sync(s, h))
    }

    /// Runs time-driven work (`max_age`, the `Interval` sync); call it from a timer.
    fn tick(&mut self) -> Result<()> {
        self.call(|g, s, h| g.call_tick(s, h))
    }

    /// Writes `index.db` so the next open need not read the blocks.
    fn checkpoint(&mut self) -> Result<()> {
        self.call(|g, s, h| g.call_checkpoint(s, h))
    }

    fn consumer_add(&mut self, cfg: &ConsumerConfig) -> Result<()> {
        let c = to_wit_config(cfg);
        self.raw(|g, s, h| g.call_consumer_add(s, h, &c))?
            .map_err(from_consumer_error)
    }

    fn consumer_update(&mut self, cfg: &ConsumerConfig) -> Result<()> {
        let c = to_wit_config(cfg);
        self.raw(|g, s, h| g.call_consumer_update(s, h, &c))?
            .map_err(from_consumer_error)
    }

    fn update_delivered(&mut self, n: &str, dseq: u64, sseq: u64, dc: u64, ts: i64) -> Result<()> {
        self.raw(|g, s, h| g.call_update_delivered(s, h, n, dseq, sseq, dc, ts))?
            .map_err(from_consumer_error)
    }

    fn update_acks(&mut self, name: &str, dseq: u64, sseq: u64) -> Result<()> {
        self.raw(|g, s, h| g.call_update_acks(s, h, name, dseq, sseq))?
            .map_err(from_consumer_error)
    }

    fn consumer_state(&mut self, name: &str) -> Result<ConsumerState> {
        self.raw_read(|g, s, h| g.call_consumer_state(s, h, name))?
            .map(from_wit_consumer_state)
            .map_err(from_consumer_error)
    }

    fn consumer_config(&mut self, name: &str) -> Result<ConsumerConfig> {
        self.raw_read(|g, s, h| g.call_consumer_config(s, h, name))?
            .map(from_wit_config)
            .map_err(from_consumer_error)
    }

    fn consumer_reset(&mut self, name: &str, start: u64) -> Result<()> {
        self.raw(|g, s, h| g.call_consumer_reset(s, h, name, start))?
            .map_err(from_consumer_error)
    }

    fn consumer_delete(&mut self, name: &str) -> Result<()> {
        self.raw(|g, s, h| g.call_consumer_delete(s, h, name))?
            .map_err(from_consumer_error)
    }

    fn consumer_names(&mut self) -> Result<Vec<String>> {
        self.raw_read(|g, s, h| g.call_consumer_names(s, h))
    }

    fn recovery_report(&self) -> RecoveryReport {
        GuestStore::recovery_report(self).clone()
    }
    fn close(self) -> Result<()> {
        GuestStore::close(self)
    }
}

impl GuestStore {
    /// `write-at-sync-data` calls the host served to this instance (for the tests).
    #[cfg(test)]
    pub(crate) fn write_syncs(&self) -> u64 {
        self.store.data().write_syncs.get()
    }

    /// Whether an earlier I/O failure poisoned the store.
    pub fn is_poisoned(&mut self) -> Result<bool> {
        self.raw_read(|g, s, h| g.call_is_poisoned(s, h))
    }
}
