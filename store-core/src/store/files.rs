//! The blocks' file handles: opened on first use and at most `Config::open_blocks` of them
//! held at once, so that a stream of any number of blocks opens within the process's limit
//! on open files.
//!
//! Which handle may be closed: not the newest block's (every append writes it), and not one
//! that this process wrote through since its last fsync (`BlockHandle::written`): a failed
//! writeback is reported to the handles open when it happened, and on some systems a handle
//! opened later would fsync without seeing it (fsyncgate). A block marked for a sync only
//! because a previous process may have left it unsynced (`dirty` without `written`) may be
//! closed; the sync opens it again.

use super::{io_at, Store};
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenOptions};
use std::io;
use std::sync::Arc;

/// A block's handle for a read: the held one, or one opened for this read alone (the block
/// was closed and the reader cannot keep a handle: it has only `&Store`).
pub(super) enum BlockFile<'a, H> {
    Held(&'a H),
    Opened(H),
}

impl<H> std::ops::Deref for BlockFile<'_, H> {
    type Target = H;
    fn deref(&self) -> &H {
        match self {
            BlockFile::Held(h) => h,
            BlockFile::Opened(h) => h,
        }
    }
}

/// The bound on open block files' bookkeeping.
#[derive(Default)]
pub(super) struct FileBound {
    /// Uses of block handles so far (`BlockHandle::file_used` stamps).
    tick: u64,
    /// At least as many as the block handles held (counted up as they open, set exactly
    /// by each walk of `close_files`): when it passes `Config::open_blocks`, a walk.
    held_at_most: usize,
    /// Handles of blocks written since their last fsync that the last walk left open: reads
    /// do not close them, so they do not count against the bound.
    written_held: usize,
}

impl FileBound {
    /// Sets the counts to what a walk (or a purge, which leaves one block) found.
    pub(super) fn counted(&mut self, held: usize, written_held: usize) {
        self.held_at_most = held;
        self.written_held = written_held;
    }
}

impl<F: Fs> Store<F> {
    /// Block `pos`'s handle, opened now if it was closed, and kept (closing the least
    /// recently used closable ones beyond `Config::open_blocks`).
    pub(super) fn open_block(&mut self, pos: usize) -> Result<Arc<F::File>> {
        self.hold_file(pos)?;
        let b = &self.blocks[pos];
        // `hold_file` opened it and `note_opened` keeps block `pos` open: the `else` is a bug
        // in the store, refused as the read it would have been
        b.handle
            .file
            .clone()
            .ok_or_else(|| Error::io("open", &b.path, io::Error::other("block handle not held")))
    }

    /// Makes sure block `pos`'s handle is open and held, as the most recently used.
    #[inline]
    pub(super) fn hold_file(&mut self, pos: usize) -> Result<()> {
        self.open_files.tick += 1;
        let tick = self.open_files.tick;
        let b = &mut self.blocks[pos];
        b.handle.file_used = tick;
        if b.handle.file.is_some() {
            return Ok(());
        }
        let f = self.reopen(pos)?;
        self.blocks[pos].handle.file = Some(Arc::new(f));
        self.note_opened(pos)
    }

    /// Counts a handle just opened and kept, block `pos`'s (by `hold_file` or a rebuild);
    /// past `Config::open_blocks`, closes the least recently used others down to half of it,
    /// but not blocks written since their last fsync: a read never runs an fsync (nor fails,
    /// or poisons the store, by one). Those wait for the next roll (`note_rolled`).
    pub(super) fn note_opened(&mut self, pos: usize) -> Result<()> {
        self.open_files.held_at_most += 1;
        if self.open_files.held_at_most <= self.cfg.open_blocks + self.open_files.written_held {
            return Ok(());
        }
        self.close_files(self.cfg.open_blocks / 2, pos, false)
    }

    /// After a roll (the new block's handle opened, the previous newest block now sealed,
    /// written since its last fsync unless the policy synced it): past `Config::open_blocks`
    /// held, or half of it written, closes the least recently used down to half of it,
    /// written blocks too (fsynced first). So written handles, which reads leave open, stay
    /// at most about half the bound. Counted exactly each time: a walk over the blocks per
    /// roll.
    pub(super) fn note_rolled(&mut self) -> Result<()> {
        let (held, written) = self.held_counts();
        if held <= self.cfg.open_blocks && written <= self.cfg.open_blocks / 2 {
            self.open_files.counted(held, written);
            return Ok(());
        }
        let newest = self.blocks.len() - 1;
        self.close_files(self.cfg.open_blocks / 2, newest, true)
    }

    /// Block `pos`'s handle for a read through `&self`: the held one, else one opened for
    /// this read (`prepare_read` and `ensure_loaded` hold it for the reads that follow them).
    pub(super) fn block_file(&self, pos: usize) -> Result<BlockFile<'_, F::File>> {
        match &self.blocks[pos].handle.file {
            Some(f) => Ok(BlockFile::Held(f)),
            None => Ok(BlockFile::Opened(self.reopen(pos)?)),
        }
    }

    /// Opens block `pos`'s file again, checking that it still has the length the store knows
    /// (the store holds the directory's lock: nothing else may change it).
    fn reopen(&self, pos: usize) -> Result<F::File> {
        let b = &self.blocks[pos];
        let rw = OpenOptions::new().read(true).write(true);
        let f = io_at(self.fs.open(&b.path, rw), "open", &b.path)?;
        let flen = io_at(f.len(), "len", &b.path)?;
        if flen != b.span.alloc {
            return Err(Error::corrupt(
                b.path.clone(),
                flen,
                "block file changed length while the store had it closed",
            ));
        }
        Ok(f)
    }

    /// Closes the least recently used closable handles until at most `keep` are held, never
    /// block `keep_open`'s nor the newest block's. With `sync`, when too few closable ones
    /// are left but blocks written since their last fsync (a stream written under
    /// `SyncPolicy::Never` rolls block after block), the least recently used of those are
    /// fsynced and closed too: resource hygiene, not a durability point (no `SyncSite`: no
    /// policy promises anything of it). One walk over the blocks, run when the count of
    /// handles opened since the last walk says the bound may be passed: closing down to half
    /// the bound makes it one walk per `open_blocks / 2` opens.
    pub(super) fn close_files(&mut self, keep: usize, keep_open: usize, sync: bool) -> Result<()> {
        let newest = self.blocks.len().saturating_sub(1);
        let (held, mut written_held) = self.held_counts();
        let mut close: Vec<(bool, u64, usize)> = (self.blocks.iter().enumerate())
            .filter(|(pos, b)| *pos != newest && *pos != keep_open && b.handle.file.is_some())
            .filter(|(_, b)| sync || !b.handle.written)
            .map(|(pos, b)| (b.handle.written, b.handle.file_used, pos))
            .collect();
        // the clean ones first, the least recently used first
        close.sort_unstable();
        close.truncate(held.saturating_sub(keep));
        for &(written, _, pos) in &close {
            let b = &mut self.blocks[pos];
            // (every block listed holds its handle)
            let Some(file) = &b.handle.file else { continue };
            if written {
                // not `sync_file`: that one may be ablated, and this fsync must happen
                // before the handle goes (fsyncgate: see the module's comment)
                let r = file.sync_data();
                self.dur.latch(r, "sync_data", &b.path)?;
                b.handle.dirty = false;
                b.handle.written = false;
                written_held -= 1;
            }
            b.handle.file = None;
        }
        // written blocks a walk without `sync` left are not counted against the bound until
        // a roll's walk: the next walk comes after as many opens as any other
        (self.open_files).counted(held - close.len(), written_held);
        Ok(())
    }

    /// Handles held, and how many of them are of blocks written since their last fsync.
    fn held_counts(&self) -> (usize, usize) {
        (self.blocks.iter().filter(|b| b.handle.file.is_some()))
            .fold((0, 0), |(held, written), b| {
                (held + 1, written + usize::from(b.handle.written))
            })
    }
}
