//! seqstore against the real nats-server 2.15.1 (`NATS_SERVER_BIN`, else the workspace's
//! `.venv-nats`, made when missing; where it cannot be, the tests print a skip line, and fail
//! under `CI=true`). Every run prints its seed; `SEQSTORE_SEED=S` replays it, and a difference
//! is shrunk to a short list of operations that still differs.

use seqstore_nats_parity::{check, seed_from_env, Harness};
use std::path::PathBuf;

fn server_or_skip(test: &str) -> Option<PathBuf> {
    seqstore_test_setup::nats(test).map(|n| n.server)
}

/// A few hundred operations from a fixed seed (or `SEQSTORE_SEED`), in CI.
#[test]
fn seqstore_answers_as_nats_server_does() {
    let Some(bin) = server_or_skip("seqstore_answers_as_nats_server_does") else {
        return;
    };
    let mut h = Harness::start(&bin).expect("start nats-server");
    let seed = seed_from_env(28);
    for (i, n) in [(0u64, 300usize), (1, 150), (2, 150)] {
        let seed = seed.wrapping_add(i);
        println!("SEQSTORE_SEED={seed}: {n} operations");
        match check(&mut h, seed, n).expect("the harness") {
            Ok(stats) => println!("  ok: {stats:?}"),
            Err(report) => panic!("{report}\nserver log:\n{}", h.server_log()),
        }
    }
}

/// The soak: `SEQSTORE_NATS_OPS` operations (default 5000) from `SEQSTORE_SEED` (default: the
/// clock), in runs of 500. `cargo test -p seqstore-nats-parity -- --ignored`.
#[test]
#[ignore]
fn soak_against_nats_server() {
    let Some(bin) = server_or_skip("soak_against_nats_server") else {
        return;
    };
    let total: usize = std::env::var("SEQSTORE_NATS_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs());
    let seed = seed_from_env(now);
    let mut h = Harness::start(&bin).expect("start nats-server");
    let mut done = 0;
    let mut run = 0u64;
    while done < total {
        let n = 500.min(total - done);
        let s = seed.wrapping_add(run);
        println!("SEQSTORE_SEED={s}: {n} operations");
        if let Err(report) = check(&mut h, s, n).expect("the harness") {
            panic!("{report}");
        }
        done += n;
        run += 1;
    }
}
