//! The native backend: a cap-std `Dir` on the store root.

use crate::lock::{marker_name, native_claim, parse_claim, wasi_holder};
use crate::{entry_name, with_path};
use cap_std::fs::Dir;
use seqstore_core::fs::split_path;
use seqstore_core::fs::{DirEntry, Fs, FsFile, FsLock, LockError, LockHolder, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The store's filesystem on a directory of the host, confined beneath it (see the crate docs).
#[derive(Debug)]
pub struct HostFs {
    dir: Dir,
    /// The root's path as opened, to name the lock file in a refusal (`None`: from a `Dir`).
    root: Option<std::path::PathBuf>,
}

/// A validated path relative to the root: `None` is the root itself.
fn relative(path: &str) -> io::Result<Option<String>> {
    let parts = split_path(path)?;
    Ok(if parts.is_empty() {
        None
    } else {
        Some(parts.join("/"))
    })
}

impl HostFs {
    /// Opens the existing directory `path` as the store root. `path` is resolved with the
    /// process's ambient authority (it is the one path that is); everything after goes through
    /// the returned handle only.
    pub fn open(path: impl AsRef<Path>) -> io::Result<HostFs> {
        let path = path.as_ref();
        let dir = Dir::open_ambient_dir(path, cap_std::ambient_authority())
            .map_err(|e| with_path("open root", &path.to_string_lossy(), e))?;
        Ok(HostFs {
            dir,
            root: Some(path.to_path_buf()),
        })
    }

    /// Creates the directory `path` (and its missing parents, as `std::fs::create_dir_all`) and
    /// opens it as the store root. The creation is not made durable: sync the parent directory
    /// by other means if that matters.
    pub fn create(path: impl AsRef<Path>) -> io::Result<HostFs> {
        let path = path.as_ref();
        std::fs::create_dir_all(path)
            .map_err(|e| with_path("create root", &path.to_string_lossy(), e))?;
        HostFs::open(path)
    }

    /// Uses an already opened directory as the store root.
    pub fn from_dir(dir: Dir) -> HostFs {
        HostFs { dir, root: None }
    }

    /// `name` in the root, as a refusal shows it: the host path where the root's is known.
    fn shown(&self, name: &str) -> String {
        match &self.root {
            Some(root) => root.join(name).display().to_string(),
            None => name.to_string(),
        }
    }

    /// The bytes of the small file `name` in the root; empty if it is missing.
    fn read_small(&self, name: &str) -> io::Result<Vec<u8>> {
        match self.dir.read(name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            r => r.map_err(|e| self.refusal(&[name], e)),
        }
    }
}

/// cap-std's refusal of a path that leads out of the root: `PermissionDenied` with this text,
/// which says neither which path nor why.
const CAP_STD_ESCAPE: &str = "a path led outside of the filesystem";

impl HostFs {
    /// `e` as the error of an operation on `paths`. A confinement refusal says what was
    /// refused: cap-std's escape error, and an `AlreadyExists` caused by a symlink leading out
    /// (`create_dir` of a name that is such a symlink: the store saw no directory there),
    /// become `PermissionDenied` naming the symlink. Every other error is returned as is. The
    /// operation and the path are not repeated here: the store's `Error::Io` names them.
    fn refusal(&self, paths: &[&str], e: io::Error) -> io::Error {
        let escape = e.kind() == io::ErrorKind::PermissionDenied && e.to_string() == CAP_STD_ESCAPE;
        if !escape && e.kind() != io::ErrorKind::AlreadyExists {
            return e;
        }
        match paths.iter().find_map(|p| self.outside_link(p)) {
            Some(link) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("refused: {link:?} is a symlink leading outside the store directory"),
            ),
            None if escape => io::Error::new(
                io::ErrorKind::PermissionDenied,
                "refused: the path leads outside the store directory",
            ),
            None => e,
        }
    }

    /// The first prefix of `path` (`msgs`, then `msgs/1.blk`) that is a symlink whose target
    /// lies outside the root, if any. Symlinks that stay inside are followed, as cap-std does.
    fn outside_link(&self, path: &str) -> Option<String> {
        let parts = split_path(path).ok()?;
        for i in 1..=parts.len() {
            let prefix = parts[..i].join("/");
            let is_link = self
                .dir
                .symlink_metadata(&prefix)
                .ok()?
                .file_type()
                .is_symlink();
            if !is_link {
                continue;
            }
            match self.dir.metadata(&prefix) {
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Some(prefix),
                Err(_) => return None,
                Ok(_) => {}
            }
        }
        None
    }
}

impl Fs for HostFs {
    type File = HostFile;

    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<HostFile> {
        opts.validate()?;
        let Some(rel) = relative(path)? else {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "the root is a directory",
            ));
        };
        let mut o = cap_std::fs::OpenOptions::new();
        o.read(opts.read)
            .write(opts.write)
            .create(opts.create)
            .create_new(opts.create_new)
            .truncate(opts.truncate);
        let file = self
            .dir
            .open_with(&rel, &o)
            .map_err(|e| self.refusal(&[path], e))?
            .into_std();
        // Linux lets a directory be opened read-only; the store wants a file or an error. An
        // open for writing is refused by the kernel itself (EISDIR): no `statx` then, which
        // every block the store opens would pay.
        let kernel_refuses = cfg!(unix) && opts.write;
        if !kernel_refuses
            && file
                .metadata()
                .map_err(|e| self.refusal(&[path], e))?
                .is_dir()
        {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        Ok(HostFile { file })
    }

    fn create_dir(&self, path: &str) -> io::Result<()> {
        match relative(path)? {
            None => Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the root exists",
            )),
            Some(rel) => self
                .dir
                .create_dir(&rel)
                .map_err(|e| self.refusal(&[path], e)),
        }
    }

    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        let err = |e| self.refusal(&[path], e);
        let iter = match relative(path)? {
            None => self.dir.entries(),
            Some(rel) => self.dir.read_dir(&rel),
        }
        .map_err(err)?;
        let mut out = Vec::new();
        for entry in iter {
            let entry = entry.map_err(err)?;
            // `file_type` does not follow symlinks: a symlink is reported as not a directory.
            let is_dir = entry.file_type().map_err(err)?.is_dir();
            out.push(DirEntry {
                name: entry_name(entry.file_name())?,
                is_dir,
            });
        }
        out.sort_unstable();
        Ok(out)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (Some(f), Some(t)) = (relative(from)?, relative(to)?) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the root cannot be renamed or replaced",
            ));
        };
        self.dir
            .rename(&f, &self.dir, &t)
            .map_err(|e| self.refusal(&[from, to], e))
    }

    fn remove_file(&self, path: &str) -> io::Result<()> {
        match relative(path)? {
            None => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "the root is a directory",
            )),
            Some(rel) => self
                .dir
                .remove_file(&rel)
                .map_err(|e| self.refusal(&[path], e)),
        }
    }

    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        match relative(path)? {
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the root cannot be removed",
            )),
            Some(rel) => self
                .dir
                .remove_dir_all(&rel)
                .map_err(|e| self.refusal(&[path], e)),
        }
    }

    fn sync_dir(&self, path: &str) -> io::Result<()> {
        let err = |e| self.refusal(&[path], e);
        // cap-std opens directories with `O_PATH` on Linux (`open_ambient_dir`, `open_dir`), and
        // `fsync` on an `O_PATH` descriptor fails with `EBADF`. So: `open_dir` checks that
        // `path` is a directory beneath the root (`O_DIRECTORY`, never a FIFO or device), then
        // `"."` relative to it is opened `O_RDONLY`, a real descriptor of that same directory.
        let read = cap_std::fs::OpenOptions::new().read(true).clone();
        let file = match relative(path)? {
            None => self.dir.open_with(".", &read),
            Some(rel) => self
                .dir
                .open_dir(&rel)
                .and_then(|d| d.open_with(".", &read)),
        }
        .map_err(err)?
        .into_std();
        file.sync_all().map_err(err)
    }

    /// Yes: the files are the operating system's, read by `pread` from any thread.
    fn parallel_reads(&self) -> bool {
        true
    }

    /// [`crate::SystemClock`]: a real directory belongs to a system with a wall clock.
    fn wall_clock(&self) -> Option<Box<dyn seqstore_core::Clock>> {
        Some(Box::new(crate::SystemClock))
    }

    /// An OS lock on `name` (see the `lock` module): `flock`, released by the kernel when
    /// this process exits or dies, then the pid written in, then the WASI marker checked.
    fn lock(&self, name: &str) -> Result<FsLock, LockError> {
        let opts = OpenOptions::read_write_create();
        let file = Fs::open(self, name, opts)?.file;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let pid = parse_claim(&self.read_small(name)?);
                let detail = if pid == Some(std::process::id()) {
                    "another Store of this process has it open: share one through SharedStore"
                } else {
                    "another process has the store open"
                };
                return Err(LockError::Held(LockHolder {
                    path: self.shown(name),
                    pid,
                    detail: detail.into(),
                }));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(LockError::Io(e)),
        }
        let held = NativeLock(file);
        held.0.set_len(0)?;
        held.0.write_all_at(native_claim().as_bytes(), 0)?;
        let marker = marker_name(name);
        let found = self.read_small(&marker)?;
        if !found.is_empty() || self.dir.exists(&marker) {
            // dropping `held` empties the claim and unlocks
            return Err(LockError::Held(LockHolder {
                path: self.shown(&marker),
                pid: None,
                detail: wasi_holder(&self.shown(&marker), &found),
            }));
        }
        Ok(FsLock::new(held))
    }
}

/// A held native lock: the locked lock file. Dropping it empties the file (no pid left
/// behind for WASI openers to stumble on), then unlocks it, then closes it.
///
/// The unlock is explicit because closing does not release a `flock` while another
/// descriptor still refers to the same open file: a child this process forked holds one
/// until it execs (the file is close-on-exec), and for good if it never execs. A store
/// closed by one thread while another spawns a process would otherwise stay locked for a
/// moment after its close returned, and a forked worker would keep it locked while it lives.
/// `LOCK_UN` releases the lock of the open file itself, whoever else holds it.
struct NativeLock(std::fs::File);

impl Drop for NativeLock {
    fn drop(&mut self) {
        let _ = self.0.set_len(0);
        let _ = self.0.unlock();
    }
}

/// An open file of a [`HostFs`]: a `std::fs::File` used with positioned I/O.
#[derive(Debug)]
pub struct HostFile {
    file: std::fs::File,
}

impl HostFile {
    /// The underlying std file.
    pub fn as_std(&self) -> &std::fs::File {
        &self.file
    }

    /// Consumes the handle, returning the underlying std file.
    pub fn into_std(self) -> std::fs::File {
        self.file
    }
}

impl FsFile for HostFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of the lock's descriptor (what a child forked while the lock is held keeps
    /// until it execs) does not keep the lock once its holder lets go: the next open takes
    /// it. (Without the explicit unlock the copy keeps the `flock`, and this open is refused.)
    #[test]
    fn a_lock_let_go_is_free_while_a_copy_of_its_descriptor_lives() {
        let tmp = tempfile::tempdir().unwrap();
        let fs = HostFs::open(tmp.path()).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(tmp.path().join("LOCK"))
            .unwrap();
        file.try_lock().unwrap();
        let forked = file.try_clone().unwrap();
        drop(NativeLock(file));
        let again = fs
            .lock("LOCK")
            .expect("the lock, after its holder let it go");
        drop(again);
        drop(forked);
    }
}
