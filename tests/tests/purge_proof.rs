//! The headline: the purge keeps the sequence at every crash point, and each fsync is shown
//! necessary by removing it (the expected ablation table: `Expected::of`).

use crate::seed;
use seqstore_crash_matrix::*;

#[test]
fn seed_scenario_ablation_table() {
    table(&Native);
}

#[cfg(feature = "guest")]
#[test]
fn seed_scenario_ablation_table_in_the_wasm_guest() {
    // the same store, compiled to wasm32-wasip2, fault-fs served by the host: same table
    table(&Guest);
}

fn table(backend: &dyn Backend) {
    let seed = seed();
    for spec in demo_cells(seed) {
        let r = run_cell(backend, &spec, None);
        let tag = format!(
            "{} {} {} (seed {seed}; replay with SEQSTORE_SEED={seed})",
            backend.name(),
            spec.ablation,
            spec.model
        );
        assert!(
            r.report.workload_error.is_none(),
            "{tag}: {:?}",
            r.report.workload_error
        );
        // every operation boundary of the purge is a crash point, each with at least one image
        assert!(
            r.report.crash_points > 20,
            "{tag}: too few crash points\n{}",
            r.report
        );
        assert!(
            r.report.images >= r.report.crash_points,
            "{tag}: {}",
            r.report
        );
        let want = Expected::of(spec.ablation, spec.model);
        assert!(
            want.met_by(&r.report),
            "{tag}: expected {want:?}\n{}",
            r.report
        );
        if want == Expected::ZeroZero {
            let ex = r.example.as_ref().expect("an example of the violation");
            assert_eq!(ex.expected_last, SEED_K, "{tag}");
            // natively the call site is the store's line; across the WIT boundary it is the
            // host's forwarding line (a caller location does not cross a component call)
            assert!(
                backend.name() == "guest"
                    || ex.call_site.starts_with("store-core/src/store/purge.rs:"),
                "{tag}: {ex:?}"
            );
            assert!(
                ex.op.starts_with("write_all_at purge.new/"),
                "{tag}: {ex:?}"
            );
        }
        println!("{r}");
        if let Some(e) = &r.example {
            println!("    example: {e:?}");
        }
    }
}
