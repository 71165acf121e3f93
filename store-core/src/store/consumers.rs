//! The consumer calls on [`Store`], and their write path: validate on a copy, append one
//! journal record, then the policy's sync (store-core/CONSUMERS.md, "Write path").

use super::{Store, SyncSite};
use crate::consumer::codec::{self, Op, Rec};
use crate::consumer::journal::{self, journal_path};
use crate::consumer::state::{ConsumerConfig, ConsumerState};
use crate::consumer::{check_name, CONSUMERS_DIR};
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenOptions};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A journal this long (bytes) is compacted into a new checkpoint after the write that
/// reached it.
pub const JOURNAL_COMPACT_AT: u64 = 4 << 20;

impl<F: Fs> Store<F> {
    /// Creates consumer `cfg.name`. Adding one that exists with the same configuration does
    /// nothing (as NATS's add of an identical durable); with another, `ConsumerExists`.
    pub fn consumer_add(&mut self, cfg: &ConsumerConfig) -> Result<()> {
        check_name(&cfg.name)?;
        if let Some((have, _)) = self.consumers.all.get(&cfg.name) {
            return if have == cfg {
                Ok(())
            } else {
                Err(Error::ConsumerExists {
                    name: cfg.name.clone(),
                })
            };
        }
        let op = Op::Add {
            ack: cfg.ack_policy,
            max_deliver: cfg.max_deliver,
        };
        self.consumer_write(&cfg.name, op, true).map(|_| ())
    }

    /// Changes a consumer's configuration (`max_deliver`; the ack policy cannot change, as in
    /// NATS).
    pub fn consumer_update(&mut self, cfg: &ConsumerConfig) -> Result<()> {
        let have = self.consumer_config(&cfg.name)?;
        if have.ack_policy != cfg.ack_policy {
            return Err(Error::InvalidArgument(format!(
                "consumer {:?}: the ack policy cannot change ({} to {})",
                cfg.name,
                have.ack_policy.name(),
                cfg.ack_policy.name()
            )));
        }
        let op = Op::Config {
            max_deliver: cfg.max_deliver,
        };
        self.consumer_write(&cfg.name, op, true).map(|_| ())
    }

    /// Records that consumer `name` delivered stream sequence `sseq` as its consumer
    /// sequence `dseq`, for the `dc`-th time (1: first delivery), at `ts` (NATS
    /// `UpdateDelivered`). Durable as an append is: under `Always` before it returns.
    pub fn update_delivered(
        &mut self,
        name: &str,
        dseq: u64,
        sseq: u64,
        dc: u64,
        ts: i64,
    ) -> Result<()> {
        let op = Op::Delivered { dseq, sseq, dc, ts };
        self.consumer_write(name, op, true).map(|_| ())
    }

    /// Acknowledges stream sequence `sseq` (delivered as `dseq`) for consumer `name` (NATS
    /// `UpdateAcks`): an ack of a message not pending is `NotPending`. Durable as an append
    /// is: under `Always` before it returns.
    pub fn update_acks(&mut self, name: &str, dseq: u64, sseq: u64) -> Result<()> {
        self.consumer_write(name, Op::Ack { dseq, sseq }, true)
            .map(|_| ())
    }

    /// Starts consumer `name` over at stream sequence `start`: nothing delivered, nothing
    /// pending (NATS `SetStarting`, a deliberate rewind).
    pub fn consumer_reset(&mut self, name: &str, start: u64) -> Result<()> {
        self.consumer_write(name, Op::Reset { start }, true)
            .map(|_| ())
    }

    /// Deletes consumer `name` and its state.
    pub fn consumer_delete(&mut self, name: &str) -> Result<()> {
        self.consumer_write(name, Op::Delete, true).map(|_| ())
    }

    /// The state of consumer `name`, in line with the stream as it is now (see
    /// [`ConsumerState::in_line`]): moved up to the last purge or compact, and with the
    /// pending messages the stream no longer holds acknowledged, as NATS shows it.
    pub fn consumer_state(&self, name: &str) -> Result<ConsumerState> {
        let (cfg, st) = self.consumer_entry(name)?;
        Ok(self.consumer_in_line(cfg, st))
    }

    /// `st` in line with the stream as it is now.
    pub(crate) fn consumer_in_line(
        &self,
        cfg: &ConsumerConfig,
        st: &ConsumerState,
    ) -> ConsumerState {
        let mut st = st.clone();
        let (first, last) = self.stream_bounds();
        let gone = &self.consumers.gone;
        st.in_line(cfg.ack_policy, first, last, |q| gone.contains(&q));
        st
    }

    /// The configuration of consumer `name`.
    pub fn consumer_config(&self, name: &str) -> Result<ConsumerConfig> {
        Ok(self.consumer_entry(name)?.0.clone())
    }

    /// The names of the consumers, in order.
    pub fn consumer_names(&self) -> Vec<String> {
        self.consumers.all.keys().cloned().collect()
    }

    fn consumer_entry(&self, name: &str) -> Result<&codec::Entry> {
        self.check_open_consumers()?;
        self.consumers
            .all
            .get(name)
            .ok_or_else(|| Error::ConsumerNotFound { name: name.into() })
    }

    fn check_open_consumers(&self) -> Result<()> {
        // poisoned: memory may hold an operation whose record never reached the disk
        self.check_writable()
    }

    /// The first and last sequence the consumers are clamped to: the stream's purge floor +
    /// 1 (what purge, compact, `purge_ex` and the limits removed; NATS moves its consumers at
    /// a purge, not at a delete) and the last sequence.
    pub(crate) fn stream_bounds(&self) -> (u64, u64) {
        (self.consumer_floor() + 1, self.state().last_seq)
    }

    /// The write path of every consumer call: check the name, apply the operation to the
    /// table (every refusal comes before any change: a refused call changes nothing), append
    /// its record, then (with `sync`) the policy's sync. A failed write poisons the store,
    /// and the consumer reads then refuse too (`Poisoned`): memory holds an operation the
    /// disk may not. Returns the write number (`writes`) the record was given, for group
    /// commit.
    pub(crate) fn consumer_write(&mut self, name: &str, op: Op, sync: bool) -> Result<u64> {
        self.check_writable()?;
        check_name(name)?;
        let (mut first, last) = self.stream_bounds();
        if let Op::Delivered { sseq, dc, .. } = op {
            if sseq == 0 || sseq > last {
                return Err(Error::InvalidArgument(format!(
                    "consumer {name:?}: stream sequence {sseq} was never issued (last {last})"
                )));
            }
            // a removed message is never delivered (NATS skips it): its delivery would be
            // acknowledged by its removal at once
            if dc == 1 && self.find_live(sseq)?.is_none() {
                return Err(Error::NotFound { seq: sseq });
            }
        }
        if matches!(op, Op::Add { .. } | Op::Reset { .. }) {
            // a new consumer, or one started over, begins at the stream's first message
            first = self.state().first_seq.max(1);
        }
        if !matches!(op, Op::Add { .. }) && !self.consumers.all.contains_key(name) {
            return Err(Error::ConsumerNotFound { name: name.into() });
        }
        let rec = Rec {
            name: name.into(),
            first,
            last,
            op,
        };
        let terms = match rec.op {
            Op::Add { .. } | Op::Delete => Vec::new(),
            _ => self.terminations(name, first, last),
        };
        if !terms.is_empty() {
            // the call is tried on a copy first: a refusal changes nothing
            let mut trial = BTreeMap::new();
            trial.extend(
                self.consumers
                    .all
                    .get_key_value(name)
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            for t in &terms {
                journal::apply(&mut trial, t)?;
            }
            journal::apply(&mut trial, &rec)?;
            for t in &terms {
                journal::apply(&mut self.consumers.all, t)?;
                self.append_consumer_record(t)?;
            }
        }
        journal::apply(&mut self.consumers.all, &rec)?;
        self.append_consumer_record(&rec)?;
        self.forget_gone();
        let write = self.dur.wrote();
        if sync {
            self.maybe_sync()?;
        }
        if self.consumers.len >= JOURNAL_COMPACT_AT {
            self.compact_consumers()?;
        }
        Ok(write)
    }

    /// The ack records of the acknowledgements that the stream's removals made of consumer
    /// `name`'s pending messages (what [`Store::consumer_state`] already shows): written
    /// before the consumer's next record, so that the journal replays exactly what the live
    /// consumer went through.
    fn terminations(&self, name: &str, first: u64, last: u64) -> Vec<Rec> {
        if self.consumers.gone.is_empty() {
            return Vec::new();
        }
        let Some((cfg, st)) = self.consumers.all.get(name) else {
            return Vec::new();
        };
        let mut clamped = st.clone();
        clamped.clamp_to_stream(cfg.ack_policy, first, last);
        clamped
            .pending
            .iter()
            .filter(|(q, _)| self.consumers.gone.contains(q))
            .map(|(&sseq, p)| Rec {
                name: name.into(),
                first,
                last,
                op: Op::Ack {
                    dseq: p.sequence,
                    sseq,
                },
            })
            .collect()
    }

    /// Drops the removed sequences no consumer has pending any more.
    fn forget_gone(&mut self) {
        if self.consumers.gone.is_empty() {
            return;
        }
        let all = &self.consumers.all;
        self.consumers
            .gone
            .retain(|q| all.values().any(|(_, st)| st.pending.contains_key(q)));
    }

    /// Notes that stream sequence `seq` left the stream (a delete, an erase, a filtered
    /// purge, a limit, a ttl): a consumer that has it pending now sees it acknowledged.
    pub(crate) fn note_removed(&mut self, seq: u64) {
        if self
            .consumers
            .all
            .values()
            .any(|(_, st)| st.pending.contains_key(&seq))
        {
            self.consumers.gone.insert(seq);
        }
    }

    /// Appends `rec` to the journal (created first on the first consumer).
    fn append_consumer_record(&mut self, rec: &Rec) -> Result<()> {
        let j = self.ensure_consumer_files()?;
        let mut buf = Vec::with_capacity(128);
        let crc = codec::encode_rec(rec, self.consumers.prev_crc, &mut buf);
        let path = journal_path(self.consumers.gen);
        let r = j.write_all_at(&buf, self.consumers.len);
        self.dur.latch(r, "write", &path)?;
        self.consumers.len += buf.len() as u64;
        self.consumers.prev_crc = crc;
        self.consumers.dirty = true;
        Ok(())
    }

    /// Creates `consumers/` and its first journal on the first consumer: the directory's
    /// name (**consumer.create-root-dir**) and the journal's (**consumer.create-dir**) are
    /// durable before any record in it is acknowledged. Returns the journal.
    fn ensure_consumer_files(&mut self) -> Result<Arc<F::File>> {
        if let Some(j) = &self.consumers.journal {
            return Ok(Arc::clone(j));
        }
        let r = self.fs.create_dir(CONSUMERS_DIR);
        self.dur.latch(r, "create_dir", CONSUMERS_DIR)?;
        self.sync_dir("", SyncSite::ConsumerCreateRootDir)?;
        self.consumers.gen = 0;
        let j = self.new_journal()?;
        self.sync_dir(CONSUMERS_DIR, SyncSite::ConsumerCreateDir)?;
        Ok(j)
    }

    /// Creates (or empties) the journal of the current generation and writes its header
    /// (durable with the first record's fsync, which covers the bytes before it).
    pub(crate) fn new_journal(&mut self) -> Result<Arc<F::File>> {
        let path = journal_path(self.consumers.gen);
        let opts = OpenOptions::read_write_create().truncate(true);
        let r = self.fs.open(&path, opts);
        let f = self.dur.latch(r, "create", &path)?;
        let header = codec::journal_header(self.consumers.gen);
        let r = f.write_all_at(&header, 0);
        self.dur.latch(r, "write", &path)?;
        let f = Arc::new(f);
        self.consumers.journal = Some(Arc::clone(&f));
        self.consumers.len = header.len() as u64;
        self.consumers.prev_crc = crate::record::crc32(&header);
        self.consumers.dirty = true;
        Ok(f)
    }

    /// Fsyncs the journal if it has unsynced records (a failure poisons the store).
    pub(crate) fn sync_consumer_journal(&mut self, site: SyncSite) -> Result<()> {
        if !self.consumers.dirty || self.skip(site) {
            return Ok(());
        }
        let Some(j) = &self.consumers.journal else {
            return Ok(());
        };
        let r = j.sync_data();
        let path = journal_path(self.consumers.gen);
        self.dur.latch(r, "sync_data", &path)?;
        self.consumers.dirty = false;
        Ok(())
    }
}
