//! The runner: one workload step on a live filesystem, noting what it learns.

use crate::*;

/// Runs workload steps on a live filesystem, noting what it learns. Holds the open store.
pub struct Runner<'b> {
    pub(crate) backend: &'b dyn Backend,
    pub(crate) cfg: Config,
    pub(crate) clock: ManualClock,
    store: Option<Box<StreamOps>>,
    next_id: u64,
    /// The subject each sequence was appended under (for what `purge_ex` promises).
    subjects: BTreeMap<u64, &'static str>,
    /// The consumers the workload added (for what a truncate promises of them).
    pub(crate) consumer_names: Vec<(&'static str, seqstore_core::AckPolicy)>,
}

impl<'b> Runner<'b> {
    /// A runner for `cfg` on `backend`.
    pub fn new(backend: &'b dyn Backend, cfg: Config) -> Self {
        Runner {
            backend,
            cfg,
            clock: ManualClock::new(1_000_000_000),
            store: None,
            next_id: 0,
            subjects: BTreeMap::new(),
            consumer_names: Vec::new(),
        }
    }

    /// Drops the open store and opens one with `cfg` on `fs`, as a restarted process would.
    fn reopen(&mut self, fs: &FaultFs, cfg: Config) -> Result<(), Error> {
        self.store = None;
        self.store = Some(self.backend.open(fs.clone(), cfg, self.clock.clone())?);
        Ok(())
    }

    /// The sequences the open store can read now.
    fn present(&mut self) -> Result<Vec<u64>, String> {
        let st = self.store()?.state().map_err(|e| format!("state: {e}"))?;
        let s = self.store()?;
        let hi = st.last_seq.min(st.first_seq.saturating_add(10_000));
        Ok((st.first_seq.max(1)..=hi)
            .filter(|&q| s.get(q).is_ok())
            .collect())
    }

    pub(crate) fn store(&mut self) -> Result<&mut Box<StreamOps>, String> {
        self.store
            .as_mut()
            .ok_or_else(|| "no store open (the workload must start with Open)".to_string())
    }

    /// Runs one step, and checks that no consumer's ack floor or delivered sequence went
    /// back across it: only a truncate moves them down (to its cut), and only a reset, a
    /// delete or an add of that consumer starts it over. A reopen shows at least what was
    /// there.
    pub fn step(
        &mut self,
        fs: &FaultFs,
        step: &Step,
        j: &mut Journal<Event>,
    ) -> Result<(), String> {
        let before = self.consumer_marks()?;
        self.run_step(fs, step, j)?;
        if *step == Step::Open {
            return Ok(());
        }
        let after = self.consumer_marks()?;
        for (name, (floor, delivered)) in before {
            let restarted = matches!(*step,
                Step::ConsumerReset(n, _) | Step::ConsumerDelete(n) | Step::ConsumerAdd(n, _)
                    if n == name);
            let Some(&(f, d)) = after.get(name).filter(|_| !restarted) else {
                continue;
            };
            let cut = match *step {
                Step::Truncate(seq) => seq,
                _ => u64::MAX,
            };
            if f < floor.min(cut) || d < delivered.min(cut) {
                return Err(format!(
                    "{step:?}: consumer {name} went back: ack floor {floor} -> {f}, delivered \
                     {delivered} -> {d}"
                ));
            }
        }
        Ok(())
    }

    /// Each consumer's (ack floor, delivered) stream sequences as the store shows them now
    /// (none before the store is open).
    fn consumer_marks(&mut self) -> Result<BTreeMap<&'static str, (u64, u64)>, String> {
        let mut out = BTreeMap::new();
        if self.store.is_none() {
            return Ok(out);
        }
        for (name, _) in self.consumer_names.clone() {
            let s = self.store()?;
            match s.consumer_state(name).map(Some) {
                Ok(Some(st)) => {
                    out.insert(name, (st.ack_floor.stream, st.delivered.stream));
                }
                Ok(None) | Err(Error::ConsumerNotFound { .. }) => {}
                Err(e) => return Err(format!("consumer {name}: state: {e}")),
            }
        }
        Ok(out)
    }

    fn run_step(
        &mut self,
        fs: &FaultFs,
        step: &Step,
        j: &mut Journal<Event>,
    ) -> Result<(), String> {
        self.clock.advance(STEP_NS);
        if step.is_consumer() {
            return self.consumer_step(fs, step, j);
        }
        let always = self.cfg.sync == SyncPolicy::Always;
        let e = |e: Error| format!("{step:?}: {e}");
        match *step {
            Step::Open | Step::Reopen => {
                if *step == Step::Open {
                    self.next_id = 0;
                    self.subjects.clear();
                    self.consumer_names.clear();
                }
                self.reopen(fs, self.cfg.clone()).map_err(e)?;
            }
            Step::Checkpoint | Step::Close => {
                self.store()?.checkpoint().map_err(e)?;
                j.note(fs, Event::Synced);
                if *step == Step::Close {
                    self.reopen(fs, self.cfg.clone()).map_err(e)?;
                }
            }
            Step::TrimOnOpen(n) => self.trim_on_open(fs, n, j).map_err(e)?,
            Step::Append(subject, size) => {
                let id = self.next_id;
                self.next_id += 1;
                let next = self.store()?.state().map_err(e)?.last_seq + 1;
                j.note(fs, Event::Appending { seq: next, id });
                let seq = self
                    .store()?
                    .append(subject, b"", &payload(id, size))
                    .map_err(e)?;
                if seq != next {
                    return Err(format!("append got seq {seq}, expected {next}"));
                }
                self.subjects.insert(seq, subject);
                j.note(
                    fs,
                    Event::Appended {
                        seq,
                        id,
                        durable: always,
                    },
                );
            }
            Step::AppendTtl(subject, size, ttl) => self.append_ttl(fs, subject, size, ttl, j)?,
            Step::AppendRaw(subject, size) => self.append_raw(fs, subject, size, j)?,
            Step::Skip(count) => {
                let first = self.store()?.state().map_err(e)?.last_seq + 1;
                let last = self.store()?.skip_many(first, count).map_err(e)?;
                if last != first + count - 1 {
                    return Err(format!("skip_many({first}, {count}) returned {last}"));
                }
                j.note(fs, Event::Skipped { last });
            }
            Step::Sync => {
                self.store()?.sync().map_err(e)?;
                j.note(fs, Event::Synced);
            }
            Step::Tick(ns) => {
                self.clock.advance(ns as i64);
                self.store()?.tick().map_err(e)?;
            }
            Step::Delete(seq) | Step::Erase(seq) => {
                j.note(fs, Event::Deleting { seq });
                let erase = matches!(step, Step::Erase(_));
                let r = if erase {
                    self.store()?.erase(seq)
                } else {
                    self.store()?.delete(seq)
                };
                let durable = match r {
                    Ok(()) => always,
                    // already gone: an erase makes that durable before it says so, a delete
                    // promises nothing (there is nothing to delete)
                    Err(Error::NotFound { .. }) if erase => true,
                    Err(Error::NotFound { .. }) => return Ok(()),
                    Err(err) => return Err(e(err)),
                };
                j.note(fs, Event::Deleted { seq, durable });
            }
            Step::Purge => {
                let upto = self.store()?.state().map_err(e)?.last_seq;
                j.note(fs, Event::FloorStart { upto });
                self.store()?.purge().map_err(e)?;
                j.note(fs, Event::FloorDone { upto });
            }
            Step::Compact(seq) => {
                j.note(fs, Event::FloorStart { upto: seq - 1 });
                self.store()?.compact(seq).map_err(e)?;
                j.note(fs, Event::FloorDone { upto: seq - 1 });
            }
            Step::PurgeEx(filter, 0, 0) if filter.is_empty() || filter == ">" => {
                // purge_ex(">", 0, 0) is purge, and promises what purge promises
                let upto = self.store()?.state().map_err(e)?.last_seq;
                j.note(fs, Event::FloorStart { upto });
                self.store()?.purge_ex(filter, 0, 0).map_err(e)?;
                j.note(fs, Event::FloorDone { upto });
            }
            Step::PurgeEx(filter, up_to, _)
                if (filter.is_empty() || filter == ">") && up_to > 1 =>
            {
                // without a filter a bound is a compact (NATS), and promises what compact does
                j.note(fs, Event::FloorStart { upto: up_to - 1 });
                self.store()?.purge_ex(filter, up_to, 0).map_err(e)?;
                j.note(fs, Event::FloorDone { upto: up_to - 1 });
            }
            Step::PurgeEx(filter, up_to, keep) => {
                let last = self.store()?.state().map_err(e)?.last_seq;
                let before = self.present()?;
                j.note(fs, Event::Removing);
                self.store()?.purge_ex(filter, up_to, keep).map_err(e)?;
                let after = self.present()?;
                let mut seqs: Vec<u64> = before
                    .iter()
                    .copied()
                    .filter(|q| after.binary_search(q).is_err())
                    .collect();
                // what the promise covers beyond its own tombstones: matching messages that
                // were gone already (an unsynced delete among them) stay gone
                let filter = if filter.is_empty() { ">" } else { filter };
                seqs.extend(self.subjects.iter().filter_map(|(&q, subject)| {
                    let gone = before.binary_search(&q).is_err();
                    let covered = q <= last && (up_to == 0 || q < up_to);
                    (gone && covered && seqstore_core::subject::matches(filter, subject))
                        .then_some(q)
                }));
                j.note(fs, Event::Removed { seqs });
            }
            Step::ConsumerAdd(..)
            | Step::Deliver(_)
            | Step::Redeliver(_)
            | Step::Ack(..)
            | Step::ConsumerReset(..)
            | Step::ConsumerDelete(_) => return Err("consumer steps run in consumer_step".into()),
            Step::Truncate(seq) => {
                let last = self.store()?.state().map_err(e)?.last_seq;
                let ahead = self.consumers_ahead(seq)?;
                j.note(fs, Event::TruncateStart { seq });
                self.store()?.truncate(seq).map_err(e)?;
                // at or above the last sequence nothing is cut: last stays where it was
                j.note(fs, Event::TruncateDone { seq: seq.min(last) });
                self.subjects.retain(|&q, _| q <= seq);
                if ahead {
                    self.after_truncate(fs, j)?;
                }
            }
        }
        Ok(())
    }
}

impl Runner<'_> {
    /// [`Step::AppendTtl`]: an append whose message expires `ttl` ns after its timestamp,
    /// which is the clock's reading (or the last timestamp, if that is later).
    fn append_ttl(
        &mut self,
        fs: &FaultFs,
        subject: &'static str,
        size: u16,
        ttl: u64,
        j: &mut Journal<Event>,
    ) -> Result<(), String> {
        let e = |e: Error| format!("AppendTtl: {e}");
        let id = self.next_id;
        self.next_id += 1;
        let st = self.store()?.state().map_err(e)?;
        let next = st.last_seq + 1;
        let ts = seqstore_core::Clock::now_ns(&self.clock).max(st.last_ts);
        let deadline = seqstore_core::internal::record::deadline(ts, ttl);
        j.note(fs, Event::Ttl { deadline });
        j.note(fs, Event::Appending { seq: next, id });
        let seq = self
            .store()?
            .append_with_ttl(subject, b"", &payload(id, size), Duration::from_nanos(ttl))
            .map_err(e)?;
        if seq != next {
            return Err(format!("append_with_ttl got seq {seq}, expected {next}"));
        }
        self.subjects.insert(seq, subject);
        let durable = self.cfg.sync == SyncPolicy::Always;
        j.note(fs, Event::Appended { seq, id, durable });
        Ok(())
    }

    /// [`Step::AppendRaw`]: a replica's append at `last_seq + 1`, stamped with the clock's
    /// reading (or the last timestamp, if that is later).
    fn append_raw(
        &mut self,
        fs: &FaultFs,
        subject: &'static str,
        size: u16,
        j: &mut Journal<Event>,
    ) -> Result<(), String> {
        let e = |e: Error| format!("AppendRaw: {e}");
        let id = self.next_id;
        self.next_id += 1;
        let st = self.store()?.state().map_err(e)?;
        let seq = st.last_seq + 1;
        let ts = seqstore_core::Clock::now_ns(&self.clock).max(st.last_ts);
        j.note(fs, Event::Appending { seq, id });
        let got = self
            .store()?
            .append_raw(seq, ts, subject, b"", &payload(id, size))
            .map_err(e)?;
        if got != seq {
            return Err(format!("append_raw({seq}) returned {got}"));
        }
        self.subjects.insert(seq, subject);
        let durable = self.cfg.sync == SyncPolicy::Always;
        j.note(fs, Event::Appended { seq, id, durable });
        Ok(())
    }

    /// [`Step::TrimOnOpen`]: an open whose limits remove the oldest messages; what it removed
    /// must stay removed once the open returned.
    fn trim_on_open(&mut self, fs: &FaultFs, n: u64, j: &mut Journal<Event>) -> Result<(), Error> {
        let before = self
            .present()
            .map_err(|m| Error::InvalidArgument(m.clone()))?;
        let mut cfg = self.cfg.clone();
        cfg.limits.max_msgs = n;
        self.store = None;
        j.note(fs, Event::Removing);
        self.reopen(fs, cfg)?;
        let after = self.present().map_err(Error::InvalidArgument)?;
        let seqs = before
            .into_iter()
            .filter(|q| after.binary_search(q).is_err())
            .collect();
        j.note(fs, Event::Removed { seqs });
        self.reopen(fs, self.cfg.clone())
    }

    /// The open store, if any: the robustness tests inspect it after an injected fault.
    pub fn ops(&mut self) -> Option<&mut StreamOps> {
        self.store.as_deref_mut()
    }
}
