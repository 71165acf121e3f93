//! The same seeded random workload through the native `Store` and through a `GuestStore`
//! (each on host-fs in its own tempdir, the guest's via the `fs` import) gives equal results
//! for every call and byte-identical files.

use seqstore_core::surface::StreamStore;
use std::time::Duration;

use seqstore_core::{Config, Discard, ManualClock, RecoveryMode, Store, SyncPolicy};
use seqstore_fs::HostFs;

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
    /// `append_with_ttl(subject, headers, payload, ttl ns)`.
    AppendTtl(String, Vec<u8>, Vec<u8>, u64),
    /// `append_raw(seq, last_ts + dt, ...)` (each side reads its own last timestamp; a
    /// negative `dt` below it is refused).
    AppendRaw(u64, i64, String, Vec<u8>),
    /// `skip_msg(seq)`.
    SkipMsg(u64),
    /// `skip_many(first, count)`.
    SkipMany(u64, u64),
    /// `next_matching_multi(filters, from)`.
    NextMulti(Vec<String>, u64),
    /// `filtered_state_multi(filters, from)`.
    Filtered(Vec<String>, u64),
    /// `subjects_state_detail(filter)`.
    Detail(String),
    /// `multi_last_seqs(filters, max_seq, max_count)`.
    MultiLast(Vec<String>, u64, usize),
    /// `all_last_seqs()`.
    AllLast,
    /// `subject_for_seq(seq)`.
    SubjectFor(u64),
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

/// One of the ttl, replica and skip writes or the multi-filter reads (those the first
/// `gen_op` draws do not reach): ttls
/// that run out within a few clock steps, replica appends and skips at the next sequence and
/// now and then a wrong one, reads with several filters (bad ones included).
fn gen_op15(rng: &mut Rng, last_seq: u64) -> Op {
    let seq = |rng: &mut Rng| rng.below(last_seq + 3);
    // the next sequence mostly; one at or past it now and then (`SequenceMismatch`)
    let next = |rng: &mut Rng| match rng.below(8) {
        0 => last_seq,
        1 => last_seq + 2,
        _ => last_seq + 1,
    };
    let filters = |rng: &mut Rng| {
        (0..rng.below(4))
            .map(|_| rng.pick(FILTERS).to_string())
            .collect::<Vec<_>>()
    };
    let subject = |rng: &mut Rng| rng.pick(&SUBJECTS[..5]).to_string();
    match rng.below(13) {
        0..=2 => Op::AppendTtl(
            subject(rng),
            Vec::new(),
            rng.bytes(200),
            *rng.pick(&[0, 1, 1_000_000, 4_000_000, 3_600_000_000_000]),
        ),
        3..=4 => Op::AppendRaw(
            next(rng),
            rng.below(2_000) as i64 - 100,
            subject(rng),
            rng.bytes(200),
        ),
        5 => Op::SkipMsg(next(rng)),
        6 => Op::SkipMany(next(rng), rng.below(5)),
        7 => Op::NextMulti(filters(rng), seq(rng)),
        8 => Op::Filtered(filters(rng), seq(rng)),
        9 => Op::Detail(rng.pick(FILTERS).to_string()),
        10 => Op::MultiLast(filters(rng), seq(rng), rng.below(4) as usize),
        11 => Op::AllLast,
        _ => Op::SubjectFor(seq(rng)),
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
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
    match rng.below(120) {
        0..=39 => {
            let (s, h, p) = message(rng);
            Op::Append(s, h, p)
        }
        100.. => gen_op15(rng, last_seq),
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
        97..=99 => Op::Reopen(rng.chance(50)),
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
        c.limits.max_age = if rng.chance(40) {
            Duration::from_millis(1 + rng.below(40))
        } else {
            Duration::ZERO
        };
        c.limits.discard = if rng.chance(30) {
            Discard::New
        } else {
            Discard::Old
        };
    }
    c
}

/// One operation of the trait on either store, its result in comparable form (`None`: the
/// operation is not the trait's, the caller runs it).
fn op_on<S: StreamStore>(s: &mut S, op: &Op) -> Option<String>
where
    S::Error: StoreError,
{
    let r = |x| Some(x);
    match op {
        Op::Append(sub, h, p) => r(norm(&store_result(s.append(sub, h, p)))),
        Op::Get(q) => r(norm(&store_result(s.get(*q)))),
        Op::Last(sub) => r(norm(&store_result(s.last_for_subject(sub)))),
        Op::Next(f, q) => r(norm(&store_result(s.next_matching(f, *q)))),
        Op::Prev(f, q) => r(norm(&store_result(s.prev_matching(f, *q)))),
        Op::Batch(q, f, n, b) => r(norm(&store_result(s.get_batch(*q, f, *n, *b)))),
        Op::SeqFromTime(t) => r(norm(&store_result(s.seq_from_time(*t)))),
        Op::Pending(q, f, l) => r(norm(&store_result(s.num_pending(*q, f, *l)))),
        Op::Subjects(f) => r(norm(&store_result(s.subjects_state(f)))),
        Op::State => r(norm(&store_result(s.state()))),
        Op::Delete(q) => r(norm(&store_result(s.delete(*q)))),
        Op::Erase(q) => r(norm(&store_result(s.erase(*q)))),
        Op::Purge => r(norm(&store_result(s.purge()))),
        Op::PurgeEx(f, u, k) => r(norm(&store_result(s.purge_ex(f, *u, *k)))),
        Op::Compact(q) => r(norm(&store_result(s.compact(*q)))),
        Op::Truncate(q) => r(norm(&store_result(s.truncate(*q)))),
        Op::Sync => r(norm(&store_result(s.sync()))),
        Op::Tick => r(norm(&store_result(s.tick()))),
        Op::Checkpoint => r(norm(&store_result(s.checkpoint()))),
        Op::AppendTtl(sub, h, p, t) => {
            let ttl = Duration::from_nanos(*t);
            r(norm(&store_result(s.append_with_ttl(sub, h, p, ttl))))
        }
        Op::AppendRaw(q, dt, sub, p) => {
            let ts = store_result(s.state()).unwrap().last_ts.saturating_add(*dt);
            r(norm(&store_result(s.append_raw(*q, ts, sub, b"", p))))
        }
        Op::SkipMsg(q) => r(norm(&store_result(s.skip_msg(*q)))),
        Op::SkipMany(q, c) => r(norm(&store_result(s.skip_many(*q, *c)))),
        Op::NextMulti(f, q) => r(norm(&store_result(s.next_matching_multi(&strs(f), *q)))),
        Op::Filtered(f, q) => r(norm(&store_result(s.filtered_state_multi(&strs(f), *q)))),
        Op::Detail(f) => r(norm(&store_result(s.subjects_state_detail(f)))),
        Op::MultiLast(f, q, c) => r(norm(&store_result(s.multi_last_seqs(&strs(f), *q, *c)))),
        Op::AllLast => r(norm(&store_result(s.all_last_seqs()))),
        Op::SubjectFor(q) => r(norm(&store_result(s.subject_for_seq(*q)))),
        Op::AppendBatch(_) | Op::IsPoisoned => None,
        Op::Advance(_) | Op::Reopen(_) | Op::Run(_) => unreachable!("handled by the driver"),
    }
}

fn native(s: &mut Store<HostFs>, op: &Op) -> String {
    match op {
        Op::AppendBatch(msgs) => msgs
            .iter()
            .map(|(sub, h, p)| norm(&Store::append(s, sub, h, p)))
            .collect::<Vec<_>>()
            .join(", "),
        Op::IsPoisoned => norm::<_>(&Ok(s.is_poisoned())),
        op => op_on(s, op).expect("an operation of the trait"),
    }
}

fn guest(s: &mut GuestStore, op: &Op) -> String {
    match op {
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
        Op::IsPoisoned => norm(&store_result(s.is_poisoned())),
        op => op_on(s, op).expect("an operation of the trait"),
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
        let n = Store::builder(HostFs::open(self.ndir.path()).unwrap())
            .config(self.cfg.clone())
            .clock(self.clock.clone())
            .open();
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

/// What one case did, for the tests to check it was not trivial.
#[derive(Default)]
struct Tally {
    /// Guest appends through the host's batching queue.
    batched: u64,
    /// Guest appends the host sent encoded one at a time.
    encoded_one: u64,
    /// The NATS writes that succeeded (ttl appends, raw appends, skips).
    write15_ok: u64,
    /// Of those, refused with `SequenceMismatch` (the typed error, both sides).
    mismatches: u64,
}

/// Runs one seeded case.
fn run_case(seed: u64, case: u64, ops: usize, batchable: bool) -> Tally {
    let mut rng = Rng::new(seed ^ case.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut cfg = gen_config(&mut rng);
    if batchable {
        // What the host batches: no sync policy, no limits (the rest stays random).
        cfg.sync = SyncPolicy::Never;
        cfg.limits = Default::default();
    }
    let mut t = Tally::default();
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
                t.batched += g.batched;
                t.encoded_one += g.encoded_one;
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
                if matches!(
                    op,
                    Op::AppendTtl(..) | Op::AppendRaw(..) | Op::SkipMsg(_) | Op::SkipMany(..)
                ) {
                    t.write15_ok += rn.starts_with("Ok") as u64;
                    t.mismatches += rn.contains("SequenceMismatch") as u64;
                }
            }
        }
        last_seq = n.state().last_seq;
    }
    eprintln!("{ctx0}: final state {:?}", n.state());
    t.batched += g.batched;
    t.encoded_one += g.encoded_one;
    let (rn, rg) = (n.close(), g.close());
    assert_eq!(norm(&rn), norm(&store_result(rg)), "{ctx0}: final close");
    assert_same_tree(
        pair.ndir.path(),
        pair.gdir.path(),
        &format!("{ctx0}: final"),
    );
    t
}

#[test]
fn native_and_guest_agree() {
    // Any policy and limits. Under a policy the host does not batch, appends it can predict
    // go to the guest encoded one at a time (`append-encoded-one`): the same results and
    // files as the guest's own encoding.
    let seed = seed("native_and_guest_agree");
    let (mut encoded_one, mut write15_ok, mut mismatches) = (0, 0, 0);
    for case in 0..6 {
        let t = run_case(seed, case, 250, false);
        encoded_one += t.encoded_one;
        write15_ok += t.write15_ok;
        mismatches += t.mismatches;
    }
    assert!(
        encoded_one > 0,
        "seed {seed}: no append went through append-encoded-one"
    );
    // the ttl, replica and skip writes ran, and SequenceMismatch crossed as its own variant
    assert!(
        write15_ok > 20 && mismatches > 0,
        "seed {seed}: {write15_ok} ttl/raw/skip writes, {mismatches} mismatches"
    );
}

#[test]
fn batched_appends_agree() {
    // `SyncPolicy::Never` without limits, where the host queues appends: the same results
    // call for call (errors in the middle of runs, reads after them, reopen with a queue
    // pending) and the same files.
    let seed = seed("batched_appends_agree");
    for case in 0..6 {
        let batched = run_case(seed, case, 250, true).batched;
        assert!(
            batched > 0,
            "seed {seed} case {case}: no append went through the host's queue"
        );
    }
}
