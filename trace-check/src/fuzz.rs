//! The body of the fuzz target `strace_parse` (fuzz/): any bytes, read as a trace, either
//! parse or fail with a typed error, and whatever parses replays into fault-fs or fails with
//! a typed error — never a panic.

use crate::replay::Replayer;
use crate::strace::{parse, ParseConfig};
use seqstore_fault_fs::{FaultFs, Journal, Model};

/// Parses `data` as a trace of a program working in `/d` with marks in `/m`, and replays
/// what parses.
pub fn parse_and_replay(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let cfg = ParseConfig {
        roots: vec!["/d".into()],
        marks: Some("/m".into()),
        cwd: "/".into(),
    };
    let Ok(cap) = parse(&text, &cfg) else { return };
    let fs = FaultFs::new(Model::Posix);
    let mut r = Replayer::new();
    let mut j = Journal::new();
    for (i, t) in cap.ops.iter().enumerate() {
        if r.step(&fs, i, t, &mut j).is_err() {
            return;
        }
    }
    // the images of the final state build too
    let _ = fs.crash_images(16);
}
