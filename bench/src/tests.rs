//! A tiny run: every table runs and every key the report documents is in the JSON. No timing is
//! asserted (the numbers of a tiny run mean nothing). Then the parts that can be tested
//! alone: the goals line, VmHWM parsing, the nats-server config, and the NATS rows against a
//! real nats-server (`$NATS_SERVER_BIN` or the PATH; skipped without one, except under
//! CI=true, where .ci/run installs it and a missing one is a failure).

use crate::report::{fmt_num, goals_line, Goal};
use crate::{run, BenchOpts, ChildCmd};

/// Memory children re-execute this test binary on [`memory_child_entry`] only.
fn test_child() -> Option<ChildCmd> {
    Some(ChildCmd {
        exe: std::env::current_exe().expect("current_exe"),
        args: [
            "tests::memory_child_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ]
        .map(String::from)
        .to_vec(),
    })
}

/// The memory child when this binary runs as one (`CHILD_ENV` set by the parent test); a
/// no-op in a normal test run.
#[test]
fn memory_child_entry() {
    if let Some(r) = crate::mem::child_run() {
        r.expect("memory child");
    }
}

/// The real nats-server, installed when missing; `None` after the line that skips `test` (a
/// failure under CI=true).
fn need_nats(test: &str) -> Option<std::path::PathBuf> {
    seqstore_test_setup::nats(test).map(|n| n.server)
}

#[test]
fn tiny_run_produces_every_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nats_server = need_nats("tiny_run_produces_every_key's NATS rows");
    let have_nats = nats_server.is_some();
    let opts = BenchOpts {
        dir: Some(dir.path().to_path_buf()),
        mem_child: test_child(),
        nats_server,
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
                "seqstore_encrypted",
                "seqstore_xchacha",
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
            &["seqstore", "read_crc32", "guest", "guest_wasi"],
        ),
        ("recover_index_ms", &["msgs_1k", "msgs_1m"]),
        ("purge_ms", &["msgs_1k", "msgs_1m"]),
        (
            "get_random_msgs_per_s",
            &["seqstore", "seqstore_cache_64mib", "seqstore_no_cache"],
        ),
        (
            "nats_publish_msgs_per_s",
            &["always_1", "always_64", "default_64"],
        ),
        ("consumer_acks_always_per_s", &["acks_1", "acks_64"]),
        ("reads15_us", crate::reads::READ_CELLS),
        ("get_batch_msgs_per_s", &["seqstore", "guest"]),
        (
            "memory_peak_rss_mib",
            &[
                "small",
                "large",
                "small_reopen",
                "large_reopen",
                "small_entry_bytes_per_msg",
                "large_entry_bytes_per_msg",
                "small_msgs",
                "large_msgs",
            ],
        ),
    ];
    for (table, cells) in keys {
        let t = j.get(*table).unwrap_or_else(|| panic!("missing {table}"));
        for c in *cells {
            let v = t.get(*c).unwrap_or_else(|| panic!("missing {table}.{c}"));
            if c.starts_with("guest") && !cfg!(feature = "guest") {
                assert!(v.is_null(), "{table}.guest is measured? {v}");
            } else if table.starts_with("nats") && !have_nats {
                assert!(v.is_null(), "{table}.{c} without nats-server: {v}");
            } else {
                assert!(v.is_number(), "{table}.{c} = {v}");
            }
        }
    }
    assert_eq!(j["memory_peak_rss_mib"]["large_msgs"], 4 * opts.mem_msgs);
    assert_eq!(
        j["nats_publish_msgs_per_s"]["version"].is_string(),
        have_nats
    );
    let ratios = j["ratios"].as_object().expect("ratios");
    assert_eq!(ratios.len(), 21);
    for (name, r) in ratios {
        if (name.starts_with("guest_") && !cfg!(feature = "guest"))
            || (name.contains("nats") && !have_nats)
        {
            assert!(r["value"].is_null(), "ratio {name} not measured here: {r}");
            continue;
        }
        assert!(r["value"].is_number(), "ratio {name}: {r}");
        assert!(r["pass"].is_boolean(), "ratio {name}: {r}");
    }
    assert_eq!(
        j["meta"]["todo"].as_array().expect("todo").is_empty(),
        cfg!(feature = "guest")
    );
    // every goal is in exactly one list of "goals", and the table ends with the goals line
    let g = &j["goals"];
    let listed: usize = ["passed", "failed", "not_measured"]
        .iter()
        .map(|k| g[*k].as_array().expect("goal list").len())
        .sum();
    assert_eq!(listed, ratios.len());
    assert_eq!(g["line"].as_str(), Some(report.goals_line().as_str()));
    // the table names every cell and every goal
    let table = report.table();
    for name in ratios.keys() {
        assert!(table.contains(name.as_str()), "table lacks {name}");
    }
    assert_eq!(table.lines().last(), Some(report.goals_line().as_str()));
    assert!(table.contains("seqstore_64, embedded"), "{table}");
    if !have_nats {
        assert!(table.contains("nats_publish_msgs_per_s skipped"), "{table}");
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

fn goal(name: &'static str, value: Option<f64>, op: &'static str, target: f64) -> Goal {
    Goal {
        name,
        what: "",
        value,
        op,
        target,
        paired: None,
    }
}

#[test]
fn goals_line_lists_each_failed_goal() {
    let goals = [
        goal("a_pass", Some(2.0), ">=", 1.0),
        goal("nosync_vs_okaywal", Some(0.7712), ">=", 1.5),
        goal("memory_large_vs_small", Some(2.5), "<=", 1.3),
        goal("b_pass", Some(0.4), "<=", 0.5),
        goal("not_run", None, ">=", 1.0),
        goal("get_random_per_s", Some(938_123.4), ">=", 1e6),
    ];
    assert_eq!(
        goals_line(&goals),
        "goals: 2 passed, 3 failed, 1 not measured (nosync_vs_okaywal 0.771<1.5, \
         memory_large_vs_small 2.5>1.3, get_random_per_s 938123<1000000)"
    );
    assert_eq!(
        goals_line(&goals[..1]),
        "goals: 1 passed, 0 failed, 0 not measured"
    );
    assert_eq!(fmt_num(20.0), "20");
    assert_eq!(fmt_num(0.5), "0.5");
}

#[test]
fn fsync_probe_states() {
    use crate::fsync_probe_state as st;
    assert_eq!(st(Some(74.0), Some(69.0)), "fast");
    assert_eq!(st(Some(4000.0), Some(3990.0)), "timer_tick");
    assert_eq!(st(Some(74.0), Some(4000.0)), "changed");
    assert_eq!(st(Some(1500.0), Some(1600.0)), "slow");
    assert_eq!(st(None, Some(1.0)), "unknown");
}

#[test]
fn parses_vmhwm() {
    let status = "Name:\tseqstore\nVmPeak:\t  300000 kB\nVmHWM:\t   58432 kB\nVmRSS:\t 1 kB\n";
    assert_eq!(crate::mem::parse_vmhwm_kib(status), Some(58432));
    assert_eq!(crate::mem::parse_vmhwm_kib("VmRSS:\t 1 kB\n"), None);
    assert_eq!(crate::mem::parse_vmhwm_kib("VmHWM:\t x kB\n"), None);
    assert_eq!(crate::mem::parse_vmhwm_kib("VmHWM:\t 12 MB\n"), None);
}

#[test]
fn parses_a_memory_childs_result() {
    use crate::mem::{parse_result, Peaks};
    let out = "\nrunning 1 test\ntest tests::memory_child_entry ... \
               seqstore-bench-memory-child: vmhwm_kib=9772 reopen_kib=8000 entry_bytes=4.625\nok\n";
    assert_eq!(
        parse_result(out),
        Some(Peaks {
            all: 9772,
            reopen: 8000,
            entry_bytes: 4.625,
        })
    );
    assert_eq!(
        parse_result("seqstore-bench-memory-child: vmhwm_kib=9772\n"),
        None
    );
    assert_eq!(parse_result("nothing\n"), None);
}

#[test]
fn nats_config_and_version() {
    use crate::nats::{config_text, parse_version};
    let always = config_text(4711, true);
    assert!(always.contains("listen: \"127.0.0.1:4711\""), "{always}");
    assert!(always.contains("jetstream {"), "{always}");
    assert!(always.contains("sync_interval: always"), "{always}");
    let default = config_text(4711, false);
    assert!(default.contains("jetstream {"), "{default}");
    assert!(!default.contains("sync_interval"), "{default}");
    assert_eq!(
        parse_version("nats-server: v2.15.1\n").as_deref(),
        Some("2.15.1")
    );
    assert_eq!(parse_version("nats-server: version unknown"), None);
}

/// The NATS rows in a tiny configuration against the real server, and the server gone after.
#[test]
fn nats_rows_against_a_real_server() {
    let Some(bin) = need_nats("nats_rows_against_a_real_server") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = BenchOpts {
        dir: Some(dir.path().to_path_buf()),
        only: vec!["nats_publish".into()],
        nats_server: Some(bin.clone()),
        ..BenchOpts::tiny()
    };
    let report = run(&opts, &|_| {}).expect("run");
    let j = report.to_json();
    let t = &j["nats_publish_msgs_per_s"];
    for c in ["always_1", "always_64", "default_64"] {
        assert!(t[c].as_f64().is_some_and(|v| v > 0.0), "{c}: {t}");
    }
    assert!(
        t["version"].as_str().is_some_and(|v| v.starts_with('2')),
        "{t}"
    );
    assert!(report
        .table()
        .contains("always_64, server through client (loopback)"));
    // the server's tempdirs are gone with the servers
    assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 0);

    // a server is killed and reaped when its guard drops
    let sd = tempfile::tempdir_in(dir.path()).expect("tempdir");
    let s = crate::nats::start(&bin, sd, true).expect("start");
    let pid = s.pid();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    drop(s);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

/// `--nats-server` naming a missing file is an error, not a skip.
#[test]
fn missing_explicit_nats_server_is_an_error() {
    let opts = BenchOpts {
        only: vec!["nats_publish".into()],
        nats_server: Some("/nonexistent/nats-server".into()),
        ..BenchOpts::tiny()
    };
    let err = run(&opts, &|_| {}).expect_err("missing server");
    assert!(err.to_string().contains("not a file"), "{err}");
}

/// The default and the quick plans run (a plan over the budget is refused at the start).
#[test]
fn default_and_quick_plans_fit_the_byte_budget() {
    for o in [BenchOpts::default(), BenchOpts::quick()] {
        let est = o.estimated_write_bytes();
        eprintln!("quick={}: about {} MiB", o.quick, est >> 20);
        assert!(
            est <= o.max_write_bytes,
            "quick={}: {} MiB",
            o.quick,
            est >> 20
        );
    }
}

/// The Markdown page of a small hand-made report: the generated-file line, the machine, the
/// probe, a goal of each outcome, a table (with the fsync-bound line and a per-message row),
/// the notes and the goals line.
#[test]
fn markdown_renders_a_small_report() {
    use crate::report::{BenchReport, Table, Unit};
    use crate::Machine;
    let mut always = Table::new(
        "append_always_msgs_per_s",
        "append, sync always (msgs/s)",
        Unit::PerSec,
        &["seqstore_1", "seqstore_64"],
    )
    .fsync_bound()
    .label("seqstore", "embedded");
    for v in [7000.0, 8000.0, 9000.0] {
        always.push("seqstore_1", v);
    }
    always.push("seqstore_64", 150_000.0);
    let mut memory = Table::new(
        "memory_peak_rss_mib",
        "peak RSS (MiB)",
        Unit::MiB,
        &["small", "large_bytes_per_msg"],
    );
    memory.push("small", 41.3);
    memory.push("large_bytes_per_msg", 5.5);
    let report = BenchReport {
        opts: BenchOpts::quick(),
        fsync_probe_us: (Some(130.0), Some(150.0)),
        tables: vec![always, memory],
        goals: vec![
            goal("group64_vs_1", Some(18.75), ">=", 10.0),
            goal("rebuild_s_per_gib", Some(0.5), "<=", 0.4),
            goal("vs_nats_always64", None, ">=", 20.0),
        ],
        notes: vec!["a note | with a bar".into()],
        todo: vec![],
        elapsed_s: 61.4,
        bytes_written: 300 << 20,
        disk_bytes: None,
        loadavg: (Some(1.5), None),
    };
    let machine = Machine {
        cores: 2,
        cpu_model: "Example CPU @ 2.00GHz".into(),
        kernel: "6.1.0-test".into(),
        commit: "abc1234".into(),
        date_utc: "2026-12-03 17:05 UTC".into(),
    };
    let cmd = "cargo run --release -p seqstore-bench -- --quick --markdown docs/BENCHMARKS.md";
    let md = report.markdown(&machine, cmd);
    for want in [
        "# seqstore benchmarks\n",
        "must not be edited by hand",
        cmd,
        "| date | 2026-12-03 17:05 UTC |",
        "| commit | `abc1234` |",
        "| machine | 2 cores, Example CPU @ 2.00GHz, Linux 6.1.0-test |",
        "| run | `--quick`, 3 rounds, 128 B payloads, 16 B subjects, 61 s, 300 MiB written |",
        "| fsync probe | fsync probe fast: start 130 µs, end 150 µs |",
        "| load average (1 min) | 1.50 at the start, - at the end |",
        "`goals: 1 passed, 1 failed, 1 not measured (rebuild_s_per_gib 0.5>0.4)`",
        "| `group64_vs_1` |  | 18.750 | ≥ 10.000 | pass |  |",
        "| `rebuild_s_per_gib` |  | 0.500 | ≤ 0.400 | **miss** |  |",
        "| `vs_nats_always64` |  | - | ≥ 20.000 | not run |  |",
        "### append, sync always (msgs/s) (`append_always_msgs_per_s`)",
        "| `seqstore_1` (embedded) | 8.0 k/s | 7.0 k/s | 9.0 k/s | 3 |",
        "| `seqstore_64` (embedded) | 150.0 k/s | 150.0 k/s | 150.0 k/s | 1 |",
        "Bound by fsync latency (fsync probe fast: start 130 µs, end 150 µs).",
        "| `small` | 41.3 MiB |",
        "| `large_bytes_per_msg` | 5.50 B/msg |",
        "- a note | with a bar",
    ] {
        assert!(md.contains(want), "missing {want:?} in:\n{md}");
    }
    assert!(
        !md.contains("## Not measured"),
        "no TODO section without TODOs"
    );
}

#[test]
fn markdown_machine_parts() {
    use crate::markdown::{cpu_model, utc_minute};
    assert_eq!(utc_minute(0), "1970-01-01 00:00 UTC");
    assert_eq!(utc_minute(951_782_400 + 3600 + 120), "2000-02-29 01:02 UTC");
    assert_eq!(utc_minute(1_796_307_900), "2026-12-03 14:25 UTC");
    let info = "processor\t: 0\nvendor_id\t: X\nmodel name\t: Example CPU @ 2.00GHz\n\nprocessor\t: 1\nmodel name\t: Example CPU @ 2.00GHz\n";
    assert_eq!(cpu_model(info).as_deref(), Some("Example CPU @ 2.00GHz"));
    assert_eq!(cpu_model("processor\t: 0\n"), None);
    let m = crate::Machine::detect();
    assert!(!m.commit.is_empty() && m.date_utc.ends_with(" UTC"));
}

/// The `--scale` child when this binary runs as one (`SCALE_CHILD_ENV` set by
/// [`scale_tiny_run`]); a no-op in a normal test run.
#[test]
fn scale_child_entry() {
    if let Some(r) = crate::scale::child_run() {
        r.expect("scale child");
    }
}

/// `--scale` at two tiny sizes, each in a child (this test binary on [`scale_child_entry`]):
/// every size's row and every goal in the JSON and the page, the store directories deleted.
/// No timing is asserted.
#[test]
fn scale_tiny_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = crate::ScaleOpts {
        sizes: vec![2000, 8000],
        dir: Some(dir.path().to_path_buf()),
        gets: 2000,
        calls: 100,
        child: Some(ChildCmd {
            args: ["tests::scale_child_entry", "--exact", "--nocapture"]
                .map(String::from)
                .to_vec(),
            ..test_child().expect("child")
        }),
    };
    let r = crate::run_scale(&opts, &|_| {}).expect("scale run");
    let j = r.to_json();
    for n in ["2000", "8000"] {
        let row = &j["scale"][n];
        for k in [
            "rss_peak_mib",
            "index_open_ms",
            "crash_open_ms",
            "gets_per_s",
            "purge_ms",
        ] {
            assert!(row[k].as_f64().is_some_and(|v| v > 0.0), "{n}.{k}: {row}");
        }
        assert!(row["rebuild_vs_read_limit"].is_number(), "{row}");
    }
    for g in &r.goals {
        assert!(g.value.is_some(), "goal {} not measured", g.name);
        let v = &j["ratios"][g.name];
        assert!(v["value"].is_number() && v["target"].is_number(), "{v}");
    }
    let md = r.markdown(&crate::Machine::detect(), "cmd");
    assert!(md.contains("| | 2k | 8k | 8k / 2k |"), "{md}");
    assert!(md.contains("| `scale_rss_big_vs_small` |"), "{md}");
    assert!(r.table().ends_with(&format!("{}\n", r.goals_line())));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "store directories left: {left:?}");
}

#[test]
fn scale_refuses_without_room() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = crate::ScaleOpts {
        // ~180 EB: more than any disk
        sizes: vec![1 << 60],
        dir: Some(dir.path().to_path_buf()),
        ..crate::ScaleOpts::default()
    };
    let e = crate::run_scale(&opts, &|_| {})
        .expect_err("no room")
        .to_string();
    assert!(e.contains("free") && e.contains("--scale-dir"), "{e}");
}
