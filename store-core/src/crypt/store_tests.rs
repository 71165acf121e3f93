//! The store on the layer: a random workload with reopens equals the model, no nonce is ever
//! used twice, the wrong key and a plain open are refused, a tampered byte is never a wrong
//! message.

use super::*;
use crate::fs::FsFile;
use crate::memfs::MemFs;
use crate::{Config, ConsumerConfig, Error, Store, SyncPolicy};
use std::collections::{BTreeMap, HashSet};

fn cfg(key: u8) -> Config {
    Config {
        block_size: 4096,
        sync: SyncPolicy::Always,
        encryption: Some(Encryption::new(Cipher::XChaCha20Poly1305, [key; 32])),
        compression: Compression::Lz4,
        ..Config::default()
    }
}

fn open(mem: &MemFs, cfg: &Config, seed: u64) -> (Store<CryptFs<MemFs>>, CryptFs<MemFs>) {
    let fs = CryptFs::record_nonces(mem.clone(), LayerConfig::of(cfg), &SeededEntropy::new(seed))
        .unwrap();
    (Store::open(fs.clone(), cfg.clone()).unwrap(), fs)
}

const MARK: &[u8] = b"plaintext-marker-";

fn payload(rng: &mut impl FnMut() -> u64, id: u64) -> Vec<u8> {
    let mut p = format!("{}{id:08}", std::str::from_utf8(MARK).unwrap()).into_bytes();
    let n = (rng() % 700) as usize;
    if rng() & 1 == 0 {
        p.extend((0..n).map(|i| b"xyz"[i % 3]));
    } else {
        p.extend((0..n).map(|_| rng() as u8));
    }
    p
}

#[test]
fn a_random_workload_with_reopens_equals_the_model_and_never_reuses_a_nonce() {
    let (seed, mut rng) = crate::seeded_rng(0x5ec);
    let mem = MemFs::new();
    let c = cfg(3);
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut nonces = HashSet::new();
    let mut consumer = None;
    let mut delivered = 0u64;
    let mut last_sseq = 0u64;
    for instance in 0..8u64 {
        let (mut s, fs) = open(&mem, &c, seed.wrapping_add(instance * 7919));
        for (&seq, p) in &model {
            assert_eq!(&s.get(seq).unwrap().payload, p, "seed {seed} seq {seq}");
        }
        assert_eq!(s.state().msgs, model.len() as u64, "seed {seed}");
        if let Some(st) = &consumer {
            assert_eq!(&s.consumer_state("c").unwrap(), st, "seed {seed}");
        } else {
            s.consumer_add(&ConsumerConfig::new("c")).unwrap();
        }
        for _ in 0..80 {
            let live: Vec<u64> = model.keys().copied().collect();
            match rng() % 12 {
                0..=5 => {
                    let id = rng();
                    let p = payload(&mut rng, id);
                    let seq = s.append("a.b", b"", &p).unwrap();
                    model.insert(seq, p);
                }
                6 if !live.is_empty() => {
                    let seq = live[(rng() % live.len() as u64) as usize];
                    s.delete(seq).unwrap();
                    model.remove(&seq);
                }
                7 if !live.is_empty() => {
                    // erase rewrites the record in place: a frame over an old range
                    let seq = live[(rng() % live.len() as u64) as usize];
                    s.erase(seq).unwrap();
                    model.remove(&seq);
                }
                8 if rng() % 4 == 0 => {
                    s.purge().unwrap();
                    model.clear();
                }
                9 if !live.is_empty() => {
                    let upto = live[(rng() % live.len() as u64) as usize];
                    s.compact(upto).unwrap();
                    model.retain(|&k, _| k >= upto);
                }
                10 => {
                    let st = s.state();
                    let sseq = (last_sseq + 1).max(st.first_seq);
                    if sseq <= st.last_seq && model.contains_key(&sseq) {
                        delivered += 1;
                        last_sseq = sseq;
                        s.update_delivered("c", delivered, sseq, 1, 0).unwrap();
                        s.update_acks("c", delivered, sseq).unwrap();
                    }
                }
                _ => {
                    if let Some((&seq, p)) = model.iter().next() {
                        assert_eq!(&s.get(seq).unwrap().payload, p);
                    }
                }
            }
        }
        consumer = Some(s.consumer_state("c").unwrap());
        if instance % 2 == 0 {
            s.close().unwrap();
        } else {
            drop(s); // as a crash of the process: no checkpoint
        }
        for n in fs.nonces_used() {
            assert!(nonces.insert(n), "seed {seed}: a nonce used twice");
        }
        let report = crate::verify(&fs).unwrap();
        assert!(
            report.problems.is_empty(),
            "seed {seed}: {:?}",
            report.problems
        );
    }
    for p in mem.paths() {
        if mem.read_dir(&p).is_err() {
            let b = mem.bytes(&p);
            assert!(
                !b.windows(MARK.len()).any(|w| w == MARK),
                "plaintext in {p}"
            );
        }
    }
}

#[test]
fn the_wrong_key_is_wrong_key_and_a_plain_open_of_an_encrypted_config_is_refused() {
    let mem = MemFs::new();
    let (mut s, _) = open(&mem, &cfg(1), 1);
    for i in 0..20u64 {
        s.append("a", b"", &i.to_le_bytes()).unwrap();
    }
    s.close().unwrap();
    let fs = CryptFs::new(mem.clone(), LayerConfig::of(&cfg(2))).unwrap();
    match Store::open(fs, cfg(2)) {
        Err(Error::WrongKey { .. }) => {}
        Err(e) => panic!("the wrong key gave {e}"),
        Ok(_) => panic!("opened with the wrong key"),
    }
    assert!(matches!(
        Store::open(mem.clone(), cfg(1)),
        Err(Error::InvalidConfig(_))
    ));
    let (s, _) = open(&mem, &cfg(1), 2);
    assert_eq!(s.state().msgs, 20);
}

#[test]
fn a_tampered_byte_is_corrupt_or_a_torn_tail_never_a_wrong_message() {
    let mem = MemFs::new();
    let c = Config {
        block_size: 1 << 20,
        ..cfg(1)
    };
    let (mut s, _) = open(&mem, &c, 1);
    let msgs: Vec<Vec<u8>> = (0..40u64)
        .map(|i| format!("message {i}").into_bytes())
        .collect();
    for m in &msgs {
        s.append("a", b"", m).unwrap();
    }
    drop(s); // no index.db: open scans the block
    let block = mem
        .paths()
        .into_iter()
        .find(|p| p.ends_with(".blk"))
        .unwrap();
    let orig = mem.bytes(&block);
    let mut corrupt = 0;
    for at in (0..orig.len()).step_by(13) {
        let mut b = orig.clone();
        b[at] ^= 0x01;
        mem.set_bytes(&block, b);
        let fs = CryptFs::new(mem.clone(), LayerConfig::of(&c)).unwrap();
        match Store::open(fs, c.clone()) {
            Err(Error::Corrupt { .. } | Error::WrongKey { .. }) => corrupt += 1,
            Err(e) => panic!("flip at {at}: {e}"),
            Ok(mut s) => {
                // only the last, never-confirmed-synced frame may read as torn
                assert!(
                    at >= orig.len() - 200,
                    "flip at {at} of {} undetected",
                    orig.len()
                );
                for seq in 1..=s.state().last_seq {
                    if let Ok(m) = s.get(seq) {
                        assert_eq!(m.payload, msgs[seq as usize - 1], "flip at {at}");
                    }
                }
            }
        }
    }
    assert!(corrupt > 0);
}

/// The payload `fill_four_blocks` erases (message 5, while its block is the newest).
const ERASED: &[u8] = b"order 000004 status=confirmed region=eu-west";

/// Appends compressible messages under `Always` through `c` until four blocks exist, erasing
/// message 5 on the way; returns the store and the payloads by sequence (`None`: erased).
fn fill_four_blocks(mem: &MemFs, c: &Config) -> (Store<CryptFs<MemFs>>, Vec<Option<Vec<u8>>>) {
    let (mut s, _) = open(mem, c, 1);
    let mut msgs = Vec::new();
    while !mem.paths().iter().any(|p| p == "msgs/4.blk") {
        let p = format!("order {:06} status=confirmed region=eu-west", msgs.len()).into_bytes();
        s.append("orders.eu", b"", &p).unwrap();
        msgs.push(Some(p));
        if msgs.len() == 10 {
            s.erase(5).unwrap();
            msgs[4] = None;
        }
    }
    (s, msgs)
}

/// Every message of `msgs` reads back from `s`, and the erased one does not.
fn check_messages(s: &mut Store<CryptFs<MemFs>>, msgs: &[Option<Vec<u8>>]) {
    for (i, m) in msgs.iter().enumerate() {
        match m {
            Some(m) => assert_eq!(&s.get(i as u64 + 1).unwrap().payload, m),
            None => assert!(s.get(i as u64 + 1).is_err()),
        }
    }
}

/// The logical bytes of file `p` through the layer of `c`.
fn logical_bytes(mem: &MemFs, c: &Config, p: &str) -> Vec<u8> {
    let fs = CryptFs::new(mem.clone(), LayerConfig::of(c)).unwrap();
    let f = fs.open(p, crate::fs::OpenOptions::read_only()).unwrap();
    let mut b = vec![0u8; f.len().unwrap() as usize];
    f.read_exact_at(&mut b, 0).unwrap();
    b
}

#[test]
fn a_sealed_block_is_rewritten_whole_compressed_and_reads_back() {
    let mem = MemFs::new();
    let c = Config {
        block_size: 32 << 10,
        ..cfg(1)
    };
    let (mut s, msgs) = fill_four_blocks(&mem, &c);
    let logical = |p: &str| logical_bytes(&mem, &c, p).len() as u64;
    for n in 1..=3 {
        // each `Always` append was a frame of ~120 bytes: a sealed block is now whole
        // lz4-compressed frames, far below its logical size
        let p = format!("msgs/{n}.blk");
        let (phys, log) = (mem.bytes(&p).len() as u64, logical(&p));
        assert!(phys * 3 < log, "{p}: {phys} bytes on disk for {log}");
    }
    // the newest block is still a frame per append: larger than its logical bytes
    let newest = "msgs/4.blk".to_string();
    assert!(mem.bytes(&newest).len() as u64 > logical(&newest));
    assert!(!mem.paths().iter().any(|p| p.ends_with(".seal")));
    check_messages(&mut s, &msgs);
    // the erase reached the rewritten block: its old bytes are not written back
    let block = logical_bytes(&mem, &c, "msgs/1.blk");
    assert!(!block.windows(ERASED.len()).any(|w| w == ERASED));
    assert!(block.windows(12).any(|w| w == b"order 000005"));
    drop(s);
    // a rewrite's leftover (a crash before its rename) is removed at open, not reported
    let copy = mem.bytes("msgs/2.blk");
    let f = mem.open("msgs/2.seal", crate::fs::OpenOptions::read_write_create());
    f.unwrap().write_all_at(&copy, 0).unwrap();
    let (mut s, _) = open(&mem, &c, 2);
    assert!(
        s.recovery_report().ignored.is_empty(),
        "{:?}",
        s.recovery_report()
    );
    assert!(!mem.paths().iter().any(|p| p.ends_with(".seal")));
    check_messages(&mut s, &msgs);
    drop(s);
    assert!(
        crate::verify(&CryptFs::new(mem.clone(), LayerConfig::of(&c)).unwrap())
            .unwrap()
            .is_clean()
    );
}

#[test]
fn a_changed_byte_in_a_rewritten_sealed_block_is_corrupt_not_a_torn_tail() {
    let mem = MemFs::new();
    let c = Config {
        block_size: 32 << 10,
        ..cfg(1)
    };
    let (s, msgs) = fill_four_blocks(&mem, &c);
    drop(s); // no index.db: open scans every block
    let orig = mem.bytes("msgs/1.blk");
    // every byte but the last frame's (the length frame that vouches for the others; 72 bytes)
    for at in (0..orig.len() - 72).step_by(7) {
        let mut b = orig.clone();
        b[at] ^= 0x20;
        mem.set_bytes("msgs/1.blk", b);
        let fs = CryptFs::new(mem.clone(), LayerConfig::of(&c)).unwrap();
        match Store::open(fs, c.clone()) {
            Err(Error::Corrupt { .. } | Error::WrongKey { .. }) => {}
            Err(e) => panic!("flip at {at}: {e}"),
            Ok(s) => panic!(
                "flip at {at} of {} undetected: {} of {} messages",
                orig.len(),
                s.state().msgs,
                msgs.len()
            ),
        }
    }
    mem.set_bytes("msgs/1.blk", orig);
}

/// What sealing costs an `Always` append: the appends that roll a default 8 MiB block against
/// the others, in memory (no fsync time). `cargo test --release -p seqstore-core --lib
/// crypt::store_tests::seal_probe -- --ignored --nocapture`.
#[test]
#[ignore]
fn seal_probe() {
    for compression in [Compression::None, Compression::Lz4] {
        let mem = MemFs::new();
        let c = Config {
            block_size: 8 << 20,
            compression,
            ..cfg(1)
        };
        let (mut s, _) = open(&mem, &c, 1);
        let mut times = Vec::new();
        for i in 0..200_000u64 {
            let p = format!("order {i:08} status=confirmed region=eu-west amount=1234.50 cur=EUR");
            let t = std::time::Instant::now();
            s.append("orders.eu", b"", p.as_bytes()).unwrap();
            times.push(t.elapsed().as_micros() as u64);
        }
        let mut sorted = times.clone();
        sorted.sort_unstable();
        let top: Vec<u64> = sorted.iter().rev().take(3).copied().collect();
        println!(
            "{compression:?}: median {} us, slowest three {top:?} us, total {} ms, \
             msgs/1.blk {} bytes on disk",
            sorted[sorted.len() / 2],
            times.iter().sum::<u64>() / 1000,
            mem.bytes("msgs/1.blk").len()
        );
    }
}

/// An erased payload leaves the disk through the layer too: with lz4 and no key the frames
/// hold incompressible payloads as they are, so the physical files can be searched.
#[test]
fn an_erased_payload_is_gone_from_the_files_of_a_compressed_store() {
    let (seed, mut rng) = crate::seeded_rng(0xe4a5e);
    let mem = MemFs::new();
    let c = Config {
        block_size: 8 << 10,
        encryption: None,
        ..cfg(0)
    };
    let (mut s, _) = open(&mem, &c, 1);
    let mut msgs = Vec::new();
    let mut append = |s: &mut Store<CryptFs<MemFs>>, msgs: &mut Vec<Vec<u8>>| {
        let p: Vec<u8> = (0..300).map(|_| rng() as u8).collect();
        s.append("a", b"", &p).unwrap();
        msgs.push(p);
    };
    while !mem.paths().iter().any(|p| p == "msgs/3.blk") {
        append(&mut s, &mut msgs);
    }
    // one in a sealed block, one in the newest, which is sealed after
    let newest = msgs.len() as u64;
    s.erase(2).unwrap();
    s.erase(newest).unwrap();
    while !mem.paths().iter().any(|p| p == "msgs/4.blk") {
        append(&mut s, &mut msgs);
    }
    s.close().unwrap();
    let disk: Vec<u8> = mem
        .paths()
        .iter()
        .filter(|p| p.ends_with(".blk"))
        .flat_map(|p| mem.bytes(p))
        .collect();
    let on_disk = |p: &[u8]| disk.windows(p.len()).any(|w| w == p);
    assert!(
        on_disk(&msgs[0]) && on_disk(&msgs[newest as usize - 2]),
        "seed {seed}"
    );
    assert!(
        !on_disk(&msgs[1]),
        "seed {seed}: the sealed block's erased payload"
    );
    assert!(
        !on_disk(&msgs[newest as usize - 1]),
        "seed {seed}: the newest's"
    );
}

/// Where an encrypted no-sync append's time goes beside the plain one's: `Never` appends of
/// 128-byte payloads on memory, plain and AES-256-GCM. `cargo test --release -p seqstore-core
/// --lib crypt::store_tests::nosync_probe -- --ignored --nocapture` (under `perf record`).
#[test]
#[ignore]
fn nosync_probe() {
    for enc in [None, Some(Cipher::Aes256Gcm)] {
        let mem = MemFs::new();
        let c = Config {
            sync: SyncPolicy::Never,
            encryption: enc.map(|c| Encryption::new(c, [7; 32])),
            compression: Compression::None,
            ..Config::default()
        };
        let (mut s, _) = open(&mem, &c, 1);
        let payload = [0x5au8; 128];
        let t = std::time::Instant::now();
        for i in 0..2_000_000u64 {
            s.append(["a.b.c", "a.b.d"][(i & 1) as usize], b"", &payload)
                .unwrap();
        }
        println!("{enc:?}: {:.2} M/s", 2.0 / t.elapsed().as_secs_f64());
    }
}
