//! The named fsync sites, the sync helpers, the policy, and group commit's two halves.

use super::layout::MSGS_DIR;
use super::Store;
use crate::config::SyncPolicy;
use crate::error::{Error, Result};
use crate::fast;
use crate::fs::{Fs, FsFile, WriteSyncError};
pub use crate::site::{SyncSite, SYNC_SITES};
use std::io;
use std::sync::Arc;

/// What the store knows of its own durability. A failed write, rename, removal, truncation or
/// fsync latches `poisoned` here ([`Durability::latch`]; the group commit's fsync, run
/// without the store, in `end_group_sync`): the file or directory
/// is then in a state the store does not know, so it refuses every write (`Error::Poisoned`)
/// until reopened — and after a failed fsync a retry could report success without writing
/// anything (fsyncgate).
pub(crate) struct Durability<H> {
    poisoned: bool,
    /// `msgs/` has entries (new blocks, removals) that are not yet durable.
    msgs_dir_dirty: bool,
    /// The next record goes to a new block, not to the newest one open found: set by an open
    /// that `index.db` did not vouch for, cleared by the roll (`Store::begin_own_block`).
    own_block_first: bool,
    /// Records written since open: the group commit's durability watermark (sequences can go
    /// down with `truncate`; this never does).
    writes: u64,
    /// The files a group-commit leader is fsyncing right now, without the lock (between
    /// `begin_group_sync` and `end_group_sync`): their `dirty` flags are already clear, so a
    /// `sync` in that window fsyncs them too rather than return before they are durable.
    pub(crate) group_inflight: Vec<(Arc<H>, String)>,
    /// When the last sync ended (`SyncPolicy::Interval` only).
    last_sync_ns: i64,
}

impl<H> Durability<H> {
    pub(super) fn new(now: i64) -> Self {
        Durability {
            poisoned: false,
            msgs_dir_dirty: false,
            own_block_first: false,
            writes: 0,
            group_inflight: Vec::new(),
            last_sync_ns: now,
        }
    }

    /// Whether a failed write or fsync poisoned the store.
    pub(super) fn poisoned(&self) -> bool {
        self.poisoned
    }

    /// Refuses every write from now on (`Store::poison`).
    pub(super) fn poison(&mut self) {
        self.poisoned = true;
    }

    /// `msgs/` gained or lost a name: its fsync is owed before the next acknowledgement.
    pub(super) fn names_changed(&mut self) {
        self.msgs_dir_dirty = true;
    }

    /// `msgs/`'s names are durable as they are (fsynced, or replaced whole by a purge's
    /// rename, made durable by the root's fsync).
    pub(super) fn names_durable(&mut self) {
        self.msgs_dir_dirty = false;
    }

    /// Whether the next record must go to a new block (`Store::begin_own_block`).
    pub(super) fn own_block_first(&self) -> bool {
        self.own_block_first
    }

    /// Sets whether the next record must go to a new block: at open, and cleared by a roll.
    pub(super) fn set_own_block_first(&mut self, yes: bool) {
        self.own_block_first = yes;
    }

    /// Records written since open (the group commit's watermark).
    pub(super) fn writes(&self) -> u64 {
        self.writes
    }

    /// Counts one record written; returns the new watermark.
    pub(super) fn wrote(&mut self) -> u64 {
        self.writes += 1;
        self.writes
    }

    /// `r`, its error latched: a failure poisons the store. Every write, rename, removal,
    /// truncation and fsync the store runs under its own hand goes through here; the only
    /// other ways in are the group commit's fsync, which runs without the store and is
    /// latched by `end_group_sync`, and an embedder's explicit `Store::poison`.
    #[track_caller]
    pub(crate) fn latch<T>(&mut self, r: io::Result<T>, op: &'static str, path: &str) -> Result<T> {
        r.map_err(|e| {
            self.poisoned = true;
            Error::io(op, path, e)
        })
    }
}

impl<H: FsFile> Durability<H> {
    /// Fsyncs the files a group leader may be fsyncing right now (see `group_inflight`).
    pub(super) fn sync_inflight(&mut self) -> Result<()> {
        let mut failed = None;
        for (f, path) in &self.group_inflight {
            if let Err(e) = f.sync_data() {
                failed = Some((e, path.clone()));
                break;
            }
        }
        match failed {
            Some((e, path)) => self.latch(Err(e), "sync_data", &path),
            None => Ok(()),
        }
    }
}

/// A pair of named fsync sites: the data half (block files) and the directory half (`msgs/`)
/// of one operation's sync.
#[derive(Clone, Copy, Debug)]
pub(super) struct Site {
    pub(super) data: SyncSite,
    pub(super) dir: SyncSite,
}

pub(super) const S_APPEND: Site = Site {
    data: SyncSite::AppendData,
    dir: SyncSite::AppendDir,
};

pub(super) const S_POLICY: Site = Site {
    data: SyncSite::PolicyData,
    dir: SyncSite::PolicyDir,
};

pub(super) const S_ERASE: Site = Site {
    data: SyncSite::EraseTombstoneData,
    dir: SyncSite::EraseTombstoneDir,
};

pub(super) const S_SYNC: Site = Site {
    data: SyncSite::SyncData,
    dir: SyncSite::SyncDir,
};

pub(super) const S_DROP: Site = Site {
    data: SyncSite::DropBlocksData,
    dir: SyncSite::DropBlocksDir,
};

pub(super) const S_PURGE_EX: Site = Site {
    data: SyncSite::PurgeExData,
    dir: SyncSite::PurgeExDir,
};

pub(super) const S_COMPACT: Site = Site {
    data: SyncSite::CompactData,
    dir: SyncSite::CompactDir,
};

pub(super) const S_OPEN_LIMITS: Site = Site {
    data: SyncSite::OpenLimitsData,
    dir: SyncSite::OpenLimitsDir,
};

pub(super) const S_TRUNCATE_MARKERS: Site = Site {
    data: SyncSite::TruncateMarkersData,
    dir: SyncSite::TruncateMarkersDir,
};

pub(super) const S_TRUNCATE_COMMIT: Site = Site {
    data: SyncSite::TruncateCommitData,
    dir: SyncSite::TruncateCommitDir,
};

pub(super) const S_SKIP: Site = Site {
    data: SyncSite::SkipData,
    dir: SyncSite::SkipDir,
};

/// The fsyncs a group-commit leader runs without holding the store: every block with writes
/// not yet synced when the ticket was taken.
pub(crate) struct SyncTicket<H> {
    pub(super) files: Vec<(Arc<H>, String)>,
    /// Every write numbered up to this one (`Store::writes`) is durable once `run` returns Ok.
    pub(crate) upto: u64,
    pub(super) skip: bool,
}

impl<H: FsFile> SyncTicket<H> {
    /// Runs the fsyncs.
    pub(crate) fn run(&self) -> Result<()> {
        if self.skip {
            return Ok(());
        }
        for (f, path) in &self.files {
            f.sync_data()
                .map_err(|e| Error::io("sync_data", path.clone(), e))?;
        }
        Ok(())
    }
}

impl<F: Fs> Store<F> {
    /// Whether the fsync at `site` is ablated (only ever true with the `ablation` feature and
    /// a config that asks for it).
    #[cfg(feature = "ablation")]
    pub(crate) fn skip(&self, site: SyncSite) -> bool {
        self.cfg.ablation.skips(site)
    }

    #[cfg(not(feature = "ablation"))]
    pub(crate) fn skip(&self, _site: SyncSite) -> bool {
        false
    }

    /// Fsyncs a block's data. A failure poisons the store (fsyncgate: the kernel may have
    /// dropped the pages, and a retry would report success without writing them).
    #[track_caller]
    pub(super) fn sync_file(&mut self, pos: usize, site: SyncSite) -> Result<()> {
        if self.skip(site) {
            return Ok(());
        }
        let file = self.open_block(pos)?;
        let b = &mut self.blocks[pos];
        let r = file.sync_data();
        self.dur.latch(r, "sync_data", &b.path)?;
        b.handle.dirty = false;
        b.handle.written = false;
        Ok(())
    }

    /// Fsyncs a directory so its entries (creations, renames, removals) are durable.
    #[track_caller]
    pub(crate) fn sync_dir(&mut self, path: &str, site: SyncSite) -> Result<()> {
        if self.skip(site) {
            return Ok(());
        }
        let r = self.fs.sync_dir(path);
        self.dur.latch(r, "sync_dir", path)
    }

    /// The common case of [`Self::sync_inner`] under `SyncPolicy::Always`: the buffer holds
    /// the newest block's unwritten bytes and no other block needs a sync. Then the write and
    /// the fsync are one call ([`crate::fs::FastPaths::write_all_at_sync_data`]: the same two operations,
    /// for one host crossing in the wasm guest instead of two). Returns false, having done
    /// nothing, in every other case (and when this fsync site is ablated), for the general path.
    #[track_caller]
    #[inline]
    pub(super) fn write_and_sync_newest(&mut self, site: Site) -> Result<bool> {
        if self.wbuf.is_empty() || !self.dur.group_inflight.is_empty() || self.skip(site.data) {
            return Ok(false);
        }
        let Some((_, older)) = self.blocks.split_last() else {
            return Ok(false);
        };
        if older.iter().any(|b| b.handle.dirty) {
            return Ok(false);
        }
        let n = self.wbuf.len();
        let alloc = self.zero_ahead();
        let last = self.blocks.len() - 1;
        let file = self.open_block(last)?;
        let newest = &mut self.blocks[last];
        // as `flush`: the newest block is never cached; never let a copy go stale
        newest.copies.cache = None;
        newest.handle.written = true;
        let r = fast::write_all_at_sync_data(&*file, &self.wbuf, newest.span.len);
        self.wbuf.truncate(n);
        let written = !matches!(r, Err(WriteSyncError::Write(_)));
        if written {
            newest.shadow_append(&self.wbuf);
            newest.span.len += n as u64;
            newest.span.alloc = alloc.max(newest.span.len);
            self.wbuf.clear();
        }
        match r {
            Ok(()) => {
                newest.handle.dirty = false;
                newest.handle.written = false;
                Ok(true)
            }
            // as `flush`: the file's tail is now unknown
            Err(WriteSyncError::Write(e)) => self.dur.latch(Err(e), "write", &newest.path),
            // as `flush` then `sync_file`: written, and the sync failed (fsyncgate)
            Err(WriteSyncError::Sync(e)) => self.dur.latch(Err(e), "sync_data", &newest.path),
        }
    }

    /// Flushes and fsyncs every block with unsynced writes, then `msgs/` if its entries changed.
    #[track_caller]
    pub(super) fn sync_inner(&mut self, site: Site) -> Result<()> {
        if !self.write_and_sync_newest(site)? {
            self.flush()?;
            for pos in 0..self.blocks.len() {
                if self.blocks[pos].handle.dirty {
                    self.sync_file(pos, site.data)?;
                }
            }
        }
        if !self.dur.group_inflight.is_empty() && !self.skip(site.data) {
            // a leader's fsync of these may still be running: do not rely on it
            self.dur.sync_inflight()?;
        }
        if self.dur.msgs_dir_dirty {
            self.sync_dir(MSGS_DIR, site.dir)?;
            self.dur.msgs_dir_dirty = false;
        }
        // the consumer journal after the stream: an ack made durable here is of a message
        // that is durable already (the policy's and `sync`'s only; the structural operations
        // promise nothing of consumers: their effect on them is derived from the stream)
        match site.data {
            SyncSite::PolicyData => self.sync_consumer_journal(SyncSite::ConsumerJournalData)?,
            SyncSite::SyncData => self.sync_consumer_journal(SyncSite::ConsumerSyncData)?,
            _ => {}
        }
        self.note_synced();
        Ok(())
    }

    /// Remembers when the last sync ended, for `SyncPolicy::Interval`, its only reader. Under the
    /// other policies the clock is not read: in the wasm guest a reading is a host call, and two
    /// per durable append were ~15% of the guest's CPU time for one (perf, on tmpfs).
    #[inline]
    pub(super) fn note_synced(&mut self) {
        if matches!(self.cfg.sync, SyncPolicy::Interval(_)) {
            self.dur.last_sync_ns = self.now();
        }
    }

    /// First half of a group commit (under the store's lock): writes the buffer out, fsyncs
    /// `msgs/` if it has new names, and hands back the files to fsync and the last sequence
    /// they cover. The fsyncs themselves run without the lock (`SyncTicket::run`).
    /// Records written since open (the group commit's durability watermark).
    pub(crate) fn writes(&self) -> u64 {
        self.dur.writes
    }

    pub(crate) fn begin_group_sync(&mut self) -> Result<SyncTicket<F::File>> {
        self.check_writable()?;
        self.flush()?;
        if self.dur.msgs_dir_dirty {
            self.sync_dir(MSGS_DIR, S_APPEND.dir)?;
            self.dur.msgs_dir_dirty = false;
        }
        let skip = self.skip(S_APPEND.data);
        // one leader at a time (SharedStore): the previous ticket has ended
        debug_assert!(self.dur.group_inflight.is_empty());
        let mut files = Vec::new();
        for pos in 0..self.blocks.len() {
            let b = &self.blocks[pos];
            if b.handle.dirty && !b.handle.written {
                // only marked by open (written by an earlier process): synced here, one at a
                // time, rather than every such block's handle held open for the leader
                self.sync_file(pos, S_APPEND.data)?;
                continue;
            }
            if b.handle.dirty {
                let file = self.open_block(pos)?;
                let b = &mut self.blocks[pos];
                // cleared now: a write after this point marks it again for the next leader
                b.handle.dirty = false;
                b.handle.written = false;
                files.push((file, b.path.clone()));
            }
        }
        // the consumer journal too: acks from many consumers share this fsync
        if self.consumers.dirty {
            self.consumers.dirty = false;
            if let Some(j) = &self.consumers.journal {
                if !self.skip(SyncSite::ConsumerJournalData) {
                    let path = crate::consumer::journal::journal_path(self.consumers.gen);
                    files.push((Arc::clone(j), path));
                }
            }
        }
        self.dur.group_inflight.clone_from(&files);
        Ok(SyncTicket {
            files,
            upto: self.dur.writes,
            skip,
        })
    }

    /// Second half of a group commit (under the lock again): a failed fsync poisons the store.
    pub(crate) fn end_group_sync(&mut self, result: &Result<()>) {
        self.dur.group_inflight.clear();
        if result.is_err() {
            self.dur.poisoned = true;
        } else {
            self.note_synced();
        }
    }

    /// Syncs if the policy asks for it now.
    #[track_caller]
    #[inline]
    pub(crate) fn maybe_sync(&mut self) -> Result<()> {
        match self.cfg.sync {
            SyncPolicy::Always => self.sync_inner(S_POLICY),
            SyncPolicy::Interval(d) => {
                let due = self.now().saturating_sub(self.dur.last_sync_ns) as u128 >= d.as_nanos();
                if due {
                    self.sync_inner(S_POLICY)
                } else {
                    Ok(())
                }
            }
            SyncPolicy::Never => Ok(()),
        }
    }

    /// Makes everything written so far durable (files, then directories).
    pub fn sync(&mut self) -> Result<()> {
        self.check_writable()?;
        self.sync_inner(S_SYNC)
    }
}
