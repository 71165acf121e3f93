//! What the WASI route costs and saves, as ratios measured in one run:
//! - checked crash images per second: the in-process WASI checker on images served from
//!   memory, against the strace route's checker (the same checker built natively, one process
//!   per image materialized into a temporary directory), on the same capture of the same
//!   subject (seqstore's WASI command: eight appends under sync `always`, a purge);
//! - the capture's overhead: a program's run time under the recording host against the
//!   same component under wasmtime-wasi's own filesystem on a real directory.
//!
//! `cargo bench -p seqstore-wasi-trace --bench checks [-- --rounds N --markdown PATH]` (PATH
//! relative to the workspace root, e.g. `docs/WASI-TRACE-BENCH.md`).
//! Every figure is the median of N rounds (default 5), with min and max beside it.

#[path = "../tests/common/mod.rs"]
mod common;

use seqstore_fault_fs::{FaultFs, Model};
use seqstore_trace::check::{Checker, CommandChecker};
use seqstore_trace::ops::Capture;
use seqstore_trace::session::{check_capture, CheckConfig};
use seqstore_wasi_trace::{run_on_dir, Program, Recorder, RunConfig, WasmChecker};
use std::fmt::Write as _;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

/// seqstore-guest's session, captured (as in the tests).
fn session(guest: &Program) -> (Recorder, Capture) {
    let rec = Recorder::new(FaultFs::new(Model::Posix));
    for i in 0..8 {
        let args = ["append", "--subject", "orders", "--data", &format!("m{i}")];
        let out = rec.run(guest, &RunConfig::with_args(&args)).unwrap();
        assert_eq!(out.code, 0);
        rec.mark(&format!("acked {}", i + 1));
    }
    assert_eq!(
        rec.run(guest, &RunConfig::with_args(&["purge"]))
            .unwrap()
            .code,
        0
    );
    let cap = rec.capture();
    (rec, cap)
}

/// Checks per second of `checker` on the capture (every image, 2 jobs), checker runs per
/// second of the whole `check_capture` (image building and the report included), and the
/// number of checker runs.
fn checks_per_s(rec: &Recorder, cap: &Capture, checker: &dyn Checker) -> (f64, f64, usize) {
    let cfg = CheckConfig::new(Model::Posix);
    let t = Instant::now();
    let r = check_capture(rec.start(), cap, checker, &cfg).unwrap();
    let whole = r.checker_runs as f64 / t.elapsed().as_secs_f64();
    assert_eq!(r.violations, 0);
    (r.checks_per_s(), whole, r.checker_runs)
}

/// Seconds per run of `args`: (recorded on the served tree, on a real directory).
fn run_times(program: &Program, args: &[&str]) -> (f64, f64) {
    let cfg = RunConfig::with_args(args);
    let rec = Recorder::new(FaultFs::new(Model::Posix));
    let t = Instant::now();
    assert_eq!(rec.run(program, &cfg).unwrap().code, 0);
    let served = t.elapsed().as_secs_f64();
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    assert_eq!(run_on_dir(program, dir.path(), &cfg).unwrap().code, 0);
    (served, t.elapsed().as_secs_f64())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let rounds: usize = opt("--rounds").map_or(5, |r| r.parse().expect("--rounds N"));
    let subjects = common::program();
    let guest = Program::new(seqstore_wasm::guest_command_wasm()).unwrap();
    let native = common::subjects_native_full();
    let (rec, cap) = session(&guest);
    let in_proc = WasmChecker::new(subjects.clone(), RunConfig::with_args(&["check-seqstore"]));
    let shell = CommandChecker::new(format!("{} check-seqstore", native.display()));
    let mut rows = String::new();
    let (mut a, mut b, mut ratio, mut whole) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut runs = 0;
    for _ in 0..rounds {
        let (x, xw, n) = checks_per_s(&rec, &cap, &in_proc);
        let (y, yw, _) = checks_per_s(&rec, &cap, &shell);
        runs = n;
        a.push(x);
        b.push(y);
        ratio.push(x / y);
        whole.push(xw / yw);
    }
    let (amin, amed, amax) = median(a);
    let (bmin, bmed, bmax) = median(b);
    let (rmin, rmed, rmax) = median(ratio);
    let (wmin, wmed, wmax) = median(whole);
    writeln!(rows, "| checks/s, in-process WASI checker (images from memory) | {amed:.0} | {amin:.0} – {amax:.0} |").unwrap();
    writeln!(rows, "| checks/s, native checker, a process per materialized image | {bmed:.0} | {bmin:.0} – {bmax:.0} |").unwrap();
    writeln!(rows, "| **ratio in-process / process per image** ({runs} images per round) | **{rmed:.1}×** | {rmin:.1} – {rmax:.1} |").unwrap();
    writeln!(rows, "| ratio of the whole check (image building, checks and report) | {wmed:.1}× | {wmin:.1} – {wmax:.1} |").unwrap();
    let cases: [(&str, &Program, &[&str]); 3] = [
        (
            "wasi-subjects replace good 50",
            subjects,
            &["replace", "good", "50"],
        ),
        (
            "wasi-subjects log sync 500",
            subjects,
            &["log", "sync", "500"],
        ),
        (
            "seqstore-guest append (one run)",
            &guest,
            &["append", "--subject", "s", "--data", "x"],
        ),
    ];
    for (name, program, args) in cases {
        let mut r = Vec::new();
        for _ in 0..rounds {
            let (served, real) = run_times(program, args);
            r.push(served / real);
        }
        let (min, med, max) = median(r);
        writeln!(rows, "| run time recorded on the served tree / on a real directory: {name} | {med:.2}× | {min:.2} – {max:.2} |").unwrap();
    }
    let page = format!(
        "# wasi-trace: measured ratios\n\nGenerated by `cargo bench -p seqstore-wasi-trace --bench checks` ({rounds} rounds; median, then min – max). \
         The checks are of one capture of seqstore's WASI command (8 appends under sync `always`, a purge) under the posix model, 2 checkers at a time. \
         The real directory of the run-time rows is fsync'ed for real: those rows compare the recording host's cost with a disk's.\n\n\
         | what | median | range |\n|---|---|---|\n{rows}"
    );
    print!("{page}");
    if let Some(p) = opt("--markdown") {
        // relative to the workspace root (cargo runs benches in the package's directory)
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(p);
        std::fs::write(&p, &page).expect("writing the markdown");
        eprintln!("written to {}", p.display());
    }
}
