//! The background ticker makes `Interval` syncs happen with no further operation.
#![cfg(not(target_os = "wasi"))]

use seqstore_core::{Config, SharedStore, Store, SyncPolicy};
use seqstore_fs::{HostFs, SystemClock, Ticker};
use std::time::Duration;

#[test]
fn ticker_syncs_an_idle_interval_store() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::default().with_sync(SyncPolicy::Interval(Duration::from_millis(20)));
    let store = Store::builder(HostFs::open(dir.path()).unwrap())
        .config(cfg)
        .clock(SystemClock)
        .open()
        .unwrap();
    let shared = SharedStore::new(store);
    shared.append("a", b"", b"buffered").unwrap();
    let block = dir.path().join("msgs/1.blk");
    // buffered in memory: nothing in the file yet
    assert_eq!(std::fs::metadata(&block).map(|m| m.len()).unwrap_or(0), 0);
    let ticker = Ticker::start(shared.clone(), Duration::from_millis(5), |e| panic!("{e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&block).map(|m| m.len()).unwrap_or(0) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the ticker never synced"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(ticker);
    assert_eq!(shared.with(|s| s.get(1)).unwrap().payload, b"buffered");
}
