//! The crash matrix: every workload × sync policy × crash model on the real store (no
//! ablation) must have zero violations at every crash point and image. Natively every cell
//! runs; through the other backends (group commit, the wasm guest, the encrypted store) a
//! default run takes a seeded sample of the cells, and `SEQSTORE_TEST_SIZE=full` (CI) all.

use crate::seed;
use seqstore_crash_matrix::*;

/// The cells a backend other than the native one runs: a seeded sample in a default run.
fn sampled_cells(seed: u64) -> Vec<CellSpec> {
    let all = matrix_cells(None, None, seed);
    seqstore_test_setup::sample("matrix cells", all, 24, seed)
}

#[test]
fn every_workload_policy_and_model_is_clean() {
    let seed = seed();
    let mut failures = Vec::new();
    let (mut images, mut points) = (0, 0);
    for spec in matrix_cells(None, None, seed) {
        let r = run_cell(&Native, &spec, None);
        println!("{r}");
        images += r.report.images;
        points += r.report.crash_points;
        if !r.report.is_clean() {
            failures.push(format!("{r}\n{}", r.report));
        }
    }
    println!("{points} crash points, {images} images (seed {seed})");
    assert!(
        failures.is_empty(),
        "violations (replay with SEQSTORE_SEED={seed}):\n{}",
        failures.join("\n")
    );
    assert!(
        points > 1000,
        "the matrix explores every boundary: {points}"
    );
}

#[test]
fn group_commit_path_is_clean_too() {
    // the same matrix through SharedStore: appends under Always take the group-commit path
    let seed = seed();
    let mut failures = Vec::new();
    for spec in sampled_cells(seed) {
        let r = run_cell(&Shared, &spec, None);
        if !r.report.is_clean() {
            failures.push(format!("{r}\n{}", r.report));
        }
    }
    assert!(
        failures.is_empty(),
        "violations through SharedStore (replay with SEQSTORE_SEED={seed}):\n{}",
        failures.join("\n")
    );
}

#[cfg(feature = "guest")]
#[test]
fn the_wasm_guest_is_clean_too() {
    // the whole matrix with the store in the wasm guest and fault-fs on the host
    let seed = seed();
    let mut failures = Vec::new();
    let mut images = 0;
    for spec in sampled_cells(seed) {
        let r = run_cell(&Guest, &spec, None);
        images += r.report.images;
        if !r.report.is_clean() {
            failures.push(format!("{r}\n{}", r.report));
        }
    }
    println!("guest: {images} images");
    assert!(
        failures.is_empty(),
        "violations in the guest (replay with SEQSTORE_SEED={seed}):\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_matrix_is_clean_on_an_encrypted_and_compressed_store() {
    // the same cells through the encryption layer (XChaCha20-Poly1305, lz4): its frames, torn
    // tails and length frames must recover to what the checker demands of the plain store
    let seed = seed();
    let backend = Layered::new();
    let mut failures = Vec::new();
    let mut points = 0;
    for spec in sampled_cells(seed) {
        let r = run_cell(&backend, &spec, None);
        points += r.report.crash_points;
        if !r.report.is_clean() {
            failures.push(format!("{r}\n{}", r.report));
        }
    }
    assert!(
        failures.is_empty(),
        "violations on the encrypted store (replay with SEQSTORE_SEED={seed}):\n{}",
        failures.join("\n")
    );
    let least = seqstore_test_setup::sized(300, 1000);
    assert!(
        points > least,
        "the matrix explores every boundary: {points}"
    );
}

#[test]
fn an_ablated_append_fsync_is_caught_on_an_encrypted_store() {
    // the negative control: the layer must not hide a missing fsync from the checker
    let seed = seed();
    let backend = Layered::new();
    let mut violations = 0;
    for mut spec in matrix_cells(None, None, seed) {
        spec.ablation =
            seqstore_core::Ablation::Skip(seqstore_core::internal::SyncSite::AppendData);
        violations += run_cell(&backend, &spec, None).report.violation_count;
    }
    assert!(violations > 0, "no violation with append.data removed");
}
