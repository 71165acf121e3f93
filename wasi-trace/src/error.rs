//! The crate's error type.

use std::fmt;

/// What went wrong running or checking a WASI program.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The program is not a WebAssembly component, or wasmtime could not compile or link it.
    Program(String),
    /// The program stopped with a trap (e.g. a call this host refuses, a crash of the guest,
    /// or the time limit): what wasmtime said.
    Trap(String),
    /// The capture's check failed (replay, exploration, or a checker that could not run).
    Check(seqstore_trace::Error),
    /// Reading a program or an image from disk.
    Io(String, std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Program(m) => write!(f, "WASI program: {m}"),
            Error::Trap(m) => write!(f, "the WASI program trapped: {m}"),
            Error::Check(e) => write!(f, "{e}"),
            Error::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Check(e) => Some(e),
            Error::Io(_, e) => Some(e),
            _ => None,
        }
    }
}

impl From<seqstore_trace::Error> for Error {
    fn from(e: seqstore_trace::Error) -> Self {
        Error::Check(e)
    }
}
