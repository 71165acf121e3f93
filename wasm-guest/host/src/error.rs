//! The host's typed error.

use std::fmt;
use std::time::Duration;

/// What can go wrong running a store in the guest. `#[non_exhaustive]`: match with a `_` arm.
///
/// [`Error::Store`] is the store's own error, exactly as the native `Store` would return it.
/// Every other variant is about the sandbox; all of those except [`Error::Setup`] mean the
/// instance trapped and is now unusable (every later call returns [`Error::Dead`]): drop the
/// [`GuestStore`](crate::GuestStore) and open a new one on the same filesystem, which recovers
/// from what is on disk like a restarted process.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The store in the guest returned an error; its variant is store-core's.
    Store(seqstore_core::Error),
    /// The guest tried to grow its memory past the cap ([`GuestOptions::max_memory`]).
    ///
    /// [`GuestOptions::max_memory`]: crate::GuestOptions::max_memory
    MemoryLimit {
        /// The cap, in bytes.
        limit: usize,
        /// The size the guest asked for.
        requested: usize,
    },
    /// A call ran longer than [`GuestOptions::call_timeout`] and was interrupted.
    ///
    /// [`GuestOptions::call_timeout`]: crate::GuestOptions::call_timeout
    Timeout {
        /// The deadline that was exceeded.
        limit: Duration,
    },
    /// The guest trapped for another reason (a panic in the guest, a bad handle, a failure of
    /// the host's filesystem glue). The message includes wasmtime's backtrace and the end of
    /// what the guest wrote to stderr (a panic message, normally).
    Trap(String),
    /// An earlier call trapped; this instance cannot be used any more. Reopen.
    Dead,
    /// The component could not be compiled, linked or instantiated, or the preopened
    /// directory could not be opened.
    Setup(String),
}

impl Error {
    /// The store-core error, if this is one.
    pub fn store_error(&self) -> Option<&seqstore_core::Error> {
        match self {
            Error::Store(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the instance is unusable after this error (a trap or a limit): the
    /// [`GuestStore`](crate::GuestStore) must be reopened.
    pub fn is_trap(&self) -> bool {
        matches!(
            self,
            Error::MemoryLimit { .. } | Error::Timeout { .. } | Error::Trap(_) | Error::Dead
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Store(e) => e.fmt(f),
            Error::MemoryLimit { limit, requested } => write!(
                f,
                "guest stopped: it asked for {requested} bytes of memory, over its cap of {limit} \
                 bytes (reopen the store)"
            ),
            Error::Timeout { limit } => write!(
                f,
                "guest stopped: a call ran past its deadline of {limit:?} (reopen the store)"
            ),
            Error::Trap(m) => write!(f, "guest trapped (reopen the store): {m}"),
            Error::Dead => write!(
                f,
                "guest store unusable after an earlier trap: reopen it to recover from disk"
            ),
            Error::Setup(m) => write!(f, "cannot start the guest: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // Display already shows the store error itself; its source is the next link (an
        // anyhow chain would otherwise print the same text twice)
        match self {
            Error::Store(e) => std::error::Error::source(e),
            _ => None,
        }
    }
}

impl From<seqstore_core::Error> for Error {
    fn from(e: seqstore_core::Error) -> Self {
        Error::Store(e)
    }
}

/// The host's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
