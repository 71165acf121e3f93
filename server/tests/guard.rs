//! The amnesia guard's refusals that the cluster test does not reach: no peer answers, and
//! `--bootstrap` on an empty directory beside an existing cluster. (The refusal of a node
//! its peers list as a voter is in tests/cluster.rs.)

mod common;
use common::*;
use std::time::Duration;

fn peers(a: &str, b: &str) -> String {
    format!("1={a},2={b}")
}

fn args(id: u64, addr: &str, peers: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["--id", &id.to_string(), "--listen", addr, "--peers", peers]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// An empty node whose peers never answer cannot tell whether it is still a voter: refused.
#[test]
fn an_empty_node_no_peer_answers_is_refused() {
    let mut p = Procs::new();
    let (a, b) = (free_addr(), free_addr());
    p.spawn(
        2,
        &args(2, &b, &peers(&a, &b), &["--join-timeout-ms", "500"]),
    );
    let st = p
        .wait_exit(2, Duration::from_secs(10))
        .expect("not refused");
    assert!(!st.success());
    let log = p.stderr(2);
    assert!(log.contains("refusing to start"), "{log}");
    assert!(log.contains("no peer answered"), "{log}");
}

/// `--bootstrap` on an empty directory while a peer is already in a cluster would start a
/// second history under the same ids: refused. Without `--bootstrap` the same node starts
/// (it is not a voter there).
#[test]
fn bootstrap_beside_an_existing_cluster_is_refused() {
    let mut p = Procs::new();
    let (a, b) = (free_addr(), free_addr());
    let ps = peers(&a, &b);
    p.spawn(1, &args(1, &a, &ps, &["--bootstrap"]));
    wait_up(&a, Duration::from_secs(15));
    p.spawn(2, &args(2, &b, &ps, &["--bootstrap"]));
    let st = p
        .wait_exit(2, Duration::from_secs(10))
        .expect("not refused");
    assert!(!st.success());
    let log = p.stderr(2);
    assert!(log.contains("already in a cluster"), "{log}");
    p.spawn(2, &args(2, &b, &ps, &[]));
    wait_up(&b, Duration::from_secs(15));
    assert!(
        p.wait_exit(2, Duration::from_millis(300)).is_none(),
        "{}",
        p.stderr(2)
    );
}
