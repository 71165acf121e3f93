//! Capturing what programs do to a tree.

use crate::error::Error;
use crate::host::{MARKS_DIR, MARKS_NAME};
use crate::run::{run_on, Program, RunConfig, RunOutput};
use crate::served::Shared;
use seqstore_fault_fs::FaultFs;
use seqstore_trace::ops::{Capture, Op};

/// Records every state-changing `wasi:filesystem` call of one or more program runs on one
/// tree, in order: a capture of a session (e.g. a command run eight times, then another).
pub struct Recorder {
    start: FaultFs,
    served: Shared,
}

impl Recorder {
    /// A recorder whose tree starts as `start` (kept as it is, for the check: the runs
    /// change an independent copy).
    pub fn new(start: FaultFs) -> Recorder {
        let live = start.fork();
        Recorder {
            start,
            served: Shared::new(live, true),
        }
    }

    /// The tree before the first run (what the capture replays onto).
    pub fn start(&self) -> &FaultFs {
        &self.start
    }

    /// The tree as the runs left it.
    pub fn live(&self) -> FaultFs {
        self.served.lock().fs.clone()
    }

    /// Runs `program` on the tree, recording its calls; `SEQSTORE_TRACE_MARKS` is set in its
    /// environment. A run that traps (e.g. a refused symlink) is an error; its calls up to
    /// the trap stay recorded.
    pub fn run(&self, program: &Program, cfg: &RunConfig) -> Result<RunOutput, Error> {
        let mut cfg = cfg.clone();
        cfg.env.retain(|(k, _)| k != "SEQSTORE_TRACE_MARKS");
        cfg.env.push((
            "SEQSTORE_TRACE_MARKS".into(),
            format!("{MARKS_DIR}/{MARKS_NAME}"),
        ));
        run_on(program, &self.served, &cfg, true)
    }

    /// A mark from the host (e.g. the driver saw a command succeed and print its result):
    /// a promise from this point on, as if the program had written it to its marks file.
    pub fn mark(&self, m: &str) {
        let mut s = self.served.lock();
        s.record(|| format!("mark {m:?} (host)"), Op::Mark(m.to_string()));
    }

    /// What was recorded so far.
    pub fn capture(&self) -> Capture {
        let s = self.served.lock();
        let ops = s.rec.as_ref().map(|r| r.ops.clone()).unwrap_or_default();
        Capture {
            lines: ops.len(),
            ops,
            ..Capture::default()
        }
    }
}
