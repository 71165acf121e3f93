//! Replay, exploration and checking of a [`Capture`], independent of how it was captured.
//!
//! The work is split in three passes, because a checker is slow and must run in parallel;
//! fault-fs's explorer replays the capture and visits every crash point and image (in
//! memory) in the first and, when an image failed, the third:
//! 1. *collect*: every distinct (image, marks before the crash) pair is kept — the explorer
//!    already deduplicates within a crash point; this also deduplicates across points;
//! 2. *check*: the checker runs on each pair, `jobs` at a time (a shell checker on the image
//!    materialized into its own temporary directory, an in-memory one on the image itself);
//! 3. *report*: the explorer runs again with the verdicts as its checker, so that counting,
//!    the first violation and its blame (re-checks of the image with each lost operation
//!    kept, run on demand) are exactly the explorer's. When every image passed there is
//!    nothing to blame, and the first pass's counts are the report.

use crate::check::{check_image, Checker, Verdict};
use crate::ops::{Capture, TracedOp};
use crate::replay::Replayer;
use crate::Error;
use seqstore_fault_fs::{
    explore_from, replay_image_from, CrashCtx, ExploreConfig, FaultFs, FaultFsConfig, Journal,
    Model,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Progress of a check: the phase ("explore", "check", "report") and how far it is.
pub type ProgressFn = Arc<dyn Fn(&str, usize, usize) + Send + Sync>;

/// How to check a capture.
#[derive(Clone)]
pub struct CheckConfig {
    /// The crash model.
    pub model: Model,
    /// Seed of the random images (printed in the report; the same seed replays exactly).
    pub seed: u64,
    /// Checkers run at once.
    pub jobs: usize,
    /// Enumerated images per crash point at most (the explorer's default, 64).
    pub max_images_per_point: usize,
    /// Seeded random images per crash point (the explorer's default, 8).
    pub random_images_per_point: usize,
    /// Stop checking at the first violation (in crash-point, then image order): it is still
    /// blamed and replayable, but the counts then cover only the images up to it. For when
    /// the verdict matters and the checker is slow (default false).
    pub stop_at_first: bool,
    /// Progress callback.
    pub progress: Option<ProgressFn>,
}

impl CheckConfig {
    /// The defaults for `model`: seed 0x5eed, 2 jobs, the explorer's image counts.
    pub fn new(model: Model) -> Self {
        let e = ExploreConfig::new(model);
        CheckConfig {
            model,
            seed: 0x5eed,
            jobs: 2,
            max_images_per_point: e.max_images_per_point,
            random_images_per_point: e.random_images_per_point,
            stop_at_first: false,
            progress: None,
        }
    }

    fn explore_cfg(&self) -> ExploreConfig {
        let mut e = ExploreConfig::new(self.model);
        e.seed = self.seed;
        e.max_images_per_point = self.max_images_per_point;
        e.random_images_per_point = self.random_images_per_point;
        e.max_violations = 1; // the first violation, with blame; all are counted
        e.stop_at_first_violation = self.stop_at_first;
        e
    }

    fn progress(&self, phase: &str, done: usize, total: usize) {
        if let Some(p) = &self.progress {
            p(phase, done, total);
        }
    }
}

/// The first violation found (in crash-point, then image order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirstViolation {
    /// fault-fs operations completed before the crash (`CRASH_POINT`).
    pub crash_point: usize,
    /// The image's number at that point (with the seed and model, replays it).
    pub image: usize,
    /// Which unsynced operations the image kept.
    pub image_desc: String,
    /// The last traced call before the crash, `line N: call`.
    pub after: Option<String>,
    /// The checker's output.
    pub message: String,
    /// The call(s) whose loss caused it, `line N: call (lost|torn)`: the image passes with
    /// that one kept.
    pub blame: Vec<String>,
    /// The marks the checker was given (the promises made before the crash).
    pub marks: Vec<String>,
}

/// Violating images grouped by the last mark written before their crash point (which phase
/// of the workload they crashed in) and the checker's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkGroup {
    /// The last mark before the crash (`None`: before the first mark).
    pub last_mark: Option<String>,
    /// Distinct (image, marks) pairs the checker rejected in this phase with this message.
    pub violating: usize,
    /// The checker's message.
    pub example: String,
}

/// What a check found.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceReport {
    /// The model.
    pub model: Model,
    /// The seed.
    pub seed: u64,
    /// Captured operations (marks included).
    pub ops: usize,
    /// Crash points explored.
    pub crash_points: usize,
    /// Images checked over all crash points (each point's images are distinct).
    pub images: usize,
    /// Distinct images over the whole run.
    pub distinct_images: usize,
    /// Checker runs (distinct image and marks pairs, plus blame re-checks).
    pub checker_runs: usize,
    /// Images the checker rejected.
    pub violations: usize,
    /// Checking stopped at the first violation ([`CheckConfig::stop_at_first`]): the counts
    /// cover the images up to it only.
    pub stopped_at_first: bool,
    /// The first one.
    pub first: Option<FirstViolation>,
    /// Violating distinct images by the last mark before the crash and the checker's
    /// message, in workload order.
    pub by_last_mark: Vec<MarkGroup>,
    /// Time spent replaying and building images (the first pass, and the third when it runs).
    pub explore_time: Duration,
    /// Time spent in checkers (wall, parallel).
    pub check_time: Duration,
}

impl TraceReport {
    /// Checker runs per second of checking.
    pub fn checks_per_s(&self) -> f64 {
        self.checker_runs as f64 / self.check_time.as_secs_f64().max(1e-9)
    }
}

type Key = (u64, usize);

struct Pending {
    image: FaultFs,
    marks: Vec<String>,
    crash_point: usize,
}

/// Runs the replay of `cap` on a copy of `start` under the explorer with `check`, returning
/// the explorer's report, which fault-fs operation each traced operation issued, and the
/// first replay error.
fn explore_capture<C>(
    start: &FaultFs,
    cap: &Capture,
    ecfg: &ExploreConfig,
    check: C,
) -> Result<(seqstore_fault_fs::Report, Vec<usize>), Error>
where
    C: Fn(&FaultFs, &CrashCtx<'_, String>) -> Result<(), String>,
{
    let steps: Vec<usize> = (0..cap.ops.len()).collect();
    let mut replayer = Replayer::new();
    let mut first_err: Option<Error> = None;
    let report = explore_from(
        ecfg,
        start,
        &steps,
        |fs: &FaultFs, &i: &usize, j: &mut Journal<String>| {
            replayer.step(fs, i, &cap.ops[i], j).map_err(|e| {
                let m = e.to_string();
                first_err.get_or_insert(e);
                m
            })
        },
        check,
    );
    if let Some(e) = first_err {
        return Err(e);
    }
    if let Some(w) = &report.workload_error {
        return Err(Error::Usage(format!("the replay failed: {w}")));
    }
    Ok((report, replayer.origin))
}

/// Crash-checks a capture: replays it on `start` (the checked directory as it was before the
/// workload, e.g. [`FaultFs::from_dir`]), explores every crash point, and runs `checker` on
/// every distinct image.
pub fn check_capture(
    start: &FaultFs,
    cap: &Capture,
    checker: &dyn Checker,
    cfg: &CheckConfig,
) -> Result<TraceReport, Error> {
    let ecfg = cfg.explore_cfg();
    if start.config() != ecfg.fs {
        return Err(Error::Usage(format!(
            "the start filesystem's settings differ from {:?}",
            ecfg.fs
        )));
    }
    let t0 = Instant::now();
    // 1. collect the distinct (image, marks) pairs
    let (pending, keys, first_pass) = collect(start, cap, &ecfg, cfg)?;
    let distinct_images = {
        let mut h: Vec<u64> = keys.keys().map(|k| k.0).collect();
        h.sort_unstable();
        h.dedup();
        h.len()
    };
    let explore1 = t0.elapsed();
    // 2. check them in parallel (with stop_at_first, a prefix of them: exploration order)
    let t1 = Instant::now();
    let verdicts = check_all(&pending, checker, cfg)?;
    let by_last_mark = group_by_last_mark(&pending[..verdicts.len()], &verdicts);
    let check1 = t1.elapsed();
    // 3. the explorer's count and blame, with the verdicts as its checker; when every image
    // passed, the first pass already counted exactly what this one would (the same seeded
    // exploration, no violation to blame)
    let t2 = Instant::now();
    let clean = verdicts.len() == pending.len()
        && verdicts.iter().all(|v| matches!(v, Verdict::Consistent));
    let fin = if clean {
        FinalPass {
            report: first_pass.0,
            origin: first_pass.1,
            extra_runs: 0,
            extra_time: Duration::ZERO,
            first_marks: Vec::new(),
        }
    } else {
        final_pass(start, cap, &ecfg, checker, &keys, &verdicts)?
    };
    let report = &fin.report;
    let first = report
        .violations
        .first()
        .map(|v| first_violation(v, cap, &fin.origin, fin.first_marks.clone()));
    Ok(TraceReport {
        model: cfg.model,
        seed: cfg.seed,
        ops: cap.ops.len(),
        crash_points: report.crash_points,
        images: report.images,
        distinct_images,
        checker_runs: verdicts.len() + fin.extra_runs,
        violations: report.violation_count,
        stopped_at_first: cfg.stop_at_first && report.violation_count > 0,
        first,
        by_last_mark,
        explore_time: explore1 + t2.elapsed().saturating_sub(fin.extra_time),
        check_time: check1 + fin.extra_time,
    })
}

/// What the first pass found: the pending images, each key's index among them, and the
/// exploration's report (no violations) with the origin of each fault-fs operation.
type Collected = (
    Vec<Pending>,
    HashMap<Key, usize>,
    (seqstore_fault_fs::Report, Vec<usize>),
);

/// Pass 1: every distinct (image, marks) pair the exploration visits, and its index.
fn collect(
    start: &FaultFs,
    cap: &Capture,
    ecfg: &ExploreConfig,
    cfg: &CheckConfig,
) -> Result<Collected, Error> {
    let keys: Mutex<HashMap<Key, usize>> = Mutex::new(HashMap::new());
    let pending: Mutex<Vec<Pending>> = Mutex::new(Vec::new());
    let explored = explore_capture(start, cap, ecfg, |img, ctx| {
        let key = (img.image_hash(), ctx.events.len());
        let mut k = keys.lock().unwrap_or_else(|e| e.into_inner());
        let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
        if let std::collections::hash_map::Entry::Vacant(v) = k.entry(key) {
            v.insert(p.len());
            p.push(Pending {
                image: img.clone(),
                marks: ctx.events.to_vec(),
                crash_point: ctx.crash_point,
            });
        }
        cfg.progress("explore: distinct images", p.len(), p.len());
        Ok(())
    })?;
    Ok((
        pending.into_inner().unwrap_or_else(|e| e.into_inner()),
        keys.into_inner().unwrap_or_else(|e| e.into_inner()),
        explored,
    ))
}

/// What the third pass found.
struct FinalPass {
    report: seqstore_fault_fs::Report,
    origin: Vec<usize>,
    /// Blame re-checks of images the exploration had not produced, and their time.
    extra_runs: usize,
    extra_time: Duration,
    /// The marks of the first violation.
    first_marks: Vec<String>,
}

/// Pass 3: the explorer again, with the verdicts as its checker: its count, first violation
/// and blame (an image not seen before, a blame variant, is checked on demand). `verdicts`
/// may cover a prefix of the pending images only (stop_at_first): the explorer then stops at
/// the first violation, which lies in that prefix, before it reaches one without a verdict.
fn final_pass(
    start: &FaultFs,
    cap: &Capture,
    ecfg: &ExploreConfig,
    checker: &dyn Checker,
    keys: &HashMap<Key, usize>,
    verdicts: &[Verdict],
) -> Result<FinalPass, Error> {
    let cache: Mutex<HashMap<Key, Verdict>> = Mutex::new(
        keys.iter()
            .filter(|(_, &i)| i < verdicts.len())
            .map(|(k, &i)| (*k, verdicts[i].clone()))
            .collect(),
    );
    let extra = AtomicUsize::new(0);
    let extra_time = Mutex::new(Duration::ZERO);
    let infra: Mutex<Option<Error>> = Mutex::new(None);
    let first_marks: Mutex<Option<Vec<String>>> = Mutex::new(None);
    let (report, origin) = explore_capture(start, cap, ecfg, |img, ctx| {
        let key = (img.image_hash(), ctx.events.len());
        let known = cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let v = known.unwrap_or_else(|| {
            let t = Instant::now();
            let v = check_image(checker, img, ctx.events, ctx.crash_point);
            *extra_time.lock().unwrap_or_else(|e| e.into_inner()) += t.elapsed();
            extra.fetch_add(1, Ordering::Relaxed);
            let v = v.unwrap_or_else(|e| {
                infra
                    .lock()
                    .unwrap_or_else(|x| x.into_inner())
                    .get_or_insert(e);
                Verdict::Consistent
            });
            cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, v.clone());
            v
        });
        match v {
            Verdict::Consistent => Ok(()),
            Verdict::Violation(m) => {
                let mut f = first_marks.lock().unwrap_or_else(|e| e.into_inner());
                f.get_or_insert_with(|| ctx.events.to_vec());
                Err(m)
            }
        }
    })?;
    if let Some(e) = infra.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(FinalPass {
        report,
        origin,
        extra_runs: extra.into_inner(),
        extra_time: extra_time.into_inner().unwrap_or_else(|e| e.into_inner()),
        first_marks: first_marks
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or_default(),
    })
}

fn group_by_last_mark(pending: &[Pending], verdicts: &[Verdict]) -> Vec<MarkGroup> {
    let mut order: Vec<(usize, usize)> = (0..pending.len())
        .map(|i| (pending[i].crash_point, i))
        .collect();
    order.sort_unstable();
    let mut groups: Vec<MarkGroup> = Vec::new();
    for (_, i) in order {
        let Verdict::Violation(m) = &verdicts[i] else {
            continue;
        };
        let last = pending[i].marks.last().cloned();
        match groups
            .iter_mut()
            .find(|g| g.last_mark == last && &g.example == m)
        {
            Some(g) => g.violating += 1,
            None => groups.push(MarkGroup {
                last_mark: last,
                violating: 1,
                example: m.clone(),
            }),
        }
    }
    groups
}

/// Runs the checker on every pending image, `cfg.jobs` at a time, in order. A checker error
/// stops it (the checker is broken), and so does a violation under `cfg.stop_at_first`: the
/// images are handed out in order and every one handed out is finished, so the verdicts are
/// then those of a prefix of `pending`, which holds the first violation.
fn check_all(
    pending: &[Pending],
    checker: &dyn Checker,
    cfg: &CheckConfig,
) -> Result<Vec<Verdict>, Error> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Verdict, Error>>>> = Mutex::new(vec![None; pending.len()]);
    std::thread::scope(|s| {
        for _ in 0..cfg.jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = pending.get(i) else { break };
                let r = check_image(checker, &p.image, &p.marks, p.crash_point);
                let stop = match &r {
                    Err(_) => true,
                    Ok(Verdict::Violation(_)) => cfg.stop_at_first,
                    Ok(Verdict::Consistent) => false,
                };
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                cfg.progress("check", d, pending.len());
                if stop {
                    next.store(pending.len(), Ordering::Relaxed);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut verdicts = Vec::with_capacity(results.len());
    for r in results {
        match r {
            Some(r) => verdicts.push(r?),
            None if cfg.stop_at_first => break,
            None => {
                return Err(Error::Checker(
                    "stopped after an earlier checker error".into(),
                ))
            }
        }
    }
    debug_assert!(verdicts.len() == pending.len() || cfg.stop_at_first);
    Ok(verdicts)
}

/// `line N: call` of the traced operation that issued fault-fs operation `k`.
fn traced_at<'a>(cap: &'a Capture, origin: &[usize], k: usize) -> Option<&'a TracedOp> {
    origin.get(k).and_then(|&i| cap.ops.get(i))
}

fn first_violation(
    v: &seqstore_fault_fs::Violation,
    cap: &Capture,
    origin: &[usize],
    marks: Vec<String>,
) -> FirstViolation {
    let after = v
        .crash_point
        .checked_sub(1)
        .and_then(|k| traced_at(cap, origin, k))
        .map(|t| t.to_string());
    let blame = v
        .blame
        .iter()
        .map(|b| {
            let what = if b.torn { "torn" } else { "lost" };
            match traced_at(cap, origin, b.index as usize) {
                Some(t) => format!("{t} ({what}: {})", b.op),
                None => format!("fault-fs op {} {} ({what})", b.index, b.op),
            }
        })
        .collect();
    FirstViolation {
        crash_point: v.crash_point,
        image: v.image,
        image_desc: v.image_desc.clone(),
        after,
        message: v.message.clone(),
        blame,
        marks,
    }
}

/// One image rebuilt exactly as [`check_capture`] checked it, with its marks.
#[derive(Debug)]
pub struct ReplayedImage {
    /// The image.
    pub image: FaultFs,
    /// Which unsynced operations it kept.
    pub image_desc: String,
    /// The marks before the crash point.
    pub marks: Vec<String>,
}

/// Rebuilds image `image` at `crash_point` (numbers from a report) for a model and seed.
pub fn replay_capture_image(
    start: &FaultFs,
    cap: &Capture,
    cfg: &CheckConfig,
    crash_point: usize,
    image: usize,
) -> Result<ReplayedImage, Error> {
    let ecfg = cfg.explore_cfg();
    let steps: Vec<usize> = (0..cap.ops.len()).collect();
    let mut replayer = Replayer::new();
    let r = replay_image_from(
        &ecfg,
        start,
        &steps,
        |fs: &FaultFs, &i: &usize, j: &mut Journal<String>| {
            replayer
                .step(fs, i, &cap.ops[i], j)
                .map_err(|e| e.to_string())
        },
        crash_point,
        image,
    )
    .map_err(|e| Error::Usage(e.to_string()))?;
    Ok(ReplayedImage {
        image: r.image,
        image_desc: r.image_desc,
        marks: r.events,
    })
}

/// The start state for a check: the directory's contents, all durable.
pub fn start_from_dir(model: Model, dir: &std::path::Path) -> Result<FaultFs, Error> {
    FaultFs::from_dir(FaultFsConfig::new(model), dir)
        .map_err(|e| crate::error::io(format!("loading {}", dir.display()), e))
}
