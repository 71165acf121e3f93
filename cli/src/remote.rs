//! `--server URL`: the store commands on a seqstore-server cluster, through seqstore-client,
//! with the same output as on a directory. A server holds many streams (`--stream`, default
//! `default`); `append` creates it when it is missing, as `append` creates a store in an empty
//! directory. Reads are linearizable (the leader's); every acknowledged write is committed on
//! a majority's fsynced log, so `sync` has nothing left to do. What a cluster does not serve —
//! `erase`, `time-seq`, `checkpoint`, `report`, `verify` (they are about one directory's
//! files) — is refused with a message that says so.

use seqstore_client::wire::{self, AckPolicy, AppendRequest, NextRequest, PurgeRequest};
use seqstore_client::{Client, Error as ClientError};
use seqstore_commands::{ConsumerCmd, ConsumerInfo, Error, Msg, Output, Result, StoreCmd};
use seqstore_core::surface::StreamStore;
use seqstore_core::{
    ConsumerConfig, ConsumerState, FilteredState, RecoveryReport, StoredMsg, StreamState,
};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::CliExtra;

/// Runs `cmd` on the cluster at `servers`, on `stream`.
pub(crate) fn run(
    cmd: &StoreCmd<CliExtra>,
    servers: &[String],
    stream: &str,
    token: Option<String>,
) -> Result<Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Backend(Box::new(e)))?;
    let mut r = Remote {
        client: Client::new(servers, token),
        stream: stream.to_string(),
        rt,
    };
    match cmd {
        StoreCmd::Consumer { cmd } => r.consumer(cmd),
        StoreCmd::Verify { .. } => Err(unserved("verify")),
        StoreCmd::Report { .. } => Err(unserved("report")),
        cmd => {
            if cmd.creates() {
                let config = wire::StreamConfig::default();
                let created = r.client.create_stream_if_absent(stream, &config);
                r.rt.block_on(created).map_err(client)?;
            }
            let clock = seqstore_fs::SystemClock;
            seqstore_commands::run_and_close(r, cmd, &clock)
        }
    }
}

/// The cluster as a [`StreamStore`] for the shared commands: a blocking adapter of the client.
struct Remote {
    client: Client,
    stream: String,
    rt: tokio::runtime::Runtime,
}

fn client(e: ClientError) -> Error {
    Error::Backend(Box::new(e))
}

fn unserved(what: &str) -> Error {
    Error::Backend(
        format!("{what} is not served by seqstore-server (it is about a directory's files)").into(),
    )
}

/// An operation seqstore-server has no request for (yet).
fn no_request(what: &str) -> Error {
    Error::Backend(format!("seqstore-server has no request for {what}").into())
}

/// At most one filter: the server's reads take one.
fn one_filter(filters: &[&str]) -> Result<String> {
    match filters {
        [] => Ok(">".into()),
        [f] => Ok(f.to_string()),
        _ => Err(Error::Backend("--server takes one filter per read".into())),
    }
}

fn stored(m: wire::Msg) -> Result<StoredMsg> {
    let payload = m.payload_bytes().map_err(|e| Error::Backend(e.into()))?;
    let headers = m.header_bytes().map_err(|e| Error::Backend(e.into()))?;
    Ok(StoredMsg {
        seq: m.seq,
        ts: m.ts,
        subject: m.subject,
        headers,
        payload,
    })
}

impl Remote {
    fn wait<T>(
        &self,
        f: impl std::future::Future<Output = std::result::Result<T, ClientError>>,
    ) -> Result<T> {
        self.rt.block_on(f).map_err(client)
    }

    fn msg(
        &self,
        f: impl std::future::Future<Output = std::result::Result<Option<wire::Msg>, ClientError>>,
    ) -> Result<Option<StoredMsg>> {
        self.wait(f)?.map(stored).transpose()
    }

    /// The consumer commands: each write is one log entry on the cluster (a pull included).
    fn consumer(&mut self, cmd: &ConsumerCmd<CliExtra>) -> Result<Output> {
        let (c, s) = (&self.client, self.stream.as_str());
        Ok(match cmd {
            ConsumerCmd::Add {
                name,
                ack,
                max_deliver,
                ..
            } => {
                let cfg = wire::ConsumerConfig {
                    ack_policy: AckPolicy::from(*ack),
                    max_deliver: *max_deliver,
                };
                self.wait(c.consumer_add(s, name, &cfg))?;
                Output::ConsumerAdded(name.clone())
            }
            ConsumerCmd::Next { name, count, .. } => {
                let batch = u32::try_from(*count).unwrap_or(u32::MAX);
                let req = NextRequest {
                    batch,
                    ..NextRequest::default()
                };
                let ds = self.wait(c.consumer_next(s, name, &req))?;
                let msgs = (ds.into_iter())
                    .map(|d| stored(d.message).map(|m| Msg::from(&m)))
                    .collect::<Result<Vec<_>>>()?;
                Output::Delivered {
                    name: name.clone(),
                    msgs,
                }
            }
            ConsumerCmd::Ack { name, seq, .. } => {
                self.wait(c.consumer_ack(s, name, *seq))?;
                Output::Acked(*seq)
            }
            ConsumerCmd::Info { name, .. } => {
                Output::ConsumerInfo(info(self.wait(c.consumer_info(s, name))?))
            }
            ConsumerCmd::List { .. } => Output::Consumers(self.wait(c.consumer_names(s))?),
            ConsumerCmd::Rm { name, .. } => {
                self.wait(c.consumer_delete(s, name))?;
                Output::ConsumerRemoved(name.clone())
            }
        })
    }
}

/// `consumer info`'s output from the server's answer.
fn info(i: wire::ConsumerInfo) -> ConsumerInfo {
    let cfg = ConsumerConfig {
        name: i.name,
        ack_policy: i.config.ack_policy,
        max_deliver: i.config.max_deliver,
    };
    let pending = (i.pending.iter())
        .map(|p| {
            let d = seqstore_core::Pending {
                sequence: p.consumer_seq,
                timestamp: p.ts,
            };
            (p.stream_seq, d)
        })
        .collect();
    let redelivered = (i.pending.iter())
        .filter(|p| p.redelivered > 0)
        .map(|p| (p.stream_seq, p.redelivered))
        .collect();
    let st = ConsumerState {
        delivered: i.delivered,
        ack_floor: i.ack_floor,
        pending,
        redelivered,
    };
    ConsumerInfo::new(&cfg, &st)
}

impl Remote {
    fn append_req(
        &mut self,
        subject: &str,
        h: &[u8],
        p: &[u8],
        ttl: Option<Duration>,
    ) -> Result<u64> {
        let mut req = AppendRequest::new(subject, p).with_headers(h);
        req.ttl_ms = ttl.map_or(0, |t| {
            u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)
        });
        self.wait(self.client.append(&self.stream, &req))
    }
}

/// Each operation is one request to the cluster's leader; what the server does not serve
/// (one directory's files, a replica's own writes, consumers' low-level state) is refused.
impl StreamStore for Remote {
    type Error = Error;

    fn append(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> Result<u64> {
        self.append_req(subject, headers, payload, None)
    }
    fn append_with_ttl(&mut self, s: &str, h: &[u8], p: &[u8], ttl: Duration) -> Result<u64> {
        self.append_req(s, h, p, Some(ttl))
    }
    fn append_raw(&mut self, _: u64, _: i64, _: &str, _: &[u8], _: &[u8]) -> Result<u64> {
        Err(no_request("an append at a given sequence (a replica's)"))
    }
    fn skip_msg(&mut self, seq: u64) -> Result<u64> {
        self.skip_many(seq, 1)
    }
    fn next_matching(&mut self, filter: &str, from: u64) -> Result<Option<StoredMsg>> {
        self.next_matching_multi(&[filter], from)
    }
    fn prev_matching(&mut self, filter: &str, from: u64) -> Result<Option<StoredMsg>> {
        self.prev_matching_multi(&[filter], from)
    }
    fn num_pending(&mut self, from: u64, filter: &str, lps: bool) -> Result<(u64, u64)> {
        self.num_pending_multi(from, &[filter], lps)
    }
    fn get_batch(&mut self, _: u64, _: &str, _: usize, _: u64) -> Result<Vec<StoredMsg>> {
        Err(no_request("get-batch"))
    }
    fn filtered_state(&mut self, _: &str, _: u64) -> Result<FilteredState> {
        Err(no_request("filtered-state"))
    }
    fn filtered_state_multi(&mut self, _: &[&str], _: u64) -> Result<FilteredState> {
        Err(no_request("filtered-state"))
    }
    fn subjects_state_detail(&mut self, _: &str) -> Result<BTreeMap<String, FilteredState>> {
        Err(no_request("subjects-state-detail"))
    }
    fn multi_last_seqs(&mut self, _: &[&str], _: u64, _: usize) -> Result<Vec<u64>> {
        Err(no_request("multi-last-seqs"))
    }
    fn all_last_seqs(&mut self) -> Result<Vec<u64>> {
        Err(no_request("all-last-seqs"))
    }
    fn subject_for_seq(&mut self, seq: u64) -> Result<String> {
        self.get(seq).map(|m| m.subject)
    }
    fn tick(&mut self) -> Result<()> {
        // the cluster's nodes run their own timers
        Ok(())
    }
    fn consumer_update(&mut self, _: &ConsumerConfig) -> Result<()> {
        Err(unserved("a consumer's low-level state"))
    }
    fn consumer_reset(&mut self, _: &str, _: u64) -> Result<()> {
        Err(unserved("a consumer's low-level state"))
    }
    fn skip_many(&mut self, first: u64, count: u64) -> Result<u64> {
        let last = self.state()?.last_seq;
        if first != last + 1 {
            let m = format!("skip must start at the next sequence, {}", last + 1);
            return Err(Error::Backend(m.into()));
        }
        self.wait(self.client.skip(&self.stream, count))
    }
    fn get(&mut self, seq: u64) -> Result<StoredMsg> {
        match self.msg(self.client.get(&self.stream, seq))? {
            Some(m) => Ok(m),
            None => Err(Error::NoMessage {
                what: format!("at sequence {seq}"),
            }),
        }
    }
    fn last_for_subject(&mut self, subject: &str) -> Result<Option<StoredMsg>> {
        self.msg(self.client.last(&self.stream, subject))
    }
    fn next_matching_multi(&mut self, filters: &[&str], from: u64) -> Result<Option<StoredMsg>> {
        let f = one_filter(filters)?;
        self.msg(self.client.next(&self.stream, from, &f))
    }
    fn prev_matching_multi(&mut self, filters: &[&str], from: u64) -> Result<Option<StoredMsg>> {
        let f = one_filter(filters)?;
        self.msg(self.client.prev(&self.stream, from, &f))
    }
    fn num_pending_multi(&mut self, from: u64, filters: &[&str], lps: bool) -> Result<(u64, u64)> {
        let f = one_filter(filters)?;
        let r = self.wait(self.client.pending(&self.stream, from, &f, lps))?;
        Ok((r.pending, r.valid_through))
    }
    fn seq_from_time(&mut self, _ts: i64) -> Result<u64> {
        Err(unserved("time-seq"))
    }
    fn subjects_state(&mut self, filter: &str) -> Result<BTreeMap<String, u64>> {
        Ok(self
            .wait(self.client.subjects(&self.stream, filter))?
            .subjects)
    }
    fn state(&mut self) -> Result<StreamState> {
        let s = self.wait(self.client.stream_info(&self.stream))?.state;
        let mut st = StreamState::default();
        (st.msgs, st.bytes, st.first_seq, st.first_ts) = (s.msgs, s.bytes, s.first_seq, s.first_ts);
        (st.last_seq, st.last_ts, st.num_deleted, st.num_subjects) =
            (s.last_seq, s.last_ts, s.num_deleted, s.num_subjects);
        Ok(st)
    }
    fn delete(&mut self, seq: u64) -> Result<()> {
        self.wait(self.client.delete(&self.stream, seq)).map(drop)
    }
    fn erase(&mut self, _seq: u64) -> Result<()> {
        Err(unserved("erase"))
    }
    fn purge(&mut self) -> Result<u64> {
        self.wait(self.client.purge(&self.stream, &PurgeRequest::default()))
    }
    fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> Result<u64> {
        let req = PurgeRequest {
            filter: Some(filter.to_string()),
            up_to_seq: Some(up_to),
            keep: Some(keep),
        };
        self.wait(self.client.purge(&self.stream, &req))
    }
    fn compact(&mut self, seq: u64) -> Result<u64> {
        self.wait(self.client.compact(&self.stream, seq))
    }
    fn truncate(&mut self, seq: u64) -> Result<u64> {
        self.wait(self.client.truncate(&self.stream, seq))
    }
    fn sync(&mut self) -> Result<()> {
        // every acknowledged write is already on a majority's fsynced log: only the stream
        // has to exist, as a directory has to hold a store
        self.state().map(drop)
    }
    fn checkpoint(&mut self) -> Result<()> {
        Err(unserved("checkpoint"))
    }
    fn recovery_report(&self) -> RecoveryReport {
        RecoveryReport::default()
    }
    fn consumer_add(&mut self, _cfg: &ConsumerConfig) -> Result<()> {
        Err(unserved("a consumer's low-level state"))
    }
    fn update_delivered(&mut self, _: &str, _: u64, _: u64, _: u64, _: i64) -> Result<()> {
        Err(unserved("a consumer's low-level state"))
    }
    fn update_acks(&mut self, _: &str, _: u64, _: u64) -> Result<()> {
        Err(unserved("a consumer's low-level state"))
    }
    fn consumer_state(&mut self, _: &str) -> Result<ConsumerState> {
        Err(unserved("a consumer's low-level state"))
    }
    fn consumer_config(&mut self, _: &str) -> Result<ConsumerConfig> {
        Err(unserved("a consumer's low-level state"))
    }
    fn consumer_delete(&mut self, _: &str) -> Result<()> {
        Err(unserved("a consumer's low-level state"))
    }
    fn consumer_names(&mut self) -> Result<Vec<String>> {
        self.wait(self.client.consumer_names(&self.stream))
    }
    fn close(self) -> Result<()> {
        Ok(())
    }
}
