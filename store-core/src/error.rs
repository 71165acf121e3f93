//! The store's typed error.

use std::fmt;
use std::io;

/// Everything that can go wrong in the store. `#[non_exhaustive]`: match with a `_` arm.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The filesystem failed. `op` names the operation, `path` the file or directory.
    Io {
        /// The `Fs` operation that failed (`"open"`, `"sync_data"`, ...).
        op: &'static str,
        /// The path it was applied to.
        path: String,
        /// What the filesystem said.
        source: io::Error,
    },
    /// A file is damaged in a way recovery may not repair on its own (see `RecoveryMode`).
    Corrupt {
        /// The file, relative to the store root.
        file: String,
        /// Byte offset of the damage.
        offset: u64,
        /// What is wrong there.
        reason: String,
    },
    /// A subject or filter is malformed.
    InvalidSubject {
        /// The offending subject (cut to 64 bytes).
        subject: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A subject, header block or payload is larger than the configured maximum.
    TooLarge {
        /// Which part.
        what: &'static str,
        /// Its size.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// No message with this sequence (never written, deleted, or purged).
    NotFound {
        /// The sequence asked for.
        seq: u64,
    },
    /// An earlier fsync failed. The kernel may have dropped the data it was asked to persist
    /// and a retried fsync would lie ("fsyncgate"), so the store refuses all writes until it is
    /// reopened and recovers from what is really durable.
    Poisoned,
    /// A stream limit refused the write (`discard: New`).
    LimitExceeded {
        /// Which limit.
        limit: &'static str,
    },
    /// An argument is out of range (e.g. truncating below the first sequence).
    InvalidArgument(String),
    /// The configuration is invalid.
    InvalidConfig(String),
    /// The store was closed.
    Closed,
    /// A read would return more results than the caller allowed (`Store::multi_last_seqs`'s
    /// `max_count`, NATS's `ErrTooManyResults`).
    TooManyResults {
        /// The most the caller allowed.
        max: u64,
    },
    /// A snapshot archive (`Store::snapshot`, `restore`) is truncated, damaged, of another
    /// format version, or does not restore to the state its manifest records. Restore has
    /// removed what it wrote.
    BadSnapshot {
        /// What is wrong with it.
        reason: String,
    },
    /// `restore` refused a target directory that is not empty.
    NotEmpty {
        /// The first entry found there.
        entry: String,
    },
    /// A replica append or a skip named a sequence other than the next one (NATS's
    /// `ErrSequenceMismatch`): at or below the last sequence it would reuse one, above
    /// `last + 1` it would leave an unexplained gap (skip the sequences first).
    SequenceMismatch {
        /// The sequence asked for.
        seq: u64,
        /// The stream's last sequence.
        last_seq: u64,
    },
    /// No consumer of that name.
    ConsumerNotFound {
        /// The name asked for.
        name: String,
    },
    /// A consumer of that name exists with another configuration.
    ConsumerExists {
        /// The name.
        name: String,
    },
    /// A consumer name that is not a safe file name / NATS durable name.
    InvalidConsumerName {
        /// The name (cut to 64 characters).
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// An ack (or a redelivery) of a stream sequence the consumer has not delivered or has
    /// already acknowledged (NATS `ErrStoreMsgNotFound` from `UpdateAcks`).
    NotPending {
        /// The consumer.
        name: String,
        /// The stream sequence.
        seq: u64,
    },
    /// A delivery whose consumer or stream sequence does not move forward.
    DeliveredBackwards {
        /// The consumer.
        name: String,
        /// The consumer sequence given.
        dseq: u64,
        /// The stream sequence given.
        sseq: u64,
        /// The last delivery (consumer, stream).
        delivered: (u64, u64),
    },
    /// A file of the store was written under another key (or cipher) than the one it is
    /// opened with, or the store is encrypted and opened without one (or the reverse). Nothing
    /// was decrypted with the wrong key.
    WrongKey {
        /// The file, relative to the store root.
        file: String,
        /// What the key check found.
        reason: String,
    },
    /// An ack or a redelivery for a consumer whose ack policy is `None` (NATS
    /// `ErrNoAckPolicy`).
    NoAckPolicy {
        /// The consumer.
        name: String,
    },
    /// Another process (or another `Store` in this one) has the store open: one process owns
    /// a store from open to close ([`crate::Fs::lock`]). Nothing was read or changed. Threads
    /// of one process share a store through [`crate::SharedStore`].
    Locked {
        /// The lock, as the filesystem names it (host-fs: the lock file's path).
        path: String,
        /// The holder's process id, where known.
        pid: Option<u32>,
        /// Who holds it; where a lock can outlive its holder, how to clear it.
        detail: String,
    },
}

impl Error {
    /// The store's error for a failure to take its lock `name` ([`crate::Fs::lock`]).
    pub(crate) fn lock(name: &str, e: crate::fs::LockError) -> Self {
        match e {
            crate::fs::LockError::Held(h) => Error::Locked {
                path: h.path,
                pid: h.pid,
                detail: h.detail,
            },
            crate::fs::LockError::Io(e) => Error::io("lock", name, e),
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<String>, source: io::Error) -> Self {
        // what the encryption layer found is not a failure of the medium
        if let Some(fault) = crate::layer::fault_of(&source) {
            let file = path.into();
            return match fault {
                crate::layer::Fault::WrongKey(reason) => Error::WrongKey {
                    file,
                    reason: reason.clone(),
                },
                crate::layer::Fault::NotLayered => Error::WrongKey {
                    file,
                    reason: fault.to_string(),
                },
                crate::layer::Fault::Tampered { offset, reason } => Error::Corrupt {
                    file,
                    offset: *offset,
                    reason: format!("encrypted file: {reason}"),
                },
            };
        }
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
    pub(crate) fn corrupt(file: impl Into<String>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }
    /// The `io::ErrorKind` of an `Io` error, if it is one.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Error::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => write!(f, "{op} {path:?}: {source}"),
            Error::Corrupt {
                file,
                offset,
                reason,
            } => write!(f, "corrupt {file} at offset {offset}: {reason}"),
            Error::InvalidSubject { subject, reason } => {
                write!(f, "invalid subject {subject:?}: {reason}")
            }
            Error::TooLarge { what, len, max } => {
                write!(f, "{what} too large: {len} bytes (max {max})")
            }
            Error::NotFound { seq } => write!(f, "no message with sequence {seq}"),
            Error::Poisoned => write!(
                f,
                "store poisoned by a failed fsync: reopen it to recover from what is durable"
            ),
            Error::LimitExceeded { limit } => write!(f, "stream limit {limit} reached"),
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::InvalidConfig(s) => write!(f, "invalid config: {s}"),
            Error::Closed => write!(f, "store is closed"),
            Error::TooManyResults { max } => write!(f, "more than {max} results"),
            Error::BadSnapshot { reason } => write!(f, "bad snapshot: {reason}"),
            Error::NotEmpty { entry } => {
                write!(f, "restore target is not empty (it holds {entry:?})")
            }
            Error::SequenceMismatch { seq, last_seq } => write!(
                f,
                "sequence {seq} is not the next one: the last sequence is {last_seq}, the next {}",
                last_seq.saturating_add(1)
            ),
            Error::ConsumerNotFound { name } => write!(f, "no consumer {name:?}"),
            Error::ConsumerExists { name } => {
                write!(f, "consumer {name:?} exists with another configuration")
            }
            Error::InvalidConsumerName { name, reason } => {
                write!(f, "invalid consumer name {name:?}: {reason}")
            }
            Error::NotPending { name, seq } => write!(
                f,
                "consumer {name:?}: stream sequence {seq} is not pending (never delivered or already acknowledged)"
            ),
            Error::DeliveredBackwards {
                name,
                dseq,
                sseq,
                delivered,
            } => write!(
                f,
                "consumer {name:?}: delivery ({dseq}, {sseq}) does not move past the last one {delivered:?}"
            ),
            Error::WrongKey { file, reason } => write!(f, "wrong key for {file}: {reason}"),
            Error::NoAckPolicy { name } => {
                write!(f, "consumer {name:?} has ack policy none: nothing to ack or redeliver")
            }
            Error::Locked { path, pid, detail } => {
                write!(f, "the store is in use: {path} is locked")?;
                if let Some(pid) = pid {
                    write!(f, " by process {pid}")?;
                }
                if !detail.is_empty() {
                    write!(f, " ({detail})")?;
                }
                Ok(())
            }
        }
    }
}

// `Io`'s message ends with its `io::Error`'s, so its source is what that message does not say
// (the io error's own source, as `io::Error` does for an error it wraps): a chain printer
// (anyhow's `{:#}`) then says each part once. The io error itself is `Error::Io::source`
// (kind: `Error::io_kind`).
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => source.source(),
            _ => None,
        }
    }
}

/// The store's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// What a chain printer (anyhow's `{:#}`) prints: each message, then its sources'.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut next = e.source();
        while let Some(s) = next {
            out = format!("{out}: {s}");
            next = s.source();
        }
        out
    }

    #[derive(Debug)]
    struct Outer(io::Error);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("outer")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_io_error_says_each_part_once_in_a_chain() {
        let plain = Error::io("open", "msgs/1.blk", io::Error::other("refused: why"));
        assert_eq!(chain(&plain), "open \"msgs/1.blk\": refused: why");
        // an io error wrapping an error with a source: that source once, after the message
        let inner = io::Error::new(io::ErrorKind::NotFound, "inner");
        let wrapped = Error::io("open", "x", io::Error::other(Outer(inner)));
        assert_eq!(chain(&wrapped), "open \"x\": outer: inner");
        assert_eq!(wrapped.io_kind(), Some(io::ErrorKind::Other));
    }
}
