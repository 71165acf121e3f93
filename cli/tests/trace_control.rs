//! seqstore's own CLI as the control of `seqstore trace`: `append x8 --sync always; purge`
//! run under strace, replayed into fault-fs and checked on every crash image with the CLI,
//! must reach the verdict the in-process explorer reaches on the same workload, per fsync
//! ablation and model: clean with every fsync, (0,0) with the tombstone fsync removed,
//! broken under posix only without directory fsyncs. This is also the check of the fsyncs
//! host-fs really issues on Linux.
//!
//! Needs strace: installed when missing (seqstore-test-setup), else the test is skipped with a
//! line saying so (a failure under CI=true).

use seqstore_core::Ablation;
use seqstore_crash_matrix::{demo_cells, run_cell, Native};
use seqstore_fault_fs::Model;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_seqstore")
}

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace-check/scripts")
}

/// A Python without a pyenv shim in front (the checker runs per image: start-up counts).
fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// Whether strace is there (installed when missing); under CI=true its absence is a failure.
fn have_strace(test: &str) -> bool {
    seqstore_test_setup::strace(test).is_some()
}

/// `seqstore trace --json` of the CLI workload with `ablation`, and the directory holding its
/// work directory (for `--replay`).
fn traced(ablation: Ablation, model: Model) -> (Value, tempfile::TempDir) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("store");
    std::fs::create_dir(&dir).unwrap();
    let s = scripts();
    let out = Command::new(bin())
        .env("SEQSTORE_BIN", bin())
        .args([
            "trace",
            "--json",
            // the verdict is what is compared: a violating cell stops at its first violation
            "--first",
            "--jobs",
            "2",
            "--model",
            &model.to_string(),
        ])
        .arg("--dir")
        .arg(&dir)
        .arg("--work")
        .arg(t.path().join("work"))
        .arg("--check")
        .arg(format!(
            // -S: no site-packages (the checker needs only os and sys), half of Python's start-up
            "{} -S {}",
            python(),
            s.join("check_seqstore.py").display()
        ))
        .arg("--")
        .arg("sh")
        .arg(s.join("seqstore_workload.sh"))
        .arg(bin())
        .arg(&dir)
        .arg(ablation.name())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    let violations = v["violations"].as_u64().unwrap();
    assert_eq!(out.status.success(), violations == 0, "{v}");
    (v, t)
}

/// The report's `--replay` command, run as printed, writes the image and its marks, and the
/// checker rejects that image again.
fn replay_shows_the_violation(f: &Value) {
    let cmd = f["replay"].as_str().unwrap();
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("image");
    let argv: Vec<String> = cmd
        .split(' ')
        .skip(1)
        .map(|a| {
            if a == "IMAGE_DIR" {
                out.display().to_string()
            } else {
                a.to_string()
            }
        })
        .collect();
    let st = Command::new(bin()).args(&argv).status().unwrap();
    assert!(st.success(), "{cmd}");
    let check = Command::new(python())
        .arg(scripts().join("check_seqstore.py"))
        .env("SEQSTORE_BIN", bin())
        .env("IMAGE_DIR", &out)
        .env("MARKS_FILE", format!("{}.marks", out.display()))
        .output()
        .unwrap();
    assert!(!check.status.success(), "the replayed image passes: {cmd}");
    assert!(String::from_utf8_lossy(&check.stdout).contains("first=0 last=0"));
}

#[test]
fn the_traced_cli_and_the_in_process_explorer_agree_per_ablation() {
    if !have_strace("the_traced_cli_and_the_in_process_explorer_agree_per_ablation") {
        return;
    }
    for spec in demo_cells(0x5eed) {
        let inproc = run_cell(&Native, &spec, None).report.violation_count;
        let (v, _work) = traced(spec.ablation, spec.model);
        let n = v["violations"].as_u64().unwrap();
        eprintln!(
            "{} {}: traced {n} violations in {} images, in-process {inproc}",
            spec.ablation, spec.model, v["images"]
        );
        assert_eq!(n > 0, inproc > 0, "{} {}: {v}", spec.ablation, spec.model);
        assert_eq!(v["stopped_at_first"].as_bool(), Some(n > 0), "{v}");
        if n == 0 {
            // a clean verdict covers every crash point of the trace
            assert!(v["crash_points"].as_u64().unwrap() > 20, "{v}");
        }
        if spec.ablation == Ablation::NoTombstoneSync {
            // the purge's tombstone is lost: the store comes back empty at 0,0
            let f = &v["first_violation"];
            assert!(
                f["message"].as_str().unwrap().contains("first=0 last=0"),
                "{f}"
            );
            let blame = f["blame"][0].as_str().unwrap();
            assert!(blame.contains("2.blk"), "{blame}");
            replay_shows_the_violation(f);
        }
    }
}
