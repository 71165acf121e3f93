//! Tests of `Store::snapshot_to` and `restore` on the plain in-memory fs: a seeded
//! random workload snapshotted mid-way and restored, and hostile archives (every truncation,
//! byte flips, another version, arbitrary bytes), which must be a typed error that leaves the
//! target empty, never a panic or a store with other contents.

use crate::memfs::MemFs;
use crate::store::RESTORE_STAGE;
use crate::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn small() -> Config {
    Config {
        block_size: 1024,
        write_buffer: 300,
        ..Config::default()
    }
}

/// Everything a reader can see of a store: state, subjects, every stored message, every
/// consumer's configuration and state.
type Contents = (
    StreamState,
    BTreeMap<String, u64>,
    Vec<StoredMsg>,
    Vec<(ConsumerConfig, ConsumerState)>,
);

fn contents(s: &mut Store<MemFs>) -> Contents {
    let st = s.state();
    let mut msgs = Vec::new();
    if st.msgs > 0 {
        for seq in st.first_seq..=st.last_seq {
            match s.get(seq) {
                Ok(m) => msgs.push(m),
                Err(Error::NotFound { .. }) => {}
                Err(e) => panic!("get {seq}: {e}"),
            }
        }
    }
    assert_eq!(msgs.len() as u64, st.msgs);
    let consumers = s
        .consumer_names()
        .iter()
        .map(|n| (s.consumer_config(n).unwrap(), s.consumer_state(n).unwrap()))
        .collect();
    (st, s.subjects_state(">").unwrap(), msgs, consumers)
}

/// A consumer operation for the random workload: deliver the next message, ack a pending one,
/// or redeliver the oldest pending one, to consumer c1 (explicit acks) or c2 (ack all).
fn random_consumer_op(s: &mut Store<MemFs>, rng: &mut impl FnMut() -> u64) {
    let n = ["c1", "c2"][(rng() % 2) as usize];
    let st = s.consumer_state(n).unwrap();
    let last = s.state().last_seq;
    match rng() % 3 {
        0 if st.delivered.stream < last => {
            // the next message still stored (a removed one is never delivered)
            let d = st.delivered;
            if let Some(m) = s.next_matching(">", d.stream + 1).unwrap() {
                s.update_delivered(n, d.consumer + 1, m.seq, 1, rng() as i64 >> 2)
                    .unwrap();
            }
        }
        1 if !st.pending.is_empty() => {
            let k = (rng() % st.pending.len() as u64) as usize;
            let (&q, p) = st.pending.iter().nth(k).unwrap();
            s.update_acks(n, p.sequence, q).unwrap();
        }
        2 if !st.pending.is_empty() => {
            let (&q, _) = st.pending.iter().next().unwrap();
            let dc = st.redelivered.get(&q).copied().unwrap_or(0) + 2;
            s.update_delivered(n, st.delivered.consumer + 1, q, dc, 5)
                .unwrap();
        }
        _ => {}
    }
}

/// One random operation of the workload: mostly appends on a few subjects, and the removals
/// the store has (delete, purge by subject, compact, truncate, purge).
fn random_op(s: &mut Store<MemFs>, rng: &mut impl FnMut() -> u64) {
    let st = s.state();
    let span = st.last_seq.saturating_sub(st.first_seq) + 1;
    let pick = |r: u64| st.first_seq + r % span;
    match rng() % 100 {
        0..=69 => {
            let subj = ["orders.eu", "orders.us", "audit", "x.y.z"][(rng() % 4) as usize];
            let len = (rng() % 200) as usize;
            let payload: Vec<u8> = (0..len).map(|i| (i as u8) ^ (rng() as u8)).collect();
            s.append(
                subj,
                if rng().is_multiple_of(3) { b"hdr" } else { b"" },
                &payload,
            )
            .unwrap();
        }
        70..=84 if st.msgs > 0 => match s.delete(pick(rng())) {
            Ok(()) | Err(Error::NotFound { .. }) => {}
            Err(e) => panic!("delete: {e}"),
        },
        85..=89 => {
            s.purge_ex("orders.*", 0, rng() % 3).unwrap();
        }
        90..=93 if st.msgs > 0 => {
            s.compact(pick(rng())).unwrap();
        }
        94..=97 if st.msgs > 0 => {
            s.truncate(pick(rng()).max(st.first_seq)).unwrap();
        }
        98 => {
            s.purge().unwrap();
        }
        _ => {}
    }
}

fn restore_into(bytes: &[u8]) -> (MemFs, Result<(Store<MemFs>, SnapshotInfo)>) {
    let fs = MemFs::new();
    let r = restore(fs.clone(), small(), bytes);
    (fs, r)
}

#[test]
fn random_workload_snapshot_mid_way_restores_exactly() {
    let (seed, mut rng) = seeded_rng(0x5a4b_1600);
    eprintln!("snapshot workload seed {seed} (replay: SEQSTORE_SEED={seed})");
    for round in 0..6 {
        let fs = MemFs::new();
        let mut s = Store::open(fs.clone(), small()).unwrap();
        s.consumer_add(&ConsumerConfig::new("c1")).unwrap();
        let all = ConsumerConfig {
            ack_policy: AckPolicy::All,
            ..ConsumerConfig::new("c2")
        };
        s.consumer_add(&all).unwrap();
        let ops = 150 + rng() % 400;
        let mut snap = Vec::new();
        let mut model = None;
        for i in 0..ops {
            if rng().is_multiple_of(3) {
                random_consumer_op(&mut s, &mut rng);
            } else {
                random_op(&mut s, &mut rng);
            }
            if i == ops / 2 {
                let info = s.snapshot_to(&mut snap).unwrap();
                let at = contents(&mut s);
                assert_eq!(info.state, at.0, "seed {seed} round {round}");
                assert!(
                    info.files.len() > 2 || at.0.msgs < 20,
                    "seed {seed}: few blocks"
                );
                model = Some(at);
            }
        }
        // the source goes on after the snapshot and is still sound
        s.append("after", b"", b"more").unwrap();
        let (restored_fs, r) = restore_into(&snap);
        let (mut r, info) = r.unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
        let model = model.unwrap();
        assert_eq!(info.state, model.0, "seed {seed} round {round}");
        assert_eq!(model.3.len(), 2, "seed {seed} round {round}");
        assert_eq!(contents(&mut r), model, "seed {seed} round {round}");
        // and again after a reopen of the restored store (its journal replayed)
        drop(r);
        let (fs2, _) = (restored_fs.clone(), ());
        let mut r = Store::open(fs2, small()).unwrap();
        assert_eq!(
            contents(&mut r).3,
            model.3,
            "seed {seed} round {round}: reopen"
        );
        // the restored store is writable and continues the sequence
        let next = r.append("new", b"", b"x").unwrap();
        assert_eq!(next, model.0.last_seq + 1, "seed {seed} round {round}");
    }
}

#[test]
fn snapshot_of_a_shared_store_and_of_an_empty_one() {
    let fs = MemFs::new();
    let shared = SharedStore::new(Store::open(fs, small()).unwrap());
    let mut snap = Vec::new();
    let info = shared.with(|s| s.snapshot_to(&mut snap)).unwrap();
    assert_eq!(info.state.msgs, 0);
    let (_, r) = restore_into(&snap);
    assert_eq!(r.unwrap().0.state(), info.state);
    for i in 0..50u64 {
        shared.append("a", b"", &i.to_le_bytes()).unwrap();
    }
    snap.clear();
    let info = shared.with(|s| s.snapshot_to(&mut snap)).unwrap();
    shared.append("a", b"", b"later").unwrap();
    let (_, r) = restore_into(&snap);
    let mut r = r.unwrap().0;
    assert_eq!(r.state(), info.state);
    assert_eq!(r.get(50).unwrap().payload, 49u64.to_le_bytes());
}

fn small_snapshot() -> (Vec<u8>, Contents) {
    let fs = MemFs::new();
    let mut s = Store::open(fs, small()).unwrap();
    for i in 0..40u64 {
        s.append(["a", "b.c"][(i % 2) as usize], b"", &[i as u8; 40])
            .unwrap();
    }
    s.delete(7).unwrap();
    let mut snap = Vec::new();
    s.snapshot_to(&mut snap).unwrap();
    (snap, contents(&mut s))
}

/// A hostile archive: a typed `BadSnapshot` leaving nothing behind, or (damage restore cannot
/// see, e.g. in tar padding or the end-of-archive blocks) a store with the very same contents.
fn check_hostile(bytes: &[u8], want: &Contents, what: &str) {
    let (fs, r) = restore_into(bytes);
    match r {
        Ok((mut s, _)) => assert_eq!(&contents(&mut s), want, "{what}: other contents"),
        Err(Error::BadSnapshot { .. }) => {
            assert!(fs.paths().is_empty(), "{what}: left {:?}", fs.paths())
        }
        Err(e) => panic!("{what}: untyped error {e}"),
    }
}

#[test]
fn every_truncation_is_refused_or_complete() {
    let (snap, want) = small_snapshot();
    // the last 1024 bytes are tar's end-of-archive blocks: a stream cut there is complete
    let complete_from = snap.len() - 1024;
    for len in 0..snap.len() {
        let what = format!("truncated to {len} of {}", snap.len());
        if len < complete_from {
            let (fs, r) = restore_into(&snap[..len]);
            assert!(
                matches!(r, Err(Error::BadSnapshot { .. })),
                "{what}: {:?}",
                r.err()
            );
            assert!(fs.paths().is_empty(), "{what}: left {:?}", fs.paths());
        } else {
            check_hostile(&snap[..len], &want, &what);
        }
    }
}

#[test]
fn byte_flips_are_refused_or_harmless() {
    let (seed, mut rng) = seeded_rng(0x0f11);
    let (snap, want) = small_snapshot();
    for _ in 0..600 {
        let mut b = snap.clone();
        let at = (rng() % b.len() as u64) as usize;
        b[at] ^= (1 + rng() % 255) as u8;
        check_hostile(&b, &want, &format!("seed {seed}: byte {at} flipped"));
    }
}

#[test]
fn another_version_and_a_non_empty_target_are_typed_errors() {
    let (snap, _) = small_snapshot();
    let mut v2 = snap.clone();
    // the header entry's data starts at 512: "seqstore-snapshot v1\n"
    assert_eq!(&v2[512..533], b"seqstore-snapshot v1\n");
    v2[531] = b'2';
    let (fs, r) = restore_into(&v2);
    match r {
        Err(Error::BadSnapshot { reason }) => assert!(reason.contains("version 2"), "{reason}"),
        other => panic!("{:?}", other.err()),
    }
    assert!(fs.paths().is_empty());
    // a target holding anything is refused, and left as it was
    let fs = MemFs::new();
    drop(Store::open(fs.clone(), small()).unwrap());
    let before = fs.paths();
    let r = restore(fs.clone(), small(), &snap[..]);
    assert!(matches!(r, Err(Error::NotEmpty { .. })), "{:?}", r.err());
    assert_eq!(fs.paths(), before);
    // a lone staging directory (an interrupted restore) is cleared and the restore proceeds
    let fs = MemFs::new();
    fs.create_dir(RESTORE_STAGE).unwrap();
    restore(fs.clone(), small(), &snap[..]).unwrap();
}

#[test]
fn limits_that_change_the_restored_store_are_refused() {
    let (snap, _) = small_snapshot();
    let fs = MemFs::new();
    let cfg = Config {
        limits: Limits {
            max_msgs: 5,
            ..Limits::default()
        },
        ..small()
    };
    let r = restore(fs.clone(), cfg, &snap[..]);
    assert!(matches!(r, Err(Error::BadSnapshot { .. })), "{:?}", r.err());
    assert!(fs.paths().is_empty(), "left {:?}", fs.paths());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic and never open a store.
    #[test]
    fn restore_of_arbitrary_bytes_is_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let (fs, r) = restore_into(&bytes);
        prop_assert!(r.is_err());
        prop_assert!(fs.paths().is_empty());
    }

    /// A valid snapshot with a run of bytes overwritten: refused or harmless.
    #[test]
    fn restore_of_a_damaged_snapshot_is_refused_or_harmless(
        at in any::<prop::sample::Index>(),
        junk in proptest::collection::vec(any::<u8>(), 1..64),
    ) {
        let (snap, want) = small_snapshot();
        let mut b = snap.clone();
        let start = at.index(b.len());
        for (i, x) in junk.iter().enumerate() {
            if let Some(y) = b.get_mut(start + i) {
                *y = *x;
            }
        }
        check_hostile(&b, &want, &format!("{} bytes at {start}", junk.len()));
    }
}

/// The writer of a `SharedStore` snapshot that meddles while the archive streams: appends
/// (some on a thread of their own), purges twice (renaming and then removing the snapshot's
/// block files), and starts a thread that erases a message through `with`, which must wait
/// until the snapshot is done.
struct Meddler {
    shared: SharedStore<MemFs>,
    out: Vec<u8>,
    calls: u64,
    threads: Vec<std::thread::JoinHandle<()>>,
    erased: std::sync::Arc<std::sync::atomic::AtomicBool>,
    erase_seq: u64,
}

impl std::io::Write for Meddler {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use std::sync::atomic::Ordering;
        self.calls += 1;
        match self.calls {
            2 => {
                for i in 0..30u64 {
                    self.shared.append("during", b"", &i.to_le_bytes()).unwrap();
                }
                let s = self.shared.clone();
                self.threads.push(std::thread::spawn(move || {
                    for i in 0..30u64 {
                        s.append("during.thread", b"", &i.to_le_bytes()).unwrap();
                    }
                }));
            }
            3 => {
                let (s, erased, seq) = (self.shared.clone(), self.erased.clone(), self.erase_seq);
                self.threads.push(std::thread::spawn(move || {
                    // it runs after the snapshot, so after the purges: the message is gone
                    let r = s.with(|s| s.erase(seq));
                    assert!(matches!(r, Err(Error::NotFound { .. })), "{r:?}");
                    erased.store(true, Ordering::SeqCst);
                }));
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            5 | 7 => {
                use crate::surface::StreamStore;
                self.shared.purge().unwrap();
                self.shared.append("after.purge", b"", b"x").unwrap();
                assert!(self.shared.get(self.erase_seq).is_err(), "purged");
            }
            _ => {}
        }
        assert!(
            !self.erased.load(Ordering::SeqCst),
            "an erase ran while the snapshot streamed"
        );
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn shared_snapshot_lets_appends_and_purges_go_on_and_holds_the_start_point() {
    let (seed, mut rng) = seeded_rng(0x5a4e_d000);
    eprintln!("shared snapshot seed {seed} (replay: SEQSTORE_SEED={seed})");
    for sync in [SyncPolicy::Never, SyncPolicy::Always] {
        let fs = MemFs::new();
        let cfg = Config { sync, ..small() };
        let mut s = Store::open(fs, cfg).unwrap();
        for _ in 0..300 {
            random_op(&mut s, &mut rng);
        }
        for i in 0..40u64 {
            s.append("tail", b"", &[i as u8; 30]).unwrap();
        }
        let want = contents(&mut s);
        let erase_seq = want.2[want.2.len() / 3].seq;
        let shared = SharedStore::new(s);
        let mut m = Meddler {
            shared: shared.clone(),
            out: Vec::new(),
            calls: 0,
            threads: Vec::new(),
            erased: Default::default(),
            erase_seq,
        };
        let info = shared.snapshot_to(&mut m).unwrap();
        assert!(
            m.calls > 8,
            "seed {seed}: the meddling ran ({} writes)",
            m.calls
        );
        for t in m.threads.drain(..) {
            t.join().unwrap();
        }
        assert!(m.erased.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(info.state, want.0, "seed {seed} {sync:?}");
        let (_, r) = restore_into(&m.out);
        let (mut r, _) = r.unwrap_or_else(|e| panic!("seed {seed} {sync:?}: {e}"));
        assert_eq!(contents(&mut r), want, "seed {seed} {sync:?}");
        // and the source took every write made meanwhile
        assert_eq!(
            shared.with(|s| s.state()).last_seq,
            want.0.last_seq + 30 + 30 + 2
        );
    }
}
