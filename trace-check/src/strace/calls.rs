//! The calls the capture understands, one handler each. A call not listed is irrelevant to
//! the files' contents (reads of other files, sockets, futexes, `stat`s, ...).

use super::syntax::{self, Ret, Val};
use super::{normalize, parse_err, FdEntry, State};
use crate::error::shorten;
use crate::ops::{Falloc, Ofd, Op, OpenFlags, WriteAt};
use crate::Error;

/// Calls whose arguments the capture reads; everything else is skipped unparsed.
pub(crate) const RELEVANT: &[&str] = &[
    "open",
    "openat",
    "openat2",
    "creat",
    "close",
    "close_range",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    "write",
    "pwrite64",
    "writev",
    "pwritev",
    "pwritev2",
    "read",
    "readv",
    "lseek",
    "ftruncate",
    "truncate",
    "fallocate",
    "fsync",
    "fdatasync",
    "sync",
    "syncfs",
    "sync_file_range",
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "unlink",
    "unlinkat",
    "mkdir",
    "mkdirat",
    "rmdir",
    "symlink",
    "symlinkat",
    "mknod",
    "mknodat",
    "mmap",
    "io_uring_setup",
    "chdir",
    "fchdir",
    "execve",
    "execveat",
    "copy_file_range",
    "sendfile",
    "splice",
];

/// One parsed call: its line, name, text, arguments and result value.
struct Call<'c> {
    n: usize,
    pid: u32,
    name: &'c str,
    text: String,
    args: Vec<Val>,
    value: i64,
}

impl Call<'_> {
    fn arg(&self, i: usize) -> Result<&Val, Error> {
        self.args.get(i).ok_or_else(|| {
            parse_err(
                self.n,
                format!("{} has no argument {i}", self.name),
                &self.text,
            )
        })
    }
    fn int(&self, i: usize) -> Result<i64, Error> {
        self.arg(i)?
            .int()
            .ok_or_else(|| parse_err(self.n, format!("argument {i} is not a number"), &self.text))
    }
    fn flags(&self, i: usize) -> Result<Vec<&str>, Error> {
        let a = self.arg(i)?;
        let s = a
            .atom()
            .or_else(|| a.field("flags").and_then(Val::atom))
            .unwrap_or("");
        Ok(s.split('|').collect())
    }
    fn unsupported(&self, why: &str) -> Error {
        Error::Unsupported {
            line: self.n,
            syscall: self.name.to_string(),
            why: why.to_string(),
            text: shorten(&self.text, 200),
        }
    }
}

impl State<'_> {
    /// Handles one completed call.
    pub(super) fn call(&mut self, n: usize, pid: u32, name: &str, rest: &str) -> Result<(), Error> {
        if !RELEVANT.contains(&name) {
            return Ok(());
        }
        let text = format!("{name}({rest}");
        let (args, ret) = syntax::call(rest).map_err(|e| parse_err(n, e.0, &text))?;
        let value = match ret {
            Ret::Ok { value, .. } => value,
            Ret::Err(_) => return Ok(()), // a failed call changed nothing
            Ret::Unknown => {
                self.out
                    .incomplete
                    .push(format!("line {n}: {}", shorten(&text, 160)));
                return Ok(());
            }
        };
        let c = Call {
            n,
            pid,
            name,
            text,
            args,
            value,
        };
        match name {
            "open" | "openat" | "openat2" | "creat" => self.open(&c),
            "close" => {
                self.close_fd(n, &c.text, pid, c.int(0)?);
                Ok(())
            }
            "close_range" => self.close_range(&c),
            "dup" | "dup2" | "dup3" | "fcntl" => self.dup_fcntl(&c),
            "write" | "pwrite64" | "writev" | "pwritev" | "pwritev2" => self.write(&c),
            "read" | "readv" => self.advance(&c),
            "lseek" => self.lseek(&c),
            "ftruncate" | "fallocate" | "fsync" | "fdatasync" | "sync_file_range" => self.fd_op(&c),
            "truncate" => self.truncate(&c),
            "sync" | "syncfs" => {
                self.push(n, &c.text, Op::SyncAll);
                Ok(())
            }
            "chdir" | "fchdir" => self.chdir(&c),
            "execve" | "execveat" => {
                self.exec(pid);
                Ok(())
            }
            "mmap" => self.mmap(&c),
            "io_uring_setup" => Err(c.unsupported("io_uring's operations are not in the trace")),
            "copy_file_range" | "sendfile" | "splice" => self.copy(&c),
            _ => self.namespace(&c),
        }
    }

    /// The description behind descriptor argument `i`; `None` if it is not in the table and
    /// not under the root (a socket, a pipe, a file opened before tracing elsewhere).
    fn ofd_arg(&mut self, c: &Call<'_>, i: usize) -> Result<Option<Ofd>, Error> {
        let v = c.arg(i)?;
        let fd = v
            .int()
            .ok_or_else(|| parse_err(c.n, "not a descriptor", &c.text))?;
        let t = self.table_of(c.pid);
        if let Some(e) = self.tables[t].get(&fd) {
            return Ok(Some(e.ofd));
        }
        match v.ann().map(normalize).and_then(|p| self.rel(&p)) {
            Some(_) => Err(c.unsupported(
                "a descriptor under the checked directory whose open is not in the trace",
            )),
            None => Ok(None),
        }
    }

    /// The absolute path of a path argument, resolved against a directory descriptor.
    fn path_arg(&mut self, c: &Call<'_>, dirfd: Option<usize>, i: usize) -> Result<String, Error> {
        let Val::Str {
            bytes,
            truncated: false,
        } = c.arg(i)?
        else {
            return Err(parse_err(
                c.n,
                format!("argument {i} is not a whole path"),
                &c.text,
            ));
        };
        let p = String::from_utf8(bytes.clone())
            .map_err(|_| parse_err(c.n, "a path that is not UTF-8", &c.text))?;
        if p.starts_with('/') {
            return Ok(normalize(&p));
        }
        let base = match dirfd {
            None => self.cwd_of(c.pid),
            Some(d) => {
                let v = c.arg(d)?;
                if let Some(a) = v.ann() {
                    a.to_string()
                } else if v.atom() == Some("AT_FDCWD") {
                    self.cwd_of(c.pid)
                } else {
                    let fd = v
                        .int()
                        .ok_or_else(|| parse_err(c.n, "bad dirfd", &c.text))?;
                    let t = self.table_of(c.pid);
                    match self.tables[t].get(&fd) {
                        Some(e) => self.ofds[e.ofd as usize].abs.clone(),
                        None => {
                            return Err(parse_err(
                                c.n,
                                "a relative path against an unknown dirfd (run strace with -y)",
                                &c.text,
                            ))
                        }
                    }
                }
            }
        };
        Ok(normalize(&format!("{base}/{p}")))
    }

    fn open(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let (dirfd, pi, fi) = match c.name {
            "open" => (None, 0, Some(1)),
            "creat" => (None, 0, None),
            _ => (Some(0), 1, Some(2)),
        };
        let abs = self.path_arg(c, dirfd, pi)?;
        let fl = match fi {
            Some(i) => c.flags(i)?,
            None => vec!["O_WRONLY", "O_CREAT", "O_TRUNC"],
        };
        let has = |f: &str| fl.contains(&f);
        let flags = OpenFlags {
            read: has("O_RDONLY") || has("O_RDWR"),
            write: has("O_WRONLY") || has("O_RDWR"),
            create: has("O_CREAT"),
            excl: has("O_EXCL"),
            trunc: has("O_TRUNC"),
            append: has("O_APPEND"),
            directory: has("O_DIRECTORY"),
            path_only: has("O_PATH"),
            sync: has("O_SYNC") || has("O_DSYNC"),
        };
        let rel = self.rel(&abs);
        if rel.is_some() && has("O_DIRECT") {
            return Err(c.unsupported("O_DIRECT bypasses the page cache the model is about"));
        }
        let ofd = self.new_ofd(abs, flags.append);
        let e = FdEntry {
            ofd,
            cloexec: has("O_CLOEXEC"),
        };
        self.install(c.n, &c.text, c.pid, c.value, e);
        if let Some(path) = rel {
            self.push(c.n, &c.text, Op::Open { ofd, path, flags });
        }
        Ok(())
    }

    fn close_range(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let (lo, hi) = (c.int(0)?, c.int(1)?);
        let cloexec = c.flags(2)?.contains(&"CLOSE_RANGE_CLOEXEC");
        let t = self.table_of(c.pid);
        let mut fds: Vec<i64> = self.tables[t]
            .keys()
            .copied()
            .filter(|f| (lo..=hi).contains(f))
            .collect();
        fds.sort();
        for fd in fds {
            if cloexec {
                if let Some(e) = self.tables[t].get_mut(&fd) {
                    e.cloexec = true;
                }
            } else {
                self.close_fd(c.n, &c.text, c.pid, fd);
            }
        }
        Ok(())
    }

    fn dup_fcntl(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let old = c.int(0)?;
        let t = self.table_of(c.pid);
        let Some(&e) = self.tables[t].get(&old) else {
            self.ofd_arg(c, 0)?; // an untracked descriptor under the root is an error
                                 // a copy of a descriptor the trace never opened (stdout, a socket) replaces
                                 // whatever the target number referred to
            let dups = c.name.starts_with("dup")
                || c.arg(1)?.atom().is_some_and(|a| a.starts_with("F_DUPFD"));
            if dups && c.value != old {
                self.close_fd(c.n, &c.text, c.pid, c.value);
            }
            return Ok(());
        };
        let cmd = if c.name == "fcntl" {
            c.arg(1)?.atom().unwrap_or("").to_string()
        } else {
            String::new()
        };
        let cloexec = match c.name {
            "dup3" => c.flags(2)?.contains(&"O_CLOEXEC"),
            "fcntl" => cmd == "F_DUPFD_CLOEXEC",
            _ => false,
        };
        match (c.name, cmd.as_str()) {
            ("fcntl", "F_SETFL") => {
                let append = c.flags(2)?.contains(&"O_APPEND");
                self.ofds[e.ofd as usize].append = append;
                Ok(())
            }
            ("fcntl", "F_SETFD") => {
                let on = c.arg(2)?.atom().is_some_and(|a| a.contains("FD_CLOEXEC"));
                if let Some(x) = self.tables[t].get_mut(&old) {
                    x.cloexec = on;
                }
                Ok(())
            }
            ("fcntl", "F_DUPFD" | "F_DUPFD_CLOEXEC") | ("dup" | "dup2" | "dup3", _) => {
                if c.value != old {
                    let ne = FdEntry {
                        ofd: e.ofd,
                        cloexec,
                    };
                    self.install(c.n, &c.text, c.pid, c.value, ne);
                }
                Ok(())
            }
            _ => Ok(()), // locks, F_GETFL, ...: nothing the files keep
        }
    }

    /// The bytes a write call wrote: its buffer (or iovecs), cut to the returned count.
    fn written(&self, c: &Call<'_>) -> Result<Vec<u8>, Error> {
        let mut data = Vec::new();
        let mut truncated = false;
        let mut add = |v: &Val| match v {
            Val::Str {
                bytes,
                truncated: t,
            } => {
                data.extend_from_slice(bytes);
                truncated |= *t;
            }
            _ => truncated = true,
        };
        match c.arg(1)? {
            Val::List(iov) => iov
                .iter()
                .for_each(|e| add(e.field("iov_base").unwrap_or(&Val::List(vec![])))),
            v => add(v),
        }
        let n = usize::try_from(c.value).unwrap_or(0);
        if data.len() < n && truncated {
            return Err(
                c.unsupported("strace truncated the write buffer (run it with a larger -s)")
            );
        }
        if data.len() < n {
            return Err(parse_err(c.n, "fewer bytes shown than written", &c.text));
        }
        data.truncate(n);
        Ok(data)
    }

    fn write(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let Some(ofd) = self.ofd_arg(c, 0)? else {
            return Ok(());
        };
        let data = self.written(c)?;
        let explicit = match c.name {
            "pwrite64" => Some(c.int(3)?),
            "pwritev" => Some(c.int(3)?),
            "pwritev2" => Some(c.int(3)?).filter(|&o| o != -1),
            _ => None,
        };
        let rwf_append = c.name == "pwritev2" && c.flags(4)?.contains(&"RWF_APPEND");
        let o = &mut self.ofds[ofd as usize];
        // Linux: on an O_APPEND description even pwrite appends
        let append = o.append || rwf_append;
        let at = match (append, explicit) {
            (true, _) => WriteAt::Append,
            (false, Some(off)) => WriteAt::Offset(u64::try_from(off).unwrap_or(0)),
            (false, None) => match o.pos {
                Some(p) => WriteAt::Offset(p),
                None => {
                    return Err(c.unsupported("a write at a file position the trace does not show"))
                }
            },
        };
        if explicit.is_none() {
            o.pos = match at {
                WriteAt::Append => None,
                WriteAt::Offset(p) => Some(p.saturating_add(data.len() as u64)),
            };
        }
        let (marks, under) = (o.marks, o.rel.is_some());
        if marks {
            self.mark_bytes(c.n, &c.text.clone(), &data);
        } else if under {
            self.push(c.n, &c.text, Op::Write { ofd, at, data });
        }
        Ok(())
    }

    /// `read`/`readv` move the position by what they returned.
    fn advance(&mut self, c: &Call<'_>) -> Result<(), Error> {
        if let Some(ofd) = self.ofd_arg(c, 0)? {
            let o = &mut self.ofds[ofd as usize];
            o.pos = o.pos.map(|p| p.saturating_add(c.value as u64));
        }
        Ok(())
    }

    fn lseek(&mut self, c: &Call<'_>) -> Result<(), Error> {
        if let Some(ofd) = self.ofd_arg(c, 0)? {
            self.ofds[ofd as usize].pos = u64::try_from(c.value).ok();
        }
        Ok(())
    }

    /// Calls on one descriptor: ftruncate, fallocate, fsync, fdatasync, sync_file_range.
    fn fd_op(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let Some(ofd) = self.ofd_arg(c, 0)? else {
            return Ok(());
        };
        if self.ofds[ofd as usize].rel.is_none() {
            return Ok(());
        }
        let op = match c.name {
            "ftruncate" => Op::SetLen {
                ofd,
                len: c.int(1)?.max(0) as u64,
            },
            "fallocate" => {
                let fl = c.flags(1)?;
                let has = |f: &str| fl.contains(&f);
                let known = [
                    "0",
                    "FALLOC_FL_KEEP_SIZE",
                    "FALLOC_FL_PUNCH_HOLE",
                    "FALLOC_FL_ZERO_RANGE",
                ];
                if fl.iter().any(|f| !known.contains(f)) {
                    return Err(c.unsupported(
                        "a fallocate mode other than extend, keep-size, punch-hole, zero-range",
                    ));
                }
                let mode = if has("FALLOC_FL_PUNCH_HOLE") {
                    Falloc::PunchHole
                } else if has("FALLOC_FL_ZERO_RANGE") {
                    Falloc::ZeroRange {
                        keep_size: has("FALLOC_FL_KEEP_SIZE"),
                    }
                } else if has("FALLOC_FL_KEEP_SIZE") {
                    Falloc::KeepSize
                } else {
                    Falloc::Extend
                };
                Op::Fallocate {
                    ofd,
                    mode,
                    offset: c.int(2)?.max(0) as u64,
                    len: c.int(3)?.max(0) as u64,
                }
            }
            "sync_file_range" => Op::SyncFileRange { ofd },
            _ => Op::Fsync { ofd },
        };
        self.push(c.n, &c.text, op);
        Ok(())
    }

    fn truncate(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let abs = self.path_arg(c, None, 0)?;
        if let Some(path) = self.rel(&abs) {
            let len = c.int(1)?.max(0) as u64;
            self.push(c.n, &c.text, Op::TruncatePath { path, len });
        }
        Ok(())
    }

    fn chdir(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let dir = if c.name == "chdir" {
            self.path_arg(c, None, 0)?
        } else {
            match (c.arg(0)?.ann(), self.ofd_arg(c, 0)?) {
                (Some(a), _) => normalize(a),
                (None, Some(o)) => self.ofds[o as usize].abs.clone(),
                (None, None) => {
                    return Err(parse_err(c.n, "fchdir to an unknown descriptor", &c.text))
                }
            }
        };
        self.cwd.insert(c.pid, dir);
        Ok(())
    }

    /// A successful exec closes the descriptors marked close-on-exec.
    fn exec(&mut self, pid: u32) {
        let t = self.table_of(pid);
        let mut fds: Vec<i64> = self.tables[t]
            .iter()
            .filter(|(_, e)| e.cloexec)
            .map(|(f, _)| *f)
            .collect();
        fds.sort();
        for fd in fds {
            self.close_fd(0, "execve", pid, fd);
        }
    }

    fn mmap(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let (prot, flags) = (c.flags(2)?, c.flags(3)?);
        let shared = flags.iter().any(|f| f.starts_with("MAP_SHARED"));
        if !(shared && prot.contains(&"PROT_WRITE")) {
            return Ok(());
        }
        match c.arg(4)?.int() {
            Some(fd) if fd >= 0 => {
                if let Some(o) = self.ofd_arg(c, 4)? {
                    if self.ofds[o as usize].rel.is_some() {
                        return Err(c.unsupported(
                            "a writable shared mapping: its stores are not in the trace",
                        ));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn copy(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let out = match c.name {
            "sendfile" => 0,
            _ => 2,
        };
        if let Some(o) = self.ofd_arg(c, out)? {
            if self.ofds[o as usize].rel.is_some() {
                return Err(c.unsupported(
                    "an in-kernel copy into the checked directory (its bytes are not in the trace)",
                ));
            }
        }
        Ok(())
    }
}

impl State<'_> {
    /// Calls on names: rename*, link*, unlink*, mkdir*, rmdir, symlink*, mknod*.
    fn namespace(&mut self, c: &Call<'_>) -> Result<(), Error> {
        match c.name {
            "rename" | "renameat" | "renameat2" | "link" | "linkat" => self.two_names(c),
            "symlink" | "symlinkat" | "mknod" | "mknodat" => {
                let (dirfd, i) = match c.name {
                    "symlink" => (None, 1),
                    "symlinkat" => (Some(1), 2),
                    "mknod" => (None, 0),
                    _ => (Some(0), 1),
                };
                let abs = self.path_arg(c, dirfd, i)?;
                match self.rel(&abs) {
                    Some(_) => {
                        Err(c.unsupported("fault-fs models regular files and directories only"))
                    }
                    None => Ok(()),
                }
            }
            _ => self.one_name(c),
        }
    }

    fn one_name(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let (dirfd, i) = match c.name {
            "unlinkat" | "mkdirat" => (Some(0), 1),
            _ => (None, 0),
        };
        let abs = self.path_arg(c, dirfd, i)?;
        let Some(path) = self.rel(&abs) else {
            return Ok(());
        };
        let op = match c.name {
            "unlink" => Op::Unlink { path },
            "unlinkat" if c.flags(2)?.contains(&"AT_REMOVEDIR") => Op::Rmdir { path },
            "unlinkat" => Op::Unlink { path },
            "rmdir" => Op::Rmdir { path },
            _ => Op::Mkdir { path },
        };
        self.push(c.n, &c.text, op);
        Ok(())
    }

    fn two_names(&mut self, c: &Call<'_>) -> Result<(), Error> {
        let at = matches!(c.name, "renameat" | "renameat2" | "linkat");
        let (from, to) = if at {
            (self.path_arg(c, Some(0), 1)?, self.path_arg(c, Some(2), 3)?)
        } else {
            (self.path_arg(c, None, 0)?, self.path_arg(c, None, 1)?)
        };
        let fl = if matches!(c.name, "renameat2" | "linkat") {
            c.flags(4)?
        } else {
            Vec::new()
        };
        let (rf, rt) = (self.rel(&from), self.rel(&to));
        let link = c.name.starts_with("link");
        if rt.is_some() && rf.is_none() {
            return Err(c.unsupported(
                "an entry brought in from outside the checked directory (its contents are unknown)",
            ));
        }
        if fl.contains(&"RENAME_WHITEOUT") || (link && fl.contains(&"AT_EMPTY_PATH")) {
            return Err(c.unsupported("a flag the replay does not model"));
        }
        let Some(from) = rf else { return Ok(()) };
        let op = match (link, rt) {
            (true, None) => return Ok(()), // a new name outside: nothing changes inside
            (true, Some(to)) => Op::Link { from, to },
            (false, Some(to)) if fl.contains(&"RENAME_EXCHANGE") => Op::Exchange { a: from, b: to },
            (false, to) => Op::Rename {
                from,
                to,
                noreplace: fl.contains(&"RENAME_NOREPLACE"),
            },
        };
        self.push(c.n, &c.text, op);
        Ok(())
    }
}
