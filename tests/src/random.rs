//! Random valid workloads, explored like the matrix's named ones.
//!
//! The named workloads of [`crate::workloads`] are what their authors thought of. This module
//! makes the rest: [`generate`] turns a seed into a *valid* workload — every operation of the
//! store (append with varied sizes, with a ttl, at a given sequence (`append_raw`), skips,
//! sync, tick, delete, erase, purge, `purge_ex` with wildcard
//! filters and `keep`, compact below, at and past the end, truncate from `first - 1` to past
//! the end, reopen, checkpoint, close-and-reopen through `index.db`, limits that trim at open)
//! on a varied block size, each argument chosen against a reference model of the stream so
//! that the store must accept it. [`run_campaign`] explores each workload at every crash point
//! under every sync policy and both crash models with the same checker ([`crate::check_image`]),
//! and shrinks the first violation ([`shrink_cell`]) to a ready-to-paste [`Workload`] literal
//! with the seed that replays it.
//!
//! How: workload `i` of a campaign with seed `S` is `generate(workload_seed(S, i))`, and its
//! exploration seed is the same number, so one number replays one workload exactly
//! (`seqstore crashcheck --random 1 --seed S --first i`, or [`generate`] in a test).

use crate::robust::{RefModel, FILTERS, SUBJECTS};
use crate::{
    config, policies, run_cell, Backend, CellResult, CellSpec, Event, Runner, Step, Workload,
};
use seqstore_core::Ablation;
use seqstore_fault_fs::{CrashCtx, ExploreConfig, Model};

/// The workspace's one seeded generator (splitmix64, fault-fs): the same sequence on every
/// platform, for seeds that replay anywhere.
pub use seqstore_fault_fs::Rng;

/// One element of a non-empty slice, by value.
fn pick<T: Copy>(r: &mut Rng, of: &[T]) -> T {
    *r.pick(of)
}

/// The seed of workload `i` of a campaign seeded with `seed`.
pub fn workload_seed(seed: u64, i: u64) -> u64 {
    Rng::new(seed ^ i.wrapping_mul(0xd1b5_4a32_d192_ed03)).next_u64()
}

/// Block sizes a random workload runs with: 1 KiB rolls over every few records; 1290 bytes
/// puts a record across a sector boundary; 1 MiB never rolls.
pub const BLOCK_SIZES: &[u64] = &[1024, 1290, 4096, 1 << 20];

/// The consumer names of random workloads.
const CONSUMERS: &[&str] = &["c1", "c2"];

/// Payload sizes: small, one larger than a 512-byte sector (torn writes), one near a block.
const PAYLOAD_SIZES: &[u16] = &[8, 40, 120, 600, 900];

/// A valid random workload of at most `max_steps` steps (at least 4), from `seed`.
pub fn generate(seed: u64, max_steps: usize) -> Workload {
    let mut r = Rng::new(seed);
    let block_size = pick(&mut r, BLOCK_SIZES);
    let len = r.within(4, max_steps.max(4) as u64) as usize;
    let mut model = RefModel::default();
    let mut steps = vec![Step::Open];
    while steps.len() < len {
        if let Some(step) = next_step(&mut r, &model) {
            model.apply(&step);
            steps.push(step);
        }
    }
    Workload {
        name: "random",
        steps,
        block_size,
    }
}

/// One step the store must accept in the model's state (`None`: that kind has nothing to
/// act on now; the caller draws again). Removals favour the front of the stream and compact
/// targets cluster around `first`: that is where unsynced removals and structural
/// operations meet.
fn next_step(r: &mut Rng, m: &RefModel) -> Option<Step> {
    let live: Vec<u64> = m.live.keys().copied().collect();
    let (first, last) = (m.first(), m.last);
    let some_live = |r: &mut Rng| -> Option<u64> {
        match live.len() {
            0 => None,
            n if r.below(2) == 0 => Some(live[r.below(n as u64) as usize]),
            _ => Some(live[0]),
        }
    };
    Some(match r.below(120) {
        0..=33 => Step::Append(pick(r, SUBJECTS), pick(r, PAYLOAD_SIZES)),
        // ttls that run out only after the workload (2 s: before the crash image is opened
        // at 4 s, so every image's open expires it) or never (1 h); the tick-driven expiry is
        // the named workload `ttl-expiry-then-reopen`'s
        34..=35 => Step::AppendTtl(
            pick(r, SUBJECTS),
            pick(r, PAYLOAD_SIZES),
            pick(r, &[2_000_000_000, 3_600_000_000_000]),
        ),
        36 => Step::AppendRaw(pick(r, SUBJECTS), pick(r, PAYLOAD_SIZES)),
        37 => Step::Skip(r.within(1, 3)),
        38..=44 => Step::Sync,
        45..=53 => Step::Delete(some_live(r)?),
        54..=57 => Step::Erase(some_live(r)?),
        58..=59 => Step::Purge,
        60..=66 => {
            let up_to = if r.below(2) == 0 {
                0
            } else {
                r.within(1, last + 2)
            };
            Step::PurgeEx(pick(r, FILTERS), up_to, r.below(3))
        }
        67..=74 => Step::Compact(r.within(first.saturating_sub(2).max(1), last + 3)),
        75..=80 => Step::Truncate(r.within(first - 1, last + 1)),
        81..=84 => Step::Tick(pick(r, &[100_000, 2_000_000])),
        85..=88 => Step::Reopen,
        89..=92 => Step::Close,
        93..=95 => Step::Checkpoint,
        96..=99 => Step::TrimOnOpen(r.within(1, 4)),
        // durable consumers: two names, each added with a random ack policy (a second
        // add of a live name changes nothing); a call on one that does not exist, or with
        // nothing to deliver or ack, is skipped by the runner
        100..=101 => Step::ConsumerAdd(pick(r, CONSUMERS), pick(r, &["explicit", "all", "none"])),
        102..=108 => Step::Deliver(pick(r, CONSUMERS)),
        109..=114 => Step::Ack(pick(r, CONSUMERS), r.below(4) as u8),
        115..=116 => Step::Redeliver(pick(r, CONSUMERS)),
        117 => Step::ConsumerReset(pick(r, CONSUMERS), r.within(1, last + 1)),
        _ => Step::ConsumerDelete(pick(r, CONSUMERS)),
    })
}

/// The workload as Rust source for the matrix's list (`workloads()` in `tests/src/lib.rs`).
pub fn literal(w: &Workload, name: &str) -> String {
    let steps: Vec<String> = w.steps.iter().map(|s| format!("Step::{s:?}")).collect();
    format!(
        "Workload {{\n    name: {name:?},\n    steps: vec![\n        {},\n    ],\n    block_size: {},\n}}",
        steps.join(",\n        "),
        w.block_size
    )
}

/// The explorer settings of one cell, as [`run_cell`] uses them.
fn explore_config(spec: &CellSpec) -> ExploreConfig {
    let mut ecfg = ExploreConfig::new(spec.model);
    ecfg.seed = spec.seed;
    ecfg.max_violations = 20;
    ecfg.random_images_per_point = 24;
    ecfg
}

/// The smallest workload (steps removed one chunk at a time, [`seqstore_fault_fs::shrink`]) that still
/// violates in this cell.
pub fn shrink_cell(backend: &dyn Backend, spec: &CellSpec) -> Workload {
    let cfg = config(spec.workload.block_size, spec.sync, spec.ablation);
    let ecfg = explore_config(spec);
    let mut runner = Runner::new(backend, cfg.clone());
    let steps = seqstore_fault_fs::shrink(
        &ecfg,
        &spec.workload.steps,
        |fs, step, j| {
            if fs.op_count() == 0 {
                // each candidate is explored from an empty filesystem: give it a fresh runner
                // (clock, ids), so that it behaves as it would as a workload of its own
                runner = Runner::new(backend, cfg.clone());
            }
            runner.step(fs, step, j)
        },
        |img, ctx: &CrashCtx<'_, Event>| crate::check_image(backend, &cfg, img, ctx.events),
    );
    Workload {
        steps,
        ..spec.workload.clone()
    }
}

/// What to run.
pub struct Campaign<'a> {
    /// The campaign's seed.
    pub seed: u64,
    /// Index of the first workload (to replay one: `first = i`, `workloads = 1`).
    pub first: u64,
    /// How many workloads.
    pub workloads: u64,
    /// At most this many steps each.
    pub max_steps: usize,
    /// The store's ablation (`Full`: the real store).
    pub ablation: Ablation,
    /// Which store.
    pub backend: &'a dyn Backend,
    /// Only these crash models (empty: both).
    pub models: Vec<Model>,
    /// Stop at the first violating workload (and shrink it).
    pub stop_at_first: bool,
}

/// The first violation of a campaign, shrunk.
#[derive(Clone, Debug)]
pub struct Finding {
    /// Index of the workload in the campaign.
    pub index: u64,
    /// Its seed (replays it: [`generate`]).
    pub workload_seed: u64,
    /// The cell that violated, and what it found.
    pub result: CellResult,
    /// The shrunk workload.
    pub shrunk: Workload,
    /// What the shrunk workload finds in the same cell.
    pub shrunk_result: CellResult,
}

/// What a campaign found.
#[derive(Clone, Debug, Default)]
pub struct CampaignReport {
    /// Workloads explored.
    pub workloads: u64,
    /// Cells explored (workload × policy × model).
    pub cells: u64,
    /// Crash points, summed over cells.
    pub crash_points: usize,
    /// Images checked, summed over cells.
    pub images: usize,
    /// Violations, summed over cells.
    pub violations: usize,
    /// Workloads whose steps failed without a crash (a store error on a valid operation).
    pub workload_errors: Vec<String>,
    /// The first violation, shrunk.
    pub first: Option<Finding>,
}

/// Explores `c.workloads` random workloads, each under every sync policy and model;
/// `progress(done, report)` after each workload. Workloads run on every core, a few at a
/// time, and are accounted in their order: the report (and the first violation, with
/// `stop_at_first`) is the one a sequential run gives.
pub fn run_campaign(
    c: &Campaign<'_>,
    mut progress: impl FnMut(u64, &CampaignReport),
) -> CampaignReport {
    let mut rep = CampaignReport::default();
    let models: Vec<Model> = if c.models.is_empty() {
        Model::ALL.to_vec()
    } else {
        c.models.clone()
    };
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let end = c.first + c.workloads;
    let mut next = c.first;
    while next < end {
        let batch: Vec<u64> = (next..end.min(next + 2 * workers)).collect();
        next += batch.len() as u64;
        let results = crate::par_map(&batch, |&i| workload_cells(c, &models, i));
        for (&i, cells) in batch.iter().zip(results) {
            let wseed = workload_seed(c.seed, i);
            for r in cells {
                rep.cells += 1;
                rep.crash_points += r.report.crash_points;
                rep.images += r.report.images;
                rep.violations += r.report.violation_count;
                if let Some(e) = &r.report.workload_error {
                    let (policy, model) = (r.spec.policy, r.spec.model);
                    rep.workload_errors
                        .push(format!("workload {i} (seed {wseed}) {policy} {model}: {e}"));
                }
                if r.report.violation_count > 0 && rep.first.is_none() {
                    rep.first = Some(found(c.backend, i, wseed, r));
                }
            }
            rep.workloads += 1;
            progress(i - c.first + 1, &rep);
            if c.stop_at_first && (rep.first.is_some() || !rep.workload_errors.is_empty()) {
                return rep;
            }
        }
    }
    rep
}

/// Random workload `i` of the campaign under every sync policy and model.
fn workload_cells(c: &Campaign<'_>, models: &[Model], i: u64) -> Vec<CellResult> {
    let wseed = workload_seed(c.seed, i);
    let workload = generate(wseed, c.max_steps);
    let mut out = Vec::new();
    for (policy, sync) in policies() {
        for &model in models {
            let spec = CellSpec {
                workload: workload.clone(),
                policy,
                sync,
                ablation: c.ablation,
                model,
                seed: wseed,
            };
            out.push(run_cell(c.backend, &spec, None));
        }
    }
    out
}

fn found(backend: &dyn Backend, index: u64, workload_seed: u64, result: CellResult) -> Finding {
    let shrunk = shrink_cell(backend, &result.spec);
    let spec = CellSpec {
        workload: shrunk.clone(),
        ..result.spec.clone()
    };
    let shrunk_result = run_cell(backend, &spec, None);
    Finding {
        index,
        workload_seed,
        result,
        shrunk,
        shrunk_result,
    }
}

impl Finding {
    /// A report a reader can act on: the cell, the first violation, the seed that replays
    /// it, and the shrunk workload as a literal for the matrix.
    pub fn describe(&self, campaign_seed: u64) -> String {
        let s = &self.result.spec;
        let v = self
            .shrunk_result
            .report
            .violations
            .first()
            .or(self.result.report.violations.first())
            .map(|v| v.to_string())
            .unwrap_or_default();
        format!(
            "random workload {} of campaign seed {campaign_seed} (workload seed {}), {} {} {} {}:\n{v}\nreplay: seqstore crashcheck --random 1 --seed {campaign_seed} --first {}\nshrunk to {} steps:\n{}",
            self.index,
            self.workload_seed,
            self.result.backend,
            s.policy,
            s.ablation,
            s.model,
            self.index,
            self.shrunk.steps.len(),
            literal(&self.shrunk, "random-regression")
        )
    }
}
