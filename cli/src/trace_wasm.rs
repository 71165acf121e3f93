//! `seqstore trace --wasm PROGRAM.wasm`: crash-check a WASI program whose filesystem is an
//! in-memory fault-fs tree served by the host (the library is `seqstore-wasi-trace`). The run
//! is deterministic for its seed, so a crash image is replayed by running the program again
//! (`--crash-point K --image N --out DIR`), not from a saved trace.

use crate::trace::{check_json, print_check, progress_bar, progress_fn, write_image, TraceArgs};
use anyhow::{bail, Result};
use seqstore_fault_fs::{FaultFs, Model};
use seqstore_trace::check::{Checker, CommandChecker};
use seqstore_trace::session::{self, CheckConfig};
use seqstore_wasi_trace::{Program, Recorder, RunConfig, RunOutput, WasmChecker};
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

pub(crate) fn run(wasm: &Path, a: &TraceArgs, model: Model) -> Result<ExitCode> {
    let program = Program::load(wasm)?;
    let start = match &a.dir {
        Some(d) => session::start_from_dir(model, d)?,
        None => FaultFs::new(model),
    };
    let rec = Recorder::new(start);
    let mut rc = RunConfig::with_args(&a.workload);
    rc.seed = a.seed;
    rc.guest_dir = a.guest_dir.clone();
    let t = Instant::now();
    let out = rec.run(&program, &rc)?;
    let run_time = t.elapsed();
    echo(&out);
    let cap = rec.capture();
    let mut cfg = CheckConfig::new(model);
    cfg.seed = a.seed;
    cfg.jobs = a.jobs.max(1);
    cfg.stop_at_first = a.first;
    if let (Some(k), Some(n)) = (a.crash_point, a.image) {
        let Some(dir) = &a.out else {
            bail!("--crash-point and --image need --out DIR");
        };
        return replay(&rec, &cap, &cfg, (k, n), dir);
    }
    let checker: Box<dyn Checker> = match (&a.check_wasm, &a.check) {
        (Some(c), None) => {
            let mut crc = RunConfig::with_args(&a.check_args);
            crc.seed = a.seed;
            crc.guest_dir = a.guest_dir.clone();
            Box::new(WasmChecker::new(Program::load(c)?, crc))
        }
        (None, Some(c)) => Box::new(CommandChecker::new(c)),
        _ => bail!(
            "seqstore trace --wasm needs one checker: --check-wasm CHECKER.wasm or --check CMD"
        ),
    };
    let pb = progress_bar();
    cfg.progress = Some(progress_fn(&pb));
    let report = session::check_capture(rec.start(), &cap, checker.as_ref(), &cfg)?;
    pb.finish_and_clear();
    let replay = report
        .first
        .as_ref()
        .map(|f| replay_command(a, wasm, f.crash_point, f.image));
    if a.json {
        let mut v = check_json(&report, replay.as_deref());
        v["program_exit"] = json!(out.code);
        v["program_run_s"] = json!(run_time.as_secs_f64());
        v["wasi_calls_recorded"] = json!(cap.ops.len());
        println!("{v}");
    } else {
        println!(
            "{}: exit {} after {:.1} ms; {} filesystem calls and marks recorded",
            wasm.display(),
            out.code,
            run_time.as_secs_f64() * 1e3,
            cap.ops.len()
        );
        print_check(&report, replay.as_deref());
    }
    Ok(if report.violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The program's own output goes to stderr, so that the report (and --json) is stdout's.
fn echo(out: &RunOutput) {
    for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        for line in String::from_utf8_lossy(bytes).lines() {
            eprintln!("[program {name}] {line}");
        }
    }
    if out.code != 0 {
        eprintln!("seqstore trace: note: the program exited with {}", out.code);
    }
}

fn replay_command(a: &TraceArgs, wasm: &Path, k: usize, n: usize) -> String {
    let dir = a
        .dir
        .as_ref()
        .map(|d| format!(" --dir {}", d.display()))
        .unwrap_or_default();
    format!(
        "seqstore trace --wasm {}{dir} --guest-dir {} --model {} --seed {:#x} --crash-point {k} --image {n} --out IMAGE_DIR -- {}",
        wasm.display(),
        a.guest_dir,
        a.model,
        a.seed,
        a.workload.join(" ")
    )
}

fn replay(
    rec: &Recorder,
    cap: &seqstore_trace::ops::Capture,
    cfg: &CheckConfig,
    (k, n): (usize, usize),
    out: &Path,
) -> Result<ExitCode> {
    let img = session::replay_capture_image(rec.start(), cap, cfg, k, n)?;
    write_image(&img, (k, n), out)
}
