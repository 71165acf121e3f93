//! A profiling target: recovery by scanning the blocks (no index.db), natively and in the
//! guest over host-fs, as `seqstore-bench`'s rebuild cells do it (1M messages of 128 bytes on
//! 64 subjects, the stream dropped without close).
//! `cargo run --release -p seqstore-wasm --example rebuild_profile [MSGS]`; under perf, set
//! `SEQSTORE_WASM_PERFMAP=1` for the guest's symbols and `REBUILD_PROFILE_ONLY=guest` to skip
//! the native opens.

use seqstore_core::surface::StreamStore;
use std::time::Instant;

use seqstore_core::{Config, Store, SyncPolicy};
use seqstore_fs::{HostFs, SystemClock};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let guest_only = std::env::var("REBUILD_PROFILE_ONLY").is_ok_and(|v| v == "guest");
    let subjects: Vec<String> = (0..64).map(|i| format!("orders.eu.{i:06}")).collect();
    let payload = [0x5au8; 128];
    let cfg = Config::default().with_sync(SyncPolicy::Never);
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = || HostFs::open(dir.path()).expect("dir");
    let mut s = Store::builder(fs())
        .config(cfg.clone())
        .clock(SystemClock)
        .open()
        .expect("open");
    for i in 0..n {
        s.append(&subjects[(i % 64) as usize], b"", &payload)
            .expect("append");
    }
    // Dropped without close: no index.db, so every open scans every block.
    drop(s);
    seqstore_wasm::warm_up().expect("compile");
    for round in 0..5 {
        let mut native = f64::NAN;
        if !guest_only {
            let t = Instant::now();
            let s = Store::builder(fs())
                .config(cfg.clone())
                .clock(SystemClock)
                .open()
                .expect("open");
            native = t.elapsed().as_secs_f64();
            assert!(!s.recovery_report().used_index && s.state().msgs == n);
        }
        let t = Instant::now();
        let mut g = seqstore_wasm::GuestStore::from_fs(fs(), cfg.clone(), Box::new(SystemClock))
            .expect("open");
        let guest = t.elapsed().as_secs_f64();
        assert_eq!(g.state().expect("state").msgs, n);
        println!(
            "round {round}: native {:.1} ms guest {:.1} ms ratio {:.3}",
            native * 1e3,
            guest * 1e3,
            native / guest
        );
    }
}
