//! Crash *during* restore: a snapshot is restored on fault-fs while the power is
//! cut at every operation boundary (both models, the enumerated and seeded crash images), and
//! every operation of the restore fails with EIO and ENOSPC in turn. After either, the target
//! must be the whole restored store or hold no store at all (so that restoring again succeeds):
//! never a store with part of the data.
//!
//! `SEQSTORE_SEED=N` replays (it seeds the source workload and the explorations).

use crate::seed;
use seqstore_core::{
    restore, AckPolicy, Config, ConsumerConfig, ConsumerState, Error, Fs, Store, StoredMsg,
    StreamState,
};
use seqstore_fault_fs::{explore, ExploreConfig, FaultFs, FaultKind, Model};

fn cfg() -> Config {
    Config::default()
        .with_block_size(1024)
        .with_write_buffer(300)
}

/// The stream, every message, every consumer's state.
type Contents = (StreamState, Vec<StoredMsg>, Vec<(String, ConsumerState)>);

fn contents<F: Fs>(s: &mut Store<F>) -> Result<Contents, String> {
    let st = s.state();
    let mut msgs = Vec::new();
    if st.msgs > 0 {
        for seq in st.first_seq..=st.last_seq {
            match s.get(seq) {
                Ok(m) => msgs.push(m),
                Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(format!("get {seq}: {e}")),
            }
        }
    }
    let mut consumers = Vec::new();
    for n in s.consumer_names() {
        let st = s
            .consumer_state(&n)
            .map_err(|e| format!("consumer {n}: {e}"))?;
        consumers.push((n, st));
    }
    Ok((st, msgs, consumers))
}

/// A source store with several blocks, deletes and a compact, and its snapshot.
fn source(seed: u64) -> (Vec<u8>, Contents) {
    let fs = FaultFs::new(Model::Posix);
    let mut s = Store::open(fs, cfg()).expect("open source");
    let mut x = seed;
    for i in 0..60u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let subject = ["a", "b.c", "d.e.f"][(x >> 60) as usize % 3];
        s.append(subject, b"", &vec![i as u8; (x >> 56) as usize % 90])
            .expect("append");
    }
    s.delete(5).expect("delete");
    s.delete(33).expect("delete");
    s.compact(3).expect("compact");
    // two consumers with deliveries, acks and a redelivery: restored with the stream or not
    s.consumer_add(&ConsumerConfig::new("work")).expect("add");
    let all = ConsumerConfig {
        ack_policy: AckPolicy::All,
        ..ConsumerConfig::new("audit")
    };
    s.consumer_add(&all).expect("add");
    // 5 was deleted: a consumer is never handed a removed message (as in NATS)
    for q in (3..=12u64).filter(|&q| q != 5) {
        s.update_delivered("work", q, q, 1, q as i64)
            .expect("deliver");
        s.update_delivered("audit", q, q, 1, q as i64)
            .expect("deliver");
    }
    s.update_acks("work", 7, 7).expect("ack");
    s.update_acks("work", 3, 3).expect("ack");
    s.update_delivered("work", 13, 4, 2, 99).expect("redeliver");
    s.update_acks("audit", 8, 8).expect("ack all");
    let mut snap = Vec::new();
    let info = s.snapshot_to(&mut snap).expect("snapshot");
    assert!(info.files.len() >= 3, "several blocks: {info:?}");
    let c = contents(&mut s).expect("source contents");
    (snap, c)
}

/// What a target left by an interrupted or failed restore must be: no store (a new restore
/// succeeds and gives the whole store) or the whole store. `done`: restore had returned `Ok`.
fn check_target(fs: &FaultFs, snap: &[u8], want: &Contents, done: bool) -> Result<(), String> {
    match restore(fs.clone(), cfg(), snap) {
        Ok((mut s, _)) if !done => (contents(&mut s)? == *want)
            .then_some(())
            .ok_or_else(|| "a restore again gave other contents".to_string()),
        Ok(_) => Err("restore had returned, the crash lost the store".into()),
        Err(Error::NotEmpty { entry }) => {
            let mut s = Store::open(fs.clone(), cfg()).map_err(|e| format!("open: {e}"))?;
            let got = contents(&mut s)?;
            if got != *want {
                return Err(format!(
                    "a partial store ({entry} present): {:?}, want {:?}",
                    got.0, want.0
                ));
            }
            Ok(())
        }
        Err(e) => Err(format!("restore again: {e}")),
    }
}

#[test]
fn a_crash_at_every_point_of_restore_leaves_no_store_or_the_whole_store() {
    let seed = seed();
    let (snap, want) = source(seed);
    for model in [Model::Posix, Model::Ordered] {
        let mut ec = ExploreConfig::new(model);
        ec.seed = seed;
        let report = explore(
            &ec,
            &[()],
            |fs, _, journal| {
                restore(fs.clone(), cfg(), &snap[..]).map_err(|e| format!("restore: {e}"))?;
                journal.note(fs, ());
                Ok(())
            },
            |img, ctx| check_target(img, &snap, &want, !ctx.events.is_empty()),
        );
        println!(
            "{model:?}: {} ops, {} crash points, {} images (SEQSTORE_SEED={seed})",
            report.ops, report.crash_points, report.images
        );
        assert!(
            report.workload_error.is_none(),
            "{:?}",
            report.workload_error
        );
        assert!(report.crash_points > 10, "{report:?}");
        let shown: Vec<String> = report.violations.iter().map(|v| v.to_string()).collect();
        assert!(
            report.is_clean(),
            "{model:?}: {} violations (SEQSTORE_SEED={seed}):\n{}",
            report.violation_count,
            shown.join("\n")
        );
    }
}

#[test]
fn an_io_error_at_every_operation_of_restore_is_typed_and_leaves_no_partial_store() {
    let seed = seed();
    let (snap, want) = source(seed);
    let clean = FaultFs::new(Model::Posix);
    restore(clean.clone(), cfg(), &snap[..]).expect("restore");
    let ops = clean.op_count();
    let mut failed = 0;
    for n in 0..ops {
        for fault in [FaultKind::Eio, FaultKind::Enospc] {
            let fs = FaultFs::new(Model::Posix);
            fs.fail_op(n, fault);
            let r = restore(fs.clone(), cfg(), &snap[..]);
            let done = match r {
                // the restoring process is done with the store (it owns it until then)
                Ok((store, _)) => {
                    drop(store);
                    true
                }
                Err(Error::Io { .. }) => {
                    failed += 1;
                    false
                }
                Err(e) => panic!("op {n} {fault:?}: not an I/O error: {e}"),
            };
            fs.clear_faults();
            // the directory as the failed restore left it, and its pessimistic crash image
            let what = format!("op {n} failed with {fault:?} (SEQSTORE_SEED={seed})");
            check_target(&fs.crash(), &snap, &want, done)
                .unwrap_or_else(|e| panic!("{what}, crash: {e}"));
            check_target(&fs, &snap, &want, done).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    }
    println!("{ops} operations, {failed} failed restores, all clean");
    assert!(
        failed > ops as usize,
        "most injected faults fail the restore"
    );
}

/// Writes the seed corpus of the `restore_archive` fuzz target (`fuzz/corpus/restore_archive/`):
/// real snapshots of small stores. Run by hand after a format change:
/// `cargo test -p seqstore-crash-matrix --no-default-features --test proofs -- restore_crash:: --ignored`.
#[test]
#[ignore]
fn regenerate_restore_archive_corpus() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/restore_archive");
    std::fs::create_dir_all(&dir).expect("corpus dir");
    type Fill = dyn Fn(&mut Store<FaultFs>);
    let stores: [(&str, &Fill); 4] = [
        ("empty", &|_| {}),
        ("one-block", &|s| {
            for i in 0..3u64 {
                s.append("a.b", b"h", &i.to_le_bytes()).expect("append");
            }
        }),
        ("three-blocks-deletes", &|s| {
            for i in 0..40u64 {
                s.append(["x", "y.z"][i as usize % 2], b"", &[i as u8; 30])
                    .expect("append");
            }
            s.delete(4).expect("delete");
            s.compact(2).expect("compact");
        }),
        ("purged-truncated", &|s| {
            for i in 0..12u64 {
                s.append("p", b"", &[i as u8; 8]).expect("append");
            }
            s.purge().expect("purge");
            for i in 0..6u64 {
                s.append("q", b"", &[i as u8; 8]).expect("append");
            }
            s.truncate(15).expect("truncate");
        }),
    ];
    for (name, fill) in stores {
        let mut s = Store::open(FaultFs::new(Model::Posix), cfg()).expect("open");
        fill(&mut s);
        let mut snap = Vec::new();
        s.snapshot_to(&mut snap).expect("snapshot");
        std::fs::write(dir.join(name), snap).expect("write corpus file");
    }
}
