//! seqstore-server: the replicated stream store (seqstore-raft) served over HTTP/JSON with
//! axum, one process per node. The client API (`/streams`), the admin calls (`/admin`), a
//! replica's dump (`/debug/dump`) and raft's own RPCs (`/raft`, postcard bodies) share one
//! listener and one bearer token. See the crate README for the endpoints, the guarantees and
//! what is not protected.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod guard;
pub mod http;
pub mod net;
pub mod node;

pub use error::Error;
pub use node::{parse_peers, serve, serve_on_thread, start, NodeOpts, DEFAULT_LISTEN};
