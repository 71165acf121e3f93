//! Random valid workloads (seqstore_crash_matrix::random), explored at every crash point under every
//! sync policy and both crash models: the real store must be clean, and with the compact fix
//! reverted (`Ablation::CompactEarlyReturn`) the same explorer must find the bug and shrink
//! it to a short workload. Every run prints its seed; `SEQSTORE_SEED=S` replays it.

use seqstore_core::Ablation;
use seqstore_crash_matrix::random::{generate, literal, run_campaign, workload_seed, Campaign};
use seqstore_crash_matrix::{Backend, Layered, Native, Shared};

fn seed(default: u64) -> u64 {
    std::env::var("SEQSTORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Workloads per test run: `SEQSTORE_RANDOM_WORKLOADS` for a soak, else a count that keeps
/// the test to about a minute on two cores in a debug build.
fn count(default: u64) -> u64 {
    std::env::var("SEQSTORE_RANDOM_WORKLOADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn campaign(backend: &dyn Backend, seed: u64, workloads: u64, ablation: Ablation) -> Campaign<'_> {
    Campaign {
        seed,
        first: 0,
        workloads,
        max_steps: 24,
        ablation,
        backend,
        models: Vec::new(),
        stop_at_first: true,
    }
}

fn assert_clean(backend: &dyn Backend, seed: u64, workloads: u64) {
    let c = campaign(backend, seed, workloads, Ablation::Full);
    let r = run_campaign(&c, |_, _| {});
    println!(
        "{} random workloads, {} cells, {} crash points, {} images, {} violations (seed {seed}, {})",
        r.workloads,
        r.cells,
        r.crash_points,
        r.images,
        r.violations,
        backend.name()
    );
    assert!(
        r.workload_errors.is_empty(),
        "a valid workload failed without a crash (seed {seed}):\n{}",
        r.workload_errors.join("\n")
    );
    if let Some(f) = &r.first {
        panic!("{}", f.describe(seed));
    }
    assert_eq!(r.workloads, workloads);
    assert!(r.crash_points > 0 && r.images > r.crash_points);
}

#[test]
fn the_generator_replays_from_its_seed_and_varies() {
    let a = generate(workload_seed(7, 3), 24);
    assert_eq!(a.steps, generate(workload_seed(7, 3), 24).steps);
    assert_eq!(a.block_size, generate(workload_seed(7, 3), 24).block_size);
    // over a few hundred workloads every kind of step occurs
    let mut kinds = std::collections::BTreeSet::new();
    for i in 0..300 {
        for s in generate(workload_seed(1, i), 24).steps {
            kinds.insert(format!("{s:?}").split('(').next().unwrap_or("").to_string());
        }
    }
    let all = [
        "Open",
        "Reopen",
        "Append",
        "Sync",
        "Delete",
        "Erase",
        "Purge",
        "PurgeEx",
        "Compact",
        "Truncate",
        "Tick",
        "Checkpoint",
        "Close",
        "TrimOnOpen",
        "ConsumerAdd",
        "Deliver",
        "Ack",
        "Redeliver",
        "ConsumerReset",
        "ConsumerDelete",
    ];
    for k in all {
        assert!(kinds.contains(k), "no {k} step in 300 workloads: {kinds:?}");
    }
    assert!(literal(&a, "x").starts_with("Workload {\n    name: \"x\""));
}

#[test]
fn random_workloads_are_clean_natively() {
    assert_clean(&Native, seed(1), count(40));
}

#[test]
fn random_workloads_are_clean_through_shared_store() {
    assert_clean(&Shared, seed(2), count(12));
}

#[test]
fn random_workloads_are_clean_encrypted_and_compressed() {
    assert_clean(&Layered::new(), seed(4), count(12));
}

#[test]
fn no_nonce_repeats_across_the_crashes_and_recoveries_of_random_workloads() {
    // every seal of the workloads and of every recovery of every crash image, one log
    let backend = Layered::recording();
    assert_clean(&backend, seed(6), count(4).min(4));
    let nonces = backend.nonces();
    let unique: std::collections::HashSet<_> = nonces.iter().collect();
    println!("{} nonces, {} distinct", nonces.len(), unique.len());
    assert!(nonces.len() > 1000);
    assert_eq!(unique.len(), nonces.len(), "a nonce was used twice");
}

#[cfg(feature = "guest")]
#[test]
fn a_sample_of_random_workloads_is_clean_encrypted_in_the_wasm_guest() {
    assert_clean(
        &seqstore_crash_matrix::LayeredGuest,
        seed(5),
        count(3).min(3),
    );
}

#[cfg(feature = "guest")]
#[test]
fn a_sample_of_random_workloads_is_clean_in_the_wasm_guest() {
    assert_clean(&seqstore_crash_matrix::Guest, seed(3), count(5).min(5));
}

#[test]
fn the_explorer_finds_the_compact_bug_when_the_fix_is_reverted() {
    // The negative control: the early return of compact without a sync, as it was before the
    // fix. The generator must find it within the budget and shrink it to a short workload.
    let seed = seed(1);
    let c = campaign(&Native, seed, 1000, Ablation::CompactEarlyReturn);
    let r = run_campaign(&c, |_, _| {});
    let f = r.first.as_ref().unwrap_or_else(|| {
        panic!(
            "{} random workloads (seed {seed}) did not find the reverted compact fix",
            r.workloads
        )
    });
    println!(
        "found after {} workloads:\n{}",
        r.workloads,
        f.describe(seed)
    );
    assert!(
        f.shrunk_result.report.violation_count > 0,
        "the shrunk workload must still violate"
    );
    assert!(
        f.shrunk.steps.len() <= 10,
        "shrunk to {} steps:\n{}",
        f.shrunk.steps.len(),
        literal(&f.shrunk, "x")
    );
    assert!(f
        .shrunk
        .steps
        .iter()
        .any(|s| matches!(s, seqstore_crash_matrix::Step::Compact(_))));
}

#[test]
fn the_explorer_finds_lost_acks_when_the_consumer_journal_fsync_is_removed() {
    // The consumer negative control: without the journal's fsync under the policy, an ack
    // acknowledged under `Always` is lost in a crash. Random workloads must find it.
    let seed = seed(1);
    let c = campaign(
        &Native,
        seed,
        200,
        Ablation::Skip(seqstore_core::internal::SyncSite::ConsumerJournalData),
    );
    let r = run_campaign(&c, |_, _| {});
    let f = r.first.as_ref().unwrap_or_else(|| {
        panic!(
            "{} random workloads (seed {seed}) did not find the missing consumer fsync",
            r.workloads
        )
    });
    println!(
        "found after {} workloads:\n{}",
        r.workloads,
        f.describe(seed)
    );
    assert!(f.shrunk_result.report.violation_count > 0);
    assert!(f.shrunk.steps.iter().any(|s| s.is_consumer()));
}
