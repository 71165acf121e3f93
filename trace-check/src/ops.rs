//! The capture's output and the replay's input: what a program did to the files under the
//! checked directory, in the order the operations took effect. Every capture (strace today,
//! fault-fs served as `wasi:filesystem` later) produces a list of [`TracedOp`]s; everything
//! after — replay, exploration, the checker protocol, the report — only sees this type.

use std::fmt;

/// One open file description (what `open` creates and `dup` shares): its position and flags
/// are shared by every descriptor that refers to it. Numbered in order of creation.
pub type Ofd = u64;

/// Open flags that matter to the replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFlags {
    /// `O_RDONLY`/`O_RDWR`.
    pub read: bool,
    /// `O_WRONLY`/`O_RDWR`.
    pub write: bool,
    /// `O_CREAT`.
    pub create: bool,
    /// `O_EXCL` (with `O_CREAT`).
    pub excl: bool,
    /// `O_TRUNC`.
    pub trunc: bool,
    /// `O_APPEND`: every write goes to the end of the file.
    pub append: bool,
    /// `O_DIRECTORY`.
    pub directory: bool,
    /// `O_PATH`: a handle for `*at` calls only, no file access.
    pub path_only: bool,
    /// `O_SYNC`/`O_DSYNC`: every write is durable when it returns (a write then an fsync).
    pub sync: bool,
}

/// Where a write lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteAt {
    /// At this offset (`pwrite`, or `write` at the tracked file position).
    Offset(u64),
    /// At the end of the file as it is when the write takes effect (`O_APPEND`, `RWF_APPEND`).
    Append,
}

/// `fallocate` modes the replay models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Falloc {
    /// Mode 0: the file grows to at least `offset + len` (zeros).
    Extend,
    /// `FALLOC_FL_KEEP_SIZE`: space reserved, nothing visible changes.
    KeepSize,
    /// `FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE`: the range reads as zeros, size unchanged.
    PunchHole,
    /// `FALLOC_FL_ZERO_RANGE`: the range reads as zeros; `keep_size` says whether it may grow.
    ZeroRange {
        /// `FALLOC_FL_KEEP_SIZE` was given too.
        keep_size: bool,
    },
}

/// What a program did; paths are relative to the checked directory ("" is the directory).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// A successful open of `path` (file or directory) as open file description `ofd`.
    Open {
        /// The new open file description.
        ofd: Ofd,
        /// The path opened.
        path: String,
        /// Its flags.
        flags: OpenFlags,
    },
    /// The last descriptor of `ofd` was closed.
    Close {
        /// The description.
        ofd: Ofd,
    },
    /// Bytes written through `ofd` (only the bytes the call reported written).
    Write {
        /// The description.
        ofd: Ofd,
        /// Where.
        at: WriteAt,
        /// What.
        data: Vec<u8>,
    },
    /// `ftruncate`.
    SetLen {
        /// The description.
        ofd: Ofd,
        /// The new length.
        len: u64,
    },
    /// `truncate(path, len)`.
    TruncatePath {
        /// The file.
        path: String,
        /// The new length.
        len: u64,
    },
    /// `fallocate`.
    Fallocate {
        /// The description.
        ofd: Ofd,
        /// What it does.
        mode: Falloc,
        /// Start of the range.
        offset: u64,
        /// Length of the range.
        len: u64,
    },
    /// `fsync`/`fdatasync` of a file or directory description.
    Fsync {
        /// The description.
        ofd: Ofd,
    },
    /// `sync`/`syncfs`: everything becomes durable.
    SyncAll,
    /// `sync_file_range`: makes nothing durable (no metadata, no device flush); kept so that
    /// the report can show it.
    SyncFileRange {
        /// The description.
        ofd: Ofd,
    },
    /// `mkdir`.
    Mkdir {
        /// The new directory.
        path: String,
    },
    /// `rmdir` / `unlinkat(AT_REMOVEDIR)`.
    Rmdir {
        /// The removed (empty) directory.
        path: String,
    },
    /// `unlink`.
    Unlink {
        /// The removed name.
        path: String,
    },
    /// A rename (or an entry moved out of the checked directory: `to` is `None`, and the entry
    /// is gone as if removed).
    Rename {
        /// Source.
        from: String,
        /// Target, `None` when outside the checked directory.
        to: Option<String>,
        /// `RENAME_NOREPLACE`.
        noreplace: bool,
    },
    /// `renameat2(RENAME_EXCHANGE)`.
    Exchange {
        /// One name.
        a: String,
        /// The other.
        b: String,
    },
    /// `link(from, to)`.
    Link {
        /// The existing file.
        from: String,
        /// The new name.
        to: String,
    },
    /// A line the workload wrote to the marks file: what it was promised at this point.
    Mark(String),
}

/// One operation with where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracedOp {
    /// 1-based line of the trace where the operation completed (for a call split across
    /// threads' output, the `<... resumed>` line: an operation takes effect at its completion).
    pub line: usize,
    /// The call as the trace shows it (joined if it was split), e.g.
    /// `pwrite64(9</d/2.blk>, "..."..., 30, 0) = 30`, shortened to at most 160 characters.
    pub text: String,
    /// What it did.
    pub op: Op,
}

impl fmt::Display for TracedOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.text)
    }
}

/// What a capture hands to the checker: the operations, plus what it noticed but could not
/// attribute (calls cut short by a kill, whose effect is unknown).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    /// The operations on the checked directory and the marks, in order of completion.
    pub ops: Vec<TracedOp>,
    /// Calls on the checked directory that never completed (`= ?`, or unfinished at the end):
    /// they are left out of the replay (the process died in them).
    pub incomplete: Vec<String>,
    /// Trace lines read.
    pub lines: usize,
    /// Trace bytes read.
    pub bytes: usize,
}
