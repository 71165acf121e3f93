//! The engines seqstore is measured against, each behind the same few calls: a naive
//! `BufWriter` log written here, okaywal 0.3 and fjall 3. Each runs in its own directory.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};

/// The naive baseline: one file, `BufWriter` (default 8 KiB buffer), records of
/// `len u32 | crc32 u32 | payload`. No index, no subjects, no sequence numbers, no recovery.
pub(crate) struct Baseline {
    w: BufWriter<File>,
}

impl Baseline {
    pub(crate) fn create(dir: &Path) -> Result<Self> {
        let p = dir.join("baseline.log");
        let f = File::create(&p).with_context(|| format!("create {}", p.display()))?;
        Ok(Baseline {
            w: BufWriter::new(f),
        })
    }

    #[inline]
    pub(crate) fn append(&mut self, payload: &[u8]) -> Result<()> {
        let crc = crc32fast::hash(payload);
        self.w.write_all(&(payload.len() as u32).to_le_bytes())?;
        self.w.write_all(&crc.to_le_bytes())?;
        self.w.write_all(payload)?;
        Ok(())
    }

    /// Flush the buffer, then `fdatasync`.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.w.flush()?;
        self.w.get_ref().sync_data()?;
        Ok(())
    }
}

/// okaywal with its default configuration (1 MiB preallocated segments, checkpoint after
/// 768 KiB, 16 KiB buffer) and a `LogVoid` manager (checkpoints discard). An entry is
/// okaywal's unit of durability: `commit` fsyncs.
pub(crate) struct OkayWal {
    wal: okaywal::WriteAheadLog,
}

impl OkayWal {
    pub(crate) fn create(dir: &Path) -> Result<Self> {
        let wal = okaywal::Configuration::default_for(dir.join("okaywal"))
            .open(okaywal::LogVoid)
            .context("okaywal open")?;
        Ok(OkayWal { wal })
    }

    /// Appends `n` payloads as chunks of entries of `batch` chunks, committing each entry
    /// (one fsync per entry).
    pub(crate) fn append_committed(&self, payload: &[u8], n: u64, batch: u64) -> Result<()> {
        let mut left = n;
        while left > 0 {
            let k = left.min(batch);
            let mut e = self.wal.begin_entry()?;
            for _ in 0..k {
                e.write_chunk(payload)?;
            }
            e.commit()?;
            left -= k;
        }
        Ok(())
    }

    /// The "no sync" loop: every payload a chunk of one open entry; the caller stops its
    /// clock before the entry is committed (okaywal cannot append without a commit's fsync).
    pub(crate) fn entry(&self) -> Result<okaywal::EntryWriter<'_>> {
        Ok(self.wal.begin_entry()?)
    }

    pub(crate) fn shutdown(self) -> Result<()> {
        self.wal.shutdown().context("okaywal shutdown")
    }
}

/// fjall: one database, one keyspace, key = sequence (u64 big-endian), value = payload.
/// `manual` = `KeyspaceCreateOptions::manual_journal_persist(true)`: the journal stays in
/// fjall's buffer until `persist` (by default every insert is written to the OS).
pub(crate) struct Fjall {
    db: fjall::Database,
    ks: fjall::Keyspace,
    seq: u64,
}

impl Fjall {
    pub(crate) fn create(dir: &Path, manual: bool) -> Result<Self> {
        let db = fjall::Database::builder(dir.join("fjall"))
            .open()
            .context("fjall open")?;
        let ks = db
            .keyspace("msgs", || {
                fjall::KeyspaceCreateOptions::default().manual_journal_persist(manual)
            })
            .context("fjall keyspace")?;
        Ok(Fjall { db, ks, seq: 0 })
    }

    #[inline]
    pub(crate) fn append(&mut self, payload: &[u8]) -> Result<()> {
        self.seq += 1;
        self.ks.insert(&self.seq.to_be_bytes()[..], payload)?;
        Ok(())
    }

    /// `Database::persist(SyncData)`: the journal written out and fdatasynced.
    pub(crate) fn sync(&self) -> Result<()> {
        self.db.persist(fjall::PersistMode::SyncData)?;
        Ok(())
    }
}
