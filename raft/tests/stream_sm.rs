//! The stream state machine's behaviour without crashes: refusals answered and survived, the
//! leader's clock, sequences across purges, and snapshot installs that must not half-happen.

use openraft::testing::log_id;
use openraft::EntryPayload;
use seqstore_fault_fs::{FaultFs, Model};
use seqstore_raft::streams::SnapshotFile;
use seqstore_raft::{ApplyError, Entry, Op, Request, Response, StreamConfig, StreamCore};

fn core() -> StreamCore<FaultFs> {
    StreamCore::open(FaultFs::new(Model::Posix)).expect("open")
}

/// Applies `ops` at the next indices after `core`'s last applied, with clock `ts`.
fn apply(core: &mut StreamCore<FaultFs>, ts: i64, ops: Vec<Op>) -> Vec<Response> {
    let mut next = core.applied().0.map_or(0, |l| l.index + 1);
    ops.into_iter()
        .map(|op| {
            let e = Entry {
                log_id: log_id(1, 1, next),
                payload: EntryPayload::Normal(Request { ts, op }),
            };
            next += 1;
            core.apply(e).expect("apply")
        })
        .collect()
}

fn create(name: &str) -> Op {
    Op::CreateStream {
        name: name.into(),
        config: StreamConfig::default(),
    }
}

fn append(stream: &str, subject: &str) -> Op {
    Op::Append {
        stream: stream.into(),
        subject: subject.into(),
        headers: Vec::new(),
        payload: b"p".to_vec(),
        ttl_ms: 0,
    }
}

#[test]
fn refusals_are_answered_and_the_machine_goes_on() {
    let mut c = core();
    let r = apply(
        &mut c,
        10,
        vec![
            create("s"),
            create("s"),
            create("no/slash"),
            append("t", "a"),
            append("s", "bad subject"),
            Op::Delete {
                stream: "s".into(),
                seq: 7,
            },
            append("s", "a"),
        ],
    );
    assert_eq!(r[0], Response::Done);
    assert_eq!(r[1], Response::Err(ApplyError::StreamExists("s".into())));
    assert_eq!(
        r[2],
        Response::Err(ApplyError::InvalidStreamName("no/slash".into()))
    );
    assert_eq!(r[3], Response::Err(ApplyError::UnknownStream("t".into())));
    assert!(
        matches!(r[4], Response::Err(ApplyError::Refused(_))),
        "{r:?}"
    );
    assert!(
        matches!(r[5], Response::Err(ApplyError::Refused(_))),
        "{r:?}"
    );
    assert_eq!(r[6], Response::Seq(1), "refusals took no sequence");
    assert_eq!(c.applied().0.map(|l| l.index), Some(6));
}

#[test]
fn sequences_survive_purges_and_timestamps_never_go_back() {
    let mut c = core();
    apply(
        &mut c,
        100,
        vec![create("s"), append("s", "a"), append("s", "b")],
    );
    let purge = Op::Purge { stream: "s".into() };
    assert_eq!(apply(&mut c, 200, vec![purge]), vec![Response::Removed(2)]);
    // a new leader whose clock is behind the time applied so far: time does not go back
    let r = apply(&mut c, 50, vec![append("s", "c")]);
    assert_eq!(r, vec![Response::Seq(3)]);
    let m = c.get("s", 3).expect("get").expect("message 3");
    assert_eq!((m.subject.as_str(), m.ts), ("c", 200));
}

#[test]
fn ttls_expire_on_the_logs_time_only() {
    const MS: i64 = 1_000_000;
    let mut c = core();
    let mut op = append("s", "a");
    if let Op::Append { ttl_ms, .. } = &mut op {
        *ttl_ms = 10;
    }
    apply(&mut c, 100 * MS, vec![create("s"), create("t"), op]);
    assert!(
        c.get("s", 1).expect("get").is_some(),
        "expired before its time"
    );
    // time passes only with entries: one on another stream moves it past the deadline
    apply(&mut c, 200 * MS, vec![append("t", "b")]);
    assert!(c.get("s", 1).expect("get").is_none(), "read past its ttl");
    let expire = Op::Expire { stream: "s".into() };
    let r = apply(&mut c, 200 * MS, vec![expire]);
    assert_eq!(r, vec![Response::Removed(1)]);
    let r = apply(&mut c, 210 * MS, vec![append("s", "c")]);
    assert_eq!(r, vec![Response::Seq(2)]);
}

fn snapshot_of(ops: Vec<Op>) -> SnapshotFile {
    let mut leader = core();
    apply(&mut leader, 10, ops);
    leader.build_snapshot().expect("build")
}

#[test]
fn an_install_replaces_every_stream_or_nothing() {
    let mut c = core();
    apply(&mut c, 10, vec![create("old"), append("old", "a")]);
    let good = snapshot_of(vec![create("new"), append("new", "x"), append("new", "y")]);

    let mut torn = good.clone();
    torn.data.truncate(torn.data.len() / 2);
    assert!(
        c.install_snapshot(torn).is_err(),
        "a torn snapshot installed"
    );
    let mut other = good.clone();
    other.meta.last_log_id = Some(log_id(1, 1, 99));
    assert!(c.install_snapshot(other).is_err(), "mismatched metadata");
    assert_eq!(
        c.stream_names(),
        vec!["old".to_string()],
        "a refused install changed state"
    );
    assert!(c.get("old", 1).expect("get").is_some());

    c.install_snapshot(good.clone()).expect("install");
    assert_eq!(c.stream_names(), vec!["new".to_string()]);
    assert_eq!(c.applied().0, good.meta.last_log_id);
    assert_eq!(
        apply(&mut c, 20, vec![append("new", "z")]),
        vec![Response::Seq(3)]
    );
}
