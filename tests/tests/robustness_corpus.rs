//! The fuzz targets without a fuzzer: each target body (`seqstore_crash_matrix::robust::fuzz_*`, the same
//! function the cargo-fuzz binaries in fuzz/ call) runs on every file of its seed corpus
//! `fuzz/corpus/<target>/`, then on seeded pseudo-random inputs (mutations of the corpus and
//! random bytes; `SEQSTORE_SEED` picks the seed, `SEQSTORE_FUZZ_CASES` the count per target).
//!
//! The binary's allocator refuses (aborts on) any single allocation above 64 MiB and records the
//! largest one made, so "a length field of 4 GiB must not allocate 4 GiB" is checked here too.

use seqstore_crash_matrix::robust::{self, TARGETS};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

const MAX_ALLOC: usize = 64 << 20;
static LARGEST: AtomicUsize = AtomicUsize::new(0);

struct CappedAlloc;

// Unsafe because GlobalAlloc is an unsafe trait: a capped allocator has no safe way to exist.
// SAFETY: forwards to `System`; a refused request returns null, which GlobalAlloc allows.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CappedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOC {
            return std::ptr::null_mut();
        }
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOC {
            return std::ptr::null_mut();
        }
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > MAX_ALLOC {
            return std::ptr::null_mut();
        }
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc;

fn seed() -> u64 {
    std::env::var("SEQSTORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed)
}

/// The workspace's one seeded generator (splitmix64, fault-fs).
use seqstore_fault_fs::Rng;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../fuzz/corpus/{target}"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).expect("read corpus file");
            (p, b)
        })
        .collect();
    files.sort();
    files
}

fn run_one(target: &str, f: fn(&[u8]), what: &str, data: &[u8]) {
    if let Err(p) = std::panic::catch_unwind(|| f(data)) {
        panic!(
            "fuzz target {target} failed on {what} ({} bytes, hex {}): {}",
            data.len(),
            data.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            robust::panic_text(&*p)
        );
    }
}

fn target(name: &str) -> fn(&[u8]) {
    TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no target {name}"))
        .1
}

/// Every target on every file of its corpus.
fn run_corpus(name: &str) {
    let f = target(name);
    let files = corpus(name);
    assert!(
        files.len() >= 3,
        "corpus of {name} has {} files",
        files.len()
    );
    let t = std::time::Instant::now();
    for (p, data) in &files {
        run_one(name, f, &p.display().to_string(), data);
    }
    println!(
        "{name}: {} corpus files in {:.2?}, largest allocation so far {} bytes",
        files.len(),
        t.elapsed(),
        LARGEST.load(Ordering::Relaxed)
    );
}

/// Seeded mutations of the corpus and random inputs: the fallback fuzzer (no libFuzzer needed).
fn run_random(name: &str, default_cases: usize) {
    let f = target(name);
    let cases = std::env::var("SEQSTORE_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_cases);
    let mut rng = Rng::new(seed() ^ name.bytes().fold(0u64, |h, b| h.rotate_left(8) ^ b as u64));
    // an index below `n` (the generator's own `below`, in `usize`)
    let below = |rng: &mut Rng, n: usize| rng.below(n as u64) as usize;
    let files = corpus(name);
    let t = std::time::Instant::now();
    for i in 0..cases {
        let mut data = if below(&mut rng, 4) == 0 || files.is_empty() {
            (0..below(&mut rng, 256))
                .map(|_| rng.next_u64() as u8)
                .collect()
        } else {
            files[below(&mut rng, files.len())].1.clone()
        };
        for _ in 0..below(&mut rng, 8) {
            match below(&mut rng, 4) {
                0 if !data.is_empty() => {
                    let at = below(&mut rng, data.len());
                    data[at] ^= 1 << below(&mut rng, 8);
                }
                1 if !data.is_empty() => {
                    let at = below(&mut rng, data.len());
                    data[at] = rng.next_u64() as u8;
                }
                2 => {
                    let at = below(&mut rng, data.len() + 1);
                    data.insert(at, rng.next_u64() as u8);
                }
                _ if data.len() > 1 => {
                    let at = below(&mut rng, data.len());
                    data.remove(at);
                }
                _ => {}
            }
        }
        run_one(
            name,
            f,
            &format!("random case {i} (SEQSTORE_SEED={})", seed()),
            &data,
        );
    }
    println!(
        "{name}: {cases} random cases in {:.2?} (SEQSTORE_SEED={})",
        t.elapsed(),
        seed()
    );
}

#[test]
fn corpus_record_decode() {
    run_corpus("record_decode");
    run_random("record_decode", 20_000);
}

#[test]
fn corpus_index_decode() {
    run_corpus("index_decode");
    run_random("index_decode", 20_000);
}

#[test]
fn corpus_recover_dir() {
    run_corpus("recover_dir");
    run_random("recover_dir", 300);
}

#[test]
fn corpus_model_ops() {
    run_corpus("model_ops");
    run_random("model_ops", 150);
}

#[test]
fn corpus_restore_archive() {
    run_corpus("restore_archive");
    run_random("restore_archive", 2_000);
}

/// The 4 GiB length field: decoding a record or a block holding one, and recovering a store
/// whose block has one, allocates nothing near 4 GiB (the allocator would abort first; the
/// largest allocation is checked as well).
#[test]
fn huge_length_fields_do_not_allocate() {
    let mut rec = vec![0u8; 64];
    rec[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    robust::fuzz_record_decode(&rec);
    let mut idx = vec![0u8; 60];
    idx[56..60].copy_from_slice(&u32::MAX.to_le_bytes());
    robust::fuzz_index_decode(&idx);
    // recover_dir program: the whole template store, then a u32::MAX written over the first
    // record's length field of each block file
    let t = robust::template();
    let mut prog = vec![1u8];
    for i in 0..t.files.len() {
        prog.extend([4, i as u8, 16, 0, 0]);
    }
    robust::fuzz_recover_dir(&prog);
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(largest < MAX_ALLOC, "largest allocation {largest}");
}
