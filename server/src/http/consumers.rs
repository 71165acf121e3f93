//! `/streams/{name}/consumers`: durable consumers, replicated. Adds, deletes, pulls and
//! acks are log entries (a pull is decided by the state machine at the log's time, so every
//! replica records the same deliveries); info and the list are linearizable reads.

use super::error::ApiError;
use super::extract::{JsonBody, P};
use super::App;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use seqstore_client::wire::{
    AckRequest, ConsumerConfig, ConsumerInfo, ConsumerList, Deliveries, Delivery, Msg, NextRequest,
};
use seqstore_raft::{Op, Response};

type R<T> = Result<Json<T>, ApiError>;

/// The routes.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/streams/{name}/consumers", get(list))
        .route(
            "/streams/{name}/consumers/{consumer}",
            get(info).put(add).delete(delete),
        )
        .route("/streams/{name}/consumers/{consumer}/next", post(next))
        .route("/streams/{name}/consumers/{consumer}/ack", post(ack))
}

fn ok(r: Response) -> R<serde_json::Value> {
    match r {
        Response::Done => Ok(Json(serde_json::json!({ "ok": true }))),
        other => Err(ApiError::internal(format!("unexpected response {other:?}"))),
    }
}

async fn add(
    State(app): State<App>,
    P((stream, name)): P<(String, String)>,
    JsonBody(c): JsonBody<ConsumerConfig>,
) -> R<serde_json::Value> {
    let config = c;
    ok(app
        .write(Op::ConsumerAdd {
            stream,
            name,
            config,
        })
        .await?)
}

async fn delete(
    State(app): State<App>,
    P((stream, name)): P<(String, String)>,
) -> R<serde_json::Value> {
    ok(app.write(Op::ConsumerDelete { stream, name }).await?)
}

async fn next(
    State(app): State<App>,
    P((stream, name)): P<(String, String)>,
    JsonBody(req): JsonBody<NextRequest>,
) -> R<Deliveries> {
    let op = Op::ConsumerNext {
        stream,
        name,
        filter: req.filter.unwrap_or_else(|| ">".into()),
        batch: req.batch,
        ack_wait_ms: req.ack_wait_ms,
    };
    match app.write(op).await? {
        Response::Delivered(ds) => Ok(Json(Deliveries {
            messages: ds.into_iter().map(delivery).collect(),
        })),
        other => Err(ApiError::internal(format!("unexpected response {other:?}"))),
    }
}

fn delivery(d: seqstore_raft::Delivery) -> Delivery {
    Delivery {
        consumer_seq: d.consumer_seq,
        delivery_count: d.delivery_count,
        message: Msg::new(d.stream_seq, d.ts, d.subject, &d.headers, &d.payload),
    }
}

async fn ack(
    State(app): State<App>,
    P((stream, name)): P<(String, String)>,
    JsonBody(req): JsonBody<AckRequest>,
) -> R<serde_json::Value> {
    let op = Op::ConsumerAck {
        stream,
        name,
        stream_seq: req.stream_seq,
    };
    ok(app.write(op).await?)
}

async fn info(State(app): State<App>, P((stream, name)): P<(String, String)>) -> R<ConsumerInfo> {
    app.linearize().await?;
    let (s, n) = (stream.clone(), name.clone());
    let found = app
        .blocking(move |c| (c.consumer_names(&s).is_some(), c.consumer_info(&s, &n)))
        .await?;
    match found {
        (false, _) => Err(ApiError::unknown_stream(&stream)),
        (true, Ok(Some(i))) => Ok(Json(info_of(name, i))),
        (true, Ok(None)) => Err(ApiError::from(seqstore_raft::ApplyError::UnknownConsumer {
            stream,
            name,
        })),
        (true, Err(e)) => Err(ApiError::internal(e.to_string())),
    }
}

/// The wire form of a consumer's config and state.
pub fn info_of(name: String, i: seqstore_raft::ConsumerInfo) -> ConsumerInfo {
    ConsumerInfo {
        name,
        config: i.config,
        delivered: i.delivered,
        ack_floor: i.ack_floor,
        // (one type: store-core's, which both the log and the client re-export)
        pending: i.pending,
    }
}

async fn list(State(app): State<App>, P(stream): P<String>) -> R<ConsumerList> {
    app.linearize().await?;
    let s = stream.clone();
    match app.blocking(move |c| c.consumer_names(&s)).await? {
        Some(consumers) => Ok(Json(ConsumerList { consumers })),
        None => Err(ApiError::unknown_stream(&stream)),
    }
}
