//! An async client of seqstore-server.
//!
//! - **Leader discovery.** Given several node URLs it sends to the leader it last heard of, or
//!   to the next node; a node that is not the leader answers `not_leader` with the leader's
//!   URL (nothing done), and the client follows it.
//! - **Retries.** Reads, `create_stream_if_absent` and the admin calls (setting the same
//!   membership twice is harmless) are retried on any failure until the client's retry budget
//!   is spent. Other writes are retried only when the server certainly did nothing with them:
//!   the connection was refused, or a node answered `not_leader`/`unavailable`.
//! - **Concurrent appends share requests.** A [`Client`] is cheap to clone and meant to be
//!   shared by many tasks; appends to one stream made while its previous request is out
//!   travel together as one batch request, each with its own answer ([`Client::append`]).
//!   It needs a tokio runtime.
//! - **An append is never retried blindly.** Once it may have reached a leader (a timeout, a
//!   broken connection, `unknown_outcome`), its outcome is unknown: it may be committed or
//!   not, and a second send could store it twice. That is [`Error::Unknown`]; the caller
//!   decides (read the stream to find out, or make appends idempotent at its level).
//! - **Blocking, as a store.** [`BlockingStream`] is one stream as a blocking
//!   [`seqstore_core::surface::StreamStore`], the trait a `Store` on a directory implements:
//!   code written against it runs on either. What the server does not serve is refused with
//!   [`Error::Unsupported`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod batch;
mod blocking;
pub mod transport;
pub mod wire;

pub use blocking::BlockingStream;
use bytes::Bytes;
use http::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
pub use transport::{SendError, Transport};
use wire::*;

/// What a call can fail with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No stream of that name.
    #[error("unknown stream: {0}")]
    UnknownStream(String),
    /// A create of a stream that exists.
    #[error("stream exists: {0}")]
    StreamExists(String),
    /// The server refused the token (or its absence).
    #[error("unauthorized")]
    Unauthorized,
    /// The write may or may not have been committed (timeout, broken connection, leadership
    /// lost after it was proposed). Not retried: see the crate doc.
    #[error("outcome unknown: {0}")]
    Unknown(String),
    /// No node acted as the leader within the retry budget; nothing was done.
    #[error("no leader within the retry budget; last: {0}")]
    NoLeader(String),
    /// Any other error answer (`kind` is one of [`wire::kind`]); nothing changed.
    #[error("{kind} (HTTP {status}): {message}")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The error kind.
        kind: String,
        /// The server's message.
        message: String,
    },
    /// An answer that does not decode.
    #[error("bad answer: {0}")]
    Decode(String),
    /// A call to one given node ([`Client::status_of`], [`Client::dump_of`]) got no answer.
    #[error("no answer: {0}")]
    Unreachable(String),
    /// A read of one message found none ([`BlockingStream`]'s `get`; `0` says which).
    #[error("no message {0}")]
    NoMessage(String),
    /// Arguments [`BlockingStream`] refuses before sending anything, as the store refuses them
    /// (a skip that does not start at the next sequence).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An operation of [`seqstore_core::surface::StreamStore`] that the server does not serve
    /// ([`BlockingStream`]); nothing was sent.
    #[error("{0}")]
    Unsupported(String),
}

/// A client for one cluster. Clones share its connections, the leader it follows and the
/// batching of appends (see [`Client::append`]), as tasks sharing one NATS connection do.
#[derive(Clone, Debug)]
pub struct Client {
    shared: Arc<Shared>,
    timeout: Duration,
    retry_for: Duration,
}

#[derive(Debug)]
struct Shared {
    nodes: Vec<String>,
    /// The leader's base URL, or the index of the node to try next.
    target: Mutex<(Option<String>, usize)>,
    transport: Transport,
    /// Appends waiting to be sent, per stream.
    queues: Mutex<HashMap<String, batch::Queue>>,
}

/// [`AppendBatch`]'s JSON, borrowing its messages (a batch is not copied to be sent).
#[derive(Serialize)]
struct BatchBody<'a> {
    messages: &'a [AppendRequest],
}

/// What an answer means for the loop in [`Client::call`].
enum Verdict {
    Done(Bytes),
    /// Ask this URL (the leader) instead; nothing was done.
    Redirect(String),
    /// Ask another node later; nothing was done.
    Elsewhere(String),
    /// The write may have happened.
    Unknown(String),
    Fail(Error),
}

impl Client {
    /// A client for the nodes at `urls` (`http://host:port`), sending `token` if given.
    /// Each request waits at most 5 s, and a call retries for at most 20 s.
    pub fn new<S: AsRef<str>>(urls: &[S], token: Option<String>) -> Self {
        let nodes = (urls.iter())
            .map(|u| u.as_ref().trim_end_matches('/').to_string())
            .collect();
        Client {
            shared: Arc::new(Shared {
                nodes,
                target: Mutex::new((None, 0)),
                transport: Transport::new(token),
                queues: Mutex::new(HashMap::new()),
            }),
            timeout: Duration::from_secs(5),
            retry_for: Duration::from_secs(20),
        }
    }

    /// Sets the limit of one request (default 5 s).
    pub fn with_timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    /// Sets how long a call looks for a leader and retries (default 20 s).
    pub fn with_retry_for(mut self, t: Duration) -> Self {
        self.retry_for = t;
        self
    }

    /// The base URL the next request goes to.
    fn pick(&self) -> String {
        let t = self.shared.target.lock().unwrap_or_else(|e| e.into_inner());
        match &t.0 {
            Some(l) => l.clone(),
            None => self.shared.nodes[t.1 % self.shared.nodes.len().max(1)].clone(),
        }
    }

    /// Forgets `base` as the leader and moves on to the next node.
    fn skip_node(&self, base: &str) {
        let mut t = self.shared.target.lock().unwrap_or_else(|e| e.into_inner());
        if t.0.as_deref() == Some(base) || t.0.is_none() {
            t.0 = None;
            t.1 = t.1.wrapping_add(1);
        }
    }

    fn follow(&self, leader: String) {
        self.shared
            .target
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0 = Some(leader);
    }

    /// One call through the leader; `retry`: the call is idempotent (see the crate doc).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        retry: bool,
    ) -> Result<Bytes, Error> {
        if self.shared.nodes.is_empty() {
            return Err(Error::NoLeader("no node URLs given".into()));
        }
        let body = Bytes::from(body.unwrap_or_default());
        let deadline = Instant::now() + self.retry_for;
        let mut last = String::new();
        while Instant::now() < deadline {
            let base = self.pick();
            let url = format!("{base}{path}");
            let sent = self.shared.transport.send(
                method.clone(),
                &url,
                "application/json",
                body.clone(),
                self.timeout,
            );
            let verdict = match sent.await {
                Ok((status, bytes)) => judge(status, bytes),
                Err(e @ SendError::Connect { .. }) => Verdict::Elsewhere(e.to_string()),
                Err(e) => Verdict::Unknown(e.to_string()),
            };
            match verdict {
                Verdict::Done(b) => return Ok(b),
                Verdict::Fail(e) => return Err(e),
                Verdict::Redirect(l) if l != base => {
                    self.follow(l);
                    continue;
                }
                Verdict::Unknown(m) if !retry => return Err(Error::Unknown(m)),
                Verdict::Redirect(m) | Verdict::Elsewhere(m) | Verdict::Unknown(m) => last = m,
            }
            self.skip_node(&base);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(Error::NoLeader(last))
    }

    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
        retry: bool,
    ) -> Result<T, Error> {
        let body = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| Error::Decode(e.to_string()))?;
        let b = self.call(method, path, body, retry).await?;
        serde_json::from_slice(&b).map_err(|e| Error::Decode(e.to_string()))
    }

    async fn read<T: DeserializeOwned>(&self, path: &str) -> Result<T, Error> {
        self.json(Method::GET, path, None::<&()>, true).await
    }

    /// A read that answers `no_message` when there is none.
    async fn read_msg(&self, path: &str) -> Result<Option<Msg>, Error> {
        match self.read(path).await {
            Ok(m) => Ok(Some(m)),
            Err(Error::Api { kind, .. }) if kind == kind::NO_MESSAGE => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates a stream; [`Error::StreamExists`] if it exists. Not retried once sent (a
    /// retry of a create that did happen would answer "exists").
    pub async fn create_stream(&self, name: &str, config: &StreamConfig) -> Result<(), Error> {
        let p = format!("/streams/{name}");
        self.json::<serde_json::Value>(Method::PUT, &p, Some(config), false)
            .await
            .map(drop)
    }

    /// Creates a stream unless it exists: `true` if this call created it. Retried (idempotent).
    /// An existing stream's config is not compared.
    pub async fn create_stream_if_absent(
        &self,
        name: &str,
        config: &StreamConfig,
    ) -> Result<bool, Error> {
        let p = format!("/streams/{name}");
        let r = self.json::<serde_json::Value>(Method::PUT, &p, Some(config), true);
        match r.await {
            Ok(_) => Ok(true),
            Err(Error::StreamExists(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Deletes a stream and its messages.
    pub async fn delete_stream(&self, name: &str) -> Result<(), Error> {
        let p = format!("/streams/{name}");
        self.json::<serde_json::Value>(Method::DELETE, &p, None::<&()>, false)
            .await
            .map(drop)
    }

    /// Every stream with its config and counters.
    pub async fn list_streams(&self) -> Result<Vec<StreamInfo>, Error> {
        Ok(self.read::<StreamList>("/streams").await?.streams)
    }

    /// One stream's config and counters.
    pub async fn stream_info(&self, name: &str) -> Result<StreamInfo, Error> {
        self.read(&format!("/streams/{name}")).await
    }

    /// Appends a message; its sequence once committed. Never retried once it may have reached
    /// a leader: [`Error::Unknown`] then.
    ///
    /// Appends to one stream made concurrently through this client (or its clones) while
    /// earlier ones are in flight travel together, in batches of up to 256, as one request
    /// each (`POST /streams/{name}/batch`): each still gets its own sequence or error, once
    /// committed. A lone append is sent as itself. Within a batch the messages are
    /// sequenced in the order their calls were made.
    pub async fn append(&self, stream: &str, req: &AppendRequest) -> Result<u64, Error> {
        batch::append(self, stream, req).await
    }

    /// One append in a request of its own.
    async fn append_one(&self, stream: &str, req: &AppendRequest) -> Result<u64, Error> {
        let p = format!("/streams/{stream}/messages");
        let r: SeqReply = self.json(Method::POST, &p, Some(req), false).await?;
        Ok(r.seq)
    }

    /// Appends `reqs` in their order, in requests of at most [`wire::MAX_BATCH`] messages:
    /// each message's sequence, or why it was not stored. A request that fails gives its
    /// error to each of its messages ([`Error::Unknown`] when its answer was lost: each may
    /// be stored or not); after any other failure (nothing was done: no leader, an unknown
    /// stream, a refused request) the later requests are not sent and their messages get
    /// the same error. A message the leader could not commit because it lost its leadership
    /// is sent again alone, so its sequence may come after later messages'.
    pub async fn append_batch(
        &self,
        stream: &str,
        reqs: &[AppendRequest],
    ) -> Vec<Result<u64, Error>> {
        let mut out = Vec::with_capacity(reqs.len());
        let mut stopped: Option<Error> = None;
        for chunk in reqs.chunks(MAX_BATCH) {
            let r = match &stopped {
                Some(e) => Err(e.clone()),
                None => self.batch_request(stream, chunk).await,
            };
            match r {
                Ok(r) => out.extend(r),
                Err(e) => {
                    out.extend(chunk.iter().map(|_| Err(e.clone())));
                    if !matches!(e, Error::Unknown(_)) {
                        stopped = Some(e);
                    }
                }
            }
        }
        out
    }

    /// One `POST /streams/{name}/batch` (at most [`wire::MAX_BATCH`] messages).
    async fn batch_request(
        &self,
        stream: &str,
        reqs: &[AppendRequest],
    ) -> Result<Vec<Result<u64, Error>>, Error> {
        if reqs.is_empty() {
            return Ok(Vec::new());
        }
        let p = format!("/streams/{stream}/batch");
        let body = BatchBody { messages: reqs };
        let r: AppendBatchReply = self.json(Method::POST, &p, Some(&body), false).await?;
        if r.results.len() != reqs.len() {
            let m = format!("{} results for {} messages", r.results.len(), reqs.len());
            return Err(Error::Unknown(m));
        }
        let mut out = Vec::with_capacity(reqs.len());
        for (res, req) in r.results.into_iter().zip(reqs) {
            out.push(match (res.seq, res.error) {
                (Some(seq), None) => Ok(seq),
                (_, Some(e)) => match judge_error(res.status.unwrap_or(500), e) {
                    Verdict::Redirect(_) | Verdict::Elsewhere(_) => {
                        self.append_one(stream, req).await
                    }
                    Verdict::Unknown(m) => Err(Error::Unknown(m)),
                    Verdict::Fail(e) => Err(e),
                    Verdict::Done(_) => Err(Error::Decode("an error that is not one".into())),
                },
                (None, None) => Err(Error::Decode("a result without seq or error".into())),
            });
        }
        Ok(out)
    }

    /// Message `seq`, `None` if there is none.
    pub async fn get(&self, stream: &str, seq: u64) -> Result<Option<Msg>, Error> {
        self.read_msg(&format!("/streams/{stream}/messages/{seq}"))
            .await
    }

    /// The first message at or after `from` whose subject matches `filter`.
    pub async fn next(&self, stream: &str, from: u64, filter: &str) -> Result<Option<Msg>, Error> {
        let f = query_escape(filter);
        self.read_msg(&format!("/streams/{stream}/next?from={from}&filter={f}"))
            .await
    }

    /// The last message at or before `from` whose subject matches `filter`.
    pub async fn prev(&self, stream: &str, from: u64, filter: &str) -> Result<Option<Msg>, Error> {
        let f = query_escape(filter);
        self.read_msg(&format!("/streams/{stream}/prev?from={from}&filter={f}"))
            .await
    }

    /// The newest message on `subject` (or matching it, with wildcards).
    pub async fn last(&self, stream: &str, subject: &str) -> Result<Option<Msg>, Error> {
        let s = query_escape(subject);
        self.read_msg(&format!("/streams/{stream}/last?subject={s}"))
            .await
    }

    /// Message counts per subject matching `filter`.
    pub async fn subjects(&self, stream: &str, filter: &str) -> Result<SubjectsReply, Error> {
        let f = query_escape(filter);
        self.read(&format!("/streams/{stream}/subjects?filter={f}"))
            .await
    }

    /// Messages at or after `from` matching `filter` (store-core's `num_pending`).
    pub async fn pending(
        &self,
        stream: &str,
        from: u64,
        filter: &str,
        last_per_subject: bool,
    ) -> Result<PendingReply, Error> {
        let f = query_escape(filter);
        let p = format!(
            "/streams/{stream}/pending?from={from}&filter={f}&last_per_subject={last_per_subject}"
        );
        self.read(&p).await
    }

    /// Purges (whole with a default request, else `purge_ex`); how many were removed.
    pub async fn purge(&self, stream: &str, req: &PurgeRequest) -> Result<u64, Error> {
        let p = format!("/streams/{stream}/purge");
        let r: RemovedReply = self.json(Method::POST, &p, Some(req), false).await?;
        Ok(r.removed)
    }

    /// Removes every message below `up_to`.
    pub async fn compact(&self, stream: &str, up_to: u64) -> Result<u64, Error> {
        let p = format!("/streams/{stream}/compact");
        let req = CompactRequest { up_to };
        let r: RemovedReply = self.json(Method::POST, &p, Some(&req), false).await?;
        Ok(r.removed)
    }

    /// Removes message `seq`.
    pub async fn delete(&self, stream: &str, seq: u64) -> Result<u64, Error> {
        let p = format!("/streams/{stream}/messages/{seq}");
        let r: RemovedReply = self.json(Method::DELETE, &p, None::<&()>, false).await?;
        Ok(r.removed)
    }

    /// Creates durable consumer `name` on `stream` (the same settings again: nothing
    /// changes). Retried: idempotent.
    pub async fn consumer_add(
        &self,
        stream: &str,
        name: &str,
        config: &ConsumerConfig,
    ) -> Result<(), Error> {
        let p = format!("/streams/{stream}/consumers/{name}");
        self.json::<serde_json::Value>(Method::PUT, &p, Some(config), true)
            .await
            .map(drop)
    }

    /// Removes consumer `name` and its state.
    pub async fn consumer_delete(&self, stream: &str, name: &str) -> Result<(), Error> {
        let p = format!("/streams/{stream}/consumers/{name}");
        self.json::<serde_json::Value>(Method::DELETE, &p, None::<&()>, false)
            .await
            .map(drop)
    }

    /// Pulls the consumer's next messages (recorded as delivered once committed). Not retried
    /// once sent: a pull whose answer was lost delivered its messages, which come back
    /// as redeliveries after `ack_wait_ms`.
    pub async fn consumer_next(
        &self,
        stream: &str,
        name: &str,
        req: &NextRequest,
    ) -> Result<Vec<Delivery>, Error> {
        let p = format!("/streams/{stream}/consumers/{name}/next");
        let r: Deliveries = self.json(Method::POST, &p, Some(req), false).await?;
        Ok(r.messages)
    }

    /// Acknowledges stream sequence `stream_seq`.
    pub async fn consumer_ack(
        &self,
        stream: &str,
        name: &str,
        stream_seq: u64,
    ) -> Result<(), Error> {
        let p = format!("/streams/{stream}/consumers/{name}/ack");
        let req = AckRequest { stream_seq };
        self.json::<serde_json::Value>(Method::POST, &p, Some(&req), false)
            .await
            .map(drop)
    }

    /// A consumer's settings and state.
    pub async fn consumer_info(&self, stream: &str, name: &str) -> Result<ConsumerInfo, Error> {
        self.read(&format!("/streams/{stream}/consumers/{name}"))
            .await
    }

    /// The stream's consumers.
    pub async fn consumer_names(&self, stream: &str) -> Result<Vec<String>, Error> {
        let l: ConsumerList = self.read(&format!("/streams/{stream}/consumers")).await?;
        Ok(l.consumers)
    }

    /// Marks the next `count` sequences used without a message; the new last sequence.
    pub async fn skip(&self, stream: &str, count: u64) -> Result<u64, Error> {
        let p = format!("/streams/{stream}/skip");
        let req = SkipRequest { count };
        let r: LastSeqReply = self.json(Method::POST, &p, Some(&req), false).await?;
        Ok(r.last_seq)
    }

    /// Applies the stream's `max_age` and removes expired ttl messages at the leader's time;
    /// how many were removed.
    pub async fn expire(&self, stream: &str) -> Result<u64, Error> {
        let p = format!("/streams/{stream}/expire");
        let r: RemovedReply = self.json(Method::POST, &p, None::<&()>, false).await?;
        Ok(r.removed)
    }

    /// Removes every message above `seq` (the next append gets `seq + 1`); how many were
    /// removed.
    pub async fn truncate(&self, stream: &str, seq: u64) -> Result<u64, Error> {
        let p = format!("/streams/{stream}/truncate");
        let req = TruncateRequest { seq };
        let r: RemovedReply = self.json(Method::POST, &p, Some(&req), false).await?;
        Ok(r.removed)
    }

    /// One node's status (no leader needed; not retried elsewhere).
    pub async fn status_of(&self, node_url: &str) -> Result<Status, Error> {
        self.one_node(node_url, "/admin/status").await
    }

    /// One node's whole applied state (no leader needed).
    pub async fn dump_of(&self, node_url: &str) -> Result<Dump, Error> {
        self.one_node(node_url, "/debug/dump").await
    }

    async fn one_node<T: DeserializeOwned>(&self, base: &str, path: &str) -> Result<T, Error> {
        let url = format!("{}{path}", base.trim_end_matches('/'));
        let t = &self.shared.transport;
        let sent = t.send(
            Method::GET,
            &url,
            "application/json",
            Bytes::new(),
            self.timeout,
        );
        let (status, b) = sent.await.map_err(|e| Error::Unreachable(e.to_string()))?;
        match judge(status, b) {
            Verdict::Done(b) => {
                serde_json::from_slice(&b).map_err(|e| Error::Decode(e.to_string()))
            }
            Verdict::Fail(e) => Err(e),
            Verdict::Redirect(m) | Verdict::Elsewhere(m) | Verdict::Unknown(m) => {
                Err(Error::Unreachable(m))
            }
        }
    }

    /// Adds (or updates) a learner; returns once it has caught up with the leader's log.
    pub async fn add_learner(&self, id: u64, addr: &str) -> Result<(), Error> {
        let req = LearnerRequest {
            id,
            addr: addr.to_string(),
        };
        self.json::<serde_json::Value>(Method::POST, "/admin/learners", Some(&req), true)
            .await
            .map(drop)
    }

    /// Makes `voters` the voter set (a voter left out is removed from the cluster).
    pub async fn change_membership(&self, voters: &[u64]) -> Result<(), Error> {
        let req = MembershipRequest {
            voters: voters.to_vec(),
        };
        self.json::<serde_json::Value>(Method::POST, "/admin/membership", Some(&req), true)
            .await
            .map(drop)
    }
}

/// What an answer means: see [`Verdict`].
fn judge(status: StatusCode, body: Bytes) -> Verdict {
    if status.is_success() {
        return Verdict::Done(body);
    }
    let Ok(e) = serde_json::from_slice::<ErrorBody>(&body) else {
        let text = String::from_utf8_lossy(&body).into_owned();
        return Verdict::Fail(Error::Decode(format!("HTTP {status}: {text}")));
    };
    judge_error(status.as_u16(), e.error)
}

/// What an error answer of this HTTP status means (never [`Verdict::Done`]).
fn judge_error(status: u16, e: ErrorInfo) -> Verdict {
    match e.kind.as_str() {
        kind::NOT_LEADER => match e.leader_url {
            Some(u) => Verdict::Redirect(u),
            None => Verdict::Elsewhere(e.message),
        },
        kind::UNAVAILABLE => Verdict::Elsewhere(e.message),
        kind::UNKNOWN_OUTCOME => Verdict::Unknown(e.message),
        kind::UNKNOWN_STREAM => Verdict::Fail(Error::UnknownStream(e.message)),
        kind::STREAM_EXISTS => Verdict::Fail(Error::StreamExists(e.message)),
        kind::UNAUTHORIZED => Verdict::Fail(Error::Unauthorized),
        _ => Verdict::Fail(Error::Api {
            status,
            kind: e.kind,
            message: e.message,
        }),
    }
}

/// Percent-encodes a query value (everything but RFC 3986's unreserved characters).
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_batch_body_is_an_append_batch() {
        let messages = vec![
            AppendRequest::new("a", b"x"),
            AppendRequest::new("b", &[0xff]),
        ];
        let sent = serde_json::to_vec(&BatchBody {
            messages: &messages,
        })
        .unwrap();
        let read: AppendBatch = serde_json::from_slice(&sent).unwrap();
        assert_eq!(read, AppendBatch { messages });
    }

    #[test]
    fn query_escape_keeps_unreserved_and_encodes_wildcards() {
        assert_eq!(query_escape("a.b-c_d~"), "a.b-c_d~");
        assert_eq!(query_escape("orders.*.>"), "orders.%2A.%3E");
        assert_eq!(query_escape("a b"), "a%20b");
    }

    #[test]
    fn not_leader_with_url_redirects_and_unknown_outcome_is_unknown() {
        let body = |k: &str, url: Option<&str>| {
            let e = ErrorBody {
                error: ErrorInfo {
                    kind: k.into(),
                    message: "m".into(),
                    leader_id: None,
                    leader_url: url.map(String::from),
                },
            };
            Bytes::from(serde_json::to_vec(&e).unwrap())
        };
        let misdirected = StatusCode::MISDIRECTED_REQUEST;
        let v = judge(misdirected, body(kind::NOT_LEADER, Some("http://x:1")));
        assert!(matches!(v, Verdict::Redirect(u) if u == "http://x:1"));
        let v = judge(misdirected, body(kind::NOT_LEADER, None));
        assert!(matches!(v, Verdict::Elsewhere(_)));
        let unavailable = StatusCode::SERVICE_UNAVAILABLE;
        let v = judge(unavailable, body(kind::UNKNOWN_OUTCOME, None));
        assert!(matches!(v, Verdict::Unknown(_)));
        let v = judge(StatusCode::NOT_FOUND, body(kind::UNKNOWN_STREAM, None));
        assert!(matches!(v, Verdict::Fail(Error::UnknownStream(_))));
    }

    /// An append whose request may have reached a node is not sent again: a listener that
    /// accepts and never answers sees exactly one request, and the call is `Unknown`.
    #[tokio::test]
    async fn an_append_that_times_out_is_unknown_and_sent_once() {
        use tokio::io::AsyncReadExt;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let accepted = tokio::spawn(async move {
            let mut n = 0;
            let mut held = Vec::new();
            while let Ok(Ok((mut s, _))) =
                tokio::time::timeout(Duration::from_millis(1500), l.accept()).await
            {
                n += 1;
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                held.push(s); // never answers
            }
            n
        });
        let c = Client::new(&[url], None)
            .with_timeout(Duration::from_millis(300))
            .with_retry_for(Duration::from_secs(1));
        let r = c.append("s", &AppendRequest::new("a", b"x")).await;
        assert!(matches!(r, Err(Error::Unknown(_))), "{r:?}");
        assert_eq!(accepted.await.unwrap(), 1, "the append was sent again");
    }
}
