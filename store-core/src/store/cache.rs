//! The block cache for reads.

use super::{io_at, Store};
use crate::error::Result;
use crate::fs::{Fs, FsFile};

impl<F: Fs> Store<F> {
    /// Changes `Config::block_cache` on an open store; cached blocks beyond the new limit are
    /// dropped at once, coldest first.
    pub fn set_block_cache(&mut self, bytes: u64) {
        self.cfg.block_cache = bytes;
        let mut held = self.cache_held();
        while held > bytes {
            match self.evict_coldest(|_| true) {
                Some(freed) => held -= freed,
                None => break,
            }
        }
    }

    /// Bytes held by block caches.
    pub(crate) fn cache_held(&self) -> u64 {
        self.blocks
            .iter()
            .filter_map(|b| b.copies.cache.as_ref().map(|c| c.len() as u64))
            .sum()
    }

    /// Drops the cached copy of the coldest cached block if `evict(its heat)` agrees; the
    /// bytes freed, or `None` (nothing cached, or refused).
    pub(super) fn evict_coldest(&mut self, evict: impl FnOnce(u64) -> bool) -> Option<u64> {
        let v = self
            .blocks
            .iter_mut()
            .filter(|b| b.copies.cache.is_some())
            .min_by_key(|b| b.copies.heat)?;
        if !evict(v.copies.heat) {
            return None;
        }
        v.copies.uncached_reads = 0;
        v.copies.cache.take().map(|c| c.len() as u64)
    }

    /// Decides whether a read of block `pos` should first cache the whole block, and does it.
    ///
    /// Why: a random get by `pread` costs a syscall, a page-cache lookup and a copy, most of
    /// a get's time; from memory it is a copy. Only sealed blocks are cached (the
    /// newest still grows), within `Config::block_cache` bytes. Loading a block costs about as
    /// much as one `pread` per 4 KiB of it, so a block is admitted only after that many preads
    /// of it (ski rental). When the cache is full a block displaces the coldest cached one
    /// only if it is clearly hotter (twice the reads, counts halved every 64 reads per block):
    /// reads spread evenly over a stream larger than the cache then settle on a fixed cached
    /// set instead of reloading 8 MiB blocks over and over (plain LRU, with that churn, made
    /// random gets slower than no cache at all). A failed load is the read's error (the
    /// fault sweep holds every failed I/O to surfacing somewhere; a block that cannot be read
    /// whole is worth knowing about), and the block is not cached. Also opens the block's
    /// file if it was closed.
    pub(super) fn prepare_read(&mut self, pos: usize) -> Result<()> {
        // the read that follows finds the handle held (`files.rs`)
        self.hold_file(pos)?;
        let limit = self.cfg.block_cache;
        if limit == 0 || pos + 1 >= self.blocks.len() {
            return Ok(());
        }
        self.blocks.reads_since_decay += 1;
        if self.blocks.reads_since_decay > 64 * self.blocks.len() as u64 {
            self.blocks.reads_since_decay = 0;
            for b in self.blocks.iter_mut() {
                b.copies.heat /= 2;
            }
        }
        let b = &mut self.blocks[pos];
        b.copies.heat += 1;
        if b.copies.cache.is_some() {
            return Ok(());
        }
        b.copies.uncached_reads += 1;
        if b.copies.uncached_reads < (b.span.len / 4096).max(1) || b.span.len > limit {
            return Ok(());
        }
        let (need, heat) = (b.span.len, b.copies.heat);
        let mut held = self.cache_held();
        while held + need > limit {
            match self.evict_coldest(|cold| cold.saturating_mul(2) < heat) {
                Some(freed) => held -= freed,
                // not clearly hotter than what is cached: stay with preads
                None => {
                    self.blocks[pos].copies.uncached_reads = 0;
                    return Ok(());
                }
            }
        }
        let file = self.open_block(pos)?;
        let b = &mut self.blocks[pos];
        b.copies.uncached_reads = 0;
        let mut bytes = vec![0u8; need as usize].into_boxed_slice();
        io_at(file.read_exact_at(&mut bytes, 0), "read", &b.path)?;
        b.copies.cache = Some(bytes);
        Ok(())
    }

    /// Whether any block cache holds `needle` (tests: an erased payload must not).
    #[cfg(test)]
    pub(crate) fn cache_contains(&self, needle: &[u8]) -> bool {
        self.blocks
            .iter()
            .filter_map(|b| b.copies.cache.as_deref())
            .any(|c| c.windows(needle.len()).any(|w| w == needle))
    }
}
