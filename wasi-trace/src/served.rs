//! The filesystem a guest sees: a [`FaultFs`] tree as its preopened directory, and (when
//! capturing) the record of every state-changing call as trace-check [`Op`]s.
//!
//! Descriptors live in the guest's resource table ([`Desc`]); each open creates a new open
//! file description ([`Ofd`]), closed when the guest drops the descriptor. Writes reach the
//! `FaultFile` the open returned, so a file renamed or unlinked while open behaves as on
//! Linux, and the replay (which also writes through handles) builds the same tree.

use seqstore_core::fs::{Fs, FsFile};
use seqstore_fault_fs::{FaultFile, FaultFs, Stat};
use seqstore_trace::ops::{Ofd, Op, OpenFlags, TracedOp, WriteAt};
pub(crate) use seqstore_trace::replay::file_options;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// What a descriptor refers to.
pub(crate) enum Kind {
    /// A directory of the served tree, by its path ("" is the preopen); a rename of it or
    /// of a directory above it rewrites the path ([`Served::moved`]).
    Dir(DirPath),
    /// A regular file of the served tree (the path it was opened at, for messages).
    File(Arc<FaultFile>, String),
    /// The directory that holds the marks file (outside the checked tree).
    MarksDir,
    /// The marks file: every complete line written to it becomes an [`Op::Mark`].
    Marks,
}

/// The path of an open directory, shared with [`Served`] so that renames can move it.
pub(crate) type DirPath = Arc<Mutex<String>>;

/// The current path of an open directory.
pub(crate) fn dir_path(p: &DirPath) -> String {
    p.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// A descriptor in the guest's resource table.
pub(crate) struct Desc {
    pub(crate) kind: Kind,
    pub(crate) ofd: Ofd,
    pub(crate) read: bool,
    pub(crate) write: bool,
}

/// The recorded calls.
#[derive(Default)]
pub(crate) struct Recording {
    pub(crate) ops: Vec<TracedOp>,
    marks_buf: Vec<u8>,
}

/// The served tree and what is recorded of it; shared by the host and the guest's streams.
pub(crate) struct Served {
    pub(crate) fs: FaultFs,
    /// `None` when serving a checker (nothing is recorded).
    pub(crate) rec: Option<Recording>,
    /// Numbers the open file descriptions (shared across the runs of one capture).
    pub(crate) next_ofd: Ofd,
    /// State-changing calls seen, numbering the recorded operations.
    pub(crate) calls: usize,
    /// The open directories' paths.
    dirs: Vec<Weak<Mutex<String>>>,
}

/// A handle on [`Served`].
#[derive(Clone)]
pub(crate) struct Shared(pub(crate) Arc<Mutex<Served>>);

impl Shared {
    pub(crate) fn new(fs: FaultFs, record: bool) -> Self {
        Shared(Arc::new(Mutex::new(Served {
            fs,
            rec: record.then(Recording::default),
            next_ofd: 0,
            calls: 0,
            dirs: Vec::new(),
        })))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Served> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Served {
    /// A new open file description number.
    pub(crate) fn ofd(&mut self) -> Ofd {
        self.next_ofd += 1;
        self.next_ofd
    }

    /// A new directory descriptor's path, tracked for renames.
    pub(crate) fn dir(&mut self, path: String) -> DirPath {
        let p = Arc::new(Mutex::new(path));
        self.dirs.retain(|w| w.strong_count() > 0);
        self.dirs.push(Arc::downgrade(&p));
        p
    }

    /// A rename moved `from` to `to`: open directories at or below `from` follow it.
    pub(crate) fn moved(&mut self, from: &str, to: &str) {
        for d in self.dirs.iter().filter_map(Weak::upgrade) {
            let mut p = d.lock().unwrap_or_else(|e| e.into_inner());
            if *p == from {
                *p = to.to_string();
            } else if let Some(rest) = p.strip_prefix(&format!("{from}/")) {
                *p = format!("{to}/{rest}");
            }
        }
    }

    /// Records `op` (a call that succeeded) with its description `text`.
    pub(crate) fn record(&mut self, text: impl FnOnce() -> String, op: Op) {
        self.calls += 1;
        let line = self.calls;
        if let Some(r) = &mut self.rec {
            r.ops.push(TracedOp {
                line,
                text: text(),
                op,
            });
        }
    }

    /// Bytes written to the marks file: each complete, non-empty line is a mark.
    pub(crate) fn mark_bytes(&mut self, data: &[u8]) {
        let Some(r) = &mut self.rec else { return };
        r.marks_buf.extend_from_slice(data);
        while let Some(i) = r.marks_buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = r.marks_buf.drain(..=i).collect();
            let m = String::from_utf8_lossy(&line[..i]).trim().to_string();
            if !m.is_empty() {
                self.calls += 1;
                r.ops.push(TracedOp {
                    line: self.calls,
                    text: format!("mark {m:?}"),
                    op: Op::Mark(m),
                });
            }
        }
    }

    /// Writes `data` at `at` through the description of `desc` and records it.
    pub(crate) fn write(
        &mut self,
        desc: (&Kind, Ofd),
        data: &[u8],
        at: WriteAt,
    ) -> io::Result<u64> {
        let (Kind::File(f, path), ofd) = desc else {
            if let (Kind::Marks, _) = desc {
                self.mark_bytes(data);
                return Ok(data.len() as u64);
            }
            return Err(io::Error::from(io::ErrorKind::IsADirectory));
        };
        let off = match at {
            WriteAt::Offset(o) => o,
            WriteAt::Append => f.len()?,
        };
        f.write_all_at(data, off)?;
        let n = data.len();
        self.record(
            || format!("write({path:?}, {n} bytes at {off})"),
            Op::Write {
                ofd,
                at,
                data: data.to_vec(),
            },
        );
        Ok(off + n as u64)
    }

    /// Opens `path` as the guest asked (`f`, the flags that are also recorded).
    pub(crate) fn open(&mut self, path: &str, f: &OpenFlags) -> io::Result<Kind> {
        let fs = &self.fs;
        let found = fs.stat(path).ok();
        let present = found.is_some();
        if f.create && f.excl && present {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        if !present && !f.create {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        if found == Some(Stat::Dir) {
            // as the replay decides: a directory is opened without write, create or truncate
            if f.write || f.trunc || (f.create && !f.directory) {
                return Err(io::Error::from(io::ErrorKind::IsADirectory));
            }
            return Ok(Kind::Dir(self.dir(path.to_string())));
        }
        if f.directory {
            return Err(io::Error::from(io::ErrorKind::NotADirectory));
        }
        let file = fs.open(path, file_options(f))?;
        Ok(Kind::File(Arc::new(file), path.to_string()))
    }
}

/// Joins `rel` (a guest path relative to the directory `base`) into a tree path, lexically:
/// `.` dropped, `..` popped. An absolute path or one leaving the tree is refused.
pub(crate) fn resolve(base: &str, rel: &str) -> io::Result<String> {
    if rel.starts_with('/') {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "absolute path",
        ));
    }
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "path leaves the preopened directory",
                    ));
                }
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// Whether `path` is a directory of `fs` (what the replay finds by reading it, asked here
/// without an operation: a guest stats paths often).
pub(crate) fn is_dir(fs: &FaultFs, path: &str) -> bool {
    matches!(fs.stat(path), Ok(Stat::Dir))
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn resolve_rules() {
        assert_eq!(resolve("", "a/./b").unwrap(), "a/b");
        assert_eq!(resolve("a", "../b").unwrap(), "b");
        assert_eq!(resolve("a/b", "").unwrap(), "a/b");
        assert!(resolve("", "..").is_err());
        assert!(resolve("a", "../../b").is_err());
        assert!(resolve("", "/etc").is_err());
    }
}
