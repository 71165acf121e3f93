//! Crash-check any Linux program from its syscall trace.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
pub mod ops;
pub mod replay;
pub mod strace;

pub use error::Error;
pub mod capture;
pub mod check;
pub mod session;
