//! One HTTP/1.1 exchange with a node, bounded in time, with the bearer token. Shared by the
//! client and by the server's raft network (the same pooled connections, the same errors).

use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Duration;

/// Why an exchange failed. The distinction matters to writes: after [`SendError::Connect`]
/// the request was never sent (safe to send elsewhere); after the others it may have been
/// received and acted on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// No connection could be made: the request was not sent.
    #[error("connect to {url}: {message}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
    /// No complete answer within the time limit.
    #[error("{url}: no answer within {limit:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// The limit.
        limit: Duration,
    },
    /// The connection failed after the request was (perhaps) sent, or the URL is invalid.
    #[error("{url}: {message}")]
    Broken {
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
}

/// An HTTP/1.1 client with a connection pool and an optional bearer token.
#[derive(Clone, Debug)]
pub struct Transport {
    http: Client<HttpConnector, Full<Bytes>>,
    token: Option<Arc<str>>,
}

impl Transport {
    /// A transport that sends `Authorization: Bearer <token>` when a token is given.
    pub fn new(token: Option<String>) -> Self {
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        conn.set_connect_timeout(Some(Duration::from_secs(1)));
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(conn);
        Transport {
            http,
            token: token.map(Arc::from),
        }
    }

    /// Sends one request and reads the whole answer, at most `limit` in all.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        content_type: &str,
        body: Bytes,
        limit: Duration,
    ) -> Result<(StatusCode, Bytes), SendError> {
        let broken = |message: String| SendError::Broken {
            url: url.to_string(),
            message,
        };
        let mut req = Request::builder()
            .method(method)
            .uri(url)
            .header(header::CONTENT_TYPE, content_type);
        if let Some(t) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| broken(e.to_string()))?;
        let exchange = async {
            let resp = self.http.request(req).await.map_err(|e| {
                if e.is_connect() {
                    SendError::Connect {
                        url: url.to_string(),
                        message: e.to_string(),
                    }
                } else {
                    broken(e.to_string())
                }
            })?;
            let status = resp.status();
            let body = resp.into_body().collect().await;
            let body = body.map_err(|e| broken(e.to_string()))?.to_bytes();
            Ok((status, body))
        };
        match tokio::time::timeout(limit, exchange).await {
            Ok(r) => r,
            Err(_) => Err(SendError::Timeout {
                url: url.to_string(),
                limit,
            }),
        }
    }
}
