//! The filesystem the store runs on: two small traits, std-like names, the contract here.
//!
//! Everything the store does to storage goes through [`Fs`] and [`FsFile`]. The same store code
//! therefore runs on a real directory (`host-fs`), inside a WASI sandbox, or on an in-memory
//! filesystem that models power loss (`fault-fs`).
//!
//! # Writing a backend
//! Implement the required methods of [`Fs`] and [`FsFile`]; nothing else is required.
//! [`split_path`] applies the path rules below, and [`MemLocks`] is an [`Fs::lock`] for a
//! backend without OS locks. The `conformance` module (feature `conformance`) checks a backend
//! against this contract.
//!
//! ```
//! use seqstore_core::fs::{DirEntry, Fs, FsFile, FsLock, LockError, OpenOptions};
//! use std::io;
//!
//! struct MyFs;
//! struct MyFile;
//!
//! impl FsFile for MyFile {
//!     fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> { todo!() }
//!     fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> { todo!() }
//!     fn len(&self) -> io::Result<u64> { todo!() }
//!     fn set_len(&self, len: u64) -> io::Result<()> { todo!() }
//!     fn sync_data(&self) -> io::Result<()> { todo!() }
//!     fn sync_all(&self) -> io::Result<()> { todo!() }
//! }
//!
//! impl Fs for MyFs {
//!     type File = MyFile;
//!     fn open(&self, path: &str, opts: OpenOptions) -> io::Result<MyFile> { todo!() }
//!     fn create_dir(&self, path: &str) -> io::Result<()> { todo!() }
//!     fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> { todo!() }
//!     fn rename(&self, from: &str, to: &str) -> io::Result<()> { todo!() }
//!     fn remove_file(&self, path: &str) -> io::Result<()> { todo!() }
//!     fn remove_dir_all(&self, path: &str) -> io::Result<()> { todo!() }
//!     fn sync_dir(&self, path: &str) -> io::Result<()> { todo!() }
//!     fn lock(&self, name: &str) -> Result<FsLock, LockError> { todo!() }
//! }
//! # fn _a_store_runs_on_it(fs: MyFs) { let _ = seqstore_core::Store::builder(fs); }
//! ```
//!
//! # Fast paths
//! A file may do some of the store's work for less, or know something the store asks: it then
//! implements [`FastPaths`] and offers it through [`FsFile::fast_paths`]. The wasm guest's files
//! (fewer crossings of the sandbox boundary, checksums computed by the host) and the encryption
//! layer's (whether a block is worth rewriting) do. For a file that offers none, the store does
//! what the defaults of [`FastPaths`] do, with the [`FsFile`] methods: the same operations.
//!
//! # Paths
//! Paths are `&str`, relative to the root of the filesystem, `/`-separated. The root itself is
//! `""` (or `"."`). `.` components are ignored; an absolute path or a `..` component is refused
//! with [`io::ErrorKind::PermissionDenied`] (a backend must never reach outside its root); an
//! empty component (`a//b`) or a NUL byte is [`io::ErrorKind::InvalidInput`]. [`split_path`]
//! implements these rules so that every backend applies the same ones.
//!
//! # Durability contract
//! This is the part of POSIX the store relies on, stated as the weakest promise a backend makes:
//! - [`FsFile::write_all_at`] and [`FsFile::set_len`] change what reads see at once, but nothing is
//!   durable (survives a power cut) until [`FsFile::sync_data`] or [`FsFile::sync_all`] returns
//!   `Ok` on that file. Before then a crash may keep none, some, or all of the change, and a write
//!   may be torn at sector boundaries.
//! - A name created, renamed or removed ([`FsFile`] opened with `create`, [`Fs::create_dir`],
//!   [`Fs::rename`], [`Fs::remove_file`], [`Fs::remove_dir_all`]) is durable only after its parent
//!   directory has been synced with [`Fs::sync_dir`] (both parents for a rename). Syncing a file
//!   does not make its name durable.
//! - [`Fs::rename`] is atomic: after a crash either the old or the new name is seen, never neither.
//! - A failed sync (`Err`) means the data may be lost *even if a later sync returns `Ok`* (Linux
//!   drops dirty pages on writeback errors: "fsyncgate"). Callers must treat the file as unknown
//!   and stop writing to it.
//!
//! # Errors
//! `io::Error` with meaningful kinds: `NotFound`, `AlreadyExists`, `PermissionDenied`,
//! `InvalidInput`, `IsADirectory`, `NotADirectory`, `DirectoryNotEmpty`, `StorageFull`, and
//! `Other` (EIO) for failures of the medium.
//!
//! Every method is `#[track_caller]`, so a backend that records a trace (fault-fs) can name the
//! line of store code that issued each operation.

use std::io;

/// How to open a file, as `std::fs::OpenOptions` (a plain value, so it crosses a WIT boundary).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpenOptions {
    /// Open for reading.
    pub read: bool,
    /// Open for writing.
    pub write: bool,
    /// Create the file if it does not exist (needs `write`).
    pub create: bool,
    /// Create the file; fail with `AlreadyExists` if it exists (needs `write`).
    pub create_new: bool,
    /// Truncate an existing file to length 0 (needs `write`).
    pub truncate: bool,
}

impl OpenOptions {
    /// All flags off.
    pub const fn new() -> Self {
        OpenOptions {
            read: false,
            write: false,
            create: false,
            create_new: false,
            truncate: false,
        }
    }
    /// Read only, the file must exist.
    pub const fn read_only() -> Self {
        OpenOptions::new().read(true)
    }
    /// Read and write, creating the file if missing.
    pub const fn read_write_create() -> Self {
        OpenOptions::new().read(true).write(true).create(true)
    }
    /// Sets `read`.
    pub const fn read(mut self, v: bool) -> Self {
        self.read = v;
        self
    }
    /// Sets `write`.
    pub const fn write(mut self, v: bool) -> Self {
        self.write = v;
        self
    }
    /// Sets `create`.
    pub const fn create(mut self, v: bool) -> Self {
        self.create = v;
        self
    }
    /// Sets `create_new`.
    pub const fn create_new(mut self, v: bool) -> Self {
        self.create_new = v;
        self
    }
    /// Sets `truncate`.
    pub const fn truncate(mut self, v: bool) -> Self {
        self.truncate = v;
        self
    }
    /// Checks the flag combination the way std does (`create`, `create_new` and `truncate` need
    /// `write`; at least one of `read`/`write`). Backends call this first.
    pub fn validate(&self) -> io::Result<()> {
        if !self.read && !self.write {
            return Err(invalid("open: neither read nor write requested"));
        }
        if (self.create || self.create_new || self.truncate) && !self.write {
            return Err(invalid("open: create/create_new/truncate need write"));
        }
        Ok(())
    }
}

/// One entry of [`Fs::read_dir`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DirEntry {
    /// The entry's name (one path component).
    pub name: String,
    /// Whether it is a directory. A symlink is not followed: it is reported with
    /// `is_dir: false`, and a backend refuses to follow one that leads out of its root.
    pub is_dir: bool,
}

/// Which step of [`FastPaths::write_all_at_sync_data`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum WriteSyncError {
    /// The write failed: nothing was synced, and the file's bytes at the offset are unknown.
    Write(io::Error),
    /// The write succeeded and the sync failed: the data may be lost (see the contract on a
    /// failed sync).
    Sync(io::Error),
}

/// An open file. Methods take `&self` (positioned I/O, like `std::os::unix::fs::FileExt`).
#[allow(clippy::len_without_is_empty)] // `len` is a fallible I/O call, as std's `metadata().len()`
pub trait FsFile: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at or past the
    /// end). Like `FileExt::read_at`.
    #[track_caller]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Writes all of `buf` at `offset`, extending the file (with zeros over any gap) if needed.
    /// Like `FileExt::write_all_at`. Not durable until a sync.
    #[track_caller]
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// The file's current length in bytes.
    #[track_caller]
    fn len(&self) -> io::Result<u64>;

    /// Truncates or extends (with zeros) to `len`. Like `File::set_len`. Not durable until a sync.
    #[track_caller]
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Makes the file's data (and length) durable. Like `File::sync_data` (fdatasync).
    #[track_caller]
    fn sync_data(&self) -> io::Result<()>;

    /// Makes the file's data and metadata durable. Like `File::sync_all` (fsync).
    #[track_caller]
    fn sync_all(&self) -> io::Result<()>;

    /// Reads exactly `buf.len()` bytes at `offset`, or fails with `UnexpectedEof`.
    #[track_caller]
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "read_exact_at: end of file",
                    ))
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The file's [`FastPaths`], if it has any: `None` (the default) for a plain backend, which
    /// has nothing to override. A file that does the same work for less (the wasm guest's, one
    /// crossing of the sandbox boundary instead of several) or knows something the store asks
    /// (the encryption layer's) implements [`FastPaths`] and returns `Some(self)` here. The
    /// store takes a fast path when it is offered and otherwise does what the method's
    /// default does, so the answer may differ from one file to the next.
    fn fast_paths(&self) -> Option<&dyn FastPaths> {
        None
    }
}

/// What a file offers beyond [`FsFile`], for the store to use where it can: a durable write in
/// one call, checksums computed elsewhere, reads into a buffer of the file's own, and whether
/// the file is worth rewriting. A backend implements it only if it has one of these to offer,
/// and says so through [`FsFile::fast_paths`]. Every method has a default built on the
/// [`FsFile`] methods, which is exactly what the store does for a file without fast paths: an
/// override must keep the default's effect and durability, as the crash tests enumerate the
/// same operations either way. Implemented by the wasm guest's files and the encryption
/// layer's.
pub trait FastPaths: FsFile {
    /// [`FsFile::write_all_at`], then, if it succeeded, [`FsFile::sync_data`]: the store's
    /// durable append, which writes its record and syncs it at once, says so in one call. The
    /// default makes exactly those two calls; the wasm guest's file has its host do both for
    /// one crossing of the boundary instead of two. The error says which step failed.
    #[track_caller]
    fn write_all_at_sync_data(&self, buf: &[u8], offset: u64) -> Result<(), WriteSyncError> {
        self.write_all_at(buf, offset)
            .map_err(WriteSyncError::Write)?;
        self.sync_data().map_err(WriteSyncError::Sync)
    }

    /// Whether copying this file's bytes whole into a new file would store them noticeably
    /// better. False by default. The crypt layer says true for a file it holds in many more
    /// frames than one whole write would make (a block of `Always` appends is a frame per
    /// append: 72 bytes each on disk, a range-map entry each in memory, and pieces too small
    /// for lz4). The store asks this of each block it seals, and rewrites the block if so
    /// (store-core/CRYPT.md, "Sealing a block through the layer").
    fn worth_rewriting(&self) -> bool {
        false
    }

    /// Whether the checksums of data read from this file are better computed many records per
    /// call by [`FastPaths::crc32_ranges`] than one record at a time in this process. False by
    /// default. The wasm guest's files say true: crc32 in wasm has no SIMD (several times slower
    /// than native code), and its host computes a whole chunk's checksums in one call.
    /// Recovery's block scan then asks for the checksums of every record of each chunk it
    /// reads at once, and compares them with the stored ones as it would its own.
    fn batch_crc32(&self) -> bool {
        false
    }

    /// Appends to `out` the crc32 (IEEE) of `buf[start..start + len]` for each `(start, len)`
    /// of `ranges`, in order (every range lies inside `buf`). The default computes them here.
    /// An implementation that computes them elsewhere must compute them over these very bytes
    /// (not over the file again): they are what the store goes on to use.
    fn crc32_ranges(&self, buf: &[u8], ranges: &[(u32, u32)], out: &mut Vec<u32>) {
        out.extend(ranges.iter().map(|&(start, len)| {
            let start = start as usize;
            crate::framing::crc32(&buf[start..start + len as usize])
        }));
    }

    /// Reads exactly `len` bytes at `offset` into `buf[..len]` (or fails with
    /// `UnexpectedEof`); `buf` may be longer after, and holds nothing meaningful after an
    /// error. The default grows `buf` if needed (without re-zeroing what it has) and reads into
    /// it. A file whose reads arrive in a buffer of their own (the wasm guest's: a list its
    /// host wrote into guest memory) puts that buffer in `buf` instead of copying it. Recovery's
    /// block scan reads through this.
    #[track_caller]
    fn read_vec_at(&self, buf: &mut Vec<u8>, len: usize, offset: u64) -> io::Result<()> {
        if buf.len() < len {
            buf.resize(len, 0);
        }
        self.read_exact_at(&mut buf[..len], offset)
    }

    /// [`FastPaths::read_vec_at`], and appends to `crcs` the crc32 of each whole record framed
    /// from `buf[0]` by the records' length fields (`record::frame`: the bytes each record's
    /// crc covers), in order. Called only when [`FastPaths::batch_crc32`] says true. The
    /// default is [`read_framed_by_ranges`]; the wasm guest's file has its host read, frame and
    /// checksum in one call, so the bytes cross into the guest once and never back. A wrong or
    /// missing crc cannot pass a damaged record: the scan compares each with the stored one,
    /// and checks a record without one itself.
    #[track_caller]
    fn read_framed_at(
        &self,
        buf: &mut Vec<u8>,
        len: usize,
        offset: u64,
        crcs: &mut Vec<u32>,
    ) -> io::Result<()> {
        read_framed_by_ranges(self, buf, len, offset, crcs)
    }
}

/// Who holds a lock that [`Fs::lock`] could not take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockHolder {
    /// Where the lock is, as the backend names it (host-fs: the lock file's path on the host).
    pub path: String,
    /// The holder's process id, where the backend knows it.
    pub pid: Option<u32>,
    /// Who holds it, in words; where a lock can outlive its holder (a backend without OS
    /// locks), also how to clear a stale one.
    pub detail: String,
}

/// Why [`Fs::lock`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum LockError {
    /// Someone else holds the lock (another process, or another handle in this one).
    Held(LockHolder),
    /// The filesystem failed while taking it.
    Io(io::Error),
}

impl From<io::Error> for LockError {
    fn from(e: io::Error) -> Self {
        LockError::Io(e)
    }
}

/// A lock taken by [`Fs::lock`], held until this value is dropped. What it holds (an open file
/// with an OS lock, a handle that removes a marker file) is the backend's.
#[must_use = "the lock is released when this value is dropped"]
pub struct FsLock(#[allow(dead_code)] Box<dyn Send + Sync>);

impl FsLock {
    /// A lock whose release is dropping `held` (an OS-locked file, a guard with a `Drop`).
    pub fn new(held: impl Send + Sync + 'static) -> Self {
        FsLock(Box::new(held))
    }
}

impl std::fmt::Debug for FsLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FsLock")
    }
}

/// The locks of an in-memory filesystem: the names held now, shared by every handle (clone)
/// of that filesystem. For backends without an OS (fault-fs, tests): [`MemLocks::lock`] is
/// an [`Fs::lock`] that keeps the contract within one process.
#[derive(Clone, Debug, Default)]
pub struct MemLocks(std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>);

impl MemLocks {
    /// Takes `name`, or says it is held (by this process: `pid` is ours).
    pub fn lock(&self, name: &str) -> Result<FsLock, LockError> {
        if !self.held().insert(name.to_string()) {
            return Err(LockError::Held(LockHolder {
                path: name.to_string(),
                pid: Some(std::process::id()),
                detail: "held through another handle of this in-memory filesystem".into(),
            }));
        }
        Ok(FsLock::new(MemLockGuard {
            locks: self.clone(),
            name: name.to_string(),
        }))
    }

    /// Releases every lock, as a power cut or the end of every process would; the
    /// [`FsLock`]s still around then release nothing when dropped.
    pub fn release_all(&self) {
        self.held().clear();
    }

    /// Whether `name` is held now.
    pub fn is_held(&self, name: &str) -> bool {
        self.held().contains(name)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeSet<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct MemLockGuard {
    locks: MemLocks,
    name: String,
}

impl Drop for MemLockGuard {
    fn drop(&mut self) {
        self.locks.held().remove(&self.name);
    }
}

/// A directory tree the store lives in. Each method corresponds to the `std::fs` function of the
/// same name, but only relative to the root (see the module docs for paths and durability).
pub trait Fs: Send + Sync {
    /// The open-file type.
    type File: FsFile;

    /// Opens or creates a file, as `std::fs::OpenOptions::open`. Opening a directory fails with
    /// `IsADirectory`; a missing parent is `NotFound`.
    #[track_caller]
    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<Self::File>;

    /// Creates one directory (`std::fs::create_dir`): the parent must exist; `AlreadyExists` if
    /// the name exists. Durable after `sync_dir` of the parent.
    #[track_caller]
    fn create_dir(&self, path: &str) -> io::Result<()>;

    /// Lists a directory, sorted by name, without `.` and `..`.
    #[track_caller]
    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>>;

    /// Renames `from` to `to` atomically (`std::fs::rename`). An existing file at `to` is replaced;
    /// a directory may be renamed to a name that does not exist or onto an empty directory
    /// (`DirectoryNotEmpty` otherwise). Durable after `sync_dir` of both parents.
    #[track_caller]
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;

    /// Removes a file (`std::fs::remove_file`). Durable after `sync_dir` of the parent.
    #[track_caller]
    fn remove_file(&self, path: &str) -> io::Result<()>;

    /// Removes a directory and everything below it (`std::fs::remove_dir_all`). Durable after
    /// `sync_dir` of the parent.
    #[track_caller]
    fn remove_dir_all(&self, path: &str) -> io::Result<()>;

    /// Makes the entries of directory `path` (creations, renames, removals) durable: open the
    /// directory and fsync it. `""` is the root.
    #[track_caller]
    fn sync_dir(&self, path: &str) -> io::Result<()>;

    /// Takes the exclusive lock `name` (a file name in the root; the store uses
    /// `LOCK`) without waiting. The store takes it at open, before recovery
    /// touches anything, and holds it until it is closed or dropped; `verify` and `restore`
    /// hold it while they run. The contract:
    /// - **Exclusive**: while an [`FsLock`] for `name` exists, every other `lock(name)` that
    ///   reaches the same storage, from another process or through another handle of this
    ///   one, returns [`LockError::Held`] at once. It never blocks and never succeeds twice.
    /// - **Released** when the `FsLock` is dropped, and by the holder's death (process exit,
    ///   `kill -9`, a power cut) wherever the backend can know of it (an OS lock held by the
    ///   process). A backend that cannot know (WASI has no file locks) may refuse after its
    ///   holder died; its [`LockHolder::detail`] then says how to clear the stale lock.
    /// - **Outside the data**: the backend keeps its lock in `name` or in names beginning
    ///   with `name.`, which the store never reads as data and ignores wherever it lists
    ///   the root. Taking the lock needs no fsync, and its files may be left behind.
    #[track_caller]
    fn lock(&self, name: &str) -> Result<FsLock, LockError>;

    /// The encryption and compression this filesystem applies to what is written through it:
    /// `None` for a plain one (the default); [`crate::CryptFs`] says what it does.
    /// [`crate::Store::open`] compares it with [`crate::Config::encryption`] and
    /// [`crate::Config::compression`], so that a store meant to be encrypted is never
    /// written in the clear.
    fn layer(&self) -> Option<&crate::LayerConfig> {
        None
    }

    /// Whether the store may read files this filesystem opened on other threads while it
    /// goes on using it (the default: no). A rebuild then scans blocks on
    /// [`crate::Config::rebuild_threads`] threads. An `Fs` whose behaviour depends on the
    /// order of the calls made to it (one that injects faults by count, or records them for
    /// replay) says no, and sees the calls of a single thread, in a fixed order.
    fn parallel_reads(&self) -> bool {
        false
    }

    /// The wall clock of the system this filesystem belongs to, if it has one (the default:
    /// none). [`crate::Store::builder`] stamps messages with it unless it is given a clock;
    /// store-core itself reads no clock.
    fn wall_clock(&self) -> Option<Box<dyn crate::Clock>> {
        None
    }
}

/// The default [`FastPaths::read_framed_at`]: `file.read_vec_at`, then the frames' checksums
/// from `file.crc32_ranges`. For an implementation that overrides the method for some of its
/// files only (the wasm guest's, whose WASI files cannot ask the host to frame).
pub fn read_framed_by_ranges<H: FastPaths + ?Sized>(
    file: &H,
    buf: &mut Vec<u8>,
    len: usize,
    offset: u64,
    crcs: &mut Vec<u32>,
) -> io::Result<()> {
    file.read_vec_at(buf, len, offset)?;
    let mut ranges = Vec::new();
    crate::framing::frame(&buf[..len], &mut ranges);
    file.crc32_ranges(&buf[..len], &ranges, crcs);
    Ok(())
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

/// Splits a store path into its components, applying the rules every backend shares: absolute
/// paths and `..` are `PermissionDenied`; empty components and NUL bytes are `InvalidInput`;
/// `.` is skipped. The root (`""` or `"."`) gives no components.
pub fn split_path(path: &str) -> io::Result<Vec<&str>> {
    if path.starts_with('/') || path.starts_with('\\') || path.contains(':') && cfg!(windows) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("absolute path refused: {path:?}"),
        ));
    }
    if path.contains('\0') {
        return Err(invalid("path contains NUL"));
    }
    if path.is_empty() || path == "." {
        return Ok(Vec::new());
    }
    let mut parts = Vec::new();
    for comp in path.split('/') {
        match comp {
            "" => return Err(invalid("empty path component")),
            "." => {}
            ".." => {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("path leaves the root: {path:?}"),
                ))
            }
            c if c.contains('\\') => {
                return Err(invalid("backslash in path component"));
            }
            c => parts.push(c),
        }
    }
    Ok(parts)
}

/// The parent directory of a normalized path (`""` for a top-level name).
pub fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[..i],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_rules() {
        assert_eq!(split_path("").unwrap(), Vec::<&str>::new());
        assert_eq!(split_path(".").unwrap(), Vec::<&str>::new());
        assert_eq!(split_path("a/./b").unwrap(), vec!["a", "b"]);
        assert_eq!(
            split_path("/etc").unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        assert_eq!(
            split_path("a/../b").unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        assert_eq!(
            split_path("a//b").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            split_path("a\0").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(parent_of("a/b/c"), "a/b");
        assert_eq!(parent_of("c"), "");
    }

    #[test]
    fn open_options_validate() {
        assert!(OpenOptions::new().validate().is_err());
        assert!(OpenOptions::new()
            .read(true)
            .create(true)
            .validate()
            .is_err());
        assert!(OpenOptions::read_write_create().validate().is_ok());
    }
}
