//! `/raft/{append,vote,snapshot}`: openraft's RPCs from the leader (or a candidate).
//!
//! Bodies are postcard, both ways: the request, and the handler's `Result` (openraft's
//! error included). Why not JSON: entries and snapshot chunks are byte strings, which JSON
//! spells as arrays of numbers (about 3.5 bytes per byte), and postcard is already the log's
//! encoding on disk, with openraft's serde derives.

use super::error::ApiError;
use super::extract::body_bytes;
use super::App;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The routes.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/raft/append", post(append))
        .route("/raft/vote", post(vote))
        .route("/raft/snapshot", post(snapshot))
}

async fn decode<T: DeserializeOwned>(req: Request) -> Result<T, ApiError> {
    let b = body_bytes(req, &()).await?;
    postcard::from_bytes(&b).map_err(|e| ApiError::bad_request(format!("postcard body: {e}")))
}

fn encode<T: Serialize>(r: &T) -> Result<impl IntoResponse, ApiError> {
    let b = postcard::to_stdvec(r).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], b))
}

async fn append(State(app): State<App>, req: Request) -> Result<impl IntoResponse, ApiError> {
    let rpc = decode(req).await?;
    encode(&app.raft.append_entries(rpc).await)
}

async fn vote(State(app): State<App>, req: Request) -> Result<impl IntoResponse, ApiError> {
    let rpc = decode(req).await?;
    encode(&seqstore_raft::gate::vote(&app.raft, &app.log, rpc).await)
}

async fn snapshot(State(app): State<App>, req: Request) -> Result<impl IntoResponse, ApiError> {
    let rpc = decode(req).await?;
    encode(&app.raft.install_snapshot(rpc).await)
}
