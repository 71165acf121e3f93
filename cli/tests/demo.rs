//! The main job, run as a user runs it: `seqstore demo --json` must report the expected
//! ablation table (native and guest rows) and exit 0; `seqstore demo` prints the table.

use std::process::Command;

#[test]
fn demo_reports_the_expected_table() {
    let out = Command::new(env!("CARGO_BIN_EXE_seqstore"))
        .args(["demo", "--json"])
        .output()
        .expect("run seqstore demo");
    assert!(
        out.status.success(),
        "demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["scenario"], "purge");
    assert_eq!(v["as_expected"], true);
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 12, "3 variants x 2 models x 2 backends");
    for backend in ["native", "guest"] {
        let zero_zero = rows.iter().any(|r| {
            r["backend"] == backend
                && r["variant"] == "no-tombstone-sync"
                && r["example"]["recovered_first"] == 0
                && r["example"]["recovered_last"] == 0
                && r["example"]["expected_last"] == 8
        });
        assert!(zero_zero, "{backend}: no 0,0 example in {rows:?}");
    }
}

#[test]
fn store_commands_refuse_a_foreign_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_seqstore"))
        .args(["state", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a store error, not a usage error"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a seqstore directory"));
    assert_eq!(
        std::fs::read(dir.path().join("notes.txt")).unwrap(),
        b"mine"
    );
}
