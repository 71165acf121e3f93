//! The served filesystem against the real thing: a guest makes seeded random filesystem calls
//! (`wasi-subjects ops SEED N`) once on the served tree and once under wasmtime-wasi's own
//! filesystem on a real directory. Every call's printed result (values and error kinds) must
//! agree, the trees they leave must be equal, and the capture must replay to that tree.
//!
//! `SEQSTORE_SEED=<n>` runs one seed; `SEQSTORE_RUNS=<k>` sets how many (default 48). A
//! failing seed is shrunk to the shortest prefix of its calls that still fails.

use crate::common::{program, tree};
use seqstore_fault_fs::{FaultFs, FaultFsConfig, Journal, Model};
use seqstore_trace::replay::Replayer;
use seqstore_wasi_trace::{run_on_dir, Recorder, RunConfig};

/// Why `ops seed n` disagrees with the reference, if it does.
fn disagreement(seed: u64, n: u64) -> Option<String> {
    let args = ["ops".to_string(), seed.to_string(), n.to_string()];
    let cfg = RunConfig::with_args(&args);
    let rec = Recorder::new(FaultFs::new(Model::Posix));
    let served = rec.run(program(), &cfg).expect("the served run");
    let dir = tempfile::tempdir().unwrap();
    let stock = run_on_dir(program(), dir.path(), &cfg).expect("the reference run");
    if served != stock {
        let (a, b) = (
            String::from_utf8_lossy(&served.stdout),
            String::from_utf8_lossy(&stock.stdout),
        );
        let at = a.lines().zip(b.lines()).find(|(x, y)| x != y);
        return Some(format!("results differ: served vs wasmtime-wasi: {at:?}"));
    }
    let real = FaultFs::from_dir(FaultFsConfig::new(Model::Posix), dir.path()).unwrap();
    if tree(&rec.live()) != tree(&real) {
        return Some("the trees differ".into());
    }
    let cap = rec.capture();
    let fs = rec.start().fork();
    let (mut r, mut j) = (Replayer::new(), Journal::new());
    for (i, op) in cap.ops.iter().enumerate() {
        if let Err(e) = r.step(&fs, i, op, &mut j) {
            return Some(format!("op {i} ({op}) does not replay: {e}"));
        }
    }
    (tree(&fs) != tree(&rec.live())).then(|| "the replay differs from the run".into())
}

#[test]
fn random_calls_agree_with_wasmtime_wasi_on_a_real_directory_and_replay() {
    const CALLS: u64 = 80;
    let seeds: Vec<u64> = match std::env::var("SEQSTORE_SEED") {
        Ok(s) => vec![s.parse().expect("SEQSTORE_SEED is a number")],
        Err(_) => {
            let runs = std::env::var("SEQSTORE_RUNS").map_or(48, |s| s.parse().unwrap());
            (1..=runs).map(|k| 0xca11_0000 + k).collect()
        }
    };
    eprintln!(
        "seeds {:#x}..={:#x}, {CALLS} calls each",
        seeds[0],
        seeds[seeds.len() - 1]
    );
    for seed in seeds {
        if let Some(why) = disagreement(seed, CALLS) {
            let shortest = (1..=CALLS)
                .find(|&n| disagreement(seed, n).is_some())
                .unwrap_or(CALLS);
            panic!(
                "seed {seed} (SEQSTORE_SEED={seed}): {why}; shortest failing prefix: \
                 `wasi-subjects ops {seed} {shortest}`: {}",
                disagreement(seed, shortest).unwrap_or_default()
            );
        }
    }
}
