//! `/streams`: create, delete, list, append, reads (linearizable, on the leader) and the
//! removals. Writes go through the raft log; reads run on the leader's state machine.

use super::error::ApiError;
use super::extract::{JsonBody, P, Q};
use super::App;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use seqstore_client::wire::*;
use seqstore_core::{Store, StoredMsg};
use seqstore_fs::HostFs;
use seqstore_raft::sharedfs::SubFs;
use seqstore_raft::{Op, Response};
use serde::Deserialize;

type St = Store<SubFs<HostFs>>;
type R<T> = Result<Json<T>, ApiError>;

/// The routes.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/streams", get(list))
        .route(
            "/streams/{name}",
            get(info).put(create).delete(delete_stream),
        )
        .route("/streams/{name}/messages", post(append))
        .route("/streams/{name}/batch", post(append_batch))
        .route(
            "/streams/{name}/messages/{seq}",
            get(get_msg).delete(delete_msg),
        )
        .route("/streams/{name}/next", get(next))
        .route("/streams/{name}/prev", get(prev))
        .route("/streams/{name}/last", get(last))
        .route("/streams/{name}/subjects", get(subjects))
        .route("/streams/{name}/pending", get(pending))
        .route("/streams/{name}/purge", post(purge))
        .route("/streams/{name}/compact", post(compact))
        .route("/streams/{name}/truncate", post(truncate))
        .route("/streams/{name}/expire", post(expire))
        .route("/streams/{name}/skip", post(skip))
}

fn info_of(name: &str, c: &seqstore_raft::StreamConfig, s: &St) -> StreamInfo {
    StreamInfo {
        name: name.to_string(),
        config: *c,
        state: s.state(),
    }
}

/// The JSON form of a stored message.
pub fn msg_of(m: StoredMsg) -> Msg {
    Msg::new(m.seq, m.ts, m.subject, &m.headers, &m.payload)
}

impl App {
    /// A linearizable read of stream `name`: `f` runs on its config and store.
    async fn read<T: Send + 'static>(
        &self,
        name: String,
        f: impl FnOnce(&seqstore_raft::StreamConfig, &mut St) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        self.linearize().await?;
        let n = name.clone();
        let r = self.blocking(move |c| c.read_stream(&n, f)).await?;
        r.unwrap_or_else(|| Err(ApiError::unknown_stream(&name)))
    }
}

async fn list(State(app): State<App>) -> R<StreamList> {
    app.linearize().await?;
    let streams = app
        .blocking(|c| {
            let names = c.stream_names();
            let infos = names
                .iter()
                .filter_map(|n| c.read_stream(n, |cfg, s| info_of(n, cfg, s)));
            infos.collect()
        })
        .await?;
    Ok(Json(StreamList { streams }))
}

async fn info(State(app): State<App>, P(name): P<String>) -> R<StreamInfo> {
    let n = name.clone();
    let i = app.read(name, move |c, s| Ok(info_of(&n, c, s))).await?;
    Ok(Json(i))
}

fn done(r: Response) -> R<serde_json::Value> {
    match r {
        Response::Done => Ok(Json(serde_json::json!({ "ok": true }))),
        other => Err(ApiError::internal(format!("unexpected response {other:?}"))),
    }
}

fn removed(r: Response) -> R<RemovedReply> {
    match r {
        Response::Removed(removed) => Ok(Json(RemovedReply { removed })),
        other => Err(ApiError::internal(format!("unexpected response {other:?}"))),
    }
}

fn last_seq(r: Response) -> R<LastSeqReply> {
    match r {
        Response::Seq(last_seq) => Ok(Json(LastSeqReply { last_seq })),
        other => Err(ApiError::internal(format!("unexpected response {other:?}"))),
    }
}

async fn create(
    State(app): State<App>,
    P(name): P<String>,
    JsonBody(config): JsonBody<StreamConfig>,
) -> R<serde_json::Value> {
    // store-core's own check of the limits, before anything is proposed
    seqstore_raft::store_config(&config)
        .validate()
        .map_err(|e| ApiError::bad_request(format!("config: {e}")))?;
    done(app.write(Op::CreateStream { name, config }).await?)
}

async fn delete_stream(State(app): State<App>, P(name): P<String>) -> R<serde_json::Value> {
    done(app.write(Op::DeleteStream { name }).await?)
}

/// The log's operation for an append request (a malformed payload is the caller's 400).
fn append_op(stream: String, req: AppendRequest) -> Result<Op, ApiError> {
    Ok(Op::Append {
        payload: req.payload_bytes().map_err(ApiError::bad_request)?,
        headers: req.header_bytes().map_err(ApiError::bad_request)?,
        stream,
        subject: req.subject,
        ttl_ms: req.ttl_ms,
    })
}

fn seq_of(r: Response) -> Result<u64, ApiError> {
    match r {
        Response::Seq(seq) => Ok(seq),
        other => Err(ApiError::internal(format!("unexpected response {other:?}"))),
    }
}

async fn append(
    State(app): State<App>,
    P(stream): P<String>,
    JsonBody(req): JsonBody<AppendRequest>,
) -> R<SeqReply> {
    let seq = seq_of(app.write(append_op(stream, req)?).await?)?;
    Ok(Json(SeqReply { seq }))
}

/// Several appends in one request: all are decoded before any is proposed (a malformed one
/// fails the request and stores nothing); then each gets its own result.
async fn append_batch(
    State(app): State<App>,
    P(stream): P<String>,
    JsonBody(req): JsonBody<AppendBatch>,
) -> R<AppendBatchReply> {
    let n = req.messages.len();
    if n == 0 || n > MAX_BATCH {
        let m = format!("a batch holds 1 to {MAX_BATCH} messages, not {n}");
        return Err(ApiError::bad_request(m));
    }
    let ops = (req.messages.into_iter())
        .map(|m| append_op(stream.clone(), m))
        .collect::<Result<Vec<_>, _>>()?;
    let results = (app.write_all(ops).await?.into_iter())
        .map(|r| match r.and_then(seq_of) {
            Ok(seq) => BatchResult {
                seq: Some(seq),
                error: None,
                status: None,
            },
            Err(e) => {
                let (status, info) = e.into_parts();
                BatchResult {
                    seq: None,
                    error: Some(info),
                    status: Some(status.as_u16()),
                }
            }
        })
        .collect();
    Ok(Json(AppendBatchReply { results }))
}

async fn get_msg(State(app): State<App>, P((name, seq)): P<(String, u64)>) -> R<Msg> {
    let m = app.read(name, move |_, s| s.get(seq).map_err(ApiError::from_store));
    Ok(Json(msg_of(m.await?)))
}

async fn delete_msg(State(app): State<App>, P((stream, seq)): P<(String, u64)>) -> R<RemovedReply> {
    removed(app.write(Op::Delete { stream, seq }).await?)
}

/// `?from=&filter=` of next and prev.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scan {
    #[serde(default)]
    from: u64,
    #[serde(default = "all")]
    filter: String,
}

fn all() -> String {
    ">".to_string()
}

fn found(m: Option<StoredMsg>) -> Result<Msg, ApiError> {
    m.map(msg_of)
        .ok_or_else(|| ApiError::no_message("no matching message"))
}

async fn next(State(app): State<App>, P(name): P<String>, Q(q): Q<Scan>) -> R<Msg> {
    let m = app.read(name, move |_, s| {
        let m = s.next_matching(&q.filter, q.from.max(1));
        m.map_err(ApiError::from_store)
    });
    Ok(Json(found(m.await?)?))
}

/// `?from=&filter=` of prev: no `from` is from the end (`from=0` is at or before 0: none).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrevScan {
    from: Option<u64>,
    #[serde(default = "all")]
    filter: String,
}

async fn prev(State(app): State<App>, P(name): P<String>, Q(q): Q<PrevScan>) -> R<Msg> {
    let m = app.read(name, move |_, s| {
        let from = q.from.unwrap_or(u64::MAX);
        s.prev_matching(&q.filter, from)
            .map_err(ApiError::from_store)
    });
    Ok(Json(found(m.await?)?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Last {
    subject: String,
}

async fn last(State(app): State<App>, P(name): P<String>, Q(q): Q<Last>) -> R<Msg> {
    let m = app.read(name, move |_, s| {
        s.last_for_subject(&q.subject).map_err(ApiError::from_store)
    });
    Ok(Json(found(m.await?)?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Filter {
    #[serde(default = "all")]
    filter: String,
}

async fn subjects(State(app): State<App>, P(name): P<String>, Q(q): Q<Filter>) -> R<SubjectsReply> {
    let m = app.read(name, move |_, s| {
        s.subjects_state(&q.filter).map_err(ApiError::from_store)
    });
    Ok(Json(SubjectsReply { subjects: m.await? }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Pending {
    #[serde(default)]
    from: u64,
    #[serde(default = "all")]
    filter: String,
    #[serde(default)]
    last_per_subject: bool,
}

async fn pending(State(app): State<App>, P(name): P<String>, Q(q): Q<Pending>) -> R<PendingReply> {
    let (pending, valid_through) = app
        .read(name, move |_, s| {
            let r = s.num_pending(q.from.max(1), &q.filter, q.last_per_subject);
            r.map_err(ApiError::from_store)
        })
        .await?;
    Ok(Json(PendingReply {
        pending,
        valid_through,
    }))
}

async fn purge(
    State(app): State<App>,
    P(stream): P<String>,
    JsonBody(req): JsonBody<PurgeRequest>,
) -> R<RemovedReply> {
    let op = if req == PurgeRequest::default() {
        Op::Purge { stream }
    } else {
        Op::PurgeEx {
            stream,
            filter: req.filter.unwrap_or_else(all),
            up_to_seq: req.up_to_seq.unwrap_or(0),
            keep: req.keep.unwrap_or(0),
        }
    };
    removed(app.write(op).await?)
}

async fn compact(
    State(app): State<App>,
    P(stream): P<String>,
    JsonBody(req): JsonBody<CompactRequest>,
) -> R<RemovedReply> {
    let op = Op::Compact {
        stream,
        up_to: req.up_to,
    };
    removed(app.write(op).await?)
}

async fn truncate(
    State(app): State<App>,
    P(stream): P<String>,
    JsonBody(req): JsonBody<TruncateRequest>,
) -> R<RemovedReply> {
    removed(
        app.write(Op::Truncate {
            stream,
            seq: req.seq,
        })
        .await?,
    )
}

async fn expire(State(app): State<App>, P(stream): P<String>) -> R<RemovedReply> {
    removed(app.write(Op::Expire { stream }).await?)
}

async fn skip(
    State(app): State<App>,
    P(stream): P<String>,
    JsonBody(req): JsonBody<SkipRequest>,
) -> R<LastSeqReply> {
    let op = Op::Skip {
        stream,
        count: req.count,
    };
    last_seq(app.write(op).await?)
}
