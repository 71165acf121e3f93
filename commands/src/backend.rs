//! What the commands need of a store: store-core's `Store<F>` for every `Fs`, and whatever
//! else a binary runs them on (the CLI's wasm guest, through wasm-host).

use seqstore_core::{
    ConsumerConfig, ConsumerState, Fs, RecoveryReport, Store, StoredMsg, StreamState,
};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::Result;

/// A store the commands run on. Each method is the store-core method of the same name.
pub trait Backend {
    /// `append`, or `append_with_ttl` when `ttl` is given.
    fn append(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        ttl: Option<Duration>,
    ) -> Result<u64>;
    fn skip_many(&mut self, first: u64, count: u64) -> Result<u64>;
    fn get(&mut self, seq: u64) -> Result<StoredMsg>;
    fn last_for_subject(&mut self, subject: &str) -> Result<Option<StoredMsg>>;
    fn next_matching_multi(&mut self, filters: &[&str], from: u64) -> Result<Option<StoredMsg>>;
    fn prev_matching_multi(&mut self, filters: &[&str], from: u64) -> Result<Option<StoredMsg>>;
    fn num_pending_multi(
        &mut self,
        from: u64,
        filters: &[&str],
        last_per_subject: bool,
    ) -> Result<(u64, u64)>;
    fn seq_from_time(&mut self, ts: i64) -> Result<u64>;
    fn subjects_state(&mut self, filter: &str) -> Result<BTreeMap<String, u64>>;
    fn state(&mut self) -> Result<StreamState>;
    fn delete(&mut self, seq: u64) -> Result<()>;
    fn erase(&mut self, seq: u64) -> Result<()>;
    fn purge(&mut self) -> Result<u64>;
    fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> Result<u64>;
    fn compact(&mut self, seq: u64) -> Result<u64>;
    fn truncate(&mut self, seq: u64) -> Result<u64>;
    fn sync(&mut self) -> Result<()>;
    fn checkpoint(&mut self) -> Result<()>;
    fn recovery_report(&self) -> RecoveryReport;
    fn consumer_add(&mut self, cfg: &ConsumerConfig) -> Result<()>;
    fn update_delivered(
        &mut self,
        name: &str,
        dseq: u64,
        sseq: u64,
        dc: u64,
        ts: i64,
    ) -> Result<()>;
    fn update_acks(&mut self, name: &str, dseq: u64, sseq: u64) -> Result<()>;
    fn consumer_state(&mut self, name: &str) -> Result<ConsumerState>;
    fn consumer_config(&mut self, name: &str) -> Result<ConsumerConfig>;
    fn consumer_delete(&mut self, name: &str) -> Result<()>;
    fn consumer_names(&mut self) -> Result<Vec<String>>;
    /// Syncs, writes `index.db` and closes.
    fn close(self) -> Result<()>;
}

/// Calls `$forward! { fn name(&mut self, args…) -> T; … }` with every [`Backend`] method that
/// store-core's `Store` and wasm-host's `GuestStore` both have as `fn(&mut self, …) ->
/// Result<T>`: one list for each implementation's forwarding macro.
#[macro_export]
macro_rules! for_each_forwarded {
    ($forward:ident) => {
        $forward! {
            fn skip_many(&mut self, first: u64, count: u64) -> u64;
            fn get(&mut self, seq: u64) -> StoredMsg;
            fn last_for_subject(&mut self, subject: &str) -> Option<StoredMsg>;
            fn next_matching_multi(&mut self, filters: &[&str], from: u64) -> Option<StoredMsg>;
            fn prev_matching_multi(&mut self, filters: &[&str], from: u64) -> Option<StoredMsg>;
            fn num_pending_multi(&mut self, from: u64, filters: &[&str], lps: bool) -> (u64, u64);
            fn seq_from_time(&mut self, ts: i64) -> u64;
            fn subjects_state(&mut self, filter: &str) -> BTreeMap<String, u64>;
            fn delete(&mut self, seq: u64) -> ();
            fn erase(&mut self, seq: u64) -> ();
            fn purge(&mut self) -> u64;
            fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> u64;
            fn compact(&mut self, seq: u64) -> u64;
            fn truncate(&mut self, seq: u64) -> u64;
            fn sync(&mut self) -> ();
            fn checkpoint(&mut self) -> ();
            fn consumer_add(&mut self, cfg: &ConsumerConfig) -> ();
            fn update_delivered(&mut self, name: &str, dseq: u64, sseq: u64, dc: u64, ts: i64) -> ();
            fn update_acks(&mut self, name: &str, dseq: u64, sseq: u64) -> ();
            fn consumer_state(&mut self, name: &str) -> ConsumerState;
            fn consumer_config(&mut self, name: &str) -> ConsumerConfig;
            fn consumer_delete(&mut self, name: &str) -> ();
        }
    };
}

/// Forwards to `Store`'s inherent method of the same name, errors as [`crate::Error::Store`].
macro_rules! forward {
    ($( fn $name:ident(&mut self $(, $a:ident: $t:ty)*) -> $r:ty; )*) => {
        $( fn $name(&mut self $(, $a: $t)*) -> Result<$r> {
            Ok(Store::$name(self $(, $a)*)?)
        } )*
    };
}

impl<F: Fs> Backend for Store<F> {
    fn append(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        ttl: Option<Duration>,
    ) -> Result<u64> {
        Ok(match ttl {
            None => Store::append(self, subject, headers, payload)?,
            Some(t) => self.append_with_ttl(subject, headers, payload, t)?,
        })
    }
    for_each_forwarded!(forward);
    fn state(&mut self) -> Result<StreamState> {
        Ok(Store::state(self))
    }
    fn recovery_report(&self) -> RecoveryReport {
        Store::recovery_report(self).clone()
    }
    fn consumer_names(&mut self) -> Result<Vec<String>> {
        Ok(Store::consumer_names(self))
    }
    fn close(self) -> Result<()> {
        Ok(Store::close(self)?)
    }
}
