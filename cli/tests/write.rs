//! The ttl and skip writes on the command line: `append --ttl`, `skip SEQ --count N`.

mod common;

use common::seqstore;
use std::path::Path;

/// Runs a command that must succeed; its standard output, trimmed.
fn ok(dir: &Path, args: &[&str]) -> String {
    common::ok(dir, args).trim().to_string()
}

#[test]
fn append_with_ttl_and_skip() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let append = |ttl: &str| {
        ok(
            dir,
            &["append", "--subject", "a", "--data", "x", "--ttl", ttl],
        )
    };
    assert_eq!(append("1h"), "1");
    assert_eq!(append("1ms"), "2");
    std::thread::sleep(std::time::Duration::from_millis(20));
    // expired: no read returns it, and the open that ran `get` removed it
    assert!(!seqstore(dir, &["get", "2"]).status.success());
    assert!(seqstore(dir, &["get", "1"]).status.success());
    for bad in ["0s", "10", "5y", "99999999999999h"] {
        let out = seqstore(
            dir,
            &["append", "--subject", "a", "--data", "x", "--ttl", bad],
        );
        assert!(!out.status.success(), "--ttl {bad} accepted");
    }
    assert_eq!(ok(dir, &["skip", "3", "--count", "5"]), "7");
    assert_eq!(ok(dir, &["skip", "8"]), "8");
    let out = seqstore(dir, &["skip", "3"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not the next one"),
        "{out:?}"
    );
    assert_eq!(ok(dir, &["append", "--subject", "a", "--data", "y"]), "9");
    let state = ok(dir, &["state", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&state).expect("json");
    assert_eq!(
        (v["msgs"].as_u64(), v["last_seq"].as_u64()),
        (Some(2), Some(9))
    );
}

/// The same writes with `--guest`: the store in the wasm guest, through its WIT calls; the
/// native CLI then reads what the guest wrote, and a wrong skip is the same typed error.
#[test]
fn append_with_ttl_and_skip_in_the_guest() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    fn g<'a>(args: &[&'a str]) -> Vec<&'a str> {
        let mut v = args.to_vec();
        v.push("--guest");
        v
    }
    let append = ["append", "--subject", "a", "--data", "x"];
    assert_eq!(ok(dir, &g(&append)), "1");
    assert_eq!(ok(dir, &g(&[&append[..], &["--ttl", "1ms"]].concat())), "2");
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!seqstore(dir, &g(&["get", "2"])).status.success());
    assert_eq!(ok(dir, &g(&["skip", "3", "--count", "5"])), "7");
    let out = seqstore(dir, &g(&["skip", "3"]));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not the next one"),
        "{out:?}"
    );
    let state = ok(dir, &["state", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&state).expect("json");
    assert_eq!(
        (v["msgs"].as_u64(), v["last_seq"].as_u64()),
        (Some(1), Some(7))
    );
}
