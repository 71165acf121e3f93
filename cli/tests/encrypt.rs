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

/// `seqstore append --subject a.b --data DATA` with the layer flags `layer`; it must succeed.
fn append_keyed(dir: &Path, data: &str, layer: &[&str]) {
    let args = [&["append", "--subject", "a.b", "--data", data][..], layer].concat();
    let out = run(dir, &args);
    assert!(out.status.success(), "{out:?}");
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
        append_keyed(
            &dir,
            &format!("secret message {i}"),
            &["--key-file", k, "--compress"],
        );
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

/// `snapshot --key-file` reads an encrypted store, `restore --key-file` writes the copy
/// encrypted under the key given then: the restored store reads back the same with it, holds
/// no plaintext, and is refused without it. A snapshot taken without the key is refused.
#[test]
fn a_snapshot_of_an_encrypted_store_restores_encrypted() {
    let t = tempfile::tempdir().expect("tempdir");
    let (src, dst) = (t.path().join("src"), t.path().join("dst"));
    let (key, key2) = (t.path().join("key"), t.path().join("key2"));
    std::fs::write(&key, [1u8; 32]).unwrap();
    std::fs::write(&key2, [2u8; 32]).unwrap();
    let (k, k2) = (key.to_str().unwrap(), key2.to_str().unwrap());
    for i in 0..20 {
        append_keyed(&src, &format!("confidential {i}"), &["--key-file", k]);
    }
    let snap = t.path().join("snap.tar");
    let seqstore = || Command::new(env!("CARGO_BIN_EXE_seqstore"));
    let out = seqstore()
        .args(["snapshot", "--dir", src.to_str().unwrap(), "--out"])
        .arg(&snap)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a snapshot without the key: {out:?}");
    let out = seqstore()
        .args([
            "snapshot",
            "--dir",
            src.to_str().unwrap(),
            "--key-file",
            k,
            "--out",
        ])
        .arg(&snap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = seqstore()
        .args([
            "restore",
            "--dir",
            dst.to_str().unwrap(),
            "--key-file",
            k2,
            "--from",
        ])
        .arg(&snap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let state = |dir: &Path, key: &str| {
        let out = run(dir, &["state", "--json", "--key-file", key]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(state(&src, k), state(&dst, k2));
    let out = run(&dst, &["get", "7", "--key-file", k2]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("confidential 6"),
        "{out:?}"
    );
    for args in [vec!["get", "7"], vec!["get", "7", "--key-file", k]] {
        let out = run(&dst, &args);
        assert!(!out.status.success(), "{args:?}: {out:?}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("confidential"));
    }
    for e in walk(&dst) {
        let bytes = std::fs::read(&e).unwrap();
        assert!(
            !bytes.windows(12).any(|w| w == b"confidential"),
            "plaintext in {}",
            e.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
