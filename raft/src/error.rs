//! The crate's error type, and its mapping to openraft's `StorageError`.

use openraft::{AnyError, ErrorSubject, ErrorVerb, StorageError, StorageIOError};
use std::io;

/// What can go wrong in the log storage or the state machine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The stream store failed (I/O, corruption it found, a poisoned store after a failed fsync).
    #[error("store: {0}")]
    Store(#[from] seqstore_core::Error),
    /// A direct filesystem call (the metadata file, the snapshot file) failed.
    #[error("{op} {path:?}: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The file.
        path: String,
        /// What the filesystem said.
        source: io::Error,
    },
    /// A record or file does not decode: wrong magic, version, checksum or body.
    #[error("corrupt {what}: {reason}")]
    Corrupt {
        /// Which record or file.
        what: String,
        /// Why it does not decode.
        reason: String,
    },
    /// The log is not contiguous where openraft requires it (an append that does not follow the
    /// last entry, or a hole found on open).
    #[error("log not contiguous: {0}")]
    Gap(String),
    /// The blocking task running the I/O panicked or was cancelled.
    #[error("blocking task failed: {0}")]
    Join(String),
    /// A purge of the log waited for the state machine's durable snapshot to cover it, and
    /// installing that snapshot failed (or the state machine is gone): the log is not purged
    /// (see `SnapshotFloor`).
    #[error("purge up to {upto}: {reason}")]
    SnapshotNotInstalled {
        /// The purge's last index.
        upto: u64,
        /// Why the snapshot does not cover it.
        reason: &'static str,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(what: impl Into<String>, reason: impl ToString) -> Self {
        Error::Corrupt {
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    /// As an `io::Error` (what `LogFlushed::log_io_completed` takes).
    pub fn to_io(&self) -> io::Error {
        io::Error::other(self.to_string())
    }

    /// As openraft's `StorageError`, naming what was being done.
    pub fn to_storage(&self, subject: ErrorSubject<u64>, verb: ErrorVerb) -> StorageError<u64> {
        StorageError::IO {
            source: StorageIOError::new(subject, verb, AnyError::new(self)),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
