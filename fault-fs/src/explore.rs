//! The crash explorer: run a workload once, crash at every operation boundary, check every
//! image the model allows there, report (and shrink) what fails.

use crate::core::Core;
use crate::fs::{for_each_image, FaultFs, Img};
use crate::image::{self, Choice};
use crate::rng::derive;
use crate::{Error, FaultFsConfig, Model, TraceEntry};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::ops::ControlFlow;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

/// What the workload noted, each with the operation count at the time: the checker of a crash
/// at point `k` sees the events noted when at most `k` operations had completed (what was
/// acknowledged before the crash).
#[derive(Clone, Debug)]
pub struct Journal<E> {
    ops: Vec<u64>,
    events: Vec<E>,
}

impl<E> Default for Journal<E> {
    fn default() -> Self {
        Journal {
            ops: Vec::new(),
            events: Vec::new(),
        }
    }
}

impl<E> Journal<E> {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `event` as having happened after `fs.op_count()` operations.
    pub fn note(&mut self, fs: &FaultFs, event: E) {
        self.ops.push(fs.op_count());
        self.events.push(event);
    }

    /// Every event noted so far.
    pub fn events(&self) -> &[E] {
        &self.events
    }

    /// How many events fall at or before crash point `k`.
    fn count_at(&self, k: usize) -> usize {
        self.ops.partition_point(|&o| o <= k as u64)
    }
}

/// What the checker knows about the crash it is looking at.
#[derive(Debug)]
pub struct CrashCtx<'a, E> {
    /// How many operations had completed when the power went out.
    pub crash_point: usize,
    /// Events noted at or before the crash point.
    pub events: &'a [E],
    /// The model of the image.
    pub model: Model,
    /// The exploration's seed.
    pub seed: u64,
    /// The image's number at this crash point (see [`replay_image`]).
    pub image: usize,
    /// The last operation before the crash (`None` at crash point 0).
    pub op: Option<&'a TraceEntry>,
    /// Every operation before the crash.
    pub trace: &'a [TraceEntry],
}

/// Progress of an exploration, passed to [`ExploreConfig::progress`] after each crash point.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Crash points checked so far.
    pub crash_points_done: usize,
    /// Crash points in total.
    pub crash_points: usize,
    /// Images checked so far.
    pub images: usize,
    /// Violations found so far.
    pub violations: usize,
    /// Time since the exploration started.
    pub elapsed: Duration,
}

/// A progress callback (shared so that the config stays `Clone`).
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// How to explore. `ExploreConfig::new(model)` gives the defaults; set fields to change them.
#[derive(Clone)]
pub struct ExploreConfig {
    /// The filesystem settings (model, sector size, ...).
    pub fs: FaultFsConfig,
    /// Seeds the random images; the same seed gives the same report.
    pub seed: u64,
    /// At most this many distinct enumerated (ALICE-style) images per crash point (default 64).
    pub max_images_per_point: usize,
    /// Random images per crash point on top, deduplicated against the others (default 8).
    pub random_images_per_point: usize,
    /// Stop at the first violation (what shrinking uses; default false).
    pub stop_at_first_violation: bool,
    /// Keep at most this many violations in the report; all are counted (default 100).
    pub max_violations: usize,
    /// For each violation, find the unsynced operation(s) whose loss caused it by re-checking
    /// the image with dropped operations kept (default true; costs extra checks on failures).
    pub blame: bool,
    /// Silence the panic hook while the checker or workload runs (default true): a panic is
    /// caught and reported as a violation, and thousands of them should not flood stderr.
    pub quiet_panics: bool,
    /// Called after each crash point.
    pub progress: Option<ProgressFn>,
}

impl ExploreConfig {
    /// The defaults for `model`.
    pub fn new(model: Model) -> Self {
        ExploreConfig {
            fs: FaultFsConfig::new(model),
            seed: 0,
            max_images_per_point: 64,
            random_images_per_point: 8,
            stop_at_first_violation: false,
            max_violations: 100,
            blame: true,
            quiet_panics: true,
            progress: None,
        }
    }

    /// The model explored.
    pub fn model(&self) -> Model {
        self.fs.model
    }
}

impl fmt::Debug for ExploreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExploreConfig")
            .field("fs", &self.fs)
            .field("seed", &self.seed)
            .field("max_images_per_point", &self.max_images_per_point)
            .field("random_images_per_point", &self.random_images_per_point)
            .field("stop_at_first_violation", &self.stop_at_first_violation)
            .field("max_violations", &self.max_violations)
            .field("blame", &self.blame)
            .field("quiet_panics", &self.quiet_panics)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// An unsynced operation whose loss (or tearing) a violation is blamed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blame {
    /// Its trace index.
    pub index: u64,
    /// E.g. `write_all_at tmp [0..5)`.
    pub op: String,
    /// Where it was issued, `file:line`.
    pub call_site: String,
    /// Whether the image tore it (rather than dropping it).
    pub torn: bool,
}

impl fmt::Display for Blame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.torn { "torn" } else { "lost" };
        write!(
            f,
            "{} at {} was never made durable ({what})",
            self.op, self.call_site
        )
    }
}

/// A crash image the checker rejected.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// Operations completed before the crash.
    pub crash_point: usize,
    /// The last operation before the crash, e.g. `rename msgs -> __old` (empty at point 0).
    pub op: String,
    /// Its call site, `file:line` (empty at point 0).
    pub call_site: String,
    /// The model.
    pub model: Model,
    /// The exploration's seed (with `crash_point` and `image` it replays the case).
    pub seed: u64,
    /// The image's number at this crash point.
    pub image: usize,
    /// Which unsynced operations the image kept, e.g. "all unsynced operations dropped".
    pub image_desc: String,
    /// The unsynced operation(s) whose loss caused the violation: the single one that, kept,
    /// makes the checker pass; else all dropped ones if keeping all of them does; else empty
    /// (the image was rejected for another reason, e.g. recovery is wrong even then).
    pub blame: Vec<Blame>,
    /// The checker's message (or the panic's, prefixed with "panic: ").
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] crash after op {} ({} at {}), image {} ({}): {}",
            self.model,
            self.crash_point,
            if self.op.is_empty() {
                "start"
            } else {
                &self.op
            },
            if self.call_site.is_empty() {
                "-"
            } else {
                &self.call_site
            },
            self.image,
            self.image_desc,
            self.message
        )?;
        for b in &self.blame {
            write!(f, "\n    {b}")?;
        }
        Ok(())
    }
}

/// The result of [`explore`].
#[derive(Clone, Debug)]
pub struct Report {
    /// The model explored.
    pub model: Model,
    /// The seed.
    pub seed: u64,
    /// Operations the workload issued.
    pub ops: usize,
    /// Crash points checked (operation boundaries where the state or the journal changed).
    pub crash_points: usize,
    /// Crash images checked (blame re-checks not counted).
    pub images: usize,
    /// The first `max_violations` violations, in crash-point then image order.
    pub violations: Vec<Violation>,
    /// All violations found.
    pub violation_count: usize,
    /// Set if the workload failed or panicked (the crash points before it were still checked)
    /// or the configuration was invalid.
    pub workload_error: Option<String>,
    /// Wall time of the whole exploration.
    pub elapsed: Duration,
    /// `images / elapsed`.
    pub images_per_s: f64,
}

impl Report {
    /// No violation and no workload error.
    pub fn is_clean(&self) -> bool {
        self.violation_count == 0 && self.workload_error.is_none()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "model {} seed {}: {} ops, {} crash points, {} images, {} violations, {:.2?} ({:.0} images/s)",
            self.model,
            self.seed,
            self.ops,
            self.crash_points,
            self.images,
            self.violation_count,
            self.elapsed,
            self.images_per_s
        )?;
        if let Some(e) = &self.workload_error {
            writeln!(f, "workload error: {e}")?;
        }
        for v in &self.violations {
            writeln!(f, "{v}")?;
        }
        Ok(())
    }
}

// ----- panics -----

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}
static HOOK: Once = Once::new();

/// Runs `f`, catching a panic as `Err(message)`. With `quiet`, the panic hook stays silent on
/// this thread for the duration (installed once, it delegates to the previous hook otherwise).
fn catch<R>(quiet: bool, f: impl FnOnce() -> R) -> Result<R, String> {
    if quiet {
        HOOK.call_once(|| {
            let prev = panic::take_hook();
            panic::set_hook(Box::new(move |info| {
                if QUIET.with(Cell::get) {
                    let at = info
                        .location()
                        .map(|l| format!("{}:{}", l.file(), l.line()));
                    LAST_PANIC_AT.with(|p| *p.borrow_mut() = at);
                } else {
                    prev(info);
                }
            }));
        });
    }
    let was = QUIET.with(|q| q.replace(quiet));
    LAST_PANIC_AT.with(|p| *p.borrow_mut() = None);
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    r.map_err(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_string());
        match LAST_PANIC_AT.with(|p| p.borrow_mut().take()) {
            Some(at) => format!("panic at {at}: {msg}"),
            None => format!("panic: {msg}"),
        }
    })
}

// ----- recording -----

struct Recording<E> {
    trace: Vec<TraceEntry>,
    /// (op count after, state), ascending; the first is the initial state.
    snaps: Vec<(u64, Arc<Core>)>,
    journal: Journal<E>,
    error: Option<String>,
}

impl<E> Recording<E> {
    /// The state after `k` operations.
    fn state_at(&self, k: usize) -> &Arc<Core> {
        let i = self.snaps.partition_point(|(n, _)| *n <= k as u64);
        &self.snaps[i.saturating_sub(1)].1
    }

    /// The operation boundaries worth crashing at: the start, after every operation that
    /// changed the state, and wherever an event was noted (a crash after a read-only
    /// operation leaves the same images, but the checker may know more by then).
    fn crash_points(&self) -> Vec<usize> {
        (0..=self.trace.len())
            .filter(|&k| {
                k == 0
                    || self.trace[k - 1].mutated
                    || self.journal.ops.binary_search(&(k as u64)).is_ok()
            })
            .collect()
    }
}

/// The filesystem a workload starts on: a fresh one, or a copy of `start`'s state (live and
/// durable as they are) with `cfg.fs`'s settings, which must be `start`'s.
fn start_fs(cfg: &ExploreConfig, start: Option<&FaultFs>) -> Result<FaultFs, String> {
    let fresh =
        FaultFs::with_config(cfg.fs.clone()).map_err(|e| format!("invalid configuration: {e}"))?;
    let Some(start) = start else {
        return Ok(fresh);
    };
    let (start_cfg, core) = start.state();
    // the images are built with cfg.fs: a state whose pending operations were logged under
    // another model (or sector size) would be crashed by rules it was not recorded for
    if start_cfg != cfg.fs {
        return Err(format!(
            "the start filesystem's settings {start_cfg:?} differ from the exploration's {:?}",
            cfg.fs
        ));
    }
    Ok(FaultFs::from_core(start_cfg, (*core).clone()))
}

fn record<S, E, W>(
    cfg: &ExploreConfig,
    start: Option<&FaultFs>,
    steps: &[S],
    run_step: &mut W,
) -> Recording<E>
where
    W: FnMut(&FaultFs, &S, &mut Journal<E>) -> Result<(), String>,
{
    let mut journal = Journal::new();
    let fs = match start_fs(cfg, start) {
        Ok(fs) => fs,
        Err(error) => {
            return Recording {
                trace: Vec::new(),
                snaps: vec![(0, Arc::new(Core::new()))],
                journal,
                error: Some(error),
            }
        }
    };
    fs.start_recording();
    let mut error = None;
    for (i, s) in steps.iter().enumerate() {
        match catch(cfg.quiet_panics, || run_step(&fs, s, &mut journal)) {
            Ok(Ok(())) => {}
            Ok(Err(m)) => {
                error = Some(format!("step {i}: {m}"));
                break;
            }
            Err(m) => {
                error = Some(format!("step {i}: {m}"));
                break;
            }
        }
    }
    let mut st = fs.lock();
    let mut snaps = st.snapshots.take().unwrap_or_default();
    if snaps.is_empty() {
        // start_recording always stores the initial state; this keeps `state_at` total anyway
        snaps.push((0, Arc::new(Core::new())));
    }
    Recording {
        trace: st.trace.clone(),
        snaps,
        journal,
        error,
    }
}

// ----- exploring -----

/// Runs the workload (`run_step` on each of `steps`, in order, on one live [`FaultFs`]),
/// then crashes at every operation boundary and runs `check` on every crash image there: the
/// bounded enumerated set (up to `max_images_per_point`) plus `random_images_per_point`
/// seeded ones, all deduplicated. A `check` that returns `Err` or panics is a violation.
///
/// Deterministic: the same configuration, steps and (deterministic) closures give the same
/// report, timing aside.
pub fn explore<S, E, W, C>(cfg: &ExploreConfig, steps: &[S], mut run_step: W, check: C) -> Report
where
    W: FnMut(&FaultFs, &S, &mut Journal<E>) -> Result<(), String>,
    C: Fn(&FaultFs, &CrashCtx<'_, E>) -> Result<(), String>,
{
    explore_impl(cfg, None, steps, &mut run_step, &check)
}

/// [`explore`] starting from an existing filesystem instead of an empty one: the workload runs
/// on a copy of `start` (its live state, and what of it is not durable yet stays so; `start`
/// itself is not touched), and crash point 0 is a crash of `start` as it is. This is how a
/// crash *during recovery* is explored: `start` is a crash image (everything in it durable) and
/// the workload is the recovery that runs on it. `cfg.fs` must be `start`'s settings
/// ([`FaultFs::config`]); otherwise the report's `workload_error` says so, as for an invalid
/// configuration.
/// Open handles of `start` are not carried over.
pub fn explore_from<S, E, W, C>(
    cfg: &ExploreConfig,
    start: &FaultFs,
    steps: &[S],
    mut run_step: W,
    check: C,
) -> Report
where
    W: FnMut(&FaultFs, &S, &mut Journal<E>) -> Result<(), String>,
    C: Fn(&FaultFs, &CrashCtx<'_, E>) -> Result<(), String>,
{
    explore_impl(cfg, Some(start), steps, &mut run_step, &check)
}

fn explore_impl<S, E, W, C>(
    cfg: &ExploreConfig,
    start_fs: Option<&FaultFs>,
    steps: &[S],
    run_step: &mut W,
    check: &C,
) -> Report
where
    W: FnMut(&FaultFs, &S, &mut Journal<E>) -> Result<(), String>,
    C: Fn(&FaultFs, &CrashCtx<'_, E>) -> Result<(), String>,
{
    let start = Instant::now();
    let rec = record(cfg, start_fs, steps, run_step);
    let points = rec.crash_points();
    let mut report = Report {
        model: cfg.fs.model,
        seed: cfg.seed,
        ops: rec.trace.len(),
        crash_points: 0,
        images: 0,
        violations: Vec::new(),
        violation_count: 0,
        workload_error: rec.error.clone(),
        elapsed: Duration::ZERO,
        images_per_s: 0.0,
    };
    let mut stop = false;
    for (done, &k) in points.iter().enumerate() {
        let core = rec.state_at(k);
        let ctx = CrashCtx {
            crash_point: k,
            events: &rec.journal.events[..rec.journal.count_at(k)],
            model: cfg.fs.model,
            seed: cfg.seed,
            image: 0,
            op: k.checked_sub(1).map(|i| &rec.trace[i]),
            trace: &rec.trace[..k],
        };
        let seeds: Vec<u64> = (0..cfg.random_images_per_point)
            .map(|j| derive(cfg.seed, k as u64, j as u64))
            .collect();
        for_each_image(&cfg.fs, core, cfg.max_images_per_point, &seeds, |img| {
            report.images += 1;
            let ctx = CrashCtx {
                image: img.n,
                ..ctx
            };
            let Err(message) = run_check(cfg, check, &img, &ctx) else {
                return ControlFlow::Continue(());
            };
            report.violation_count += 1;
            if report.violations.len() < cfg.max_violations {
                let blame = if cfg.blame {
                    blame(cfg, check, core, &img, &ctx, &rec.trace)
                } else {
                    Vec::new()
                };
                report.violations.push(Violation {
                    crash_point: k,
                    op: ctx.op.map(|o| o.to_string()).unwrap_or_default(),
                    call_site: ctx.op.map(|o| o.call_site.to_string()).unwrap_or_default(),
                    model: cfg.fs.model,
                    seed: cfg.seed,
                    image: img.n,
                    image_desc: img.spec.to_string(),
                    blame,
                    message,
                });
            }
            if cfg.stop_at_first_violation {
                stop = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        report.crash_points += 1;
        if let Some(p) = &cfg.progress {
            p(&Progress {
                crash_points_done: done + 1,
                crash_points: points.len(),
                images: report.images,
                violations: report.violation_count,
                elapsed: start.elapsed(),
            });
        }
        if stop {
            break;
        }
    }
    report.elapsed = start.elapsed();
    report.images_per_s = report.images as f64 / report.elapsed.as_secs_f64().max(1e-9);
    report
}

fn run_check<E, C>(
    cfg: &ExploreConfig,
    check: &C,
    img: &Img<'_>,
    ctx: &CrashCtx<'_, E>,
) -> Result<(), String>
where
    C: Fn(&FaultFs, &CrashCtx<'_, E>) -> Result<(), String>,
{
    let fs = FaultFs::from_core(cfg.fs.clone(), img.core.clone());
    check_fs(cfg, check, &fs, ctx)
}

fn check_fs<E, C>(
    cfg: &ExploreConfig,
    check: &C,
    fs: &FaultFs,
    ctx: &CrashCtx<'_, E>,
) -> Result<(), String>
where
    C: Fn(&FaultFs, &CrashCtx<'_, E>) -> Result<(), String>,
{
    match catch(cfg.quiet_panics, || check(fs, ctx)) {
        Ok(r) => r,
        Err(panic) => Err(panic),
    }
}

/// Finds which unsynced operations the image's violation is due to: the first dropped or torn
/// one that, kept whole, makes the checker pass; else all of them if keeping all does.
fn blame<E, C>(
    cfg: &ExploreConfig,
    check: &C,
    core: &Core,
    img: &Img<'_>,
    ctx: &CrashCtx<'_, E>,
    trace: &[TraceEntry],
) -> Vec<Blame>
where
    C: Fn(&FaultFs, &CrashCtx<'_, E>) -> Result<(), String>,
{
    let lost: Vec<usize> = (0..img.choices.len())
        .filter(|&i| img.choices[i] != Choice::Keep)
        .collect();
    let describe = |i: usize| {
        let c = &img.cands[i];
        Blame {
            index: c.op,
            op: trace
                .get(c.op as usize)
                .map(|t| t.to_string())
                .unwrap_or_else(|| format!("op {}", c.op)),
            call_site: c.site.to_string(),
            torn: img.choices[i] != Choice::Drop,
        }
    };
    let passes = |choices: &[Choice]| {
        let fs = FaultFs::from_core(cfg.fs.clone(), image::build(core, img.cands, choices));
        check_fs(cfg, check, &fs, ctx).is_ok()
    };
    // bounded: blame is a diagnosis, not worth thousands of extra checks per violation
    for &i in lost.iter().take(32) {
        let mut ch = img.choices.clone();
        ch[i] = Choice::Keep;
        if passes(&ch) {
            return vec![describe(i)];
        }
    }
    if lost.len() > 1 {
        let ch = vec![Choice::Keep; img.choices.len()];
        if passes(&ch) {
            return lost.into_iter().map(describe).collect();
        }
    }
    Vec::new()
}

// ----- shrinking and replay -----

/// Removes workload steps while the exploration still finds a violation (any violation; a
/// workload that then fails or panics counts as not violating) and returns the smallest
/// step list found: chunks of halving size are tried, then single steps until none can go.
/// Returns `steps` unchanged if they do not violate.
pub fn shrink<S, E, W, C>(cfg: &ExploreConfig, steps: &[S], mut run_step: W, check: C) -> Vec<S>
where
    S: Clone,
    W: FnMut(&FaultFs, &S, &mut Journal<E>) -> Result<(), String>,
    C: Fn(&FaultFs, &CrashCtx<'_, E>) -> Result<(), String>,
{
    let mut quick = cfg.clone();
    quick.stop_at_first_violation = true;
    quick.progress = None;
    quick.blame = false;
    let mut fails = |s: &[S]| {
        let r = explore_impl(&quick, None, s, &mut run_step, &check);
        r.workload_error.is_none() && r.violation_count > 0
    };
    let mut cur = steps.to_vec();
    if !fails(&cur) {
        return cur;
    }
    let mut chunk = (cur.len() / 2).max(1);
    loop {
        let mut removed = false;
        let mut i = 0;
        while i < cur.len() {
            let end = (i + chunk).min(cur.len());
            let cand: Vec<S> = cur[..i].iter().chain(&cur[end..]).cloned().collect();
            if fails(&cand) {
                cur = cand;
                removed = true;
            } else {
                i += chunk;
            }
        }
        if chunk > 1 {
            chunk /= 2;
        } else if !removed {
            return cur;
        }
    }
}

/// One crash image rebuilt by [`replay_image`].
#[derive(Debug)]
pub struct Replay<E> {
    /// The image (a fresh filesystem, everything durable).
    pub image: FaultFs,
    /// Which unsynced operations it kept.
    pub image_desc: String,
    /// The events noted at or before the crash point.
    pub events: Vec<E>,
    /// The operations before the crash.
    pub trace: Vec<TraceEntry>,
}

/// Re-runs the workload and rebuilds image `image` at `crash_point` exactly as [`explore`]
/// checked it (the numbers come from a [`Violation`]), for debugging a failure by hand.
pub fn replay_image<S, E, W>(
    cfg: &ExploreConfig,
    steps: &[S],
    mut run_step: W,
    crash_point: usize,
    image: usize,
) -> Result<Replay<E>, Error>
where
    W: FnMut(&FaultFs, &S, &mut Journal<E>) -> Result<(), String>,
{
    replay_impl(cfg, None, steps, &mut run_step, crash_point, image)
}

/// [`replay_image`] for an exploration made with [`explore_from`] on `start`.
pub fn replay_image_from<S, E, W>(
    cfg: &ExploreConfig,
    start: &FaultFs,
    steps: &[S],
    mut run_step: W,
    crash_point: usize,
    image: usize,
) -> Result<Replay<E>, Error>
where
    W: FnMut(&FaultFs, &S, &mut Journal<E>) -> Result<(), String>,
{
    replay_impl(cfg, Some(start), steps, &mut run_step, crash_point, image)
}

fn replay_impl<S, E, W>(
    cfg: &ExploreConfig,
    start: Option<&FaultFs>,
    steps: &[S],
    run_step: &mut W,
    crash_point: usize,
    image: usize,
) -> Result<Replay<E>, Error>
where
    W: FnMut(&FaultFs, &S, &mut Journal<E>) -> Result<(), String>,
{
    cfg.fs.validate()?;
    if start.is_some_and(|s| s.config() != cfg.fs) {
        return Err(Error::StartSettingsDiffer);
    }
    let mut rec = record(cfg, start, steps, run_step);
    if crash_point > rec.trace.len() {
        return Err(Error::NoSuchCrashPoint {
            crash_point,
            ops: rec.trace.len(),
        });
    }
    let seeds: Vec<u64> = (0..cfg.random_images_per_point)
        .map(|j| derive(cfg.seed, crash_point as u64, j as u64))
        .collect();
    let core = rec.state_at(crash_point).clone();
    let mut found = None;
    let mut images = 0;
    for_each_image(&cfg.fs, &core, cfg.max_images_per_point, &seeds, |img| {
        images += 1;
        if img.n == image {
            found = Some((img.core, img.spec.to_string()));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    let Some((core, desc)) = found else {
        return Err(Error::NoSuchImage {
            crash_point,
            image,
            images,
        });
    };
    let n = rec.journal.count_at(crash_point);
    rec.journal.events.truncate(n);
    rec.trace.truncate(crash_point);
    Ok(Replay {
        image: FaultFs::from_core(cfg.fs.clone(), core),
        image_desc: desc,
        events: rec.journal.events,
        trace: rec.trace,
    })
}
