//! The same seeded random workload through the native `Store` and through a `GuestStore`
//! (each on host-fs in its own tempdir, the guest's via the `fs` import) gives equal results
//! for every call and byte-identical files.

use std::time::Duration;

use host_fs::HostFs;
use store_core::{Config, Discard, ManualClock, RecoveryMode, Store, SyncPolicy};

use crate::tests::common::*;
use crate::GuestStore;

const SUBJECTS: &[&str] = &[
    "orders.eu",
    "orders.us",
    "a",
    "a.b.c",
    "x.y", // valid
    "",
    "a..b",
    "a b",
    "orders.*",
    ">", // invalid as subjects
];
const FILTERS: &[&str] = &[">", "orders.*", "a.>", "x.y", "*", "*.*", "a..b", ""];

#[derive(Clone, Debug)]
enum Op {
    Append(String, Vec<u8>, Vec<u8>),
    /// Several appends in one call (`GuestStore::append_batch`; natively, a loop).
    AppendBatch(Vec<(String, Vec<u8>, Vec<u8>)>),
    Get(u64),
    Last(String),
    Next(String, u64),
    /// `prev_matching`.
    Prev(String, u64),
    /// `get_batch(from, filter, max_msgs, max_bytes)`.
    Batch(u64, String, usize, u64),
    /// `seq_from_time`.
    SeqFromTime(i64),
    /// `num_pending(from, filter, last_per_subject)`.
    Pending(u64, String, bool),
    Subjects(String),
    State,
    Delete(u64),
    Erase(u64),
    Purge,
    PurgeEx(String, u64, u64),
    Compact(u64),
    Truncate(u64),
    Sync,
    Tick,
    Checkpoint,
    IsPoisoned,
    /// Moves the shared clock forward (ns).
    Advance(i64),
    /// Closes both stores (or drops them, if false) and opens them again.
    Reopen(bool),
    /// A run of operations, mostly appends, each after moving the clock by its `i64` (ns),
    /// one step at a time on both stores: under `Never` without limits the guest's appends
    /// queue on the host, so this checks the batched path's sequences, timestamps (read at
    /// the call, not when the queue is sent), errors in the middle of a run, and reads that
    /// follow.
    Run(Vec<(i64, Op)>),
}

/// A run of appends, with now and then a read, a clock step, an invalid subject or an
/// oversized payload in the middle.
fn gen_run(rng: &mut Rng, last_seq: u64, max_payload: usize) -> Op {
    let n = 1 + rng.below(120);
    let steps = (0..n)
        .map(|i| {
            let adv = if rng.chance(30) {
                rng.below(2_000) as i64
            } else {
                0
            };
            let op = match rng.below(100) {
                0..=84 => {
                    let (s, h, p) = gen_message(rng, max_payload);
                    Op::Append(s, h, p)
                }
                85..=90 => Op::Get(rng.below(last_seq + i + 3)),
                91..=94 => Op::State,
                95..=97 => Op::Last(rng.pick(&SUBJECTS[..5]).to_string()),
                _ => Op::IsPoisoned,
            };
            (adv, op)
        })
        .collect();
    Op::Run(steps)
}

fn gen_message(rng: &mut Rng, max_payload: usize) -> (String, Vec<u8>, Vec<u8>) {
    let subject = if rng.chance(90) {
        rng.pick(&SUBJECTS[..5]).to_string()
    } else {
        rng.pick(SUBJECTS).to_string()
    };
    let headers = if rng.chance(20) {
        rng.bytes(40)
    } else {
        Vec::new()
    };
    // Now and then just over the limit, to cross `TooLarge` too.
    let max = if rng.chance(3) {
        max_payload + 100
    } else {
        300
    };
    (subject, headers, rng.bytes(max))
}

fn gen_op(rng: &mut Rng, last_seq: u64, max_payload: usize) -> Op {
    let seq = |rng: &mut Rng| rng.below(last_seq + 3);
    let subject = |rng: &mut Rng| {
        if rng.chance(90) {
            rng.pick(&SUBJECTS[..5]).to_string()
        } else {
            rng.pick(SUBJECTS).to_string()
        }
    };
    let message = |rng: &mut Rng| {
        let headers = if rng.chance(20) {
            rng.bytes(40)
        } else {
            Vec::new()
        };
        // Now and then just over the limit, to cross `TooLarge` too.
        let max = if rng.chance(3) {
            max_payload + 100
        } else {
            300
        };
        let payload = rng.bytes(max);
        (subject(rng), headers, payload)
    };
    match rng.below(100) {
        0..=39 => {
            let (s, h, p) = message(rng);
            Op::Append(s, h, p)
        }
        40..=44 => {
            let n = rng.below(20);
            Op::AppendBatch((0..n).map(|_| message(rng)).collect())
        }
        45..=52 => Op::Get(seq(rng)),
        53..=55 => Op::Last(subject(rng)),
        56..=57 => Op::Next(rng.pick(FILTERS).to_string(), seq(rng)),
        58 => Op::Prev(rng.pick(FILTERS).to_string(), seq(rng)),
        59 => Op::Batch(
            seq(rng),
            rng.pick(FILTERS).to_string(),
            rng.below(10) as usize,
            *rng.pick(&[0, 300, 2000]),
        ),
        60 => Op::Subjects(rng.pick(FILTERS).to_string()),
        61 => match rng.chance(50) {
            // around the clock of `common::clock()` and the time the ops move it on
            true => Op::SeqFromTime(1_700_000_000_000_000_000 + rng.below(1 << 30) as i64),
            false => Op::Pending(seq(rng), rng.pick(FILTERS).to_string(), rng.chance(50)),
        },
        62..=64 => Op::State,
        65..=70 => Op::Delete(seq(rng)),
        71..=72 => Op::Erase(seq(rng)),
        73 => Op::Purge,
        74..=75 => Op::PurgeEx(
            rng.pick(FILTERS).to_string(),
            if rng.chance(50) { 0 } else { seq(rng) },
            rng.below(3),
        ),
        76..=77 => Op::Compact(seq(rng)),
        78..=79 => Op::Truncate(seq(rng)),
        80..=82 => Op::Sync,
        83..=84 => Op::Tick,
        85 => Op::Checkpoint,
        86 => Op::IsPoisoned,
        87..=95 => Op::Advance(rng.below(3_000_000) as i64),
        96 => gen_run(rng, last_seq, max_payload),
        _ => Op::Reopen(rng.chance(50)),
    }
}

// Building the config field by field reads best for a generator.
#[allow(clippy::field_reassign_with_default)]
fn gen_config(rng: &mut Rng) -> Config {
    let mut c = Config::default();
    c.block_size = *rng.pick(&[1024, 2048, 4096, 16384]);
    c.sync = match rng.below(10) {
        0..=1 => SyncPolicy::Always,
        2..=4 => SyncPolicy::Interval(Duration::from_micros(1 + rng.below(5000))),
        _ => SyncPolicy::Never,
    };
    c.max_payload = 1024;
    c.max_headers = 32;
    c.write_buffer = *rng.pick(&[0, 512, 4096, 256 << 10]);
    c.block_cache = *rng.pick(&[0, 2048, 64 << 20]);
    c.recovery = if rng.chance(50) {
        RecoveryMode::Strict
    } else {
        RecoveryMode::TolerateCorruptTail
    };
    if rng.chance(40) {
        c.limits.max_msgs = rng.below(60);
        c.limits.max_bytes = *rng.pick(&[0, 5_000, 20_000]);
        c.limits.max_msgs_per_subject = rng.below(6);
        c.limits.max_age = rng
            .chance(40)
            .then(|| Duration::from_millis(1 + rng.below(40)));
        c.limits.discard = if rng.chance(30) {
            Discard::New
        } else {
            Discard::Old
        };
    }
    c
}

fn native(s: &mut Store<HostFs>, op: &Op) -> String {
    match op {
        Op::Append(sub, h, p) => norm(&s.append(sub, h, p)),
        Op::AppendBatch(msgs) => msgs
            .iter()
            .map(|(sub, h, p)| norm(&s.append(sub, h, p)))
            .collect::<Vec<_>>()
            .join(", "),
        Op::Get(q) => norm(&s.get(*q)),
        Op::Last(sub) => norm(&s.last_for_subject(sub)),
        Op::Next(f, q) => norm(&s.next_matching(f, *q)),
        Op::Prev(f, q) => norm(&s.prev_matching(f, *q)),
        Op::Batch(q, f, n, b) => norm(&s.get_batch(*q, f, *n, *b)),
        Op::SeqFromTime(t) => norm(&s.seq_from_time(*t)),
        Op::Pending(q, f, l) => norm(&s.num_pending(*q, f, *l)),
        Op::Subjects(f) => norm(&s.subjects_state(f)),
        Op::State => norm::<_>(&Ok(s.state())),
        Op::Delete(q) => norm(&s.delete(*q)),
        Op::Erase(q) => norm(&s.erase(*q)),
        Op::Purge => norm(&s.purge()),
        Op::PurgeEx(f, u, k) => norm(&s.purge_ex(f, *u, *k)),
        Op::Compact(q) => norm(&s.compact(*q)),
        Op::Truncate(q) => norm(&s.truncate(*q)),
        Op::Sync => norm(&s.sync()),
        Op::Tick => norm(&s.tick()),
        Op::Checkpoint => norm(&s.checkpoint()),
        Op::IsPoisoned => norm::<_>(&Ok(s.is_poisoned())),
        Op::Advance(_) | Op::Reopen(_) | Op::Run(_) => unreachable!("handled by the driver"),
    }
}

fn guest(s: &mut GuestStore, op: &Op) -> String {
    match op {
        Op::Append(sub, h, p) => norm(&store_result(s.append(sub, h, p))),
        Op::AppendBatch(msgs) => {
            let batch = msgs
                .iter()
                .map(|(sub, h, p)| (sub.as_str(), h.as_slice(), p.as_slice()));
            store_result(s.append_batch(batch))
                .unwrap()
                .iter()
                .map(norm)
                .collect::<Vec<_>>()
                .join(", ")
        }
        Op::Get(q) => norm(&store_result(s.get(*q))),
        Op::Last(sub) => norm(&store_result(s.last_for_subject(sub))),
        Op::Next(f, q) => norm(&store_result(s.next_matching(f, *q))),
        Op::Prev(f, q) => norm(&store_result(s.prev_matching(f, *q))),
        Op::Batch(q, f, n, b) => norm(&store_result(s.get_batch(*q, f, *n, *b))),
        Op::SeqFromTime(t) => norm(&store_result(s.seq_from_time(*t))),
        Op::Pending(q, f, l) => norm(&store_result(s.num_pending(*q, f, *l))),
        Op::Subjects(f) => norm(&store_result(s.subjects_state(f))),
        Op::State => norm(&store_result(s.state())),
        Op::Delete(q) => norm(&store_result(s.delete(*q))),
        Op::Erase(q) => norm(&store_result(s.erase(*q))),
        Op::Purge => norm(&store_result(s.purge())),
        Op::PurgeEx(f, u, k) => norm(&store_result(s.purge_ex(f, *u, *k))),
        Op::Compact(q) => norm(&store_result(s.compact(*q))),
        Op::Truncate(q) => norm(&store_result(s.truncate(*q))),
        Op::Sync => norm(&store_result(s.sync())),
        Op::Tick => norm(&store_result(s.tick())),
        Op::Checkpoint => norm(&store_result(s.checkpoint())),
        Op::IsPoisoned => norm(&store_result(s.is_poisoned())),
        Op::Advance(_) | Op::Reopen(_) | Op::Run(_) => unreachable!("handled by the driver"),
    }
}

struct Pair {
    ndir: tempfile::TempDir,
    gdir: tempfile::TempDir,
    cfg: Config,
    clock: ManualClock,
}

impl Pair {
    fn open(&self, ctx: &str) -> (Store<HostFs>, GuestStore) {
        let n = Store::open_with_clock(
            HostFs::open(self.ndir.path()).unwrap(),
            self.cfg.clone(),
            Box::new(self.clock.clone()),
        );
        let g = GuestStore::from_fs(
            HostFs::open(self.gdir.path()).unwrap(),
            self.cfg.clone(),
            Box::new(self.clock.clone()),
        );
        let (n, g) = match (n, g) {
            (Ok(n), Ok(g)) => (n, g),
            (n, g) => panic!("{ctx}: open: native {:?} / guest {:?}", n.err(), g.err()),
        };
        assert_eq!(
            n.recovery_report(),
            g.recovery_report(),
            "{ctx}: recovery reports"
        );
        (n, g)
    }
}

/// Runs one seeded case; returns how many of the guest's appends went through the host's
/// batching queue, and how many the host sent encoded one at a time.
fn run_case(seed: u64, case: u64, ops: usize, batchable: bool) -> (u64, u64) {
    let mut rng = Rng::new(seed ^ case.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut cfg = gen_config(&mut rng);
    if batchable {
        // What the host batches: no sync policy, no limits (the rest stays random).
        cfg.sync = SyncPolicy::Never;
        cfg.limits = Default::default();
    }
    let (mut batched, mut encoded_one) = (0, 0);
    let pair = Pair {
        ndir: tempfile::tempdir().unwrap(),
        gdir: tempfile::tempdir().unwrap(),
        cfg: cfg.clone(),
        clock: clock(),
    };
    let ctx0 = format!("seed {seed} case {case} ({cfg:?})");
    let (mut n, mut g) = pair.open(&ctx0);
    let mut last_seq = 0;
    for i in 0..ops {
        let op = gen_op(&mut rng, last_seq, cfg.max_payload as usize);
        let ctx = format!("{ctx0}, op {i} {op:?}");
        match &op {
            Op::Advance(ns) => pair.clock.advance(*ns),
            Op::Run(steps) => {
                for (j, (adv, op)) in steps.iter().enumerate() {
                    pair.clock.advance(*adv);
                    let (rn, rg) = (native(&mut n, op), guest(&mut g, op));
                    assert_eq!(
                        rn, rg,
                        "{ctx}: step {j} {op:?}: results differ (native left, guest right)"
                    );
                }
            }
            Op::Reopen(close) => {
                batched += g.batched;
                encoded_one += g.encoded_one;
                if *close {
                    let (rn, rg) = (n.close(), g.close());
                    assert_eq!(norm(&rn), norm(&store_result(rg)), "{ctx}: close");
                } else {
                    drop(n);
                    drop(g);
                }
                assert_same_tree(pair.ndir.path(), pair.gdir.path(), &ctx);
                (n, g) = pair.open(&ctx);
            }
            op => {
                let (rn, rg) = (native(&mut n, op), guest(&mut g, op));
                assert_eq!(rn, rg, "{ctx}: results differ (native left, guest right)");
            }
        }
        last_seq = n.state().last_seq;
    }
    eprintln!("{ctx0}: final state {:?}", n.state());
    batched += g.batched;
    encoded_one += g.encoded_one;
    let (rn, rg) = (n.close(), g.close());
    assert_eq!(norm(&rn), norm(&store_result(rg)), "{ctx0}: final close");
    assert_same_tree(
        pair.ndir.path(),
        pair.gdir.path(),
        &format!("{ctx0}: final"),
    );
    (batched, encoded_one)
}

#[test]
fn native_and_guest_agree() {
    // Any policy and limits. Under a policy the host does not batch, appends it can predict
    // go to the guest encoded one at a time (`append-encoded-one`): the same results and
    // files as the guest's own encoding.
    let seed = seed("native_and_guest_agree");
    let mut encoded_one = 0;
    for case in 0..6 {
        encoded_one += run_case(seed, case, 250, false).1;
    }
    assert!(
        encoded_one > 0,
        "seed {seed}: no append went through append-encoded-one"
    );
}

#[test]
fn batched_appends_agree() {
    // `SyncPolicy::Never` without limits, where the host queues appends: the same results
    // call for call (errors in the middle of runs, reads after them, reopen with a queue
    // pending) and the same files.
    let seed = seed("batched_appends_agree");
    for case in 0..6 {
        let (batched, _) = run_case(seed, case, 250, true);
        assert!(
            batched > 0,
            "seed {seed} case {case}: no append went through the host's queue"
        );
    }
}
