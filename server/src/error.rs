//! The library's error: why a node could not start or stopped serving.

use std::path::PathBuf;

/// What can stop a node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The options do not make a node (an id missing from `--peers`, a bad peer list).
    #[error("bad options: {0}")]
    Options(String),
    /// The listening socket could not be bound.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The node's directory could not be opened.
    #[error("open {path:?}: {message}")]
    Open {
        /// The directory.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The amnesia guard refused the start: see the crate README.
    #[error("refusing to start: {0}")]
    Amnesia(String),
    /// openraft failed (starting, initializing).
    #[error("raft: {0}")]
    Raft(String),
    /// The HTTP server failed.
    #[error("serve: {0}")]
    Serve(std::io::Error),
}
