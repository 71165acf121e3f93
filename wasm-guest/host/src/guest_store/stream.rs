//! The `StreamStore` calls on [`GuestStore`], one method per WIT call: the reads, removals
//! and syncs, the replica's writes (ttl appends, appends at a given sequence and time, skips)
//! and the other NATS reads. Each is one call into the guest; the writes go through [`GuestStore::call`]
//! (the queued appends are sent first and the host forgets what it predicted: the store's last
//! sequence and timestamp changed), the reads through [`GuestStore::call_read`].

use std::collections::BTreeMap;
use std::time::Duration;

use seqstore_core::{FilteredState, StoredMsg};

use super::*;
use crate::convert::{from_wit_filtered, from_wit_msg};
use crate::error::Result;

fn owned(filters: &[&str]) -> Vec<String> {
    filters.iter().map(|f| f.to_string()).collect()
}

impl GuestStore {
    /// `Store::append_with_ttl`: a message that expires `ttl` after its timestamp (by the
    /// clock the store was opened with). A ttl past `u64::MAX` nanoseconds saturates, as
    /// store-core's own does.
    pub fn append_with_ttl(
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
    pub fn append_raw(
        &mut self,
        seq: u64,
        ts: i64,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<u64> {
        self.call(|g, s, h| g.call_append_raw(s, h, seq, ts, subject, headers, payload))
    }

    /// `Store::skip_msg`: `seq` (which must be `last_seq + 1`) used without a message,
    /// durable when this returns.
    pub fn skip_msg(&mut self, seq: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_skip_msg(s, h, seq))
    }

    /// `Store::skip_many`: `count` sequences from `first` used, durable when this returns.
    pub fn skip_many(&mut self, first: u64, count: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_skip_many(s, h, first, count))
    }

    /// `Store::next_matching_multi`.
    pub fn next_matching_multi(
        &mut self,
        filters: &[&str],
        from_seq: u64,
    ) -> Result<Option<StoredMsg>> {
        let filters = owned(filters);
        self.call_read(|g, s, h| g.call_next_matching_multi(s, h, &filters, from_seq))
            .map(|m| m.map(from_wit_msg))
    }

    /// `Store::filtered_state`.
    pub fn filtered_state(&mut self, filter: &str, from_seq: u64) -> Result<FilteredState> {
        self.filtered_state_multi(&[filter], from_seq)
    }

    /// `Store::filtered_state_multi`.
    pub fn filtered_state_multi(
        &mut self,
        filters: &[&str],
        from_seq: u64,
    ) -> Result<FilteredState> {
        let filters = owned(filters);
        self.call_read(|g, s, h| g.call_filtered_state(s, h, &filters, from_seq))
            .map(from_wit_filtered)
    }

    /// `Store::subjects_state_detail`.
    pub fn subjects_state_detail(
        &mut self,
        filter: &str,
    ) -> Result<BTreeMap<String, FilteredState>> {
        self.call_read(|g, s, h| g.call_subjects_state_detail(s, h, filter))
            .map(|v| {
                v.into_iter()
                    .map(|(k, f)| (k, from_wit_filtered(f)))
                    .collect()
            })
    }

    /// `Store::multi_last_seqs`.
    pub fn multi_last_seqs(
        &mut self,
        filters: &[&str],
        max_seq: u64,
        max_count: usize,
    ) -> Result<Vec<u64>> {
        let filters = owned(filters);
        let max_count = max_count as u64;
        self.call_read(|g, s, h| g.call_multi_last_seqs(s, h, &filters, max_seq, max_count))
    }

    /// `Store::subject_for_seq`.
    pub fn subject_for_seq(&mut self, seq: u64) -> Result<String> {
        self.call_read(|g, s, h| g.call_subject_for_seq(s, h, seq))
    }
}

impl GuestStore {
    /// The message with sequence `seq`.
    pub fn get(&mut self, seq: u64) -> Result<StoredMsg> {
        self.call_read(|g, s, h| g.call_get(s, h, seq))
            .map(from_wit_msg)
    }

    /// The newest message stored under `subject` (a literal subject).
    pub fn last_for_subject(&mut self, subject: &str) -> Result<Option<StoredMsg>> {
        self.call_read(|g, s, h| g.call_last_for_subject(s, h, subject))
            .map(|m| m.map(from_wit_msg))
    }

    /// The first message at or after `from_seq` whose subject matches `filter`.
    pub fn next_matching(&mut self, filter: &str, from_seq: u64) -> Result<Option<StoredMsg>> {
        self.call_read(|g, s, h| g.call_next_matching(s, h, filter, from_seq))
            .map(|m| m.map(from_wit_msg))
    }

    /// The last message at or before `from_seq` whose subject matches `filter`
    /// (`Store::prev_matching`).
    pub fn prev_matching(&mut self, filter: &str, from_seq: u64) -> Result<Option<StoredMsg>> {
        self.prev_matching_multi(&[filter], from_seq)
    }

    /// The last message at or before `from_seq` whose subject matches any of `filters`
    /// (`Store::prev_matching_multi`; an empty list: any subject).
    pub fn prev_matching_multi(
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
    pub fn get_batch(
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
    pub fn seq_from_time(&mut self, ts: i64) -> Result<u64> {
        self.call_read(|g, s, h| g.call_seq_from_time(s, h, ts))
    }

    /// How many messages at or after `from_seq` match `filter`, and the last sequence
    /// (`Store::num_pending`).
    pub fn num_pending(
        &mut self,
        from_seq: u64,
        filter: &str,
        last_per_subject: bool,
    ) -> Result<(u64, u64)> {
        self.num_pending_multi(from_seq, &[filter], last_per_subject)
    }

    /// `num_pending` for any of `filters` (`Store::num_pending_multi`).
    pub fn num_pending_multi(
        &mut self,
        from_seq: u64,
        filters: &[&str],
        last_per_subject: bool,
    ) -> Result<(u64, u64)> {
        let filters: Vec<String> = filters.iter().map(|f| f.to_string()).collect();
        self.call_read(|g, s, h| g.call_num_pending(s, h, from_seq, &filters, last_per_subject))
    }

    /// Message counts per subject for the subjects matching `filter`.
    pub fn subjects_state(&mut self, filter: &str) -> Result<BTreeMap<String, u64>> {
        self.call_read(|g, s, h| g.call_subjects_state(s, h, filter))
            .map(from_wit_subjects)
    }

    /// The stream's counters.
    pub fn state(&mut self) -> Result<StreamState> {
        self.raw_read(|g, s, h| g.call_state(s, h))
            .map(from_wit_state)
    }

    /// Deletes message `seq` (a tombstone, durable per the sync policy).
    pub fn delete(&mut self, seq: u64) -> Result<()> {
        self.call(|g, s, h| g.call_delete(s, h, seq))
    }

    /// Deletes message `seq` and overwrites its bytes on disk with zeros.
    pub fn erase(&mut self, seq: u64) -> Result<()> {
        self.call(|g, s, h| g.call_erase(s, h, seq))
    }

    /// Removes every message, keeping the sequence; crash-atomic. Returns how many.
    pub fn purge(&mut self) -> Result<u64> {
        self.call(|g, s, h| g.call_purge(s, h))
    }

    /// Removes the messages matching `filter` below `up_to_seq` (0: no bound), keeping the
    /// newest `keep` of each subject. Returns how many.
    pub fn purge_ex(&mut self, filter: &str, up_to_seq: u64, keep: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_purge_ex(s, h, filter, up_to_seq, keep))
    }

    /// Removes every message below `seq`. Returns how many.
    pub fn compact(&mut self, seq: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_compact(s, h, seq))
    }

    /// Removes every message above `seq` (`last_seq` becomes `seq`). Returns how many.
    pub fn truncate(&mut self, seq: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_truncate(s, h, seq))
    }

    /// Makes everything written so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.call(|g, s, h| g.call_sync(s, h))
    }

    /// Runs time-driven work (`max_age`, the `Interval` sync); call it from a timer.
    pub fn tick(&mut self) -> Result<()> {
        self.call(|g, s, h| g.call_tick(s, h))
    }

    /// Writes `index.db` so the next open need not read the blocks.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.call(|g, s, h| g.call_checkpoint(s, h))
    }

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

/// The stream's operations on the guest, for code written against the trait (the CLI's
/// commands, the crash matrix): each is the method of the same name above, one call into the
/// guest.
impl seqstore_core::surface::StreamStore for GuestStore {
    type Error = Error;

    seqstore_core::forward_stream_ops!(
        [acked sync_purge changes reads] GuestStore, this => this, std::convert::identity
    );

    fn state(&mut self) -> Result<StreamState> {
        GuestStore::state(self)
    }
    fn consumer_names(&mut self) -> Result<Vec<String>> {
        GuestStore::consumer_names(self)
    }
    fn recovery_report(&self) -> seqstore_core::RecoveryReport {
        GuestStore::recovery_report(self).clone()
    }
    fn close(self) -> Result<()> {
        GuestStore::close(self)
    }
}
