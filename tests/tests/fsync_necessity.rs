//! Remove one fsync at a time: each named fsync call site of the store must be the one that
//! keeps some workload correct, or be listed below with the reason it is not needed for
//! correctness. A site only stores through the crypt layer reach (`seal.data`: sealed blocks
//! are rewritten only there) is removed on the `Layered` backend. The sites are independent
//! explorations, shared out among the machine's cores.

use seqstore_core::internal::SyncSite;
use seqstore_core::Ablation;
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

#[test]
fn every_fsync_is_necessary() {
    let seed = 0x5eed;
    let sites = SyncSite::ALL;
    let results = par_map(sites, |&site| without(site, seed));
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
