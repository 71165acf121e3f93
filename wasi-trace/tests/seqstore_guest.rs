//! seqstore's own WASI command (`seqstore-guest`, which uses WASI's filesystem only) as the
//! subject: eight appends under sync `always`, then a purge, each a run of the command on the
//! same tree; every acknowledged sequence is a promise. The checker is a WASI program that
//! opens the store on each crash image: its last sequence must never be below one that was
//! acknowledged (the NATS purge bug's invariant).
//!
//! The controls that the capture is right:
//! - the crash lab's own ablations, in the command's test-hooks build (`SEQSTORE_ABLATION`),
//!   give `seqstore demo`'s verdicts: `no-tombstone-sync` loses the sequence under both models,
//!   `no-dir-sync` under `posix` only;
//! - the same capture with its directory fsyncs taken out fails under `posix` (new files'
//!   names are lost) and stays clean under `ordered`; with every fsync taken out it fails
//!   under both.

use crate::common;

use crate::common::program;
use seqstore_fault_fs::{FaultFs, Model};
use seqstore_trace::ops::{Capture, Op};
use seqstore_trace::session::{check_capture, CheckConfig, TraceReport};
use seqstore_wasi_trace::{Program, Recorder, RunConfig, WasmChecker};

fn guest() -> Program {
    Program::new(seqstore_wasm::guest_command_wasm()).expect("seqstore-guest compiles")
}

/// The session's capture (and its start tree) for `model`, run by the shipped command.
fn session(model: Model) -> (Recorder, Capture) {
    session_of(&guest(), model, None)
}

/// The session's capture run by `guest`, with `SEQSTORE_ABLATION=ablation` if given.
fn session_of(guest: &Program, model: Model, ablation: Option<&str>) -> (Recorder, Capture) {
    let rec = Recorder::new(FaultFs::new(model));
    let run = |args: &[&str]| {
        let mut cfg = RunConfig::with_args(args);
        cfg.env
            .extend(ablation.map(|a| ("SEQSTORE_ABLATION".to_string(), a.to_string())));
        let out = rec.run(guest, &cfg).unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(
            out.code,
            0,
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    for i in 0..8 {
        let out = run(&["append", "--subject", "orders", "--data", &format!("m{i}")]);
        let seq = out
            .split(|c: char| !c.is_ascii_digit())
            .find(|s| !s.is_empty())
            .unwrap_or_else(|| panic!("no sequence in {out:?}"));
        rec.mark(&format!("acked {seq}"));
    }
    run(&["purge"]);
    rec.mark("purged");
    let cap = rec.capture();
    (rec, cap)
}

fn check(rec: &Recorder, cap: &Capture, model: Model, what: &str) -> TraceReport {
    let chk = WasmChecker::new(program().clone(), RunConfig::with_args(&["check-seqstore"]));
    let mut cfg = CheckConfig::new(model);
    cfg.stop_at_first = what != "clean";
    let r = check_capture(rec.start(), cap, &chk, &cfg).unwrap();
    common::print_report(&format!("seqstore-guest {what}"), &r);
    r
}

/// `cap` without the fsyncs `drop` selects (by the recorded call's text).
fn without(cap: &Capture, drop: impl Fn(&str) -> bool) -> Capture {
    let mut c = cap.clone();
    let before = c.ops.len();
    c.ops
        .retain(|t| !(matches!(t.op, Op::Fsync { .. }) && drop(&t.text)));
    assert!(c.ops.len() < before, "nothing to take out");
    c
}

#[test]
fn seqstore_guest_keeps_every_acknowledged_sequence_and_the_ablated_captures_do_not() {
    for model in Model::ALL {
        let (rec, cap) = session(model);
        assert!(cap.ops.iter().any(|t| matches!(t.op, Op::Mark(_))));
        let r = check(&rec, &cap, model, "clean");
        assert!(
            r.checker_runs > 20,
            "too few images checked: {}",
            r.checker_runs
        );
        assert_eq!(r.violations, 0, "seqstore-guest under {model}");

        let no_dir = without(&cap, |t| t.starts_with("sync(directory"));
        let r = check(&rec, &no_dir, model, "without directory fsyncs");
        assert_eq!(
            r.violations > 0,
            model == Model::Posix,
            "no directory fsyncs under {model}"
        );

        let none = without(&cap, |_| true);
        let r = check(&rec, &none, model, "without any fsync");
        assert!(r.violations > 0, "no fsyncs at all under {model}: clean");
    }
}

/// The crash lab's ablations inside the command (its test-hooks build): the verdicts of
/// `seqstore demo`'s table, found from the recorded WASI calls alone. `full` in that build is
/// clean, so the build itself is not what fails.
#[test]
fn the_lab_ablations_in_the_command_give_the_demo_verdicts() {
    let hooks = Program::new(seqstore_wasm::guest_command_test_hooks_wasm())
        .expect("seqstore-guest (test hooks) compiles");
    for model in Model::ALL {
        for (ablation, fails) in [
            ("full", false),
            ("no-tombstone-sync", true),
            ("no-dir-sync", model == Model::Posix),
        ] {
            let (rec, cap) = session_of(&hooks, model, Some(ablation));
            let what = if fails { ablation } else { "clean" };
            let r = check(&rec, &cap, model, what);
            assert_eq!(
                r.violations > 0,
                fails,
                "{ablation} under {model}: {} violations",
                r.violations
            );
        }
    }
}

/// An ablation the build does not know is a usage error, not a silent `full`.
#[test]
fn an_unknown_ablation_is_refused() {
    let hooks = Program::new(seqstore_wasm::guest_command_test_hooks_wasm()).unwrap();
    let rec = Recorder::new(FaultFs::new(Model::Posix));
    let mut cfg = RunConfig::with_args(&["state"]);
    cfg.env
        .push(("SEQSTORE_ABLATION".to_string(), "no-such-thing".to_string()));
    let out = rec.run(&hooks, &cfg).unwrap();
    assert_ne!(out.code, 0);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SEQSTORE_ABLATION"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
