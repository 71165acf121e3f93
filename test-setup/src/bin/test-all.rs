//! `cargo test-all [ARGS]` (the alias in `.cargo/config.toml`): `cargo test --workspace
//! [ARGS]`, then, as the run's last lines, what its tests installed and every test they
//! skipped, each with the command that adds what was missing.
//!
//! The tests set up what they need themselves (`seqstore_test_setup`); this command only
//! gathers their lines, which are otherwise spread over the output of some sixty test binaries.
#![forbid(unsafe_code)]

use seqstore_test_setup::{target_dir, LOG_VAR};
use std::process::{Command, ExitCode};
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = target_dir().join("test-setup");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("test-all: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let log = dir.join("last-run.log");
    let _ = std::fs::remove_file(&log);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = Instant::now();
    let status = Command::new(cargo)
        .args(["test", "--workspace"])
        .args(&args)
        .env(LOG_VAR, &log)
        .status();
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
    let ok = matches!(&status, Ok(s) if s.success());
    let verdict = match &status {
        Ok(_) if ok => "passed".to_string(),
        Ok(s) => format!("FAILED ({s})"),
        Err(e) => format!("could not run cargo: {e}"),
    };
    let command = std::iter::once("cargo test --workspace".to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    println!(
        "test-all: {command}: {verdict} in {}m{:02}s; {} test(s) skipped",
        took / 60,
        took % 60,
        skips.len()
    );
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
