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

/// A store restored from a snapshot stamps new messages with the clock `Store::open` would
/// give it (here the directory's wall clock), not with the snapshot's last timestamp: a message
/// appended just after a restore of old messages survives a reopen with a `max_age` that
/// expires the old ones.
#[test]
fn a_message_appended_after_a_restore_carries_the_wall_clock() {
    let two_hours = Duration::from_secs(2 * 3600).as_nanos() as i64;
    let src = tempfile::tempdir().unwrap();
    let old = seqstore_core::ManualClock::new(now_ns() - two_hours);
    let mut s = Store::builder(HostFs::create(src.path()).unwrap())
        .clock(old)
        .open()
        .unwrap();
    for i in 0..3u8 {
        s.append("old", b"", &[i]).unwrap();
    }
    let mut snap = Vec::new();
    s.snapshot_to(&mut snap).unwrap();
    s.close().unwrap();

    let dst = tempfile::tempdir().unwrap();
    let (mut r, _) = seqstore_core::restore(
        HostFs::create(dst.path()).unwrap(),
        Config::default(),
        &snap[..],
    )
    .unwrap();
    let before = now_ns();
    let seq = r.append("new", b"", b"x").unwrap();
    let ts = r.get(seq).unwrap().ts;
    assert!(
        ts >= before - two_hours / 4,
        "appended at {ts}, {before} was now"
    );
    r.close().unwrap();

    let s = Store::builder(HostFs::open(dst.path()).unwrap())
        .config(
            Config::default()
                .with_limits(Limits::default().with_max_age(Duration::from_secs(3600))),
        )
        .open()
        .unwrap();
    let st = s.state();
    assert_eq!(
        (st.msgs, st.first_seq),
        (1, seq),
        "the message appended after the restore expired"
    );
    s.close().unwrap();
}
