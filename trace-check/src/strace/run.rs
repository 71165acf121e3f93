//! Running a workload under `strace -f`.

use super::calls::RELEVANT;
use crate::error::io;
use crate::Error;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// The strace binary: `$SEQSTORE_STRACE`, else `strace` on `PATH`.
pub fn find_strace() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SEQSTORE_STRACE") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("strace"))
        .find(|p| p.is_file())
}

/// The strace arguments before the workload: follow every thread and process (`-f`), no
/// attach/exit chatter (`-qq`), descriptors annotated with their paths (`-y`), write buffers
/// in full (`-s 64 MiB`), only the calls the capture reads plus process creation.
pub fn strace_args(trace_out: &Path) -> Vec<String> {
    let mut set: Vec<&str> = RELEVANT.to_vec();
    set.extend(["clone", "clone3", "fork", "vfork"]);
    vec![
        "-f".into(),
        "-qq".into(),
        "-y".into(),
        "-s".into(),
        (64 << 20).to_string(),
        "-o".into(),
        trace_out.display().to_string(),
        "-e".into(),
        format!("trace={}", set.join(",")),
        "--".into(),
    ]
}

/// Runs `workload` under strace, writing the trace to `trace_out`, with
/// `SEQSTORE_TRACE_MARKS=marks` in its environment. Returns the workload's exit status.
pub fn run_traced(
    workload: &[String],
    trace_out: &Path,
    marks: &Path,
) -> Result<ExitStatus, Error> {
    let strace = find_strace().ok_or(Error::StraceMissing)?;
    if workload.is_empty() {
        return Err(Error::Usage("no workload command given".into()));
    }
    let status = Command::new(&strace)
        .args(strace_args(trace_out))
        .args(workload)
        .env("SEQSTORE_TRACE_MARKS", marks)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::StraceMissing,
            _ => io(format!("running {}", strace.display()), e),
        })?;
    Ok(status)
}
