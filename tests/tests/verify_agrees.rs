//! `verify` (read-only) and `open` (which repairs) read a directory with one set of per-record
//! rules (store-core's `store/replay.rs`): on every crash image of the matrix, of a sample of
//! random workloads, and on every damaged directory of the fuzz corpus, they must agree on the
//! sequences lost and on the last sequence. Compared where open rebuilt from the blocks and no
//! purge was interrupted (open completes or rolls one back; verify reads the blocks as found).

use seqstore_core::{Config, Store};
use seqstore_crash_matrix::random::{generate, workload_seed};
use seqstore_crash_matrix::*;
use seqstore_fault_fs::{CrashCtx, ExploreConfig, FaultFs};

/// Verify first (it changes nothing), then open a copy and compare.
fn agree(image: &FaultFs, cfg: &Config) -> Result<(), String> {
    let v = match seqstore_core::verify(image) {
        Ok(v) => v,
        // nothing to verify (no msgs/ yet): open creates it
        Err(_) => return Ok(()),
    };
    if v.interrupted_purge.is_some() {
        // open completes or rolls back the purge from what purge.new holds: verify reads the
        // blocks as found and only reports the purge
        return Ok(());
    }
    let copy = robust::copy_of(image);
    let s = match Store::open(copy, cfg.clone()) {
        Ok(s) => s,
        // open refuses what it cannot repair: verify must call the directory damaged too
        Err(e) if v.is_clean() => return Err(format!("open refused ({e}), verify says clean")),
        Err(_) => return Ok(()),
    };
    let r = s.recovery_report();
    if r.used_index {
        return Ok(());
    }
    if v.lost != r.lost {
        return Err(format!(
            "verify says lost {:?}, open says {:?}\nverify: {v:?}\nopen: {r:?}",
            v.lost, r.lost
        ));
    }
    if v.consumers != s.consumer_names().len() {
        return Err(format!(
            "verify counts {} consumers, open recovers {:?}\nverify: {v:?}",
            v.consumers,
            s.consumer_names()
        ));
    }
    if v.last_seq != s.state().last_seq {
        return Err(format!(
            "verify says last {}, open says {}\nverify: {v:?}\nopen: {r:?}",
            v.last_seq,
            s.state().last_seq
        ));
    }
    Ok(())
}

fn explore_agreement(spec: &CellSpec) -> seqstore_fault_fs::Report {
    let cfg = config(spec.workload.block_size, spec.sync, spec.ablation);
    let mut ecfg = ExploreConfig::new(spec.model);
    ecfg.seed = spec.seed;
    ecfg.random_images_per_point = 8;
    let mut runner = Runner::new(&Native, cfg.clone());
    seqstore_fault_fs::explore(
        &ecfg,
        &spec.workload.steps,
        |fs, step, j| runner.step(fs, step, j),
        |img, _ctx: &CrashCtx<'_, Event>| agree(img, &cfg),
    )
}

#[test]
fn verify_and_open_agree_on_every_crash_image() {
    let mut cells = matrix_cells(None, None, 0x5eed);
    for i in 0..40 {
        let w = generate(workload_seed(11, i), 24);
        for (policy, sync) in policies() {
            for model in seqstore_fault_fs::Model::ALL {
                cells.push(CellSpec {
                    workload: w.clone(),
                    policy,
                    sync,
                    ablation: seqstore_core::Ablation::Full,
                    model,
                    seed: i,
                });
            }
        }
    }
    let (mut images, mut failures) = (0, Vec::new());
    for spec in &cells {
        let r = explore_agreement(spec);
        images += r.images;
        if let Some(v) = r.violations.first() {
            failures.push(format!(
                "{} {} {}: {v}\n{:?}",
                spec.workload.name, spec.policy, spec.model, spec.workload.steps
            ));
        }
    }
    println!("{} cells, {images} images", cells.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn verify_and_open_agree_on_the_damaged_directories_of_the_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/recover_dir");
    let mut n = 0;
    let mut failures = Vec::new();
    for e in std::fs::read_dir(&dir).expect("the recover_dir corpus") {
        let path = e.expect("entry").path();
        let data = std::fs::read(&path).expect("corpus file");
        let fs = robust::build_dir(&data);
        n += 1;
        if let Err(m) = agree(&fs, &Config::default()) {
            failures.push(format!("{}: {m}", path.display()));
        }
    }
    println!("{n} corpus directories");
    assert!(n > 0);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
