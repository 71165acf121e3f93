//! Crash recovery of the guest on fault-fs: the sequence survives a purge across a crash.

use seqstore_core::surface::StreamStore;
use seqstore_core::{Config, SyncPolicy};
use seqstore_fault_fs::{FaultFs, Model};

use crate::tests::common::*;
use crate::GuestStore;

#[test]
fn purge_survives_crash_in_guest() {
    for model in Model::ALL {
        for sync in [SyncPolicy::Always, SyncPolicy::Never] {
            let fs = FaultFs::new(model);
            let cfg = Config::default().with_sync(sync);
            let ctx = format!("{model:?}, {sync:?}");
            let mut g = GuestStore::from_fs(fs.clone(), cfg.clone(), Box::new(clock())).unwrap();
            const L: u64 = 25;
            for i in 1..=L {
                assert_eq!(
                    g.append("orders.eu", b"", &[i as u8; 128]).unwrap(),
                    i,
                    "{ctx}"
                );
            }
            g.sync().unwrap();
            assert_eq!(g.purge().unwrap(), L, "{ctx}");
            // Power cut: the instance is simply dropped (its destructor only writes out an
            // append buffer, and nothing is buffered after a purge), then the image is taken.
            drop(g);
            let image = fs.crash();
            let mut g = GuestStore::from_fs(image, cfg.clone(), Box::new(clock())).unwrap();
            let st = g.state().unwrap();
            assert_eq!((st.first_seq, st.last_seq, st.msgs), (L + 1, L, 0), "{ctx}");
            assert_eq!(g.append("orders.eu", b"", b"next").unwrap(), L + 1, "{ctx}");
        }
    }
}

#[test]
fn crash_images_recover_in_guest_like_natively() {
    // Every distinct crash image of a short unsynced history recovers to the same state in
    // the guest as in the native store.
    let fs = FaultFs::new(Model::Posix);
    let cfg = Config::default()
        .with_sync(SyncPolicy::Never)
        .with_block_size(1024);
    let mut g = GuestStore::from_fs(fs.clone(), cfg.clone(), Box::new(clock())).unwrap();
    for i in 0..20u8 {
        g.append("a.b", b"", &[i; 100]).unwrap();
        if i == 9 {
            g.sync().unwrap();
        }
    }
    g.delete(3).unwrap();
    drop(g); // writes out the buffer, unsynced
    let images = fs.crash_images(40);
    assert!(images.len() > 2, "only {} images", images.len());
    for (i, img) in images.into_iter().enumerate() {
        // An image has nothing unsynced, so its pessimistic crash is an independent copy.
        let native_img = img.crash();
        let n = seqstore_core::Store::builder(native_img)
            .config(cfg.clone())
            .clock(clock())
            .open();
        let g = GuestStore::from_fs(img, cfg.clone(), Box::new(clock()));
        match (n, g) {
            (Ok(n), Ok(mut g)) => {
                assert_eq!(n.state(), g.state().unwrap(), "image {i}");
                assert_eq!(n.recovery_report(), g.recovery_report(), "image {i}");
            }
            (Err(a), Err(crate::Error::Store(b))) => {
                assert_eq!(norm_err(&a), norm_err(&b), "image {i}")
            }
            (n, g) => panic!("image {i}: native {:?} guest {:?}", n.err(), g.err()),
        }
    }
}

#[test]
fn batched_append_write_error_is_reported_by_the_flushing_call_and_poisons() {
    // Under `Never` without limits the host queues appends (see `GuestStore::append`): an I/O
    // error met when the queue is applied comes back from the call that sent it, and the store
    // is then poisoned, so the sequences handed out after the failure are never reused.
    let fs = FaultFs::new(Model::Posix);
    let cfg = Config::default()
        .with_sync(SyncPolicy::Never)
        // Every record is written out as the guest applies it: the failure is met at once.
        .with_write_buffer(0);
    let mut g = GuestStore::from_fs(fs.clone(), cfg.clone(), Box::new(clock())).unwrap();
    // The first append goes to the guest (the host learns the state from it).
    assert_eq!(g.append("a.b", b"", b"one").unwrap(), 1);
    fs.fail_kind(
        seqstore_fault_fs::OpKind::WriteAt,
        seqstore_fault_fs::FaultKind::Eio,
    );
    for seq in 2..=10 {
        assert_eq!(g.append("a.b", b"", b"queued").unwrap(), seq);
    }
    assert!(
        g.batched >= 9,
        "the appends were not queued ({})",
        g.batched
    );
    match g.get(1) {
        Err(crate::Error::Store(seqstore_core::Error::Io { op, .. })) => assert_eq!(op, "write"),
        other => panic!("the flushing get should return the write error, got {other:?}"),
    }
    assert!(g.is_poisoned().unwrap());
    assert!(matches!(
        g.append("a.b", b"", b"after"),
        Err(crate::Error::Store(seqstore_core::Error::Poisoned))
    ));
    // Reads still work; the lost messages are not there.
    assert_eq!(g.get(1).unwrap().payload, b"one");
    assert!(matches!(
        g.get(2),
        Err(crate::Error::Store(seqstore_core::Error::NotFound {
            seq: 2
        }))
    ));
    fs.clear_faults();
    drop(g);
    let mut g = GuestStore::from_fs(fs, cfg, Box::new(clock())).unwrap();
    assert_eq!(g.state().unwrap().last_seq, 1);
}

#[test]
fn damaged_block_recovers_in_guest_like_natively() {
    // The guest's rebuild checks record checksums through the host in batches
    // (`FastPaths::crc32_ranges`); a flipped byte must be found exactly as natively.
    let cfg = Config::default()
        .with_sync(SyncPolicy::Never)
        .with_block_size(16 << 10);
    let fs = FaultFs::new(Model::Posix);
    let mut s = seqstore_core::Store::builder(fs.clone())
        .config(cfg.clone())
        .clock(clock())
        .open()
        .unwrap();
    for i in 0..300u32 {
        s.append(
            if i % 2 == 0 { "a.b" } else { "c" },
            b"",
            &i.to_le_bytes().repeat(30),
        )
        .unwrap();
    }
    s.sync().unwrap();
    drop(s);
    for (file, at) in [
        ("msgs/1.blk", 5000u64),
        ("msgs/2.blk", 700),
        ("msgs/3.blk", 16),
    ] {
        let f = seqstore_core::Fs::open(
            &fs,
            file,
            seqstore_core::fs::OpenOptions::new().read(true).write(true),
        )
        .unwrap();
        let mut b = [0u8; 1];
        seqstore_core::fs::FsFile::read_exact_at(&f, &mut b, at).unwrap();
        seqstore_core::fs::FsFile::write_all_at(&f, &[b[0] ^ 0x40], at).unwrap();
        seqstore_core::fs::FsFile::sync_data(&f).unwrap();
    }
    let image = fs.crash();
    let n = seqstore_core::Store::builder(image.crash())
        .config(cfg.clone())
        .clock(clock())
        .open()
        .unwrap();
    let mut g = GuestStore::from_fs(image, cfg, Box::new(clock())).unwrap();
    assert!(
        !n.recovery_report().skipped.is_empty(),
        "{:?}",
        n.recovery_report()
    );
    assert_eq!(n.recovery_report(), g.recovery_report());
    assert_eq!(n.state(), g.state().unwrap());
}

#[test]
fn durable_append_write_or_sync_error_is_typed_in_guest_like_natively() {
    // Under `Always` an append's write and fsync reach the host as one call
    // (`write-at-sync-data`). A failure of either step must come back as it does natively: an
    // `Io` error naming the step, the store poisoned, and nothing it did not acknowledge
    // surviving a crash.
    use seqstore_fault_fs::{FaultKind, OpKind};
    let cfg = Config::default().with_sync(SyncPolicy::Always);
    for (kind, op) in [(OpKind::WriteAt, "write"), (OpKind::SyncData, "sync_data")] {
        let (nfs, gfs) = (FaultFs::new(Model::Posix), FaultFs::new(Model::Posix));
        let mut n = seqstore_core::Store::builder(nfs.clone())
            .config(cfg.clone())
            .clock(clock())
            .open()
            .unwrap();
        let mut g = GuestStore::from_fs(gfs.clone(), cfg.clone(), Box::new(clock())).unwrap();
        let before = g.write_syncs();
        for i in 0..3u8 {
            assert_eq!(n.append("a.b", b"", &[i; 50]).unwrap(), u64::from(i) + 1);
            assert_eq!(g.append("a.b", b"", &[i; 50]).unwrap(), u64::from(i) + 1);
        }
        // each append: one host call for both its write and its fsync
        assert_eq!(g.write_syncs() - before, 3, "{op}");
        nfs.fail_kind(kind, FaultKind::Eio);
        gfs.fail_kind(kind, FaultKind::Eio);
        let ne = n.append("a.b", b"", b"never acked").unwrap_err();
        let ge = match g.append("a.b", b"", b"never acked") {
            Err(crate::Error::Store(e)) => e,
            other => panic!("{op}: expected a store error, got {other:?}"),
        };
        assert!(
            matches!(&ge, seqstore_core::Error::Io { op: o, .. } if *o == op),
            "{op}: {ge:?}"
        );
        assert_eq!(norm_err(&ne), norm_err(&ge), "{op}");
        assert!(n.is_poisoned() && g.is_poisoned().unwrap(), "{op}");
        assert!(matches!(
            g.append("a.b", b"", b"x"),
            Err(crate::Error::Store(seqstore_core::Error::Poisoned))
        ));
        assert_eq!(
            g.get(3).unwrap().payload,
            [2u8; 50],
            "{op}: reads still work"
        );
        gfs.clear_faults();
        drop(g);
        let mut g = GuestStore::from_fs(gfs.crash(), cfg.clone(), Box::new(clock())).unwrap();
        let st = g.state().unwrap();
        assert_eq!((st.msgs, st.last_seq), (3, 3), "{op}: {st:?}");
    }
}
