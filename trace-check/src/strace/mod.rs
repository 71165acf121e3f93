//! The strace capture: parses `strace -f -y` output into [`Op`]s on the checked directory.
//!
//! It keeps what the kernel keeps: per process (threads created with `CLONE_FILES` share one)
//! a descriptor table mapping numbers to *open file descriptions*, which `dup`, `dup2`,
//! `dup3` and `fcntl(F_DUPFD*)` share and which carry the file position and `O_APPEND`; a
//! `fork` or a `clone` without `CLONE_FILES` copies the table when the call starts. Writes at
//! the current position use the tracked position (advanced by `write`, `read`, set by
//! `lseek`'s result); `O_APPEND` writes are replayed at the end of the file. A call split by
//! another thread's output (`<unfinished ...>` / `<... resumed>`) is joined and takes effect
//! at its completion line, as the kernel applies it by the time it returns; except `close`
//! and `close_range`, which free the descriptor number as they start.

mod calls;
mod run;
pub use run::{find_strace, run_traced, strace_args};
pub(crate) mod syntax;

use crate::error::shorten;
use crate::ops::{Capture, Ofd, Op, TracedOp};
use crate::Error;
use std::collections::HashMap;
use syntax::{Line, Ret, Val};

/// What the parser needs to know about the run.
#[derive(Clone, Debug)]
pub struct ParseConfig {
    /// The checked directory, absolute; every spelling the program may use (as given and
    /// canonical). Only paths under one of these count.
    pub roots: Vec<String>,
    /// The marks file (absolute), whose written lines become [`Op::Mark`]s.
    pub marks: Option<String>,
    /// The working directory the traced program started in (for relative paths when strace
    /// does not annotate `AT_FDCWD`).
    pub cwd: String,
}

/// Parses a whole trace.
pub fn parse(text: &str, cfg: &ParseConfig) -> Result<Capture, Error> {
    let forks = prepass(text)?;
    let mut st = State::new(cfg, forks);
    let mut pending: HashMap<u32, (usize, String, String)> = HashMap::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let parsed = syntax::line(l).map_err(|e| parse_err(n, e.0, l))?;
        match parsed {
            Line::Call { pid, name, rest } => {
                st.entry(n, pid);
                st.call(n, pid, name, rest)?;
            }
            Line::Unfinished { pid, name, head } => {
                st.entry(n, pid);
                if FREED_AT_ENTRY.contains(&name) {
                    // the descriptor is free (and may be handed out again by another
                    // thread's open) before this call returns: its effect is here
                    st.call(n, pid, name, &format!("{head}) = 0"))?;
                }
                pending.insert(pid, (n, name.to_string(), head.to_string()));
            }
            Line::Resumed { pid, name, tail } => {
                let Some((_, pname, head)) = pending.remove(&pid) else {
                    return Err(parse_err(n, format!("{name} resumed but never started"), l));
                };
                if pname != name {
                    return Err(parse_err(n, format!("{name} resumed, {pname} started"), l));
                }
                if !FREED_AT_ENTRY.contains(&name) {
                    st.call(n, pid, name, &format!("{head}{tail}"))?;
                }
            }
            Line::Other => {}
        }
    }
    let mut left: Vec<_> = pending.into_values().collect();
    left.sort();
    for (n, name, head) in left {
        if calls::RELEVANT.contains(&name.as_str()) && !FREED_AT_ENTRY.contains(&name.as_str()) {
            st.out
                .incomplete
                .push(format!("line {n}: {name}({head} (never completed)"));
        }
    }
    st.out.lines = text.lines().count();
    st.out.bytes = text.len();
    Ok(st.out)
}

/// Calls that free descriptors: Linux takes the descriptor out of the table as the call
/// starts (and `close` frees it even when it then fails with `EINTR` or `EIO`), so a split
/// call takes effect at its first line, not its completion. A close that completes after
/// another thread's open reused its number must not close the new file.
const FREED_AT_ENTRY: [&str; 2] = ["close", "close_range"];

pub(crate) fn parse_err(line: usize, msg: impl Into<String>, text: &str) -> Error {
    Error::Parse {
        line,
        msg: msg.into(),
        text: shorten(text, 200),
    }
}

/// A process or thread creation: at its entry line, the child `pid` gets the parent's
/// descriptor table (`share`, `CLONE_FILES`) or a copy.
#[derive(Clone, Copy, Debug)]
struct Fork {
    child: u32,
    share: bool,
}

/// Finds every successful clone/clone3/fork/vfork and the line it started on (its entry),
/// because the child's own lines may come before the parent's call completes.
fn prepass(text: &str) -> Result<HashMap<usize, Fork>, Error> {
    const FORKS: [&str; 4] = ["clone", "clone3", "fork", "vfork"];
    let mut forks = HashMap::new();
    let mut pending: HashMap<u32, (usize, String)> = HashMap::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let (entry, name, rest) = match syntax::line(l) {
            Ok(Line::Call { name, rest, .. }) if FORKS.contains(&name) => (n, name, rest.into()),
            Ok(Line::Unfinished { pid, name, head }) if FORKS.contains(&name) => {
                pending.insert(pid, (n, head.to_string()));
                continue;
            }
            Ok(Line::Resumed { pid, name, tail }) if FORKS.contains(&name) => {
                let Some((entry, head)) = pending.remove(&pid) else {
                    continue; // the main pass reports it
                };
                (entry, name, format!("{head}{tail}"))
            }
            _ => continue,
        };
        let (args, ret) = syntax::call(&rest).map_err(|e| parse_err(n, e.0, l))?;
        let Ret::Ok { value, .. } = ret else { continue };
        let flags = match name {
            "clone" => args.iter().find_map(|a| flag_text(a, "CLONE_")),
            "clone3" => args
                .first()
                .and_then(|a| a.field("flags"))
                .and_then(Val::atom),
            _ => None,
        };
        let share = flags.is_some_and(|f| f.split('|').any(|x| x == "CLONE_FILES"));
        if let Ok(child) = u32::try_from(value) {
            forks.insert(entry, Fork { child, share });
        }
    }
    Ok(forks)
}

/// An atom that is a set of flags with this prefix (clone prints `flags=` as a named argument,
/// which the generic parser keeps as the value).
fn flag_text<'a>(v: &'a Val, prefix: &str) -> Option<&'a str> {
    v.atom()
        .filter(|a| a.split('|').any(|x| x.starts_with(prefix)))
}

/// One open file description.
#[derive(Clone, Debug)]
struct OfdState {
    /// The path it was opened with, relative to the root (`None`: outside).
    rel: Option<String>,
    /// The absolute path it was opened with.
    abs: String,
    /// The file position (`None` after an `O_APPEND` write, until an `lseek`).
    pos: Option<u64>,
    append: bool,
    marks: bool,
    /// Descriptors referring to it, over all tables.
    refs: usize,
}

#[derive(Clone, Copy, Debug)]
struct FdEntry {
    ofd: Ofd,
    cloexec: bool,
}

struct State<'a> {
    cfg: &'a ParseConfig,
    forks: HashMap<usize, Fork>,
    ofds: Vec<OfdState>,
    tables: Vec<HashMap<i64, FdEntry>>,
    pid_table: HashMap<u32, usize>,
    cwd: HashMap<u32, String>,
    marks_buf: Vec<u8>,
    out: Capture,
}

impl<'a> State<'a> {
    fn new(cfg: &'a ParseConfig, forks: HashMap<usize, Fork>) -> Self {
        State {
            cfg,
            forks,
            ofds: Vec::new(),
            tables: Vec::new(),
            pid_table: HashMap::new(),
            cwd: HashMap::new(),
            marks_buf: Vec::new(),
            out: Capture::default(),
        }
    }

    /// Before a call starts: the pid has a table, and a fork starting here gives its child one.
    fn entry(&mut self, n: usize, pid: u32) {
        let t = self.table_of(pid);
        if let Some(f) = self.forks.remove(&n) {
            let ct = if f.share {
                t
            } else {
                let copy = self.tables[t].clone();
                for e in copy.values() {
                    self.ofds[e.ofd as usize].refs += 1;
                }
                self.tables.push(copy);
                self.tables.len() - 1
            };
            self.pid_table.insert(f.child, ct);
            let cwd = self.cwd_of(pid);
            self.cwd.insert(f.child, cwd);
        }
    }

    fn table_of(&mut self, pid: u32) -> usize {
        if let Some(&t) = self.pid_table.get(&pid) {
            return t;
        }
        self.tables.push(HashMap::new());
        let t = self.tables.len() - 1;
        self.pid_table.insert(pid, t);
        t
    }

    fn cwd_of(&self, pid: u32) -> String {
        self.cwd
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| self.cfg.cwd.clone())
    }

    /// The path relative to the root, if it is under one.
    fn rel(&self, abs: &str) -> Option<String> {
        self.cfg.roots.iter().find_map(|r| {
            let r = r.trim_end_matches('/');
            if abs == r {
                Some(String::new())
            } else {
                abs.strip_prefix(r)
                    .and_then(|x| x.strip_prefix('/'))
                    .map(str::to_string)
            }
        })
    }

    fn push(&mut self, n: usize, text: &str, op: Op) {
        self.out.ops.push(TracedOp {
            line: n,
            text: shorten(text, 160),
            op,
        });
    }

    /// Installs `ofd` as descriptor `fd` of `pid`'s table, closing what `fd` referred to.
    fn install(&mut self, n: usize, text: &str, pid: u32, fd: i64, e: FdEntry) {
        self.close_fd(n, text, pid, fd);
        self.ofds[e.ofd as usize].refs += 1;
        let t = self.table_of(pid);
        self.tables[t].insert(fd, e);
    }

    /// Removes descriptor `fd`; the last descriptor of a description under the root closes it.
    fn close_fd(&mut self, n: usize, text: &str, pid: u32, fd: i64) {
        let t = self.table_of(pid);
        let Some(e) = self.tables[t].remove(&fd) else {
            return;
        };
        let o = &mut self.ofds[e.ofd as usize];
        o.refs = o.refs.saturating_sub(1);
        if o.refs == 0 && o.rel.is_some() {
            self.push(n, text, Op::Close { ofd: e.ofd });
        }
    }

    fn new_ofd(&mut self, abs: String, append: bool) -> Ofd {
        let marks = self.cfg.marks.as_deref() == Some(abs.as_str());
        self.ofds.push(OfdState {
            rel: self.rel(&abs),
            abs,
            pos: Some(0),
            append,
            marks,
            refs: 0,
        });
        (self.ofds.len() - 1) as Ofd
    }

    /// Complete lines written to the marks file become marks.
    fn mark_bytes(&mut self, n: usize, text: &str, data: &[u8]) {
        self.marks_buf.extend_from_slice(data);
        while let Some(i) = self.marks_buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.marks_buf.drain(..=i).collect();
            let m = String::from_utf8_lossy(&line[..i]).trim().to_string();
            if !m.is_empty() {
                self.push(n, text, Op::Mark(m));
            }
        }
    }
}

/// Lexically normalizes an absolute path (`.`, `..`, repeated `/`).
pub fn normalize(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}
