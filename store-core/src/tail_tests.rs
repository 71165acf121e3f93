//! The open after a crash that reads only what `index.db` does not vouch for (`store/tail.rs`)
//! ends in the same store as a rebuild from every block: a seeded, shrinking generator of
//! operations with checkpoints, closes and crashes between them, each crash open checked
//! against a rebuild of a copy of the same directory without `index.db`.

use crate::fs::{FsFile, OpenOptions};
use crate::memfs::MemFs;
use crate::{Config, Error, Fs, Store, SyncPolicy};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config as ProptestConfig, RngSeed};

#[derive(Clone, Debug)]
enum Op {
    Append { subj: u8, len: u16 },
    Delete(u16),
    Erase(u16),
    Compact(u16),
    Truncate(u16),
    Skip,
    Purge,
    Sync,
    Checkpoint,
    CloseReopen,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        24 => (0u8..4, 0u16..700).prop_map(|(subj, len)| Op::Append { subj, len }),
        3 => any::<u16>().prop_map(Op::Delete),
        1 => any::<u16>().prop_map(Op::Erase),
        1 => any::<u16>().prop_map(Op::Compact),
        1 => any::<u16>().prop_map(Op::Truncate),
        1 => Just(Op::Skip),
        1 => Just(Op::Purge),
        2 => Just(Op::Sync),
        2 => Just(Op::Checkpoint),
        1 => Just(Op::CloseReopen),
        3 => Just(Op::Crash),
    ]
}

fn cfg(always: bool) -> Config {
    let sync = if always {
        SyncPolicy::Always
    } else {
        SyncPolicy::Never
    };
    Config::default().with_block_size(4096).with_sync(sync)
}

/// A copy of `fs` as it is now, without `index.db`: what a rebuild opens.
fn copy_without_index(fs: &MemFs) -> MemFs {
    let copy = MemFs::new();
    for (path, bytes) in fs.tree() {
        match bytes {
            None => copy.create_dir(&path).unwrap(),
            Some(_) if path == crate::store::INDEX_FILE => {}
            Some(b) => {
                let o = OpenOptions::new().write(true).create(true);
                copy.open(&path, o).unwrap().write_all_at(&b, 0).unwrap();
            }
        }
    }
    copy
}

/// A sequence in the stream's range picked by `pick`.
fn pick_seq(s: &Store<MemFs>, pick: u16) -> u64 {
    let st = s.state();
    let span = st.last_seq.saturating_sub(st.first_seq) + 1;
    (st.first_seq + pick as u64 % span).max(1)
}

/// Everything a reader sees: the state, the subjects, every message of the range.
fn contents(s: &mut Store<MemFs>) -> String {
    let st = s.state();
    let mut out = format!("{st:?} {:?}", s.subjects_state(">").unwrap());
    for seq in st.first_seq..=st.last_seq {
        match s.get(seq) {
            Ok(m) => out.push_str(&format!("\n{seq} {} {} {:?}", m.subject, m.ts, m.payload)),
            Err(Error::NotFound { .. }) => {}
            Err(e) => panic!("get {seq}: {e}"),
        }
    }
    out
}

/// Opens after a crash; checks against the rebuild. Whether the tail path was taken.
fn crash_open(fs: &MemFs, cfg: &Config) -> Result<(Store<MemFs>, bool), TestCaseError> {
    fs.locks.release_all();
    let copy = copy_without_index(fs);
    let mut s = Store::open(fs.clone(), cfg.clone()).unwrap();
    let mut rebuilt = Store::open(copy, cfg.clone()).unwrap();
    let r = s.recovery_report().clone();
    if std::env::var("TAIL_DEBUG").is_ok() {
        eprintln!(
            "used {} tail {} rejected {:?}",
            r.used_index, r.tail_scanned, r.index_rejected
        );
    }
    prop_assert_eq!(contents(&mut s), contents(&mut rebuilt), "report {:?}", r);
    rebuilt.close().unwrap();
    Ok((s, r.used_index && r.tail_scanned > 0))
}

/// Runs `ops`; returns how many crash opens took the tail path.
fn run(ops: &[Op], always: bool) -> Result<u32, TestCaseError> {
    let cfg = cfg(always);
    let fs = MemFs::new();
    let mut s = Store::open(fs.clone(), cfg.clone()).unwrap();
    let mut tails = 0;
    for op in ops {
        match *op {
            Op::Append { subj, len } => {
                let payload = vec![subj; len as usize];
                s.append(&format!("s.{subj}"), b"", &payload).unwrap();
            }
            Op::Delete(p) => match s.delete(pick_seq(&s, p)) {
                Ok(()) | Err(Error::NotFound { .. }) => {}
                Err(e) => panic!("delete: {e}"),
            },
            Op::Erase(p) => match s.erase(pick_seq(&s, p)) {
                Ok(()) | Err(Error::NotFound { .. }) => {}
                Err(e) => panic!("erase: {e}"),
            },
            Op::Compact(p) => {
                s.compact(pick_seq(&s, p)).unwrap();
            }
            Op::Truncate(p) => {
                s.truncate(pick_seq(&s, p)).unwrap();
            }
            Op::Skip => {
                let next = s.state().last_seq + 1;
                s.skip_msg(next).unwrap();
            }
            Op::Purge => {
                s.purge().unwrap();
            }
            Op::Sync => s.sync().unwrap(),
            Op::Checkpoint => s.checkpoint().unwrap(),
            Op::CloseReopen => {
                s.close().unwrap();
                s = Store::open(fs.clone(), cfg.clone()).unwrap();
            }
            Op::Crash => {
                // kill -9: no close, no drop (the write buffer is lost with the process)
                std::mem::forget(s);
                let (next, tail) = crash_open(&fs, &cfg)?;
                s = next;
                tails += tail as u32;
            }
        }
    }
    std::mem::forget(s);
    let (s, tail) = crash_open(&fs, &cfg)?;
    s.close().unwrap();
    Ok(tails + tail as u32)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        rng_seed: RngSeed::Fixed(20261206),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any operations, any crash point between them: the crash open equals the rebuild.
    #[test]
    fn a_crash_open_from_index_db_equals_a_rebuild(
        ops in proptest::collection::vec(op(), 1..160),
        always in any::<bool>(),
    ) {
        run(&ops, always)?;
    }
}

/// The generator reaches the tail path, often: without it the test above proves nothing of it.
#[test]
fn the_generated_crashes_take_the_tail_path() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        rng_seed: RngSeed::Fixed(20261206),
        ..ProptestConfig::default()
    });
    let (mut tails, mut crashes) = (0, 0);
    for _ in 0..48 {
        let ops = proptest::collection::vec(op(), 1..160)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        crashes += 1 + ops.iter().filter(|o| matches!(o, Op::Crash)).count() as u32;
        tails += run(&ops, false).unwrap();
    }
    assert!(
        tails * 8 >= crashes,
        "{tails} of {crashes} crash opens took the tail path"
    );
}

/// The case the tail path is for: a closed stream, appends, a sync, kill -9. The open reads
/// the appends only, not the blocks `index.db` vouches for.
#[test]
fn a_crash_after_appends_reads_only_the_appends() {
    let fs = MemFs::new();
    let cfg = cfg(false);
    let mut s = Store::open(fs.clone(), cfg.clone()).unwrap();
    for i in 0..2000u32 {
        s.append(&format!("s.{}", i % 7), b"", &[1u8; 100]).unwrap();
    }
    s.close().unwrap();
    let mut s = Store::open(fs.clone(), cfg.clone()).unwrap();
    for _ in 0..10 {
        s.append("tail", b"", &[2u8; 100]).unwrap();
    }
    s.delete(5).unwrap();
    s.sync().unwrap();
    std::mem::forget(s);
    fs.locks.release_all();
    let mut s = Store::open(fs.clone(), cfg.clone()).unwrap();
    let r = s.recovery_report().clone();
    assert!(r.used_index && !r.lost_data(), "{r:?}");
    let stream_bytes: u64 = fs
        .tree()
        .iter()
        .filter_map(|(_, b)| b.as_ref())
        .map(|b| b.len() as u64)
        .sum();
    assert!(
        r.tail_scanned > 0 && r.tail_scanned * 20 < stream_bytes,
        "{r:?} of {stream_bytes}"
    );
    let st = s.state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (2009, 1, 2010));
    assert!(matches!(s.get(5), Err(Error::NotFound { .. })));
    assert_eq!(s.get(2010).unwrap().subject, "tail");
    s.close().unwrap();
}
