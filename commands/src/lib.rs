//! The store commands shared by the two command lines, `seqstore` (cli/) and the WASI command
//! `seqstore-guest` (wasm-guest/guest/): one clap definition of the commands and their flags
//! ([`StoreCmd`]), one JSON output ([`Output`]), and one executor ([`run`]) over any
//! [`StreamStore`](seqstore_core::surface::StreamStore) — store-core's `Store<F>` for every
//! `Fs`, the CLI's wasm guest, a cluster — so the same line works in both:
//!
//! ```text
//! seqstore append --dir D --subject s --data x --json
//! wasmtime run --dir D::/data seqstore-guest.wasm append --dir /data --subject s --data x
//! ```
//!
//! Both print `{"seq":1}` (`seqstore` prints JSON with `--json`, text without; `seqstore-guest`
//! always prints JSON). `--dir` defaults to `/data` under WASI (the conventional preopen) and
//! to the working directory natively.
//!
//! # Exit codes
//!
//! The same in both binaries: [`EXIT_OK`] (0) when the command did what it was asked;
//! [`EXIT_FAILED`] (1) when the store refused or failed it (an [`Error`], a message that is
//! not there, damage that `verify` found, nothing for `consumer next` to deliver);
//! [`EXIT_USAGE`] (2) when the command line was not understood (clap's usage errors). Under
//! WASI preview 2 a process can only report success or failure, so a runtime such as wasmtime
//! turns 2 into 1 there.

#![forbid(unsafe_code)]

mod args;
mod error;
mod exec;
mod open;
mod output;

pub use args::{
    layer_of, parse_duration, parse_sync, parse_wait, AckArg, ConsumerCmd, NoExtra, StoreCmd,
    Target, DEFAULT_DIR,
};
pub use error::{report, Error, Result};
pub use exec::{run, run_and_close};
pub use open::{execute, is_locked, open_native, prepare_dir, retry_locked};
pub use output::{Bytes, ConsumerInfo, Msg, Output, Report, Subjects, VerifyOut};

/// The exit code of a command that did what it was asked.
pub const EXIT_OK: u8 = 0;
/// The exit code of a command the store refused or failed (see the crate doc).
pub const EXIT_FAILED: u8 = 1;
/// The exit code of a command line that was not understood (clap's, too).
pub const EXIT_USAGE: u8 = 2;

#[cfg(test)]
mod tests;
