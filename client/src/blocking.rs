//! One stream of a cluster as a blocking [`StreamStore`]: the stream's operations with the
//! same signatures as on a [`seqstore_core::Store`], so that code written against the trait
//! (the CLI's commands, a test's workload) runs on a directory and on a cluster alike.
//!
//! Each operation is one request to the leader, run to completion on a runtime of the
//! adapter's own. Reads are the leader's (linearizable), and every acknowledged write is
//! committed on a majority's fsynced log, so [`StreamStore::sync`] has nothing left to do.
//! What the server does not serve is refused with [`Error::Unsupported`]: one directory's files
//! (`erase`, `seq_from_time`, `checkpoint`), a replica's own writes (`append_raw`), consumers'
//! low-level writes (`update_delivered`, `update_acks`, `consumer_reset`, `consumer_update`:
//! the cluster's consumers deliver and take acks through [`Client::consumer_next`] and
//! [`Client::consumer_ack`], decided on the log), and the reads the HTTP API has no request
//! for.

use crate::wire::{self, AppendRequest, PurgeRequest};
use crate::{Client, Error};
use seqstore_core::surface::StreamStore;
use seqstore_core::{
    ConsumerConfig, ConsumerState, FilteredState, RecoveryReport, StoredMsg, StreamState,
};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

/// A stream on a cluster, blocking. Not for use inside an async runtime: each call blocks
/// the thread on a runtime of its own (use [`Client`] there).
#[derive(Debug)]
pub struct BlockingStream {
    client: Client,
    stream: String,
    rt: tokio::runtime::Runtime,
}

/// Refused: an operation the server has no request for.
fn unsupported(what: &str) -> Error {
    Error::Unsupported(format!("{what} is not served by seqstore-server"))
}

/// Refused: an operation about one directory's files.
fn files_only(what: &str) -> Error {
    let m = format!("{what} is not served by seqstore-server (it is about a directory's files)");
    Error::Unsupported(m)
}

/// At most one filter: the server's reads take one.
fn one_filter(filters: &[&str]) -> Result<String, Error> {
    match filters {
        [] => Ok(">".into()),
        [f] => Ok(f.to_string()),
        _ => Err(unsupported("a read with more than one filter")),
    }
}

impl BlockingStream {
    /// Stream `stream` through `client` (the stream is not created: see
    /// [`Client::create_stream_if_absent`]). Fails only if the runtime cannot be built.
    pub fn new(client: Client, stream: &str) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let stream = stream.to_string();
        Ok(BlockingStream { client, stream, rt })
    }

    /// The client, for the calls the trait does not have (streams, consumers, membership).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The stream's name.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// Runs `f` (a call of [`BlockingStream::client`]) to completion on this adapter's runtime.
    pub fn block_on<T>(&self, f: impl Future<Output = T>) -> T {
        self.rt.block_on(f)
    }

    fn msg(
        &self,
        f: impl Future<Output = Result<Option<wire::Msg>, Error>>,
    ) -> Result<Option<StoredMsg>, Error> {
        self.block_on(f)?.map(wire::Msg::into_stored).transpose()
    }

    fn append_req(
        &mut self,
        s: &str,
        h: &[u8],
        p: &[u8],
        ttl: Option<Duration>,
    ) -> Result<u64, Error> {
        let mut req = AppendRequest::new(s, p).with_headers(h);
        // a TTL below the API's millisecond is the shortest it has, not none
        req.ttl_ms = ttl.map_or(0, |t| {
            u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)
        });
        self.block_on(self.client.append(&self.stream, &req))
    }
}

/// Each operation is one request to the cluster's leader (see the module doc for what is
/// refused).
impl StreamStore for BlockingStream {
    type Error = Error;

    fn append(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> Result<u64, Error> {
        self.append_req(subject, headers, payload, None)
    }
    fn append_with_ttl(
        &mut self,
        s: &str,
        h: &[u8],
        p: &[u8],
        ttl: Duration,
    ) -> Result<u64, Error> {
        self.append_req(s, h, p, Some(ttl))
    }
    fn append_raw(&mut self, _: u64, _: i64, _: &str, _: &[u8], _: &[u8]) -> Result<u64, Error> {
        Err(unsupported("an append at a given sequence (a replica's)"))
    }
    fn skip_msg(&mut self, seq: u64) -> Result<u64, Error> {
        self.skip_many(seq, 1)
    }
    fn skip_many(&mut self, first: u64, count: u64) -> Result<u64, Error> {
        // the server's skip takes no start: it is checked here, as the store checks it
        let next = self.state()?.last_seq + 1;
        if first != next {
            let m = format!("skip must start at the next sequence, {next}");
            return Err(Error::InvalidArgument(m));
        }
        self.block_on(self.client.skip(&self.stream, count))
    }
    fn next_matching(&mut self, filter: &str, from: u64) -> Result<Option<StoredMsg>, Error> {
        self.next_matching_multi(&[filter], from)
    }
    fn prev_matching(&mut self, filter: &str, from: u64) -> Result<Option<StoredMsg>, Error> {
        self.prev_matching_multi(&[filter], from)
    }
    fn next_matching_multi(
        &mut self,
        filters: &[&str],
        from: u64,
    ) -> Result<Option<StoredMsg>, Error> {
        let f = one_filter(filters)?;
        self.msg(self.client.next(&self.stream, from, &f))
    }
    fn prev_matching_multi(
        &mut self,
        filters: &[&str],
        from: u64,
    ) -> Result<Option<StoredMsg>, Error> {
        let f = one_filter(filters)?;
        self.msg(self.client.prev(&self.stream, from, &f))
    }
    fn num_pending(&mut self, from: u64, filter: &str, lps: bool) -> Result<(u64, u64), Error> {
        self.num_pending_multi(from, &[filter], lps)
    }
    fn num_pending_multi(
        &mut self,
        from: u64,
        filters: &[&str],
        lps: bool,
    ) -> Result<(u64, u64), Error> {
        let f = one_filter(filters)?;
        let r = self.block_on(self.client.pending(&self.stream, from, &f, lps))?;
        Ok((r.pending, r.valid_through))
    }
    fn get_batch(&mut self, _: u64, _: &str, _: usize, _: u64) -> Result<Vec<StoredMsg>, Error> {
        Err(unsupported("get-batch"))
    }
    fn filtered_state(&mut self, _: &str, _: u64) -> Result<FilteredState, Error> {
        Err(unsupported("filtered-state"))
    }
    fn filtered_state_multi(&mut self, _: &[&str], _: u64) -> Result<FilteredState, Error> {
        Err(unsupported("filtered-state"))
    }
    fn subjects_state_detail(&mut self, _: &str) -> Result<BTreeMap<String, FilteredState>, Error> {
        Err(unsupported("subjects-state-detail"))
    }
    fn multi_last_seqs(&mut self, _: &[&str], _: u64, _: usize) -> Result<Vec<u64>, Error> {
        Err(unsupported("multi-last-seqs"))
    }
    fn all_last_seqs(&mut self) -> Result<Vec<u64>, Error> {
        Err(unsupported("all-last-seqs"))
    }
    fn subject_for_seq(&mut self, seq: u64) -> Result<String, Error> {
        self.get(seq).map(|m| m.subject)
    }
    fn get(&mut self, seq: u64) -> Result<StoredMsg, Error> {
        let m = self.msg(self.client.get(&self.stream, seq))?;
        m.ok_or_else(|| Error::NoMessage(format!("at sequence {seq}")))
    }
    fn last_for_subject(&mut self, subject: &str) -> Result<Option<StoredMsg>, Error> {
        self.msg(self.client.last(&self.stream, subject))
    }
    fn seq_from_time(&mut self, _ts: i64) -> Result<u64, Error> {
        Err(files_only("time-seq"))
    }
    fn subjects_state(&mut self, filter: &str) -> Result<BTreeMap<String, u64>, Error> {
        Ok(self
            .block_on(self.client.subjects(&self.stream, filter))?
            .subjects)
    }
    fn state(&mut self) -> Result<StreamState, Error> {
        Ok(self.block_on(self.client.stream_info(&self.stream))?.state)
    }
    fn tick(&mut self) -> Result<(), Error> {
        // the cluster's nodes run their own timers
        Ok(())
    }
    fn delete(&mut self, seq: u64) -> Result<(), Error> {
        self.block_on(self.client.delete(&self.stream, seq))
            .map(drop)
    }
    fn erase(&mut self, _seq: u64) -> Result<(), Error> {
        Err(files_only("erase"))
    }
    fn purge(&mut self) -> Result<u64, Error> {
        self.block_on(self.client.purge(&self.stream, &PurgeRequest::default()))
    }
    fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> Result<u64, Error> {
        let req = PurgeRequest {
            filter: Some(filter.to_string()),
            up_to_seq: Some(up_to),
            keep: Some(keep),
        };
        self.block_on(self.client.purge(&self.stream, &req))
    }
    fn compact(&mut self, seq: u64) -> Result<u64, Error> {
        self.block_on(self.client.compact(&self.stream, seq))
    }
    fn truncate(&mut self, seq: u64) -> Result<u64, Error> {
        self.block_on(self.client.truncate(&self.stream, seq))
    }
    fn sync(&mut self) -> Result<(), Error> {
        // every acknowledged write is already on a majority's fsynced log: only the stream
        // has to exist, as a directory has to hold a store
        self.state().map(drop)
    }
    fn checkpoint(&mut self) -> Result<(), Error> {
        Err(files_only("checkpoint"))
    }
    fn recovery_report(&self) -> RecoveryReport {
        RecoveryReport::default()
    }
    fn consumer_add(&mut self, cfg: &ConsumerConfig) -> Result<(), Error> {
        let settings = cfg.settings();
        let added = (self.client).consumer_add(&self.stream, &cfg.name, &settings);
        self.block_on(added)
    }
    fn consumer_config(&mut self, name: &str) -> Result<ConsumerConfig, Error> {
        let info = self.block_on(self.client.consumer_info(&self.stream, name))?;
        Ok(info.store_config())
    }
    fn consumer_state(&mut self, name: &str) -> Result<ConsumerState, Error> {
        let info = self.block_on(self.client.consumer_info(&self.stream, name))?;
        Ok(info.store_state())
    }
    fn consumer_delete(&mut self, name: &str) -> Result<(), Error> {
        self.block_on(self.client.consumer_delete(&self.stream, name))
    }
    fn consumer_update(&mut self, _: &ConsumerConfig) -> Result<(), Error> {
        Err(unsupported("a consumer's low-level state"))
    }
    fn consumer_reset(&mut self, _: &str, _: u64) -> Result<(), Error> {
        Err(unsupported("a consumer's low-level state"))
    }
    fn update_delivered(&mut self, _: &str, _: u64, _: u64, _: u64, _: i64) -> Result<(), Error> {
        Err(unsupported("a consumer's low-level state"))
    }
    fn update_acks(&mut self, _: &str, _: u64, _: u64) -> Result<(), Error> {
        Err(unsupported("a consumer's low-level state"))
    }
    fn consumer_names(&mut self) -> Result<Vec<String>, Error> {
        self.block_on(self.client.consumer_names(&self.stream))
    }
    fn close(self) -> Result<(), Error> {
        Ok(())
    }
}
