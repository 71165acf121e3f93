//! Consumers in the stream state machine: adds, deletes, pulls and acks are log
//! entries; a pull is decided from the replicated state at the log's time; refusals are typed
//! answers; snapshots carry the consumers. A seeded random workload is checked against a
//! simple model (`SEQSTORE_SEED=<n>` replays one seed, `SEQSTORE_SM_SEEDS=<n>` runs more).

use openraft::testing::log_id;
use openraft::EntryPayload;
use seqstore_fault_fs::{FaultFs, Model, Rng};
use seqstore_raft::types::{AckPolicy, ConsumerConfig, Delivery};
use seqstore_raft::{ApplyError, ConsumerInfo, Entry, Op, Request, Response, StreamConfig};
use seqstore_raft::{StreamCore, StreamStateMachine};
use std::collections::BTreeMap;

const MS: i64 = 1_000_000;

fn core() -> StreamCore<FaultFs> {
    StreamCore::open(FaultFs::new(Model::Posix)).expect("open")
}

/// Applies `op` at the next index after `core`'s last applied, with clock `ts`.
fn apply1(core: &mut StreamCore<FaultFs>, ts: i64, op: Op) -> Response {
    let next = core.applied().0.map_or(0, |l| l.index + 1);
    let e = Entry {
        log_id: log_id(1, 1, next),
        payload: EntryPayload::Normal(Request { ts, op }),
    };
    core.apply(e).expect("apply")
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
        payload: subject.as_bytes().to_vec(),
        ttl_ms: 0,
    }
}

fn add(stream: &str, name: &str, ack_policy: AckPolicy, max_deliver: u64) -> Op {
    Op::ConsumerAdd {
        stream: stream.into(),
        name: name.into(),
        config: ConsumerConfig {
            ack_policy,
            max_deliver,
        },
    }
}

fn next(stream: &str, name: &str, filter: &str, batch: u32, ack_wait_ms: u64) -> Op {
    Op::ConsumerNext {
        stream: stream.into(),
        name: name.into(),
        filter: filter.into(),
        batch,
        ack_wait_ms,
    }
}

fn ack(stream: &str, name: &str, stream_seq: u64) -> Op {
    Op::ConsumerAck {
        stream: stream.into(),
        name: name.into(),
        stream_seq,
    }
}

/// (stream seq, consumer seq, delivery count) of a pull's answer.
fn got(r: &Response) -> Vec<(u64, u64, u64)> {
    match r {
        Response::Delivered(d) => d
            .iter()
            .map(|d| (d.stream_seq, d.consumer_seq, d.delivery_count))
            .collect(),
        other => panic!("not a delivery: {other:?}"),
    }
}

fn info(c: &StreamCore<FaultFs>, stream: &str, name: &str) -> ConsumerInfo {
    c.consumer_info(stream, name)
        .expect("info")
        .expect("consumer exists")
}

#[test]
fn pulls_deliver_in_order_and_acks_move_the_floor() {
    let mut c = core();
    apply1(&mut c, 10, create("s"));
    for subj in ["a", "b", "a", "a"] {
        apply1(&mut c, 10, append("s", subj));
    }
    assert_eq!(
        apply1(&mut c, 10, add("s", "c", AckPolicy::Explicit, 0)),
        Response::Done
    );
    let r = apply1(&mut c, 20, next("s", "c", "a", 2, 0));
    assert_eq!(got(&r), vec![(1, 1, 1), (3, 2, 1)]);
    let Response::Delivered(d) = &r else {
        unreachable!()
    };
    assert_eq!((d[1].subject.as_str(), &d[1].payload[..]), ("a", &b"a"[..]));
    // the filtered-out 2 is passed over for good; the next pull goes on after 3
    assert_eq!(
        got(&apply1(&mut c, 30, next("s", "c", "", 5, 0))),
        vec![(4, 3, 1)]
    );
    assert_eq!(got(&apply1(&mut c, 30, next("s", "c", ">", 5, 0))), vec![]);
    let i = info(&c, "s", "c");
    assert_eq!((i.delivered.consumer, i.delivered.stream), (3, 4));
    assert_eq!(i.ack_floor.stream, 0);
    assert_eq!(
        i.pending.iter().map(|p| p.stream_seq).collect::<Vec<_>>(),
        [1, 3, 4]
    );
    assert_eq!(i.pending[0].ts, 20, "delivered at the log's time");

    assert_eq!(apply1(&mut c, 40, ack("s", "c", 3)), Response::Done);
    assert_eq!(info(&c, "s", "c").ack_floor.stream, 0, "1 is still pending");
    assert_eq!(apply1(&mut c, 40, ack("s", "c", 1)), Response::Done);
    let i = info(&c, "s", "c");
    assert_eq!((i.ack_floor.consumer, i.ack_floor.stream), (2, 3));
    assert!(i.is_acked(3) && !i.is_acked(4));
}

/// Consumer requests on a stream `s` with consumers `c` (explicit) and `n` (no acks) and
/// one message never delivered, and the refusal each must be answered with.
fn typed_refusals() -> Vec<(Op, ApplyError)> {
    let unknown = |n: &str| ApplyError::UnknownConsumer {
        stream: "s".into(),
        name: n.into(),
    };
    vec![
        (
            add("t", "c", AckPolicy::Explicit, 0),
            ApplyError::UnknownStream("t".into()),
        ),
        (
            next("t", "c", ">", 1, 0),
            ApplyError::UnknownStream("t".into()),
        ),
        (
            add("s", "c", AckPolicy::All, 0),
            ApplyError::ConsumerExists {
                stream: "s".into(),
                name: "c".into(),
            },
        ),
        (
            add("s", "a.b", AckPolicy::All, 0),
            ApplyError::InvalidConsumerName("a.b".into()),
        ),
        (next("s", "x", ">", 1, 0), unknown("x")),
        (ack("s", "x", 1), unknown("x")),
        (
            Op::ConsumerDelete {
                stream: "s".into(),
                name: "x".into(),
            },
            unknown("x"),
        ),
        (
            ack("s", "c", 1),
            ApplyError::NotPending {
                stream: "s".into(),
                name: "c".into(),
                stream_seq: 1,
            },
        ),
    ]
}

#[test]
fn consumer_refusals_are_typed_answers_that_change_nothing() {
    let mut c = core();
    apply1(&mut c, 10, create("s"));
    apply1(&mut c, 10, append("s", "a"));
    apply1(&mut c, 10, add("s", "c", AckPolicy::Explicit, 0));
    apply1(&mut c, 10, add("s", "n", AckPolicy::None, 0));
    let before = c.dump().expect("dump");
    let cases = typed_refusals();
    for (op, want) in cases {
        let text = format!("{op:?}");
        assert_eq!(apply1(&mut c, 20, op), Response::Err(want), "{text}");
    }
    for op in [
        next("s", "c", ">", 0, 0),
        next("s", "c", ">", 257, 0),
        next("s", "c", "bad..filter", 1, 0),
        ack("s", "n", 1),
    ] {
        let text = format!("{op:?}");
        let r = apply1(&mut c, 20, op);
        assert!(
            matches!(r, Response::Err(ApplyError::Refused(_))),
            "{text}: {r:?}"
        );
    }
    assert_eq!(c.dump().expect("dump"), before, "a refusal changed state");
    // the same config again is no refusal
    assert_eq!(
        apply1(&mut c, 20, add("s", "c", AckPolicy::Explicit, 0)),
        Response::Done
    );
}

#[test]
fn redeliveries_follow_the_logs_time_and_max_deliver() {
    let mut c = core();
    apply1(&mut c, 0, create("s"));
    apply1(&mut c, 0, append("s", "a"));
    apply1(&mut c, 0, add("s", "c", AckPolicy::Explicit, 2));
    assert_eq!(
        got(&apply1(&mut c, 100 * MS, next("s", "c", ">", 5, 50))),
        vec![(1, 1, 1)]
    );
    // 49 ms of the log's time later: not due (whatever any machine's clock says)
    assert_eq!(
        got(&apply1(&mut c, 149 * MS, next("s", "c", ">", 5, 50))),
        vec![]
    );
    // a leader whose clock is behind: the log's time does not go back, still not due
    assert_eq!(
        got(&apply1(&mut c, 10 * MS, next("s", "c", ">", 5, 50))),
        vec![]
    );
    assert_eq!(
        got(&apply1(&mut c, 150 * MS, next("s", "c", ">", 5, 50))),
        vec![(1, 2, 2)]
    );
    let i = info(&c, "s", "c");
    assert_eq!((i.pending[0].ts, i.pending[0].redelivered), (150 * MS, 1));
    // max_deliver 2: delivered twice, it is not delivered again but still acknowledgeable
    assert_eq!(
        got(&apply1(&mut c, 900 * MS, next("s", "c", ">", 5, 50))),
        vec![]
    );
    assert_eq!(apply1(&mut c, 900 * MS, ack("s", "c", 1)), Response::Done);
    let i = info(&c, "s", "c");
    assert_eq!((i.ack_floor.consumer, i.ack_floor.stream), (2, 1));
}

#[test]
fn snapshots_and_reopens_carry_the_consumers() {
    let fs = FaultFs::new(Model::Posix);
    let mut c = StreamCore::open(fs.clone()).expect("open");
    apply1(&mut c, 0, create("s"));
    for _ in 0..4 {
        apply1(&mut c, 0, append("s", "a"));
    }
    apply1(&mut c, 0, add("s", "c", AckPolicy::Explicit, 0));
    apply1(&mut c, 0, add("s", "all", AckPolicy::All, 3));
    apply1(&mut c, 10 * MS, next("s", "c", ">", 3, 0));
    apply1(&mut c, 10 * MS, next("s", "all", ">", 4, 0));
    apply1(&mut c, 10 * MS, ack("s", "c", 1));
    apply1(&mut c, 10 * MS, ack("s", "all", 2));
    let want = c.dump().expect("dump");
    assert_eq!(want["s"].consumers.len(), 2);
    assert_eq!(want["s"].consumers["c"].ack_floor.stream, 1);
    let snap = c.build_snapshot().expect("build");
    drop(c);
    let reopened = StreamCore::open(fs).expect("reopen").dump().expect("dump");
    assert_eq!(reopened, want, "a reopen lost consumer state");
    let mut other = core();
    other.install_snapshot(snap).expect("install");
    assert_eq!(
        other.dump().expect("dump"),
        want,
        "an install lost consumer state"
    );
    // and the installed consumer goes on where it was
    let r = apply1(&mut other, 20 * MS, next("s", "c", ">", 5, 0));
    assert_eq!(got(&r), vec![(4, 4, 1)]);
}

#[test]
fn the_wire_shapes_round_trip_through_postcard() {
    let ops = [
        add("s", "c", AckPolicy::All, 3),
        next("s", "c", "a.>", 7, 30_000),
        ack("s", "c", 9),
        Op::ConsumerDelete {
            stream: "s".into(),
            name: "c".into(),
        },
    ];
    for op in ops {
        let req = Request { ts: 5, op };
        let bytes = postcard::to_stdvec(&req).expect("encode");
        assert_eq!(
            postcard::from_bytes::<Request>(&bytes).expect("decode"),
            req
        );
    }
    let resp = Response::Delivered(vec![Delivery {
        stream_seq: 1,
        consumer_seq: 2,
        delivery_count: 3,
        subject: "a".into(),
        ts: 4,
        headers: vec![5],
        payload: vec![6],
    }]);
    let bytes = postcard::to_stdvec(&resp).expect("encode");
    assert_eq!(
        postcard::from_bytes::<Response>(&bytes).expect("decode"),
        resp
    );
}

#[test]
fn the_state_machine_serves_consumer_info() {
    let fs = FaultFs::new(Model::Posix);
    let sm = StreamStateMachine::open(fs).expect("open");
    assert_eq!(sm.consumer_info("s", "c").expect("info"), None);
    sm.with_core(|core| {
        apply1(core, 0, create("s"));
        apply1(core, 0, add("s", "c", AckPolicy::None, 0));
    });
    let i = sm.consumer_info("s", "c").expect("info").expect("exists");
    assert_eq!(i.config.ack_policy, AckPolicy::None);
    assert_eq!(sm.consumer_info("s", "x").expect("info"), None);
}

// ----- the seeded random workload against a model -----

/// What a consumer should hold, by the rules the state machine promises: deliveries in
/// stream order past the last delivered, redeliveries of what is pending and due, acks of
/// what is pending (`All`: everything pending at or below too), removals acknowledging.
#[derive(Clone, Debug, Default)]
struct ModelConsumer {
    all: bool,
    max_deliver: u64,
    delivered_stream: u64,
    delivered_consumer: u64,
    /// stream seq -> (last delivery's time, deliveries)
    pending: BTreeMap<u64, (i64, u64)>,
    /// The ack floor seen last (this incarnation): it must never go back.
    floor: (u64, u64),
}

#[derive(Default)]
struct ModelStream {
    /// seq -> subject of the messages present.
    msgs: BTreeMap<u64, String>,
    last: u64,
    consumers: BTreeMap<String, ModelConsumer>,
}

const SUBJECTS: [&str; 3] = ["a", "b", "a.x"];
const NAMES: [&str; 3] = ["c1", "c2", "bad.name"];

fn matches(filter: &str, subject: &str) -> bool {
    match filter {
        ">" => true,
        "a.*" => subject.starts_with("a."),
        f => f == subject,
    }
}

impl ModelStream {
    /// The answer the model expects for `op` at time `now`, and the model's new state.
    fn apply(&mut self, op: &Op, now: i64) -> Response {
        match op {
            Op::Append { subject, .. } => {
                self.last += 1;
                self.msgs.insert(self.last, subject.clone());
                Response::Seq(self.last)
            }
            Op::Delete { seq, .. } => match self.msgs.remove(seq) {
                Some(_) => {
                    // a removal acknowledges a pending message (`All`: and all below it)
                    for c in self.consumers.values_mut() {
                        if c.pending.remove(seq).is_some() && c.all {
                            c.pending.retain(|&q, _| q > *seq);
                        }
                    }
                    Response::Removed(1)
                }
                None => Response::Err(ApplyError::Refused(String::new())),
            },
            Op::Purge { .. } => {
                let n = self.msgs.len() as u64;
                self.msgs.clear();
                for c in self.consumers.values_mut() {
                    c.pending.clear();
                    c.delivered_stream = c.delivered_stream.max(self.last);
                }
                Response::Removed(n)
            }
            Op::ConsumerAdd { name, config, .. } => self.add(name, config),
            Op::ConsumerDelete { name, .. } if name.contains('.') => {
                Response::Err(ApplyError::InvalidConsumerName(name.clone()))
            }
            Op::ConsumerDelete { name, .. } => match self.consumers.remove(name) {
                Some(_) => Response::Done,
                None => self.unknown(name),
            },
            Op::ConsumerNext {
                name,
                filter,
                batch,
                ack_wait_ms,
                ..
            } => self.next(name, filter, *batch, *ack_wait_ms as i64 * MS, now),
            Op::ConsumerAck {
                name, stream_seq, ..
            } => self.ack(name, *stream_seq),
            other => panic!("not in the model: {other:?}"),
        }
    }

    fn unknown(&self, name: &str) -> Response {
        Response::Err(ApplyError::UnknownConsumer {
            stream: "s".into(),
            name: name.into(),
        })
    }

    fn add(&mut self, name: &str, config: &ConsumerConfig) -> Response {
        if name.contains('.') {
            return Response::Err(ApplyError::InvalidConsumerName(name.into()));
        }
        let all = config.ack_policy == AckPolicy::All;
        if let Some(c) = self.consumers.get(name) {
            if (c.all, c.max_deliver) == (all, config.max_deliver) {
                return Response::Done;
            }
            return Response::Err(ApplyError::ConsumerExists {
                stream: "s".into(),
                name: name.into(),
            });
        }
        // a new consumer starts at the stream's first message
        let first = self.msgs.keys().next().copied().unwrap_or(self.last + 1);
        let c = ModelConsumer {
            all,
            max_deliver: config.max_deliver,
            delivered_stream: first - 1,
            floor: (0, first - 1),
            ..ModelConsumer::default()
        };
        self.consumers.insert(name.into(), c);
        Response::Done
    }

    fn next(&mut self, name: &str, filter: &str, batch: u32, wait: i64, now: i64) -> Response {
        let Some(c) = self.consumers.get_mut(name) else {
            return self.unknown(name);
        };
        let mut out = Vec::new();
        if wait > 0 {
            for (&q, p) in c.pending.iter_mut() {
                let due = p.0 + wait <= now && (c.max_deliver == 0 || p.1 < c.max_deliver);
                if due && out.len() < batch as usize {
                    c.delivered_consumer += 1;
                    *p = (now, p.1 + 1);
                    out.push((q, c.delivered_consumer, p.1));
                }
            }
        }
        let new = (self.msgs.range(c.delivered_stream + 1..))
            .filter(|(_, s)| matches(filter, s))
            .map(|(&q, _)| q)
            .take(batch as usize - out.len())
            .collect::<Vec<_>>();
        for q in new {
            c.delivered_consumer += 1;
            c.delivered_stream = q;
            c.pending.insert(q, (now, 1));
            out.push((q, c.delivered_consumer, 1));
        }
        Response::Delivered(model_deliveries(&out))
    }

    fn ack(&mut self, name: &str, seq: u64) -> Response {
        let Some(c) = self.consumers.get_mut(name) else {
            return self.unknown(name);
        };
        if c.pending.remove(&seq).is_none() {
            return Response::Err(ApplyError::NotPending {
                stream: "s".into(),
                name: name.into(),
                stream_seq: seq,
            });
        }
        if c.all {
            c.pending.retain(|&q, _| q > seq);
        }
        Response::Done
    }
}

/// The model's deliveries as the state machine answers them, but for the message bytes,
/// which the comparison leaves out.
fn model_deliveries(d: &[(u64, u64, u64)]) -> Vec<Delivery> {
    (d.iter())
        .map(|&(stream_seq, consumer_seq, delivery_count)| Delivery {
            stream_seq,
            consumer_seq,
            delivery_count,
            subject: String::new(),
            ts: 0,
            headers: Vec::new(),
            payload: Vec::new(),
        })
        .collect()
}

/// Whether the state machine's answer is the model's (message bytes and refusal texts aside).
fn same_answer(got: &Response, want: &Response) -> bool {
    let key = |d: &Vec<Delivery>| -> Vec<(u64, u64, u64)> {
        d.iter()
            .map(|d| (d.stream_seq, d.consumer_seq, d.delivery_count))
            .collect()
    };
    match (got, want) {
        (Response::Delivered(g), Response::Delivered(w)) => key(g) == key(w),
        (Response::Err(ApplyError::Refused(_)), Response::Err(ApplyError::Refused(_))) => true,
        (g, w) => g == w,
    }
}

fn random_op(rng: &mut Rng, m: &ModelStream) -> Op {
    let name = rng.pick(&NAMES).to_string();
    let s = "s".to_string();
    match rng.below(100) {
        0..=29 => {
            let subject: &&str = rng.pick(&SUBJECTS);
            append("s", subject)
        }
        30..=35 => Op::Delete {
            stream: s,
            seq: rng.within(1, m.last + 1),
        },
        36..=37 => Op::Purge { stream: s },
        38..=44 => {
            let policy = if rng.chance(50) {
                AckPolicy::Explicit
            } else {
                AckPolicy::All
            };
            add("s", &name, policy, rng.below(4))
        }
        45..=46 => Op::ConsumerDelete { stream: s, name },
        47..=71 => {
            let filter = *rng.pick(&[">", "a", "a.*", ">"]);
            let wait = *rng.pick(&[0, 20, 50]);
            next("s", &name, filter, rng.within(1, 4) as u32, wait)
        }
        _ => {
            // mostly a pending message, sometimes any sequence
            let pending: Vec<u64> = m
                .consumers
                .get(&name)
                .map(|c| c.pending.keys().copied().collect())
                .unwrap_or_default();
            let seq = match pending.is_empty() || rng.chance(5) {
                true => rng.within(1, m.last + 1),
                false => *rng.pick(&pending),
            };
            ack("s", &name, seq)
        }
    }
}

/// Checks the state machine's consumers against the model: the same delivered pair and
/// pending set; the ack floor never back, below every pending message, the last delivery
/// when nothing is pending.
fn check_consumers(c: &StreamCore<FaultFs>, m: &mut ModelStream, at: &str) {
    let names = c.consumer_names("s").expect("stream s");
    let want: Vec<&String> = m.consumers.keys().collect();
    assert_eq!(
        names.iter().collect::<Vec<_>>(),
        want,
        "{at}: consumer names"
    );
    for (name, mc) in m.consumers.iter_mut() {
        let i = info(c, "s", name);
        let d = (i.delivered.consumer, i.delivered.stream);
        assert_eq!(
            d,
            (mc.delivered_consumer, mc.delivered_stream),
            "{at}: {name} delivered"
        );
        let pending: Vec<(u64, u64)> = i
            .pending
            .iter()
            .map(|p| (p.stream_seq, p.redelivered + 1))
            .collect();
        let want: Vec<(u64, u64)> = mc.pending.iter().map(|(&q, p)| (q, p.1)).collect();
        assert_eq!(pending, want, "{at}: {name} pending (seq, deliveries)");
        let floor = (i.ack_floor.consumer, i.ack_floor.stream);
        let back = floor.0 < mc.floor.0 || floor.1 < mc.floor.1;
        assert!(
            !back,
            "{at}: {name}'s ack floor went back from {:?} to {floor:?}",
            mc.floor
        );
        mc.floor = floor;
        if let Some(&low) = mc.pending.keys().next() {
            assert!(
                floor.1 < low,
                "{at}: {name}'s floor {floor:?} at or above pending {low}"
            );
        } else {
            assert_eq!(
                floor, d,
                "{at}: {name}: nothing pending, floor below the last delivery"
            );
        }
    }
}

fn seeds() -> Vec<u64> {
    if let Some(s) = std::env::var("SEQSTORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![s];
    }
    let n = std::env::var("SEQSTORE_SM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    (0..n).map(|i| 0xc0_0000 + i).collect()
}

/// Runs one seed; returns how many pulls delivered, acks were done and snapshots restored.
fn run_seed(seed: u64) -> (usize, usize, usize) {
    let mut rng = Rng::new(seed);
    let mut c = core();
    let mut m = ModelStream::default();
    apply1(&mut c, 0, create("s"));
    let (mut pulled, mut acked, mut restored) = (0, 0, 0);
    let mut ts = 0;
    for step in 0..300 {
        ts += rng.below(30) as i64 * MS;
        let op = random_op(&mut rng, &m);
        let at = format!("seed {seed} (SEQSTORE_SEED={seed} replays it), step {step}, {op:?}");
        let want = m.apply(&op, ts);
        let r = apply1(&mut c, ts, op);
        assert!(
            same_answer(&r, &want),
            "{at}: answered {r:?}, model {want:?}"
        );
        match &r {
            Response::Delivered(d) if !d.is_empty() => pulled += 1,
            Response::Done if at.contains("ConsumerAck") => acked += 1,
            _ => {}
        }
        check_consumers(&c, &mut m, &at);
        if rng.chance(25) {
            // a replica that installs this one's snapshot holds the same streams
            let snap = c.build_snapshot().expect("build");
            let mut other = core();
            other.install_snapshot(snap).expect("install");
            assert_eq!(
                other.dump().expect("dump"),
                c.dump().expect("dump"),
                "{at}: install"
            );
            c = other;
            restored += 1;
        }
    }
    (pulled, acked, restored)
}

#[test]
fn random_consumer_workloads_match_the_model() {
    let (mut pulled, mut acked, mut restored) = (0, 0, 0);
    for seed in seeds() {
        eprintln!("consumer model: seed {seed}");
        let (p, a, r) = run_seed(seed);
        (pulled, acked, restored) = (pulled + p, acked + a, restored + r);
    }
    eprintln!("{pulled} pulls delivered, {acked} acks, {restored} snapshot installs");
    assert!(pulled > 0 && acked > 0 && restored > 0, "narrow workloads");
}
