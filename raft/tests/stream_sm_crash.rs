//! The stream state machine under power loss (fault-fs explorer, both models).
//!
//! A seeded generator makes valid request sequences (appends on several subjects and streams,
//! deletes, purges, purge_ex, compacts, truncates, expiries, skips, stream creation and
//! deletion, consumer adds, pulls, acks and deletes, refused requests) and interleaves them
//! with snapshot builds, snapshot installs (from a leader that applied the same log) and
//! reopens. The log is a `Vec` here. The workload runs through the real `StreamStateMachine`
//! (openraft's traits); the explorer crashes it at every operation boundary; every crash image
//! is reopened, the log is re-applied from the recovered `last_applied`, and the result is
//! compared with the reference — a fresh state machine that applied every entry once —
//! message by message (sequence, subject, timestamp, headers, payload), consumer by consumer,
//! and response by response; every consumer's ack floor is compared with the reference's at
//! the recovered index and after each re-applied entry. A recovered `last_applied` below a
//! snapshot that was acknowledged is a violation too: openraft purges the log behind it, so
//! the entries in between are gone.
//!
//! `SEQSTORE_SEED=<n>` replays one seed; `SEQSTORE_SM_SEEDS=<count>` runs more seeds than the
//! default. A failing sequence is shrunk (steps dropped while it still fails) and printed.
//! Negative controls (feature `ablation`): each switch must be found, and is shrunk too.

use openraft::storage::RaftStateMachine;
use openraft::testing::log_id;
use openraft::{EntryPayload, RaftSnapshotBuilder};
use seqstore_fault_fs::{
    explore, explore_from, CrashCtx, ExploreConfig, FaultFs, Journal, Model, Report, Rng,
};
use seqstore_raft::streams::{SmAblation, StreamDump};
use seqstore_raft::types::{AckPolicy, ConsumerConfig};
use seqstore_raft::{Entry, Op, Request, Response, StreamConfig, StreamCore, StreamStateMachine};
use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

#[derive(Clone, Debug)]
enum Step {
    /// Entries appended to the log and applied (`None`: a blank entry).
    Apply(Vec<Option<Request>>),
    /// `build_snapshot`; openraft may then purge the log behind it.
    Build,
    /// Entries this replica receives only inside a leader's snapshot, which it installs.
    Install(Vec<Option<Request>>),
    Reopen,
}

impl Step {
    fn entries(&self) -> &[Option<Request>] {
        match self {
            Step::Apply(e) | Step::Install(e) => e,
            Step::Build | Step::Reopen => &[],
        }
    }
}

fn entry(index: u64, r: &Option<Request>) -> Entry {
    Entry {
        log_id: log_id(1, 1, index),
        payload: match r {
            Some(r) => EntryPayload::Normal(r.clone()),
            None => EntryPayload::Blank,
        },
    }
}

/// The whole log the steps make, in order.
fn log_of(steps: &[Step]) -> Vec<Entry> {
    let reqs = steps.iter().flat_map(|s| s.entries());
    reqs.enumerate().map(|(i, r)| entry(i as u64, r)).collect()
}

// ----- the generator -----

const STREAMS: [&str; 3] = ["a", "b", "c"];
const SUBJECTS: [&str; 4] = ["x.1", "x.2", "y.1", "y.2"];
const FILTERS: [&str; 5] = ["x.*", "y.1", ">", "x.>", "bad..filter"];
const MS: i64 = 1_000_000;
/// Steps per workload: 15 (18 before consumer requests joined the mix) keeps the test's time.
const STEPS: usize = 15;

const CONSUMERS: [&str; 2] = ["k1", "k2"];

struct Gen {
    rng: Rng,
    ts: i64,
    /// Appends and skips per stream so far: a bound for the sequences requests name.
    used: [u64; 3],
    /// A state machine that applies each request as it is made: the pending messages an ack
    /// names (an ack of a random sequence would nearly always be refused).
    shadow: StreamCore<FaultFs>,
    index: u64,
}

impl Gen {
    fn config(i: usize) -> StreamConfig {
        let mut c = StreamConfig::default();
        match i {
            1 => {
                c.max_msgs_per_subject = 3;
                c.max_age_ms = 60;
            }
            2 => {
                c.max_msgs = 4;
                c.discard_new = true;
            }
            _ => {}
        }
        c
    }

    fn request(&mut self) -> Option<Request> {
        if self.rng.chance(3) {
            return None;
        }
        // the leader's clock: forward mostly, back sometimes (a new leader's clock is behind)
        self.ts += if self.rng.chance(8) {
            -30 * MS
        } else {
            10 * MS
        };
        let op = self.op();
        Some(Request { ts: self.ts, op })
    }

    /// Applies `r` to the shadow at the next index.
    fn shadow(&mut self, r: &Option<Request>) {
        let e = entry(self.index, r);
        self.index += 1;
        self.shadow.apply(e).expect("shadow apply");
    }

    fn op(&mut self) -> Op {
        // stream a (no limits, a consumer from the start) more often: something to deliver
        let i = match self.rng.chance(40) {
            true => 0,
            false => self.rng.below(3) as usize,
        };
        let stream = STREAMS[i].to_string();
        let bound = self.used[i] + 2;
        if self.rng.chance(35) {
            return self.consumer_op(stream);
        }
        match self.rng.below(100) {
            0..=54 => self.append(i, stream),
            55..=62 => Op::Delete {
                stream,
                seq: self.rng.within(1, bound),
            },
            63..=65 => Op::Purge { stream },
            66..=71 => Op::PurgeEx {
                stream,
                filter: self.rng.pick(&FILTERS).to_string(),
                up_to_seq: self.rng.below(bound + 1),
                keep: self.rng.below(3),
            },
            72..=75 => Op::Compact {
                stream,
                up_to: self.rng.within(1, bound),
            },
            76..=78 => Op::Truncate {
                stream,
                seq: self.rng.below(bound),
            },
            79..=84 => Op::Expire { stream },
            85..=89 => {
                let count = self.rng.within(1, 3);
                self.used[i] += count;
                Op::Skip { stream, count }
            }
            90..=96 => Op::CreateStream {
                name: stream,
                config: Self::config(i),
            },
            _ => Op::DeleteStream { name: stream },
        }
    }

    fn append(&mut self, i: usize, stream: String) -> Op {
        self.used[i] += 1;
        let subject = if self.rng.chance(4) {
            "bad subject".to_string() // refused: a deterministic error response
        } else {
            self.rng.pick(&SUBJECTS).to_string()
        };
        // up to ~600 bytes: records cross 512-byte sectors, so writes can tear
        let payload = self.rng.bytes(600);
        let headers = if self.rng.chance(20) {
            b"NATS/1.0\r\nk: v\r\n\r\n".to_vec()
        } else {
            Vec::new()
        };
        // some expire 20-80 ms (two to eight entries) after they are stored
        let ttl_ms = if self.rng.chance(20) {
            self.rng.within(20, 80)
        } else {
            0
        };
        Op::Append {
            stream,
            subject,
            headers,
            payload,
            ttl_ms,
        }
    }

    /// A consumer request: acks of pending messages (half the time there are some), pulls
    /// with an ack wait of 0 to 4 entries, adds (both ack policies, a delivery limit
    /// sometimes), deletes (rarely), acks of random sequences (mostly refused).
    fn consumer_op(&mut self, stream: String) -> Op {
        let (stream, name) = self.consumer_pick(stream);
        let info = self.shadow.consumer_info(&stream, &name);
        let pending = info.ok().flatten().map(|c| c.pending).unwrap_or_default();
        let roll = self.rng.below(100);
        if roll < 50 && !pending.is_empty() {
            let stream_seq = self.rng.pick(&pending).stream_seq;
            return Op::ConsumerAck {
                stream,
                name,
                stream_seq,
            };
        }
        match self.rng.below(100) {
            0..=69 => Op::ConsumerNext {
                stream,
                name,
                filter: match self.rng.chance(60) {
                    true => ">".to_string(),
                    false => self.rng.pick(&FILTERS).to_string(),
                },
                batch: self.rng.within(1, 3) as u32,
                ack_wait_ms: 10 * self.rng.below(5),
            },
            70..=84 => {
                let ack_policy = match self.rng.below(3) {
                    0 => AckPolicy::All,
                    _ => AckPolicy::Explicit,
                };
                let config = ConsumerConfig {
                    ack_policy,
                    max_deliver: self.rng.below(4),
                };
                let name = self.rng.pick(&CONSUMERS).to_string();
                Op::ConsumerAdd {
                    stream,
                    name,
                    config,
                }
            }
            85..=87 => Op::ConsumerDelete { stream, name },
            _ => Op::ConsumerAck {
                stream,
                name,
                stream_seq: self.rng.within(1, 20),
            },
        }
    }

    /// Mostly a consumer the shadow holds, else `stream` and a random name.
    fn consumer_pick(&mut self, stream: String) -> (String, String) {
        let mut have = Vec::new();
        for s in self.shadow.stream_names() {
            for n in self.shadow.consumer_names(&s).unwrap_or_default() {
                have.push((s.clone(), n));
            }
        }
        if have.is_empty() || self.rng.chance(15) {
            return (stream, self.rng.pick(&CONSUMERS).to_string());
        }
        self.rng.pick(&have).clone()
    }

    fn batch(&mut self, max: u64) -> Vec<Option<Request>> {
        let n = self.rng.within(1, max);
        (0..n)
            .map(|_| {
                let r = self.request();
                self.shadow(&r);
                r
            })
            .collect()
    }
}

/// A seeded workload: the streams created first, then `n` random steps.
fn workload(seed: u64, n: usize) -> Vec<Step> {
    let mut g = Gen {
        rng: Rng::new(seed),
        ts: 1_000 * MS,
        used: [0; 3],
        shadow: StreamCore::open(FaultFs::new(Model::Posix)).expect("shadow"),
        index: 0,
    };
    let create: Vec<Option<Request>> = (0..3)
        .map(|i| {
            Some(Request {
                ts: g.ts,
                op: Op::CreateStream {
                    name: STREAMS[i].into(),
                    config: Gen::config(i),
                },
            })
        })
        .collect();
    // consumers on two of the streams from the start (an add later is rarer)
    let mut create = create;
    for (i, policy, max_deliver) in [(0, AckPolicy::Explicit, 0), (1, AckPolicy::All, 2)] {
        let op = Op::ConsumerAdd {
            stream: STREAMS[i].into(),
            name: CONSUMERS[i].into(),
            config: ConsumerConfig {
                ack_policy: policy,
                max_deliver,
            },
        };
        create.push(Some(Request { ts: g.ts, op }));
    }
    // and something for them to deliver
    for (i, n) in [(0, 4), (1, 2)] {
        for k in 0..n {
            g.used[i] += 1;
            let op = Op::Append {
                stream: STREAMS[i].into(),
                subject: SUBJECTS[k % SUBJECTS.len()].into(),
                headers: Vec::new(),
                payload: vec![k as u8; 40],
                ttl_ms: 0,
            };
            create.push(Some(Request { ts: g.ts, op }));
        }
    }
    for r in &create {
        g.shadow(r);
    }
    let mut steps = vec![Step::Apply(create)];
    for _ in 0..n {
        let s = match g.rng.below(100) {
            0..=64 => Step::Apply(g.batch(4)),
            65..=76 => Step::Build,
            77..=87 => Step::Install(g.batch(3)),
            _ => Step::Reopen,
        };
        steps.push(s);
    }
    steps
}

// ----- the reference -----

/// Applying every entry once to a fresh state machine: each entry's response, the
/// consumers' ack floors after it, and the streams.
struct Reference {
    responses: Vec<Response>,
    floors: Vec<Floors>,
    streams: BTreeMap<String, StreamDump>,
}

/// (stream, consumer) -> ack floor (consumer seq, stream seq).
type Floors = BTreeMap<(String, String), (u64, u64)>;

/// Every consumer's ack floor in `core`.
fn floors(core: &StreamCore<FaultFs>) -> Result<Floors, String> {
    let mut out = Floors::new();
    for stream in core.stream_names() {
        for name in core.consumer_names(&stream).unwrap_or_default() {
            let info = core.consumer_info(&stream, &name);
            let info = info.map_err(|e| format!("consumer_info: {e}"))?;
            if let Some(i) = info {
                out.insert(
                    (stream.clone(), name),
                    (i.ack_floor.consumer, i.ack_floor.stream),
                );
            }
        }
    }
    Ok(out)
}

fn reference(log: &[Entry]) -> Reference {
    let mut core = StreamCore::open(FaultFs::new(Model::Posix)).expect("open reference");
    let mut responses = Vec::with_capacity(log.len());
    let mut fl = Vec::with_capacity(log.len());
    for e in log {
        responses.push(core.apply(e.clone()).expect("reference apply"));
        fl.push(floors(&core).expect("reference floors"));
    }
    let streams = core.dump().expect("reference dump");
    Reference {
        responses,
        floors: fl,
        streams,
    }
}

/// The first consumer whose ack floor differs from the reference's after entry `i` (before
/// the first entry when `i` is `None`).
fn floor_diff(got: &Floors, want: &Reference, i: Option<usize>) -> Option<String> {
    let empty = Floors::new();
    let w = i.map_or(&empty, |i| &want.floors[i]);
    let keys: std::collections::BTreeSet<_> = got.keys().chain(w.keys()).collect();
    let found = keys.into_iter().find_map(|k| {
        let (g, r) = (got.get(k), w.get(k));
        (g != r).then(|| {
            format!(
                "consumer {}/{}: ack floor {g:?} after entry {i:?}, reference {r:?}",
                k.0, k.1
            )
        })
    });
    found
}

/// The first difference between two sets of streams, if any.
fn diff(got: &BTreeMap<String, StreamDump>, want: &BTreeMap<String, StreamDump>) -> Option<String> {
    let names = |m: &BTreeMap<String, StreamDump>| m.keys().cloned().collect::<Vec<_>>();
    if names(got) != names(want) {
        return Some(format!("streams {:?}, want {:?}", names(got), names(want)));
    }
    for (name, w) in want {
        let g = &got[name];
        if g.counters != w.counters {
            return Some(format!(
                "stream {name}: (first, last, msgs, last_ts) {:?}, want {:?}",
                g.counters, w.counters
            ));
        }
        if g.consumers != w.consumers {
            return Some(format!(
                "stream {name}: consumers {:?}, want {:?}",
                g.consumers, w.consumers
            ));
        }
        let n = g.msgs.len().max(w.msgs.len());
        for i in 0..n {
            let key = |m: Option<&seqstore_raft::streams::DumpMsg>| {
                m.map(|m| {
                    (
                        m.seq,
                        m.subject.clone(),
                        m.ts,
                        m.headers.len(),
                        m.payload.len(),
                    )
                })
            };
            if g.msgs.get(i) != w.msgs.get(i) {
                return Some(format!(
                    "stream {name}, message #{i}: {:?}, want {:?} (seq, subject, ts, header and payload lengths)",
                    key(g.msgs.get(i)),
                    key(w.msgs.get(i))
                ));
            }
        }
    }
    None
}

// ----- the workload runner -----

#[derive(Clone, Copy, Debug)]
enum Event {
    /// A snapshot of the first `n` entries is durable: the log may be purged behind it.
    SnapshotDurable(u64),
}

struct Runner<'a> {
    rt: tokio::runtime::Runtime,
    sm: Option<StreamStateMachine<FaultFs>>,
    /// A replica that applies the whole log: the source of installed snapshots.
    leader: StreamCore<FaultFs>,
    /// The log so far.
    log: Vec<Entry>,
    next: u64,
    ablation: Option<SmAblation>,
    reference: &'a Reference,
}

fn open_sm(fs: &FaultFs, ablation: Option<SmAblation>) -> Result<StreamCore<FaultFs>, String> {
    let r = match ablation {
        Some(a) => StreamCore::open_ablated(fs.clone(), a),
        None => StreamCore::open(fs.clone()),
    };
    r.map_err(|e| format!("open: {e}"))
}

impl Runner<'_> {
    fn step(&mut self, fs: &FaultFs, s: &Step, j: &mut Journal<Event>) -> Result<(), String> {
        if self.sm.is_none() {
            self.open(fs)?;
        }
        let mut sm = self.sm.clone().expect("open");
        let e = |e: openraft::StorageError<u64>| e.to_string();
        match s {
            Step::Apply(reqs) => {
                let es = self.entries(reqs)?;
                let first = es.first().map_or(0, |e| e.log_id.index) as usize;
                let got = self.rt.block_on(sm.apply(es)).map_err(e)?;
                let want = &self.reference.responses[first..first + got.len()];
                if got != want {
                    return Err(format!("responses {got:?}, reference {want:?}"));
                }
            }
            Step::Build => {
                let mut b = self.rt.block_on(sm.get_snapshot_builder());
                let snap = self.rt.block_on(b.build_snapshot()).map_err(e)?;
                let n = snap.meta.last_log_id.map_or(0, |l| l.index + 1);
                j.note(fs, Event::SnapshotDurable(n));
            }
            Step::Install(reqs) => {
                self.entries(reqs)?;
                let f = self.leader.build_snapshot().map_err(|e| e.to_string())?;
                let data = Box::new(Cursor::new(f.data));
                self.rt
                    .block_on(sm.install_snapshot(&f.meta, data))
                    .map_err(e)?;
                j.note(fs, Event::SnapshotDurable(self.next));
            }
            Step::Reopen => self.sm = None,
        }
        Ok(())
    }

    /// Opens the state machine and re-applies the log after its `last_applied`, as openraft
    /// does on start.
    fn open(&mut self, fs: &FaultFs) -> Result<(), String> {
        let sm = match self.ablation {
            Some(a) => StreamStateMachine::open_ablated(fs.clone(), a),
            None => StreamStateMachine::open(fs.clone()),
        };
        let mut sm = sm.map_err(|e| format!("open: {e}"))?;
        let e = |e: openraft::StorageError<u64>| e.to_string();
        let (applied, _) = self.rt.block_on(sm.applied_state()).map_err(e)?;
        let from = applied.map_or(0, |l| l.index + 1) as usize;
        let again = self.log[from..].to_vec();
        self.rt.block_on(sm.apply(again)).map_err(e)?;
        self.sm = Some(sm);
        Ok(())
    }

    /// The next entries of the log, applied by the leader too.
    fn entries(&mut self, reqs: &[Option<Request>]) -> Result<Vec<Entry>, String> {
        let mut out = Vec::new();
        for r in reqs {
            let e = entry(self.next, r);
            self.next += 1;
            self.leader.apply(e.clone()).map_err(|e| e.to_string())?;
            self.log.push(e.clone());
            out.push(e);
        }
        Ok(out)
    }
}

// ----- the check of one crash image -----

struct Checker<'a> {
    log: &'a [Entry],
    want: &'a Reference,
    ablation: Option<SmAblation>,
    /// How many more images of this run get their recovery crashed too.
    nested_budget: AtomicUsize,
    /// How many did.
    nested: AtomicUsize,
}

impl Checker<'_> {
    /// Checks one image; on a deterministic sample of images, first crashes the recovery
    /// itself at every operation boundary (open rebuilds `work/`: a power cut there must be as
    /// safe as one before it) and checks each of those images the same way.
    fn image(&self, img: &FaultFs, ctx: &CrashCtx<'_, Event>) -> Result<(), String> {
        let sampled = ctx.image == 0
            && ctx.crash_point % 17 == 9
            && self
                .nested_budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(1))
                .is_ok();
        if sampled {
            self.recovery_crashes(img, ctx.events)?;
        }
        self.check(img, ctx.events)
    }

    fn recovery_crashes(&self, img: &FaultFs, events: &[Event]) -> Result<(), String> {
        self.nested.fetch_add(1, Ordering::Relaxed);
        let start = img.crash();
        let mut cfg = ExploreConfig::new(start.config().model);
        cfg.fs = start.config();
        cfg.max_images_per_point = 8;
        cfg.random_images_per_point = 2;
        cfg.stop_at_first_violation = true;
        cfg.blame = false;
        let r = explore_from(
            &cfg,
            &start,
            &[()],
            |fs, _, _: &mut Journal<Event>| open_sm(fs, self.ablation).map(drop),
            |img, _| self.check(img, events),
        );
        match r.is_clean() {
            true => Ok(()),
            false => Err(format!("crash during recovery: {}", first_violation(&r))),
        }
    }

    /// Reopens, re-applies the log after the recovered `last_applied`, compares.
    fn check(&self, img: &FaultFs, events: &[Event]) -> Result<(), String> {
        let (log, want) = (self.log, self.want);
        let mut core = open_sm(img, self.ablation)?;
        let applied = core.applied().0.map_or(0, |l| l.index + 1);
        let purged = events
            .iter()
            .map(|Event::SnapshotDurable(n)| *n)
            .max()
            .unwrap_or(0);
        if applied < purged {
            return Err(format!(
                "recovered last_applied covers {applied} entries, but a snapshot of {purged} was acknowledged (the log behind it is purged)"
            ));
        }
        if applied > log.len() as u64 {
            return Err(format!(
                "recovered {applied} entries of a log of {}",
                log.len()
            ));
        }
        // the consumers' ack floors: the recovered state's are the reference's at the
        // recovered index, and each re-applied entry's are the reference's after it, so no
        // floor an applied ack (acknowledged or not) reached goes back across a crash
        let at = (applied as usize).checked_sub(1);
        if let Some(d) = floor_diff(&floors(&core)?, want, at) {
            return Err(format!("recovered at {applied}: {d}"));
        }
        for e in &log[applied as usize..] {
            let i = e.log_id.index as usize;
            let got = core
                .apply(e.clone())
                .map_err(|e| format!("re-apply {i}: {e}"))?;
            if got != want.responses[i] {
                return Err(format!(
                    "re-applied entry {i} (recovered from {applied}) answered {got:?}, reference {:?}",
                    want.responses[i]
                ));
            }
            if let Some(d) = floor_diff(&floors(&core)?, want, Some(i)) {
                return Err(format!("recovered from {applied}, re-applied: {d}"));
            }
        }
        let got = core.dump().map_err(|e| format!("dump: {e}"))?;
        match diff(&got, &want.streams) {
            Some(d) => Err(format!("recovered from {applied} and re-applied: {d}")),
            None => Ok(()),
        }
    }
}

/// Explores `steps` under `model`; the report and how many recoveries were crashed in turn.
fn run_counted(
    steps: &[Step],
    model: Model,
    ablation: Option<SmAblation>,
    first: bool,
) -> (Report, usize) {
    let log = log_of(steps);
    let want = reference(&log);
    let mut cfg = ExploreConfig::new(model);
    cfg.max_images_per_point = 16;
    cfg.random_images_per_point = 4;
    cfg.stop_at_first_violation = first;
    cfg.blame = false;
    let checker = Checker {
        log: &log,
        want: &want,
        ablation,
        nested_budget: AtomicUsize::new(2),
        nested: AtomicUsize::new(0),
    };
    let mut r = Runner {
        rt: tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime"),
        sm: None,
        leader: StreamCore::open(FaultFs::new(Model::Posix)).expect("leader"),
        log: Vec::new(),
        next: 0,
        ablation,
        reference: &want,
    };
    let report = explore(
        &cfg,
        steps,
        |fs, s, j| r.step(fs, s, j),
        |img, ctx: &CrashCtx<'_, Event>| checker.image(img, ctx),
    );
    (report, checker.nested.load(Ordering::Relaxed))
}

fn run(steps: &[Step], model: Model, ablation: Option<SmAblation>, first: bool) -> Report {
    run_counted(steps, model, ablation, first).0
}

fn fails(steps: &[Step], model: Model, ablation: Option<SmAblation>) -> bool {
    !run(steps, model, ablation, true).is_clean()
}

/// Drops steps (never the first, which creates the streams) while the sequence still
/// fails, then single entries of the steps that remain.
fn shrink(steps: &[Step], model: Model, ablation: Option<SmAblation>) -> Vec<Step> {
    let mut cur = steps.to_vec();
    for i in (1..cur.len()).rev() {
        let mut t = cur.clone();
        t.remove(i);
        if fails(&t, model, ablation) {
            cur = t;
        }
    }
    for i in (0..cur.len()).rev() {
        for k in (0..cur[i].entries().len()).rev() {
            let mut t = cur.clone();
            match &mut t[i] {
                Step::Apply(e) | Step::Install(e) if e.len() > 1 => drop(e.remove(k)),
                _ => continue,
            }
            if fails(&t, model, ablation) {
                cur = t;
            }
        }
    }
    cur
}

/// One line per step, payloads by length.
fn show(steps: &[Step]) -> String {
    let req = |r: &Option<Request>| match r {
        None => "blank".to_string(),
        Some(Request {
            ts,
            op:
                Op::Append {
                    stream,
                    subject,
                    payload,
                    ttl_ms,
                    ..
                },
        }) => format!(
            "{ts}: append {stream} {subject:?} ({} B, ttl {ttl_ms} ms)",
            payload.len()
        ),
        Some(Request { ts, op }) => format!("{ts}: {op:?}"),
    };
    let mut out = String::new();
    for (i, s) in steps.iter().enumerate() {
        let name = match s {
            Step::Apply(_) => "Apply",
            Step::Install(_) => "Install",
            Step::Build => "Build",
            Step::Reopen => "Reopen",
        };
        let es: Vec<String> = s.entries().iter().map(req).collect();
        out += &format!("  {i}: {name} [{}]\n", es.join("; "));
    }
    out
}

/// What the default workloads exercised (from the reference's responses): a run that never
/// removed a message or never installed a snapshot would prove little.
#[derive(Debug, Default)]
struct Coverage {
    appended: usize,
    delivered: usize,
    redelivered: usize,
    consumer_acks: usize,
    removed: usize,
    refused: usize,
    builds: usize,
    installs: usize,
    reopens: usize,
}

impl Coverage {
    fn add(&mut self, steps: &[Step]) {
        let log = log_of(steps);
        for (e, r) in log.iter().zip(reference(&log).responses) {
            let is_ack = matches!(
                &e.payload,
                EntryPayload::Normal(Request {
                    op: Op::ConsumerAck { .. },
                    ..
                })
            );
            match r {
                Response::Done if is_ack => self.consumer_acks += 1,
                Response::Delivered(d) => {
                    self.delivered += d.len();
                    self.redelivered += d.iter().filter(|d| d.delivery_count > 1).count();
                }
                Response::Seq(_) => self.appended += 1,
                Response::Removed(n) => self.removed += n as usize,
                Response::Err(_) => self.refused += 1,
                _ => {}
            }
        }
        for s in steps {
            match s {
                Step::Build => self.builds += 1,
                Step::Install(_) => self.installs += 1,
                Step::Reopen => self.reopens += 1,
                Step::Apply(_) => {}
            }
        }
    }

    fn assert_broad(&self) {
        let c = [
            self.appended,
            self.delivered,
            self.consumer_acks,
            self.removed,
            self.refused,
            self.builds,
            self.installs,
            self.reopens,
        ];
        assert!(c.iter().all(|&n| n > 0), "narrow workloads: {self:?}");
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
        .unwrap_or(5);
    (0..n).map(|i| 0x5eed_0000 + i).collect()
}

fn first_violation(r: &Report) -> String {
    match (&r.workload_error, r.violations.first()) {
        (Some(w), _) => format!("workload: {w}"),
        (None, Some(v)) => v.to_string(),
        (None, None) => "none".into(),
    }
}

#[test]
fn random_workloads_recover_to_the_reference_under_both_models() {
    let t = Instant::now();
    let (mut points, mut images, mut nested) = (0, 0, 0);
    let mut seen = Coverage::default();
    for seed in seeds() {
        let steps = workload(seed, STEPS);
        seen.add(&steps);
        for model in Model::ALL {
            let (r, n) = run_counted(&steps, model, None, false);
            nested += n;
            if !r.is_clean() {
                let min = shrink(&steps, model, None);
                panic!(
                    "seed {seed} (SEQSTORE_SEED={seed} replays it), {model:?}: {}\nminimal failing steps:\n{}its violation: {}",
                    first_violation(&r),
                    show(&min),
                    first_violation(&run(&min, model, None, true))
                );
            }
            points += r.crash_points;
            images += r.images;
        }
    }
    eprintln!(
        "seeds {:?}: {points} crash points, {images} images, {nested} recoveries crashed in turn, {:.1?}; {seen:?}",
        seeds(),
        t.elapsed()
    );
    assert!(images > 1000, "only {images} images checked");
    assert!(nested > 0, "no recovery was crashed in turn");
    seen.assert_broad();
}

/// A control must be found under `model` on some default seed; the first found is shrunk.
fn control_found(ablation: SmAblation, model: Model) {
    for seed in seeds() {
        let steps = workload(seed, STEPS);
        let r = run(&steps, model, Some(ablation), true);
        if r.is_clean() {
            continue;
        }
        let min = shrink(&steps, model, Some(ablation));
        assert!(fails(&min, model, Some(ablation)), "shrunk sequence passes");
        eprintln!(
            "{ablation:?} {model:?} found on seed {seed}: {}\nshrunk {} -> {} steps:\n{}{}",
            first_violation(&r),
            steps.len(),
            min.len(),
            show(&min),
            first_violation(&run(&min, model, Some(ablation), true))
        );
        return;
    }
    panic!(
        "{ablation:?} under {model:?}: not found on seeds {:?}",
        seeds()
    );
}

#[test]
fn negative_control_unsynced_snapshot_is_found() {
    for model in Model::ALL {
        control_found(SmAblation::SnapshotUnsynced, model);
    }
}

/// Consumers dropped by every restore (as a snapshot without them would): a reopened replica
/// answers its consumer requests differently and its ack floors are not the reference's.
/// One model: the switch loses state on every restore, crash or not.
#[test]
fn negative_control_snapshot_without_consumers_is_found() {
    control_found(SmAblation::SnapshotWithoutConsumers, Model::Posix);
}

#[test]
fn negative_control_applied_index_after_the_data_is_found() {
    for model in Model::ALL {
        control_found(SmAblation::AppliedAfterData, model);
    }
}

/// The crash images' ack floor check on its own: a workload that never reopens (so its
/// answers cannot give the switch away) with a snapshot of a consumer that delivered and
/// acked; every image after the snapshot recovers without the consumer, which only the floor
/// check (and the final comparison) can see.
#[test]
fn the_floor_check_finds_consumers_lost_by_a_recovery() {
    let req = |op: Op| Some(Request { ts: 1_000 * MS, op });
    let (a, k1) = (STREAMS[0].to_string(), CONSUMERS[0].to_string());
    let setup = vec![
        req(Op::CreateStream {
            name: a.clone(),
            config: StreamConfig::default(),
        }),
        req(Op::ConsumerAdd {
            stream: a.clone(),
            name: k1.clone(),
            config: ConsumerConfig::default(),
        }),
        req(Op::Append {
            stream: a.clone(),
            subject: "x.1".into(),
            headers: Vec::new(),
            payload: vec![1; 10],
            ttl_ms: 0,
        }),
    ];
    let pull = vec![
        req(Op::ConsumerNext {
            stream: a.clone(),
            name: k1.clone(),
            filter: ">".into(),
            batch: 1,
            ack_wait_ms: 0,
        }),
        req(Op::ConsumerAck {
            stream: a,
            name: k1,
            stream_seq: 1,
        }),
    ];
    let steps = [Step::Apply(setup), Step::Apply(pull), Step::Build];
    let clean = run(&steps, Model::Posix, None, true);
    assert!(clean.is_clean(), "{}", first_violation(&clean));
    let r = run(
        &steps,
        Model::Posix,
        Some(SmAblation::SnapshotWithoutConsumers),
        true,
    );
    let v = first_violation(&r);
    eprintln!("found: {v}");
    assert!(v.contains("ack floor"), "not found by the floor check: {v}");
}
