//! A tiny run: every table runs and every key of the issue is in the JSON. No timing is
//! asserted (the numbers of a tiny run mean nothing).

use crate::{run, BenchOpts};

#[test]
fn tiny_run_produces_every_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = BenchOpts {
        dir: Some(dir.path().to_path_buf()),
        ..BenchOpts::tiny()
    };
    let lines = std::cell::RefCell::new(Vec::<String>::new());
    let report = run(&opts, &|s| lines.borrow_mut().push(s.to_string())).expect("run");
    let j = report.to_json();
    let keys: &[(&str, &[&str])] = &[
        ("fsync_probe_us", &["start", "end"]),
        (
            "append_nosync_msgs_per_s",
            &[
                "seqstore",
                "baseline",
                "okaywal",
                "fjall",
                "guest",
                "guest_wasi",
            ],
        ),
        (
            "append_every1000_msgs_per_s",
            &["seqstore", "baseline", "okaywal", "fjall"],
        ),
        (
            "append_always_msgs_per_s",
            &[
                "seqstore_1",
                "seqstore_16",
                "seqstore_64",
                "baseline_1",
                "fdatasync_probe_per_s",
            ],
        ),
        (
            "recover_rebuild_s_per_gib",
            &["seqstore", "guest", "guest_wasi"],
        ),
        ("recover_index_ms", &["msgs_1k", "msgs_1m"]),
        ("purge_ms", &["msgs_1k", "msgs_1m"]),
        (
            "get_random_msgs_per_s",
            &["seqstore", "seqstore_cache_64mib", "seqstore_no_cache"],
        ),
    ];
    for (table, cells) in keys {
        let t = j.get(*table).unwrap_or_else(|| panic!("missing {table}"));
        for c in *cells {
            let v = t.get(*c).unwrap_or_else(|| panic!("missing {table}.{c}"));
            if c.starts_with("guest") && !cfg!(feature = "guest") {
                assert!(v.is_null(), "{table}.guest is measured? {v}");
            } else {
                assert!(v.is_number(), "{table}.{c} = {v}");
            }
        }
    }
    let ratios = j["ratios"].as_object().expect("ratios");
    assert_eq!(ratios.len(), 12);
    for (name, r) in ratios {
        if name.starts_with("guest_") && !cfg!(feature = "guest") {
            assert!(r["value"].is_null(), "ratio {name} without the guest: {r}");
            continue;
        }
        assert!(r["value"].is_number(), "ratio {name}: {r}");
        assert!(r["pass"].is_boolean(), "ratio {name}: {r}");
    }
    assert_eq!(
        j["meta"]["todo"].as_array().expect("todo").is_empty(),
        cfg!(feature = "guest")
    );
    // the table names every cell and every goal
    let table = report.table();
    for name in ratios.keys() {
        assert!(table.contains(name.as_str()), "table lacks {name}");
    }
    // progress: one line per step, the last step numbered as the total
    let lines = lines.into_inner();
    assert!(lines.iter().any(|l| l.contains("fsync probe (end)")));
    // every tempdir was removed
    assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 0);
    assert!(report.bytes_written > 0);
}

#[test]
fn refuses_a_plan_over_the_write_budget() {
    let opts = BenchOpts {
        big_msgs: 100_000_000,
        ..BenchOpts::tiny()
    };
    let err = run(&opts, &|_| {}).expect_err("over budget");
    assert!(err.to_string().contains("MiB"), "{err}");
}

#[test]
fn only_runs_the_selected_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = BenchOpts {
        dir: Some(dir.path().to_path_buf()),
        only: vec!["append_every".into()],
        ..BenchOpts::tiny()
    };
    let j = run(&opts, &|_| {}).expect("run").to_json();
    assert!(j["append_every1000_msgs_per_s"]["seqstore"].is_number());
    assert!(j["append_nosync_msgs_per_s"]["seqstore"].is_null());
    assert!(j["purge_ms"]["msgs_1m"].is_null());
    assert!(j["ratios"]["purge_1m_vs_1k"]["pass"].is_null());
}
