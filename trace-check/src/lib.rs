//! Crash-check any Linux program from its syscall trace.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
pub mod ops;
pub mod replay;
pub mod strace;

pub use error::Error;

/// The first `max` characters of `s`, with `…` if cut (for one-line reports).
pub fn error_shorten(s: &str, max: usize) -> String {
    error::shorten(s, max)
}
pub mod capture;
pub mod check;
pub mod fuzz;
pub mod session;
