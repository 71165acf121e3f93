//! `seqstore trace --wasm` end to end: seqstore's own WASI command as the program (written out
//! of the binary's crate), shell checkers as the verdict, the JSON report, and the replay of
//! a violating image by running the program again.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn trace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seqstore"))
        .arg("trace")
        .args(args)
        .output()
        .expect("seqstore runs")
}

fn guest(dir: &Path) -> String {
    let p = dir.join("seqstore-guest.wasm");
    std::fs::write(&p, seqstore_wasm::guest_command_wasm()).unwrap();
    p.display().to_string()
}

#[test]
fn trace_wasm_reports_json_and_replays_the_first_violation() {
    let t = tempfile::tempdir().unwrap();
    let wasm = guest(t.path());
    let program = ["--", "append", "--subject", "a", "--data", "x"];
    // a checker that accepts everything: clean, and the JSON says what was checked
    let mut args = vec!["--wasm", &wasm, "--check", "true", "--json"];
    args.extend(program);
    let out = trace(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["violations"], 0);
    assert_eq!(v["program_exit"], 0);
    assert!(v["crash_points"].as_u64().unwrap() > 5, "{v}");
    // a checker that wants the first message on every image: the empty image violates it
    let check = r#"test -d "$IMAGE_DIR/msgs" || { echo "no msgs directory"; exit 1; }"#;
    let mut args = vec!["--wasm", &wasm, "--check", check, "--json"];
    args.extend(program);
    let out = trace(&args);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &v["first_violation"];
    assert_eq!(first["message"], "no msgs directory");
    let replay = first["replay"].as_str().unwrap().to_string();
    // the replay command, run as printed (with the image directory filled in)
    let img = t.path().join("img");
    let line = replay.replace("IMAGE_DIR", &img.display().to_string());
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&words[..2], ["seqstore", "trace"]);
    let out = trace(&words[2..]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        img.is_dir() && !img.join("msgs").exists(),
        "the replayed image is the violating one"
    );
}

#[test]
fn trace_wasm_refuses_a_missing_checker_and_a_module_it_cannot_adapt() {
    let t = tempfile::tempdir().unwrap();
    let wasm = guest(t.path());
    let out = trace(&["--wasm", &wasm, "--", "state"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--check-wasm"));
    let core = t.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let out = trace(&["--wasm", &core.display().to_string(), "--check", "true"]);
    assert!(!out.status.success());
    // an empty core module: taken for preview 1, and the adapter says why it cannot be adapted
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("adapting a preview-1 module"), "{err}");
}
