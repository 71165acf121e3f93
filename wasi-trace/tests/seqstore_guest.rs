//! seqstore's own WASI command (`seqstore-guest`, which uses WASI's filesystem only) as the
//! subject: eight appends under sync `always`, then a purge, each a run of the command on the
//! same tree; every acknowledged sequence is a promise. The checker is a WASI program that
//! opens the store on each crash image: its last sequence must never be below one that was
//! acknowledged (the NATS purge bug's invariant).
//!
//! The control that the capture is right: the same capture with its directory fsyncs taken
//! out must fail under `posix` (new files' names are lost) and stay clean under `ordered`;
//! with every fsync taken out it must fail under both.

mod common;

use common::program;
use seqstore_fault_fs::{FaultFs, Model};
use seqstore_trace::ops::{Capture, Op};
use seqstore_trace::session::{check_capture, CheckConfig, TraceReport};
use seqstore_wasi_trace::{Program, Recorder, RunConfig, WasmChecker};

fn guest() -> Program {
    Program::new(seqstore_wasm::guest_command_wasm()).expect("seqstore-guest compiles")
}

/// The session's capture (and its start tree) for `model`.
fn session(model: Model) -> (Recorder, Capture) {
    let guest = guest();
    let rec = Recorder::new(FaultFs::new(model));
    let run = |args: &[&str]| {
        let out = rec.run(&guest, &RunConfig::with_args(args)).unwrap();
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
