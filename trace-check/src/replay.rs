//! Replays captured operations into a [`FaultFs`], one [`TracedOp`] per explorer step, so that
//! fault-fs's explorer crashes the program's state at every operation boundary.
//!
//! Each open file description becomes a fault-fs handle: writes through it reach the file it
//! was opened on even after a rename, as on Linux. A directory description remembers its path
//! (rewritten when a rename moves it) so that its `fsync` becomes a `sync_dir`.

use crate::ops::{Falloc, Ofd, Op, OpenFlags, TracedOp, WriteAt};
use crate::Error;
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fault_fs::{FaultFile, FaultFs, Journal};
use std::collections::HashMap;
use std::io;

enum Handle {
    /// A file, and whether it was opened `O_SYNC`/`O_DSYNC`.
    File(FaultFile, bool),
    Dir(String),
    /// `O_PATH`: nothing to replay through it.
    PathOnly,
}

/// The replay state: open handles, and which traced operation issued each fault-fs
/// operation (for naming the syscall a violation is blamed on).
#[derive(Default)]
pub struct Replayer {
    handles: HashMap<Ofd, Handle>,
    /// `origin[k]` = index (into the capture's ops) of the operation that issued fault-fs
    /// operation `k`.
    pub origin: Vec<usize>,
}

fn replay_err(t: &TracedOp, e: impl std::fmt::Display) -> Error {
    Error::Replay {
        line: t.line,
        text: t.text.clone(),
        error: e.to_string(),
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

impl Replayer {
    /// A replayer with no open handles.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies operation `i` (`t`) to `fs`, noting marks in `journal`.
    pub fn step(
        &mut self,
        fs: &FaultFs,
        i: usize,
        t: &TracedOp,
        journal: &mut Journal<String>,
    ) -> Result<(), Error> {
        let before = fs.op_count();
        let r = self.apply(fs, t, journal);
        let after = fs.op_count();
        self.origin
            .extend(std::iter::repeat_n(i, (after - before) as usize));
        r.map_err(|e| replay_err(t, e))
    }

    fn file(&self, ofd: Ofd) -> io::Result<&FaultFile> {
        match self.handles.get(&ofd) {
            Some(Handle::File(f, _)) => Ok(f),
            _ => Err(io::Error::other(format!(
                "description {ofd} is not an open file"
            ))),
        }
    }

    fn apply(
        &mut self,
        fs: &FaultFs,
        t: &TracedOp,
        journal: &mut Journal<String>,
    ) -> io::Result<()> {
        match &t.op {
            Op::Open { ofd, path, flags } => {
                let h = open(fs, path, flags)?;
                self.handles.insert(*ofd, h);
            }
            Op::Close { ofd } => {
                self.handles.remove(ofd);
            }
            Op::Write { ofd, at, data } => {
                let Some(Handle::File(f, sync)) = self.handles.get(ofd) else {
                    return Err(io::Error::other(format!(
                        "write to description {ofd}, not an open file"
                    )));
                };
                let off = match at {
                    WriteAt::Offset(o) => *o,
                    WriteAt::Append => f.len()?,
                };
                f.write_all_at(data, off)?;
                if *sync {
                    f.sync_data()?; // O_SYNC: durable when the write returns
                }
            }
            Op::SetLen { ofd, len } => self.file(*ofd)?.set_len(*len)?,
            Op::TruncatePath { path, len } => {
                fs.open(path, OpenOptions::new().write(true))?
                    .set_len(*len)?;
            }
            Op::Fallocate {
                ofd,
                mode,
                offset,
                len,
            } => fallocate(self.file(*ofd)?, *mode, *offset, *len)?,
            Op::Fsync { ofd } => match self.handles.get(ofd) {
                Some(Handle::File(f, _)) => f.sync_all()?,
                Some(Handle::Dir(p)) => fs.sync_dir(p)?,
                _ => {
                    return Err(io::Error::other(format!(
                        "fsync of description {ofd}, not open"
                    )))
                }
            },
            Op::SyncAll => sync_all(fs, "")?,
            Op::SyncFileRange { .. } => {} // durable for nothing
            Op::Mark(m) => journal.note(fs, m.clone()),
            ns => self.namespace(fs, ns)?,
        }
        Ok(())
    }

    /// The namespace calls: mkdir, rmdir, unlink, rename (also out of the directory),
    /// exchange, link.
    fn namespace(&mut self, fs: &FaultFs, op: &Op) -> io::Result<()> {
        match op {
            Op::Mkdir { path } => fs.create_dir(path)?,
            Op::Rmdir { path } => {
                if !fs.read_dir(path)?.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::DirectoryNotEmpty,
                        "rmdir of a non-empty directory",
                    ));
                }
                fs.remove_dir_all(path)?;
            }
            Op::Unlink { path } => fs.remove_file(path)?,
            Op::Rename { from, to: None, .. } => remove_any(fs, from)?,
            Op::Rename {
                from, to: Some(to), ..
            } => {
                fs.rename(from, to)?;
                self.moved(from, to);
            }
            Op::Exchange { a, b } => fs.exchange(a, b)?,
            Op::Link { from, to } => fs.hard_link(from, to)?,
            _ => return Err(io::Error::other("not a namespace operation")),
        }
        Ok(())
    }

    /// A rename moved `from` to `to`: directory handles at or below `from` follow it.
    fn moved(&mut self, from: &str, to: &str) {
        for h in self.handles.values_mut() {
            if let Handle::Dir(p) = h {
                if p == from {
                    *p = to.to_string();
                } else if let Some(rest) = p.strip_prefix(&format!("{from}/")) {
                    *p = join(to, rest);
                }
            }
        }
    }
}

/// Whether `path` is a directory (a read-only look: no crash point).
pub fn is_dir(fs: &FaultFs, path: &str) -> bool {
    fs.read_dir(path).is_ok()
}

fn open(fs: &FaultFs, path: &str, flags: &OpenFlags) -> io::Result<Handle> {
    if flags.path_only {
        return Ok(Handle::PathOnly);
    }
    if flags.directory || (!flags.write && !flags.create && is_dir(fs, path)) {
        fs.read_dir(path)?; // it must exist and be a directory
        return Ok(Handle::Dir(path.to_string()));
    }
    Ok(Handle::File(
        fs.open(path, file_options(flags))?,
        flags.sync,
    ))
}

/// The fault-fs options that open a regular file as `flags` asked (what every capture's live
/// filesystem and the replay must agree on). fault-fs wants write access for create and
/// truncate; a read-only `O_CREAT` creates the file all the same and the program can only read
/// it afterwards.
pub fn file_options(flags: &OpenFlags) -> OpenOptions {
    let write = flags.write || flags.create || flags.trunc;
    OpenOptions::new()
        .read(flags.read || !write)
        .write(write)
        .create(flags.create && !flags.excl)
        .create_new(flags.create && flags.excl)
        .truncate(flags.trunc)
}

fn fallocate(f: &FaultFile, mode: Falloc, offset: u64, len: u64) -> io::Result<()> {
    let size = f.len()?;
    let end = offset.saturating_add(len);
    // zeros written 1 MiB at a time, at most 64 MiB per call (a larger hole punch or zero
    // range is refused rather than held in memory)
    let zero = |from: u64, to: u64| -> io::Result<()> {
        if to.saturating_sub(from) > 64 << 20 {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "fallocate zero range above 64 MiB",
            ));
        }
        let chunk = vec![0u8; 1 << 20];
        let mut at = from;
        while at < to {
            let n = (to - at).min(chunk.len() as u64) as usize;
            f.write_all_at(&chunk[..n], at)?;
            at += n as u64;
        }
        Ok(())
    };
    match mode {
        Falloc::Extend => {
            if end > size {
                f.set_len(end)?;
            }
        }
        Falloc::KeepSize => {}
        Falloc::PunchHole => zero(offset, end.min(size))?,
        Falloc::ZeroRange { keep_size } => {
            zero(offset, if keep_size { end.min(size) } else { end })?
        }
    }
    Ok(())
}

/// `sync()`: every file's data and every directory's entries become durable.
fn sync_all(fs: &FaultFs, dir: &str) -> io::Result<()> {
    for e in fs.read_dir(dir)? {
        let p = join(dir, &e.name);
        if e.is_dir {
            sync_all(fs, &p)?;
        } else {
            fs.open(&p, OpenOptions::read_only())?.sync_all()?;
        }
    }
    fs.sync_dir(dir)
}

/// An entry moved out of the checked directory: gone, like a removal.
fn remove_any(fs: &FaultFs, path: &str) -> io::Result<()> {
    if is_dir(fs, path) {
        fs.remove_dir_all(path)
    } else {
        fs.remove_file(path)
    }
}
