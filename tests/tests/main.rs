//! The crash matrix's proofs: every workload, fsync, recovery and fault exploration of this crate.
//! Each module is one file of this directory, as its own binary was before; one binary
//! per crate links the dependencies once.

/// The seed of a module's explorations: `SEQSTORE_SEED`, else a fixed one (failures print it).
fn seed() -> u64 {
    std::env::var("SEQSTORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed)
}

mod consumer_crash;
mod crash_matrix;
mod fsync_necessity;
mod purge_proof;
mod random_workloads;
mod rebuild_threads;
mod recovery_crash;
mod restore_crash;
mod robustness_dirs;
mod robustness_faults;
mod robustness_model;
mod verify_agrees;
