//! The WASI backend: `std::fs` on paths joined below a root path inside a preopened directory.
//!
//! cap-std does not build for `wasm32-wasip2` on this toolchain; the runtime's preopen confines
//! every access instead, and [`split_path`] still refuses `..` and absolute paths.
//! `std::os::wasi::fs::FileExt` (positioned I/O) is unstable (`wasi_ext`), so `read_at` and
//! `write_all_at` call wasi-libc's `pread` and `pwrite`, which std links already: one
//! positioned call to the runtime (preview 2's `descriptor.read` and `write`), where a seek and
//! a read would drop and reopen the file's stream each time, and share a cursor.

use crate::lock::{marker_name, native_holder_from_wasi, parse_claim, wasi_holder};
use crate::{entry_name, path_error, with_path};
use seqstore_core::fs::split_path;
use seqstore_core::fs::{DirEntry, Fs, FsFile, FsLock, LockError, LockHolder, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

// wasi-libc's positioned I/O (`off_t` is 64 bits there); errors set errno.
#[allow(unsafe_code)]
extern "C" {
    fn pread(fd: i32, buf: *mut u8, len: usize, offset: i64) -> isize;
    fn pwrite(fd: i32, buf: *const u8, len: usize, offset: i64) -> isize;
}

/// `offset` as wasi-libc's `off_t`.
fn off_t(offset: u64) -> io::Result<i64> {
    i64::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset past i64"))
}

/// `ENOTCAPABLE` of wasi-libc (WASI preview 1's `errno::notcapable`): a sandbox escape refused
/// by the runtime. Reported as `PermissionDenied`, like the native backend's escapes.
const ENOTCAPABLE: i32 = 76;

/// `EPERM` of wasi-libc: what wasmtime answers for a symlink that leads out of the preopen.
const EPERM: i32 = 63;

/// Whether `e` is the runtime refusing a path that leaves the preopened directory.
fn is_escape(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(ENOTCAPABLE | EPERM))
}

/// `e` as the error of opening or creating the root: an escape is `PermissionDenied`.
fn refusal(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(ENOTCAPABLE) {
        return io::Error::new(io::ErrorKind::PermissionDenied, e);
    }
    e
}

/// `e` as the error of opening or creating the root `path`.
fn root_err(op: &'static str, path: &str, e: io::Error) -> io::Error {
    with_path(op, path, refusal(e))
}

/// The store's filesystem on a directory reachable through the WASI runtime's preopens.
#[derive(Debug)]
pub struct HostFs {
    root: PathBuf,
}

impl HostFs {
    /// Uses the existing directory `path` (e.g. the preopen `/data`, or `.`) as the store root.
    pub fn open(path: impl AsRef<Path>) -> io::Result<HostFs> {
        let root = path.as_ref().to_path_buf();
        let shown = root.to_string_lossy().into_owned();
        let md = std::fs::metadata(&root).map_err(|e| root_err("open root", &shown, e))?;
        if !md.is_dir() {
            return Err(path_error(
                io::ErrorKind::NotADirectory,
                "open root",
                &shown,
                "not a directory",
            ));
        }
        Ok(HostFs { root })
    }

    /// Creates the directory `path` (and its missing parents) and opens it as the store root.
    pub fn create(path: impl AsRef<Path>) -> io::Result<HostFs> {
        let path = path.as_ref();
        std::fs::create_dir_all(path)
            .map_err(|e| root_err("create root", &path.to_string_lossy(), e))?;
        HostFs::open(path)
    }

    /// The root path everything is joined below.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `e` as the error of an operation on `paths`, as the native backend's: a refusal of the
    /// runtime, or an `AlreadyExists` caused by a symlink that leads out (`create_dir` of such
    /// a name), becomes `PermissionDenied` naming the symlink; anything else is returned as
    /// is. The operation and path are not repeated: the store's `Error::Io` names them.
    fn refusal(&self, paths: &[&str], e: io::Error) -> io::Error {
        let escape = is_escape(&e);
        if !escape && e.kind() != io::ErrorKind::AlreadyExists {
            return e;
        }
        match paths.iter().find_map(|p| self.outside_link(p)) {
            Some(link) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("refused: {link:?} is a symlink leading outside the store directory"),
            ),
            // EPERM without such a symlink may be a plain permission error: left as it is
            None if e.raw_os_error() == Some(ENOTCAPABLE) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("refused: the path leads outside the preopened directory ({e})"),
            ),
            None => e,
        }
    }

    /// The first prefix of `path` that is a symlink the runtime will not follow (it leads out
    /// of the preopen), if any.
    fn outside_link(&self, path: &str) -> Option<String> {
        let parts = split_path(path).ok()?;
        let mut full = self.root.clone();
        for (i, part) in parts.iter().enumerate() {
            full.push(part);
            let is_link = std::fs::symlink_metadata(&full)
                .ok()?
                .file_type()
                .is_symlink();
            if !is_link {
                continue;
            }
            match std::fs::metadata(&full) {
                Err(e) if is_escape(&e) || e.kind() == io::ErrorKind::PermissionDenied => {
                    return Some(parts[..=i].join("/"));
                }
                Err(_) => return None,
                Ok(_) => {}
            }
        }
        None
    }

    /// The host path of a store path, and whether it is the root.
    fn resolve(&self, path: &str) -> io::Result<(PathBuf, bool)> {
        let parts = split_path(path)?;
        let mut full = self.root.clone();
        for part in &parts {
            full.push(part);
        }
        Ok((full, parts.is_empty()))
    }
}

impl Fs for HostFs {
    type File = HostFile;

    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<HostFile> {
        opts.validate()?;
        let (full, _) = self.resolve(path)?;
        let file = std::fs::OpenOptions::new()
            .read(opts.read)
            .write(opts.write)
            .create(opts.create)
            .create_new(opts.create_new)
            .truncate(opts.truncate)
            .open(&full)
            .map_err(|e| self.refusal(&[path], e))?;
        if file
            .metadata()
            .map_err(|e| self.refusal(&[path], e))?
            .is_dir()
        {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        Ok(HostFile::new(file))
    }

    fn create_dir(&self, path: &str) -> io::Result<()> {
        let (full, is_root) = self.resolve(path)?;
        if is_root {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the root exists",
            ));
        }
        std::fs::create_dir(full).map_err(|e| self.refusal(&[path], e))
    }

    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        let err = |e| self.refusal(&[path], e);
        let (full, _) = self.resolve(path)?;
        let mut out = Vec::new();
        for entry in std::fs::read_dir(full).map_err(err)? {
            let entry = entry.map_err(err)?;
            // `DirEntry::file_type` does not follow symlinks.
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
        let (f, f_root) = self.resolve(from)?;
        let (t, t_root) = self.resolve(to)?;
        if f_root || t_root {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the root cannot be renamed or replaced",
            ));
        }
        std::fs::rename(f, t).map_err(|e| self.refusal(&[from, to], e))
    }

    fn remove_file(&self, path: &str) -> io::Result<()> {
        let (full, is_root) = self.resolve(path)?;
        if is_root {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "the root is a directory",
            ));
        }
        std::fs::remove_file(full).map_err(|e| self.refusal(&[path], e))
    }

    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        let (full, is_root) = self.resolve(path)?;
        if is_root {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the root cannot be removed",
            ));
        }
        std::fs::remove_dir_all(full).map_err(|e| self.refusal(&[path], e))
    }

    fn sync_dir(&self, path: &str) -> io::Result<()> {
        let (full, _) = self.resolve(path)?;
        let dir = std::fs::File::open(full).map_err(|e| self.refusal(&[path], e))?;
        let md = dir.metadata().map_err(|e| self.refusal(&[path], e))?;
        if !md.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        dir.sync_all().map_err(|e| self.refusal(&[path], e))
    }

    /// [`crate::SystemClock`]: a real directory belongs to a system with a wall clock.
    fn wall_clock(&self) -> Option<Box<dyn seqstore_core::Clock>> {
        Some(Box::new(crate::SystemClock))
    }

    /// WASI has no file locks: the marker `LOCK.wasi` created exclusively, then the native
    /// claim in `LOCK` checked (see the `lock` module).
    fn lock(&self, name: &str) -> Result<FsLock, LockError> {
        let (lock_path, _) = self.resolve(name)?;
        let (marker, _) = self.resolve(&marker_name(name))?;
        let shown = |p: &Path| p.to_string_lossy().into_owned();
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&marker);
        let file = match created {
            Ok(file) => HostFile::new(file),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let found = read_small(&marker)?;
                return Err(LockError::Held(LockHolder {
                    path: shown(&marker),
                    pid: None,
                    detail: wasi_holder(&shown(&marker), &found),
                }));
            }
            Err(e) => return Err(LockError::Io(self.refusal(&[name], e))),
        };
        // the marker is ours from here: dropping `held` removes it
        let held = WasiLock(marker.clone());
        file.write_all_at(b"a WASI process (seqstore-guest)\n", 0)?;
        if let Some(pid) = parse_claim(&read_small(&lock_path)?) {
            return Err(LockError::Held(LockHolder {
                path: shown(&lock_path),
                pid: Some(pid),
                detail: native_holder_from_wasi(&shown(&lock_path)),
            }));
        }
        Ok(FsLock::new(held))
    }
}

/// The bytes of a small file; empty if it is missing. Positioned reads, as every read here:
/// `std::fs::read` would also stat the file for its size and read through a stream.
fn read_small(path: &Path) -> io::Result<Vec<u8>> {
    let file = match std::fs::File::open(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        r => HostFile::new(r?),
    };
    let (mut out, mut buf) = (Vec::new(), [0u8; 512]);
    loop {
        match file.read_at(&mut buf, out.len() as u64)? {
            0 => return Ok(out),
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// A held WASI lock: the marker file, removed when dropped.
struct WasiLock(PathBuf);

impl Drop for WasiLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// An open file of a [`HostFs`]. Reads and writes are positioned (`pread`, `pwrite`): they
/// never use or move the file's cursor, so threads sharing a file need no lock.
#[derive(Debug)]
pub struct HostFile {
    file: std::fs::File,
}

impl HostFile {
    fn new(file: std::fs::File) -> HostFile {
        HostFile { file }
    }

    /// The underlying std file.
    pub fn as_std(&self) -> &std::fs::File {
        &self.file
    }

    /// Consumes the handle, returning the underlying std file.
    pub fn into_std(self) -> std::fs::File {
        self.file
    }
}

/// Runs one `pread`/`pwrite` (its result: a count, or -1 with errno set) until it is not
/// interrupted.
fn retrying(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        match usize::try_from(call()) {
            Ok(n) => return Ok(n),
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

impl FsFile for HostFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let off = off_t(offset)?;
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes, and the descriptor is this
        // file's own, open for as long as `self`.
        #[allow(unsafe_code)]
        retrying(|| unsafe { pread(self.file.as_raw_fd(), buf.as_mut_ptr(), buf.len(), off) })
    }

    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            let off = off_t(offset)?;
            // SAFETY: `buf` is valid for reads of `buf.len()` bytes, and the descriptor is
            // this file's own, open for as long as `self`.
            #[allow(unsafe_code)]
            let n = retrying(|| unsafe {
                pwrite(self.file.as_raw_fd(), buf.as_ptr(), buf.len(), off)
            })?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            buf = &buf[n..];
            offset += n as u64;
        }
        Ok(())
    }

    /// The end of the file, by a seek: one `stat` call to the runtime, where
    /// `File::metadata` makes two (wasi-libc also hashes the metadata for an inode number).
    /// Nothing here uses the cursor the seek moves.
    fn len(&self) -> io::Result<u64> {
        (&self.file).seek(SeekFrom::End(0))
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
