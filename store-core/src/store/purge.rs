//! Purge, crash-atomic, and beside it the half of recovery that completes or rolls it back.

use super::blocks::Block;
use super::layout::{block_path, parse_block_name, MSGS_DIR, PURGE_NEW, PURGE_OLD};
use super::scan::{scan_block, ScanEnd};
use super::{io_at, Store};
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenOptions};
use crate::record::{self, check_block_header, encode, Header, Kind, BLOCK_HEADER_LEN};
use crate::site::SyncSite;
use std::io;
use std::ops::ControlFlow;

impl<F: Fs> Store<F> {
    /// Whether `purge.new` holds a block whose records all check out and include a floor
    /// record: the purge's commit point.
    pub(super) fn purge_block_valid(&self) -> Result<bool> {
        let entries = match self.fs.read_dir(PURGE_NEW) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io("read_dir", PURGE_NEW, e)),
        };
        for e in entries {
            let Some(index) = parse_block_name(&e.name) else {
                continue;
            };
            let path = block_path(PURGE_NEW, index);
            let f = io_at(self.fs.open(&path, OpenOptions::read_only()), "open", &path)?;
            let len = io_at(f.len(), "len", &path)?;
            let mut h = [0u8; BLOCK_HEADER_LEN as usize];
            let n = (len as usize).min(h.len());
            io_at(f.read_exact_at(&mut h[..n], 0), "read", &path)?;
            if check_block_header(&path, &h[..n], index).ok() != Some(Header::Valid) {
                continue;
            }
            let mut has_floor = false;
            let end = scan_block(
                &f,
                &path,
                BLOCK_HEADER_LEN,
                len,
                |_, r| {
                    has_floor |= r.kind == Kind::Floor;
                    Ok(ControlFlow::Continue(()))
                },
                |_, _, _| Ok(()),
            )?;
            if has_floor && matches!(end, ScanEnd::Clean) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Finishes or undoes a purge that a crash interrupted (see ARCHITECTURE.md, "Purge").
    pub(super) fn recover_purge(&mut self) -> Result<()> {
        let names = self.root_names()?;
        let has = |n: &str| names.get(n).copied() == Some(true);
        let (msgs, new, old) = (has(MSGS_DIR), has(PURGE_NEW), has(PURGE_OLD));
        if !(new || old) {
            if !msgs {
                // made durable by open's root fsync ("open.root-dir")
                io_at(self.fs.create_dir(MSGS_DIR), "create_dir", MSGS_DIR)?;
            }
            return Ok(());
        }
        if new && self.purge_block_valid()? {
            // Committed: the new block with the last sequence is durable. Finish the swap.
            if msgs {
                if old {
                    io_at(
                        self.fs.remove_dir_all(PURGE_OLD),
                        "remove_dir_all",
                        PURGE_OLD,
                    )?;
                }
                io_at(self.fs.rename(MSGS_DIR, PURGE_OLD), "rename", MSGS_DIR)?;
            }
            self.install_purge_new()?;
            if msgs || old {
                io_at(
                    self.fs.remove_dir_all(PURGE_OLD),
                    "remove_dir_all",
                    PURGE_OLD,
                )?;
            }
            self.report.purge_completed = true;
        } else {
            // Not committed (or only leftovers of a finished purge): keep the old blocks.
            if new {
                io_at(
                    self.fs.remove_dir_all(PURGE_NEW),
                    "remove_dir_all",
                    PURGE_NEW,
                )?;
                self.report.purge_rolled_back = true;
            }
            if old {
                if msgs {
                    io_at(
                        self.fs.remove_dir_all(PURGE_OLD),
                        "remove_dir_all",
                        PURGE_OLD,
                    )?;
                } else {
                    io_at(self.fs.rename(PURGE_OLD, MSGS_DIR), "rename", PURGE_OLD)?;
                    self.report.purge_rolled_back = true;
                }
            } else if !msgs {
                io_at(self.fs.create_dir(MSGS_DIR), "create_dir", MSGS_DIR)?;
            }
        }
        Ok(())
    }

    /// Makes `purge.new` the live `msgs/` (recovery finishing a committed purge): one rename.
    pub(super) fn install_purge_new(&mut self) -> Result<()> {
        #[cfg(feature = "ablation")]
        if self.cfg.ablation == crate::Ablation::MovePurgeBlocks {
            return self.install_purge_new_by_moving();
        }
        io_at(self.fs.rename(PURGE_NEW, MSGS_DIR), "rename", PURGE_NEW)
    }

    /// **Deliberately wrong** (ablation `MovePurgeBlocks`, the negative control of the
    /// crash-during-recovery test): instead of renaming `purge.new`, moves its files into a
    /// new `msgs/` one by one and removes `purge.new`. The moves wait for an fsync of
    /// `purge.new` that never comes (it is removed), so after a crash `msgs/` is empty.
    #[cfg(feature = "ablation")]
    pub(super) fn install_purge_new_by_moving(&mut self) -> Result<()> {
        io_at(self.fs.create_dir(MSGS_DIR), "create_dir", MSGS_DIR)?;
        for e in io_at(self.fs.read_dir(PURGE_NEW), "read_dir", PURGE_NEW)? {
            let from = format!("{PURGE_NEW}/{}", e.name);
            let to = format!("{MSGS_DIR}/{}", e.name);
            io_at(self.fs.rename(&from, &to), "rename", &from)?;
        }
        io_at(
            self.fs.remove_dir_all(PURGE_NEW),
            "remove_dir_all",
            PURGE_NEW,
        )
    }

    /// Removes every message. Crash-atomic, and the sequence is kept in every sync policy:
    /// once this returns, any crash recovers `first = L + 1, last = L` (L the last sequence
    /// before the purge); a crash during it recovers the old state or the purged one.
    ///
    /// Write path (ARCHITECTURE.md, "Purge"), three fsyncs whatever the stream's size: a new
    /// block holding one floor record for L is written into `purge.new/` and fsynced;
    /// `purge.new/` is fsynced; `msgs -> purge.old`, `purge.new -> msgs`, and one root fsync
    /// makes it all durable; then `purge.old/` is removed. Recovery completes the purge if it
    /// finds `purge.new/` with its floor block, else rolls it back. Returns the number of
    /// messages removed.
    pub fn purge(&mut self) -> Result<u64> {
        self.check_writable()?;
        self.trim_entries();
        let purged = self.seq.msgs();
        let (l, ts) = (self.seq.last(), self.seq.last_ts());
        // 0. leftovers of an earlier purge go first. Their removal needs no fsync of its own:
        //    if it is lost, recovery finds purge.old beside msgs (or an uncommitted purge.new)
        //    and removes it again; the root fsync of step 4 makes it durable anyway.
        let names = self.root_names()?;
        for d in [PURGE_NEW, PURGE_OLD] {
            if names.contains_key(d) {
                io_at(self.fs.remove_dir_all(d), "remove_dir_all", d)?;
            }
        }
        // 1. the new block: header + floor(L)
        io_at(self.fs.create_dir(PURGE_NEW), "create_dir", PURGE_NEW)?;
        let index = self.blocks.last().map_or(1, |b| b.number + 1);
        let new_path = block_path(PURGE_NEW, index);
        let file = io_at(
            self.fs.open(
                &new_path,
                OpenOptions::new().read(true).write(true).create_new(true),
            ),
            "create",
            &new_path,
        )?;
        let mut buf = record::block_header(index).to_vec();
        let crc = encode(&mut buf, Kind::Floor, 0, l, ts, b"", b"", b"");
        let r = file.write_all_at(&buf, 0);
        self.dur.latch(r, "write", &new_path)?;
        // 2. fsync the tombstone: without it a crash after the swap finds an empty block and
        //    the stream comes back as 0,0 (the NATS bug).
        let tombstone_synced = !self.skip(SyncSite::PurgeTombstone);
        if tombstone_synced {
            let r = file.sync_data();
            self.dur.latch(r, "sync_data", &new_path)?;
        }
        // 3. make the block's name in purge.new durable: from now on, wherever purge.new is
        //    found (as purge.new, or already renamed to msgs), it holds the floor record.
        self.sync_dir(PURGE_NEW, SyncSite::PurgeNewDir)?;
        // 4. the swap, then one root fsync that makes purge.new, both renames (and the removal
        //    of leftovers) durable together. A crash before it leaves some subset of them, and
        //    recovery completes the purge if purge.new is there with its floor block, else
        //    rolls it back (ARCHITECTURE.md lists every case).
        for (from, to) in [(MSGS_DIR, PURGE_OLD), (PURGE_NEW, MSGS_DIR)] {
            let r = self.fs.rename(from, to);
            self.dur.latch(r, "rename", from)?;
        }
        self.sync_dir("", SyncSite::PurgeSwapDir)?;
        // 5. memory: one block, nothing live, floor L
        let block = PurgedBlock {
            number: index,
            file,
            len: buf.len() as u64,
            crc,
            synced: tombstone_synced,
        };
        self.reset_to_purged(block, l);
        // 6. the old blocks go only now that the purge is durable. A failure here leaves
        //    purge.old behind, which the next open or purge removes: nothing is lost.
        self.blocks.purge_old_pending = true;
        Ok(purged)
    }

    /// The memory of a purged stream: the purge's one block (its floor record for `l`) and
    /// nothing live; the old blocks are kept for `cleanup`.
    fn reset_to_purged(&mut self, b: PurgedBlock<F::File>, l: u64) {
        self.wbuf.clear();
        self.blocks.retired = std::mem::take(&mut self.blocks.list);
        // the purge's block alone, fsynced (or marked for the next sync, but held by no walk)
        self.open_files.counted(1, 0);
        let mut block = Block::new(b.number, Some(b.file), b.len, 0);
        block.span.max_seq = l;
        block.span.last_crc = b.crc;
        block.handle.dirty = !b.synced;
        block.handle.written = !b.synced;
        self.blocks.list = vec![block];
        debug_assert_eq!(l, self.seq.last());
        self.seq.purged_all(b.number);
        self.subjects.clear_counts();
        self.dur.names_durable();
    }

    /// Releases what a purge left for later: the old blocks' memory and `purge.old/` on disk
    /// (no fsync: recovery removes a leftover again). Called by `tick` and `close`.
    pub fn cleanup(&mut self) {
        self.blocks.retired.clear();
        if std::mem::take(&mut self.blocks.purge_old_pending) {
            let _ = self.fs.remove_dir_all(PURGE_OLD);
        }
    }
}

/// The block a purge wrote: its number, file, length, last crc, and whether it was fsynced.
struct PurgedBlock<H> {
    number: u64,
    file: H,
    len: u64,
    crc: u32,
    synced: bool,
}
