//! The client's blocking adapter is the same stream as a store on a directory: random valid
//! operation sequences, each operation run through `StreamStore` on a `Store` (host-fs, a
//! temporary directory) and on a `BlockingStream` of a one-node seqstore-server (in this
//! process, on loopback). Every result must be equal (timestamps aside: the directory's are
//! this process's clock, the server's its leader's), and a refusal on one side must be a
//! refusal on the other. The operations the server does not serve are checked to be refused
//! with `Error::Unsupported`, sending nothing.
//!
//! The seed is fixed (`SEQSTORE_SEED=N` replays another); 300 operations in a default run, 2,000
//! under `SEQSTORE_TEST_SIZE=full`, `SEQSTORE_BLOCKING_OPS=K` for another length. A difference
//! is shrunk (runs of steps left out, each try on a new stream and store) and printed.

mod common;

use common::Rng;
use seqstore_client::{BlockingStream, Client, Error};
use seqstore_core::surface::StreamStore;
use seqstore_core::{AckPolicy, ConsumerConfig, Store, StoredMsg, StreamState};
use seqstore_fs::HostFs;
use std::fmt::Debug;
use std::time::{Duration, Instant};

const SUBJECTS: [&str; 4] = ["a", "b.x", "b.y", "c"];
const FILTERS: [&str; 6] = [">", "a", "b.*", "b.x", "c", "z"];

/// A one-node server on a thread of its own, for the rest of the test process; its client
/// once the node leads.
fn server(dir: &std::path::Path) -> Client {
    let addr = common::free_addr();
    let opts = seqstore_server::NodeOpts::single(dir.to_path_buf(), addr.clone());
    // (a node that stops shows as the wait below running out)
    seqstore_server::serve_on_thread(opts);
    let client = Client::new(&[format!("http://{addr}")], None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        if rt.block_on(client.list_streams()).is_ok() {
            return client;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the server did not lead within 20 s");
}

/// A message without its timestamp (the two sides' clocks differ).
fn untimed(m: StoredMsg) -> StoredMsg {
    StoredMsg { ts: 0, ..m }
}

fn untimed_state(s: StreamState) -> StreamState {
    StreamState {
        first_ts: 0,
        last_ts: 0,
        ..s
    }
}

/// The operations so far, and how many both sides did or both refused.
#[derive(Default)]
struct Log {
    ops: Vec<String>,
    done: usize,
    refused: usize,
}

/// `Err`: what differed.
type Outcome = Result<(), String>;

/// What both sides answered, compared: equal values, or a refusal on both.
fn same<T: PartialEq + Debug, E1: Debug, E2: Debug>(
    what: &str,
    local: Result<T, E1>,
    remote: Result<T, E2>,
    log: &mut Log,
) -> Outcome {
    if let Some(line) = log.ops.last_mut().filter(|_| what != "state") {
        line.insert_str(0, &format!("{what}: "));
    }
    match (&local, &remote) {
        (Ok(a), Ok(b)) if a == b => log.done += 1,
        (Err(_), Err(_)) => log.refused += 1,
        _ => {
            let m = format!("{what}: the store answered {local:?}, the cluster {remote:?}");
            return Err(m);
        }
    }
    Ok(())
}

/// One random operation on both sides, drawn from `seed` alone: any subsequence of steps is
/// a valid sequence (a sequence number is drawn relative to the stream's last), so a failing
/// sequence shrinks by leaving steps out.
fn step(seed: u64, s: &mut Store<HostFs>, r: &mut BlockingStream, log: &mut Log) -> Outcome {
    let rng = &mut Rng::new(seed);
    let last = Store::state(s).last_seq;
    let seq = rng.below(last + 3);
    let subj = SUBJECTS[rng.below(SUBJECTS.len() as u64) as usize];
    let f = FILTERS[rng.below(FILTERS.len() as u64) as usize];
    let consumer = ["c1", "c2"][rng.below(2) as usize];
    let op = rng.below(100);
    log.ops.push(format!(
        "{op} seq={seq} subj={subj} filter={f} consumer={consumer}"
    ));
    let msg = |m: Option<StoredMsg>| m.map(untimed);
    match op {
        0..=34 => {
            let p = vec![b'p'; rng.below(64) as usize];
            let h: &[u8] = [&b""[..], b"NATS/1.0\r\nk: v\r\n\r\n"][rng.below(2) as usize];
            same("append", s.append(subj, h, &p), r.append(subj, h, &p), log)
        }
        35..=39 => {
            let first = if rng.below(5) == 0 { seq } else { last + 1 };
            let n = 1 + rng.below(3);
            same(
                "skip_many",
                s.skip_many(first, n),
                r.skip_many(first, n),
                log,
            )
        }
        40..=47 => same("get", s.get(seq).map(untimed), r.get(seq).map(untimed), log),
        48..=52 => {
            let (a, b) = (s.next_matching(f, seq), r.next_matching(f, seq));
            same("next_matching", a.map(msg), b.map(msg), log)
        }
        53..=56 => {
            let (a, b) = (s.prev_matching(f, seq), r.prev_matching(f, seq));
            same("prev_matching", a.map(msg), b.map(msg), log)
        }
        57..=60 => {
            let (a, b) = (s.last_for_subject(f), r.last_for_subject(f));
            same("last_for_subject", a.map(msg), b.map(msg), log)
        }
        61..=64 => {
            let lps = rng.below(2) == 0;
            let (a, b) = (s.num_pending(seq, f, lps), r.num_pending(seq, f, lps));
            same("num_pending", a, b, log)
        }
        65..=67 => same(
            "subjects_state",
            s.subjects_state(f),
            r.subjects_state(f),
            log,
        ),
        68..=69 => same(
            "subject_for_seq",
            s.subject_for_seq(seq),
            r.subject_for_seq(seq),
            log,
        ),
        70..=75 => same("delete", s.delete(seq), r.delete(seq), log),
        76 => same("purge", s.purge(), r.purge(), log),
        77..=79 => {
            // a sequence or a count to keep (NATS takes one of them), or both
            let (up_to, keep) =
                [(seq, 0), (0, rng.below(4)), (seq, rng.below(4))][rng.below(3) as usize];
            if let Some(line) = log.ops.last_mut() {
                line.push_str(&format!(" up_to={up_to} keep={keep}"));
            }
            let (a, b) = (s.purge_ex(f, up_to, keep), r.purge_ex(f, up_to, keep));
            same("purge_ex", a, b, log)
        }
        80..=81 => same("compact", s.compact(seq), r.compact(seq), log),
        82..=83 => same("truncate", s.truncate(seq), r.truncate(seq), log),
        84..=86 => {
            let policies = [AckPolicy::Explicit, AckPolicy::All, AckPolicy::None];
            let cfg = ConsumerConfig {
                name: consumer.into(),
                ack_policy: policies[rng.below(3) as usize],
                max_deliver: rng.below(3),
            };
            same(
                "consumer_add",
                s.consumer_add(&cfg),
                r.consumer_add(&cfg),
                log,
            )
        }
        87..=88 => {
            let (a, b) = (s.consumer_state(consumer), r.consumer_state(consumer));
            same("consumer_state", a, b, log)
        }
        89..=90 => {
            let (a, b) = (s.consumer_config(consumer), r.consumer_config(consumer));
            same("consumer_config", a, b, log)
        }
        91..=92 => {
            let (a, b) = (s.consumer_delete(consumer), r.consumer_delete(consumer));
            same("consumer_delete", a, b, log)
        }
        93..=94 => same(
            "consumer_names",
            s.consumer_names(),
            r.consumer_names(),
            log,
        ),
        _ => same("sync", s.sync(), r.sync(), log),
    }?;
    let local = untimed_state(Store::state(s));
    same(
        "state",
        Ok::<_, ()>(local),
        r.state().map(untimed_state),
        log,
    )
}

/// Runs `steps` on a new stream (`stream`) and a new store: the first difference, if any.
fn run(client: &Client, stream: &str, steps: &[u64]) -> (Log, Outcome) {
    let mut log = Log::default();
    let mut r = BlockingStream::new(client.clone(), stream).expect("runtime");
    let config = Default::default();
    let created = r.client().create_stream(stream, &config);
    r.block_on(created).expect("the stream is created");
    let dir = tempfile::tempdir().expect("dir");
    let fs = HostFs::create(dir.path()).expect("fs");
    let mut s = Store::builder(fs).open().expect("the store opens");
    let outcome = steps
        .iter()
        .try_for_each(|&seed| step(seed, &mut s, &mut r, &mut log));
    if outcome.is_ok() {
        unserved_are_refused(&mut r);
    }
    s.close().expect("close");
    r.close().expect("close");
    (log, outcome)
}

/// The shortest sequence found by leaving out runs of steps (halving their length) while the
/// run still differs, each try on a stream and a store of its own.
fn shrink(client: &Client, mut steps: Vec<u64>) -> Vec<u64> {
    let mut tries = 0;
    let mut chunk = steps.len() / 2;
    while chunk > 0 {
        let mut at = 0;
        while at < steps.len() {
            let mut shorter = steps.clone();
            shorter.drain(at..(at + chunk).min(steps.len()));
            tries += 1;
            if run(client, &format!("shrink{tries}"), &shorter).1.is_err() {
                steps = shorter;
            } else {
                at += chunk;
            }
        }
        chunk /= 2;
    }
    steps
}

/// The operations the server has no request for are refused before anything is sent.
fn unserved_are_refused(r: &mut BlockingStream) {
    let cfg = ConsumerConfig {
        name: "c1".into(),
        ack_policy: AckPolicy::Explicit,
        max_deliver: 0,
    };
    let answers: Vec<(&str, Result<(), Error>)> = vec![
        ("append_raw", r.append_raw(99, 1, "a", b"", b"").map(drop)),
        ("get_batch", r.get_batch(1, ">", 10, 0).map(drop)),
        ("filtered_state", r.filtered_state(">", 1).map(drop)),
        ("multi_last_seqs", r.multi_last_seqs(&[">"], 0, 0).map(drop)),
        ("all_last_seqs", r.all_last_seqs().map(drop)),
        ("seq_from_time", r.seq_from_time(0).map(drop)),
        ("erase", r.erase(1)),
        ("checkpoint", r.checkpoint()),
        (
            "two filters",
            r.next_matching_multi(&["a", "c"], 1).map(drop),
        ),
        ("consumer_update", r.consumer_update(&cfg)),
        ("update_acks", r.update_acks("c1", 1, 1)),
    ];
    for (what, answer) in answers {
        assert!(
            matches!(answer, Err(Error::Unsupported(_))),
            "{what}: {answer:?}"
        );
    }
}

#[test]
fn random_operations_answer_the_same_on_a_store_and_through_the_blocking_adapter() {
    let seed = match std::env::var("SEQSTORE_SEED") {
        Ok(v) => v.parse().expect("SEQSTORE_SEED is a u64"),
        Err(_) => 20261207,
    };
    let sized = seqstore_test_setup::sized(300, 2000);
    let ops = std::env::var("SEQSTORE_BLOCKING_OPS").map_or(sized, |v| v.parse().expect("a count"));
    eprintln!("seed {seed} (replay with SEQSTORE_SEED={seed}), {ops} operations");
    let dir = tempfile::tempdir().expect("dir");
    let client = server(dir.path());
    let mut rng = Rng::new(seed);
    let steps: Vec<u64> = (0..ops).map(|_| rng.next()).collect();
    let (log, outcome) = run(&client, "s", &steps);
    if let Err(first) = outcome {
        let short = shrink(&client, steps);
        let (log, outcome) = run(&client, "shrunk", &short);
        panic!(
            "seed {seed}: {first}\nshrunk to {} steps, which give: {outcome:?}\n{}",
            short.len(),
            log.ops.join("\n")
        );
    }
    let (done, refused) = (log.done, log.refused);
    eprintln!("{done} answers equal, {refused} refusals on both sides");
    // the sequence exercises the stream: most operations succeed, as they do on a store
    assert!(refused < done, "{refused} refusals against {done} answers");
}
