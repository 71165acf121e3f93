//! `Op::Batch` and the `Batcher`.
//!
//! - `a_batch_is_its_ops_in_consecutive_entries`: seeded random operations (every kind,
//!   refusals and nested batches included), applied once as random chunks each in one
//!   `Op::Batch` entry and once each in its own entry at its chunk's `ts`: the responses and the
//!   streams must be equal. `SEQSTORE_SEED=<n>` replays one seed (printed on failure);
//!   `SEQSTORE_RUNS=<n>` runs that many.
//! - The batcher on a one-node cluster: concurrent writes share entries, each gets its own
//!   response (distinct, consecutive sequences); a write too large for the log is refused
//!   before it is proposed; a 1 MiB payload (a stream's default limit) commits.

use crate::nowhere;

use openraft::testing::log_id;
use openraft::{BasicNode, Config, EntryPayload, Raft};
use seqstore_fault_fs::{FaultFs, Model, Rng};
use seqstore_raft::batch::{BatchLimits, Batcher, Clock, WriteError};
use seqstore_raft::{
    ApplyError, Entry, LogConfig, LogStore, Op, Request, Response, StreamConfig, StreamCore,
    StreamStateMachine, TypeConfig, MAX_REQUEST_BYTES,
};
use std::collections::BTreeMap;
use std::sync::Arc;

const STREAMS: &[&str] = &["a", "b", "bad/name"];

/// One random operation of any kind; `depth` 0 may hold a (nested) batch.
fn random_op(rng: &mut Rng, depth: u32) -> Op {
    let stream = rng.pick(STREAMS).to_string();
    match rng.below(12) {
        0 => Op::CreateStream {
            name: stream,
            config: StreamConfig::default(),
        },
        1 if rng.chance(30) => Op::DeleteStream { name: stream },
        2 => Op::Delete {
            stream,
            seq: rng.within(1, 12),
        },
        3 if rng.chance(30) => Op::Purge { stream },
        4 => Op::PurgeEx {
            stream,
            filter: rng.pick(&[">", "x", "y.*", "bad subject"]).to_string(),
            up_to_seq: rng.below(10),
            keep: rng.below(3),
        },
        5 => Op::Compact {
            stream,
            up_to: rng.within(1, 10),
        },
        6 if rng.chance(30) => Op::Truncate {
            stream,
            seq: rng.below(10),
        },
        7 => Op::Expire { stream },
        8 => Op::Skip {
            stream,
            count: rng.below(3),
        },
        9 if depth == 0 => Op::Batch {
            ops: (0..rng.below(4)).map(|_| random_op(rng, 1)).collect(),
        },
        _ => Op::Append {
            stream,
            subject: rng.pick(&["x", "y.z", "bad subject", ""]).to_string(),
            headers: Vec::new(),
            payload: rng.bytes(8),
            ttl_ms: if rng.chance(20) { rng.within(1, 5) } else { 0 },
        },
    }
}

fn apply_at(core: &mut StreamCore<FaultFs>, index: &mut u64, ts: i64, op: Op) -> Response {
    let e = Entry {
        log_id: log_id(1, 1, *index),
        payload: EntryPayload::Normal(Request { ts, op }),
    };
    *index += 1;
    core.apply(e).expect("apply")
}

/// Both ways for one seed; `Err` says where they differ.
fn batched_equals_unbatched(seed: u64) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let open = || StreamCore::open(FaultFs::new(Model::Posix)).expect("open");
    let (mut batched, mut single) = (open(), open());
    let (mut bi, mut si) = (0, 0);
    let mut ts = 1_000_000i64;
    for round in 0..40 {
        // the clock moves by ms, so ttls (1–5 ms) expire between rounds
        ts += rng.below(3_000_000) as i64;
        let ops: Vec<Op> = (0..rng.within(1, 8))
            .map(|_| random_op(&mut rng, 0))
            .collect();
        if std::env::var_os("SEQSTORE_BATCH_TRACE").is_some() {
            println!("round {round} ts {ts}: {ops:?}");
        }
        let got = match apply_at(&mut batched, &mut bi, ts, Op::Batch { ops: ops.clone() }) {
            Response::Batch(v) => v,
            other => return Err(format!("round {round}: a batch answered {other:?}")),
        };
        let want: Vec<Response> = (ops.into_iter())
            .map(|op| match op {
                // refused inside a batch: nothing of it applies, but its entry's time does
                // (a refused request's entry moves the clock too)
                Op::Batch { .. } => {
                    let noop = Op::Skip {
                        stream: "bad/name".into(), // never a stream: always refused
                        count: 1,
                    };
                    apply_at(&mut single, &mut si, ts, noop);
                    Response::Err(ApplyError::Refused("a batch in a batch".into()))
                }
                op => apply_at(&mut single, &mut si, ts, op),
            })
            .collect();
        if got != want {
            return Err(format!("round {round}: {got:?} != {want:?}"));
        }
        let (db, ds) = (batched.dump(), single.dump());
        if format!("{db:?}") != format!("{ds:?}") {
            return Err(format!("round {round}: streams differ: {db:?} != {ds:?}"));
        }
    }
    Ok(())
}

#[test]
fn a_batch_is_its_ops_in_consecutive_entries() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let first = env("SEQSTORE_SEED").unwrap_or(0xba7c_0000);
    let runs = env("SEQSTORE_RUNS").unwrap_or(if env("SEQSTORE_SEED").is_some() {
        1
    } else {
        200
    });
    for seed in first..first + runs {
        if let Err(e) = batched_equals_unbatched(seed) {
            panic!("seed {seed} (SEQSTORE_SEED={seed} replays it): {e}");
        }
    }
    println!("{runs} seeds from {first}: batched == unbatched");
}

/// A one-node cluster on fault-fs (inline I/O: one thread) and its state machine.
async fn one_node() -> (Raft<TypeConfig>, StreamStateMachine<FaultFs>) {
    let log = LogStore::open(
        FaultFs::new(Model::Posix),
        LogConfig::default().with_inline_io(true),
    )
    .expect("log");
    let sm = StreamStateMachine::open(FaultFs::new(Model::Posix))
        .expect("sm")
        .with_inline_io(true);
    let config = Arc::new(Config::default().validate().expect("config"));
    let raft = Raft::new(1, config, nowhere::Nowhere, log, sm.clone())
        .await
        .expect("raft");
    let members = BTreeMap::from([(1, BasicNode::new("-"))]);
    raft.initialize(members).await.expect("initialize");
    raft.wait(None)
        .current_leader(1, "leader")
        .await
        .expect("leads");
    (raft, sm)
}

fn fixed_clock() -> Clock {
    Arc::new(|| 1_000_000_000)
}

fn append(payload: Vec<u8>) -> Op {
    Op::Append {
        stream: "s".into(),
        subject: "x".into(),
        headers: Vec::new(),
        payload,
        ttl_ms: 0,
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn concurrent_writes_share_entries_and_keep_their_own_answers() {
    let (raft, _sm) = one_node().await;
    let b = Batcher::start(raft.clone(), BatchLimits::default(), fixed_clock());
    let create = Op::CreateStream {
        name: "s".into(),
        config: StreamConfig::default(),
    };
    assert_eq!(
        b.write(create).await.expect("create").response,
        Response::Done
    );
    let before = raft.metrics().borrow().last_log_index.expect("entries");
    let writes: Vec<_> = (0..64u8)
        .map(|i| {
            let b = b.clone();
            tokio::spawn(async move { b.write(append(vec![i])).await })
        })
        .collect();
    let mut seqs = Vec::new();
    for w in writes {
        match w.await.expect("task").expect("write").response {
            Response::Seq(s) => seqs.push(s),
            other => panic!("an append answered {other:?}"),
        }
    }
    let entries = raft.metrics().borrow().last_log_index.expect("entries") - before;
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=64).collect::<Vec<u64>>(), "one sequence each");
    assert!(
        entries < 64,
        "64 writes took {entries} entries: nothing was batched"
    );
    raft.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn too_large_is_refused_unproposed_and_a_full_size_message_commits() {
    let (raft, sm) = one_node().await;
    let b = Batcher::start(raft.clone(), BatchLimits::default(), fixed_clock());
    let create = Op::CreateStream {
        name: "s".into(),
        config: StreamConfig::default(),
    };
    b.write(create).await.expect("create");
    let before = raft.metrics().borrow().last_log_index;
    match b.write(append(vec![0; MAX_REQUEST_BYTES + 1])).await {
        Err(WriteError::TooLarge { size, max }) => assert!(size > max),
        other => panic!("a write larger than the log takes: {other:?}"),
    }
    assert_eq!(
        raft.metrics().borrow().last_log_index,
        before,
        "it was proposed"
    );
    // the stream's own limit (1 MiB payloads by default) fits in one log entry
    let w = b
        .write(append(vec![7; 1 << 20]))
        .await
        .expect("a 1 MiB payload");
    assert_eq!(w.response, Response::Seq(1));
    let m = sm.get("s", 1).expect("get").expect("stored");
    assert_eq!(m.payload.len(), 1 << 20);
    // and one byte more is the stream's refusal, not the node's failure
    let w = b
        .write(append(vec![7; (1 << 20) + 1]))
        .await
        .expect("answered");
    assert!(matches!(w.response, Response::Err(_)), "{:?}", w.response);
    raft.shutdown().await.expect("shutdown");
}
