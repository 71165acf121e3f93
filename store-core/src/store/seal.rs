//! Rewriting a block through the crypt layer: a block the layer holds in many small frames,
//! or with frames an erase wrote over, is copied whole into a new file, fsynced, and renamed
//! over itself — when it is sealed, and at once when an erase reaches a sealed block — so
//! that a sealed block is stored (and compressed) in whole frames however it was written,
//! and an erased record's old bytes leave the file.

use super::layout::seal_tmp_path;
use super::{io_at, Store};
use crate::error::Result;
use crate::fast;
use crate::fs::{Fs, FsFile, OpenOptions};
use crate::site::SyncSite;
use std::sync::Arc;

/// Bytes copied per read and write of a rewrite: a multiple of the layer's 16 KiB frames, so
/// every write but the last is whole frames.
const COPY_CHUNK: usize = 1 << 20;

impl<F: Fs> Store<F> {
    /// For the block at `pos`, being sealed (its buffer written, its zeros cut) or sealed and
    /// just erased in: if its file says a rewrite would store it better
    /// ([`crate::fs::FastPaths::worth_rewriting`]), copies its bytes into `msgs/N.seal`, fsyncs that
    /// (`seal.data`) and renames it over the block. The block keeps the new file's handle,
    /// marked for the next sync (for the length frame below). The rename becomes durable with
    /// the next fsync of `msgs/` (`msgs_dir_dirty`), which comes before anything changes the
    /// block in place (an erase syncs `msgs/` first) or removes it; a crash before then brings
    /// back the old file, whose bytes are the same. A leftover `N.seal` is removed at open.
    pub(super) fn rewrite_block(&mut self, pos: usize) -> Result<()> {
        let shadow = self.blocks[pos].copies.shadow.take();
        let old = self.open_block(pos)?;
        if !fast::worth_rewriting(&*old) {
            return Ok(());
        }
        let (number, len) = (self.blocks[pos].number, self.blocks[pos].span.len);
        let tmp = seal_tmp_path(number);
        let opts = OpenOptions::read_write_create().truncate(true);
        let r = self.fs.open(&tmp, opts);
        let f = self.dur.latch(r, "create", &tmp)?;
        // the bytes from the shadow copy if it holds them all, else read back (decrypted)
        let shadow = shadow.filter(|sh| sh.len() as u64 == len);
        let mut buf = Vec::new();
        let mut off = 0;
        while off < len {
            let n = (len - off).min(COPY_CHUNK as u64) as usize;
            let chunk = match &shadow {
                Some(sh) => &sh[off as usize..off as usize + n],
                None => {
                    let b = &self.blocks[pos];
                    // a failed read leaves the block as it was: an error, not a poisoned store
                    io_at(fast::read_vec_at(&*old, &mut buf, n, off), "read", &b.path)?;
                    &buf[..n]
                }
            };
            let r = f.write_all_at(chunk, off);
            self.dur.latch(r, "write", &tmp)?;
            off += n as u64;
        }
        if !self.skip(SyncSite::SealData) {
            let r = f.sync_data();
            self.dur.latch(r, "sync_data", &tmp)?;
        }
        // A length frame that changes nothing: the layer records in it that the frames before
        // it were synced, so that a changed byte in them is `Corrupt` rather than a torn tail.
        // It is made durable by the block's next fsync (`dirty`).
        let r = f.set_len(len);
        self.dur.latch(r, "set_len", &tmp)?;
        let path = self.blocks[pos].path.clone();
        let r = self.fs.rename(&tmp, &path);
        self.dur.latch(r, "rename", &tmp)?;
        let b = &mut self.blocks[pos];
        b.handle.file = Some(Arc::new(f));
        b.span.alloc = len;
        b.handle.dirty = true;
        b.handle.written = true;
        self.dur.names_changed();
        Ok(())
    }
}
