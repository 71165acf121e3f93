//! The `seqstore-guest` WASI command, run in-process on a preopened directory: the same
//! operations as the CLI, JSON out, and the files are the store's.

use seqstore_core::{Config, Store};
use seqstore_fs::HostFs;

use crate::{run_guest_command, CommandOutput, GuestOptions};

fn run(dir: &std::path::Path, args: &str) -> CommandOutput {
    let args: Vec<&str> = args.split_whitespace().collect();
    run_guest_command(dir, &args, &GuestOptions::default()).unwrap()
}

fn ok(dir: &std::path::Path, args: &str) -> String {
    let out = run(dir, args);
    assert_eq!(
        out.code,
        0,
        "{args}: stderr {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

#[test]
fn command_runs_the_store_on_a_preopened_dir() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_eq!(
        ok(d, "append --subject orders.eu --data hello"),
        "{\"seq\":1}"
    );
    assert_eq!(
        ok(d, "append --subject orders.us --data world"),
        "{\"seq\":2}"
    );
    let got = ok(d, "get 1");
    assert!(got.starts_with("{\"seq\":1,"), "{got}");
    assert!(got.contains("\"subject\":\"orders.eu\""), "{got}");
    assert!(got.contains("\"payload\":\"hello\""), "{got}");
    assert!(ok(d, "last --subject orders.us").contains("\"payload\":\"world\""));
    assert_eq!(
        ok(d, "subjects --filter orders.*"),
        "{\"orders.eu\":1,\"orders.us\":1}"
    );
    assert_eq!(ok(d, "purge"), "{\"purged\":2}");
    let state = ok(d, "state");
    assert!(
        state.contains("\"first_seq\":3,") && state.contains("\"last_seq\":2,"),
        "{state}"
    );

    // Errors: a store error and a usage error both fail, with the reason on stderr.
    let out = run(d, "get 1");
    assert_eq!(out.code, 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no message with sequence 1"));
    let out = run(d, "frobnicate");
    assert_ne!(out.code, 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"));

    // The directory is a plain store: the native one opens it.
    let mut s = Store::open(HostFs::open(d).unwrap(), Config::default()).unwrap();
    assert_eq!(s.state().last_seq, 2);
    assert_eq!(s.append("x", b"", b"native").unwrap(), 3);
    s.close().unwrap();
    assert!(ok(d, "get 3").contains("\"payload\":\"native\""));
}

#[test]
fn command_cannot_leave_its_directory() {
    let outer = tempfile::tempdir().unwrap();
    let inner = outer.path().join("s");
    std::fs::create_dir(&inner).unwrap();
    for dir in ["/data/..", "/", "/tmp"] {
        let out = run(&inner, &format!("append --dir {dir} --subject a --data x"));
        assert_ne!(out.code, 0, "--dir {dir} succeeded");
        // refused by the sandbox, not by the parser
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("Usage"),
            "--dir {dir}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        std::fs::read_dir(outer.path()).unwrap().count(),
        1,
        "something was created outside the preopen"
    );
}

/// `seqstore`'s syntax as it is, `--dir` after the command (the `wasmtime run … append --dir
/// /data …` line a `seqstore` user types), and `--dir` before it refused as a usage error.
#[test]
fn dir_after_the_command_as_in_seqstore() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_eq!(
        ok(d, "append --dir /data --subject s --data x"),
        "{\"seq\":1}"
    );
    assert_eq!(ok(d, "append --subject s --data y"), "{\"seq\":2}");
    assert!(ok(d, "get 2 --dir /data --json").contains("\"payload\":\"y\""));
    // --dir before the command is seqstore's usage error too
    let out = run(d, "--dir /data state");
    assert_ne!(out.code, 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"));
}
