//! An in-memory [`seqstore_core::Fs`] that knows what a power cut would keep.
//!
//! `fault-fs` runs the store (or any code written against [`Fs`](seqstore_core::Fs)) on a
//! filesystem in memory that tracks, for every file and directory, what is *durable* and what is
//! only *live*. From any state it builds **crash images**: the filesystems a power cut could
//! leave under a chosen [`Model`]. On top of that it injects faults (EIO, ENOSPC, failing fsyncs
//! with Linux's semantics, bit flips) and [`explore`]s a workload: it crashes at every operation
//! boundary, checks every image there, names the line of code whose effect was not durable, and
//! [`shrink`]s a failing workload.
//!
//! Without crashes it behaves like a real filesystem: it passes store-core's conformance suite
//! and a differential test against host-fs on a real directory.
//!
//! ```
//! use seqstore_fault_fs::{FaultFs, Model};
//! use seqstore_core::fs::{Fs, FsFile, OpenOptions};
//!
//! let fs = FaultFs::new(Model::Posix);
//! let f = fs.open("log", OpenOptions::read_write_create()).unwrap();
//! f.write_all_at(b"record", 0).unwrap();
//! f.sync_data().unwrap();
//! // the data is durable, but the name "log" is not: its directory was never synced
//! assert!(fs.crash().list_tree().is_empty());
//! fs.sync_dir("").unwrap();
//! assert_eq!(fs.crash().read_file("log").unwrap(), b"record");
//! ```
//!
//! # The state
//! An inode table: a file has *live* contents (what reads see) and *durable* contents; a
//! directory has live and durable entries. Open handles refer to the inode, so a write through
//! a handle after its file was renamed lands in that file, and a file removed while open can
//! still be read and written (a crash loses it: no name reaches it). Next to that, the
//! operations that are not durable yet are logged in issue order:
//! - per file, the data operations (`write_all_at`, `set_len`, an `open` with `truncate`) since
//!   its last successful `sync_data`/`sync_all`. Such a sync makes the file's data *and length*
//!   durable — never its name;
//! - (Posix only) the namespace operations (create, mkdir, unlink, rmdir/`remove_dir_all`,
//!   rename). Each waits for a `sync_dir` of its parent directory — for a rename, of *both*
//!   parents — issued after it; then it is durable.
//!
//! Contents are copy-on-write pages and every structure is shared (`Arc`), so a snapshot of the
//! whole state is a few pointer copies and an image costs only what it changes.
//!
//! # The models
//! A crash replaces the live state by the durable state plus some of the unsynced operations,
//! as the model allows. Every model may keep *nothing* unsynced (the pessimistic image,
//! [`FaultFs::crash`]); the models differ in what else may survive.
//!
//! ## [`Model::Posix`]: the worst case POSIX allows
//! What POSIX and the Linux `fsync(2)` man page promise and nothing more ("calling fsync() does
//! not necessarily ensure that the entry in the directory containing the file has also reached
//! disk; for that an explicit fsync() on a file descriptor for the directory is also needed").
//! It stands for filesystems that do not order metadata updates — ext2 and other filesystems
//! without a journal, vfat, many FUSE and network filesystems — and is the model that ALICE
//! (OSDI '14) and CrashMonkey check applications against. Rules:
//! - unsynced file data (writes, `set_len`, truncation) may be lost: any subset of a file's
//!   unsynced data operations may survive, independently of other files;
//! - a create, unlink, mkdir, `remove_dir_all` or rename survives only if its parent directory
//!   (both parents for a rename) was synced after it; before that, any subset of the unsynced
//!   namespace operations may survive, in any combination with the data operations;
//! - unlinks and both sides of a rename are undone like creates (RocksDB's
//!   FaultInjectionTestFS never undoes a delete; LazyFS passes metadata through);
//! - rename is atomic: an image shows the old name or the new one, never both or neither.
//!   Because it waits for both parents, a rename out of a directory that is then removed (or
//!   replaced) before being synced can never become durable: sync the source directory first;
//! - a file or directory whose name did not survive is gone, with everything below it;
//! - `remove_dir_all` of a tree is one unlink of its top entry: undone, the whole tree is back.
//!
//! ## [`Model::Ordered`]: LazyFS over ext4
//! What Jepsen's LazyFS simulates (used against NATS 2.12.1 in December 2025): LazyFS keeps file
//! data in its own page cache and loses what was not fsynced, but passes namespace operations
//! straight to the underlying ext4, where they survive its simulated crash. Rules:
//! - namespace operations are durable at once and in order (`sync_dir` has nothing to do);
//! - unsynced file data may be lost; what survives of it is a **prefix** of all unsynced data
//!   operations in issue order, across files (the last kept one possibly torn) — the ordering an
//!   ext4 `data=ordered` journal gives to appends that are committed together.
//!
//! This is the optimistic model: a real power cut on ext4 may also lose the last namespace
//! operations (in order); the Posix model covers that and more.
//!
//! ## Torn writes
//! An unsynced write that survives may be *torn* at a sector boundary (512 bytes by default,
//! [`FaultFsConfig::sector_size`]; boundaries are file offsets that are multiples of it,
//! strictly inside the write):
//! - *head* tear (both models): only the sectors before the boundary are written, and the file
//!   grows only up to the boundary;
//! - *tail* tear (Posix, random images only): only the sectors from the boundary on are
//!   written, the file grows to the write's end, and the sectors before keep their old contents
//!   (zeros past the old end) — ALICE's "garbage, then data" for appends.
//!
//! Data operations are all-or-nothing at sector granularity and are applied in issue order; the
//! subset model can therefore produce a sector that never existed at any single instant (e.g. a
//! later write kept over an earlier one dropped), which is stricter than a disk with atomic
//! sectors — a store must not rely on sub-sector ordering of unsynced writes either way.
//!
//! ## Applying a subset: the skip rule
//! An image is built from the durable base (everything up to the first non-durable namespace
//! operation) by replaying the remaining namespace log in issue order — the durable entries and
//! the chosen unsynced ones — and then the chosen data operations of each reachable file. An
//! operation whose preconditions do not hold *in the image being built* is skipped (it has no
//! effect in that image), because without the operations it depended on it cannot have taken
//! effect on disk. The preconditions are those of the system call:
//! - create / mkdir: the name is free in the directory;
//! - unlink / `remove_dir_all`: the name refers to the very inode that was removed;
//! - rename: the source name refers to the moved inode; an existing target is of the same kind
//!   (a file replaces a file, a directory replaces an *empty* directory) and is not the moved
//!   inode itself; a directory does not move into itself or below itself.
//!
//! For example, "rename `d/x` → `e/x`, unlink `e/x`, sync `e`" makes the unlink durable but
//! not the rename (which waits for `d`): the pessimistic image applies the unlink, finds no
//! `e/x`, skips it, and shows `d/x` — the rename was undone whole, and the unlink of a name that
//! never reached the disk changes nothing. The same rule folds durable operations into the base.
//! Data operations have no preconditions (a file that is not reachable is simply not in the
//! image).
//!
//! # Crash images
//! - [`FaultFs::crash`]: nothing unsynced survives (under Ordered: the namespace survives, the
//!   unsynced data does not).
//! - [`FaultFs::crash_seeded`]: a random image the model allows (Posix: each unsynced operation
//!   kept with a per-image probability of 10–90 %, kept writes torn a quarter of the time;
//!   Ordered: a random prefix, its last write torn half the time), reproducible from the seed
//!   with the crate's own splitmix64.
//! - [`FaultFs::crash_images`]: the bounded ALICE-style set — nothing kept, everything kept, and
//!   for each unsynced operation from the newest back: the prefix before it, everything but it
//!   (Posix), and it torn at up to [`FaultFsConfig::max_tears_per_write`] boundaries (after its
//!   prefix, and in Posix also with everything else kept). Images are deduplicated by a
//!   canonical 64-bit hash of their tree; the order is deterministic.
//!
//! Each image is a fresh [`FaultFs`] with the same settings and no faults, whose live state is
//! the image and in which everything is durable (crashing it again changes nothing).
//!
//! # Faults
//! Five orthogonal knobs: [`FaultFs::fail_op`] (the operation with that trace index fails),
//! [`FaultFs::fail_kind`] (every operation of an [`OpKind`] fails), [`FaultFs::set_capacity`]
//! (ENOSPC when live file data would exceed it), [`FaultFs::bit_flip_on_read`], and
//! [`FaultFs::clear_faults`]. An injected EIO is `io::ErrorKind::Other` with the message
//! "EIO (injected)"; ENOSPC is `io::ErrorKind::StorageFull`. A failed operation has no effect,
//! except a sync, which fails with Linux's semantics ("fsyncgate"): the file's dirty data is
//! dropped from the pending log — reads still see it, it will never become durable, and a later
//! sync returns `Ok` without making it so. A failed `sync_dir` likewise loses the namespace
//! operations waiting on that directory for good. Only writes after the failure can be made
//! durable again.
//!
//! # The explorer
//! [`explore`] runs a workload — a list of steps and a closure running one step on the live
//! filesystem, noting acknowledged facts in a [`Journal`] — once, taking a snapshot after every
//! operation that changed the state. Then, at every operation boundary (point 0 before any
//! operation, after every state-changing operation, and wherever the journal got an entry), it
//! builds the crash images (the bounded enumeration plus seeded random ones, deduplicated) and
//! runs the checker on each, catching panics. A [`Violation`] names the crash point, the last
//! operation and its call site (from `#[track_caller]`), the model, the seed, the image, and the
//! unsynced operation(s) whose loss caused it ([`Blame`]: found by re-checking the image with
//! each lost operation kept). The same configuration gives the same report. [`replay_image`]
//! rebuilds one image for debugging; [`shrink`] removes workload steps while a violation
//! persists.
//!
//! [`explore_from`] (and [`replay_image_from`]) run the workload on a copy of an existing
//! filesystem instead of an empty one. Started on a crash image with recovery as the workload,
//! it crashes the recovery itself at every operation boundary: the images it checks are the
//! "crash during recovery" states.
//!
//! # Beyond the `Fs` trait
//! For replaying real programs' syscalls (`trace-check/`): [`FaultFs::from_dir`] loads a real
//! directory with everything in it durable; [`FaultFs::hard_link`] (`link(2)`) and
//! [`FaultFs::exchange`] (`renameat2(RENAME_EXCHANGE)`) are namespace operations with the same
//! rules as a create and a rename (an exchange is atomic: both names swapped or neither).
//! For serving the tree to a running program (`wasi-trace/`): [`FaultFs::stat`] answers what
//! the live tree holds at a path without an operation (not traced, no faults).
//!
//! # Not modelled
//! Symlinks, permissions and timestamps; `close` is not a sync (dropping a handle
//! changes nothing durable); `sync_all` and `sync_data` are the same (data and length, never the
//! name); a torn `set_len`; a short write (an injected or capacity failure of a write has no
//! effect at all). Directories are limited to 255-byte names (ENAMETOOLONG, as Linux), files to
//! [`FaultFsConfig::max_file_size`] (EFBIG) so that bad offsets cannot exhaust memory.
//!
//! # Panics
//! The library does not panic on any input. Internal invariants (an inode referenced but
//! missing) surface as `io::ErrorKind::Other` errors saying "fault-fs internal invariant
//! broken". The explorer catches panics of the workload and the checker; with
//! [`ExploreConfig::quiet_panics`] it installs, once, a panic hook that stays silent on a thread
//! while that thread runs a workload step or checker and delegates to the previous hook
//! otherwise.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod core;
mod data;
mod explore;
mod fs;
mod host;
mod image;
mod rng;
mod types;

pub use explore::{
    explore, explore_from, replay_image, replay_image_from, shrink, Blame, CrashCtx, ExploreConfig,
    Journal, Progress, ProgressFn, Replay, Report, Violation,
};
pub use fs::{FaultFile, FaultFs};
pub use rng::Rng;
pub use types::{
    CallSite, Error, FaultFsConfig, FaultKind, Model, OpArg, OpKind, Stat, TraceEntry,
};
