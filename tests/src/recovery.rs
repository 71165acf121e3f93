//! Crashes *during* recovery: recovery of the recovery.
//!
//! The crash matrix crashes a workload and recovers each crash image once. But recovery writes:
//! it finishes or rolls back an interrupted purge (renames and removals of `purge.new`,
//! `purge.old`, `msgs`), creates a missing `msgs/`, cuts torn tails (`set_len`), removes blank
//! block files and blocks a truncate voided, and under `Always` fsyncs the blocks it found. Its
//! own fsyncs were removed on the argument that recovery is idempotent and open's final
//! directory fsyncs cover it. This module replaces that argument with exploration:
//!
//! 1. every crash image of a matrix cell ("image 1") is recovered once without a crash; that
//!    recovery must pass [`super::check_image`]'s invariants, and what it comes to (the state and
//!    every message, [`Recovered`]) is the reference;
//! 2. the recovery of image 1 is then run under fault-fs's explorer ([`seqstore_fault_fs::explore_from`]),
//!    which crashes it at every operation boundary and builds every crash image the model
//!    allows there ("image 2"): the bounded ALICE-style set plus seeded random ones;
//! 3. each image 2 is recovered and must pass the same invariants against the journal of the
//!    *first* crash (nothing acknowledged durable before it is lost, the sequence never goes
//!    back, no phantom) and come to exactly the reference: crashing a recovery changes nothing
//!    (idempotence, checked, not argued);
//! 4. for a seeded sample of images 2 (in the CI run: every one that differs from its image
//!    1), the second recovery is crashed too, the same way (depth 2);
//! 5. I/O errors: every operation of the recovery of image 1 fails in turn (EIO, then ENOSPC);
//!    open must return a typed `Error::Io` of that kind (or, for the accelerator `index.db`,
//!    reject it and go on), never panic; then a new open of the directory as the failed open
//!    left it, and of crash images of it, must pass the invariants and come to the reference;
//! 6. [`crash_recovery_of_dir`]: 2. for any settled directory (the damaged and hostile ones of
//!    the `recover_dir` fuzz corpus: `index.db`, mid-block damage, forged records), where only
//!    idempotence is checked: every image 2 comes to the same outcome, store or typed error.
//!
//! 7. `Opts::limits`: 2. for the recovery of every image 1 under limits its workload did not
//!    have (open then writes tombstones, a floor record, and drops emptied front blocks).
//!
//! Limits: the images 1 are those of the matrix's workloads (no `index.db`: only 6. has one);
//! the enumeration per crash point is bounded (64 images + 8 random ones); the I/O errors are
//! one per open (a second failure during the recovery of the failed recovery is not injected).

use super::{check_opened, open_image, payload_id, CellSpec, Event, Native, Runner, StreamOps};
use seqstore_core::{Config, Error, Limits, ManualClock, RecoveryReport, Store, StreamState};
use seqstore_fault_fs::{CrashCtx, ExploreConfig, FaultFs, FaultKind, Journal, Report};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

/// What a recovery came to: the stream's counters and every message (sequence, subject,
/// payload id). Two recoveries of the same directory must come to equal values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// The counters.
    pub state: StreamState,
    /// Every readable message in `first..=last` (at most 10,000 sequences are read).
    pub msgs: Vec<(u64, String, Option<u64>)>,
}

impl Recovered {
    fn of(s: &mut StreamOps) -> Result<Recovered, String> {
        let state = s.state().map_err(|e| format!("state: {e}"))?;
        let mut msgs = Vec::new();
        let hi = state.last_seq.min(state.first_seq.saturating_add(10_000));
        for seq in state.first_seq.max(1)..=hi {
            match s.get(seq) {
                Ok(m) => msgs.push((seq, m.subject, payload_id(&m.payload))),
                Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(format!("get({seq}): {e}")),
            }
        }
        Ok(Recovered { state, msgs })
    }

    /// The first difference from `other`, for a failure message.
    fn diff(&self, other: &Recovered) -> String {
        if self.state != other.state {
            return format!("state {:?}, reference {:?}", self.state, other.state);
        }
        let a: Vec<_> = self
            .msgs
            .iter()
            .filter(|m| !other.msgs.contains(m))
            .collect();
        let b: Vec<_> = other
            .msgs
            .iter()
            .filter(|m| !self.msgs.contains(m))
            .collect();
        format!("messages only here {a:?}, only in the reference {b:?}")
    }
}

/// Recovers `image` (a store is opened on it: the image is changed), checks
/// [`super::check_image`]'s invariants against `events`, and, given a reference, that the
/// recovery came to exactly it. Returns what it came to.
pub fn check_recovered(
    cfg: &Config,
    image: &FaultFs,
    events: &[Event],
    reference: Option<&Recovered>,
) -> Result<Recovered, String> {
    let mut s = open_image(&Native, cfg, image)?;
    let got = Recovered::of(&mut *s)?;
    if let Some(r) = reference {
        if got != *r {
            return Err(format!(
                "recovered first={} last={}; not what the uninterrupted recovery of the first \
                 image came to: {}",
                got.state.first_seq,
                got.state.last_seq,
                got.diff(r)
            ));
        }
    }
    // after the reads above: the checks end with an append
    check_opened(&mut *s, events)?;
    Ok(got)
}

/// How hard to crash each recovery.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    /// Enumerated (ALICE-style) images per crash point of a recovery.
    pub max_images_per_point: usize,
    /// Seeded random images per crash point of a recovery, on top.
    pub random_images_per_point: usize,
    /// Crash the recovery of every image 1.
    pub crash: bool,
    /// ... and the recovery of one image 2 in `twice_every` (0: never): depth 2.
    pub twice_every: u64,
    /// Fail every operation of the recovery of one image 1 in `faults_every` (0: never),
    /// among the images whose recovery writes something.
    pub faults_every: u64,
    /// Also recover every image 1 with these limits (which the workload did not have), so
    /// that open enforces them: tombstones or a floor record, removal of emptied front blocks
    /// (with its own fsyncs). Crashed at every point, each image 2 must come to what the
    /// uninterrupted limited recovery came to, whose last sequence is still at least every
    /// durable one (messages the limits removed are not owed, so the journal's other checks do
    /// not apply).
    pub limits: Option<Limits>,
    /// ... for one image 1 in `limits_every`.
    pub limits_every: u64,
}

impl Opts {
    /// Crashes only: every image 1's recovery at every crash point, and the second recovery
    /// of every image 2 that differs from its image 1 (depth 2).
    pub fn crashes() -> Opts {
        Opts {
            max_images_per_point: 64,
            random_images_per_point: 8,
            crash: true,
            twice_every: 1,
            faults_every: 0,
            limits: None,
            limits_every: 1,
        }
    }

    /// I/O errors only, in the recoveries of one writing image 1 in `every`.
    pub fn faults(every: u64) -> Opts {
        Opts {
            crash: false,
            twice_every: 0,
            faults_every: every,
            ..Opts::crashes()
        }
    }
}

/// Counts, for the report.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Images 1 (crash images of the workload) whose recovery was crashed.
    pub images1: usize,
    /// ... of which the recovery wrote something (more than one crash point).
    pub writing: usize,
    /// ... of which the uninterrupted recovery finished an interrupted purge,
    pub purge_completed: usize,
    /// ... rolled one back,
    pub purge_rolled_back: usize,
    /// ... removed records a truncate had voided,
    pub truncate_cleanup: usize,
    /// ... cut a block (torn tail, damage),
    pub cut: usize,
    /// ... removed a block file whose header never became durable.
    pub removed_blank: usize,
    /// Crash points inside recoveries of images 1.
    pub points: usize,
    /// Images 2 recovered and checked.
    pub images2: usize,
    /// Second recoveries that were crashed too (depth 2).
    pub twice: usize,
    /// ... their crash points with a write before them, and images 3 checked.
    pub points2: usize,
    /// Images 3 recovered and checked.
    pub images3: usize,
    /// Limited recoveries (`Opts::limits`) that write, and their crash points.
    pub limited_writing: usize,
    /// ...
    pub limited_points: usize,
    /// Recoveries of images 1 (that write) failed at each of their operations in turn.
    pub fault_recoveries: usize,
    /// (operation, fault) cases of failing recoveries.
    pub fault_cases: usize,
    /// ... in which open returned the typed error.
    pub fault_errors: usize,
    /// Directories recovered after a failed recovery (as left, and crash images of it).
    pub fault_images: usize,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.images1 += o.images1;
        self.writing += o.writing;
        self.purge_completed += o.purge_completed;
        self.purge_rolled_back += o.purge_rolled_back;
        self.truncate_cleanup += o.truncate_cleanup;
        self.cut += o.cut;
        self.removed_blank += o.removed_blank;
        self.points += o.points;
        self.images2 += o.images2;
        self.twice += o.twice;
        self.points2 += o.points2;
        self.images3 += o.images3;
        self.limited_writing += o.limited_writing;
        self.limited_points += o.limited_points;
        self.fault_recoveries += o.fault_recoveries;
        self.fault_cases += o.fault_cases;
        self.fault_errors += o.fault_errors;
        self.fault_images += o.fault_images;
    }
}

/// splitmix64 of the inputs: the sample decisions and image seeds, reproducible from the seed.
fn mix(parts: &[u64]) -> u64 {
    // each part folded in as the seed of one splitmix64 step
    (parts.iter()).fold(0x9e37_79b9_7f4a_7c15u64, |x, &p| {
        seqstore_fault_fs::Rng::new(x ^ p).next_u64()
    })
}

/// The recovery as an explorer workload: one step, open the store and drop it (no close);
/// what it did goes to `report`.
fn recover<'a>(
    cfg: &'a Config,
    report: &'a RefCell<RecoveryReport>,
) -> impl FnMut(&FaultFs, &(), &mut Journal<()>) -> Result<(), String> + 'a {
    move |fs, _, _| {
        let clock = Box::new(ManualClock::new(3_000_000_000));
        let s = Store::builder(fs.clone())
            .config(cfg.clone())
            .clock(clock)
            .open()
            .map_err(|e| format!("recovery failed: {e}"))?;
        *report.borrow_mut() = s.recovery_report().clone();
        Ok(())
    }
}

fn explore_cfg(image: &FaultFs, opts: &Opts, seed: u64) -> ExploreConfig {
    let mut e = ExploreConfig::new(image.model());
    e.fs = image.config();
    e.seed = seed;
    e.max_images_per_point = opts.max_images_per_point;
    e.random_images_per_point = opts.random_images_per_point;
    e.max_violations = 3;
    e
}

fn violations(what: &str, r: &Report) -> String {
    let mut out = format!("{what}: {r}");
    if let Some(e) = &r.workload_error {
        out.push_str(&format!("\n  recovery failed live: {e}"));
    }
    out
}

/// Crashes the recovery of `image` (every file in it durable) at every operation boundary
/// and checks every crash image there: [`check_recovered`] against `events` (the journal of the
/// first crash) and `reference` (what the uninterrupted recovery of image 1 came to). `levels`
/// 2: also, for a sample of those images, crash their recovery the same way (1: not).
/// Each level's exploration seed is printed in its violations; it is derived from the
/// workload's seed, so `SEQSTORE_SEED` replays the whole tree.
#[allow(clippy::too_many_arguments)]
fn crash_recovery(
    cfg: &Config,
    image: &FaultFs,
    events: &[Event],
    reference: &Recovered,
    opts: &Opts,
    seed: u64,
    levels: u32,
    stats: &RefCell<Stats>,
) -> Result<(), String> {
    let ecfg = explore_cfg(image, opts, seed);
    let check = |img2: &FaultFs, cx: &CrashCtx<'_, ()>| -> Result<(), String> {
        // the recursion needs the image as the crash left it: the check below changes it
        let pristine = (levels > 1).then(|| img2.crash());
        {
            let mut st = stats.borrow_mut();
            if levels > 1 {
                st.images2 += 1;
            } else {
                st.images3 += 1;
            }
        }
        check_recovered(cfg, img2, events, Some(reference))?;
        // an image 2 equal to image 1 (e.g. everything the recovery did so far dropped) would
        // only repeat this exploration
        let Some(img2) = pristine.filter(|p| p.image_hash() != image.image_hash()) else {
            return Ok(());
        };
        let sampled = opts.twice_every > 0
            && mix(&[seed, cx.crash_point as u64, cx.image as u64])
                .is_multiple_of(opts.twice_every);
        if sampled {
            stats.borrow_mut().twice += 1;
            let seed2 = mix(&[seed, cx.crash_point as u64, cx.image as u64, 2]);
            crash_recovery(
                cfg,
                &img2,
                events,
                reference,
                opts,
                seed2,
                levels - 1,
                stats,
            )?;
        }
        Ok(())
    };
    let rep = RefCell::new(RecoveryReport::default());
    let r = seqstore_fault_fs::explore_from(&ecfg, image, &[()], recover(cfg, &rep), check);
    {
        let mut st = stats.borrow_mut();
        if levels > 1 {
            st.points += r.crash_points;
            st.writing += usize::from(r.crash_points > 1);
            let rep = rep.borrow();
            st.purge_completed += usize::from(rep.purge_completed);
            st.purge_rolled_back += usize::from(rep.purge_rolled_back);
            st.truncate_cleanup += usize::from(rep.truncate_cleanup);
            st.cut += usize::from(!rep.cuts.is_empty());
            st.removed_blank += usize::from(!rep.removed_blank.is_empty());
        } else {
            st.points2 += r.crash_points;
        }
    }
    if r.is_clean() {
        Ok(())
    } else {
        let what = if levels > 1 {
            "its recovery"
        } else {
            "the recovery of this image 2"
        };
        Err(violations(
            &format!("{what}, crashed at every operation (exploration seed {seed:#x})"),
            &r,
        ))
    }
}

/// Fails each operation of the recovery of `image` in turn with EIO, then ENOSPC: open must
/// return the typed error (or absorb a failure on `index.db`, an accelerator it may reject),
/// never panic; then the directory as the failed open left it (a restart without power loss),
/// its pessimistic crash image and two seeded ones must recover to `reference` and pass the
/// invariants.
fn fail_recovery(
    cfg: &Config,
    image: &FaultFs,
    events: &[Event],
    reference: &Recovered,
    seed: u64,
    stats: &RefCell<Stats>,
) -> Result<(), String> {
    let probe = image.crash();
    recover(cfg, &RefCell::default())(&probe, &(), &mut Journal::new())?;
    let trace = probe.trace();
    if !trace.iter().any(|t| t.mutated) {
        // a recovery that only reads: its failures are plain read errors, covered by the
        // workload fault sweep (robustness_faults.rs); the sample goes to the ones that write
        return Ok(());
    }
    stats.borrow_mut().fault_recoveries += 1;
    // whether a fault-free open of this image goes through index.db (uses it, or rejects it
    // as stale after reading the blocks it names)
    let index_path = Store::builder(image.crash())
        .config(cfg.clone())
        .clock(ManualClock::new(3_000_000_000))
        .open()
        .is_ok_and(|s| {
            let r = s.recovery_report();
            r.used_index || r.index_rejected.is_some()
        });
    for (n, op) in trace.iter().enumerate() {
        for fault in [FaultKind::Eio, FaultKind::Enospc] {
            let case = |e: String| {
                format!(
                    "op {n} `{op}` at {} failing with {fault:?}: {e}",
                    op.call_site
                )
            };
            stats.borrow_mut().fault_cases += 1;
            let fs = image.crash();
            fs.fail_op(n as u64, fault);
            let clock = Box::new(ManualClock::new(3_000_000_000));
            // Ok(whether open rejected index.db)
            let opened = catch_unwind(AssertUnwindSafe(|| {
                Store::builder(fs.clone())
                    .config(cfg.clone())
                    .clock(clock)
                    .open()
                    .map(|s| s.recovery_report().index_rejected.is_some())
            }))
            .map_err(|p| case(format!("open panicked: {}", super::robust::panic_text(&*p))))?;
            let want = match fault {
                FaultKind::Eio => std::io::ErrorKind::Other,
                FaultKind::Enospc => std::io::ErrorKind::StorageFull,
            };
            match opened {
                Err(e) if e.io_kind() == Some(want) => stats.borrow_mut().fault_errors += 1,
                Err(e) => {
                    return Err(case(format!(
                        "open returned {e:?}, expected Io of kind {want:?}"
                    )))
                }
                Ok(_) if op.path == seqstore_core::internal::INDEX_FILE => {}
                // validating index.db reads the blocks it vouches for (open, length, header,
                // last crc, the first live record): a failure there rejects the index, and
                // open rebuilds from the blocks, reading them again (the same absorption the
                // workload fault sweep allows on the index path). Allowed for a read when the
                // fault-free open took the index path and this one rejected the index (a
                // failed read during the rebuild after it is an error, not absorbed). A store
                // with ttls pending is the first in the matrix whose crash images hold an
                // index.db (`ttl-checkpoint-index`).
                Ok(true) if index_path && !op.mutated => {}
                Ok(_) => return Err(case("open succeeded: the failure was swallowed".into())),
            }
            fs.clear_faults();
            let s = mix(&[seed, n as u64, fault as u64]);
            let images = [
                ("pessimistic crash image".to_string(), fs.crash()),
                (format!("crash image seed {s:#x}"), fs.crash_seeded(s)),
                (
                    format!("crash image seed {:#x}", s ^ 1),
                    fs.crash_seeded(s ^ 1),
                ),
                // last: the checks change the directory they open
                ("directory as left (no power loss)".to_string(), fs),
            ];
            for (name, img) in images {
                stats.borrow_mut().fault_images += 1;
                check_recovered(cfg, &img, events, Some(reference))
                    .map_err(|e| case(format!("then the {name}: {e}")))?;
            }
        }
    }
    Ok(())
}

/// The outcome of one matrix cell.
#[derive(Debug)]
pub struct CellResult {
    /// What ran.
    pub spec: CellSpec,
    /// The workload's exploration: one violation per image 1 whose recovery (crashed, or
    /// failing) broke an invariant.
    pub report: Report,
    /// Counts.
    pub stats: Stats,
}

/// Runs the cell's workload under the explorer like [`super::run_cell`], but hands every crash
/// image (image 1) to the crash-during-recovery checks above instead of recovering it once.
/// The explorer's own seed is `spec.seed`; each recovery's exploration seed is derived from it,
/// the crash point and the image number (printed in a violation).
pub fn run_cell(spec: &CellSpec, opts: &Opts) -> CellResult {
    let cfg = super::config(spec.workload.block_size, spec.sync, spec.ablation);
    let mut ecfg = ExploreConfig::new(spec.model);
    ecfg.seed = spec.seed;
    ecfg.max_violations = 5;
    // blame would re-run a failing image's whole recovery exploration up to 32 times, to name
    // an unsynced operation of the workload: not what a failure here is about
    ecfg.blame = false;
    // the matrix's setting (run_cell): images 1 are the very images the matrix checks
    ecfg.random_images_per_point = 24;
    let stats = RefCell::new(Stats::default());
    let mut runner = Runner::new(&Native, cfg.clone());
    let report = seqstore_fault_fs::explore(
        &ecfg,
        &spec.workload.steps,
        |fs, step, j| runner.step(fs, step, j),
        |img, cx: &CrashCtx<'_, Event>| {
            stats.borrow_mut().images1 += 1;
            // the uninterrupted recovery, on a copy: the reference the others must come to
            let reference = check_recovered(&cfg, &img.crash(), cx.events, None)
                .map_err(|e| format!("uninterrupted recovery: {e}"))?;
            let seed = mix(&[spec.seed, cx.crash_point as u64, cx.image as u64]);
            if opts.crash {
                crash_recovery(&cfg, img, cx.events, &reference, opts, seed, 2, &stats)?;
            }
            if opts.faults_every > 0 && seed.is_multiple_of(opts.faults_every) {
                fail_recovery(&cfg, img, cx.events, &reference, seed, &stats)?;
            }
            let limited = opts.limits_every > 0 && (seed >> 16).is_multiple_of(opts.limits_every);
            if let (Some(limits), true) = (opts.limits, limited) {
                let cfg = cfg.clone().with_limits(limits);
                let limited = outcome(&cfg, &img.crash())
                    .map_err(|e| format!("recovery with {limits:?}: {e}"))?;
                let durable = super::Expect::from_events(cx.events).durable_last;
                if limited.state.last_seq < durable {
                    return Err(format!(
                        "recovered first={} last={} with {limits:?}; expected last >= {durable}",
                        limited.state.first_seq, limited.state.last_seq
                    ));
                }
                let (points, _) = crash_recovery_of_dir(&cfg, img, seed)
                    .map_err(|e| format!("with {limits:?}: {e}"))?;
                let mut st = stats.borrow_mut();
                st.limited_writing += usize::from(points > 1);
                st.limited_points += points;
            }
            Ok(())
        },
    );
    CellResult {
        spec: spec.clone(),
        report,
        stats: stats.into_inner(),
    }
}

/// Runs every cell, adding up the counts; returns the failures (one line per cell, with its
/// report) and the totals.
pub fn run_cells(cells: &[CellSpec], opts: &Opts) -> (Vec<String>, Stats) {
    let mut total = Stats::default();
    let mut failures = Vec::new();
    for (spec, r) in cells
        .iter()
        .zip(super::par_map(cells, |spec| run_cell(spec, opts)))
    {
        total.add(&r.stats);
        if !r.report.is_clean() {
            failures.push(format!(
                "{} {} {} {}: {}",
                spec.workload.name,
                spec.policy,
                spec.model,
                spec.ablation.name(),
                r.report
            ));
        }
    }
    (failures, total)
}

/// What opening a directory comes to: what the store holds, or the error (its text) from
/// `open` or from a read (damage behind an `index.db` is found lazily).
fn outcome(cfg: &Config, fs: &FaultFs) -> Result<Recovered, String> {
    let clock = Box::new(ManualClock::new(3_000_000_000));
    let mut s = Store::builder(fs.clone())
        .config(cfg.clone())
        .clock(clock)
        .open()
        .map_err(|e| format!("open: {e}"))?;
    Recovered::of(&mut s)
}

/// The directories the `recover_dir` fuzz corpus (`fuzz/corpus/recover_dir/`) builds, with
/// the file each came from, in file name order.
pub fn damaged_dirs() -> Vec<(PathBuf, FaultFs)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/recover_dir");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let fs = crate::robust::build_dir(&std::fs::read(&p).expect("read corpus file"));
            (p, fs)
        })
        .collect()
}

/// Crash during recovery of an arbitrary (settled: everything durable) store directory, e.g. a
/// damaged or hostile one from the `recover_dir` fuzz corpus, which has what the matrix images
/// lack (an `index.db`, damage in the middle of blocks, stray files, forged records): the
/// uninterrupted recovery comes to some outcome (a store, or a typed error); every crash image
/// at every operation boundary of that recovery must come to the very same outcome when opened
/// again. Returns (crash points, images).
pub fn crash_recovery_of_dir(
    cfg: &Config,
    dir: &FaultFs,
    seed: u64,
) -> Result<(usize, usize), String> {
    let reference = outcome(cfg, &dir.crash());
    let mut ecfg = ExploreConfig::new(dir.model());
    ecfg.fs = dir.config();
    ecfg.seed = seed;
    ecfg.max_violations = 3;
    let check = |img: &FaultFs, _: &CrashCtx<'_, ()>| {
        let got = outcome(cfg, img);
        if got == reference {
            Ok(())
        } else {
            Err(format!(
                "reopened to {got:?}; the uninterrupted recovery came to {reference:?}"
            ))
        }
    };
    // the recording's own open may fail (a typed error is an outcome here): no step error
    let run = |fs: &FaultFs, _: &(), _: &mut Journal<()>| {
        let _ = outcome(cfg, fs);
        Ok(())
    };
    let r = seqstore_fault_fs::explore_from(&ecfg, dir, &[()], run, check);
    if r.is_clean() {
        Ok((r.crash_points, r.images))
    } else {
        Err(violations("recovery crashed", &r))
    }
}
