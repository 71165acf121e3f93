//! The strace capture end to end: snapshot the checked directory, run the workload under
//! strace, parse the trace. Everything is kept in a work directory (`snapshot/`,
//! `strace.txt`, `marks`, `meta.txt`) so that one image can be replayed later.

use crate::error::io;
use crate::ops::Capture;
use crate::strace::{parse, run_traced, ParseConfig};
use crate::Error;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// A captured run.
#[derive(Debug)]
pub struct Traced {
    /// The operations.
    pub capture: Capture,
    /// The checked directory as it was before the workload.
    pub snapshot: PathBuf,
    /// The raw trace.
    pub trace_file: PathBuf,
    /// How the workload exited.
    pub status: Option<ExitStatus>,
    /// Time to run the workload under strace.
    pub run_time: Duration,
    /// Time to parse the trace.
    pub parse_time: Duration,
}

/// Copies the real tree `from` into `to` (created), regular files and directories only.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(to).map_err(|e| io(to.display(), e))?;
    let rd = std::fs::read_dir(from).map_err(|e| io(from.display(), e))?;
    for e in rd {
        let e = e.map_err(|e| io(from.display(), e))?;
        let ty = e.file_type().map_err(|x| io(e.path().display(), x))?;
        let dst = to.join(e.file_name());
        if ty.is_dir() {
            copy_tree(&e.path(), &dst)?;
        } else if ty.is_file() {
            std::fs::copy(e.path(), &dst).map_err(|x| io(e.path().display(), x))?;
        } else {
            return Err(Error::Io(format!(
                "{}: not a regular file or directory",
                e.path().display()
            )));
        }
    }
    Ok(())
}

fn abs(p: &Path) -> Result<PathBuf, Error> {
    std::path::absolute(p).map_err(|e| io(p.display(), e))
}

/// The parse settings of a run: the directory as given and canonical, the marks file, the cwd.
fn parse_config(dir: &Path, marks: &Path) -> Result<ParseConfig, Error> {
    let given = abs(dir)?.display().to_string();
    let canon = dir
        .canonicalize()
        .map_err(|e| io(dir.display(), e))?
        .display()
        .to_string();
    let cwd = std::env::current_dir().map_err(|e| io("the working directory", e))?;
    let mut roots = vec![crate::strace::normalize(&given)];
    if !roots.contains(&canon) {
        roots.push(canon);
    }
    Ok(ParseConfig {
        roots,
        marks: Some(abs(marks)?.display().to_string()),
        cwd: cwd.display().to_string(),
    })
}

fn save_meta(work: &Path, cfg: &ParseConfig) -> Result<(), Error> {
    let mut s = String::new();
    for r in &cfg.roots {
        s += &format!("root {r}\n");
    }
    if let Some(m) = &cfg.marks {
        s += &format!("marks {m}\n");
    }
    s += &format!("cwd {}\n", cfg.cwd);
    let p = work.join("meta.txt");
    std::fs::write(&p, s).map_err(|e| io(p.display(), e))
}

fn load_meta(work: &Path) -> Result<ParseConfig, Error> {
    let p = work.join("meta.txt");
    let text = std::fs::read_to_string(&p).map_err(|e| io(p.display(), e))?;
    let mut cfg = ParseConfig {
        roots: Vec::new(),
        marks: None,
        cwd: String::new(),
    };
    for l in text.lines() {
        match l.split_once(' ') {
            Some(("root", v)) => cfg.roots.push(v.into()),
            Some(("marks", v)) => cfg.marks = Some(v.into()),
            Some(("cwd", v)) => cfg.cwd = v.into(),
            _ => return Err(Error::Io(format!("{}: bad line {l:?}", p.display()))),
        }
    }
    Ok(cfg)
}

/// Snapshots `dir` into `work/snapshot`, runs `workload` under strace with its marks going to
/// `work/marks`, and parses the trace.
pub fn capture_strace(dir: &Path, work: &Path, workload: &[String]) -> Result<Traced, Error> {
    crate::strace::find_strace().ok_or(Error::StraceMissing)?;
    std::fs::create_dir_all(work).map_err(|e| io(work.display(), e))?;
    let snapshot = work.join("snapshot");
    if snapshot.exists() {
        return Err(Error::Usage(format!(
            "{} exists: use a fresh work directory",
            snapshot.display()
        )));
    }
    copy_tree(dir, &snapshot)?;
    let marks = work.join("marks");
    std::fs::write(&marks, b"").map_err(|e| io(marks.display(), e))?;
    let cfg = parse_config(dir, &marks)?;
    save_meta(work, &cfg)?;
    let trace_file = work.join("strace.txt");
    let t = Instant::now();
    let status = run_traced(workload, &trace_file, &marks)?;
    let run_time = t.elapsed();
    let (capture, parse_time) = parse_file(&trace_file, &cfg)?;
    Ok(Traced {
        capture,
        snapshot,
        trace_file,
        status: Some(status),
        run_time,
        parse_time,
    })
}

fn parse_file(trace: &Path, cfg: &ParseConfig) -> Result<(Capture, Duration), Error> {
    let bytes = std::fs::read(trace).map_err(|e| io(trace.display(), e))?;
    // strace escapes every non-printable byte: a trace is ASCII, anything else is damage
    let text = String::from_utf8(bytes).map_err(|e| Error::Parse {
        line: 0,
        msg: format!("not text at byte {}", e.utf8_error().valid_up_to()),
        text: trace.display().to_string(),
    })?;
    let t = Instant::now();
    let cap = parse(&text, cfg)?;
    Ok((cap, t.elapsed()))
}

/// Re-reads a work directory written by [`capture_strace`].
pub fn load_work(work: &Path) -> Result<Traced, Error> {
    let cfg = load_meta(work)?;
    let trace_file = work.join("strace.txt");
    let (capture, parse_time) = parse_file(&trace_file, &cfg)?;
    Ok(Traced {
        capture,
        snapshot: work.join("snapshot"),
        trace_file,
        status: None,
        run_time: Duration::ZERO,
        parse_time,
    })
}
