//! The NATS stream reads on the command line: `next` with several filters, `prev`,
//! `pending`, `time-seq`, on a real directory.

mod common;

use common::{ok, seqstore};
use serde_json::Value;
use std::path::Path;

fn json(dir: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&ok(dir, args)).expect("one JSON object")
}

/// The sequence of the one message a `--json` read printed.
fn seq_of(dir: &Path, args: &[&str]) -> u64 {
    json(dir, args)["seq"].as_u64().expect("seq")
}

#[test]
fn next_prev_pending_and_time_seq() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    // 1 a.1, 2 b.1, 3 c, 4 a.2, 5 b.1, 6 c
    for subject in ["a.1", "b.1", "c", "a.2", "b.1", "c"] {
        ok(
            dir,
            &[
                "append",
                "--subject",
                subject,
                "--data",
                "x",
                "--sync",
                "never",
            ],
        );
    }
    ok(dir, &["delete", "5"]);

    assert_eq!(
        seq_of(dir, &["next", "--filter", "c", "--from", "2", "--json"]),
        3
    );
    let any = [
        "next", "--filter", "c", "--filter", "a.*", "--from", "4", "--json",
    ];
    assert_eq!(seq_of(dir, &any), 4);
    assert_eq!(seq_of(dir, &["prev", "--filter", "b.>", "--json"]), 2);
    let before = [
        "prev", "--filter", "c", "--filter", "a.*", "--from", "5", "--json",
    ];
    assert_eq!(seq_of(dir, &before), 4);
    let none = seqstore(dir, &["prev", "--filter", "a.*", "--from", "0"]);
    assert_eq!(none.status.code(), Some(1), "{none:?}");

    let p = json(
        dir,
        &[
            "pending", "--filter", "c", "--filter", "b.1", "--from", "3", "--json",
        ],
    );
    assert_eq!(
        (p["pending"].as_u64(), p["valid_through"].as_u64()),
        (Some(2), Some(6))
    );
    // the subjects whose last message is at or after 2: b.1 (2, its 5 is deleted), a.2, c
    let lps = ["pending", "--from", "2", "--last-per-subject", "--json"];
    assert_eq!(json(dir, &lps)["pending"].as_u64(), Some(3));

    // timestamps: the system clock, so find them from the messages themselves
    let ts3 = json(dir, &["get", "3", "--json"])["ts"]
        .as_i64()
        .expect("ts");
    let at = ok(dir, &["time-seq", &ts3.to_string()]);
    assert!(at.trim().parse::<u64>().expect("a sequence") <= 3, "{at}");
    let after = json(dir, &["time-seq", &i64::MAX.to_string(), "--json"]);
    assert_eq!(
        after["seq"].as_u64(),
        Some(7),
        "last + 1 when no timestamp is that late"
    );

    // the same reads in the wasm sandbox, on the same files
    let mut guest_any = any.to_vec();
    guest_any.push("--guest");
    assert_eq!(seq_of(dir, &guest_any), 4);
    let mut guest_before = before.to_vec();
    guest_before.push("--guest");
    assert_eq!(seq_of(dir, &guest_before), 4);
    let mut guest_pending = lps.to_vec();
    guest_pending.push("--guest");
    assert_eq!(json(dir, &guest_pending)["pending"].as_u64(), Some(3));
    let guest_at = ok(dir, &["time-seq", &ts3.to_string(), "--guest"]);
    assert_eq!(guest_at, at, "the guest finds the same sequence");

    // a bad filter is an error, not a panic
    let bad = seqstore(dir, &["next", "--filter", "a..b"]);
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid subject"));
}
