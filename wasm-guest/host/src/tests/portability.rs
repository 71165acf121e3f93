//! A directory written by the guest opens natively with the same state, and vice versa, both
//! through the `fs` import and through the preopened-directory constructor.

use seqstore_core::surface::StreamStore;
use std::path::Path;

use seqstore_core::{Config, Store, StoredMsg, StreamState};
use seqstore_fs::HostFs;

use crate::tests::common::*;
use crate::GuestStore;

/// Writes a small history that exercises every record kind: messages on several subjects,
/// a delete, an erase, a compact, and a block rollover.
fn workload(
    append: &mut dyn FnMut(&str, &[u8]) -> u64,
    delete: &mut dyn FnMut(u64),
    erase: &mut dyn FnMut(u64),
    compact: &mut dyn FnMut(u64),
) {
    for i in 0..200u64 {
        let subject = ["orders.eu", "orders.us", "audit"][(i % 3) as usize];
        append(
            subject,
            format!("payload {i} {}", "x".repeat((i % 50) as usize)).as_bytes(),
        );
    }
    delete(7);
    erase(8);
    compact(5);
}

/// Everything observable of a store: its counters and every message.
fn snapshot<S: StreamStore>(s: &mut S) -> (StreamState, Vec<StoredMsg>)
where
    S::Error: std::fmt::Debug,
{
    let st = s.state().unwrap();
    (
        st,
        every_msg(st.first_seq, |n| s.next_matching(">", n).unwrap()),
    )
}

/// Every message from `first` on, walked with `next_matching(seq)` (the next at or after).
fn every_msg(
    first: u64,
    mut next_matching: impl FnMut(u64) -> Option<StoredMsg>,
) -> Vec<StoredMsg> {
    let mut msgs = Vec::new();
    let mut next = first;
    while let Some(m) = next_matching(next) {
        next = m.seq + 1;
        msgs.push(m);
    }
    msgs
}

fn write_native(dir: &Path, cfg: &Config) -> (StreamState, Vec<StoredMsg>) {
    let s = std::cell::RefCell::new(
        Store::builder(HostFs::open(dir).unwrap())
            .config(cfg.clone())
            .clock(clock())
            .open()
            .unwrap(),
    );
    workload(
        &mut |sub, p| s.borrow_mut().append(sub, b"", p).unwrap(),
        &mut |q| s.borrow_mut().delete(q).unwrap(),
        &mut |q| s.borrow_mut().erase(q).unwrap(),
        &mut |q| {
            s.borrow_mut().compact(q).unwrap();
        },
    );
    let mut s = s.into_inner();
    let snap = snapshot(&mut s);
    s.close().unwrap();
    snap
}

fn write_guest(mut g: GuestStore) -> (StreamState, Vec<StoredMsg>) {
    let g2 = std::cell::RefCell::new(&mut g);
    workload(
        &mut |sub, p| g2.borrow_mut().append(sub, b"", p).unwrap(),
        &mut |q| g2.borrow_mut().delete(q).unwrap(),
        &mut |q| g2.borrow_mut().erase(q).unwrap(),
        &mut |q| {
            g2.borrow_mut().compact(q).unwrap();
        },
    );
    let snap = snapshot(&mut g);
    g.close().unwrap();
    snap
}

fn read_native(dir: &Path, cfg: &Config) -> (StreamState, Vec<StoredMsg>) {
    let mut s = Store::builder(HostFs::open(dir).unwrap())
        .config(cfg.clone())
        .clock(clock())
        .open()
        .unwrap();
    assert!(!s.recovery_report().lost_data());
    snapshot(&mut s)
}

#[test]
fn guest_written_opens_natively_and_back() {
    let cfg = small_blocks();
    for via_preopen in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let g = if via_preopen {
            GuestStore::open_dir(dir.path(), cfg.clone(), Box::new(clock())).unwrap()
        } else {
            let fs = HostFs::open(dir.path()).unwrap();
            GuestStore::from_fs(fs, cfg.clone(), Box::new(clock())).unwrap()
        };
        let written = write_guest(g);
        assert_eq!(written.0.msgs, 200 - 4 - 2, "preopen {via_preopen}");
        assert_eq!(
            read_native(dir.path(), &cfg),
            written,
            "preopen {via_preopen}"
        );
        // The index the guest wrote was good enough for the native store to use.
        let s = Store::open(HostFs::open(dir.path()).unwrap(), cfg.clone()).unwrap();
        assert!(s.recovery_report().used_index, "preopen {via_preopen}");
    }
}

#[test]
fn native_written_opens_in_guest() {
    let cfg = small_blocks();
    for via_preopen in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let written = write_native(dir.path(), &cfg);
        // Without the index too: the guest rebuilds from the blocks.
        for drop_index in [false, true] {
            if drop_index {
                let _ = std::fs::remove_file(dir.path().join(seqstore_core::internal::INDEX_FILE));
            }
            let mut g = if via_preopen {
                GuestStore::open_dir(dir.path(), cfg.clone(), Box::new(clock())).unwrap()
            } else {
                let fs = HostFs::open(dir.path()).unwrap();
                GuestStore::from_fs(fs, cfg.clone(), Box::new(clock())).unwrap()
            };
            let ctx = format!("preopen {via_preopen}, index dropped {drop_index}");
            assert_eq!(g.recovery_report().used_index, !drop_index, "{ctx}");
            assert!(!g.recovery_report().lost_data(), "{ctx}");
            assert_eq!(snapshot(&mut g), written, "{ctx}");
            drop(g);
        }
    }
}

#[test]
fn preopen_and_import_write_identical_files() {
    // The two guest backends and the native store write the same bytes for the same history.
    let cfg = small_blocks();
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    write_native(a.path(), &cfg);
    write_guest(
        GuestStore::from_fs(
            HostFs::open(b.path()).unwrap(),
            cfg.clone(),
            Box::new(clock()),
        )
        .unwrap(),
    );
    write_guest(GuestStore::open_dir(c.path(), cfg.clone(), Box::new(clock())).unwrap());
    assert_same_tree(a.path(), b.path(), "native vs guest (fs import)");
    assert_same_tree(a.path(), c.path(), "native vs guest (preopen)");
}

#[test]
fn guest_rebuilds_records_larger_than_a_read() {
    // The guest's recovery scan reads 1 MiB chunks through `file.read-framed-at`, from a
    // record boundary, and the host caps one read at 16 MiB: records around the chunk size,
    // and one above the cap (read on by the guest), all come back from a rebuild, through the
    // `fs` import and through the preopen.
    let cfg = small_blocks()
        .with_block_size(40 << 20)
        .with_max_payload(20 << 20);
    let sizes = [10usize, (1 << 20) - 40, (1 << 20) + 3, 17 << 20, 500_000, 3];
    for via_preopen in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::builder(HostFs::open(dir.path()).unwrap())
            .config(cfg.clone())
            .clock(clock())
            .open()
            .unwrap();
        for (i, &n) in sizes.iter().enumerate() {
            let payload: Vec<u8> = (0..n).map(|j| (i * 13 + j * 5) as u8).collect();
            s.append(&format!("big.{i}"), b"", &payload).unwrap();
        }
        let written = snapshot(&mut s);
        // Dropped without close: no index, the guest scans every record.
        drop(s);
        let mut g = if via_preopen {
            GuestStore::open_dir(dir.path(), cfg.clone(), Box::new(clock())).unwrap()
        } else {
            let fs = HostFs::open(dir.path()).unwrap();
            GuestStore::from_fs(fs, cfg.clone(), Box::new(clock())).unwrap()
        };
        let ctx = format!("preopen {via_preopen}");
        assert!(!g.recovery_report().used_index, "{ctx}");
        assert!(!g.recovery_report().lost_data(), "{ctx}");
        assert_eq!(snapshot(&mut g), written, "{ctx}");
    }
}

/// A store the guest writes encrypted (and compressed) opens natively with the key, and with
/// another key in neither: a typed `WrongKey` across the WIT boundary too.
#[test]
fn an_encrypted_store_moves_between_guest_and_native() {
    use seqstore_core::{Cipher, Compression, Encryption, Error};
    let dir = tempfile::tempdir().unwrap();
    let cfg = |k: u8| {
        Config::default()
            .with_encryption(Some(Encryption::new(Cipher::Aes256Gcm, [k; 32])))
            .with_compression(Compression::Lz4)
    };
    let mut g =
        GuestStore::open_dir(dir.path(), cfg(1), Box::new(seqstore_fs::SystemClock)).unwrap();
    for i in 0..50u64 {
        g.append("a.b", b"", format!("guest secret {i}").as_bytes())
            .unwrap();
    }
    g.close().unwrap();
    let fs = HostFs::open(dir.path()).unwrap();
    let mut s = Store::builder(fs).config(cfg(1)).open_layered().unwrap();
    assert_eq!(s.get(7).unwrap().payload, b"guest secret 6");
    s.append("a.b", b"", b"native secret").unwrap();
    s.close().unwrap();
    let mut g =
        GuestStore::open_dir(dir.path(), cfg(1), Box::new(seqstore_fs::SystemClock)).unwrap();
    assert_eq!(g.get(51).unwrap().payload, b"native secret");
    g.close().unwrap();
    match GuestStore::open_dir(dir.path(), cfg(2), Box::new(seqstore_fs::SystemClock)) {
        Err(e) => assert!(
            matches!(e.store_error(), Some(Error::WrongKey { .. })),
            "{e}"
        ),
        Ok(_) => panic!("the guest opened the store with another key"),
    }
}
