//! The stream store: the `Store` type, open and close. Each concern of the store lives in a
//! file of its own below (see ARCHITECTURE.md for the data flow, the write path with every
//! fsync, and the byte layouts).

use crate::clock::Clock;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::fs::Fs;
use blocks::Blocks;
use entry_cache::EntryBudget;
use files::FileBound;
use sequence::Sequence;
use std::io;
use subjects::SubjectTable;
use sync::{Durability, S_OPEN_LIMITS};

mod append;
mod batch;
mod blocks;
mod builder;
mod cache;
mod consumer_checkpoint;
mod consumers;
mod entries;
mod entry_cache;
mod export;
mod files;
mod import;
mod layout;
mod limits;
mod log;
mod pipeline;
mod prescan;
mod purge;
mod query;
mod read;
mod recover;
mod remove;
mod replay;
mod scan;
mod seal;
mod sequence;
mod skip;
mod snapshot;
mod subj_counts;
mod subjects;
mod sync;
mod tail;
mod truncate;
mod ttl;
mod types;

pub use builder::StoreBuilder;
pub(crate) use export::write_export;
pub use export::{SnapshotInfo, SNAPSHOT_VERSION};
pub use import::{restore, RESTORED_CONSUMERS, RESTORE_STAGE};
pub(crate) use layout::{block_path, parse_block_name};
pub use layout::{is_lock_name, INDEX_FILE, INDEX_TMP, LOCK_FILE, MSGS_DIR, PURGE_NEW, PURGE_OLD};
pub(crate) use replay::{Replay, Verdict};
pub(crate) use scan::{scan_block, ScanEnd};
pub(crate) use snapshot::load_index;
pub use subjects::FxHasher;
pub use sync::{SyncSite, SYNC_SITES};
pub use types::{
    Cut, FilteredState, OutOfOrderRecord, RecoveryReport, SeqRange, SkippedRecord, StoredMsg,
    StreamState,
};

/// A message-stream store on a filesystem `F`.
pub struct Store<F: Fs> {
    pub(crate) fs: F,
    pub(crate) cfg: Config,
    clock: Box<dyn Clock>,
    /// The blocks, oldest first, with the block cache's bookkeeping and what a purge retired.
    blocks: Blocks<F::File>,
    /// The bound on loaded entries' bookkeeping (`entry_cache.rs`).
    entry_budget: EntryBudget,
    /// The bound on open block files' bookkeeping (`files.rs`).
    open_files: FileBound,
    /// Pending bytes of the newest block, to be written at `blocks.last().len`.
    wbuf: Vec<u8>,
    /// The sequence range, the floor and the totals (`sequence.rs`).
    seq: Sequence,
    subjects: SubjectTable,
    closed: bool,
    /// Poisoning, the directory entries not yet durable, the group commit's watermark and
    /// files in flight, the last sync's time (`sync.rs`).
    pub(crate) dur: Durability<F::File>,
    report: RecoveryReport,
    /// The messages with a time to live, by sequence and by deadline (`ttl.rs`).
    ttl: ttl::TtlIndex,
    /// The consumers and their journal (`crate::consumer`).
    pub(crate) consumers: crate::consumer::journal::Consumers<F::File>,
    /// The store's lock ([`LOCK_FILE`]), held for the store's life: released after `Drop`
    /// has written out the buffer.
    _lock: crate::fs::FsLock,
}

/// A clock for [`Store::open`]: store-core reads no clock, so without one each call returns
/// one nanosecond more than the last: the builder's clock when the filesystem has no wall clock.
#[derive(Default)]
pub(crate) struct LogicalClock(std::sync::atomic::AtomicI64);

impl Clock for LogicalClock {
    fn now_ns(&self) -> i64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
    }
}

/// Takes the store's lock on `fs` ([`LOCK_FILE`], see [`Fs::lock`]) as [`Store::open`] does:
/// for an embedder that holds it on a store's behalf (the wasm host, for the store inside
/// its guest, whose own filesystem takes no lock). Held until the returned value is dropped;
/// a store open elsewhere is [`Error::Locked`].
pub fn lock_store<F: Fs + ?Sized>(fs: &F) -> Result<crate::fs::FsLock> {
    fs.lock(LOCK_FILE).map_err(|e| Error::lock(LOCK_FILE, e))
}

pub(crate) use lock_store as take_lock;

pub(crate) fn io_at<T>(r: io::Result<T>, op: &'static str, path: &str) -> Result<T> {
    r.map_err(|e| Error::io(op, path, e))
}

/// The stream's state and whether the handle is closed or poisoned (not its files or caches).
impl<F: Fs> std::fmt::Debug for Store<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("state", &self.state())
            .field("closed", &self.closed)
            .field("poisoned", &self.dur.poisoned())
            .finish_non_exhaustive()
    }
}

impl<F: Fs> Drop for Store<F> {
    fn drop(&mut self) {
        if !self.closed && !self.dur.poisoned() {
            let _ = self.flush();
        }
    }
}

impl<F: Fs> Store<F> {
    /// Opens (or creates) the store at the root of `fs` with `cfg`: short for
    /// `Store::builder(fs).config(cfg).open()` (the filesystem's wall clock, else a logical
    /// counter; [`StoreBuilder`] for another clock or the encryption layer).
    ///
    /// Recovery, in order: finish or roll back an interrupted purge (from the directories it
    /// finds); load `index.db` if the blocks it lists are as it recorded them, reading only what
    /// was written after it (after a crash: the last block's growth and any newer blocks),
    /// else rebuild from the blocks (cutting torn tails, reporting lost sequences); fsync both directories so that nothing
    /// acknowledged later can depend on a name that is not durable; re-enforce limits, and
    /// fsync what they removed.
    ///
    /// Before any of it, open takes the store's lock (the file `LOCK`, see [`Fs::lock`]): a
    /// store another process (or another `Store` of this one) has open is [`Error::Locked`],
    /// and nothing was read or changed. Share one store between threads with
    /// [`crate::SharedStore`].
    pub fn open(fs: F, cfg: Config) -> Result<Self> {
        Self::builder(fs).config(cfg).open()
    }

    /// Opens (or creates) the store at the root of `fs`, taking time from `clock` (what
    /// [`StoreBuilder::open`] does).
    pub(crate) fn open_with_clock(fs: F, cfg: Config, clock: Box<dyn Clock>) -> Result<Self> {
        cfg.validate()?;
        #[cfg(feature = "ablation")]
        if cfg.ablation == crate::Ablation::NoStoreLock {
            return Self::open_locked(fs, cfg, clock, crate::fs::FsLock::new(()));
        }
        let lock = take_lock(&fs)?;
        Self::open_locked(fs, cfg, clock, lock)
    }

    /// `open_with_clock` under a lock the caller took already (`restore` holds it
    /// from its first write to the open that checks what it wrote).
    pub(crate) fn open_locked(
        fs: F,
        cfg: Config,
        clock: Box<dyn Clock>,
        lock: crate::fs::FsLock,
    ) -> Result<Self> {
        cfg.validate()?;
        cfg.check_layer(fs.layer()).map_err(Error::InvalidConfig)?;
        let now = clock.now_ns();
        let entry_cache = cfg.entry_cache;
        let mut s = Store {
            fs,
            cfg,
            clock,
            blocks: Blocks::new(),
            entry_budget: EntryBudget::new(Self::trim_threshold(entry_cache)),
            open_files: FileBound::default(),
            wbuf: Vec::new(),
            seq: Sequence::default(),
            subjects: SubjectTable::new(),
            closed: false,
            dur: Durability::new(now),
            report: RecoveryReport::default(),
            ttl: ttl::TtlIndex::default(),
            consumers: Default::default(),
            _lock: lock,
        };
        s.recover_purge()?;
        s.finish_restored_consumers()?;
        s.load()?;
        s.begin_own_block();
        // Make the structure we found durable before anything new is acknowledged on top of
        // it: the names may have been created by a process that never synced them.
        s.sync_dir(MSGS_DIR, SyncSite::OpenMsgsDir)?;
        s.sync_dir("", SyncSite::OpenRootDir)?;
        s.dur.names_durable();
        // The newest block (like every block known from index.db) is read on first use: the
        // first append or read that needs it, not here, so that open does not depend on how
        // full it is.
        // What the limits remove at open is a structural change like a compact: durable before
        // open returns, in every policy, so no reader of this instance sees a message gone
        // that a crash brings back.
        let writes = s.dur.writes();
        s.enforce_limits_all()?;
        if s.dur.writes() != writes {
            s.sync_inner(S_OPEN_LIMITS)?;
        }
        // the consumers last: they are clamped to the stream recovered above
        s.open_consumers()?;
        s.maybe_sync()?;
        s.trim_entries();
        Ok(s)
    }

    /// What recovery found and did at open.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed);
        }
        if self.dur.poisoned() {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    fn now(&self) -> i64 {
        self.clock.now_ns()
    }

    /// Marks the store poisoned: it refuses every write (`Error::Poisoned`) until reopened, as
    /// after a failed write or fsync. For an embedder that acknowledged writes before the store
    /// applied them (the wasm host's batching of unsynced appends) and saw one of them fail:
    /// the sequences it handed out after the failed one were never assigned, and must not be
    /// assigned to other messages by this instance.
    pub(crate) fn poison(&mut self) {
        self.dur.poison();
    }

    /// The stream's counters.
    pub fn state(&self) -> StreamState {
        self.seq.state(self.subjects.live())
    }

    fn check_open(&self) -> Result<()> {
        if self.closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Runs time-driven work: the `max_age` limit, expired ttls and the `Interval` sync. Call it from a
    /// timer; store-core runs nothing in the background.
    pub fn tick(&mut self) -> Result<()> {
        self.check_writable()?;
        self.trim_entries();
        self.cleanup();
        // one expiry path for `max_age` and per-message ttls (`enforce_limits`)
        if !self.cfg.limits.max_age.is_zero() || !self.ttl.is_empty() {
            self.enforce_limits(None)?;
        }
        self.maybe_sync()
    }

    /// Syncs, writes `index.db` (see [`Store::checkpoint`]), and closes. Dropping a store without `close` writes out its
    /// buffer (no fsync).
    pub fn close(mut self) -> Result<()> {
        let r = self.checkpoint();
        self.closed = true;
        r
    }

    /// After an open that `index.db` did not vouch for (a crash), the next record goes to a
    /// block this process creates, not to the newest block it found. That block's name may be
    /// held only by the page cache: a failed fsync of `msgs/` in an earlier process drops the
    /// names waiting on it for good (fsyncgate, as for file pages), and this open's `sync_dir`
    /// returns Ok without writing them. Nothing in such a block was acknowledged (a block's
    /// first acknowledgement waits for the fsync of `msgs/` after its creation), but what this
    /// process wrote to it would be, and a power cut would take it with the name. The new
    /// block's name is made durable by the sync that acknowledges its first record. When
    /// `index.db` was used, its writer fsynced `msgs/` after creating every block it lists.
    /// (Lazily, at the first write: an open that writes nothing leaves no empty block.)
    fn begin_own_block(&mut self) {
        #[cfg(feature = "ablation")]
        if self.cfg.ablation == crate::Ablation::AppendToFoundBlock {
            return;
        }
        (self.dur).set_own_block_first(!self.report.used_index && !self.blocks.is_empty());
    }

    /// Notes names recovery found and left alone (the consumer files' part).
    pub(crate) fn report_ignored(&mut self, names: Vec<String>) {
        self.report.ignored.extend(names);
    }

    /// Whether an earlier I/O failure poisoned the store.
    pub fn is_poisoned(&self) -> bool {
        self.dur.poisoned()
    }
}
