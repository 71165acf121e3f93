//! The layered format stays byte for byte what it is: a fixed workload through each layer
//! (both ciphers, lz4, both at once), with a fixed nonce prefix and key, must write exactly
//! the files under `store-core/tests/golden_crypt/` (`SEQSTORE_BLESS=1` writes them), and
//! a store opened on those files reads back every message. A change of AEAD crate version
//! must pass it unchanged.

use super::*;
use crate::fs::FsFile;
use crate::memfs::MemFs;
use crate::{Config, Store};

/// A nonce prefix that is the same in every run (never outside tests).
struct FixedEntropy(u8);

impl Entropy for FixedEntropy {
    fn fill(&self, buf: &mut [u8]) -> io::Result<()> {
        buf.fill(self.0);
        Ok(())
    }
}

/// The layers, by the name their files take.
fn layers() -> Vec<(&'static str, LayerConfig)> {
    let enc = |c| Some(Encryption::new(c, [0x42; 32]));
    vec![
        (
            "xchacha",
            LayerConfig {
                encryption: enc(Cipher::XChaCha20Poly1305),
                compression: Compression::None,
            },
        ),
        (
            "aes",
            LayerConfig {
                encryption: enc(Cipher::Aes256Gcm),
                compression: Compression::None,
            },
        ),
        (
            "lz4",
            LayerConfig {
                encryption: None,
                compression: Compression::Lz4,
            },
        ),
        (
            "aes-lz4",
            LayerConfig {
                encryption: enc(Cipher::Aes256Gcm),
                compression: Compression::Lz4,
            },
        ),
    ]
}

fn config(l: &LayerConfig) -> Config {
    Config {
        block_size: 2048,
        encryption: l.encryption.clone(),
        compression: l.compression,
        ..Config::default()
    }
}

fn open(mem: &MemFs, l: &LayerConfig, prefix: u8) -> Store<CryptFs<MemFs>> {
    let fs = CryptFs::with_entropy(mem.clone(), l.clone(), &FixedEntropy(prefix)).unwrap();
    Store::open(fs, config(l)).unwrap()
}

fn payload(i: u32) -> Vec<u8> {
    vec![b'a' + (i % 26) as u8; (i as usize * 53) % 400]
}

/// The workload: appends over several blocks, a delete, an erase, a checkpoint; a reopen
/// (a second instance, another nonce prefix) that appends and purges by subject.
fn workload(l: &LayerConfig) -> MemFs {
    let mem = MemFs::new();
    let mut s = open(&mem, l, 1);
    for i in 0..30u32 {
        let subject = ["orders.eu", "orders.us", "audit"][i as usize % 3];
        s.append(subject, &i.to_le_bytes(), &payload(i)).unwrap();
    }
    s.delete(4).unwrap();
    s.erase(7).unwrap();
    s.close().unwrap();
    let mut s = open(&mem, l, 2);
    s.append("after.reopen", b"h", b"x").unwrap();
    s.purge_ex("orders.us", 20, 0).unwrap();
    s.close().unwrap();
    mem
}

fn golden_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden_crypt")
}

/// A store opened on `mem` (the workload's files) holds what the workload left: every
/// message but the removed ones.
fn check_reads_back(mem: &MemFs, l: &LayerConfig, name: &str) {
    let mut s = open(mem, l, 3);
    assert_eq!(s.state().last_seq, 31, "{name}");
    for seq in [1u64, 3, 6, 29, 30] {
        let m = s.get(seq).unwrap();
        assert_eq!(m.payload, payload(seq as u32 - 1), "{name} seq {seq}");
    }
    assert!(s.get(2).is_err() && s.get(4).is_err() && s.get(7).is_err());
    drop(s); // verify waits for no writer: it refuses a store that is open
    let r = crate::verify(&CryptFs::new(mem.clone(), l.clone()).unwrap()).unwrap();
    assert!(r.is_clean(), "{name}: {r:?}");
}

#[test]
fn golden_layered_format_is_byte_identical_and_reads_back() {
    let mut got = Vec::new();
    for (name, l) in layers() {
        check_reads_back(&workload(&l), &l, name);
        got.extend(crate::tests::golden_files(&workload(&l), name));
    }
    got.sort();
    crate::tests::check_golden(&golden_dir(), &got);
}

/// The same workload's files as the store wrote them before it rewrote the blocks it seals
/// (each `Always` append its own frame; written by `aes-gcm`/`chacha20poly1305` 0.10): a store
/// of then still opens, reads back and verifies clean.
#[test]
fn files_written_before_sealed_blocks_were_rewritten_still_read_back() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden_crypt_unsealed");
    for (name, l) in layers() {
        let mem = MemFs::new();
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let file = e.unwrap().file_name().into_string().unwrap();
            let Some(path) = file.strip_prefix(&format!("{name}.")) else {
                continue;
            };
            let _ = mem.create_dir("msgs");
            let f = mem.open(&path.replace("__", "/"), OpenOptions::read_write_create());
            let bytes = std::fs::read(dir.join(&file)).unwrap();
            f.unwrap().write_all_at(&bytes, 0).unwrap();
            n += 1;
        }
        assert_eq!(n, 5, "{name}: index.db and four blocks");
        check_reads_back(&mem, &l, name);
    }
}
