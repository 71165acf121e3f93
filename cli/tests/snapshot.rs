//! `seqstore snapshot --dir` and `seqstore restore --dir` on real directories: through a pipe
//! and through files, and the refusals (non-empty target, damaged and truncated snapshots).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_seqstore"))
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run seqstore");
    // a command that refuses early may close its stdin first: that is not this test's failure
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    child.wait_with_output().expect("wait")
}

fn ok(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let out = run(args, stdin);
    assert!(out.status.success(), "{args:?}: {out:?}");
    out.stdout
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

fn dump(dir: &Path) -> String {
    String::from_utf8(ok(&["dump", "--dir", p(dir), "--json"], b"")).expect("utf-8")
}

/// A store with a few subjects, a delete and a compact.
fn source(dir: &Path) {
    for i in 0..30 {
        let subject = format!("orders.{}", i % 3);
        let data = format!("message {i}");
        let args = [
            "append",
            "--dir",
            p(dir),
            "--subject",
            &subject,
            "--data",
            &data,
        ];
        ok(&[&args[..], &["--sync", "never"]].concat(), b"");
    }
    ok(&["delete", "--dir", p(dir), "7"], b"");
    ok(&["compact", "--dir", p(dir), "3"], b"");
}

#[test]
fn snapshot_restore_through_a_pipe_and_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    source(&src);
    let want = dump(&src);
    // standard output to standard input
    let tar = ok(&["snapshot", "--dir", p(&src)], b"");
    let a = tmp.path().join("a");
    let said = ok(&["restore", "--dir", p(&a)], &tar);
    assert!(
        String::from_utf8_lossy(&said).contains("27 messages"),
        "{said:?}"
    );
    assert_eq!(dump(&a), want);
    // --out and --from
    let file = tmp.path().join("snap.tar");
    ok(&["snapshot", "--dir", p(&src), "--out", p(&file)], b"");
    assert_eq!(std::fs::read(&file).expect("snapshot file"), tar);
    let b = tmp.path().join("b");
    ok(&["restore", "--dir", p(&b), "--from", p(&file)], b"");
    assert_eq!(dump(&b), want);
    // the directory as an argument, the form before --dir, still works (hidden from --help)
    let c = tmp.path().join("c");
    ok(&["restore", p(&c), "--from", p(&file)], b"");
    assert_eq!(ok(&["snapshot", p(&c)], b""), tar);
    assert!(
        !run(&["snapshot", p(&c), "--dir", p(&src)], b"")
            .status
            .success(),
        "both forms at once are refused"
    );
    // --out never overwrites
    assert!(
        !run(&["snapshot", "--dir", p(&src), "--out", p(&file)], b"")
            .status
            .success()
    );
}

#[test]
fn restore_refuses_non_empty_damaged_and_truncated() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    source(&src);
    let tar = ok(&["snapshot", "--dir", p(&src)], b"");
    // a non-empty target is refused and left alone
    let out = run(&["restore", "--dir", p(&src)], &tar);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not empty"),
        "{out:?}"
    );
    // a flipped byte in a block's data, and a cut stream: refused, the target left empty (but for the lock file)
    let mut bad = tar.clone();
    bad[512 * 3 + 100] ^= 0x40;
    for (name, input) in [("flipped", &bad[..]), ("cut", &tar[..tar.len() / 2])] {
        let dst = tmp.path().join(name);
        let out = run(&["restore", "--dir", p(&dst)], input);
        assert!(!out.status.success(), "{name}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("bad snapshot"),
            "{out:?}"
        );
        // nothing but the lock file, which is never data
        let left: Vec<_> = std::fs::read_dir(&dst)
            .expect("dst")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
            .filter(|n| !seqstore_core::internal::is_lock_name(n))
            .collect();
        assert!(left.is_empty(), "{name}: left {left:?}");
    }
    // a snapshot of a directory that holds no store is refused
    let out = run(&["snapshot", "--dir", p(&tmp.path().join("flipped"))], b"");
    assert!(!out.status.success(), "{out:?}");
}
