//! Remove one fsync at a time: each named fsync call site of the store must be the one that
//! keeps some workload correct, or be listed below with the reason it is not needed for
//! correctness. A site only stores through the crypt layer reach (`seal.data`: sealed blocks
//! are rewritten only there) is removed on the `Layered` backend. The sites are independent
//! explorations, shared out among the machine's cores. A site no matrix cell shows (open's
//! removal of a rejected `index.db`, which matters only over damaged blocks) is removed in the
//! crash sweep of the `recover_dir` fuzz corpus's directories instead.

use seqstore_core::internal::SyncSite;
use seqstore_core::{Ablation, Config, RecoveryMode};
use seqstore_crash_matrix::*;

/// Every cell of the matrix with `site` removed: its violations and the first one.
fn without(site: SyncSite, seed: u64) -> (u64, Option<String>) {
    let layered = Layered::new();
    let backend: &dyn Backend = if site == SyncSite::SealData {
        &layered
    } else {
        &Native
    };
    let mut violations = 0;
    let mut example = None;
    for mut spec in matrix_cells(None, None, seed) {
        spec.ablation = Ablation::Skip(site);
        let r = run_cell(backend, &spec, None);
        violations += r.report.violation_count as u64;
        if example.is_none() && r.report.violation_count > 0 {
            example = Some(format!(
                "{} {} {}: {}",
                spec.workload.name, spec.policy, spec.model, r.report.violations[0]
            ));
        }
    }
    (violations, example)
}

/// Crashes during the recovery of every directory of the `recover_dir` fuzz corpus (damaged
/// blocks under an `index.db`: what only a damaged directory's recovery reaches) with `site`
/// removed: the directories whose crash images reopen to another outcome, and the first one.
fn without_in_damaged_dirs(site: SyncSite, seed: u64) -> (u64, Option<String>) {
    let dirs = recovery::damaged_dirs();
    let cfg = Config::default()
        .with_recovery(RecoveryMode::TolerateCorruptTail)
        .with_ablation(Ablation::Skip(site));
    let outcomes = par_map(&dirs, |(_, fs)| {
        recovery::crash_recovery_of_dir(&cfg, fs, seed)
    });
    let failed: Vec<String> = dirs
        .iter()
        .zip(outcomes)
        .filter_map(|((p, _), r)| Some(format!("{}: {}", p.display(), r.err()?)))
        .collect();
    (failed.len() as u64, failed.into_iter().next())
}

#[test]
fn every_fsync_is_necessary() {
    let seed = 0x5eed;
    let sites = SyncSite::ALL;
    let mut results = par_map(sites, |&site| without(site, seed));
    // a site the matrix cannot show (recovery's own, of damage) is tried on damaged directories
    for (site, r) in sites.iter().zip(results.iter_mut()) {
        if r.0 == 0 {
            *r = without_in_damaged_dirs(*site, seed);
        }
    }
    let mut missing = Vec::new();
    for (site, (violations, example)) in sites.iter().zip(results) {
        let first = example.unwrap_or_default();
        println!(
            "{site:<26} {violations:>6} violations   {}",
            first.lines().next().unwrap_or("")
        );
        if violations == 0 {
            missing.push(*site);
        }
    }
    assert!(
        missing.is_empty(),
        "fsyncs with no observable effect: {missing:?}"
    );
}
