//! A profiling target: unsynced appends in the guest and natively, as `seqstore-bench`'s
//! no-sync cell does them (128-byte payloads, 64 subjects of 16 bytes as the bench's, the system clock).
//! `cargo run --release -p seqstore-wasm --example append_profile [MSGS]`; under perf, set
//! `SEQSTORE_WASM_PERFMAP=1` for the guest's symbols.

use seqstore_core::surface::StreamStore;
use std::time::Instant;

use seqstore_core::{Clock, Config, SyncPolicy};

struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64)
    }
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let subjects: Vec<String> = (0..64).map(|i| format!("orders.eu.{i:06}")).collect();
    let payload = [0x5au8; 128];
    // `APPEND_PROFILE_SYNC=always`: every append durable before it returns.
    let sync = match std::env::var("APPEND_PROFILE_SYNC").as_deref() {
        Ok("always") => SyncPolicy::Always,
        _ => SyncPolicy::Never,
    };
    let cfg = Config::default().with_sync(sync);
    // `APPEND_PROFILE_ONLY=guest` skips the native rounds (a profile of the guest alone).
    let guest_only = std::env::var("APPEND_PROFILE_ONLY").is_ok_and(|v| v == "guest");
    // `APPEND_PROFILE_ROUNDS=N`: rounds, each on a fresh store (default 3).
    let rounds: u32 = std::env::var("APPEND_PROFILE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    seqstore_wasm::warm_up().expect("compile");
    for round in 0..rounds {
        let mut native = f64::NAN;
        if !guest_only {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut s =
                seqstore_core::Store::builder(seqstore_fs::HostFs::open(dir.path()).expect("dir"))
                    .config(cfg.clone())
                    .clock(SystemClock)
                    .open()
                    .expect("open");
            let t = Instant::now();
            for i in 0..n {
                s.append(&subjects[(i % 64) as usize], b"", &payload)
                    .expect("append");
            }
            native = n as f64 / t.elapsed().as_secs_f64();
            drop(s);
        }
        let dir = tempfile::tempdir().expect("tempdir");
        // As seqstore-bench's "guest" cell: the guest's `fs` import served by host-fs.
        let fs = seqstore_fs::HostFs::open(dir.path()).expect("dir");
        let mut g = seqstore_wasm::GuestStore::from_fs(fs, cfg.clone(), Box::new(SystemClock))
            .expect("open");
        let t = Instant::now();
        for i in 0..n {
            g.append(&subjects[(i % 64) as usize], b"", &payload)
                .expect("append");
        }
        let guest = n as f64 / t.elapsed().as_secs_f64();
        // The same count again on the warm instance: what a short run's first appends cost
        // over the steady state (the guest's memory growing, its first block).
        let t = Instant::now();
        for i in 0..n {
            g.append(&subjects[(i % 64) as usize], b"", &payload)
                .expect("append");
        }
        let warm = n as f64 / t.elapsed().as_secs_f64();
        println!("round {round}: guest, warm instance {warm:.0}/s");
        drop(g);
        println!(
            "round {round}: native {native:.0}/s guest {guest:.0}/s ratio {:.2}",
            guest / native
        );
    }
}
