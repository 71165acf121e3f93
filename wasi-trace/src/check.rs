//! A WASI program as trace-check's checker, run in-process on each crash image served
//! straight from fault-fs's memory: no temporary directory, no process start.
//!
//! The protocol is the shell checker's, carried in the environment: `IMAGE_DIR` (where the
//! image is preopened, the run's `guest_dir`), `CRASH_POINT`, and the marks written before
//! the crash as `MARKS`, one per line (there is no marks file). Exit 0 = consistent;
//! anything else is a violation explained by its stdout. A checker that traps (a panic, the
//! time limit) is a violation too: recovery crashed or hung on that image.

use crate::error::Error;
use crate::run::{run_on, Program, RunConfig};
use crate::served::Shared;
use seqstore_fault_fs::{FaultFs, FaultFsConfig, Model};
use seqstore_trace::check::{Checker, Verdict};
use std::path::Path;
use std::sync::Arc;

/// A WASI command that decides whether a crash image keeps the program's promises.
#[derive(Clone, Debug)]
pub struct WasmChecker {
    program: Arc<Program>,
    cfg: RunConfig,
}

impl WasmChecker {
    /// `program`, run with `cfg` (its arguments, environment, `guest_dir`, seed and time
    /// limit) on every image.
    pub fn new(program: Program, cfg: RunConfig) -> WasmChecker {
        WasmChecker {
            program: Arc::new(program),
            cfg,
        }
    }

    /// Runs the checker on `image` as it is (the image itself is changed by what the checker
    /// writes: pass a fork to keep it).
    pub fn run(
        &self,
        image: &FaultFs,
        marks: &[String],
        crash_point: usize,
    ) -> Result<Verdict, Error> {
        let mut cfg = self.cfg.clone();
        cfg.env.push(("IMAGE_DIR".into(), cfg.guest_dir.clone()));
        cfg.env
            .push(("CRASH_POINT".into(), crash_point.to_string()));
        cfg.env.push(("MARKS".into(), marks.join("\n")));
        let served = Shared::new(image.clone(), false);
        match run_on(&self.program, &served, &cfg, false) {
            Ok(out) if out.code == 0 => Ok(Verdict::Consistent),
            Ok(out) => {
                let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
                Ok(Verdict::Violation(if text.is_empty() {
                    format!(
                        "checker failed (exit {}) without a message; stderr: {}",
                        out.code,
                        String::from_utf8_lossy(&out.stderr).trim()
                    )
                } else {
                    text
                }))
            }
            Err(Error::Trap(t)) => Ok(Verdict::Violation(format!("checker trapped: {t}"))),
            Err(e) => Err(e),
        }
    }
}

fn to_trace(e: Error) -> seqstore_trace::Error {
    match e {
        Error::Check(e) => e,
        e => seqstore_trace::Error::Checker(e.to_string()),
    }
}

impl Checker for WasmChecker {
    /// An image on disk (the shell route's): loaded into memory, then checked as one.
    fn check(
        &self,
        image: &Path,
        marks: &Path,
        crash_point: usize,
    ) -> Result<Verdict, seqstore_trace::Error> {
        let fs = FaultFs::from_dir(FaultFsConfig::new(Model::Posix), image)
            .map_err(|e| seqstore_trace::Error::Io(format!("{}: {e}", image.display())))?;
        let text = std::fs::read_to_string(marks)
            .map_err(|e| seqstore_trace::Error::Io(format!("{}: {e}", marks.display())))?;
        let marks: Vec<String> = text.lines().map(str::to_string).collect();
        self.run(&fs, &marks, crash_point).map_err(to_trace)
    }

    fn check_in_memory(
        &self,
        image: &FaultFs,
        marks: &[String],
        crash_point: usize,
    ) -> Result<Verdict, seqstore_trace::Error> {
        // a fork: what the checker writes (recovery) must not change the explorer's image
        self.run(&image.fork(), marks, crash_point)
            .map_err(to_trace)
    }
}
