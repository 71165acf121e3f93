//! Durable appends (`SyncPolicy::Always`) in the guest and natively, one append at a time in
//! turn, so that both sides see the same fsync latency: the per-append latency of each side
//! and their difference, whatever the disk is doing. 128-byte payloads, 4 subjects.
//! `cargo run --release -p seqstore-wasm --example sync_profile [APPENDS]`;
//! `SYNC_PROFILE_DIR` (default the system temp dir) picks the filesystem (tmpfs: CPU alone).

use seqstore_core::surface::StreamStore;
use std::time::{Duration, Instant};

use seqstore_core::{Config, ManualClock, Store, SyncPolicy};

fn tempdir() -> tempfile::TempDir {
    match std::env::var_os("SYNC_PROFILE_DIR") {
        Some(d) => tempfile::tempdir_in(d).expect("SYNC_PROFILE_DIR"),
        None => tempfile::tempdir().expect("tempdir"),
    }
}

fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[(v.len() - 1) * p / 100]
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let subjects = ["orders.eu", "orders.us", "audit.log", "metrics.cpu"];
    let payload = [0x5au8; 128];
    let cfg = Config::default().with_sync(SyncPolicy::Always);
    let clock = || Box::new(ManualClock::new(1_700_000_000_000_000_000));
    seqstore_wasm::warm_up().expect("compile");
    let (dn, dg) = (tempdir(), tempdir());
    let mut s = Store::builder(seqstore_fs::HostFs::open(dn.path()).expect("dir"))
        .config(cfg.clone())
        .clock(clock())
        .open()
        .expect("open");
    let mut g = seqstore_wasm::GuestStore::from_fs(
        seqstore_fs::HostFs::open(dg.path()).expect("dir"),
        cfg,
        clock(),
    )
    .expect("open");
    let (mut nat, mut gst) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let subject = subjects[i % 4];
        // Alternate which side goes first: the one after a fsync may find colder caches.
        let mut native = || {
            let t = Instant::now();
            s.append(subject, b"", &payload).expect("append");
            t.elapsed()
        };
        let mut guest = || {
            let t = Instant::now();
            g.append(subject, b"", &payload).expect("append");
            t.elapsed()
        };
        if i % 2 == 0 {
            nat.push(native());
            gst.push(guest());
        } else {
            gst.push(guest());
            nat.push(native());
        }
    }
    let diffs: Vec<i64> = nat
        .iter()
        .zip(&gst)
        .map(|(a, b)| b.as_nanos() as i64 - a.as_nanos() as i64)
        .collect();
    let mut sorted = diffs.clone();
    sorted.sort();
    let total = |v: &[Duration]| v.iter().sum::<Duration>();
    let (tn, tg) = (total(&nat), total(&gst));
    println!(
        "{n} appends each, interleaved: native mean {:?}, guest mean {:?}, ratio of rates {:.3}",
        tn / n as u32,
        tg / n as u32,
        tn.as_secs_f64() / tg.as_secs_f64()
    );
    for p in [10, 50, 90, 99] {
        println!(
            "  p{p}: native {:?} guest {:?}; guest - native, paired: {} ns",
            pct(&mut nat.clone(), p),
            pct(&mut gst.clone(), p),
            sorted[(sorted.len() - 1) * p / 100]
        );
    }
}
