//! The named fsync sites, the sync helpers, the policy, and group commit's two halves.

use super::*;

/// A named fsync call site: the data half (block files) and the directory half (`msgs/`).
/// Every fsync the store does has a name, so the crash matrix can remove each one alone and
/// show what it protects (ablation feature), and reports can name it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Site {
    pub(super) data: &'static str,
    pub(super) dir: &'static str,
}

pub(super) const S_APPEND: Site = Site {
    data: "append.data",
    dir: "append.dir",
};

pub(super) const S_POLICY: Site = Site {
    data: "policy.data",
    dir: "policy.dir",
};

pub(super) const S_ERASE: Site = Site {
    data: "erase.tombstone-data",
    dir: "erase.tombstone-dir",
};

pub(super) const S_SYNC: Site = Site {
    data: "sync.data",
    dir: "sync.dir",
};

pub(super) const S_DROP: Site = Site {
    data: "drop-blocks.data",
    dir: "drop-blocks.dir",
};

pub(super) const S_PURGE_EX: Site = Site {
    data: "purge-ex.data",
    dir: "purge-ex.dir",
};

pub(super) const S_COMPACT: Site = Site {
    data: "compact.data",
    dir: "compact.dir",
};

pub(super) const S_OPEN_LIMITS: Site = Site {
    data: "open.limits-data",
    dir: "open.limits-dir",
};

pub(super) const S_TRUNCATE_MARKERS: Site = Site {
    data: "truncate.markers-data",
    dir: "truncate.markers-dir",
};

pub(super) const S_TRUNCATE_COMMIT: Site = Site {
    data: "truncate.commit-data",
    dir: "truncate.commit-dir",
};

pub(super) const S_SKIP: Site = Site {
    data: "skip.data",
    dir: "skip.dir",
};

/// Every named fsync call site of the store, in write-path order (see ARCHITECTURE.md).
pub const SYNC_SITES: &[&str] = &[
    "open.msgs-dir",
    "open.root-dir",
    "open.limits-data",
    "open.limits-dir",
    "append.data",
    "append.dir",
    "policy.data",
    "policy.dir",
    "sync.data",
    "sync.dir",
    "drop-blocks.data",
    "drop-blocks.dir",
    "erase.tombstone-data",
    "erase.tombstone-dir",
    "purge.tombstone",
    "purge.new-dir",
    "purge.swap-dir",
    "purge-ex.data",
    "purge-ex.dir",
    "compact.data",
    "compact.dir",
    "truncate.markers-data",
    "truncate.markers-dir",
    "truncate.commit-data",
    "truncate.commit-dir",
    "skip.data",
    "skip.dir",
    "consumer.create-root-dir",
    "consumer.create-dir",
    "consumer.journal-data",
    "consumer.sync-data",
    "consumer.checkpoint-data",
    "consumer.checkpoint-dir",
];

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
    pub(crate) fn skip(&self, site: &'static str, is_dir: bool) -> bool {
        debug_assert!(SYNC_SITES.contains(&site), "unnamed fsync site {site}");
        self.cfg.ablation.skips(site, is_dir)
    }

    #[cfg(not(feature = "ablation"))]
    pub(crate) fn skip(&self, _site: &'static str, _is_dir: bool) -> bool {
        false
    }

    /// Fsyncs a block's data. A failure poisons the store (fsyncgate: the kernel may have
    /// dropped the pages, and a retry would report success without writing them).
    #[track_caller]
    pub(super) fn sync_file(&mut self, pos: usize, site: &'static str) -> Result<()> {
        if self.skip(site, false) {
            return Ok(());
        }
        let b = &mut self.blocks[pos];
        let r = b.file.sync_data();
        poisoning(&mut self.poisoned, r, "sync_data", &b.path)?;
        b.dirty = false;
        Ok(())
    }

    /// Fsyncs a directory so its entries (creations, renames, removals) are durable.
    #[track_caller]
    pub(crate) fn sync_dir(&mut self, path: &str, site: &'static str) -> Result<()> {
        if self.skip(site, true) {
            return Ok(());
        }
        let r = self.fs.sync_dir(path);
        poisoning(&mut self.poisoned, r, "sync_dir", path)
    }

    /// The common case of [`Self::sync_inner`] under `SyncPolicy::Always`: the buffer holds
    /// the newest block's unwritten bytes and no other block needs a sync. Then the write and
    /// the fsync are one call ([`FsFile::write_all_at_sync_data`]: the same two operations,
    /// for one host crossing in the wasm guest instead of two). Returns false, having done
    /// nothing, in every other case (and when this fsync site is ablated), for the general path.
    #[track_caller]
    #[inline]
    pub(super) fn write_and_sync_newest(&mut self, site: Site) -> Result<bool> {
        if self.wbuf.is_empty() || !self.group_inflight.is_empty() || self.skip(site.data, false) {
            return Ok(false);
        }
        let Some((newest, older)) = self.blocks.split_last_mut() else {
            return Ok(false);
        };
        if older.iter().any(|b| b.dirty) {
            return Ok(false);
        }
        // as `flush`: the newest block is never cached; never let a copy go stale
        newest.cache = None;
        let r = newest.file.write_all_at_sync_data(&self.wbuf, newest.len);
        match r {
            Ok(()) => {
                newest.len += self.wbuf.len() as u64;
                self.wbuf.clear();
                newest.dirty = false;
                Ok(true)
            }
            // as `flush`: the file's tail is now unknown
            Err(WriteSyncError::Write(e)) => {
                poisoning(&mut self.poisoned, Err(e), "write", &newest.path)
            }
            Err(WriteSyncError::Sync(e)) => {
                // as `flush` then `sync_file`: written, and the sync failed (fsyncgate)
                newest.len += self.wbuf.len() as u64;
                self.wbuf.clear();
                poisoning(&mut self.poisoned, Err(e), "sync_data", &newest.path)
            }
        }
    }

    /// Flushes and fsyncs every block with unsynced writes, then `msgs/` if its entries changed.
    #[track_caller]
    pub(super) fn sync_inner(&mut self, site: Site) -> Result<()> {
        if !self.write_and_sync_newest(site)? {
            self.flush()?;
            for pos in 0..self.blocks.len() {
                if self.blocks[pos].dirty {
                    self.sync_file(pos, site.data)?;
                }
            }
        }
        if !self.group_inflight.is_empty() && !self.skip(site.data, false) {
            // a leader's fsync of these may still be running: do not rely on it
            for (f, path) in &self.group_inflight {
                poisoning(&mut self.poisoned, f.sync_data(), "sync_data", path)?;
            }
        }
        if self.msgs_dir_dirty {
            self.sync_dir(MSGS_DIR, site.dir)?;
            self.msgs_dir_dirty = false;
        }
        // the consumer journal after the stream: an ack made durable here is of a message
        // that is durable already (the policy's and `sync`'s only; the structural operations
        // promise nothing of consumers: their effect on them is derived from the stream)
        match site.data {
            "policy.data" => self.sync_consumer_journal("consumer.journal-data")?,
            "sync.data" => self.sync_consumer_journal("consumer.sync-data")?,
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
            self.last_sync_ns = self.now();
        }
    }

    /// First half of a group commit (under the store's lock): writes the buffer out, fsyncs
    /// `msgs/` if it has new names, and hands back the files to fsync and the last sequence
    /// they cover. The fsyncs themselves run without the lock (`SyncTicket::run`).
    /// Records written since open (the group commit's durability watermark).
    pub(crate) fn writes(&self) -> u64 {
        self.writes
    }

    pub(crate) fn begin_group_sync(&mut self) -> Result<SyncTicket<F::File>> {
        self.check_writable()?;
        self.flush()?;
        if self.msgs_dir_dirty {
            self.sync_dir(MSGS_DIR, S_APPEND.dir)?;
            self.msgs_dir_dirty = false;
        }
        let skip = self.skip(S_APPEND.data, false);
        // one leader at a time (SharedStore): the previous ticket has ended
        debug_assert!(self.group_inflight.is_empty());
        let mut files = Vec::new();
        for b in &mut self.blocks {
            if b.dirty {
                // cleared now: a write after this point marks it again for the next leader
                b.dirty = false;
                files.push((Arc::clone(&b.file), b.path.clone()));
            }
        }
        // the consumer journal too: acks from many consumers share this fsync
        if self.consumers.dirty {
            self.consumers.dirty = false;
            if let Some(j) = &self.consumers.journal {
                if !self.skip("consumer.journal-data", false) {
                    let path = crate::consumer::journal::journal_path(self.consumers.gen);
                    files.push((Arc::clone(j), path));
                }
            }
        }
        self.group_inflight.clone_from(&files);
        Ok(SyncTicket {
            files,
            upto: self.writes,
            skip,
        })
    }

    /// Second half of a group commit (under the lock again): a failed fsync poisons the store.
    pub(crate) fn end_group_sync(&mut self, result: &Result<()>) {
        self.group_inflight.clear();
        if result.is_err() {
            self.poisoned = true;
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
                let due = self.now().saturating_sub(self.last_sync_ns) as u128 >= d.as_nanos();
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
