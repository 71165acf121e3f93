//! The `model_ops` target: random operation sequences against a reference model, with crashes.

use super::*;

pub(crate) const FILTERS: &[&str] = &[">", "a.*", "a.1", "b.>", "*.1", "c", "a.>"];

/// One raw operation of the model target; arguments are resolved against the model's
/// state when it runs (a delete picks one of the live messages, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FuzzOp {
    /// `Step::Open`.
    Open,
    /// Append on subject `SUBJECTS[s]` a payload of `12 + 4 * size` bytes.
    Append(u8, u8),
    /// `sync()`.
    Sync,
    /// Delete the k-th live message.
    Delete(u8),
    /// Erase the k-th live message.
    Erase(u8),
    /// `purge()`.
    Purge,
    /// `purge_ex(FILTERS[f], up_to, keep)`.
    PurgeEx(u8, u8, u8),
    /// Compact at a sequence in `first+1 ..= last+3`.
    Compact(u8),
    /// Truncate at a sequence in `first-1 .. last`.
    Truncate(u8),
    /// Advance the clock by k * 100 µs and `tick()`.
    Tick(u8),
    /// Drop the store (no close) and open it again.
    Reopen,
    /// `append_with_ttl` on `SUBJECTS[s]`, `12 + 4 * size` bytes, a ttl of an hour (it never
    /// runs out within a plan: the model keeps it).
    AppendTtl(u8, u8),
    /// `append_raw` at the next sequence on `SUBJECTS[s]`, `12 + 4 * size` bytes.
    AppendRaw(u8, u8),
    /// `skip_many` of `1 + k % 4` sequences.
    Skip(u8),
}

/// A model-target program: configuration, operations, and where to crash.
#[derive(Clone, Debug)]
pub struct ModelPlan {
    /// Sync policy.
    pub sync: SyncPolicy,
    /// Block size.
    pub block_size: u64,
    /// Crash model.
    pub model: Model,
    /// Crash point selector (taken modulo the number of operations + 1).
    pub crash: u16,
    /// Image selector at that point.
    pub image: u8,
    /// Exploration seed (random images).
    pub seed: u64,
    /// The operations (the first is `Open`).
    pub ops: Vec<FuzzOp>,
}

impl ModelPlan {
    /// Decodes a plan: 6 header bytes, then one operation per 1-4 bytes (at most 48).
    pub fn parse(data: &[u8]) -> ModelPlan {
        let mut inp = Input::new(data);
        let sync = match inp.u8() % 3 {
            0 => SyncPolicy::Always,
            1 => SyncPolicy::Interval(std::time::Duration::from_millis(1)),
            _ => SyncPolicy::Never,
        };
        let block_size = [1024, 2048, 4096, 1 << 20][inp.pick(4)];
        let model = if inp.u8().is_multiple_of(2) {
            Model::Posix
        } else {
            Model::Ordered
        };
        let crash = inp.u16();
        let image = inp.u8();
        let seed = crash as u64 ^ ((image as u64) << 16);
        let mut ops = vec![FuzzOp::Open];
        while !inp.is_empty() && ops.len() < 48 {
            ops.push(match inp.u8() % 16 {
                0..=4 => FuzzOp::Append(inp.u8(), inp.u8()),
                5 => FuzzOp::Sync,
                6 | 7 => FuzzOp::Delete(inp.u8()),
                8 => FuzzOp::Erase(inp.u8()),
                9 => FuzzOp::Purge,
                10 => FuzzOp::PurgeEx(inp.u8(), inp.u8(), inp.u8()),
                11 => FuzzOp::Compact(inp.u8()),
                12 => FuzzOp::Truncate(inp.u8()),
                13 => FuzzOp::Tick(inp.u8()),
                14 => FuzzOp::Reopen,
                // the ttl, replica and skip writes behind one code (older inputs keep their
                // meaning but for this byte)
                _ => match inp.u8() % 4 {
                    0 => FuzzOp::Append(inp.u8(), 0),
                    1 => FuzzOp::AppendTtl(inp.u8(), inp.u8()),
                    2 => FuzzOp::AppendRaw(inp.u8(), inp.u8()),
                    _ => FuzzOp::Skip(inp.u8()),
                },
            });
        }
        ModelPlan {
            sync,
            block_size,
            model,
            crash,
            image,
            seed,
            ops,
        }
    }

    /// The store configuration.
    pub fn config(&self) -> Config {
        config(self.block_size, self.sync, Ablation::Full)
    }
}

/// The reference model: what is stored, by sequence (subject index, payload id).
#[derive(Clone, Debug, Default)]
pub(crate) struct RefModel {
    pub(crate) live: BTreeMap<u64, (usize, u64)>,
    pub(crate) last: u64,
    next_id: u64,
}

impl RefModel {
    pub(crate) fn first(&self) -> u64 {
        self.live.keys().next().copied().unwrap_or(self.last + 1)
    }

    /// Resolves a raw operation into a workload step (`None`: nothing to do).
    fn resolve(&self, op: &FuzzOp) -> Option<Step> {
        let nth = |k: u8| -> Option<u64> {
            let n = self.live.len();
            (n > 0).then(|| *self.live.keys().nth(k as usize % n).expect("in range"))
        };
        Some(match *op {
            FuzzOp::Open => Step::Open,
            FuzzOp::Reopen => Step::Reopen,
            FuzzOp::Append(s, size) => {
                Step::Append(SUBJECTS[s as usize % SUBJECTS.len()], 12 + 4 * size as u16)
            }
            FuzzOp::Sync => Step::Sync,
            FuzzOp::Delete(k) => Step::Delete(nth(k)?),
            FuzzOp::Erase(k) => Step::Erase(nth(k)?),
            FuzzOp::Purge => Step::Purge,
            FuzzOp::PurgeEx(f, up, keep) => Step::PurgeEx(
                FILTERS[f as usize % FILTERS.len()],
                if up.is_multiple_of(2) {
                    0
                } else {
                    up as u64 % (self.last + 2)
                },
                keep as u64 % 3,
            ),
            // from just below `first` (nothing left to remove in memory: the compact must
            // still make that durable) to past the end
            FuzzOp::Compact(k) => {
                let lo = self.first().saturating_sub(2).max(1);
                Step::Compact(lo + k as u64 % (self.last + 4 - lo))
            }
            // from `first - 1` to past the end (at or above last nothing is cut, and last
            // is still promised); never a refused one (below first - 1)
            FuzzOp::Truncate(k) => {
                let lo = self.first() - 1;
                Step::Truncate(lo + k as u64 % (self.last + 2 - lo))
            }
            FuzzOp::Tick(k) => Step::Tick(k as u64 * 100_000),
            FuzzOp::AppendTtl(s, size) => Step::AppendTtl(
                SUBJECTS[s as usize % SUBJECTS.len()],
                12 + 4 * size as u16,
                3_600_000_000_000,
            ),
            FuzzOp::AppendRaw(s, size) => {
                Step::AppendRaw(SUBJECTS[s as usize % SUBJECTS.len()], 12 + 4 * size as u16)
            }
            FuzzOp::Skip(k) => Step::Skip(1 + k as u64 % 4),
        })
    }

    pub(crate) fn apply(&mut self, step: &Step) {
        match *step {
            Step::Open => self.next_id = 0,
            Step::Append(subj, _) => {
                self.last += 1;
                let s = SUBJECTS.iter().position(|x| *x == subj).expect("subject");
                self.live.insert(self.last, (s, self.next_id));
                self.next_id += 1;
            }
            Step::Delete(seq) | Step::Erase(seq) => {
                self.live.remove(&seq);
            }
            Step::Purge => self.live.clear(),
            Step::PurgeEx(filter, up_to, keep) => {
                // NATS's PurgeEx (store-core's `purge_ex`): without a filter a purge or, with
                // a bound above 1, a compact; `keep` across the filter
                if up_to == 1 {
                    return;
                }
                if filter == ">" && up_to > 1 {
                    return self.apply(&Step::Compact(up_to));
                }
                if filter == ">" && up_to == 0 && keep == 0 {
                    self.live.clear();
                    return;
                }
                let all: Vec<u64> = self
                    .live
                    .iter()
                    .filter(|(_, &(s, _))| seqstore_core::subject::matches(filter, SUBJECTS[s]))
                    .map(|(&q, _)| q)
                    .collect();
                let most = (all.len() as u64).saturating_sub(keep) as usize;
                for q in all
                    .into_iter()
                    .filter(|&q| up_to == 0 || q < up_to)
                    .take(most)
                {
                    self.live.remove(&q);
                }
            }
            Step::Compact(seq) => {
                let f = seq - 1;
                if f < self.first() && f <= self.last {
                    return;
                }
                self.live.retain(|&q, _| q > f);
                self.last = self.last.max(f);
            }
            Step::Truncate(seq) => {
                if seq < self.last {
                    self.live.retain(|&q, _| q <= seq);
                    self.last = seq;
                }
            }
            Step::TrimOnOpen(n) => {
                while self.live.len() as u64 > n.max(1) {
                    self.live.pop_first();
                }
            }
            Step::AppendTtl(subj, _, _) | Step::AppendRaw(subj, _) => {
                // (the generator's ttls never run out within a workload: `random.rs`)
                self.apply(&Step::Append(subj, 0));
            }
            Step::Skip(count) => self.last += count,
            Step::Sync | Step::Reopen | Step::Tick(_) | Step::Checkpoint | Step::Close => {}
            // the consumers change no message
            Step::ConsumerAdd(..)
            | Step::Deliver(_)
            | Step::Redeliver(_)
            | Step::Ack(..)
            | Step::ConsumerReset(..)
            | Step::ConsumerDelete(_) => {}
        }
    }

    /// Compares the store with the model: counters, every sequence, subjects.
    fn compare(&self, s: &mut crate::StreamOps) -> Result<(), String> {
        let st = s.state().map_err(|e| format!("state: {e}"))?;
        let want_first = if self.last == 0 { 0 } else { self.first() };
        if (st.msgs, st.first_seq, st.last_seq) != (self.live.len() as u64, want_first, self.last) {
            return Err(format!(
                "store (msgs, first, last) = ({}, {}, {}), model ({}, {want_first}, {})",
                st.msgs,
                st.first_seq,
                st.last_seq,
                self.live.len(),
                self.last
            ));
        }
        let subjects: BTreeSet<usize> = self.live.values().map(|v| v.0).collect();
        if st.num_subjects != subjects.len() as u64 {
            return Err(format!(
                "store has {} subjects, model {}",
                st.num_subjects,
                subjects.len()
            ));
        }
        for seq in 1..=self.last {
            match (s.get(seq), self.live.get(&seq)) {
                (Ok(m), Some(&(subj, id))) => {
                    if m.subject != SUBJECTS[subj] || payload_id(&m.payload) != Some(id) {
                        return Err(format!(
                            "get({seq}) = {} id {:?}, model {} id {id}",
                            m.subject,
                            payload_id(&m.payload),
                            SUBJECTS[subj]
                        ));
                    }
                }
                (Err(Error::NotFound { .. }), None) => {}
                (got, want) => {
                    return Err(format!(
                        "get({seq}) = {:?}, model {want:?}",
                        got.map(|m| m.seq)
                    ))
                }
            }
        }
        Ok(())
    }
}

/// Runs a plan's operations on a live filesystem for the explorer, checking the store
/// against the reference model after every step. The first mismatch (or panic) is kept in
/// `finding`; the explorer only sees an error that ends the workload.
fn run_plan(
    plan: &ModelPlan,
    crash_point: usize,
    image: usize,
    finding: &mut Option<String>,
) -> Result<seqstore_fault_fs::Replay<Event>, seqstore_fault_fs::Error> {
    let cfg = plan.config();
    let mut ecfg = ExploreConfig::new(plan.model);
    ecfg.seed = plan.seed;
    ecfg.max_images_per_point = 24;
    ecfg.random_images_per_point = 4;
    ecfg.quiet_panics = false;
    let mut runner = Runner::new(&Native, cfg);
    let mut model = RefModel::default();
    let run_step = |fs: &FaultFs, op: &FuzzOp, j: &mut Journal<Event>| {
        if finding.is_some() {
            return Err("stopped".to_string());
        }
        let Some(step) = model.resolve(op) else {
            return Ok(());
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runner.step(fs, &step, j)?;
            model.apply(&step);
            let s = runner.ops().ok_or("no store")?;
            model.compare(s)
        }));
        let r = match r {
            Ok(r) => r,
            Err(p) => Err(format!("panic: {}", panic_text(&*p))),
        };
        if let Err(e) = &r {
            *finding = Some(format!("{step:?}: {e}"));
        }
        r
    };
    seqstore_fault_fs::replay_image(&ecfg, &plan.ops, run_step, crash_point, image)
}

/// The `model_ops` target: a random operation sequence (appends, syncs, deletes, erases,
/// purges, purge_ex, compact, truncate, ticks, reopens) under a random sync policy, block
/// size and crash model. Every step is checked against a reference model of the stream;
/// then the power is cut at a chosen operation boundary (inside any operation) and at the
/// end, and a crash image the model allows there is recovered and checked with
/// [`check_image`] against the journal of what was acknowledged. Panics with the plan on
/// any mismatch.
pub fn fuzz_model_ops(data: &[u8]) {
    let plan = ModelPlan::parse(data);
    let mut finding = None;
    let ops = match run_plan(&plan, usize::MAX, 0, &mut finding) {
        Err(seqstore_fault_fs::Error::NoSuchCrashPoint { ops, .. }) => ops,
        other => panic!("unexpected replay result {other:?}"),
    };
    if let Some(f) = finding {
        panic!("functional mismatch: {f}\nplan: {plan:?}");
    }
    let cfg = plan.config();
    for point in [plan.crash as usize % (ops + 1), ops] {
        let mut image = plan.image as usize;
        let rep = loop {
            let mut finding = None;
            match run_plan(&plan, point, image, &mut finding) {
                Ok(r) => break r,
                Err(seqstore_fault_fs::Error::NoSuchImage { images, .. }) if images > 0 => {
                    image %= images
                }
                Err(e) => panic!("replay: {e}\nplan: {plan:?}"),
            }
        };
        if let Err(e) = check_image(&Native, &cfg, &rep.image, &rep.events) {
            panic!(
                "crash after op {point} of {ops}, image {image} ({}): {e}\nlast op: {:?}\nplan: {plan:?}",
                rep.image_desc,
                rep.trace.last().map(|t| t.to_string())
            );
        }
    }
}
