//! `seqstore trace`: crash-check any program from its syscall trace (the library is
//! `seqstore-trace`, trace-check/). Its negative control, seqstore's own CLI with an fsync
//! removed (`--ablation`), is in the crash lab's build only (`lab::store_config`).

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use seqstore_fault_fs::Model;
use seqstore_trace::capture::{capture_strace, load_work, Traced};
use seqstore_trace::check::{materialize, CommandChecker};
use seqstore_trace::session::{self, CheckConfig, ProgressFn, TraceReport};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// `seqstore trace --dir DIR --check CMD [--model M] [--jobs N] [--json] -- WORKLOAD...`, or
/// `seqstore trace --replay WORK --crash-point K --image N --out DIR [--model M] [--seed S]`.
#[derive(clap::Args)]
pub(crate) struct TraceArgs {
    /// The directory the workload writes (its contents at the start are taken as durable).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// The checker, run with `sh -c` on every crash image: IMAGE_DIR, MARKS_FILE and
    /// CRASH_POINT in its environment; exit 0 = consistent, else its stdout is the violation.
    #[arg(long)]
    pub(crate) check: Option<String>,
    /// The crash model: posix or ordered.
    #[arg(long, default_value = "posix")]
    pub(crate) model: String,
    /// Checkers run in parallel.
    #[arg(long, default_value_t = 2)]
    pub(crate) jobs: usize,
    /// Print one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    /// Stop at the first violation (crash-point order): it is still blamed and replayable, but
    /// the counts cover only the images checked up to it. For a slow checker when the verdict
    /// is what matters.
    #[arg(long)]
    pub(crate) first: bool,
    /// Seed of the random crash images (decimal or 0x hex).
    #[arg(long, default_value_t = 0x5eed, value_parser = parse_seed)]
    pub(crate) seed: u64,
    /// Where the snapshot, trace and marks are kept (default: a new directory under the
    /// system's temporary directory, kept for --replay).
    #[arg(long)]
    pub(crate) work: Option<PathBuf>,
    /// Replay one image of an earlier run from its work directory instead of checking.
    #[arg(long)]
    pub(crate) replay: Option<PathBuf>,
    /// With --replay: the crash point.
    #[arg(long)]
    pub(crate) crash_point: Option<usize>,
    /// With --replay: the image number.
    #[arg(long)]
    pub(crate) image: Option<usize>,
    /// With --replay: where to write the image (created; must not exist) and its marks
    /// (OUT.marks).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// A WASI command component (wasm32-wasip2) to run and check instead of a traced
    /// process: it gets an in-memory copy of --dir (or an empty tree) as its filesystem,
    /// preopened at --guest-dir, and every filesystem call it makes is recorded. The
    /// arguments after `--` are its arguments. Deterministic: one --seed, one report.
    #[arg(long)]
    pub(crate) wasm: Option<PathBuf>,
    /// With --wasm: where the program finds the tree.
    #[arg(long, default_value = "/data")]
    pub(crate) guest_dir: String,
    /// With --wasm: a WASI checker program (component), run in-process on every crash image
    /// served from memory: IMAGE_DIR (= --guest-dir), MARKS (one per line) and CRASH_POINT in
    /// its environment; exit 0 = consistent, else its stdout is the violation.
    #[arg(long)]
    pub(crate) check_wasm: Option<PathBuf>,
    /// With --check-wasm: an argument for the checker (repeat for more).
    #[arg(long = "check-arg", allow_hyphen_values = true)]
    pub(crate) check_args: Vec<String>,
    /// The workload command (with --wasm: the program's arguments).
    #[arg(last = true)]
    pub(crate) workload: Vec<String>,
}

/// A seed in decimal or `0x` hex (reports print it in hex).
fn parse_seed(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("{s:?}: {e}"))
}

pub(crate) fn run(a: TraceArgs) -> Result<ExitCode> {
    let model: Model = a.model.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(work) = &a.replay {
        return replay(work, &a, model);
    }
    if let Some(wasm) = &a.wasm {
        return crate::trace_wasm::run(wasm, &a, model);
    }
    let (Some(dir), Some(check)) = (&a.dir, &a.check) else {
        bail!("seqstore trace needs --dir DIR --check CMD -- WORKLOAD... (or --replay WORK)");
    };
    let work = match &a.work {
        Some(w) => w.clone(),
        None => tempfile::Builder::new()
            .prefix("seqstore-trace-")
            .tempdir()
            .context("creating a work directory")?
            .keep(),
    };
    let traced = capture_strace(dir, &work, &a.workload)?;
    if let Some(s) = traced.status.filter(|s| !s.success()) {
        eprintln!("seqstore trace: note: the workload exited with {s}");
    }
    let mut cfg = CheckConfig::new(model);
    cfg.seed = a.seed;
    cfg.jobs = a.jobs.max(1);
    cfg.stop_at_first = a.first;
    let pb = progress_bar();
    cfg.progress = Some(progress_fn(&pb));
    let start = session::start_from_dir(model, &traced.snapshot)?;
    let report =
        session::check_capture(&start, &traced.capture, &CommandChecker::new(check), &cfg)?;
    pb.finish_and_clear();
    let replay = report.first.as_ref().map(|f| {
        format!(
            "seqstore trace --replay {} --model {model} --seed {} --crash-point {} --image {} --out IMAGE_DIR",
            work.display(),
            a.seed,
            f.crash_point,
            f.image
        )
    });
    if a.json {
        println!(
            "{}",
            report_json(&report, &traced, &work, replay.as_deref())
        );
    } else {
        print_report(&report, &traced, &work, replay.as_deref());
    }
    Ok(if report.violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub(crate) fn progress_bar() -> ProgressBar {
    let b = ProgressBar::new(1);
    b.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len}")
            .expect("static template")
            .progress_chars("=> "),
    );
    b.enable_steady_tick(Duration::from_millis(120));
    b
}

pub(crate) fn progress_fn(pb: &ProgressBar) -> ProgressFn {
    let pb = pb.clone();
    Arc::new(move |phase: &str, done: usize, total: usize| {
        pb.set_message(phase.to_string());
        pb.set_length(total as u64);
        pb.set_position(done as u64);
    })
}

/// Lines and megabytes parsed per second.
pub(crate) fn parse_rate(t: &Traced) -> (f64, f64) {
    let s = t.parse_time.as_secs_f64().max(1e-9);
    (t.capture.lines as f64 / s, t.capture.bytes as f64 / s / 1e6)
}

pub(crate) fn first_json(r: &TraceReport, replay: Option<&str>) -> Value {
    match &r.first {
        None => Value::Null,
        Some(f) => json!({
            "crash_point": f.crash_point, "image": f.image, "image_desc": f.image_desc,
            "after": f.after, "message": f.message, "blame": f.blame, "marks": f.marks,
            "replay": replay,
        }),
    }
}

fn report_json(r: &TraceReport, t: &Traced, work: &Path, replay: Option<&str>) -> Value {
    let (lps, mbps) = parse_rate(t);
    let mut v = check_json(r, replay);
    v["work"] = json!(work.display().to_string());
    v["trace_lines"] = json!(t.capture.lines);
    v["trace_bytes"] = json!(t.capture.bytes);
    v["parse_lines_per_s"] = json!(lps);
    v["parse_mb_per_s"] = json!(mbps);
    v["incomplete_calls"] = json!(t.capture.incomplete);
    v
}

/// The check's part of a JSON report (both capture routes).
pub(crate) fn check_json(r: &TraceReport, replay: Option<&str>) -> Value {
    json!({
        "model": r.model.to_string(), "seed": r.seed, "ops": r.ops,
        "crash_points": r.crash_points, "images": r.images, "distinct_images": r.distinct_images,
        "checker_runs": r.checker_runs, "violations": r.violations,
        "stopped_at_first": r.stopped_at_first,
        "explore_s": r.explore_time.as_secs_f64(), "check_s": r.check_time.as_secs_f64(),
        "checks_per_s": r.checks_per_s(),
        "images_per_s_in_memory": r.images as f64 / r.explore_time.as_secs_f64().max(1e-9),
        "first_violation": first_json(r, replay),
        "by_last_mark": marks_json(r),
    })
}

fn print_report(r: &TraceReport, t: &Traced, work: &Path, replay: Option<&str>) {
    let (lps, mbps) = parse_rate(t);
    println!(
        "trace: {} lines ({:.1} MB) parsed in {:.1} ms ({:.0} lines/s, {:.0} MB/s); {} operations on the directory",
        t.capture.lines,
        t.capture.bytes as f64 / 1e6,
        t.parse_time.as_secs_f64() * 1e3,
        lps,
        mbps,
        r.ops
    );
    for i in &t.capture.incomplete {
        println!("  not replayed (the process died in it): {i}");
    }
    print_check(r, replay);
    println!(
        "work directory (snapshot, trace, marks): {}",
        work.display()
    );
}

/// The check's part of a report (both capture routes).
pub(crate) fn print_check(r: &TraceReport, replay: Option<&str>) {
    println!(
        "model {}, seed {:#x}: {} crash points, {} images, {} distinct, {} checker runs, {} violations",
        r.model, r.seed, r.crash_points, r.images, r.distinct_images, r.checker_runs, r.violations
    );
    if r.stopped_at_first {
        println!("stopped at the first violation (--first): the counts cover the images up to it");
    }
    let mem_rate = r.images as f64 / r.explore_time.as_secs_f64().max(1e-9);
    println!(
        "time: {:.2} s exploring in memory ({mem_rate:.0} images/s), {:.1} s in checkers ({:.1} checks/s: the checker is {:.0}x slower)",
        r.explore_time.as_secs_f64(),
        r.check_time.as_secs_f64(),
        r.checks_per_s(),
        mem_rate / r.checks_per_s().max(1e-9)
    );
    if let Some(f) = &r.first {
        println!(
            "\nfirst violation: crash point {}, image {} ({})",
            f.crash_point, f.image, f.image_desc
        );
        println!("  after: {}", f.after.as_deref().unwrap_or("the start"));
        println!("  checker: {}", f.message.replace('\n', "\n           "));
        println!(
            "  marks before the crash: {}",
            if f.marks.is_empty() {
                "none".into()
            } else {
                f.marks.join(", ")
            }
        );
        for b in &f.blame {
            println!("  caused by the loss of: {b}");
        }
        if f.blame.is_empty() {
            println!("  (no single lost call explains it)");
        }
        if let Some(c) = replay {
            println!("  replay: {c}");
        }
    }
}

fn replay(work: &Path, a: &TraceArgs, model: Model) -> Result<ExitCode> {
    let (Some(k), Some(n), Some(out)) = (a.crash_point, a.image, &a.out) else {
        bail!("--replay needs --crash-point K --image N --out DIR");
    };
    let traced = load_work(work)?;
    let mut cfg = CheckConfig::new(model);
    cfg.seed = a.seed;
    let start = session::start_from_dir(model, &traced.snapshot)?;
    let img = session::replay_capture_image(&start, &traced.capture, &cfg, k, n)?;
    write_image(&img, (k, n), out)
}

/// Writes a replayed image into `out` (created; must not exist) and its marks into
/// `OUT.marks` (both capture routes' replay).
pub(crate) fn write_image(
    img: &session::ReplayedImage,
    (k, n): (usize, usize),
    out: &Path,
) -> Result<ExitCode> {
    std::fs::create_dir(out).with_context(|| format!("creating {}", out.display()))?;
    materialize(&img.image, out)?;
    let marks = PathBuf::from(format!("{}.marks", out.display()));
    let text: String = img.marks.iter().map(|m| format!("{m}\n")).collect();
    std::fs::write(&marks, text).with_context(|| format!("writing {}", marks.display()))?;
    println!(
        "image {n} at crash point {k} ({}) written to {}; its marks in {}",
        img.image_desc,
        out.display(),
        marks.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn marks_json(r: &TraceReport) -> Value {
    r.by_last_mark
        .iter()
        .map(|g| json!({"last_mark": g.last_mark, "violating_distinct_images": g.violating, "example": g.example}))
        .collect()
}
