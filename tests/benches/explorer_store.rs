//! The crash explorer on small store workloads: crash images checked per second (each image:
//! recover the store, check every invariant, append once). Goal: >= 20,000/s on 2 cores.
//!
//! `cargo bench -p seqstore-crash-matrix --bench explorer_store`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use seqstore_crash_matrix::{matrix_cells, run_cell, Native};
use seqstore_fault_fs::Model;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("explorer_store");
    for name in ["seed", "purge-deletes-blocks", "truncate"] {
        for model in Model::ALL {
            let cell = matrix_cells(Some(name), Some(model), 0x5eed)
                .into_iter()
                .find(|c| c.policy == "never")
                .expect("cell");
            let images = run_cell(&Native, &cell, None).report.images as u64;
            g.throughput(Throughput::Elements(images));
            g.bench_function(format!("{name}/never/{model}"), |b| {
                b.iter(|| run_cell(&Native, &cell, None).report.violation_count)
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
