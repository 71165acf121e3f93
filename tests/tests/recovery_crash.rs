//! Crash *during* recovery: every crash image of the crash matrix is recovered while the power
//! is cut at every operation boundary of that recovery, and every image that leaves is recovered
//! again and checked (see `seqstore_crash_matrix::recovery` for the checks); a sample of those second
//! recoveries is crashed too; every operation of a sample of recoveries fails with EIO and
//! ENOSPC in turn. Plus the same for damaged and hostile directories (the `recover_dir` fuzz
//! corpus), and the negative control: a deliberately non-idempotent recovery is caught here
//! while the plain matrix does not see it.
//!
//! `SEQSTORE_SEED=N` replays (it seeds the workload explorations, from which every recovery's
//! exploration seed and the samples are derived; failures print it);
//! `SEQSTORE_WORKLOAD=<name>` runs one workload of the matrix only. A default run takes a
//! seeded sample of the matrix's cells; `SEQSTORE_TEST_SIZE=full` (CI) runs every cell and
//! checks that the sweep reached every kind of recovery write.
//! The bigger sweep (~15 s in release):
//! `cargo test -p seqstore-crash-matrix --no-default-features --release --test proofs -- recovery_crash:: --ignored`.

use crate::seed;
use seqstore_core::{Ablation, Config, Limits, RecoveryMode};
use seqstore_crash_matrix::recovery::{self, Opts, Stats};
use seqstore_crash_matrix::*;
use seqstore_fault_fs::FaultFs;
use std::path::PathBuf;
use std::time::Instant;

/// Cells of the matrix a default run takes (of 78).
const QUICK_CELLS: usize = 24;

fn cells(seed: u64) -> Vec<CellSpec> {
    let w = std::env::var("SEQSTORE_WORKLOAD").ok();
    let all = matrix_cells(w.as_deref(), None, seed);
    seqstore_test_setup::sample("matrix cells", all, QUICK_CELLS, seed)
}

/// Every cell of the matrix ran: the counts below are the whole sweep's.
fn whole_matrix() -> bool {
    std::env::var("SEQSTORE_WORKLOAD").is_err() && seqstore_test_setup::full_size()
}

fn run(what: &str, seed: u64, opts: &Opts) -> Stats {
    let t = Instant::now();
    let (failures, st) = recovery::run_cells(&cells(seed), opts);
    println!(
        "{what}: {st:?} in {:.1?} (SEQSTORE_SEED={seed})",
        t.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{what}: {} cells fail (replay with SEQSTORE_SEED={seed} SEQSTORE_WORKLOAD=<name>):\n{}",
        failures.len(),
        failures.join("\n")
    );
    st
}

/// Every matrix image (13 workloads × 3 policies × 2 models, ~4,500 images) × every crash
/// point of its recovery × every image there; and every such second recovery taken after a
/// recovery write is crashed again at every point.
#[test]
fn crash_during_recovery_of_every_matrix_image() {
    let st = run("crashes", seed(), &Opts::crashes());
    if whole_matrix() {
        // the sweep reaches every kind of recovery write, not just crash point 0
        assert!(st.images1 > 4000 && st.writing > 1000, "{st:?}");
        assert!(
            st.purge_completed > 50 && st.purge_rolled_back > 50,
            "{st:?}"
        );
        assert!(
            st.truncate_cleanup > 20 && st.cut > 100 && st.removed_blank > 100,
            "{st:?}"
        );
        assert!(
            st.points > st.images1 + st.writing && st.twice > 1000,
            "{st:?}"
        );
    }
}

/// Every operation of the recovery of one writing matrix image in 5, failing with EIO, then
/// ENOSPC: a typed error, never a panic; then the directory as left, and crash images of it,
/// recover to the same store.
#[test]
fn io_errors_during_recovery() {
    let st = run("I/O errors", seed(), &Opts::faults(5));
    if whole_matrix() {
        assert!(st.fault_recoveries > 200 && st.fault_cases > 5000, "{st:?}");
    }
}

/// One matrix image in 2 recovered with limits the workload did not have (3 messages, 1 per
/// subject): open writes tombstones and a floor record and drops emptied front blocks; crashed
/// at every point of that, each image reopens (with the same limits) to what the uninterrupted
/// limited recovery came to, and the sequence never goes back.
#[test]
fn crash_during_recovery_that_enforces_limits() {
    let mut o = Opts::crashes();
    o.crash = false;
    o.limits = Some(
        Limits::default()
            .with_max_msgs(3)
            .with_max_msgs_per_subject(1),
    );
    o.limits_every = 2;
    let st = run("limits", seed(), &o);
    if whole_matrix() {
        assert!(st.limited_writing > 1000, "{st:?}");
    }
}

/// Damaged and hostile directories (the `recover_dir` fuzz corpus: index.db, mid-block damage,
/// forged records, half-done purges, stray files): crashing their recovery at every point
/// changes nothing of what it comes to (a store with the same contents, or the same error),
/// in both recovery modes.
#[test]
fn crash_during_recovery_of_damaged_directories() {
    let seed = seed();
    let dirs = recovery::damaged_dirs();
    let (mut points, mut images, mut writing) = (0, 0, 0);
    let mut failures = Vec::new();
    let numbered: Vec<(usize, &(PathBuf, FaultFs))> = dirs.iter().enumerate().collect();
    let outcomes = par_map(&numbered, |&(i, (_, fs))| {
        [RecoveryMode::TolerateCorruptTail, RecoveryMode::Strict].map(|mode| {
            let cfg = Config::default().with_recovery(mode);
            let s = seed ^ ((i as u64) << 8) ^ (mode == RecoveryMode::Strict) as u64;
            (mode, recovery::crash_recovery_of_dir(&cfg, fs, s))
        })
    });
    for (&(_, (p, _)), per_mode) in numbered.iter().zip(outcomes) {
        for (mode, outcome) in per_mode {
            match outcome {
                Ok((p, n)) => {
                    points += p;
                    images += n;
                    writing += usize::from(p > 1);
                }
                Err(e) => failures.push(format!("{} {mode:?}: {e}", p.display())),
            }
        }
    }
    println!(
        "{} directories × 2 modes: {writing} recoveries write, {points} crash points, {images} \
         images (SEQSTORE_SEED={seed})",
        dirs.len()
    );
    assert!(
        failures.is_empty(),
        "SEQSTORE_SEED={seed}:\n{}",
        failures.join("\n")
    );
    assert!(
        dirs.len() > 100 && writing > 20,
        "{writing} of {}",
        dirs.len()
    );
}

/// The negative control. `Ablation::MovePurgeBlocks` makes recovery finish an interrupted purge
/// by moving purge.new's block files one by one into a new msgs/ and removing purge.new: live
/// it works, so the plain crash matrix (which recovers each image once) stays clean; crashed
/// during or right after that recovery, under posix, the moves never became durable (they
/// wait for an fsync of purge.new, which is gone) and the stream is lost. This test must see it.
#[test]
fn a_non_idempotent_recovery_is_caught() {
    let seed = seed();
    let mut cells = matrix_cells(Some("seed"), None, seed);
    for c in &mut cells {
        c.ablation = Ablation::MovePurgeBlocks;
        let plain = run_cell(&Native, c, None);
        assert!(plain.report.is_clean(), "the plain matrix sees it: {plain}");
    }
    let (failures, st) = recovery::run_cells(&cells, &Opts::crashes());
    println!("{st:?}");
    for f in &failures {
        println!("{}", f.lines().take(4).collect::<Vec<_>>().join("\n"));
    }
    // posix: every policy; ordered (renames durable at once, in order) has nothing to lose
    assert_eq!(failures.len(), 3, "SEQSTORE_SEED={seed}: {failures:#?}");
    for f in &failures {
        assert!(f.contains(" posix "), "{f}");
        assert!(
            f.contains("recovered first=0 last=0; "),
            "the stream comes back at 0,0: {f}"
        );
    }
}

/// The bigger sweep (not in CI): every part above at once, with more images per crash point,
/// every writing recovery failed at every operation, limits on every image.
/// `cargo test -p seqstore-crash-matrix --no-default-features --release --test proofs -- recovery_crash:: --ignored`
#[test]
#[ignore]
fn full_sweep() {
    let seed = seed();
    let mut o = Opts::crashes();
    o.max_images_per_point = 256;
    o.random_images_per_point = 32;
    o.faults_every = 1;
    o.limits = Some(
        Limits::default()
            .with_max_msgs(3)
            .with_max_msgs_per_subject(1),
    );
    run("full sweep", seed, &o);
}
