//! The rest of issue #15's `StreamStore` calls on [`GuestStore`]: the replica's writes (ttl
//! appends, appends at a given sequence and time, skips) and the reads beyond those in
//! `guest_store.rs`. Each is one call into the guest; the writes go through [`GuestStore::call`]
//! (the queued appends are sent first and the host forgets what it predicted: the store's last
//! sequence and timestamp changed), the reads through [`GuestStore::call_read`].

use std::collections::BTreeMap;
use std::time::Duration;

use store_core::{FilteredState, StoredMsg};

use super::GuestStore;
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
    /// it; a sequence other than `last_seq + 1` is `store_core::Error::SequenceMismatch`.
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
