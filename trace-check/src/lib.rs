//! Crash-check any Linux program from its syscall trace.
//!
//! A capture turns what a program did to one directory into an [`ops::Capture`] (today:
//! [`strace`], parsing `strace -f -y` output; [`capture`] runs the program and keeps a work
//! directory). Everything after only sees that list: [`replay`] applies it to a
//! [`seqstore_fault_fs::FaultFs`], [`session`] explores every crash point with fault-fs's explorer and
//! runs a [`check::Checker`] (e.g. a shell command on the image materialized into a directory)
//! on every distinct image, `jobs` at a time, and reports the first violation with the traced
//! call whose loss caused it. See trace-check/README.md for usage, design and measurements.
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
