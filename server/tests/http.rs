//! One-node servers (real processes on loopback) against raw HTTP: no configuration, the
//! token, the body limit, malformed JSON, unknown streams; none of the refused requests
//! changes anything.

mod common;
use common::*;
use std::time::Duration;

const UP: Duration = Duration::from_secs(15);

/// Waits for the one node to lead (it initializes itself), via raw status calls.
fn wait_leader(addr: &str, auth: &[&str]) {
    let t = std::time::Instant::now();
    while t.elapsed() < UP {
        // a node still starting may reset a connection: polled, not asserted
        match try_raw_http(addr, "GET", "/admin/status", auth, b"") {
            Ok((200, body)) if body.contains("\"state\":\"Leader\"") => return,
            Ok(_) => {}
            Err(e) => eprintln!("{addr}: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{addr}: no leader within {UP:?}");
}

fn msgs_of(addr: &str, stream: &str, auth: &[&str]) -> String {
    let (code, body) = raw_http(addr, "GET", &format!("/streams/{stream}"), auth, b"");
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    v["state"]["msgs"].to_string()
}

/// `serve --dir D` and nothing else: a one-node cluster on 127.0.0.1:4480 that answers plain
/// HTTP, and keeps its messages across a restart from D.
#[test]
fn one_node_with_no_configuration_serves_and_recovers() {
    let mut p = Procs::new();
    // the default port, unless something on this machine holds it (then the same run with
    // --listen: what is tested is that no other option is needed)
    let default_free = std::net::TcpListener::bind(seqstore_server::DEFAULT_LISTEN).is_ok();
    let addr = if default_free {
        seqstore_server::DEFAULT_LISTEN.to_string()
    } else {
        eprintln!("127.0.0.1:4480 is busy: running with --listen");
        free_addr()
    };
    let args: Vec<String> = if default_free {
        vec![]
    } else {
        vec!["--listen".into(), addr.clone()]
    };
    p.spawn(1, &args);
    wait_up(&addr, UP);
    wait_leader(&addr, &[]);
    let (code, body) = raw_http(&addr, "PUT", "/streams/orders", &[], b"");
    assert_eq!(code, 200, "{body}");
    let m = br#"{"subject":"orders.new","payload":"first"}"#;
    let (code, body) = raw_http(&addr, "POST", "/streams/orders/messages", &[], m);
    assert_eq!((code, body.as_str()), (200, r#"{"seq":1}"#));
    p.kill9(1);
    p.spawn(1, &args);
    wait_up(&addr, UP);
    wait_leader(&addr, &[]);
    let (code, body) = raw_http(&addr, "GET", "/streams/orders/messages/1", &[], b"");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""payload":"first""#), "{body}");
    let (code, body) = raw_http(
        &addr,
        "GET",
        "/streams/orders/last?subject=orders.%3E",
        &[],
        b"",
    );
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""seq":1"#), "{body}");
}

fn token_node(p: &mut Procs, extra: &[&str]) -> String {
    let addr = free_addr();
    let mut args = vec![
        "--listen".to_string(),
        addr.clone(),
        "--token".into(),
        "s3cret".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    p.spawn(1, &args);
    wait_up(&addr, UP);
    addr
}

const AUTH: &[&str] = &["Authorization: Bearer s3cret"];

/// Without the token, or with a wrong one: 401, logged, and nothing created or appended.
#[test]
fn requests_without_the_token_are_refused_and_change_nothing() {
    let mut p = Procs::new();
    let addr = token_node(&mut p, &[]);
    wait_leader(&addr, AUTH);
    let (code, body) = raw_http(&addr, "PUT", "/streams/a", &[], b"");
    assert_eq!(code, 401, "{body}");
    assert!(body.contains(r#""kind":"unauthorized""#), "{body}");
    let wrong = ["Authorization: Bearer s3creT"];
    let (code, _) = raw_http(&addr, "PUT", "/streams/a", &wrong, b"");
    assert_eq!(code, 401);
    let (code, _) = raw_http(&addr, "POST", "/raft/vote", &[], b"\x00");
    assert_eq!(code, 401, "raft's RPCs need the token too");
    let (code, body) = raw_http(&addr, "GET", "/streams", AUTH, b"");
    assert_eq!((code, body.as_str()), (200, r#"{"streams":[]}"#));
    // the scheme is case-insensitive (RFC 9110)
    let lower = ["Authorization: bearer  s3cret"];
    let (code, _) = raw_http(&addr, "GET", "/streams", &lower, b"");
    assert_eq!(code, 200);
    let (code, _) = raw_http(&addr, "PUT", "/streams/a", AUTH, b"");
    assert_eq!(code, 200);
    let m = br#"{"subject":"x","payload":"y"}"#;
    let (code, _) = raw_http(&addr, "POST", "/streams/a/messages", &wrong, m);
    assert_eq!(code, 401);
    assert_eq!(msgs_of(&addr, "a", AUTH), "0");
    let log = p.stderr(1);
    assert!(
        log.contains("refused PUT /streams/a from 127.0.0.1:"),
        "{log}"
    );
    assert!(log.contains("wrong bearer token"), "{log}");
}

/// An empty SEQSTORE_TOKEN (or `--token ""`) is refused at start with a line saying so: it
/// must not quietly start a node without authentication.
#[test]
fn an_empty_token_is_refused_at_start() {
    let p = Procs::new();
    for (env, args) in [(Some(""), vec![]), (None, vec!["--token", ""])] {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args(["serve", "--listen", &free_addr(), "--dir"])
            .arg(p.dir(1))
            .args(args)
            .env_remove("SEQSTORE_TOKEN")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if let Some(v) = env {
            cmd.env("SEQSTORE_TOKEN", v);
        }
        let mut child = cmd.spawn().expect("spawn seqstore-server");
        let t = std::time::Instant::now();
        while child.try_wait().expect("try_wait").is_none() {
            if t.elapsed() > UP {
                let _ = child.kill();
                panic!("a node started with an empty token ({env:?})");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let out = child.wait_with_output().expect("output");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("bearer token (--token, SEQSTORE_TOKEN) is empty"),
            "{err}"
        );
    }
}

/// A body over `--max-body` is 413, malformed JSON 400, an unknown stream 404, a bad base64
/// payload 400: typed JSON errors, and the stream is unchanged after all of them.
#[test]
fn oversized_malformed_and_unknown_are_typed_errors_that_change_nothing() {
    let mut p = Procs::new();
    let addr = token_node(&mut p, &["--max-body", "1024"]);
    wait_leader(&addr, AUTH);
    let (code, _) = raw_http(&addr, "PUT", "/streams/a", AUTH, br#"{"max_msgs":10}"#);
    assert_eq!(code, 200);
    let big = format!(r#"{{"subject":"x","payload":"{}"}}"#, "y".repeat(2000));
    let (code, body) = raw_http(&addr, "POST", "/streams/a/messages", AUTH, big.as_bytes());
    assert_eq!(code, 413, "{body}");
    assert!(body.contains(r#""kind":"too_large""#), "{body}");
    let (code, body) = raw_http(&addr, "POST", "/streams/a/messages", AUTH, b"{\"subject\":");
    assert_eq!(code, 400, "{body}");
    assert!(body.contains(r#""kind":"bad_request""#), "{body}");
    let unknown_field = br#"{"subject":"x","payload":"y","extra":1}"#;
    let (code, _) = raw_http(&addr, "POST", "/streams/a/messages", AUTH, unknown_field);
    assert_eq!(code, 400);
    let bad_b64 = br#"{"subject":"x","payload_b64":"***"}"#;
    let (code, _) = raw_http(&addr, "POST", "/streams/a/messages", AUTH, bad_b64);
    assert_eq!(code, 400);
    let (code, body) = raw_http(
        &addr,
        "POST",
        "/streams/nope/messages",
        AUTH,
        br#"{"subject":"x"}"#,
    );
    assert_eq!(code, 404, "{body}");
    assert!(body.contains(r#""kind":"unknown_stream""#), "{body}");
    let (code, _) = raw_http(&addr, "PUT", "/streams/a", AUTH, b"");
    assert_eq!(code, 409, "a second create");
    let (code, body) = raw_http(
        &addr,
        "POST",
        "/streams/a/messages",
        AUTH,
        br#"{"subject":"bad..subject"}"#,
    );
    assert_eq!(code, 422, "{body}");
    assert_eq!(msgs_of(&addr, "a", AUTH), "0");
    let ok = br#"{"subject":"x","payload":"y"}"#;
    let (code, body) = raw_http(&addr, "POST", "/streams/a/messages", AUTH, ok);
    assert_eq!(
        (code, body.as_str()),
        (200, r#"{"seq":1}"#),
        "the refusals used no sequence"
    );
}

/// The writes besides append answer their own shapes (a truncate answered `Removed` by the
/// state machine once failed as "unexpected response" after it had been applied).
#[test]
fn truncate_skip_compact_and_purge_answer_their_counts() {
    let mut p = Procs::new();
    let addr = free_addr();
    p.spawn(1, &["--listen".to_string(), addr.clone()]);
    wait_up(&addr, UP);
    wait_leader(&addr, &[]);
    let (code, body) = raw_http(&addr, "PUT", "/streams/t", &[], b"");
    assert_eq!(code, 200, "{body}");
    for i in 0..6 {
        let m = format!(r#"{{"subject":"t.{}","payload":"m{i}"}}"#, i % 2);
        let (code, body) = raw_http(&addr, "POST", "/streams/t/messages", &[], m.as_bytes());
        assert_eq!(code, 200, "{body}");
    }
    let call = |path: &str, body: &str| raw_http(&addr, "POST", path, &[], body.as_bytes());
    assert_eq!(
        call("/streams/t/truncate", r#"{"seq":4}"#),
        (200, r#"{"removed":2}"#.into())
    );
    assert_eq!(
        call("/streams/t/skip", r#"{"count":2}"#),
        (200, r#"{"last_seq":6}"#.into())
    );
    assert_eq!(
        call("/streams/t/compact", r#"{"up_to":2}"#),
        (200, r#"{"removed":1}"#.into())
    );
    let purge_ex = r#"{"filter":"t.0"}"#;
    assert_eq!(
        call("/streams/t/purge", purge_ex),
        (200, r#"{"removed":1}"#.into())
    );
    assert_eq!(
        call("/streams/t/purge", "{}"),
        (200, r#"{"removed":2}"#.into())
    );
    let m = br#"{"subject":"t.0","payload":"next"}"#;
    let (code, body) = raw_http(&addr, "POST", "/streams/t/messages", &[], m);
    assert_eq!(
        (code, body.as_str()),
        (200, r#"{"seq":7}"#),
        "after the skip"
    );
}
