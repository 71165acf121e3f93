//! `seqstore consumer add|next|ack|info|list|rm` on a real directory: state survives between
//! processes, JSON output, typed errors as a failing exit.

use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str], dir: &Path) -> Output {
    let (cmd, rest) = args.split_first().expect("a subcommand");
    Command::new(env!("CARGO_BIN_EXE_seqstore"))
        .args(["consumer", cmd, "--dir"])
        .arg(dir)
        .args(rest)
        .output()
        .expect("run seqstore")
}

fn ok(args: &[&str], dir: &Path) -> String {
    let out = run(args, dir);
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

fn append(dir: &Path, data: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_seqstore"))
        .args(["append", "--subject", "jobs.a", "--data", data, "--dir"])
        .arg(dir)
        .output()
        .expect("run seqstore");
    assert!(out.status.success(), "{out:?}");
}

fn info(dir: &Path, name: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&["info", name, "--json"], dir)).expect("json")
}

#[test]
fn consumer_commands_keep_state_across_processes() {
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    for d in ["one", "two", "three"] {
        append(dir, d);
    }
    ok(&["add", "work"], dir);
    ok(&["add", "audit", "--ack", "all"], dir);
    let list: serde_json::Value = serde_json::from_str(&ok(&["list", "--json"], dir)).unwrap();
    assert_eq!(list["consumers"], serde_json::json!(["audit", "work"]));
    let got = ok(&["next", "work", "--count", "2"], dir);
    assert_eq!(got.lines().count(), 2, "{got}");
    assert!(got.starts_with("1\tjobs.a\tone"), "{got}");
    ok(&["ack", "work", "2"], dir);
    let v = info(dir, "work");
    assert_eq!(v["delivered"]["stream"], 2);
    assert_eq!(v["ack_floor"]["stream"], 0, "1 is still pending: {v}");
    assert_eq!(v["pending"][0]["stream_seq"], 1);
    ok(&["ack", "work", "1"], dir);
    let v = info(dir, "work");
    assert_eq!(v["ack_floor"]["stream"], 2, "{v}");
    assert_eq!(v["num_pending"], 0);
    // acking it again, or a message never delivered, is refused
    for seq in ["1", "3"] {
        let out = run(&["ack", "work", seq], dir);
        assert!(!out.status.success(), "ack {seq}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("not pending"));
    }
    let out = run(&["add", "bad.name"], dir);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid consumer name"));
    // the last message, then nothing left: exit code 1
    assert!(ok(&["next", "work", "--json"], dir).contains("\"seq\":3"));
    assert_eq!(run(&["next", "work"], dir).status.code(), Some(1));
    ok(&["rm", "audit"], dir);
    assert_eq!(ok(&["list"], dir), "work\n");
    assert!(!run(&["info", "audit"], dir).status.success());
    let text = ok(&["info", "work"], dir);
    assert!(text.contains("ack floor   consumer 2 stream 2"), "{text}");
}
