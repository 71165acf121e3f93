//! The log itself, synchronous: openraft's log storage operations on a store-core `Store`.
//!
//! Log index `i` is stream sequence `i + 1 + seq_offset` (openraft's indices start at 0, the
//! store's sequences at 1; `seq_offset` is 0 unless recovery had to drop unacknowledged entries
//! right after the purge point, see `LogCore::cut_front`); every entry is one message on subject [`SUBJECT`] whose payload is the
//! versioned encoding of the entry ([`encode_entry`]). The vote, the last purged `LogId` and
//! the committed `LogId` live in the metadata file ([`crate::meta`]).
//!
//! What is durable when (the crate README says why this order):
//! - `append_buffered` writes entries (readable at once, durable only after `sync`);
//! - `sync` makes every entry written so far durable: the append callbacks fire after it;
//! - `truncate` is durable before it returns (store-core's truncate commit fsync);
//! - `purge` writes the metadata with the new last purged id durably *first*, then compacts the
//!   stream (durable before return): a purge whose effect can be seen always has its id on disk;
//! - `save_vote` is durable before it returns (metadata replaced and fsynced);
//! - `save_committed` is kept in memory and written with the next metadata write.

use crate::error::{Error, Result};
use crate::meta::{self, Meta};
use crate::sharedfs::SharedFs;
use crate::types::{Entry, LogId, Vote};
use crate::{damaged, unsynced};
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_core::internal::MSGS_DIR;
use seqstore_core::{Config, Store, SyncPolicy};
use std::sync::Arc;

/// The one subject every log entry is appended under.
pub const SUBJECT: &str = "raft.log";
/// The version byte in front of every encoded entry.
pub const ENTRY_VERSION: u8 = 1;
/// A record that holds no entry: an index an append skipped (see `append_buffered`).
const ABSENT: u8 = 0;
/// The most indices one append may skip in a non-empty log.
pub const MAX_FILL: u64 = 1024;

/// Durability ablation switches: **each breaks durability on purpose**, so that the crash
/// tests can show their checker finds the loss (negative controls). Only with the `ablation`
/// feature, which nothing but this crate's own tests turns on.
#[cfg(feature = "ablation")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ablation {
    /// The real log.
    #[default]
    Full,
    /// `purge` replaces the metadata file without fsyncing it or the directory.
    PurgeMetaUnsynced,
    /// `purge` compacts the stream before it writes the purged id.
    PurgeBeforeMeta,
    /// `truncate`'s commit block is not fsynced (store-core `skip:truncate.commit-data`).
    TruncateUnsynced,
    /// `save_vote` replaces the metadata file without any fsync.
    VoteUnsynced,
    /// Recovery's front-hole repair writes the new `seq_offset` before it truncates the
    /// entries that offset re-maps (the right order is truncate first).
    RepairOffsetFirst,
    /// An append's callback (openraft's "flushed") fires as soon as its entries are written,
    /// without the fsync: the entries become durable only when a later truncate or purge
    /// happens to sync the store. The whole-cluster simulation's negative control.
    AckBeforeSync,
    /// The log trusts what a restarted process reads: a failed write or fsync is not recorded
    /// (`raft-unsynced`), and open writes neither the metadata nor the block files again.
    /// Entries or a vote that a failed fsync left in the page cache only are read back and
    /// served as if durable.
    ForgetFailedSync,
    /// Open does not write the block files again: pages a failed writeback left clean (a
    /// block's header, say) stay as the page cache shows them and the disk never got them.
    TrustCleanPages,
    /// Recovery takes every hole for a power cut's: damage to entries a later record vouches
    /// for is cut like a torn tail and not recorded (`raft-damaged`), so the node votes and
    /// stands for election at once with a log shorter than what it acknowledged.
    TrustDamage,
}

/// The largest entry the log stores: store-core's upper bound for `max_payload` (32 MiB).
const LOG_MAX_PAYLOAD: u32 = 32 << 20;

/// How to open a log: `LogConfig::default()` and the `with_` methods (fields may be added).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LogConfig {
    /// The store's block size (default 8 MiB).
    pub block_size: u64,
    /// Run the log's file I/O on the calling task instead of a dedicated thread (default
    /// `false`); see [`LogConfig::with_inline_io`].
    pub inline_io: bool,
    /// Test-only durability switches.
    #[cfg(feature = "ablation")]
    pub ablation: Ablation,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            block_size: 8 << 20,
            inline_io: false,
            #[cfg(feature = "ablation")]
            ablation: Ablation::Full,
        }
    }
}

impl LogConfig {
    /// Sets the block size. (A struct literal from outside would have to name the test-only
    /// `ablation` field whenever a workspace build unifies that feature in.)
    pub fn with_block_size(mut self, block_size: u64) -> Self {
        self.block_size = block_size;
        self
    }

    /// Runs every write, its fsync and every read on the task that calls the log (blocking
    /// it), in call order, instead of on the log's I/O thread and tokio's blocking pool. The
    /// durability contract is the same (an append's callback fires after its fsync; every
    /// other write is durable before it returns), minus group commit across appends.
    ///
    /// With a real disk it stalls the executor for every fsync. openraft 0.9 awaits each
    /// append's flush before its next command anyway, so on a node whose runtime is one
    /// thread that stall mostly replaces two thread switches per append: seqstore-server
    /// runs this way. The whole-cluster simulation uses it so that a run is one thread and
    /// replays from its seed.
    pub fn with_inline_io(mut self, inline: bool) -> Self {
        self.inline_io = inline;
        self
    }

    fn store_config(&self) -> Config {
        #[allow(unused_mut)]
        let mut c = Config::default()
            .with_block_size(self.block_size)
            // Appends are made durable by `sync` once per batch (group commit); truncate,
            // compact and purge fsync in every policy.
            .with_sync(SyncPolicy::Never)
            // zeros ahead of the newest block, as under `Always`: an append's fsync then has
            // no new file length to commit (one device flush instead of a journal commit)
            .with_preallocate_under_never(true)
            // an entry is one message: room for the largest request a stream takes
            // (`types::MAX_REQUEST_BYTES`) plus the entry's own fields
            .with_max_payload(LOG_MAX_PAYLOAD);
        #[cfg(feature = "ablation")]
        if self.ablation == Ablation::TruncateUnsynced {
            c.ablation = seqstore_core::Ablation::Skip(
                seqstore_core::internal::SyncSite::TruncateCommitData,
            );
        }
        c
    }

    pub(crate) fn ablated(&self, _which: &str) -> bool {
        #[cfg(feature = "ablation")]
        {
            let a = match _which {
                "purge-meta" => Ablation::PurgeMetaUnsynced,
                "purge-order" => Ablation::PurgeBeforeMeta,
                "vote" => Ablation::VoteUnsynced,
                "repair-order" => Ablation::RepairOffsetFirst,
                "ack-before-sync" => Ablation::AckBeforeSync,
                "forget-failed-sync" => Ablation::ForgetFailedSync,
                "trust-clean-pages" => Ablation::TrustCleanPages,
                "trust-damage" => Ablation::TrustDamage,
                _ => return false,
            };
            self.ablation == a
        }
        #[cfg(not(feature = "ablation"))]
        false
    }
}

/// Encodes an entry: the version byte, then postcard of the openraft entry.
pub fn encode_entry(e: &Entry) -> Result<Vec<u8>> {
    let out = vec![ENTRY_VERSION];
    postcard::to_extend(e, out).map_err(|err| Error::corrupt("entry (encode)", err))
}

/// Decodes the entry stored for log index `index`; checks the version and the index.
pub fn decode_entry(index: u64, bytes: &[u8]) -> Result<Entry> {
    let what = || format!("entry for index {index}");
    match bytes.split_first() {
        Some((&ENTRY_VERSION, body)) => {
            let e: Entry = postcard::from_bytes(body).map_err(|err| Error::corrupt(what(), err))?;
            if e.log_id.index != index {
                return Err(Error::corrupt(
                    what(),
                    format!("holds index {}", e.log_id.index),
                ));
            }
            Ok(e)
        }
        Some((v, _)) => Err(Error::corrupt(what(), format!("unknown version {v}"))),
        None => Err(Error::corrupt(what(), "empty")),
    }
}

/// The log: a stream store plus the metadata file, on one filesystem.
pub struct LogCore<F: Fs> {
    fs: SharedFs<F>,
    store: Store<SharedFs<F>>,
    /// The metadata as last written.
    meta: Meta,
    /// The committed id openraft last saved (persisted lazily, see the module doc).
    committed: Option<LogId>,
    /// The id of the last entry present, or the last purged id if none is.
    last_log: Option<LogId>,
    cfg: LogConfig,
    /// Where recovery cut the stream at a hole, if it did.
    cut: Option<u64>,
    /// Whether opening wrote anything (store recovery's repairs, a redone compaction, a cut).
    repaired: bool,
    /// The last stream sequence known durable: everything up to it was written before an
    /// fsync that succeeded (in this process, or made durable at open). Every record written
    /// carries it in its headers (see the `damaged` module).
    synced_seq: u64,
    /// The index the log must hold durably again before the node votes or stands for
    /// election (`raft-damaged`): recovery found damage to entries that were durable.
    damaged: Option<u64>,
}

/// Every block file of the log written again with what this process reads of it, and fsynced,
/// names included, at every open. Linux marks the pages a failed writeback dropped clean, and
/// a later fsync writes only dirty pages: a block header written just before a failed fsync (a
/// block begun then) would stay blank on disk under records synced later, and a power cut
/// would take the whole block, acknowledged records with it. Written again, the pages are
/// dirty and the fsync writes them. At every open, not only after a failure `raft-unsynced`
/// recorded: writing that record can fail too, and so can the fsync of an open (the next open
/// then writes the same pages again). The log is small: it is purged behind each snapshot.
fn rewrite_blocks<F: Fs>(fs: &F) -> Result<()> {
    let entries = match fs.read_dir(MSGS_DIR) {
        Ok(v) => v,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("read_dir", MSGS_DIR, e)),
    };
    let mut buf = vec![0u8; 1 << 20];
    for e in entries.iter().filter(|e| !e.is_dir) {
        let path = format!("{MSGS_DIR}/{}", e.name);
        let p = path.as_str();
        let io = |op: &'static str| move |err| Error::io(op, p, err);
        let f = fs
            .open(&path, OpenOptions::new().read(true).write(true))
            .map_err(io("open"))?;
        let len = f.len().map_err(io("len"))?;
        let mut at = 0;
        while at < len {
            // a chunk at a time: a block is a few MB, a damaged file may claim any length
            let n = (len - at).min(buf.len() as u64) as usize;
            f.read_exact_at(&mut buf[..n], at).map_err(io("read"))?;
            f.write_all_at(&buf[..n], at).map_err(io("write"))?;
            at += n as u64;
        }
        f.sync_data().map_err(io("sync_data"))?;
    }
    fs.sync_dir(MSGS_DIR)
        .map_err(|e| Error::io("sync_dir", MSGS_DIR, e))?;
    fs.sync_dir("").map_err(|e| Error::io("sync_dir", "", e))
}

impl<F: Fs> LogCore<F> {
    /// Opens (recovers) the log on `fs`, or creates an empty one.
    ///
    /// Recovery: the store recovers its stream; a purge whose id is in the metadata but whose
    /// compaction did not reach the disk is redone; a hole left by a power cut (a record lost
    /// while later ones, in another block file, survived) is cut off with everything after it,
    /// none of which was acknowledged (`cut_at_hole`, `cut_front`); the stream must then be
    /// contiguous from the last purged index + 1 (anything else is an error, never served); a
    /// committed id that does not match a present entry is lowered to the last purged id.
    pub fn open(fs: F, cfg: LogConfig) -> Result<Self> {
        let fs = SharedFs(Arc::new(fs));
        let meta = meta::read(&fs)?;
        // a damage record from an earlier process (the log was cut there, the proof is gone)
        let damaged = damaged::read(&fs)?;
        // (the store's lock first: nothing below writes while another process has the log)
        let mut store = Store::open(fs.clone(), cfg.store_config())?;
        if meta != Meta::default() && !cfg.ablated("forget-failed-sync") {
            // The vote this process reads must be durable before it acts on it: a previous
            // process may have renamed it in and failed to fsync the directory, and a power
            // cut would then bring the older vote back. Written again, durably.
            meta::write(&fs, &meta, true)?;
        }
        if !cfg.ablated("trust-clean-pages") && !cfg.ablated("forget-failed-sync") {
            rewrite_blocks(&fs)?;
        }
        let r = store.recovery_report();
        let mut repaired = !r.cuts.is_empty()
            || !r.removed_blank.is_empty()
            || r.purge_completed
            || r.purge_rolled_back
            || r.truncate_cleanup;
        if let Some(p) = meta.last_purged {
            // no-op when the compaction is already there; fsynced when it is not
            let before = store.state();
            store.compact(p.index + 2 + meta.seq_offset)?;
            repaired |= store.state() != before;
        }
        let mut core = LogCore {
            fs,
            store,
            committed: None,
            last_log: meta.last_purged,
            meta,
            cut: None,
            repaired,
            cfg,
            synced_seq: 0,
            damaged,
        };
        core.cut_unsynced()?;
        core.find_damage()?;
        core.cut_at_hole()?;
        core.cut_front()?;
        core.check_contiguous()?;
        core.committed = core.recovered_committed()?;
        // What this process reads is durable from here on, or the node does not start: the
        // entries a previous process wrote may still sit in the page cache only.
        core.store.sync()?;
        core.synced_seq = core.store.state().last_seq;
        core.lift_damage();
        Ok(core)
    }

    /// Drops the entries a failed write or fsync left in doubt (`raft-unsynced`, written when
    /// it failed): Linux keeps the data of a failed fsync readable in the page cache, but it
    /// never reaches the disk, and a later fsync reports success without writing it. A process
    /// restarted after the failure would read those entries back and answer for them; a power
    /// cut would then take them. None of them was acknowledged (an append's callback fires
    /// only after its fsync succeeded), so they go, durably, and the leader sends them again.
    /// The record is then cleared durably, and again at every later open that finds the file:
    /// a clearing lost with a failed directory fsync would otherwise come back with a power
    /// cut and cut entries acknowledged since (`unsynced` module doc).
    fn cut_unsynced(&mut self) -> Result<()> {
        let Some(record) = unsynced::read_record(&self.fs)? else {
            return Ok(());
        };
        if let Some(from) = record {
            let st = self.store.state();
            if from <= st.last_seq {
                self.store.truncate((from - 1).max(st.first_seq - 1))?;
                self.cut = Some(self.index_of(from.max(st.first_seq)));
            }
            self.repaired = true;
        }
        unsynced::clear(&self.fs)
    }

    /// Damage to entries that were durable (see the `damaged` module): a hole, inside the
    /// stream or right after the purge point, at or below a sequence that a record after it
    /// vouches for. Recorded durably before `cut_at_hole` or `cut_front` removes the records
    /// that show it: the node must hold the log's last index again before it votes.
    fn find_damage(&mut self) -> Result<()> {
        let st = self.store.state();
        let first = self.seq_of(self.meta.last_purged.map_or(0, |p| p.index + 1));
        let front = st.msgs > 0 && st.first_seq > first;
        if (st.num_deleted == 0 && !front) || self.cfg.ablated("trust-damage") {
            return Ok(());
        }
        let mut hole = front.then_some(first);
        let mut vouched = 0;
        for seq in st.first_seq..=st.last_seq {
            match self.store.get(seq) {
                Ok(m) if hole.is_some() => vouched = vouched.max(damaged::vouched(&m.headers)),
                Ok(_) => {}
                Err(seqstore_core::Error::NotFound { .. }) => {
                    hole.get_or_insert(seq);
                }
                Err(e) => return Err(e.into()),
            }
        }
        if hole.is_some_and(|h| h <= vouched) {
            let through = self.index_of(st.last_seq);
            damaged::note(&self.fs, through)?;
            self.damaged = self.damaged.max(Some(through));
            self.repaired = true;
        }
        Ok(())
    }

    /// The index the log must hold durably again before the node votes or stands for
    /// election, if recovery found damage (see the `damaged` module).
    pub fn damaged(&self) -> Option<u64> {
        self.damaged
    }

    /// Lifts the damage record once the log holds its index durably (after an fsync, and at
    /// open: a record whose clearing a crash lost). A record that cannot be cleared stays,
    /// and so does the gate.
    fn lift_damage(&mut self) {
        if self
            .damaged
            .is_some_and(|t| self.synced_seq > 0 && self.index_of(self.synced_seq) >= t)
            && damaged::clear(&self.fs).is_ok()
        {
            self.damaged = None;
        }
    }

    /// Records, durably, that the entries after the last known durable one are in doubt,
    /// before the error that put them there goes up (`cut_unsynced` reads it at the next open).
    /// If the record cannot be written either, the error is still the caller's: the node stops.
    fn note_failure<T>(&mut self, r: seqstore_core::Result<T>) -> Result<T> {
        // a refusal of the input (too large, say) wrote nothing: only the disk's failures count
        let disk = matches!(
            r,
            Err(seqstore_core::Error::Io { .. }
                | seqstore_core::Error::Poisoned
                | seqstore_core::Error::Corrupt { .. })
        );
        if disk && !self.cfg.ablated("forget-failed-sync") {
            let _ = unsynced::note(&self.fs, self.synced_seq + 1);
        }
        Ok(r?)
    }

    /// Drops the stream from its first missing sequence on (durable truncate). After a power
    /// cut the stream may miss a record whose successors survived (they sat in another block
    /// file: unsynced writes to two files reach the disk in any order). No entry from the hole
    /// on was acknowledged: an append's callback fires only after an fsync of everything
    /// written before it, so the hole's record would be durable. openraft sees the log end
    /// before the hole, as it would if the power cut had come earlier.
    fn cut_at_hole(&mut self) -> Result<()> {
        let st = self.store.state();
        if st.num_deleted == 0 {
            return Ok(());
        }
        let mut seq = st.first_seq;
        while seq <= st.last_seq {
            match self.store.get(seq) {
                Ok(_) => seq += 1,
                Err(seqstore_core::Error::NotFound { .. }) => break,
                Err(e) => return Err(e.into()),
            }
        }
        self.store.truncate(seq - 1)?;
        self.cut = Some(self.index_of(seq));
        Ok(())
    }

    /// The hole at the front: the entries right after the purge point are missing and later
    /// ones survived (so none of them was acknowledged, as in `cut_at_hole`), or the stream is
    /// empty but ends past the purge point (the state that cut leaves). All present entries go
    /// (durable truncate); then `seq_offset` is raised so that the next sequence is the index
    /// after the purge point again, written to the metadata durably. A crash between the two
    /// steps leaves the second state, which the next open repairs the same way.
    fn cut_front(&mut self) -> Result<()> {
        let first = self.meta.last_purged.map_or(0, |p| p.index + 1);
        let st = self.store.state();
        if st.msgs > 0 && st.first_seq > self.seq_of(first) {
            if self.cfg.ablated("repair-order") {
                // wrong on purpose: the offset before the entries it re-maps are gone
                self.raise_offset(st.first_seq - 1 - first)?;
            }
            self.store.truncate(st.first_seq - 1)?;
            self.cut = Some(first);
        }
        let st = self.store.state();
        if st.msgs == 0 && st.last_seq + 1 > self.seq_of(first) {
            self.raise_offset(st.last_seq - first)?;
            self.cut = Some(first);
        }
        Ok(())
    }

    /// Writes the new `seq_offset` durably (the second step of `cut_front`).
    fn raise_offset(&mut self, seq_offset: u64) -> Result<()> {
        let new = Meta {
            seq_offset,
            ..self.meta.clone()
        };
        meta::write(&self.fs, &new, true)?;
        self.meta = new;
        Ok(())
    }

    /// The stream sequence of log index `index`.
    fn seq_of(&self, index: u64) -> u64 {
        index + 1 + self.meta.seq_offset
    }

    /// The log index of stream sequence `seq`.
    fn index_of(&self, seq: u64) -> u64 {
        seq.saturating_sub(1 + self.meta.seq_offset)
    }

    /// The index from which recovery dropped the stream at a hole (`cut_at_hole`, `cut_front`).
    pub fn recovery_cut(&self) -> Option<u64> {
        self.cut
    }

    /// Whether opening changed anything on disk (what the crash-during-recovery check keys on).
    pub fn recovery_wrote(&self) -> bool {
        self.repaired || self.cut.is_some()
    }

    /// Checks that the stream holds exactly the indices `last_purged + 1 ..= last` with no
    /// hole, and sets `last_log` from its last entry.
    fn check_contiguous(&mut self) -> Result<()> {
        let st = self.store.state();
        let first = self.meta.last_purged.map_or(0, |p| p.index + 1);
        if st.num_deleted != 0 {
            return Err(Error::Gap(format!(
                "{} sequences missing between {} and {}",
                st.num_deleted, st.first_seq, st.last_seq
            )));
        }
        if st.msgs == 0 {
            if st.last_seq + 1 != self.seq_of(first) {
                return Err(Error::Gap(format!(
                    "empty stream ends at sequence {} but the last purged index + 1 is {first}",
                    st.last_seq
                )));
            }
            return Ok(());
        }
        if st.first_seq != self.seq_of(first) {
            return Err(Error::Gap(format!(
                "first sequence {} but the last purged index + 1 is {first}",
                st.first_seq
            )));
        }
        self.last_log = self.last_present(first, self.index_of(st.last_seq) + 1)?;
        Ok(())
    }

    /// The first index present, or the next index if the log is empty.
    fn first_index(&self) -> u64 {
        let st = self.store.state();
        if st.msgs == 0 {
            self.next_index()
        } else {
            self.index_of(st.first_seq)
        }
    }

    /// The committed id from the metadata if it names a purged or present entry, else the last
    /// purged id (purged entries were committed).
    fn recovered_committed(&mut self) -> Result<Option<LogId>> {
        let Some(c) = self.meta.committed else {
            return Ok(self.meta.last_purged);
        };
        if self.meta.last_purged.is_some_and(|p| c.index <= p.index) {
            return Ok(self.meta.last_purged.max(Some(c)));
        }
        if self.last_log.is_some_and(|l| c.index <= l.index)
            && self.try_entry_at(c.index)?.is_some_and(|e| e.log_id == c)
        {
            return Ok(Some(c));
        }
        Ok(self.meta.last_purged)
    }

    /// The entry with log index `index` (it must be present; an absent record is `None`).
    fn try_entry_at(&mut self, index: u64) -> Result<Option<Entry>> {
        let m = self.store.get(self.seq_of(index))?;
        if m.payload == [ABSENT] {
            return Ok(None);
        }
        decode_entry(index, &m.payload).map(Some)
    }

    /// The id of the last entry in `first..end` that is not an absent record, else the last
    /// purged id.
    fn last_present(&mut self, first: u64, end: u64) -> Result<Option<LogId>> {
        for i in (first..end).rev() {
            if let Some(e) = self.try_entry_at(i)? {
                return Ok(Some(e.log_id));
            }
        }
        Ok(self.meta.last_purged)
    }

    /// The next index to append.
    pub fn next_index(&self) -> u64 {
        self.index_of(self.store.state().last_seq + 1)
    }

    /// `(last_purged, last_log)`: `last_log` equals `last_purged` when no entry is present.
    pub fn log_state(&self) -> (Option<LogId>, Option<LogId>) {
        (self.meta.last_purged, self.last_log)
    }

    /// The present entries with indices in `start..end` (purged or missing ones are left out).
    pub fn read(&mut self, start: u64, end: u64) -> Result<Vec<Entry>> {
        let (start, end) = (start.max(self.first_index()), end.min(self.next_index()));
        let mut out = Vec::with_capacity(end.saturating_sub(start) as usize);
        for i in start..end {
            out.extend(self.try_entry_at(i)?);
        }
        Ok(out)
    }

    /// Writes entries (readable at once, not yet durable: see [`LogCore::sync`]). openraft
    /// sends each batch at the log's next index. Two departures are accepted, because
    /// openraft's own storage suite makes them (it treats the log as a map):
    /// - an entry at or below the last purged index is dropped (it is covered by the purge);
    /// - an entry below the next index replaces it and everything after it, as if openraft
    ///   had called `truncate` first (the truncate is durable, as `truncate` is);
    /// - an entry above the next index: the indices between are filled with "absent" records
    ///   (at most [`MAX_FILL`]), which reads skip, so that sequence and index stay in step.
    pub fn append_buffered(&mut self, entries: impl IntoIterator<Item = Entry>) -> Result<()> {
        for e in entries {
            let (idx, want) = (e.log_id.index, self.next_index());
            if self.meta.last_purged.is_some_and(|p| idx <= p.index) {
                continue; // already purged: covered by a snapshot, never to be read again
            }
            if idx < want {
                self.truncate(e.log_id)?;
            } else if idx > want {
                if idx - want > MAX_FILL {
                    return Err(Error::Gap(format!(
                        "append of index {idx} where {want} is next"
                    )));
                }
                for _ in want..idx {
                    let r = self
                        .store
                        .append(SUBJECT, &self.synced_seq.to_le_bytes(), &[ABSENT]);
                    self.note_failure(r)?;
                }
            }
            let r = self
                .store
                .append(SUBJECT, &self.synced_seq.to_le_bytes(), &encode_entry(&e)?);
            let seq = self.note_failure(r)?;
            if seq != self.seq_of(idx) {
                return Err(Error::Gap(format!("index {idx} stored at sequence {seq}")));
            }
            self.last_log = Some(e.log_id);
        }
        Ok(())
    }

    /// Makes every entry written so far durable.
    pub fn sync(&mut self) -> Result<()> {
        let last = self.store.state().last_seq;
        let r = self.store.sync();
        self.note_failure(r)?;
        self.synced_seq = last;
        self.lift_damage();
        Ok(())
    }

    /// Removes the entries from `log_id.index` on; durable before return.
    pub fn truncate(&mut self, log_id: LogId) -> Result<()> {
        if log_id.index >= self.next_index() {
            return Ok(());
        }
        let first = self.first_index();
        if log_id.index < first {
            return Err(Error::Gap(format!(
                "truncate at {} below the first present index {first}",
                log_id.index
            )));
        }
        // keeps the sequences of indices < index; fsyncs its commit block and all before it
        let r = self.store.truncate(self.seq_of(log_id.index) - 1);
        self.note_failure(r)?;
        self.synced_seq = self.store.state().last_seq;
        self.last_log = self.last_present(first, log_id.index)?;
        Ok(())
    }

    /// Removes the entries up to and including `log_id.index`, and keeps `log_id` as the last
    /// purged id. The id is durable before any entry disappears; all of it before return.
    pub fn purge(&mut self, log_id: LogId) -> Result<()> {
        if self
            .meta
            .last_purged
            .is_some_and(|p| log_id.index <= p.index)
        {
            return Ok(()); // the purged id never goes back
        }
        let new = Meta {
            last_purged: Some(log_id),
            committed: self.committed.max(Some(log_id)),
            ..self.meta.clone()
        };
        let early = self.cfg.ablated("purge-order");
        if early {
            self.store.compact(self.seq_of(log_id.index) + 1)?;
        }
        meta::write(&self.fs, &new, !self.cfg.ablated("purge-meta"))?;
        self.meta = new;
        if !early {
            let r = self.store.compact(self.seq_of(log_id.index) + 1);
            self.note_failure(r)?;
        }
        // compact fsyncs what it writes; an explicit sync also covers the case where it found
        // nothing to write (see the README on store-core's early return)
        self.sync()?;
        if self.last_log.is_none_or(|l| l.index <= log_id.index) {
            self.last_log = Some(log_id);
        }
        Ok(())
    }

    /// Saves the vote; durable before return.
    pub fn save_vote(&mut self, vote: &Vote) -> Result<()> {
        let new = Meta {
            vote: Some(*vote),
            committed: self.committed_to_persist(),
            ..self.meta.clone()
        };
        meta::write(&self.fs, &new, !self.cfg.ablated("vote"))?;
        self.meta = new;
        Ok(())
    }

    /// The committed id to write with the next metadata: only one whose entry is durable (all
    /// written entries are synced first by the caller's ordering: see `crate::adapter`).
    fn committed_to_persist(&self) -> Option<LogId> {
        self.committed
    }

    /// The vote last saved.
    pub fn vote(&self) -> Option<Vote> {
        self.meta.vote
    }

    /// Keeps the committed id (in memory; written with the next metadata write).
    pub fn save_committed(&mut self, c: Option<LogId>) {
        self.committed = c;
    }

    /// The committed id.
    pub fn committed(&self) -> Option<LogId> {
        self.committed
    }

    /// The stream store's state (for reports and tests).
    pub fn stream_state(&self) -> seqstore_core::StreamState {
        self.store.state()
    }

    /// Writes the metadata (with the committed id) and closes the store cleanly.
    pub fn close(mut self) -> Result<()> {
        if self.committed != self.meta.committed {
            let new = Meta {
                committed: self.committed,
                ..self.meta.clone()
            };
            self.store.sync()?;
            meta::write(&self.fs, &new, true)?;
        }
        Ok(self.store.close()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::testing::log_id;

    #[test]
    fn entry_codec_checks_version_and_index() {
        let e = Entry {
            log_id: log_id(3, 2, 7),
            payload: openraft::EntryPayload::Blank,
        };
        let b = encode_entry(&e).unwrap();
        assert_eq!(b[0], ENTRY_VERSION);
        assert_eq!(decode_entry(7, &b).unwrap(), e);
        assert!(
            decode_entry(8, &b).is_err(),
            "an entry stored under another index"
        );
        let mut v2 = b.clone();
        v2[0] = 2;
        assert!(decode_entry(7, &v2).is_err(), "an unknown version");
        assert!(decode_entry(7, &[]).is_err());
        assert!(decode_entry(7, &b[..b.len() - 1]).is_err(), "a cut body");
    }
}
