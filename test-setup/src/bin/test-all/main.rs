//! `cargo test-all [CARGO ARGS] [-- TEST ARGS]` (the alias in `.cargo/config.toml`): the tests
//! of `cargo test --workspace [CARGO ARGS] [-- TEST ARGS]`, with the test binaries run side by
//! side, then, as the run's last lines, what the tests installed and every test they skipped,
//! each with the command that adds what was missing.
//!
//! `cargo test` runs its test binaries one after another, and most of them are one long test or
//! a few: on two cores a serial run leaves one idle for much of its time. This command builds
//! them (`cargo test --no-run`), runs up to `SEQSTORE_TEST_JOBS` of them at once (default: one
//! per core; 1 is cargo's order, one at a time), those that took longest when they last ran
//! whole first (a run with test arguments, such as a filter, does not count), prints each
//! one's output whole when it ends, and then runs the doc tests. Every binary runs,
//! whether or not another failed; the failures are named at the end.
//!
//! The tests set up what they need themselves (`seqstore_test_setup`); this command only
//! gathers their lines, which are otherwise spread over the output of some sixty test binaries.
#![forbid(unsafe_code)]

mod json;
mod pool;

use seqstore_test_setup::{target_dir, workspace, LOG_VAR};
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

fn main() -> ExitCode {
    let mut cargo_args: Vec<String> = std::env::args().skip(1).collect();
    let test_args = match cargo_args.iter().position(|a| a == "--") {
        Some(at) => cargo_args.split_off(at).split_off(1),
        None => Vec::new(),
    };
    let dir = target_dir().join("test-setup");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("test-all: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let log = dir.join("last-run.log");
    let _ = std::fs::remove_file(&log);
    let started = Instant::now();
    let result = run(&cargo_args, &test_args, &dir, &log);
    let took = started.elapsed().as_secs();
    let lines = std::fs::read_to_string(&log).unwrap_or_default();
    let skips: Vec<&str> = lines.lines().filter(|l| l.starts_with("SKIPPED")).collect();
    println!();
    for l in lines
        .lines()
        .filter(|l| l.starts_with("test-setup: installed"))
    {
        println!("test-all: {}", l.trim_start_matches("test-setup: "));
    }
    for l in &skips {
        println!("test-all: {l}");
    }
    let verdict = match &result {
        Ok(failed) if failed.is_empty() => "passed".to_string(),
        Ok(failed) => format!("FAILED ({})", failed.join(", ")),
        Err(e) => format!("FAILED: {e}"),
    };
    let mut command = vec!["cargo test --workspace".to_string()];
    command.extend(cargo_args.iter().cloned());
    if !test_args.is_empty() {
        command.push("--".into());
        command.extend(test_args.iter().cloned());
    }
    println!(
        "test-all: {}: {verdict} in {}m{:02}s; {} test(s) skipped",
        command.join(" "),
        took / 60,
        took % 60,
        skips.len()
    );
    match result {
        Ok(failed) if failed.is_empty() => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

/// Builds the test binaries, runs them, then the doc tests: the names of those that failed, or
/// why nothing could run.
fn run(
    cargo_args: &[String],
    test_args: &[String],
    dir: &Path,
    log: &Path,
) -> Result<Vec<String>, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let bins = build(&cargo, cargo_args)?;
    let jobs = jobs()?;
    let history = dir.join("durations");
    let mut failed = pool::run(bins, jobs, test_args, log, &history);
    // `--doc` cannot be combined with a target selection; such a run asked for no doc tests
    let selects = |a: &String| {
        let flag = a.split('=').next().unwrap_or(a);
        TARGET_FLAGS.contains(&flag)
    };
    if !cargo_args.iter().any(selects) {
        let status = Command::new(&cargo)
            .args(["test", "--workspace", "--doc"])
            .args(cargo_args)
            .arg("--")
            .args(test_args)
            .env(LOG_VAR, log)
            .status()
            .map_err(|e| format!("could not run cargo: {e}"))?;
        if !status.success() {
            failed.push(format!("the doc tests ({status})"));
        }
    }
    Ok(failed)
}

/// cargo's options that choose targets (a run with any of them has no separate doc run).
const TARGET_FLAGS: [&str; 11] = [
    "--lib",
    "--bin",
    "--bins",
    "--example",
    "--examples",
    "--test",
    "--tests",
    "--bench",
    "--benches",
    "--all-targets",
    "--doc",
];

/// `SEQSTORE_TEST_JOBS`, else the number of cores.
fn jobs() -> Result<usize, String> {
    match std::env::var("SEQSTORE_TEST_JOBS") {
        Ok(v) => match v.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("SEQSTORE_TEST_JOBS={v:?} is not a positive number")),
        },
        Err(_) => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// `cargo test --workspace --no-run`: the test binaries it built, in cargo's order. Its
/// diagnostics and progress go to the terminal as usual.
fn build(cargo: &OsString, cargo_args: &[String]) -> Result<Vec<pool::TestBin>, String> {
    let out = Command::new(cargo)
        .args(["test", "--workspace", "--no-run"])
        .arg("--message-format=json-render-diagnostics")
        .args(cargo_args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("the build failed ({})", out.status));
    }
    let root = workspace();
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter_map(json::parse)
        .filter_map(|m| pool::TestBin::of_artifact(&m, &root))
        .collect())
}
