//! What the command-line tests share: running `seqstore CMD --dir DIR ARGS…`.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `seqstore` with `args[0]` as the command and `--dir dir` after it.
pub fn seqstore(dir: &Path, args: &[&str]) -> Output {
    let (cmd, rest) = args.split_first().expect("a command");
    Command::new(env!("CARGO_BIN_EXE_seqstore"))
        .arg(cmd)
        .arg("--dir")
        .arg(dir)
        .args(rest)
        .output()
        .expect("run seqstore")
}

/// Runs a command that must succeed; its standard output.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let out = seqstore(dir, args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}
