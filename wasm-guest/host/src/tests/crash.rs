//! Crash recovery of the guest on fault-fs: the sequence survives a purge across a crash.

use fault_fs::{FaultFs, Model};
use store_core::{Config, SyncPolicy};

use crate::tests::common::*;
use crate::GuestStore;

#[test]
fn purge_survives_crash_in_guest() {
    for model in Model::ALL {
        for sync in [SyncPolicy::Always, SyncPolicy::Never] {
            let fs = FaultFs::new(model);
            let cfg = Config {
                sync,
                ..Config::default()
            };
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
    let cfg = Config {
        sync: SyncPolicy::Never,
        block_size: 1024,
        ..Config::default()
    };
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
        let n = store_core::Store::open_with_clock(native_img, cfg.clone(), Box::new(clock()));
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
