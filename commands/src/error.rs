//! The errors of the store commands. Each variant's `Display` says its own part once and
//! leaves the cause to `source()` (print the chain with [`report`], or anyhow's `{:#}`).

use std::error::Error as StdError;
use std::fmt;
use std::path::PathBuf;

/// A boxed error of a store that is not store-core's own (the wasm host's, a cluster's).
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Why a store command failed (exit code [`crate::EXIT_FAILED`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The store refused or failed the operation.
    Store(seqstore_core::Error),
    /// A backend other than `Store<F>` failed (its error as it is).
    Backend(BoxError),
    /// The directory could not be opened as the store's root (host-fs names it).
    Root(std::io::Error),
    /// Opening the store (recovery) failed.
    Recover {
        dir: PathBuf,
        /// Whether the store runs in the wasm guest (the CLI's `--guest`).
        guest: bool,
        source: BoxError,
    },
    /// The store stayed in use by another process for all of `--wait` (`source`: the
    /// lock's refusal, naming the holder).
    Busy {
        dir: PathBuf,
        waited: std::time::Duration,
        source: BoxError,
    },
    /// `verify` could not read the directory.
    Verify {
        dir: PathBuf,
        source: seqstore_core::Error,
    },
    /// A command other than `append` on a directory that is missing or empty.
    NoStore { dir: PathBuf, why: &'static str },
    /// A non-empty directory that is not a store: never written to.
    NotAStore { dir: PathBuf },
    /// Listing or creating the store directory failed.
    Dir {
        what: &'static str,
        dir: PathBuf,
        source: std::io::Error,
    },
    /// Reading an append's payload from standard input failed.
    Stdin(std::io::Error),
    /// A read found no message (`what` says which: `with subject "a"`, …).
    NoMessage { what: String },
    /// The `--key-file` could not be read or is not a key.
    Key { path: PathBuf, why: String },
}

/// The commands' result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // transparent: the inner error says it, and its source is ours
            Error::Store(e) => e.fmt(f),
            Error::Backend(e) => e.fmt(f),
            Error::Root(e) => e.fmt(f),
            Error::Recover { dir, guest, .. } => {
                let guest = if *guest { " (guest)" } else { "" };
                write!(f, "recovering the store in {}{guest}", dir.display())
            }
            Error::Busy { dir, waited, .. } => write!(
                f,
                "the store in {} stayed in use for {:.1} s (--wait)",
                dir.display(),
                waited.as_secs_f64()
            ),
            Error::Verify { dir, .. } => write!(f, "verifying {}", dir.display()),
            Error::NoStore { dir, why } => write!(f, "no store at {}: {why}", dir.display()),
            Error::NotAStore { dir } => write!(
                f,
                "{} is not a seqstore directory (no msgs/) and is not empty: refusing to use it",
                dir.display()
            ),
            Error::Dir { what, dir, .. } => write!(f, "{what} {}", dir.display()),
            Error::Stdin(_) => f.write_str("reading the payload from standard input"),
            Error::NoMessage { what } => write!(f, "no message {what}"),
            Error::Key { path, why } => write!(f, "key file {}: {why}", path.display()),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Store(e) => e.source(),
            Error::Backend(e) => e.source(),
            Error::Root(e) => e.source(),
            Error::Recover { source, .. } | Error::Busy { source, .. } => Some(source.as_ref()),
            Error::Verify { source, .. } => Some(source),
            Error::Dir { source, .. } | Error::Stdin(source) => Some(source),
            Error::NoStore { .. }
            | Error::NotAStore { .. }
            | Error::NoMessage { .. }
            | Error::Key { .. } => None,
        }
    }
}

impl From<seqstore_core::Error> for Error {
    fn from(e: seqstore_core::Error) -> Self {
        Error::Store(e)
    }
}

/// `e` and its sources, joined by ": " (what anyhow's `{:#}` prints).
pub fn report(e: &(dyn StdError + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
