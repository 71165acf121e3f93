//! A stream of more blocks than the process may open files: `Config::open_blocks` bounds the
//! block handles the store holds, whatever the operations, and the store opens and reads
//! within a limit on open files (`RLIMIT_NOFILE`) far below its blocks, where holding every
//! block fails.
//!
//! One test in this binary: it counts the process's descriptors (`/proc/self/fd`) and lowers
//! its limit, which other tests running beside it would disturb. Seeded: it prints its seed,
//! and `SEQSTORE_SEED=N` replays it.
#![cfg(target_os = "linux")]

use seqstore_core::{Config, Error, Store, SyncPolicy};
use seqstore_fault_fs::Rng;
use seqstore_fs::HostFs;
use std::collections::BTreeMap;

/// Handles the store holds besides its blocks' (the lock, a consumer journal, slack).
const OTHER_FILES: usize = 4;

/// The bound on block handles (`Config::open_blocks`): `open_blocks`, plus the newest block,
/// plus sealed blocks written since their last fsync, which a read does not close (it runs
/// no fsync) and a roll fsyncs and closes down to half of `open_blocks`.
fn bound(open_blocks: usize) -> usize {
    open_blocks + open_blocks / 2 + 1 + OTHER_FILES
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn config(open_blocks: usize) -> Config {
    Config::default()
        .with_sync(SyncPolicy::Never)
        .with_block_size(1024)
        .with_open_blocks(open_blocks)
}

fn open(dir: &std::path::Path, open_blocks: usize) -> seqstore_core::Result<Store<HostFs>> {
    Store::builder(HostFs::open(dir).unwrap())
        .config(config(open_blocks))
        .open()
}

/// The messages the store must hold: sequence → (subject, payload).
type Model = BTreeMap<u64, (String, Vec<u8>)>;

fn append(s: &mut Store<HostFs>, rng: &mut Rng, model: &mut Model) {
    let subject = format!("s.{}", rng.below(8));
    let len = 40 + rng.below(700) as usize;
    let payload: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
    let seq = s.append(&subject, b"", &payload).unwrap();
    model.insert(seq, (subject, payload));
}

/// One random operation, checked against the model. Returns what it did.
fn step(s: &mut Store<HostFs>, rng: &mut Rng, model: &mut Model) -> &'static str {
    let last = s.state().last_seq;
    match rng.below(100) {
        0..=44 => {
            let seq = 1 + rng.below(last);
            match (s.get(seq), model.get(&seq)) {
                (Ok(m), Some((subj, p))) => assert!(m.subject == *subj && m.payload == *p),
                (Err(Error::NotFound { .. }), None) => {}
                (got, want) => panic!("get {seq}: {got:?}, model {want:?}"),
            }
            "get"
        }
        45..=59 => {
            let subj = format!("s.{}", rng.below(8));
            let want = model
                .iter()
                .rev()
                .find(|(_, m)| m.0 == subj)
                .map(|(q, _)| *q);
            let got = s.last_for_subject(&subj).unwrap().map(|m| m.seq);
            assert_eq!(got, want, "last_for_subject {subj}");
            "last"
        }
        60..=69 => {
            let from = 1 + rng.below(last);
            let want = model.range(from..).next().map(|(q, _)| *q);
            let got = s.next_matching(">", from).unwrap().map(|m| m.seq);
            assert_eq!(got, want, "next_matching from {from}");
            "next"
        }
        70..=79 => {
            let seq = 1 + rng.below(last);
            match s.delete(seq) {
                Ok(()) => assert!(model.remove(&seq).is_some(), "deleted {seq} twice"),
                Err(Error::NotFound { .. }) => assert!(!model.contains_key(&seq)),
                Err(e) => panic!("delete {seq}: {e}"),
            }
            "delete"
        }
        80..=81 => {
            let first = *model.keys().next().unwrap_or(&1);
            let upto = first + rng.below(20);
            s.compact(upto).unwrap();
            model.retain(|q, _| *q >= upto);
            "compact"
        }
        82..=84 => {
            s.sync().unwrap();
            "sync"
        }
        _ => {
            append(s, rng, model);
            "append"
        }
    }
}

/// Writes a stream of many blocks, then runs random operations with reopens between them
/// (from index.db, and by rebuild without it), checking every answer and, after every
/// operation, the descriptors held. Returns the most held beyond `base`.
fn run(dir: &std::path::Path, seed: u64, open_blocks: usize, ops: usize) -> usize {
    let mut rng = Rng::new(seed);
    let mut model = Model::new();
    let base = fds();
    let mut s = open(dir, open_blocks).unwrap();
    for _ in 0..1500 {
        append(&mut s, &mut rng, &mut model);
    }
    let mut most = 0;
    for i in 0..ops {
        let what = step(&mut s, &mut rng, &mut model);
        let held = fds().saturating_sub(base);
        most = most.max(held);
        if open_blocks < 1000 {
            assert!(
                held <= bound(open_blocks),
                "seed {seed}: {held} descriptors held after op {i} ({what}), open_blocks {open_blocks}"
            );
        }
        if i % 500 == 499 {
            s.close().unwrap();
            if rng.below(2) == 0 {
                std::fs::remove_file(dir.join("index.db")).unwrap();
            }
            s = open(dir, open_blocks).unwrap();
            most = most.max(fds().saturating_sub(base));
        }
    }
    s.close().unwrap();
    most
}

/// Sets the soft limit on open files to `soft` (at most the hard limit); returns the old one
/// (`u64::MAX`: unlimited).
fn set_fd_limit(soft: u64) -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let old = getrlimit(Resource::Nofile);
    let new = Rlimit {
        current: Some(old.maximum.map_or(soft, |max| soft.min(max))),
        maximum: old.maximum,
    };
    setrlimit(Resource::Nofile, new).unwrap();
    old.current.unwrap_or(u64::MAX)
}

#[test]
fn block_handles_stay_bounded_and_a_stream_opens_under_a_low_file_limit() {
    let seed = std::env::var("SEQSTORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261205u64);
    println!("seed {seed} (SEQSTORE_SEED={seed} replays it)");

    // the bound holds through random operations and reopens
    let dir = tempfile::tempdir().unwrap();
    let most = run(dir.path(), seed, 8, 3000);
    let blocks = std::fs::read_dir(dir.path().join("msgs")).unwrap().count();
    println!("{blocks} blocks, at most {most} descriptors held with open_blocks 8");
    assert!(blocks > 200, "the stream must be many blocks: {blocks}");

    // the control: with every block held, the same run holds far more
    let control = tempfile::tempdir().unwrap();
    let held_all = run(control.path(), seed, 100_000, 600);
    assert!(
        held_all > bound(8),
        "holding every block held only {held_all} descriptors: the bound above shows nothing"
    );

    // under a limit of 128 descriptors more than the test holds, far below the stream's
    // blocks: the store opens with the default bound (from index.db and by rebuild) and reads
    // every message; holding every block is a typed error
    let open_blocks = Config::default().open_blocks;
    assert!(bound(open_blocks) < 128 && blocks > 2 * 128);
    let limit = (fds() + 128) as u64;
    let old = set_fd_limit(limit);
    let result = std::panic::catch_unwind(|| {
        for rebuild in [false, true] {
            if rebuild {
                let _ = std::fs::remove_file(dir.path().join("index.db"));
            }
            let mut s = open(dir.path(), open_blocks).unwrap();
            let st = s.state();
            let mut n = 0;
            for seq in st.first_seq..=st.last_seq {
                n += u64::from(s.get(seq).is_ok());
            }
            assert_eq!(n, st.msgs, "every message read back");
            s.close().unwrap();
        }
        let _ = std::fs::remove_file(dir.path().join("index.db"));
        match open(dir.path(), 100_000) {
            Err(Error::Io { source, .. }) => {
                assert_eq!(
                    source.raw_os_error(),
                    Some(rustix::io::Errno::MFILE.raw_os_error()),
                    "{source}"
                )
            }
            Err(e) => panic!("holding every block under {limit} descriptors: {e}"),
            Ok(_) => panic!("holding every block opened under {limit} descriptors"),
        }
    });
    set_fd_limit(old);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
