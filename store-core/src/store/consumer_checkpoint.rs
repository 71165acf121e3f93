//! The consumer checkpoint: compaction of the journal into `consumers/state`, and what open
//! does with the consumer files.

use super::{Store, SyncSite, MSGS_DIR, RESTORED_CONSUMERS};
use crate::consumer::codec;
use crate::consumer::journal::{journal_path, Consumers, STATE_FILE, STATE_TMP};
use crate::consumer::CONSUMERS_DIR;
use crate::error::Result;
use crate::fs::{Fs, FsFile, OpenOptions};

impl<F: Fs> Store<F> {
    /// Writes every consumer's state (in line with the stream) to a new checkpoint of the
    /// next generation and starts that generation's empty journal:
    /// 1. `state.tmp` written and fsynced (**consumer.checkpoint-data**);
    /// 2. `journal.<gen+1>` created with its header;
    /// 3. `state.tmp` renamed over `state`, `consumers/` fsynced (**consumer.checkpoint-dir**):
    ///    the commit point — before it recovery reads the old checkpoint and its journal,
    ///    after it the new one (its journal, if its name was lost, is created again);
    /// 4. the old journal removed (no fsync: recovery removes a journal of another
    ///    generation).
    pub(crate) fn compact_consumers(&mut self) -> Result<()> {
        self.check_writable()?;
        if self.consumers.journal.is_none() {
            return Ok(());
        }
        // (taken out while updated: `consumer_in_line` reads the stream, not the consumers)
        let mut all = std::mem::take(&mut self.consumers.all);
        for (cfg, st) in all.values_mut() {
            *st = self.consumer_in_line(cfg, st);
        }
        self.consumers.all = all;
        self.consumers.gone.clear();
        let gen = self.consumers.gen + 1;
        let bytes = codec::encode_state(gen, &self.consumers.all);
        let opts = OpenOptions::new().write(true).create(true).truncate(true);
        let r = self.fs.open(STATE_TMP, opts);
        let f = self.dur.latch(r, "create", STATE_TMP)?;
        let r = f.write_all_at(&bytes, 0);
        self.dur.latch(r, "write", STATE_TMP)?;
        if !self.skip(SyncSite::ConsumerCheckpointData) {
            let r = f.sync_data();
            self.dur.latch(r, "sync_data", STATE_TMP)?;
        }
        drop(f);
        let old = journal_path(self.consumers.gen);
        self.consumers.gen = gen;
        self.new_journal()?;
        let r = self.fs.rename(STATE_TMP, STATE_FILE);
        self.dur.latch(r, "rename", STATE_TMP)?;
        self.sync_dir(CONSUMERS_DIR, SyncSite::ConsumerCheckpointDir)?;
        let r = self.fs.remove_file(&old);
        self.dur.latch(r, "remove_file", &old)
    }

    /// `checkpoint`'s part: compacts the journal if it holds any record.
    pub(crate) fn checkpoint_consumers(&mut self) -> Result<()> {
        if self.consumers.len > codec::JOURNAL_HEADER_LEN as u64 {
            self.compact_consumers()?;
        }
        Ok(())
    }

    /// Before a truncate to `seq`: the consumers' view counts a removed pending message as
    /// acknowledged (and under `All` everything pending below it), but memory records that
    /// only at the consumer's next call. A cut below the removed sequence would drop that
    /// acknowledgement, and the floor shown before the truncate would go back after it: a
    /// checkpoint first makes the view durable.
    pub(crate) fn settle_removals_above(&mut self, seq: u64) -> Result<()> {
        if self
            .consumers
            .gone
            .range(seq.saturating_add(1)..)
            .next()
            .is_some()
        {
            self.compact_consumers()?;
        }
        Ok(())
    }

    /// After a truncate: a consumer that had delivered past the cut is brought back to it,
    /// durably (a checkpoint). Without it, a crash after new appends reached the old
    /// delivered sequence would replay the consumer past messages it never saw.
    pub(crate) fn truncate_consumers(&mut self) -> Result<()> {
        let (_, last) = self.stream_bounds();
        // the sequences above the cut are issued again, to other messages
        self.consumers.gone.retain(|&q| q <= last);
        let ahead = self
            .consumers
            .all
            .values()
            .any(|(_, st)| st.delivered.stream > last);
        if ahead {
            self.compact_consumers()?;
        }
        Ok(())
    }

    /// Open's part, after the stream is recovered: load the checkpoint and replay the
    /// journal; make a journal recovery had to create durable by name
    /// (**consumer.create-dir**); and if a consumer is ahead of the recovered stream (its
    /// deliveries' records survived, the messages' did not, under `Never`/`Interval`), bring
    /// it back durably, as a truncate does.
    pub(crate) fn open_consumers(&mut self) -> Result<()> {
        let (c, done): (Consumers<F::File>, _) = Consumers::load(&self.fs)?;
        self.consumers = c;
        self.report_ignored(done.ignored);
        if self.consumers.journal.is_none() {
            return Ok(());
        }
        if done.created_journal {
            self.sync_dir(CONSUMERS_DIR, SyncSite::ConsumerCreateDir)?;
        }
        // the pending messages the stream no longer holds (the removals' effect on the
        // consumers lives in memory until a consumer's next record)
        let pending: std::collections::BTreeSet<u64> = self
            .consumers
            .all
            .values()
            .flat_map(|(_, st)| st.pending.keys().copied())
            .collect();
        for q in pending {
            if self.find_live(q)?.is_none() {
                self.consumers.gone.insert(q);
            }
        }
        self.truncate_consumers()
    }
}

impl<F: Fs> Store<F> {
    /// A restore commits its consumers' state inside `msgs/` (as `consumers.state`, so that
    /// the one rename of the staging directory commits the stream and its consumers
    /// together); open moves it to `consumers/state` before anything else reads either. The
    /// `consumers/` it creates is made durable by name first (**consumer.create-root-dir**);
    /// the moved file's new name next (**consumer.create-dir**), then its removal from `msgs/`
    /// with open's fsync of it (**open.msgs-dir**). If `consumers/state` exists already the move happened (a
    /// rename is atomic, but its two directory entries become durable apart): the leftover
    /// goes.
    pub(crate) fn finish_restored_consumers(&mut self) -> Result<()> {
        let staged = format!("{}/{}", MSGS_DIR, RESTORED_CONSUMERS);
        let io = |e: std::io::Error, op, p: &str| crate::Error::io(op, p, e);
        let in_msgs = match self.fs.read_dir(MSGS_DIR) {
            Ok(v) => v.iter().any(|e| e.name == RESTORED_CONSUMERS),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(io(e, "read_dir", MSGS_DIR)),
        };
        if !in_msgs {
            return Ok(());
        }
        let root = self.fs.read_dir("").map_err(|e| io(e, "read_dir", ""))?;
        if !root.iter().any(|e| e.name == CONSUMERS_DIR) {
            let r = self.fs.create_dir(CONSUMERS_DIR);
            self.dur.latch(r, "create_dir", CONSUMERS_DIR)?;
            // the directory's name first: a rename into a directory whose own name is then
            // lost loses the file, and the move's removal from msgs/ may be durable (found by
            // the restore crash test)
            self.sync_dir("", SyncSite::ConsumerCreateRootDir)?;
        }
        let names = self
            .fs
            .read_dir(CONSUMERS_DIR)
            .map_err(|e| io(e, "read_dir", CONSUMERS_DIR))?;
        let r = if names.iter().any(|e| e.name == "state") {
            self.fs.remove_file(&staged)
        } else {
            self.fs.rename(&staged, STATE_FILE)
        };
        self.dur.latch(r, "rename", &staged)?;
        // its new name before open's fsync of msgs/ makes the old one's removal durable
        self.sync_dir(CONSUMERS_DIR, SyncSite::ConsumerCreateDir)
    }
}
