//! A rebuild on several threads (`Config::rebuild_threads`, on a real directory) comes to what
//! the rebuild on one thread comes to: the same state, report, messages, subjects, deadlines
//! and files left behind, or the same error.
//!
//! Random stores (appends with and without a time to live, deletes, erases, purges, compacts,
//! truncates, skips, closes and crashes between them, written in small blocks) are damaged at
//! random (bits flipped, blocks cut short, zeroed runs, blocks removed), their `index.db`
//! removed, and each is copied twice: one copy opened with one thread, the other asking for
//! three workers (as many as the machine's CPUs allow: two on CI's).
//! A failing case is shrunk (operations, then damage, removed while it still fails) and
//! printed. `SEQSTORE_SEED` replays a run; `SEQSTORE_TEST_SIZE=full` runs more cases.
//!
//! A second test forges records whose subject is not UTF-8 under a valid crc (a bit flip fails
//! the crc first, so the damage above never reaches the subject's check): every scan skips
//! each one as damage, the rebuild on one thread and on three, and the reads of a block that
//! `index.db` vouches for. Scans check a subject's text only for bytes they have not interned
//! already, so the forged subjects share their first 16 bytes with real ones (the memo's key).

use seqstore_core::{Config, Error, ManualClock, RecoveryMode, Store, SyncPolicy};
use seqstore_fault_fs::Rng;
use seqstore_fs::HostFs;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

#[derive(Clone, Debug)]
enum Op {
    Append {
        subject: u8,
        len: u16,
        ttl: bool,
    },
    /// The sequences below are fractions of the last one, in 1/256ths (valid or not: a refused
    /// operation is part of the story too).
    Delete(u8),
    Erase(u8),
    PurgeSubject {
        subject: u8,
        keep: u8,
    },
    Compact(u8),
    Truncate(u8),
    Skip(u8),
    Close,
    Crash,
}

#[derive(Clone, Debug)]
enum Damage {
    /// In block `block` (mod the count), at `at`/256 of its length.
    Flip {
        block: u8,
        at: u8,
        bit: u8,
    },
    Cut {
        block: u8,
        at: u8,
    },
    Zero {
        block: u8,
        at: u8,
        len: u16,
    },
    Remove {
        block: u8,
    },
}

#[derive(Clone, Debug)]
struct Case {
    block_size: u64,
    strict: bool,
    ops: Vec<Op>,
    damage: Vec<Damage>,
}

/// A random byte (fractions and picks below are in 256ths).
fn byte(r: &mut Rng) -> u8 {
    r.next_u64() as u8
}

fn gen_case(r: &mut Rng) -> Case {
    let n = 20 + r.below(400) as usize;
    let ops = (0..n)
        .map(|_| match r.below(100) {
            0..=74 => Op::Append {
                subject: r.below(12) as u8,
                len: r.below(400) as u16,
                ttl: r.below(10) == 0,
            },
            75..=80 => Op::Delete(byte(r)),
            81..=83 => Op::Erase(byte(r)),
            84..=85 => Op::PurgeSubject {
                subject: r.below(12) as u8,
                keep: r.below(4) as u8,
            },
            86..=87 => Op::Compact(byte(r) / 4),
            88 => Op::Truncate(192 + byte(r) / 4),
            89..=91 => Op::Skip(byte(r) % 8),
            92..=95 => Op::Close,
            _ => Op::Crash,
        })
        .collect();
    let damage = (0..r.below(4))
        .map(|_| match r.below(10) {
            0..=4 => Damage::Flip {
                block: byte(r),
                at: byte(r),
                bit: byte(r) % 8,
            },
            5..=6 => Damage::Cut {
                block: byte(r),
                at: byte(r),
            },
            7..=8 => Damage::Zero {
                block: byte(r),
                at: byte(r),
                len: 1 + r.below(600) as u16,
            },
            _ => Damage::Remove { block: byte(r) },
        })
        .collect();
    Case {
        block_size: [1024, 2048, 4096, 16384][r.below(4) as usize],
        strict: r.below(4) == 0,
        ops,
        damage,
    }
}

const T0: i64 = 1_700_000_000_000_000_000;

fn open(dir: &Path, cfg: Config, clock: &ManualClock) -> Result<Store<HostFs>, Error> {
    Store::builder(HostFs::create(dir).expect("root"))
        .config(cfg)
        .clock(clock.clone())
        .open()
}

/// Subject `k` of a case: short ones, and ones longer than 16 bytes that share their first 16.
fn subject_name(k: u8) -> String {
    match k % 2 {
        0 => format!("s.{k}"),
        _ => format!("orders.europe.west.{k}"),
    }
}

/// Writes the case's operations into `dir`, in blocks of `block_size`.
fn write(dir: &Path, c: &Case) {
    let clock = ManualClock::new(T0);
    let cfg = Config::default()
        .with_block_size(c.block_size)
        .with_sync(SyncPolicy::Never);
    let mut s = open(dir, cfg.clone(), &clock).expect("open to write");
    for (i, op) in c.ops.iter().enumerate() {
        clock.advance(1_000_000);
        let last = s.state().last_seq;
        let at = |f: u8| (last * u64::from(f)) / 256 + 1;
        // refusals (a sequence already gone, say) are fine: only the files matter here
        match *op {
            Op::Append { subject, len, ttl } => {
                let payload = seqstore_crash_matrix::payload(i as u64, len);
                let subject = subject_name(subject);
                let _ = match ttl {
                    true => s.append_with_ttl(&subject, b"", &payload, Duration::from_millis(3)),
                    false => s.append(&subject, b"", &payload),
                };
            }
            Op::Delete(f) => drop(s.delete(at(f))),
            Op::Erase(f) => drop(s.erase(at(f))),
            Op::PurgeSubject { subject, keep } => {
                drop(s.purge_ex(&subject_name(subject), 0, u64::from(keep)))
            }
            Op::Compact(f) => drop(s.compact(at(f))),
            Op::Truncate(f) => drop(s.truncate(at(f))),
            Op::Skip(n) => drop(s.skip_many(last + 1, u64::from(n) + 1)),
            Op::Close | Op::Crash => {
                let _ = s.sync();
                match op {
                    Op::Close => drop(s.close()),
                    _ => drop(s),
                }
                s = open(dir, cfg.clone(), &clock).expect("reopen to write");
            }
        }
    }
    let _ = s.sync();
    drop(s);
}

fn blocks(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("msgs"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "blk"));
    v.sort_by_key(|p| {
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        stem.parse::<u64>().unwrap_or(u64::MAX)
    });
    v
}

fn damage(dir: &Path, c: &Case) {
    for d in &c.damage {
        let bs = blocks(dir);
        if bs.is_empty() {
            return;
        }
        let pick = |b: u8| &bs[b as usize % bs.len()];
        let frac = |len: usize, at: u8| len * at as usize / 256;
        match *d {
            Damage::Flip { block, at, bit } => {
                let p = pick(block);
                let mut b = std::fs::read(p).expect("read block");
                if !b.is_empty() {
                    let i = frac(b.len(), at);
                    b[i] ^= 1 << bit;
                    std::fs::write(p, b).expect("write block");
                }
            }
            Damage::Cut { block, at } => {
                let p = pick(block);
                let b = std::fs::read(p).expect("read block");
                std::fs::write(p, &b[..frac(b.len(), at)]).expect("cut block");
            }
            Damage::Zero { block, at, len } => {
                let p = pick(block);
                let mut b = std::fs::read(p).expect("read block");
                let i = frac(b.len(), at);
                let end = (i + len as usize).min(b.len());
                b[i..end].fill(0);
                std::fs::write(p, b).expect("write block");
            }
            Damage::Remove { block } => std::fs::remove_file(pick(block)).expect("remove block"),
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dst);
        } else if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), dst).expect("copy");
        }
    }
}

/// Everything a reader can tell of a store opened from `dir` with `threads`, and the block
/// files left behind (the rebuild cuts and removes).
fn outcome(dir: &Path, c: &Case, threads: usize) -> String {
    let clock = ManualClock::new(T0 + 10_000_000_000);
    let mode = match c.strict {
        true => RecoveryMode::Strict,
        false => RecoveryMode::TolerateCorruptTail,
    };
    // blocks of 4 MiB: the stream is estimated big enough for the workers
    let cfg = Config::default()
        .with_block_size(4 << 20)
        .with_recovery(mode)
        .with_rebuild_threads(threads);
    let mut out = String::new();
    match open(dir, cfg, &clock) {
        Err(e) => writeln!(out, "open: {e}").unwrap(),
        Ok(mut s) => {
            let st = s.state();
            writeln!(out, "state {st:?}\nreport {:?}", s.recovery_report()).unwrap();
            for seq in st.first_seq..=st.last_seq {
                writeln!(
                    out,
                    "{seq}: {:?}",
                    s.get(seq).map(|m| (m.subject, m.ts, fnv(&m.payload)))
                )
                .unwrap();
            }
            writeln!(out, "subjects {:?}", s.subjects_state(">")).unwrap();
            writeln!(out, "last seqs {:?}", s.all_last_seqs()).unwrap();
            // the deadlines: each message with a time to live has expired by now
            clock.advance(1_000_000_000);
            writeln!(out, "tick {:?} -> {:?}", s.tick(), s.state()).unwrap();
            drop(s);
        }
    }
    for b in blocks(dir) {
        let bytes = std::fs::read(&b).expect("read block");
        let name = b.file_name().unwrap().to_string_lossy().into_owned();
        writeln!(out, "{name}: {} bytes, fnv {:x}", bytes.len(), fnv(&bytes)).unwrap();
    }
    out
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The two outcomes of `c`, and whether the store has two blocks or more to share out.
fn run(c: &Case) -> (String, String, bool) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().join("base");
    write(&base, c);
    damage(&base, c);
    let _ = std::fs::remove_file(base.join("index.db"));
    let shared = blocks(&base).len() >= 2;
    let (one, three) = (tmp.path().join("one"), tmp.path().join("three"));
    copy_dir(&base, &one);
    copy_dir(&base, &three);
    (outcome(&one, c, 1), outcome(&three, c, 3), shared)
}

fn fails(c: &Case) -> bool {
    let (a, b, _) = run(c);
    a != b
}

/// Removes operations one at a time while `fails` still holds of the case.
fn without_ops(mut c: Case, fails: impl Fn(&Case) -> bool) -> Case {
    let mut i = c.ops.len();
    while i > 0 {
        i -= 1;
        let mut t = c.clone();
        t.ops.remove(i);
        if fails(&t) {
            c = t;
        }
    }
    c
}

/// Removes operations, then damage, one at a time while the case still fails.
fn shrink(c: Case) -> Case {
    let mut c = without_ops(c, fails);
    let mut i = c.damage.len();
    while i > 0 {
        i -= 1;
        let mut t = c.clone();
        t.damage.remove(i);
        if fails(&t) {
            c = t;
        }
    }
    c
}

fn first_difference(a: &str, b: &str) -> String {
    a.lines()
        .zip(b.lines())
        .find(|(x, y)| x != y)
        .map(|(x, y)| format!("one thread:    {x}\nthree threads: {y}"))
        .unwrap_or_else(|| format!("{} lines against {}", a.lines().count(), b.lines().count()))
}

#[test]
fn a_rebuild_on_threads_equals_one_on_a_single_thread() {
    let seed = seqstore_test_setup::seed("rebuild_threads");
    let cases = seqstore_test_setup::sized(40, 300);
    let mut r = Rng::new(seed);
    let (mut shared, mut refused) = (0, 0);
    for i in 0..cases {
        let c = gen_case(&mut r);
        let (a, b, s) = run(&c);
        if a != b {
            let small = shrink(c);
            let (a, b, _) = run(&small);
            panic!(
                "seed {seed}, case {i}: the rebuilds differ\n{}\nshrunk to {small:#?}",
                first_difference(&a, &b)
            );
        }
        shared += usize::from(s);
        refused += usize::from(a.starts_with("open:"));
    }
    eprintln!("{cases} cases: {shared} with blocks to share out, {refused} refused by both");
    // the workers ran: most stores span several blocks
    assert!(
        shared * 2 > cases,
        "only {shared} of {cases} stores had two blocks"
    );
}

/// A record forged by [`forge`]: its block file's name, offset and sequence, and whether it
/// is an erased message (whose subject, when not text, reads as empty: it stays valid).
#[derive(Debug)]
struct Forged {
    file: String,
    offset: u64,
    seq: u64,
    erased: bool,
}

/// CRC-32 (IEEE), bit by bit: the record's checksum, computed apart from the store's code.
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = (c >> 1) ^ (0xedb8_8320 & (c & 1).wrapping_neg());
        }
    }
    !c
}

/// Overwrites one byte of the subject of about one message record in eight with 0xff (never
/// in UTF-8) and recomputes the record's crc (the layout in ARCHITECTURE.md).
fn forge(dir: &Path, r: &mut Rng) -> Vec<Forged> {
    let mut out = Vec::new();
    for p in blocks(dir) {
        let mut b = std::fs::read(&p).expect("read block");
        let mut off = 16;
        while let Some(h) = b.get(off..off + 36) {
            let len = u32::from_le_bytes(h[0..4].try_into().unwrap()) as usize;
            if len < 36 || off + len > b.len() {
                break;
            }
            let (kind, flags) = (h[4], h[5]);
            let subj_len = u16::from_le_bytes(h[6..8].try_into().unwrap()) as usize;
            let seq = u64::from_le_bytes(h[8..16].try_into().unwrap());
            if kind == 1 && subj_len > 0 && r.below(8) == 0 {
                // in a long subject, after its first 16 bytes half the time
                let at = match subj_len > 16 && r.below(2) == 0 {
                    true => 16 + r.below(subj_len as u64 - 16) as usize,
                    false => r.below(subj_len as u64) as usize,
                };
                b[off + 32 + at] = 0xff;
                let crc = crc32(&b[off..off + len - 4]);
                b[off + len - 4..off + len].copy_from_slice(&crc.to_le_bytes());
                let file = p.file_name().unwrap().to_string_lossy().into_owned();
                let erased = flags & 1 != 0;
                out.push(Forged {
                    file,
                    offset: off as u64,
                    seq,
                    erased,
                });
            }
            off += len;
        }
        std::fs::write(&p, b).expect("write block");
    }
    out
}

/// Opens `dir` (tolerating damage, `threads`) and checks what it made of the forged records:
/// none is read; each one not erased is reported skipped for its subject, when `rebuilt`.
fn check_forged(
    dir: &Path,
    threads: usize,
    forged: &[Forged],
    rebuilt: bool,
) -> Result<(), String> {
    let clock = ManualClock::new(T0 + 10_000_000_000);
    let cfg = Config::default()
        .with_block_size(4 << 20)
        .with_recovery(RecoveryMode::TolerateCorruptTail)
        .with_rebuild_threads(threads);
    let mut s = open(dir, cfg, &clock).map_err(|e| format!("open: {e}"))?;
    let report = s.recovery_report().clone();
    for f in forged {
        if let Ok(m) = s.get(f.seq) {
            return Err(format!("{f:?} read as a message: {m:?}"));
        }
        let reported = report.skipped.iter().any(|k| {
            let name = Path::new(&k.file).file_name();
            name.is_some_and(|n| *n == *f.file)
                && k.offset == f.offset
                && k.reason == "subject is not UTF-8"
        });
        if rebuilt && reported == f.erased {
            return Err(format!("{f:?}: reported skipped {reported}: {report:?}"));
        }
    }
    Ok(())
}

/// One case of forged subjects: `c`'s store written, closed (`index.db` then vouches for every
/// block), forged with an `Rng` of `forge_seed`, then opened through `index.db`, and rebuilt
/// on one thread and on three. `Ok`: how many records were forged, and how many of them were
/// erased messages; `Err`: what went wrong.
fn forged_case(c: &Case, forge_seed: u64) -> Result<(usize, usize), String> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().join("base");
    write(&base, c);
    let clock = ManualClock::new(T0 + 10_000_000_000);
    let cfg = Config::default().with_block_size(c.block_size);
    let s = open(&base, cfg, &clock).map_err(|e| format!("reopen: {e}"))?;
    s.close().map_err(|e| format!("close: {e}"))?;
    let forged = forge(&base, &mut Rng::new(forge_seed));
    let vouched = tmp.path().join("vouched");
    copy_dir(&base, &vouched);
    let _ = std::fs::remove_file(base.join("index.db"));
    let copies = ["one", "three", "one_checked", "three_checked"].map(|n| {
        let to = tmp.path().join(n);
        copy_dir(&base, &to);
        to
    });
    check_forged(&vouched, 1, &forged, false).map_err(|e| format!("index.db: {e}"))?;
    check_forged(&copies[2], 1, &forged, true).map_err(|e| format!("one thread: {e}"))?;
    check_forged(&copies[3], 3, &forged, true).map_err(|e| format!("three threads: {e}"))?;
    let (a, b) = (outcome(&copies[0], c, 1), outcome(&copies[1], c, 3));
    if a != b {
        return Err(format!("the rebuilds differ\n{}", first_difference(&a, &b)));
    }
    Ok((forged.len(), forged.iter().filter(|f| f.erased).count()))
}

/// Removes operations one at a time while the forged case still fails.
fn shrink_forged(c: Case, forge_seed: u64) -> Case {
    without_ops(c, |t| forged_case(t, forge_seed).is_err())
}

#[test]
fn a_subject_that_is_not_utf8_is_refused_by_every_scan() {
    let seed = seqstore_test_setup::seed("forged_subjects");
    let cases = seqstore_test_setup::sized(20, 60);
    let mut r = Rng::new(seed);
    let (mut forged_total, mut erased_total) = (0, 0);
    for i in 0..cases {
        let mut c = gen_case(&mut r);
        c.damage.clear();
        c.strict = false;
        let forge_seed = r.next_u64();
        match forged_case(&c, forge_seed) {
            Ok((n, erased)) => {
                forged_total += n;
                erased_total += erased;
            }
            Err(_) => {
                let small = shrink_forged(c, forge_seed);
                let e = forged_case(&small, forge_seed).err().unwrap_or_default();
                panic!("seed {seed}, case {i}: {e}\nshrunk to {small:#?}");
            }
        }
    }
    eprintln!("{cases} cases: {forged_total} records forged, {erased_total} of them erased");
    assert!(forged_total > cases && erased_total > 0);
}
