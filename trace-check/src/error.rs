//! The library's typed errors. Each names the trace line (1-based) and the call when it comes
//! from a trace, so that a user can find what could not be modelled.

use std::fmt;

/// Everything that can go wrong between a trace and a report.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A line that is not strace output this parser understands.
    Parse {
        /// 1-based trace line.
        line: usize,
        /// What is wrong.
        msg: String,
        /// The line (shortened).
        text: String,
    },
    /// A call on the checked directory that fault-fs cannot model (a writable shared `mmap`,
    /// `O_DIRECT`, io_uring, a symlink, a write buffer strace truncated, ...).
    Unsupported {
        /// 1-based trace line.
        line: usize,
        /// The call's name.
        syscall: String,
        /// Why it cannot be modelled.
        why: String,
        /// The call (shortened).
        text: String,
    },
    /// The replay into fault-fs failed where the traced call succeeded: the capture missed
    /// something (or the directory changed between the snapshot and the run).
    Replay {
        /// 1-based trace line.
        line: usize,
        /// The call.
        text: String,
        /// fault-fs's error.
        error: String,
    },
    /// `strace` is not installed (Debian: `apt-get install strace`).
    StraceMissing,
    /// The checker could not be run (not a verdict: spawn failure, exit 126/127).
    Checker(String),
    /// An I/O error outside the trace (snapshot, temporary directories, files).
    Io(String),
    /// Bad arguments (e.g. an unknown model name).
    Usage(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Parse { line, msg, text } => {
                write!(f, "trace line {line}: cannot parse ({msg}): {text}")
            }
            Error::Unsupported {
                line,
                syscall,
                why,
                text,
            } => write!(
                f,
                "trace line {line}: {syscall} cannot be modelled: {why}: {text}"
            ),
            Error::Replay { line, text, error } => write!(
                f,
                "trace line {line}: the replay failed where the program succeeded ({error}): {text}"
            ),
            Error::StraceMissing => write!(
                f,
                "strace is not installed: install Debian's strace (apt-get install -y strace)"
            ),
            Error::Checker(m) => write!(f, "the checker could not run: {m}"),
            Error::Io(m) => write!(f, "{m}"),
            Error::Usage(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}

/// Wraps an I/O error with what was being done.
pub(crate) fn io(what: impl fmt::Display, e: std::io::Error) -> Error {
    Error::Io(format!("{what}: {e}"))
}

/// The first `max` characters of `s` (on a character boundary), with `…` if cut.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}
