//! The purpose-built subjects, captured through the served `wasi:filesystem` and checked by
//! their WASI checkers in-process: the verdicts each program's fsyncs call for, under both
//! crash models. And the tool's own proof: what a run left equals what its capture replays.

use crate::common;

use crate::common::{program, tree};
use seqstore_fault_fs::{FaultFs, Journal, Model};
use seqstore_trace::capture::capture_strace;
use seqstore_trace::check::CommandChecker;
use seqstore_trace::replay::Replayer;
use seqstore_trace::session::{check_capture, start_from_dir, CheckConfig, TraceReport};
use seqstore_wasi_trace::{Recorder, RunConfig, WasmChecker};

/// Captures `args` on an empty tree and checks it under `model` with `checker`.
fn check(args: &[&str], checker: &str, model: Model) -> TraceReport {
    let rec = Recorder::new(FaultFs::new(model));
    let out = rec.run(program(), &RunConfig::with_args(args)).unwrap();
    assert_eq!(
        out.code,
        0,
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chk = WasmChecker::new(program().clone(), RunConfig::with_args(&[checker]));
    let cfg = CheckConfig::new(model);
    let r = check_capture(rec.start(), &rec.capture(), &chk, &cfg).unwrap();
    common::print_report(&format!("{args:?}"), &r);
    r
}

/// (program, checker, clean under posix, clean under ordered)
const CASES: &[(&[&str], &str, bool, bool)] = &[
    (&["replace", "good", "3"], "check-replace", true, true),
    // the rename is lost with its directory entry under posix; ordered keeps names
    (
        &["replace", "no-dir-sync", "3"],
        "check-replace",
        false,
        true,
    ),
    // the renamed file's data was never synced: empty or torn after the crash
    (&["replace", "no-sync", "3"], "check-replace", false, false),
    (&["log", "sync", "4"], "check-log", true, true),
    (&["log", "no-sync", "4"], "check-log", false, false),
];

#[test]
fn atomic_replace_and_append_log_get_the_verdicts_their_fsyncs_call_for() {
    for &(args, checker, posix, ordered) in CASES {
        for (model, clean) in [(Model::Posix, posix), (Model::Ordered, ordered)] {
            let r = check(args, checker, model);
            assert!(
                r.crash_points > 0 && r.checker_runs > 0,
                "{args:?}: nothing checked"
            );
            assert_eq!(
                r.violations == 0,
                clean,
                "{args:?} under {model}: {} violations, expected {}",
                r.violations,
                if clean { "none" } else { "some" }
            );
        }
    }
}

#[test]
fn the_capture_replays_to_the_tree_the_run_left_at_every_prefix() {
    for args in [
        &["replace", "good", "3"][..],
        &["replace", "no-sync", "2"][..],
        &["log", "sync", "5"][..],
    ] {
        let rec = Recorder::new(FaultFs::new(Model::Posix));
        let out = rec.run(program(), &RunConfig::with_args(args)).unwrap();
        assert_eq!(out.code, 0);
        let cap = rec.capture();
        assert!(cap.ops.len() > 3, "{args:?}: {} ops", cap.ops.len());
        // every prefix replays; the whole capture rebuilds the live tree exactly
        let fs = rec.start().fork();
        let mut replayer = Replayer::new();
        let mut journal = Journal::new();
        for (i, op) in cap.ops.iter().enumerate() {
            replayer
                .step(&fs, i, op, &mut journal)
                .unwrap_or_else(|e| panic!("{args:?}: op {i} ({op}) does not replay: {e}"));
        }
        assert_eq!(
            tree(&fs),
            tree(&rec.live()),
            "{args:?}: replay differs from the run"
        );
        assert!(!journal.events().is_empty(), "{args:?}: no marks recorded");
    }
}

/// The same programs built natively, captured by strace and checked by their native
/// checker, one process per image: the verdicts must be the WASI route's.
#[test]
fn the_strace_route_on_native_builds_gives_the_same_verdicts() {
    if seqstore_test_setup::strace("the_strace_route_on_native_builds_gives_the_same_verdicts")
        .is_none()
    {
        return;
    }
    let bin = common::subjects_native();
    for &(args, checker, posix, ordered) in CASES {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        let mut argv = vec![
            "env".to_string(),
            format!("SUBJECT_DIR={}", dir.display()),
            bin.display().to_string(),
        ];
        argv.extend(args.iter().map(|a| a.to_string()));
        let traced = capture_strace(&dir, &t.path().join("work"), &argv).unwrap();
        assert!(traced.status.unwrap().success(), "{args:?} failed natively");
        let chk = CommandChecker::new(format!("{} {checker}", bin.display()));
        for (model, clean) in [(Model::Posix, posix), (Model::Ordered, ordered)] {
            let start = start_from_dir(model, &traced.snapshot).unwrap();
            let mut cfg = CheckConfig::new(model);
            cfg.stop_at_first = !clean;
            let r = check_capture(&start, &traced.capture, &chk, &cfg).unwrap();
            eprintln!(
                "native {args:?} {model}: {} ops, {} crash points, {} checks, {} violations, {:.1} checks/s",
                r.ops, r.crash_points, r.checker_runs, r.violations, r.checks_per_s()
            );
            assert_eq!(r.violations == 0, clean, "native {args:?} under {model}");
        }
    }
}

/// redb (crates.io, built for wasm32-wasip2), one write transaction per row with its default
/// immediate durability. What the check finds, by phase:
/// - before the first commit returned (nothing promised), under both models: a crash inside
///   `Database::create` leaves a file redb refuses ("not a redb database"); a program must
///   delete it and create the database again;
/// - after commits, under `posix` only: the whole file is missing, with every promised row.
///   redb syncs its data but never the directory, so the file's name is not durable.
#[test]
fn redb_keeps_its_commits_under_ordered_and_loses_its_file_under_posix() {
    for model in [Model::Posix, Model::Ordered] {
        let r = check(&["redb", "3"], "check-redb", model);
        assert!(
            r.violations > 0,
            "redb under {model}: the creation crash is not found"
        );
        for g in &r.by_last_mark {
            eprintln!(
                "  redb {model}: after {:?}: {} images: {}",
                g.last_mark, g.violating, g.example
            );
            match &g.last_mark {
                None => assert!(g.example.contains("does not open"), "{g:?}"),
                Some(m) => {
                    assert_eq!(
                        model,
                        Model::Posix,
                        "a promised row lost under ordered: {g:?}"
                    );
                    assert!(
                        m.starts_with("row ") && g.example.contains("db.redb is missing"),
                        "{g:?}"
                    );
                }
            }
        }
        let after_commit = r.by_last_mark.iter().any(|g| g.last_mark.is_some());
        assert_eq!(after_commit, model == Model::Posix, "redb under {model}");
    }
}
