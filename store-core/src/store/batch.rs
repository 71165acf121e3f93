//! Batch reads: the records of many messages read by runs, one read per run of adjacent
//! records in a block instead of one per message, their checksums computed in one call where
//! the file asks for that (`FastPaths::batch_crc32`: the wasm guest's host, with SIMD), and each
//! checked as `read_entry` checks one (crc, kind, sequence).

use super::{io_at, Store};
use crate::error::{Error, Result};
use crate::fast;
use crate::fs::{Fs, FsFile};
use crate::record::{self, decode, Decoded, Kind};

/// Adjacent records of one block: `(seq, offset, len)` each, in order.
struct Run {
    pos: usize,
    recs: Vec<(u64, u64, usize)>,
}

impl<F: Fs> Store<F> {
    /// Groups `seqs` (stored messages, ascending) into runs of records adjacent in one block
    /// and on the same side of its written length (file or write buffer).
    fn runs(&mut self, seqs: &[u64]) -> Result<Vec<Run>> {
        let mut runs: Vec<Run> = Vec::new();
        for &seq in seqs {
            // runs hold offsets, not positions into entries: the cache may drop entries here
            self.trim_entries();
            let Some((pos, i)) = self.find(seq)? else {
                return Err(Error::NotFound { seq });
            };
            let b = &self.blocks[pos];
            let e = b.loaded().at(i);
            let (off, len) = (e.off as u64, e.len as usize);
            let joins = runs
                .last()
                .and_then(|r| Some((r, *r.recs.last()?)))
                .is_some_and(|(r, (_, o, l))| {
                    r.pos == pos && o + l as u64 == off && (o >= b.span.len) == (off >= b.span.len)
                });
            match runs.last_mut() {
                Some(r) if joins => r.recs.push((seq, off, len)),
                _ => runs.push(Run {
                    pos,
                    recs: vec![(seq, off, len)],
                }),
            }
        }
        Ok(runs)
    }

    /// The bytes `off..off + len` of block `pos`: from the write buffer, the block's cache or
    /// the file (into `owned`).
    fn run_bytes<'a>(
        &'a self,
        pos: usize,
        off: u64,
        len: usize,
        owned: &'a mut Vec<u8>,
    ) -> Result<&'a [u8]> {
        let b = &self.blocks[pos];
        if off >= b.span.len {
            let at = (off - b.span.len) as usize;
            return Ok(&self.wbuf[at..at + len]);
        }
        if let Some(c) = b
            .copies
            .cache
            .as_deref()
            .filter(|c| off as usize + len <= c.len())
        {
            return Ok(&c[off as usize..off as usize + len]);
        }
        owned.resize(len, 0);
        let file = self.block_file(pos)?;
        io_at(file.read_exact_at(owned, off), "read", &b.path)?;
        Ok(owned)
    }

    /// Calls `each` with every message record of `seqs` (stored, ascending), checked, in
    /// order: its bytes as stored and the decoded record.
    pub(super) fn for_each_record(
        &mut self,
        seqs: &[u64],
        mut each: impl FnMut(&[u8], &record::Record<'_>),
    ) -> Result<()> {
        let (mut owned, mut ranges, mut crcs) = (Vec::new(), Vec::new(), Vec::new());
        for run in self.runs(seqs)? {
            self.prepare_read(run.pos)?;
            let start = run.recs[0].1;
            let total: usize = run.recs.iter().map(|r| r.2).sum();
            let bytes = self.run_bytes(run.pos, start, total, &mut owned)?;
            let (b, file) = (&self.blocks[run.pos], self.block_file(run.pos)?);
            crcs.clear();
            if fast::batch_crc32(&*file) {
                // each record's crc covers its bytes before the crc field
                ranges.clear();
                for &(_, off, len) in &run.recs {
                    ranges.push(((off - start) as u32, len as u32 - 4));
                }
                fast::crc32_ranges(&*file, bytes, &ranges, &mut crcs);
            }
            for (k, &(seq, off, len)) in run.recs.iter().enumerate() {
                let at = (off - start) as usize;
                let rec = &bytes[at..at + len];
                let d = match crcs.get(k) {
                    Some(&c) => record::decode_with_crc(rec, c),
                    None => decode(rec),
                };
                match d {
                    Decoded::Record(r) if r.kind == Kind::Msg && r.seq == seq => each(rec, &r),
                    Decoded::Record(_) => {
                        return Err(Error::corrupt(b.path.clone(), off, "wrong record here"))
                    }
                    Decoded::Bad { reason, .. } => {
                        return Err(Error::corrupt(b.path.clone(), off, reason))
                    }
                    _ => return Err(Error::corrupt(b.path.clone(), off, "record cut short")),
                }
            }
        }
        Ok(())
    }
}
