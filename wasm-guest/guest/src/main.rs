//! `seqstore-guest`: the store as a WASI command, on host-fs over WASI's own filesystem.
//!
//! Runs under any WASI (preview 2) runtime, e.g. the stock wasmtime CLI, on a preopened
//! directory. The commands, their flags and their JSON are `seqstore`'s (the
//! `seqstore-commands` crate defines them for both), so the same line works in both:
//!
//! ```text
//! wasmtime run --dir ./mystream::/data seqstore-guest.wasm append --dir /data --subject orders.eu --data hello
//! wasmtime run --dir ./mystream::/data seqstore-guest.wasm get 1
//! wasmtime run --dir ./mystream::/data seqstore-guest.wasm state
//! ```
//!
//! `--dir` defaults to `/data` under WASI (preopen it there) and to `.` natively, where the
//! same binary runs on cap-std. Each run opens the store (recovering), does one operation,
//! prints its result as JSON (one line per value; `--json` is accepted and is the default),
//! and closes the store. Errors go to stderr; the exit codes are the shared crate's: 1 for a
//! store error, 2 for a usage error (WASI preview 2 reports both as a failure).

#![forbid(unsafe_code)]

use clap::Parser;
use std::process::ExitCode;

use seqstore_commands::{execute, report, NoExtra, StoreCmd, EXIT_FAILED};
use seqstore_core::Config;

/// The store as a WASI command: seqstore's store commands, JSON out.
#[derive(Parser)]
#[command(name = "seqstore-guest", version)]
struct Cli {
    #[command(subcommand)]
    cmd: StoreCmd<NoExtra>,
}

/// The store's configuration: the default, or in the test-hooks build (the crash lab's, never
/// an application's) with the fsync ablation `SEQSTORE_ABLATION` names.
fn config() -> Config {
    #[cfg(feature = "test-hooks")]
    if let Ok(name) = std::env::var("SEQSTORE_ABLATION") {
        match name.parse() {
            Ok(ablation) => return Config::default().with_ablation(ablation),
            Err(e) => {
                eprintln!("seqstore-guest: SEQSTORE_ABLATION: {e}");
                std::process::exit(i32::from(seqstore_commands::EXIT_USAGE));
            }
        }
    }
    Config::default()
}

fn main() -> ExitCode {
    // clap prints usage errors and exits with 2 (seqstore_commands::EXIT_USAGE)
    let cli = Cli::parse();
    match execute(&cli.cmd, config(), "seqstore-guest") {
        // JSON whether or not --json was given
        Ok(out) => ExitCode::from(out.print(true, "seqstore-guest")),
        Err(e) => {
            eprintln!("seqstore-guest: {}", report(&e));
            ExitCode::from(EXIT_FAILED)
        }
    }
}
