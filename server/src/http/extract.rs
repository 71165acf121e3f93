//! Extractors whose rejections are typed JSON errors (axum's own answer in plain text):
//! a body over the limit is 413 `too_large`, malformed JSON, a bad path or query 400.

use super::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use seqstore_client::wire::kind;
use serde::de::DeserializeOwned;

/// The request body, read whole within the route's `DefaultBodyLimit`.
pub async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(e.status(), kind::TOO_LARGE, e.body_text())
        } else {
            ApiError::new(e.status(), kind::BAD_REQUEST, e.body_text())
        }
    })
}

/// A JSON body; an empty body reads as `{}`.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let b = body_bytes(req, state).await?;
        let b: &[u8] = if b.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &b
        };
        serde_json::from_slice(b)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
    }
}

/// Path parameters.
pub struct P<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for P<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(t)) => Ok(P(t)),
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
    }
}

/// Query parameters.
pub struct Q<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(t)) => Ok(Q(t)),
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
    }
}
