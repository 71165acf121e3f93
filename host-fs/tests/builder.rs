//! `Store::builder` over a real directory takes the system's wall clock by default.
#![cfg(not(target_os = "wasi"))]

use seqstore_core::{Config, Limits, Store, SyncPolicy};
use seqstore_fs::HostFs;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

#[test]
fn a_real_directory_stamps_wall_clock_time() {
    let dir = tempfile::tempdir().unwrap();
    let before = now_ns();
    let mut s = Store::builder(HostFs::create(dir.path()).unwrap())
        .config(Config::default().with_sync(SyncPolicy::Never))
        .open()
        .unwrap();
    let seq = s.append("a", b"", b"x").unwrap();
    let ts = s.get(seq).unwrap().ts;
    let after = now_ns();
    // SystemClock follows the system time to within its re-anchoring drift
    let slack = Duration::from_millis(200).as_nanos() as i64;
    assert!(
        before - slack <= ts && ts <= after + slack,
        "{before} <= {ts} <= {after}"
    );
    s.close().unwrap();
}

#[test]
fn max_age_zero_is_unlimited_and_a_set_one_expires_by_the_wall_clock() {
    let dir = tempfile::tempdir().unwrap();
    let open = |limits: Limits| {
        Store::builder(HostFs::open(dir.path()).unwrap())
            .config(Config::default().with_limits(limits))
            .open()
            .unwrap()
    };
    let mut s = open(Limits::default());
    s.append("a", b"", b"x").unwrap();
    s.close().unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let s = open(Limits::default());
    assert_eq!(s.state().msgs, 1, "zero max_age removed a message");
    s.close().unwrap();
    let s = open(Limits::default().with_max_age(Duration::from_millis(10)));
    assert_eq!(
        s.state().msgs,
        0,
        "a 30 ms old message outlived a 10 ms max_age"
    );
    s.close().unwrap();
}
