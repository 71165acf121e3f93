//! The small public value types: models, configuration, errors, trace entries, faults.

use std::fmt;
use std::io;
use std::panic::Location;
use std::str::FromStr;

/// What a crash may forget. See the crate docs for the precise rules of each model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Model {
    /// The worst case POSIX allows: unsynced data *and* unsynced namespace operations are lost.
    #[default]
    Posix,
    /// LazyFS over ext4 (the model of Jepsen's NATS analysis): namespace operations are durable
    /// at once and in order; only unsynced file data is lost, and what survives of it is a
    /// prefix in issue order.
    Ordered,
}

impl Model {
    /// Both models, for iterating a crash matrix.
    pub const ALL: [Model; 2] = [Model::Posix, Model::Ordered];
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Model::Posix => "posix",
            Model::Ordered => "ordered",
        })
    }
}

impl FromStr for Model {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "posix" => Ok(Model::Posix),
            "ordered" => Ok(Model::Ordered),
            _ => Err(Error::UnknownModel(s.to_string())),
        }
    }
}

/// Errors of fault-fs's own API (filesystem operations return `io::Error`, as the trait says).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// `Model::from_str` got something other than `posix` or `ordered`.
    UnknownModel(String),
    /// A sector size of 0 (tearing needs a positive granularity).
    InvalidSectorSize(u64),
    /// A probability outside `0.0..=1.0` (or NaN).
    InvalidProbability(f64),
    /// `replay_image` was asked for a crash point past the end of the recorded trace.
    NoSuchCrashPoint {
        /// What was asked for.
        crash_point: usize,
        /// The number of operations the workload issued (the last crash point).
        ops: usize,
    },
    /// `replay_image_from` got a start filesystem whose settings are not the exploration's.
    StartSettingsDiffer,
    /// `replay_image` was asked for an image number the crash point does not have.
    NoSuchImage {
        /// The crash point.
        crash_point: usize,
        /// What was asked for.
        image: usize,
        /// How many distinct images the crash point has.
        images: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownModel(s) => write!(f, "unknown model {s:?} (expected posix or ordered)"),
            Error::InvalidSectorSize(s) => write!(f, "invalid sector size {s} (must be > 0)"),
            Error::InvalidProbability(p) => write!(f, "invalid probability {p} (need 0..=1)"),
            Error::NoSuchCrashPoint { crash_point, ops } => {
                write!(
                    f,
                    "no crash point {crash_point}: the workload issued {ops} operations"
                )
            }
            Error::StartSettingsDiffer => write!(
                f,
                "the start filesystem's settings differ from the exploration's (cfg.fs)"
            ),
            Error::NoSuchImage {
                crash_point,
                image,
                images,
            } => write!(
                f,
                "crash point {crash_point} has {images} images, no image {image}"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Settings of a [`FaultFs`](crate::FaultFs). `FaultFsConfig::new(model)` gives the defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultFsConfig {
    /// What a crash may forget.
    pub model: Model,
    /// Granularity of torn writes in bytes (default 512, a disk sector). Must be > 0.
    pub sector_size: u64,
    /// Largest file length accepted (default 1 GiB); a write or `set_len` beyond fails with
    /// `FileTooLarge` (EFBIG) instead of exhausting memory.
    pub max_file_size: u64,
    /// How many sector boundaries per unsynced write the image enumerator tears at (default 4,
    /// spread evenly, first and last included). Random images may tear at any boundary.
    pub max_tears_per_write: usize,
}

impl FaultFsConfig {
    /// The defaults for `model`.
    pub fn new(model: Model) -> Self {
        FaultFsConfig {
            model,
            sector_size: 512,
            max_file_size: 1 << 30,
            max_tears_per_write: 4,
        }
    }

    /// Sets the sector size (checked by [`FaultFsConfig::validate`]).
    pub fn sector_size(mut self, bytes: u64) -> Self {
        self.sector_size = bytes;
        self
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), Error> {
        if self.sector_size == 0 {
            return Err(Error::InvalidSectorSize(self.sector_size));
        }
        Ok(())
    }
}

impl Default for FaultFsConfig {
    fn default() -> Self {
        FaultFsConfig::new(Model::Posix)
    }
}

/// A line of source code that issued an operation (from `#[track_caller]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallSite {
    /// The file, as rustc names it (relative to the workspace root for workspace crates).
    pub file: &'static str,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl CallSite {
    pub(crate) fn from_location(l: &'static Location<'static>) -> Self {
        CallSite {
            file: l.file(),
            line: l.line(),
            column: l.column(),
        }
    }
}

impl fmt::Display for CallSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// The kinds of filesystem operation, one per method of `Fs` and `FsFile`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum OpKind {
    /// `Fs::open`
    Open,
    /// `Fs::create_dir`
    CreateDir,
    /// `Fs::read_dir`
    ReadDir,
    /// `Fs::rename`
    Rename,
    /// `Fs::remove_file`
    RemoveFile,
    /// `Fs::remove_dir_all`
    RemoveDirAll,
    /// `Fs::sync_dir`
    SyncDir,
    /// `FsFile::read_at`
    ReadAt,
    /// `FsFile::write_all_at`
    WriteAt,
    /// `FsFile::len`
    Len,
    /// `FsFile::set_len`
    SetLen,
    /// `FsFile::sync_data`
    SyncData,
    /// `FsFile::sync_all`
    SyncAll,
    /// [`FaultFs::hard_link`](crate::FaultFs::hard_link)
    HardLink,
    /// [`FaultFs::exchange`](crate::FaultFs::exchange)
    Exchange,
}

impl OpKind {
    /// Whether this is one of the three syncs (their failure has fsyncgate semantics).
    pub fn is_sync(self) -> bool {
        matches!(self, OpKind::SyncDir | OpKind::SyncData | OpKind::SyncAll)
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Open => "open",
            OpKind::CreateDir => "create_dir",
            OpKind::ReadDir => "read_dir",
            OpKind::Rename => "rename",
            OpKind::RemoveFile => "remove_file",
            OpKind::RemoveDirAll => "remove_dir_all",
            OpKind::SyncDir => "sync_dir",
            OpKind::ReadAt => "read_at",
            OpKind::WriteAt => "write_all_at",
            OpKind::Len => "len",
            OpKind::SetLen => "set_len",
            OpKind::SyncData => "sync_data",
            OpKind::SyncAll => "sync_all",
            OpKind::HardLink => "hard_link",
            OpKind::Exchange => "exchange",
        })
    }
}

/// The argument of a traced operation beyond its path(s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpArg {
    /// Nothing more.
    None,
    /// A read or write of `len` bytes at `offset`.
    Range {
        /// Byte offset.
        offset: u64,
        /// Byte count.
        len: u64,
    },
    /// The new length of a `set_len`.
    Len(u64),
    /// The flags of an `open`.
    Open(seqstore_core::fs::OpenOptions),
}

/// One traced operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// 0-based position in the trace (= `op_count()` just before it was issued).
    pub index: u64,
    /// Which method.
    pub kind: OpKind,
    /// The path; for file methods, the path the handle was opened with.
    pub path: String,
    /// The target of a rename.
    pub to: Option<String>,
    /// Offsets, lengths, flags.
    pub arg: OpArg,
    /// The line of code that called the method.
    pub call_site: CallSite,
    /// `Ok` or the error kind returned.
    pub result: Result<(), io::ErrorKind>,
    /// Whether the operation changed the filesystem's state (a crash point after a read-only
    /// operation is the same as the one before it).
    pub mutated: bool,
}

impl fmt::Display for TraceEntry {
    /// E.g. `rename msgs -> __old`, `write_all_at msgs/1.blk [0..30)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, display_path(&self.path))?;
        if let Some(to) = &self.to {
            write!(f, " -> {}", display_path(to))?;
        }
        match self.arg {
            OpArg::None => {}
            OpArg::Range { offset, len } => write!(f, " [{}..{})", offset, offset + len)?,
            OpArg::Len(l) => write!(f, " to {l}")?,
            OpArg::Open(o) => {
                let flags: Vec<&str> = [
                    (o.read, "read"),
                    (o.write, "write"),
                    (o.create, "create"),
                    (o.create_new, "create_new"),
                    (o.truncate, "truncate"),
                ]
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, n)| *n)
                .collect();
                write!(f, " ({})", flags.join(","))?;
            }
        }
        if let Err(k) = self.result {
            write!(f, " = Err({k:?})")?;
        }
        Ok(())
    }
}

fn display_path(p: &str) -> &str {
    if p.is_empty() {
        "."
    } else {
        p
    }
}

/// An injected failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// EIO: `io::ErrorKind::Other` with the message "EIO (injected)".
    Eio,
    /// ENOSPC: `io::ErrorKind::StorageFull`.
    Enospc,
}

impl FaultKind {
    pub(crate) fn error(self) -> io::Error {
        match self {
            FaultKind::Eio => io::Error::other("EIO (injected)"),
            FaultKind::Enospc => io::Error::new(io::ErrorKind::StorageFull, "ENOSPC (injected)"),
        }
    }
}

/// What [`crate::FaultFs::stat`] found at a path of the live tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stat {
    /// A directory.
    Dir,
    /// A file of `len` bytes.
    File {
        /// Its length.
        len: u64,
    },
}
