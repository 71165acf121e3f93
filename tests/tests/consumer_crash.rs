//! Consumers in the crash matrix: the consumer workloads under every policy and
//! model, natively and through `SharedStore` (acks by group commit), clean; and each consumer
//! fsync removed alone must show a violation (the negative controls).

use crate::seed;
use seqstore_core::Ablation;
use seqstore_crash_matrix::*;

fn consumer_cells(seed: u64) -> Vec<CellSpec> {
    workloads()
        .into_iter()
        .filter(|w| w.steps.iter().any(|s| s.is_consumer()))
        .flat_map(|w| matrix_cells(Some(w.name), None, seed))
        .collect()
}

#[test]
fn consumer_workloads_are_clean_native_and_shared() {
    let seed = seed();
    let mut failures = Vec::new();
    let cells = consumer_cells(seed);
    assert!(cells.len() >= 24, "{} cells", cells.len());
    for backend in [&Native as &dyn Backend, &Shared] {
        for spec in &cells {
            let r = run_cell(backend, spec, None);
            println!("{r}");
            if !r.report.is_clean() {
                failures.push(format!("{r}\n{}", r.report));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "violations (replay with SEQSTORE_SEED={seed}):\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_consumer_fsync_is_necessary() {
    let seed = seed();
    let mut missing = Vec::new();
    for &site in seqstore_core::internal::SyncSite::ALL
        .iter()
        .filter(|s| s.name().starts_with("consumer."))
    {
        let mut violations = 0;
        let mut example = String::new();
        for mut spec in consumer_cells(seed) {
            spec.ablation = Ablation::Skip(site);
            let r = run_cell(&Native, &spec, None);
            if example.is_empty() && r.report.violation_count > 0 {
                example = format!(
                    "{} {} {}: {}",
                    spec.workload.name, spec.policy, spec.model, r.report.violations[0]
                );
            }
            violations += r.report.violation_count;
        }
        println!(
            "{site:<26} {violations:>6} violations   {}",
            example.lines().next().unwrap_or("")
        );
        if violations == 0 {
            missing.push(site);
        }
    }
    assert!(
        missing.is_empty(),
        "consumer fsyncs with no effect: {missing:?} (seed {seed})"
    );
}

#[cfg(feature = "guest")]
#[test]
fn consumer_workloads_are_clean_in_the_wasm_guest() {
    // the consumer calls through the guest's WIT interface, fault-fs served by the host
    let seed = seed();
    let mut failures = Vec::new();
    for spec in consumer_cells(seed) {
        let r = run_cell(&Guest, &spec, None);
        println!("{r}");
        if !r.report.is_clean() {
            failures.push(format!("{r}\n{}", r.report));
        }
    }
    assert!(
        failures.is_empty(),
        "violations in the guest (replay with SEQSTORE_SEED={seed}):\n{}",
        failures.join("\n")
    );
}
