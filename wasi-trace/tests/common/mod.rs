//! Builds the subject programs (`wasi-trace/subjects`) for `wasm32-wasip2` and natively, once
//! per test binary, into a target directory of their own (the outer cargo holds its own).

#![allow(dead_code)]

use seqstore_fault_fs::FaultFs;
use seqstore_wasi_trace::Program;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Where the subjects are built: one directory per feature set, so that the builds with and
/// without the seqstore and redb parts never overwrite each other.
fn target_dir(full: bool) -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    base.join(if full {
        "wasi-subjects"
    } else {
        "wasi-subjects-std"
    })
}

/// A directory of this crate's tests under the target directory (e.g. for the C subject).
pub fn work_dir(name: &str) -> PathBuf {
    target_dir(true).with_file_name(name)
}

/// Builds `wasi-subjects` (release) for `target` (`None`: the host) and returns its path;
/// `full`: with the seqstore and redb parts (default features), else plain std.
fn build(target: Option<&str>, full: bool) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--locked",
            "--release",
            "-p",
            "seqstore-wasi-subjects",
        ])
        .arg("--target-dir")
        .arg(target_dir(full));
    if let Some(t) = target {
        cmd.args(["--target", t]);
    }
    if !full {
        cmd.arg("--no-default-features");
    }
    let st = cmd.status().expect("cargo runs");
    assert!(st.success(), "building the subjects for {target:?} failed");
    let mut p = target_dir(full);
    if let Some(t) = target {
        p.push(t);
    }
    p.push("release");
    p.push(if target.is_some() {
        "wasi-subjects.wasm"
    } else {
        "wasi-subjects"
    });
    p
}

/// The subjects as a WASI component. (The wasm32-wasip2 target is also what the workspace's
/// own build needs: seqstore-wasm's build script installs it.)
pub fn subjects_wasm() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let t = "wasm32-wasip2";
        assert!(
            seqstore_test_setup::wasm_target("the WASI subjects", t),
            "no {t} target"
        );
        build(Some(t), true)
    })
}

/// The subjects as a WASI preview-1 core module (`wasm32-wasip1`), or `None` after the line
/// that skips `test` when that target is missing and cannot be added.
pub fn subjects_wasm_p1(test: &str) -> Option<&'static Path> {
    if !seqstore_test_setup::wasm_target(test, "wasm32-wasip1") {
        return None;
    }
    static P: OnceLock<PathBuf> = OnceLock::new();
    Some(P.get_or_init(|| build(Some("wasm32-wasip1"), false)))
}

/// The small subjects built for this machine (for the strace route).
pub fn subjects_native() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| build(None, false))
}

/// The subjects built for this machine with `check-seqstore` (the bench's baseline checker).
pub fn subjects_native_full() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| build(None, true))
}

/// The subjects program, compiled once per test binary.
pub fn program() -> &'static Program {
    static P: OnceLock<Program> = OnceLock::new();
    P.get_or_init(|| Program::load(subjects_wasm()).expect("the subjects compile"))
}

/// Prints what a check found, one line, under `label`.
pub fn print_report(label: &str, r: &seqstore_trace::session::TraceReport) {
    eprintln!(
        "{label} {}: {} ops, {} crash points, {} images, {} checks, {} violations, {:.0} checks/s; first: {:?}",
        r.model,
        r.ops,
        r.crash_points,
        r.images,
        r.checker_runs,
        r.violations,
        r.checks_per_s(),
        r.first.as_ref().map(|f| (&f.message, &f.blame))
    );
}

/// A tree's files and directories with their contents (directories as `None`).
pub fn tree(fs: &FaultFs) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    walk(fs, "", &mut out);
    out
}

fn walk(fs: &FaultFs, at: &str, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
    use seqstore_core::Fs;
    for e in fs.read_dir(at).expect("a directory") {
        let p = if at.is_empty() {
            e.name.clone()
        } else {
            format!("{at}/{}", e.name)
        };
        if e.is_dir {
            out.insert(p.clone(), None);
            walk(fs, &p, out);
        } else {
            out.insert(p.clone(), Some(fs.read_file(&p).expect("a file")));
        }
    }
}
