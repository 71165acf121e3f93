//! Crash-check any WASI program: the program runs under wasmtime with a [`FaultFs`] tree
//! served as its `wasi:filesystem`; every state-changing call is recorded as trace-check's
//! [`ops::Op`](seqstore_trace::ops::Op), so trace-check's replay, crash explorer, blame and
//! report apply unchanged; and a checker that is itself a WASI program ([`WasmChecker`])
//! runs on every crash image served straight from memory, in-process.
//!
//! ```no_run
//! use seqstore_fault_fs::{FaultFs, Model};
//! use seqstore_trace::session::{check_capture, CheckConfig};
//! use seqstore_wasi_trace::{Program, Recorder, RunConfig, WasmChecker};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let program = Program::load("writer.wasm".as_ref())?;
//! let rec = Recorder::new(FaultFs::new(Model::Posix));
//! let out = rec.run(&program, &RunConfig::with_args(&["--rows", "8"]))?;
//! assert_eq!(out.code, 0);
//! let checker = WasmChecker::new(Program::load("check.wasm".as_ref())?, RunConfig::default());
//! let report = check_capture(rec.start(), &rec.capture(), &checker, &CheckConfig::new(Model::Posix))?;
//! println!("{} crash images, {} violations", report.images, report.violations);
//! # Ok(()) }
//! ```
//!
//! Marks: a program under capture finds `SEQSTORE_TRACE_MARKS` in its environment, naming a
//! file (in a preopened directory of its own, outside the checked tree); every line it writes
//! there is a promise the crash images are checked against, as with the strace capture.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod check;
mod error;
mod host;
mod record;
mod run;
mod served;
mod streams;

pub use check::WasmChecker;
pub use error::Error;
pub use host::{MARKS_DIR, MARKS_NAME};
pub use record::Recorder;
pub use run::{run_on_dir, Program, RunConfig, RunOutput};

use seqstore_fault_fs::FaultFs;

/// Runs `program` once on `fs` (its live tree, changed in place), recording nothing.
pub fn run(program: &Program, fs: &FaultFs, cfg: &RunConfig) -> Result<RunOutput, Error> {
    run::run_on(program, &served::Shared::new(fs.clone(), false), cfg, false)
}
