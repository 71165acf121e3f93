//! Tests of the ttl, replica and skip writes: per-message ttl, replica appends, skips.

use crate::fs::{FsFile, OpenOptions};
use crate::memfs::MemFs;
use crate::record::{self, Decoded, Kind};
use crate::*;
use std::time::Duration;

const SEC: i64 = 1_000_000_000;

fn small() -> Config {
    Config {
        block_size: 1024,
        write_buffer: 300,
        ..Config::default()
    }
}

fn open_at(fs: &MemFs, cfg: Config, clock: &ManualClock) -> Store<MemFs> {
    Store::builder(fs.clone())
        .config(cfg)
        .clock(clock.clone())
        .open()
        .expect("open")
}

#[test]
fn ttl_hides_at_the_deadline_and_tick_removes() {
    let fs = MemFs::new();
    let clock = ManualClock::new(100 * SEC);
    let mut s = open_at(&fs, small(), &clock);
    s.append("a", b"", b"keep").unwrap();
    let t = s
        .append_with_ttl("a", b"h", b"short", Duration::from_secs(10))
        .unwrap();
    s.append("b", b"", b"after").unwrap();
    assert_eq!(s.get(t).unwrap().payload, b"short");
    clock.advance(10 * SEC);
    // due, not yet removed: no read returns it
    assert!(matches!(s.get(t), Err(Error::NotFound { .. })));
    assert_eq!(s.next_matching("a", 2).unwrap().map(|m| m.seq), None);
    // the subject's newest live message instead
    assert_eq!(s.last_for_subject("a").unwrap().map(|m| m.seq), Some(1));
    assert_eq!(s.subjects_state(">").unwrap()["a"], 1);
    assert!(matches!(s.subject_for_seq(t), Err(Error::NotFound { .. })));
    // state() counts it until the removal runs, as NATS does
    assert_eq!(s.state().msgs, 3);
    s.tick().unwrap();
    assert_eq!(s.state().msgs, 2);
    assert_eq!(s.last_for_subject("a").unwrap().map(|m| m.seq), Some(1));
    drop(s);
    let s = open_at(&fs, small(), &clock);
    assert_eq!((s.state().msgs, s.state().last_seq), (2, 3));
}

#[test]
fn ttl_survives_reopen_and_open_expires() {
    let fs = MemFs::new();
    let clock = ManualClock::new(100 * SEC);
    let mut s = open_at(&fs, small(), &clock);
    for i in 0..30u64 {
        let ttl = Duration::from_secs(1 + i % 3);
        s.append_with_ttl("t.x", b"", &[7u8; 40], ttl).unwrap();
    }
    s.append("t.y", b"", b"stays").unwrap();
    s.close().unwrap();
    // index.db holds the ttls pending (version 2): open uses it and knows them
    let mut s = open_at(&fs, small(), &clock);
    assert!(s.recovery_report().used_index, "opened from index.db");
    assert_eq!(s.state().msgs, 31);
    assert!(s.get(1).is_ok());
    clock.advance(2 * SEC);
    assert!(s.get(1).is_err() && s.get(2).is_err() && s.get(3).is_ok());
    drop(s);
    // from index.db (unchanged since close), then from a rebuild of the same blocks: the same
    let s = open_at(&fs, small(), &clock);
    assert!(s.recovery_report().used_index);
    let from_index = s.state();
    assert_eq!(from_index.msgs, 11, "open removed the 20 expired ones");
    drop(s);
    fs.remove_file(crate::store::INDEX_FILE).unwrap();
    let mut s = open_at(&fs, small(), &clock);
    assert!(!s.recovery_report().used_index);
    assert_eq!(s.state(), from_index, "index.db and rebuild agree");
    clock.advance(SEC);
    s.tick().unwrap();
    assert_eq!((s.state().msgs, s.state().first_seq), (1, 31));
    s.close().unwrap();
    let s = open_at(&fs, small(), &clock);
    assert!(
        s.recovery_report().used_index,
        "no ttl left: index.db again"
    );
    assert_eq!(s.state().msgs, 1);
}

#[test]
fn ttl_expiry_shares_the_path_with_max_age() {
    let fs = MemFs::new();
    let clock = ManualClock::new(100 * SEC);
    let mut cfg = small();
    cfg.limits.max_age = Duration::from_secs(60);
    let mut s = open_at(&fs, cfg.clone(), &clock);
    s.append("a", b"", b"old").unwrap();
    s.append_with_ttl("a", b"", b"ttl", Duration::from_secs(5))
        .unwrap();
    s.append("a", b"", b"new").unwrap();
    clock.advance(5 * SEC);
    s.tick().unwrap();
    assert_eq!(s.state().msgs, 2);
    clock.advance(60 * SEC);
    s.tick().unwrap();
    assert_eq!(s.state().msgs, 0);
    assert_eq!(s.state().last_seq, 3);
}

#[test]
fn ttl_refusals_and_erase_and_truncate() {
    let fs = MemFs::new();
    let clock = ManualClock::new(100 * SEC);
    let mut s = open_at(&fs, small(), &clock);
    assert!(matches!(
        s.append_with_ttl("a", b"", b"x", Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.append_with_ttl("a.*", b"", b"x", Duration::from_secs(1)),
        Err(Error::InvalidSubject { .. })
    ));
    assert!(matches!(
        s.append_with_ttl("a", b"", &vec![0; 2 << 20], Duration::from_secs(1)),
        Err(Error::TooLarge { .. })
    ));
    s.append_with_ttl("a", b"h", b"x", Duration::MAX).unwrap();
    s.append_with_ttl("a", b"h", b"secret", Duration::from_secs(9))
        .unwrap();
    s.erase(2).unwrap();
    s.append_with_ttl("a", b"", b"3", Duration::from_secs(1))
        .unwrap();
    s.truncate(2).unwrap();
    s.append("a", b"", b"no ttl").unwrap();
    clock.advance(10 * SEC);
    s.tick().unwrap();
    assert_eq!(
        s.get(3).unwrap().payload,
        b"no ttl",
        "the old ttl of 3 is forgotten"
    );
    assert!(s.get(1).is_ok(), "Duration::MAX saturates, never wraps");
    drop(s);
    let mut s = open_at(&fs, small(), &clock);
    assert!(s.get(3).is_ok() && s.get(1).is_ok() && s.get(2).is_err());
    drop(s);
    assert!(verify::verify(&fs).unwrap().is_clean());
}

#[test]
fn append_raw_takes_the_given_sequence_and_time() {
    let fs = MemFs::new();
    let clock = ManualClock::new(100 * SEC);
    let mut s = open_at(&fs, small(), &clock);
    assert_eq!(s.append_raw(1, 50, "r", b"", b"one").unwrap(), 1);
    let m = s.get(1).unwrap();
    assert_eq!((m.ts, m.payload.as_slice()), (50, &b"one"[..]));
    for (seq, ts) in [(1, 60), (0, 60), (3, 60)] {
        assert!(
            matches!(
                s.append_raw(seq, ts, "r", b"", b"x"),
                Err(Error::SequenceMismatch { last_seq: 1, .. })
            ),
            "seq {seq}"
        );
    }
    assert!(matches!(
        s.append_raw(2, 49, "r", b"", b"x"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.append_raw(2, 60, "r.>", b"", b"x"),
        Err(Error::InvalidSubject { .. })
    ));
    s.skip_many(2, 3).unwrap();
    assert_eq!(s.append_raw(5, 200 * SEC, "r", b"", b"five").unwrap(), 5);
    assert_eq!(s.state().last_ts, 200 * SEC);
    drop(s);
    let s = open_at(&fs, small(), &clock);
    let st = s.state();
    assert_eq!((st.msgs, st.last_seq, st.last_ts), (2, 5, 200 * SEC));
    assert!(
        s.recovery_report().lost.is_empty(),
        "{:?}",
        s.recovery_report()
    );
}

#[test]
fn skips_hold_the_sequence_across_reopen() {
    let fs = MemFs::new();
    let clock = ManualClock::new(100 * SEC);
    let cfg = Config {
        sync: SyncPolicy::Never,
        ..small()
    };
    let mut s = open_at(&fs, cfg.clone(), &clock);
    assert_eq!(s.skip_msg(1).unwrap(), 1);
    assert_eq!(s.state().first_seq, 2);
    s.append("a", b"", b"2").unwrap();
    assert!(matches!(
        s.skip_many(2, 1),
        Err(Error::SequenceMismatch { .. })
    ));
    assert!(matches!(s.skip_many(3, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        s.skip_many(3, u64::MAX),
        Err(Error::LimitExceeded { .. })
    ));
    assert_eq!(s.skip_many(3, 100).unwrap(), 102);
    assert_eq!(s.append("a", b"", b"103").unwrap(), 103);
    s.delete(103).unwrap();
    s.skip_many(104, 5).unwrap();
    let st = s.state();
    assert_eq!((st.msgs, st.first_seq, st.last_seq), (1, 2, 108));
    drop(s);
    for _ in 0..2 {
        let s = open_at(&fs, cfg.clone(), &clock);
        let st = s.state();
        assert_eq!((st.msgs, st.first_seq, st.last_seq), (1, 2, 108));
        assert!(
            s.recovery_report().lost.is_empty(),
            "{:?}",
            s.recovery_report()
        );
        assert!(s.recovery_report().out_of_order.is_empty());
        s.close().unwrap();
    }
    let v = verify::verify(&fs).unwrap();
    assert!(v.is_clean() && v.last_seq == 108, "{v:?}");
    let mut s = open_at(&fs, cfg, &clock);
    s.purge().unwrap();
    assert_eq!(s.skip_many(109, 2).unwrap(), 110);
    assert_eq!(s.append("a", b"", b"").unwrap(), 111);
}

#[test]
fn skip_record_bytes_decode_and_damage_is_refused() {
    let mut v = Vec::new();
    record::encode_skip(&mut v, 10, 4, 77);
    match record::decode(&v) {
        Decoded::Record(r) => assert_eq!((r.kind, r.skipped()), (Kind::Skip, Some((7, 10)))),
        other => panic!("{other:?}"),
    }
    for (last, count) in [(3u64, 4u64), (3, 0)] {
        let mut w = Vec::new();
        record::encode(
            &mut w,
            Kind::Skip,
            0,
            last,
            1,
            b"",
            b"",
            &count.to_le_bytes(),
        );
        assert!(
            matches!(record::decode(&w), Decoded::Bad { .. }),
            "{last} {count}"
        );
    }
    let mut t = Vec::new();
    record::encode_with_ttl(&mut t, 0, 5, 10, b"a.b", b"h", b"pay", 99);
    match record::decode(&t) {
        Decoded::Record(r) => {
            assert_eq!(
                (r.headers, r.payload, r.deadline()),
                (&b"h"[..], &b"pay"[..], Some(109))
            )
        }
        other => panic!("{other:?}"),
    }
    for bit in 0..t.len() * 8 {
        let mut w = t.clone();
        w[bit / 8] ^= 1 << (bit % 8);
        assert!(
            !matches!(record::decode(&w), Decoded::Record(_)),
            "bit {bit}"
        );
    }
}

/// New content only: a workload with ttls, raw appends and skips; its bytes are checked in
/// under `tests/golden_write/` (`SEQSTORE_BLESS=1` writes them). The older goldens, which
/// hold none of these, are unchanged.
#[test]
fn golden_ttl_raw_skip_format() {
    let fs = MemFs::new();
    let clock = ManualClock::new(100 * SEC);
    let mut s = open_at(&fs, small(), &clock);
    s.append("g.a", b"h", b"plain").unwrap();
    s.append_with_ttl("g.b", b"", b"ttl", Duration::from_millis(1500))
        .unwrap();
    s.skip_many(3, 5).unwrap();
    s.append_raw(8, 200 * SEC, "g.c", b"", b"raw").unwrap();
    clock.set(300 * SEC);
    s.tick().unwrap();
    s.close().unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden_write");
    let got: Vec<(String, Vec<u8>)> = fs
        .paths()
        .into_iter()
        .filter(|p| p.ends_with(".blk"))
        .map(|p| (p.replace('/', "__"), fs.bytes(&p)))
        .collect();
    if std::env::var("SEQSTORE_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, b) in &got {
            std::fs::write(dir.join(name), b).unwrap();
        }
    }
    for (name, b) in &got {
        let w = std::fs::read(dir.join(name)).expect("golden file (SEQSTORE_BLESS=1)");
        assert!(*b == w, "{name} differs from its golden");
    }
}

/// An `index.db` of layout version 1 (before the ttl section) or 2 (before the blocks'
/// `ts_hi`), the golden ones of those formats kept under `tests/index_v1/` and
/// `tests/index_v2/`, is still used at open, and gives the state the current one of the same
/// blocks gives.
#[test]
fn index_db_versions_1_and_2_are_still_used() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let v1 = std::fs::read(dir.join("index_v1/1.index.db")).unwrap();
    assert_eq!(v1[4..8], 1u32.to_le_bytes(), "the fixture is version 1");
    let v2 = std::fs::read(dir.join("index_v2/1.index.db")).unwrap();
    assert_eq!(v2[4..8], 2u32.to_le_bytes(), "the fixture is version 2");
    let load = |index: &[u8]| {
        let fs = MemFs::new();
        fs.create_dir(crate::store::MSGS_DIR).unwrap();
        for e in std::fs::read_dir(dir.join("golden")).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            let Some(path) = name.strip_prefix("1.msgs__") else {
                continue;
            };
            let f = fs
                .open(
                    &format!("msgs/{path}"),
                    OpenOptions::new().write(true).create(true),
                )
                .unwrap();
            f.write_all_at(&std::fs::read(dir.join("golden").join(&name)).unwrap(), 0)
                .unwrap();
        }
        let f = fs
            .open(
                crate::store::INDEX_FILE,
                OpenOptions::new().write(true).create(true),
            )
            .unwrap();
        f.write_all_at(index, 0).unwrap();
        let s = Store::open(fs, small()).unwrap();
        assert!(s.recovery_report().used_index, "{:?}", s.recovery_report());
        s.state()
    };
    let v3 = std::fs::read(dir.join("golden/1.index.db")).unwrap();
    assert_eq!(v3[4..8], 3u32.to_le_bytes());
    assert_eq!(load(&v1), load(&v3));
    assert_eq!(load(&v2), load(&v3));
}

/// `SharedStore`'s ttl, replica and skip writes under `Always`: ttl appends from several threads share
/// fsyncs as appends do (each returns durable: the group commit's own test covers that part),
/// a replica append goes through the same path, and a skip fsyncs before it returns.
#[test]
fn shared_store_ttl_raw_and_skip_writes() {
    let fs = MemFs::with_sync_delay(500);
    let store = Store::open(fs.clone(), Config::default()).unwrap();
    assert_eq!(store.config().sync, SyncPolicy::Always);
    let shared = SharedStore::new(store);
    let before = fs.syncs();
    let seqs = crate::tests::seqs_from_threads(&shared, 6, 100, |s, t, i| match i % 2 {
        0 => s.append_with_ttl("t", b"", b"x", Duration::from_secs(3600)),
        _ => s.append(&format!("p.{t}"), b"", b"y"),
    });
    assert_eq!(seqs, (1..=600).collect::<Vec<_>>());
    let syncs = fs.syncs() - before;
    assert!(
        syncs < 600 / 3,
        "{syncs} fsyncs for 600 writes: no group commit"
    );
    let last_ts = shared.with(|s| s.state()).last_ts;
    assert!(matches!(
        shared.append_raw(602, last_ts, "r", b"", b"z"),
        Err(Error::SequenceMismatch {
            seq: 602,
            last_seq: 600
        })
    ));
    let b = fs.syncs();
    assert_eq!(
        shared.append_raw(601, last_ts, "r", b"", b"z").unwrap(),
        601
    );
    assert!(
        fs.syncs() > b,
        "a raw append under Always fsyncs before it returns"
    );
    let b = fs.syncs();
    assert_eq!(shared.skip_many(602, 10).unwrap(), 611);
    assert!(fs.syncs() > b, "a skip fsyncs before it returns");
    assert_eq!(shared.skip_msg(612).unwrap(), 612);
    assert_eq!(shared.append("after", b"", b"a").unwrap(), 613);
    assert!(shared
        .with(|s| s.get(2))
        .is_ok_and(|m| m.subject.starts_with("p.") || m.subject == "t"));
}
