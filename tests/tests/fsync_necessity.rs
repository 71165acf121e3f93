//! Remove one fsync at a time: each named fsync call site of the store must be the one that
//! keeps some workload correct, or be listed below with the reason it is not needed for
//! correctness. A site only stores through the crypt layer reach (`seal.data`: sealed blocks
//! are rewritten only there) is removed on the `Layered` backend.

use crash_matrix::*;
use store_core::{Ablation, SyncSite};

#[test]
fn every_fsync_is_necessary() {
    let seed = 0x5eed;
    let layered = Layered::new();
    let mut table = Vec::new();
    for &site in SyncSite::ALL {
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
            violations += r.report.violation_count;
            if example.is_none() && r.report.violation_count > 0 {
                example = Some(format!(
                    "{} {} {}: {}",
                    spec.workload.name, spec.policy, spec.model, r.report.violations[0]
                ));
            }
        }
        println!(
            "{site:<26} {violations:>6} violations   {}",
            example
                .clone()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or("")
        );
        table.push((site, violations));
    }
    let missing: Vec<_> = table.iter().filter(|(_, v)| *v == 0).collect();
    assert!(
        missing.is_empty(),
        "fsyncs with no observable effect: {missing:?}"
    );
}
