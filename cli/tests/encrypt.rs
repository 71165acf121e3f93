//! `--key-file` and `--compress`: a store written encrypted reads back with the key, is
//! refused without it or with another, and `verify` checks it through the key.

use std::path::Path;
use std::process::{Command, Output};

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seqstore"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("run seqstore")
}

#[test]
fn an_encrypted_store_needs_its_key() {
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path().join("s");
    let key = t.path().join("key");
    let other = t.path().join("other");
    std::fs::write(
        &key,
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
    )
    .unwrap();
    std::fs::write(&other, [7u8; 32]).unwrap();
    let k = key.to_str().unwrap();
    for i in 0..5 {
        let data = format!("secret message {i}");
        let out = run(
            &dir,
            &[
                "append",
                "--subject",
                "a.b",
                "--data",
                &data,
                "--key-file",
                k,
                "--compress",
            ],
        );
        assert!(out.status.success(), "{out:?}");
    }
    let out = run(&dir, &["get", "3", "--key-file", k, "--compress"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("secret message 2"));
    // the wasm guest reads and writes the same encrypted files
    let out = run(&dir, &["get", "2", "--key-file", k, "--guest"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("secret message 1"));
    let out = run(&dir, &["verify", "--key-file", k, "--compress"]);
    assert!(out.status.success(), "{out:?}");
    // without the key, or with another: refused, the message never printed
    let out = run(&dir, &["get", "3"]);
    eprintln!("without the key: {}", String::from_utf8_lossy(&out.stderr));
    for args in [
        vec!["get", "3"],
        vec![
            "get",
            "3",
            "--key-file",
            other.to_str().unwrap(),
            "--compress",
        ],
    ] {
        let out = run(&dir, &args);
        assert!(!out.status.success(), "{args:?}: {out:?}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("secret"));
    }
    let out = run(
        &dir,
        &[
            "get",
            "3",
            "--key-file",
            other.to_str().unwrap(),
            "--compress",
        ],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("wrong key"),
        "{out:?}"
    );
    // consumers of an encrypted store: the same key
    let consumer = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_seqstore"))
            .arg("consumer")
            .args(args)
            .arg("--dir")
            .arg(&dir)
            .output()
            .expect("run seqstore")
    };
    let out = consumer(&["add", "c1", "--key-file", k]);
    assert!(out.status.success(), "{out:?}");
    let out = consumer(&["list", "--key-file", k]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("c1"),
        "{out:?}"
    );
    let out = consumer(&["list"]);
    assert!(
        !out.status.success(),
        "consumer list without the key: {out:?}"
    );
}
