//! The batching of [`Client::append`]: concurrent appends to one stream gathered into
//! `POST /streams/{name}/batch` requests, as a NATS connection gathers its publishers'
//! messages into its writes.
//!
//! Each stream has a queue. An append joins its stream's queue and starts a sender if none
//! runs (a second one only while a full batch waits, up to [`IN_FLIGHT`]). A sender is a
//! task that takes what has queued (up to [`MAX_MSGS`] messages, about [`MAX_BYTES`]),
//! sends it as one request (a lone message as an ordinary append), hands each append its own
//! result, lets the callers it answered append again ([`settle`]), and goes on while the
//! queue holds more. Being a task of its own, it finishes a batch even when a caller in it
//! gives up (a timeout, a dropped future): the other appends of that batch are not lost
//! with it.

use crate::wire::AppendRequest;
use crate::{Client, Error};
use std::collections::VecDeque;
use tokio::sync::oneshot;

/// Senders (so requests in flight) per stream, at most; the second starts only while a full
/// batch waits, so below that load one request at a time carries everything queued.
pub(crate) const IN_FLIGHT: usize = 2;
/// The most times a sender yields to let answered callers append again.
pub(crate) const SETTLE_YIELDS: usize = 32;
/// Messages per request.
pub(crate) const MAX_MSGS: usize = 256;
/// About this many request bytes (a larger lone message is sent alone).
pub(crate) const MAX_BYTES: usize = 1 << 20;

/// One stream's waiting appends and how many senders serve them.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    waiting: VecDeque<Waiting>,
    senders: usize,
}

#[derive(Debug)]
struct Waiting {
    req: AppendRequest,
    /// [`encoded_size`] of `req`, counted before the queue's lock is taken.
    size: usize,
    reply: oneshot::Sender<Result<u64, Error>>,
}

/// What [`Client::append`] does: joins the queue, starts a sender if there is room, and
/// waits for this append's result.
pub(crate) async fn append(c: &Client, stream: &str, req: &AppendRequest) -> Result<u64, Error> {
    let (reply, rx) = oneshot::channel();
    let waiting = Waiting {
        req: req.clone(),
        size: encoded_size(req),
        reply,
    };
    let start = {
        let mut qs = c.shared.queues.lock().unwrap_or_else(|e| e.into_inner());
        let q = qs.entry(stream.to_string()).or_default();
        q.waiting.push_back(waiting);
        // a second sender only for a full batch: below that, the next round trip carries
        // more of the callers in one request
        let start = q.senders == 0 || (q.senders < IN_FLIGHT && q.waiting.len() >= MAX_MSGS);
        q.senders += usize::from(start);
        start
    };
    if start {
        tokio::spawn(send_all(c.clone(), stream.to_string()));
    }
    rx.await
        .unwrap_or_else(|_| Err(Error::Unknown("the append's sender stopped".into())))
}

/// A sender: sends what has queued for `stream` until the queue is empty.
async fn send_all(c: Client, stream: String) {
    while let Some(batch) = take(&c, &stream) {
        let (reqs, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|w| (w.req, w.reply)).unzip();
        let results = match reqs.as_slice() {
            [one] => vec![c.append_one(&stream, one).await],
            _ => match c.batch_request(&stream, &reqs).await {
                Ok(r) => r,
                Err(e) => vec![Err(e); reqs.len()],
            },
        };
        for (reply, r) in replies.into_iter().zip(results) {
            let _ = reply.send(r);
        }
        settle(&c, &stream).await;
    }
}

/// Lets the callers just answered append again before the next batch is taken: yields
/// while the queue grows (at most [`SETTLE_YIELDS`] times). Without it the callers split into
/// groups that take turns, each a batch of its own, and every round trip carries a part of
/// them.
async fn settle(c: &Client, stream: &str) {
    let len = || {
        let qs = c.shared.queues.lock().unwrap_or_else(|e| e.into_inner());
        qs.get(stream).map_or(0, |q| q.waiting.len())
    };
    let mut n = len();
    for _ in 0..SETTLE_YIELDS {
        tokio::task::yield_now().await;
        let m = len();
        if m == n || m >= MAX_MSGS {
            break;
        }
        n = m;
    }
}

/// The next batch, or `None` (this sender stops) when nothing waits.
fn take(c: &Client, stream: &str) -> Option<Vec<Waiting>> {
    let mut qs = c.shared.queues.lock().unwrap_or_else(|e| e.into_inner());
    let q = qs.get_mut(stream)?;
    let (mut batch, mut bytes) = (Vec::new(), 0);
    while let Some(w) = q.waiting.front() {
        if !batch.is_empty() && (batch.len() == MAX_MSGS || bytes + w.size > MAX_BYTES) {
            break;
        }
        bytes += w.size;
        batch.extend(q.waiting.pop_front());
    }
    if batch.is_empty() {
        q.senders -= 1;
        if q.senders == 0 {
            qs.remove(stream);
        }
        return None;
    }
    Some(batch)
}

/// The bytes a request takes in a batch's JSON, give or take its field names.
fn encoded_size(r: &AppendRequest) -> usize {
    let escaped = |o: &Option<String>| o.as_deref().map_or(0, json_len);
    64 + json_len(&r.subject)
        + escaped(&r.payload)
        + escaped(&r.payload_b64)
        + escaped(&r.headers_b64)
}

/// A string's length as a JSON string's contents (`\"`, `\\` and control characters escaped).
fn json_len(s: &str) -> usize {
    let esc = |b: u8| match b {
        b'"' | b'\\' => 2,
        0..0x20 => 6,
        _ => 1,
    };
    s.bytes().map(esc).sum()
}

#[cfg(test)]
mod tests {
    use crate::wire::AppendRequest;
    use crate::{Client, Error};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    type Answer = Arc<dyn Fn(&str, &serde_json::Value) -> Option<(u16, String)> + Send + Sync>;

    /// A scripted HTTP/1.1 peer: every request's path and JSON body is recorded; `answer`
    /// gives the status and body, or `None` to never answer. Returns its URL and the log.
    async fn peer(answer: Answer, delay: Duration) -> (String, Arc<Mutex<Vec<String>>>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                tokio::spawn(serve(s, Arc::clone(&answer), Arc::clone(&log), delay));
            }
        });
        (url, seen)
    }

    async fn serve(
        mut s: tokio::net::TcpStream,
        answer: Answer,
        log: Arc<Mutex<Vec<String>>>,
        delay: Duration,
    ) {
        let mut buf = Vec::new();
        loop {
            let head_end = loop {
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                let mut chunk = [0u8; 4096];
                match s.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
            let path = head.split(' ').nth(1).unwrap_or("").to_string();
            let len: usize = (head.lines())
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < head_end + len {
                let mut chunk = [0u8; 4096];
                match s.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let body: serde_json::Value =
                serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or_default();
            buf.drain(..head_end + len);
            log.lock().unwrap().push(path.clone());
            tokio::time::sleep(delay).await;
            let Some((status, text)) = answer(&path, &body) else {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return;
            };
            let resp = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
                text.len()
            );
            if s.write_all(resp.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    /// Answers appends with sequences counted from 1, one per message.
    fn counting() -> Answer {
        let next = Arc::new(Mutex::new(0u64));
        Arc::new(move |path, body| {
            let mut n = next.lock().unwrap();
            let mut seq = || {
                *n += 1;
                *n
            };
            if path.ends_with("/batch") {
                let k = body["messages"].as_array().map_or(0, Vec::len);
                let r: Vec<_> = (0..k)
                    .map(|_| serde_json::json!({ "seq": seq() }))
                    .collect();
                Some((200, serde_json::json!({ "results": r }).to_string()))
            } else {
                Some((200, serde_json::json!({ "seq": seq() }).to_string()))
            }
        })
    }

    fn req(i: usize) -> AppendRequest {
        AppendRequest::new(format!("s.{i}"), b"x")
    }

    /// Appends made at once through clones of one client share requests, and every caller
    /// gets a sequence of its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_appends_share_requests() {
        let (url, seen) = peer(counting(), Duration::from_millis(20)).await;
        let c = Client::new(&[url], None);
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move { c.append("s", &req(i)).await })
            })
            .collect();
        let mut seqs = Vec::new();
        for t in tasks {
            seqs.push(t.await.unwrap().unwrap());
        }
        seqs.sort_unstable();
        assert_eq!(seqs, (1..=40).collect::<Vec<u64>>());
        let requests = seen.lock().unwrap().len();
        assert!(
            requests < 10,
            "40 concurrent appends took {requests} requests"
        );
    }

    /// A message the leader did not commit (`not_leader` in its result) is sent again alone;
    /// the others keep their results.
    #[tokio::test]
    async fn a_message_not_committed_is_sent_again_alone() {
        let answer: Answer = Arc::new(|path, _| {
            let nl = r#"{"error":{"kind":"not_leader","message":"lost it"},"status":421}"#;
            Some(match path {
                p if p.ends_with("/batch") => (200, format!(r#"{{"results":[{{"seq":7}},{nl}]}}"#)),
                _ => (200, r#"{"seq":8}"#.to_string()),
            })
        });
        let (url, seen) = peer(answer, Duration::ZERO).await;
        let c = Client::new(&[url], None);
        let r = c.append_batch("s", &[req(0), req(1)]).await;
        assert_eq!(r, vec![Ok(7), Ok(8)]);
        let paths = seen.lock().unwrap().clone();
        assert_eq!(paths, vec!["/streams/s/batch", "/streams/s/messages"]);
    }

    /// `append_batch` past one request: a failure that did nothing (an unknown stream) is
    /// every message's, and the later requests are not sent.
    #[tokio::test]
    async fn append_batch_stops_after_a_failure_that_did_nothing() {
        let answer: Answer = Arc::new(|_, _| {
            let e = r#"{"error":{"kind":"unknown_stream","message":"no stream"}}"#;
            Some((404, e.to_string()))
        });
        let (url, seen) = peer(answer, Duration::ZERO).await;
        let c = Client::new(&[url], None);
        let reqs: Vec<_> = (0..crate::wire::MAX_BATCH + 1).map(req).collect();
        let r = c.append_batch("s", &reqs).await;
        assert_eq!(r.len(), reqs.len());
        assert!(r.iter().all(|r| matches!(r, Err(Error::UnknownStream(_)))));
        assert_eq!(seen.lock().unwrap().len(), 1, "the second request was sent");
    }

    /// A batch whose answer never comes is sent once, and every append in it is `Unknown`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_without_an_answer_is_unknown_for_each_append_and_sent_once() {
        let answer: Answer =
            Arc::new(|path, _| (!path.ends_with("/batch")).then(|| (200, r#"{"seq":1}"#.into())));
        let (url, seen) = peer(answer, Duration::from_millis(50)).await;
        let c = Client::new(&[url], None)
            .with_timeout(Duration::from_millis(400))
            .with_retry_for(Duration::from_secs(1));
        let first = {
            let c = c.clone();
            tokio::spawn(async move { c.append("s", &req(0)).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        // these queue behind the first and travel together as one batch
        let rest: Vec<_> = (1..6)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move { c.append("s", &req(i)).await })
            })
            .collect();
        assert_eq!(first.await.unwrap(), Ok(1));
        for t in rest {
            let r = t.await.unwrap();
            assert!(matches!(r, Err(Error::Unknown(_))), "{r:?}");
        }
        let paths = seen.lock().unwrap().clone();
        assert_eq!(paths, vec!["/streams/s/messages", "/streams/s/batch"]);
    }
}
