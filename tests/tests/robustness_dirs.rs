//! What a user can find in a store directory, and what the store does with it: a table of
//! damaged and hostile layouts, each with its documented outcome, checked for `Store::open` in
//! both recovery modes and for the read-only `verify`. The outcome table is printed
//! (`cargo test -p seqstore-crash-matrix --test proofs -- robustness_dirs:: --nocapture`).
//!
//! Outcomes: the store opens (repairing what it can) and lists what it found in its
//! `RecoveryReport` (cuts, skipped records, lost sequences, ignored files, a completed or rolled
//! back purge, a rejected index), or it refuses with `Error::Corrupt { file, offset }` (or
//! `Error::Io` naming the path, for a layout the filesystem itself refuses). Strict recovery
//! accepts only a torn tail of the newest block.
//!
//! Also the sandbox: on a `HostFs` root, symlinks that lead out of the root (`msgs -> /outside`,
//! `msgs/5.blk -> /outside/file`, `index.db -> ...`, `purge.old -> ...`, `index.db.tmp -> ...`)
//! never make the store read, write or remove anything outside.

use seqstore_core::internal::index::Snapshot;
use seqstore_core::internal::record::{self, Kind};
use seqstore_core::{
    verify, Config, Error, Fs, IndexStatus, ManualClock, RecoveryMode, RecoveryReport, SeqRange,
    Store, StreamState, VerifyReport,
};
use seqstore_crash_matrix::robust::{self, copy_of, put, records_of, settle};
use seqstore_fault_fs::{FaultFs, Model};
use std::fmt::Write as _;

// ------------------------------------------------------------------ the base store

/// 25 messages of 97 bytes on subject `s` (ten per 1 KiB block: `msgs/1.blk` 1..=10,
/// `2.blk` 11..=20, `3.blk` 21..=25), every one durable; `index.db` too if `close`.
fn base(close: bool) -> FaultFs {
    let fs = FaultFs::new(Model::Posix);
    let mut s = open(&fs, RecoveryMode::TolerateCorruptTail).expect("open");
    for i in 0..25u64 {
        s.append("s", b"", &seqstore_crash_matrix::payload(i, 60))
            .expect("append");
    }
    if close {
        s.close().expect("close");
    } else {
        drop(s);
    }
    settle(&fs);
    fs
}

fn cfg(mode: RecoveryMode) -> Config {
    Config::default().with_block_size(1024).with_recovery(mode)
}

fn open(fs: &FaultFs, mode: RecoveryMode) -> Result<Store<FaultFs>, Error> {
    Store::builder(fs.clone())
        .config(cfg(mode))
        .clock(ManualClock::new(1_000_000_000))
        .open()
}

fn file(fs: &FaultFs, p: &str) -> Vec<u8> {
    fs.read_file(p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// Offset of the record of `seq` in a block image.
fn rec_off(block: &[u8], seq: u64) -> usize {
    records_of(block)
        .into_iter()
        .find(|r| r.2 == seq && r.3 == Kind::Msg)
        .unwrap_or_else(|| panic!("no record of {seq}"))
        .0
}

fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

// ------------------------------------------------------------------ the table

/// What one row came to.
struct Got {
    /// `Store::open`, tolerant: the state and the report.
    tolerant: Result<(StreamState, RecoveryReport), Error>,
    /// A typed error reading the opened store (damage found lazily in a block index.db
    /// vouched for), tolerant then strict.
    read_err: [Option<Error>; 2],
    strict: Result<(StreamState, RecoveryReport), Error>,
    /// Whether strict recovery left the directory as it was.
    strict_unchanged: bool,
    verify: Result<VerifyReport, Error>,
}

fn run(fs: &FaultFs) -> Got {
    let attempt = |mode| {
        let img = copy_of(fs);
        let before = img.image_hash();
        let mut read_err = None;
        let r = open(&img, mode).map(|mut s| {
            let rep = s.recovery_report().clone();
            let st = s.state();
            // the store it gives is consistent and takes appends (or says, typed, why not)
            read_err = robust::check_store(&mut s).err();
            (st, rep)
        });
        (r, img.image_hash() == before, read_err)
    };
    let (tolerant, _, e1) = attempt(RecoveryMode::TolerateCorruptTail);
    let (strict, strict_unchanged, e2) = attempt(RecoveryMode::Strict);
    let v = copy_of(fs);
    let verify = verify(&v);
    assert_eq!(
        v.image_hash(),
        fs.image_hash(),
        "verify changed the directory"
    );
    Got {
        tolerant,
        read_err: [e1, e2],
        strict,
        strict_unchanged,
        verify,
    }
}

type Check = fn(&FaultFs, &Got) -> Result<(), String>;

struct Row {
    name: &'static str,
    /// Changes the base store (`base(true)`: blocks and index.db) into the row's layout.
    setup: fn(&FaultFs),
    /// The documented outcome, checked.
    check: Check,
}

fn opened(
    r: &Result<(StreamState, RecoveryReport), Error>,
) -> Result<&(StreamState, RecoveryReport), String> {
    r.as_ref().map_err(|e| format!("refused: {e}"))
}

fn corrupt(
    r: &Result<(StreamState, RecoveryReport), Error>,
    f: &str,
    off: Option<u64>,
) -> Result<(), String> {
    match r {
        Err(Error::Corrupt { file, offset, .. })
            if file == f && off.is_none_or(|o| o == *offset) =>
        {
            Ok(())
        }
        Err(e) => Err(format!("expected Corrupt {{ {f}, {off:?} }}, got {e:?}")),
        Ok((st, _)) => Err(format!(
            "expected Corrupt {{ {f}, {off:?} }}, opened at {st:?}"
        )),
    }
}

fn state_is(st: &StreamState, msgs: u64, first: u64, last: u64) -> Result<(), String> {
    if (st.msgs, st.first_seq, st.last_seq) == (msgs, first, last) {
        Ok(())
    } else {
        Err(format!(
            "state {st:?}, expected msgs={msgs} first={first} last={last}"
        ))
    }
}

fn lost(rep: &RecoveryReport, want: &[(u64, u64)]) -> Result<(), String> {
    let want: Vec<SeqRange> = want
        .iter()
        .map(|&(first, last)| SeqRange { first, last })
        .collect();
    if rep.lost == want {
        Ok(())
    } else {
        Err(format!("lost {:?}, expected {want:?}", rep.lost))
    }
}

fn verify_problem(v: &Result<VerifyReport, Error>, f: &str, what: &str) -> Result<(), String> {
    let v = v.as_ref().map_err(|e| format!("verify: {e}"))?;
    if v.problems
        .iter()
        .any(|p| p.file == f && p.what.contains(what))
    {
        Ok(())
    } else {
        Err(format!(
            "verify: no problem {what:?} in {f}: {:?}",
            v.problems
        ))
    }
}

fn verify_clean(v: &Result<VerifyReport, Error>) -> Result<&VerifyReport, String> {
    let v = v.as_ref().map_err(|e| format!("verify: {e}"))?;
    if v.is_clean() {
        Ok(v)
    } else {
        Err(format!(
            "verify not clean: {:?} lost {:?}",
            v.problems, v.lost
        ))
    }
}

/// Every row of the table, by group (each group a function of its own: one table of 26
/// rows was one 490-line function).
fn rows() -> Vec<Row> {
    [
        blank_and_zeros(),
        damaged_records(),
        index_db(),
        layout(),
        half_done_purge(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Block files and index.db that are empty or zeros (never written).
fn blank_and_zeros() -> Vec<Row> {
    vec![
        Row {
            name: "empty block file (newest, msgs/4.blk)",
            setup: |fs| put(fs, "msgs/4.blk", b""),
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 25, 1, 25)?;
                (rep.removed_blank == ["msgs/4.blk"])
                    .then_some(())
                    .ok_or("not removed")?;
                let (st, _) = opened(&g.strict)?;
                state_is(st, 25, 1, 25)?;
                verify_problem(&g.verify, "msgs/4.blk", "blank block")
            },
        },
        Row {
            name: "empty block file replacing msgs/2.blk",
            setup: |fs| put(fs, "msgs/2.blk", b""),
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 15, 1, 25)?;
                lost(rep, &[(11, 20)])?;
                let (st, rep) = opened(&g.strict)?;
                state_is(st, 15, 1, 25)?;
                lost(rep, &[(11, 20)])?;
                verify_problem(&g.verify, "msgs/2.blk", "blank block")
            },
        },
        Row {
            name: "empty index.db",
            setup: |fs| put(fs, "index.db", b""),
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 25, 1, 25)?;
                let why = rep.index_rejected.as_deref().unwrap_or("");
                why.contains("index too short")
                    .then_some(())
                    .ok_or(format!("index: {why:?}"))?;
                opened(&g.strict)?;
                let v = verify_clean(&g.verify)?;
                matches!(&v.index, IndexStatus::Rejected(w) if w.contains("too short"))
                    .then_some(())
                    .ok_or(format!("verify index {:?}", v.index))
            },
        },
        Row {
            name: "a block of zeros (msgs/4.blk, 4 KiB)",
            setup: |fs| put(fs, "msgs/4.blk", &[0; 4096]),
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 25, 1, 25)?;
                (rep.removed_blank == ["msgs/4.blk"] && rep.cuts.is_empty())
                    .then_some(())
                    .ok_or(format!("{rep:?}"))?;
                opened(&g.strict)?;
                verify_problem(&g.verify, "msgs/4.blk", "blank block")
            },
        },
        Row {
            name: "zeros over the header of msgs/1.blk, records after it, no index.db",
            setup: |fs| {
                let mut b = file(fs, "msgs/1.blk");
                b[..16].fill(0);
                put(fs, "msgs/1.blk", &b);
                no_index(fs);
            },
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 15, 11, 25)?;
                (rep.cuts.len() == 1 && rep.cuts[0].file == "msgs/1.blk")
                    .then_some(())
                    .ok_or(format!("cuts {:?}", rep.cuts))?;
                corrupt(&g.strict, "msgs/1.blk", Some(0))?;
                verify_problem(&g.verify, "msgs/1.blk", "blank block")
            },
        },
    ]
}

/// Changes the record of `seq` in block `blk`: `damage` gets the block and the record's
/// offset.
fn damage_record(fs: &FaultFs, blk: &str, seq: u64, damage: fn(&mut [u8], usize)) {
    let mut b = file(fs, blk);
    let at = rec_off(&b, seq);
    damage(&mut b, at);
    put(fs, blk, &b);
}

/// The record of `seq` in `blk` alone is lost: tolerant recovery opens the other 24 of 1..=25
/// and reports `seq` lost; strict recovery refuses at the record's offset. The tolerant
/// report and that offset.
fn lost_one<'g>(g: &'g Got, blk: &str, seq: u64) -> Result<(&'g RecoveryReport, u64), String> {
    let (st, rep) = opened(&g.tolerant)?;
    state_is(st, 24, 1, 25)?;
    lost(rep, &[(seq, seq)])?;
    let at = base_off(blk, seq);
    corrupt(&g.strict, blk, Some(at))?;
    Ok((rep, at))
}

fn strict_unchanged(g: &Got) -> Result<(), String> {
    g.strict_unchanged
        .then_some(())
        .ok_or_else(|| "strict changed the directory".to_string())
}

/// A record damaged inside a block: torn or forged length fields, checksum mismatches.
fn damaged_records() -> Vec<Row> {
    vec![
        Row {
            name: "record length past the end, newest block (torn tail), no index.db",
            setup: |fs| {
                damage_record(fs, "msgs/3.blk", 25, |b, at| set_u32(b, at, 5000));
                no_index(fs);
            },
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 24, 1, 24)?;
                let at = base_off("msgs/3.blk", 25);
                (rep.cuts.len() == 1 && rep.cuts[0].offset == at)
                    .then_some(())
                    .ok_or(format!("cuts {:?}", rep.cuts))?;
                let (st, _) = opened(&g.strict)?;
                state_is(st, 24, 1, 24)?;
                verify_problem(&g.verify, "msgs/3.blk", "cut short")
            },
        },
        Row {
            name: "record length past the end, older block (msgs/1.blk, seq 5), no index.db",
            setup: |fs| {
                damage_record(fs, "msgs/1.blk", 5, |b, at| set_u32(b, at, 0x00ff_ffff));
                no_index(fs);
            },
            check: |_, g| {
                // recovery resyncs on the next valid record: only seq 5 is lost
                lost_one(g, "msgs/1.blk", 5)?;
                strict_unchanged(g)?;
                verify_problem(&g.verify, "msgs/1.blk", "past the end")
            },
        },
        Row {
            name: "4 GiB length field (msgs/1.blk, seq 5), no index.db",
            setup: |fs| {
                damage_record(fs, "msgs/1.blk", 5, |b, at| set_u32(b, at, u32::MAX));
                no_index(fs);
            },
            check: |_, g| {
                // no 4 GiB allocation; recovery resyncs on the next valid record
                lost_one(g, "msgs/1.blk", 5)?;
                verify_problem(&g.verify, "msgs/1.blk", "length out of range")
            },
        },
        Row {
            name: "checksum mismatch mid-block (msgs/1.blk, seq 5 payload), no index.db",
            setup: |fs| {
                damage_record(fs, "msgs/1.blk", 5, |b, at| b[at + 40] ^= 0x20);
                no_index(fs);
            },
            check: |_, g| {
                let (rep, at) = lost_one(g, "msgs/1.blk", 5)?;
                (rep.skipped.len() == 1 && rep.skipped[0].offset == at)
                    .then_some(())
                    .ok_or(format!("skipped {:?}", rep.skipped))?;
                strict_unchanged(g)?;
                verify_problem(&g.verify, "msgs/1.blk", "checksum mismatch")
            },
        },
        Row {
            name: "checksum mismatch mid-block, newest block (msgs/3.blk, seq 22), no index.db",
            setup: |fs| {
                damage_record(fs, "msgs/3.blk", 22, |b, at| b[at + 40] ^= 0x20);
                no_index(fs);
            },
            check: |_, g| {
                lost_one(g, "msgs/3.blk", 22)?;
                verify_problem(&g.verify, "msgs/3.blk", "checksum mismatch")
            },
        },
        Row {
            name: "checksum mismatch mid-block (msgs/1.blk, seq 5), fresh index.db",
            setup: |fs| {
                damage_record(fs, "msgs/1.blk", 5, |b, at| b[at + 40] ^= 0x20);
            },
            check: |_, g| {
                // index.db checks each block's length, header and last crc, and open reads the
                // records up to the first live one (seq 1): the index is used, and damage
                // further into a block is found on the first read of that block, which fails
                // with the file and offset (as for every block known from index.db)
                let at = base_off("msgs/1.blk", 5);
                for (r, e) in [(&g.tolerant, &g.read_err[0]), (&g.strict, &g.read_err[1])] {
                    let (st, rep) = opened(r)?;
                    state_is(st, 25, 1, 25)?;
                    rep.used_index.then_some(()).ok_or("index.db not used")?;
                    match e {
                        Some(Error::Corrupt { file, offset, .. })
                            if file == "msgs/1.blk" && *offset == at => {}
                        other => return Err(format!("read error {other:?}")),
                    }
                }
                verify_problem(&g.verify, "msgs/1.blk", "checksum mismatch")
            },
        },
    ]
}

/// index.db that does not match the blocks: another stream, a newer version, missing blocks.
fn index_db() -> Vec<Row> {
    vec![
        Row {
            name: "index.db of another stream",
            setup: |fs| {
                let other = FaultFs::new(Model::Posix);
                let mut s = open(&other, RecoveryMode::Strict).expect("open");
                for i in 0..5 {
                    s.append("other", b"", &seqstore_crash_matrix::payload(i, 10))
                        .expect("append");
                }
                s.close().expect("close");
                put(fs, "index.db", &file(&other, "index.db"));
            },
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 25, 1, 25)?;
                (!rep.used_index
                    && rep
                        .index_rejected
                        .as_deref()
                        .is_some_and(|w| w.contains("stale")))
                .then_some(())
                .ok_or(format!("index {:?}", rep.index_rejected))?;
                opened(&g.strict)?;
                let v = verify_clean(&g.verify)?;
                matches!(v.index, IndexStatus::Rejected(_))
                    .then_some(())
                    .ok_or("verify index".into())
            },
        },
        Row {
            name: "index.db of a newer version (4, valid crc)",
            setup: |fs| {
                let mut b = file(fs, "index.db");
                set_u32(&mut b, 4, 4);
                robust::fix_index_crc(&mut b);
                put(fs, "index.db", &b);
            },
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 25, 1, 25)?;
                rep.index_rejected
                    .as_deref()
                    .is_some_and(|w| w.contains("index version 4"))
                    .then_some(())
                    .ok_or(format!("index {:?}", rep.index_rejected))?;
                opened(&g.strict)?;
                verify_clean(&g.verify).map(|_| ())
            },
        },
        Row {
            name: "index.db lists msgs/2.blk, which is missing",
            setup: |fs| fs.remove_file("msgs/2.blk").expect("rm"),
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 15, 1, 25)?;
                lost(rep, &[(11, 20)])?;
                rep.index_rejected
                    .as_deref()
                    .is_some_and(|w| w.contains("block files differ"))
                    .then_some(())
                    .ok_or(format!("index {:?}", rep.index_rejected))?;
                let (_, rep) = opened(&g.strict)?;
                lost(rep, &[(11, 20)])?;
                let v = g.verify.as_ref().map_err(|e| e.to_string())?;
                (v.lost
                    == [SeqRange {
                        first: 11,
                        last: 20,
                    }])
                .then_some(())
                .ok_or(format!("verify lost {:?}", v.lost))
            },
        },
        Row {
            name: "index.db lists msgs/1.blk, which is missing",
            setup: |fs| fs.remove_file("msgs/1.blk").expect("rm"),
            check: |_, g| {
                // documented limit: sequences below the first record left are not reported
                // lost (a front block removed after its messages were deleted looks the same);
                // index.db's rejection ("block files differ") is the only trace
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 15, 11, 25)?;
                lost(rep, &[])?;
                rep.index_rejected
                    .as_deref()
                    .is_some_and(|w| w.contains("block files differ"))
                    .then_some(())
                    .ok_or(format!("index {:?}", rep.index_rejected))?;
                opened(&g.strict)?;
                let v = g.verify.as_ref().map_err(|e| e.to_string())?;
                matches!(v.index, IndexStatus::Rejected(_))
                    .then_some(())
                    .ok_or("index".into())
            },
        },
    ]
}

/// Files where the store expects others: strays, misnamed or foreign blocks, an out-of-order record, a directory for a file.
fn layout() -> Vec<Row> {
    vec![
        Row {
            name: "stray files and directories",
            setup: |fs| {
                put(fs, "notes.txt", b"hello");
                put(fs, "msgs/readme", b"x");
                put(fs, "msgs/01.blk", b"x");
                put(fs, "msgs/0.blk", b"x");
                put(fs, "msgs/18446744073709551616.blk", b"x");
                robust::mkdirs(fs, "msgs/7.blk");
                robust::mkdirs(fs, "lost+found");
            },
            check: |fs, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 25, 1, 25)?;
                let mut ig = rep.ignored.clone();
                ig.sort();
                let want = [
                    "lost+found",
                    "msgs/0.blk",
                    "msgs/01.blk",
                    "msgs/18446744073709551616.blk",
                    "msgs/7.blk",
                    "msgs/readme",
                    "notes.txt",
                ];
                (ig == want)
                    .then_some(())
                    .ok_or(format!("ignored {ig:?}"))?;
                opened(&g.strict)?;
                let v = verify_clean(&g.verify)?;
                (v.stray.len() == want.len())
                    .then_some(())
                    .ok_or(format!("stray {:?}", v.stray))?;
                // left alone
                (fs.read_file("notes.txt").ok().as_deref() == Some(&b"hello"[..]))
                    .then_some(())
                    .ok_or("notes.txt".into())
            },
        },
        Row {
            name: "block header names another block (msgs/2.blk copied to msgs/4.blk)",
            setup: |fs| put(fs, "msgs/4.blk", &file(fs, "msgs/2.blk")),
            check: |_, g| {
                corrupt(&g.tolerant, "msgs/4.blk", Some(8))?;
                corrupt(&g.strict, "msgs/4.blk", Some(8))?;
                verify_problem(&g.verify, "msgs/4.blk", "header says block 2")
            },
        },
        Row {
            name: "not a block (text in msgs/4.blk)",
            setup: |fs| put(fs, "msgs/4.blk", b"this is not a seqstore block at all"),
            check: |_, g| {
                corrupt(&g.tolerant, "msgs/4.blk", Some(0))?;
                corrupt(&g.strict, "msgs/4.blk", Some(0))?;
                verify_problem(&g.verify, "msgs/4.blk", "bad magic")
            },
        },
        Row {
            name: "block of a newer format version (msgs/1.blk)",
            setup: |fs| {
                let mut b = file(fs, "msgs/1.blk");
                b[4] = 2;
                put(fs, "msgs/1.blk", &b);
                fs.remove_file("index.db").expect("rm");
            },
            check: |_, g| {
                corrupt(&g.tolerant, "msgs/1.blk", Some(4))?;
                corrupt(&g.strict, "msgs/1.blk", Some(4))?;
                verify_problem(&g.verify, "msgs/1.blk", "version 2")
            },
        },
        Row {
            name: "a record repeated out of order (seq 5 again at the end of msgs/3.blk)",
            setup: |fs| {
                let b1 = file(fs, "msgs/1.blk");
                let r = records_of(&b1).into_iter().find(|r| r.2 == 5).expect("5");
                let mut b = file(fs, "msgs/3.blk");
                b.extend_from_slice(&b1[r.0..r.0 + r.1]);
                put(fs, "msgs/3.blk", &b);
            },
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 25, 1, 25)?;
                (rep.out_of_order.len() == 1 && rep.out_of_order[0].file == "msgs/3.blk")
                    .then_some(())
                    .ok_or(format!("{:?}", rep.out_of_order))?;
                opened(&g.strict)?;
                Ok(())
            },
        },
        Row {
            name: "index.db is a directory",
            setup: |fs| {
                fs.remove_file("index.db").expect("rm");
                robust::mkdirs(fs, "index.db");
            },
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 25, 1, 25)?;
                rep.index_rejected.as_ref().ok_or("not rejected")?;
                opened(&g.strict)?;
                g.verify.as_ref().map(|_| ()).map_err(|e| e.to_string())
            },
        },
        Row {
            name: "msgs is a file",
            setup: |fs| {
                fs.remove_dir_all("msgs").expect("rm");
                put(fs, "msgs", b"not a directory");
            },
            check: |_, g| {
                for r in [&g.tolerant, &g.strict] {
                    match r {
                        Err(Error::Io { path, .. }) if path == "msgs" => {}
                        other => {
                            return Err(format!(
                                "expected Io on msgs, got {:?}",
                                other.as_ref().err()
                            ))
                        }
                    }
                }
                matches!(&g.verify, Err(Error::Io { .. }))
                    .then_some(())
                    .ok_or("verify".into())
            },
        },
    ]
}

/// A purge interrupted at each of its steps.
fn half_done_purge() -> Vec<Row> {
    vec![
        Row {
            name: "half-done purge: purge.new/4.blk holds its floor record",
            setup: |fs| put(fs, "purge.new/4.blk", &purge_block(4, 25)),
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 0, 26, 25)?;
                rep.purge_completed.then_some(()).ok_or("not completed")?;
                let (st, _) = opened(&g.strict)?;
                state_is(st, 0, 26, 25)?;
                let v = g.verify.as_ref().map_err(|e| e.to_string())?;
                v.interrupted_purge
                    .as_ref()
                    .ok_or("verify: no interrupted purge")?;
                Ok(())
            },
        },
        Row {
            name: "half-done purge: purge.new/4.blk torn (header only)",
            setup: |fs| put(fs, "purge.new/4.blk", &purge_block(4, 25)[..16]),
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 25, 1, 25)?;
                rep.purge_rolled_back
                    .then_some(())
                    .ok_or("not rolled back")?;
                opened(&g.strict)?;
                Ok(())
            },
        },
        Row {
            name: "half-done purge: msgs renamed to purge.old, no purge.new",
            setup: |fs| fs.rename("msgs", "purge.old").expect("mv"),
            check: |_, g| {
                let (st, rep) = opened(&g.tolerant)?;
                state_is(st, 25, 1, 25)?;
                rep.purge_rolled_back
                    .then_some(())
                    .ok_or("not rolled back")?;
                opened(&g.strict)?;
                Ok(())
            },
        },
        Row {
            name: "half-done purge: swap done, purge.old left beside msgs",
            setup: |fs| {
                fs.rename("msgs", "purge.old").expect("mv");
                put(fs, "msgs/4.blk", &purge_block(4, 25));
            },
            check: |_, g| {
                let (st, _) = opened(&g.tolerant)?;
                state_is(st, 0, 26, 25)?;
                opened(&g.strict)?;
                Ok(())
            },
        },
    ]
}

/// The state after an unclean stop: `index.db` is written only by `close()`/`checkpoint()`.
fn no_index(fs: &FaultFs) {
    fs.remove_file("index.db").expect("rm index.db");
}

/// Offset of the record of `seq` in block `p` of the (undamaged, deterministic) base store.
fn base_off(p: &str, seq: u64) -> u64 {
    rec_off(&file(&base(false), p), seq) as u64
}

/// What a purge writes into `purge.new/<index>.blk`: a header and one floor record.
fn purge_block(index: u64, floor: u64) -> Vec<u8> {
    let mut b = record::block_header(index).to_vec();
    record::encode(&mut b, Kind::Floor, 0, floor, 77, b"", b"", b"");
    b
}

fn describe(r: &Result<(StreamState, RecoveryReport), Error>, read_err: &Option<Error>) -> String {
    let mut s = describe_open(r);
    if let Some(e) = read_err {
        let _ = write!(s, "; then reads fail: {e}");
    }
    s
}

fn describe_open(r: &Result<(StreamState, RecoveryReport), Error>) -> String {
    match r {
        Err(e @ Error::Corrupt { .. }) => format!("refused: {e}"),
        Err(e) => format!("refused (Io): {e}"),
        Ok((st, rep)) => {
            let mut s = format!(
                "opens, msgs={} first={} last={}",
                st.msgs, st.first_seq, st.last_seq
            );
            if !rep.lost.is_empty() {
                let l: Vec<String> = rep
                    .lost
                    .iter()
                    .map(|r| format!("{}..={}", r.first, r.last))
                    .collect();
                let _ = write!(s, "; lost {}", l.join(","));
            }
            for c in &rep.cuts {
                let _ = write!(s, "; cut {} at {} ({})", c.file, c.offset, c.reason);
            }
            for k in &rep.skipped {
                let _ = write!(s, "; skipped {}@{} ({})", k.file, k.offset, k.reason);
            }
            if !rep.removed_blank.is_empty() {
                let _ = write!(s, "; removed blank {}", rep.removed_blank.join(","));
            }
            if !rep.ignored.is_empty() {
                let _ = write!(s, "; ignored {}", rep.ignored.len());
            }
            if !rep.out_of_order.is_empty() {
                let _ = write!(s, "; out of order {}", rep.out_of_order.len());
            }
            if let Some(w) = &rep.index_rejected {
                let _ = write!(s, "; index.db rejected ({w})");
            }
            if rep.purge_completed {
                s.push_str("; purge completed");
            }
            if rep.purge_rolled_back {
                s.push_str("; purge rolled back");
            }
            s
        }
    }
}

fn describe_verify(v: &Result<VerifyReport, Error>) -> String {
    match v {
        Err(e) => format!("error: {e}"),
        Ok(v) if v.is_clean() => format!("clean (index {:?}, {} stray)", v.index, v.stray.len()),
        Ok(v) => {
            let p: Vec<String> = v
                .problems
                .iter()
                .map(|p| format!("{}@{}: {}", p.file, p.offset, p.what))
                .collect();
            let l: Vec<String> = v
                .lost
                .iter()
                .map(|r| format!("{}..={}", r.first, r.last))
                .collect();
            format!("problems [{}] lost [{}]", p.join("; "), l.join(","))
        }
    }
}

#[test]
fn hostile_and_damaged_directories() {
    let mut failures = Vec::new();
    let mut table =
        String::from("| row | open (tolerant) | open (strict) | verify |\n|---|---|---|---|\n");
    let rows = rows();
    for row in &rows {
        let fs = base(true);
        (row.setup)(&fs);
        settle(&fs);
        let got = run(&fs);
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} |",
            row.name,
            describe(&got.tolerant, &got.read_err[0]),
            describe(&got.strict, &got.read_err[1]),
            describe_verify(&got.verify)
        );
        if let Err(e) = (row.check)(&fs, &got) {
            failures.push(format!("{}: {e}", row.name));
        }
    }
    println!("{table}");
    println!("{} rows", rows.len());
    assert!(rows.len() >= 20);
    assert!(
        failures.is_empty(),
        "rows not as documented:\n{}",
        failures.join("\n")
    );
}

/// Snapshot/round-trip sanity of the base: the index of `base(true)` is used as is.
#[test]
fn base_store_opens_from_its_index() {
    let fs = base(true);
    let s = open(&copy_of(&fs), RecoveryMode::Strict).expect("open");
    assert!(s.recovery_report().used_index, "{:?}", s.recovery_report());
    assert_eq!(s.state().msgs, 25);
    Snapshot::decode("index.db", &file(&fs, "index.db")).expect("index decodes");
    assert_eq!(
        fs.list_tree(),
        [
            "index.db",
            "msgs/",
            "msgs/1.blk",
            "msgs/2.blk",
            "msgs/3.blk"
        ]
    );
}

// ------------------------------------------------------------------ regression tests

/// Found by the `recover_dir` fuzz target: with a usable index.db, open never reads block
/// headers (`load_index` checks each block's length and last crc only). A block whose header
/// is damaged opens, takes reads and appends, and after the next unclean stop (index.db stale)
/// the rebuild refuses the whole store: `corrupt msgs/1.blk at offset 0: bad magic`.
/// Open must judge a directory the same way with or without index.db.
#[test]
fn index_db_hides_a_bad_block_header() {
    let fs = base(true);
    let mut b = file(&fs, "msgs/1.blk");
    b[0] ^= 1; // "SQBK" -> "RQBK"
    put(&fs, "msgs/1.blk", &b);
    settle(&fs);
    let with_index = open(&copy_of(&fs), RecoveryMode::TolerateCorruptTail).map(|s| s.state());
    no_index(&fs);
    settle(&fs);
    let without = open(&copy_of(&fs), RecoveryMode::TolerateCorruptTail).map(|s| s.state());
    match (&with_index, &without) {
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        _ => panic!("open with index.db: {with_index:?}; without: {without:?}"),
    }
}

/// A block whose records are all valid and checksummed, with sequences far apart: what
/// recovery does with a forged (crc-valid) record must be bounded in time and never overflow.
fn forged(seqs: &[(Kind, u64)]) -> FaultFs {
    let fs = FaultFs::new(Model::Posix);
    let mut b = record::block_header(1).to_vec();
    for &(kind, seq) in seqs {
        let (subj, body): (&[u8], &[u8]) = if kind == Kind::Msg {
            (b"s", b"forged")
        } else {
            (b"", b"")
        };
        record::encode(&mut b, kind, 0, seq, 1, subj, b"", body);
    }
    put(&fs, "msgs/1.blk", &b);
    settle(&fs);
    fs
}

/// Runs `f` on a thread and fails if it takes longer than `secs` (a hang) or panics.
fn bounded<T: Send + 'static>(what: &str, secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => panic!("{what} panicked: {}", robust::panic_text(&*p)),
        Err(_) => panic!("{what} did not finish in {secs} s (the thread is left running)"),
    }
}

/// Found by the `recover_dir` fuzz target: `lost_ranges` (store.rs) walks every sequence of
/// every gap between message records, so two crc-valid records at 1 and 2^62 make open (and
/// verify) loop ~2^62 times. Expected: open returns at once, reporting 2..2^62-1 lost (or
/// refusing the absurd sequence as damage).
#[test]
fn forged_sequences_far_apart_do_not_hang_recovery() {
    let fs = forged(&[(Kind::Msg, 1), (Kind::Msg, 1 << 62)]);
    let v = copy_of(&fs);
    bounded("verify", 10, move || {
        let _ = verify(&v);
    });
    bounded("open", 10, move || {
        let _ = open(&fs, RecoveryMode::TolerateCorruptTail).map(|s| s.state());
    });
}

/// Found by the `recover_dir` fuzz target: a crc-valid floor record for sequence 2^64-1 makes
/// open panic (`floor + 1` overflows in `lost_ranges`, and `last_seq + 1` in
/// `set_first_from`). Sequences are documented as at most 2^63-1: a record above that is
/// damage, to be refused (Corrupt) or cut, never a panic or a wrapped sequence.
#[test]
fn forged_sequences_near_the_top_are_refused_not_wrapped() {
    for seqs in [
        vec![(Kind::Msg, 1), (Kind::Floor, u64::MAX)],
        vec![(Kind::Msg, u64::MAX)],
        vec![(Kind::Msg, 1u64 << 63)],
        vec![(Kind::Tombstone, u64::MAX)],
    ] {
        let fs = forged(&seqs);
        let what = format!("open with {seqs:?}");
        let r = bounded(&what.clone(), 10, move || {
            open(&fs, RecoveryMode::TolerateCorruptTail).map(|mut s| {
                let st = s.state();
                (st, s.append("next", b"", b"x"))
            })
        });
        match r {
            Err(Error::Corrupt { .. }) => {}
            Ok((st, next)) => {
                assert!(
                    st.last_seq <= u64::MAX >> 1,
                    "{what}: last_seq {} accepted",
                    st.last_seq
                );
                if let Ok(seq) = next {
                    assert_eq!(seq, st.last_seq + 1, "{what}");
                }
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// Found by the `recover_dir` fuzz target: index.db is trusted for every field open does not
/// cross-check against the blocks (first_seq, first_ts, floor, per-subject counters), so a
/// forged one with a valid crc gives a wrong state: here first_seq=0 with 25 messages stored.
/// Expected: such an index.db is rejected (open rebuilds) or the field is corrected.
#[test]
fn forged_index_db_is_cross_checked() {
    let fs = base(true);
    let mut b = file(&fs, "index.db");
    b[8..16].copy_from_slice(&0u64.to_le_bytes()); // first_seq
    robust::fix_index_crc(&mut b);
    put(&fs, "index.db", &b);
    settle(&fs);
    let s = open(&fs, RecoveryMode::TolerateCorruptTail).expect("open");
    let st = s.state();
    assert_eq!(
        (st.msgs, st.first_seq, st.last_seq),
        (25, 1, 25),
        "{st:?}; report {:?}",
        s.recovery_report()
    );
}

/// Found by the `recover_dir` fuzz target: a crc-valid floor record above a later truncate
/// record (the template's `truncate(28)` after a forged `floor(4095)`) makes recovery set
/// last_seq from the truncate, below the floor. The store opens at last = 2 with the floor at
/// 10, acknowledges seq 3 (Always), and the next open hides it under the floor: an
/// acknowledged message is gone. Expected: recovery never leaves last_seq below its floor (or
/// refuses such a block as Corrupt).
#[test]
fn forged_floor_above_a_truncate_does_not_eat_acked_messages() {
    let fs = forged(&[
        (Kind::Msg, 1),
        (Kind::Msg, 2),
        (Kind::Floor, 10),
        (Kind::Truncate, 2),
    ]);
    match open(&fs, RecoveryMode::TolerateCorruptTail) {
        Err(Error::Corrupt { .. }) => {}
        Err(e) => panic!("{e}"),
        Ok(mut s) => {
            let seq = s.append("s", b"", b"acked").expect("append");
            drop(s);
            let mut s = open(&fs, RecoveryMode::TolerateCorruptTail).expect("reopen");
            let got = s.get(seq);
            assert!(
                got.is_ok(),
                "acked seq {seq} gone after reopen: {got:?}; {:?}",
                s.state()
            );
        }
    }
}

/// `verify` says it does open's checks read-only, but refuses a directory open recovers: a
/// purge interrupted right after `rename msgs -> purge.old` (no msgs/, no purge.new/) opens
/// fine (purge.old is renamed back) while verify errors "not a seqstore directory (no msgs/)".
#[test]
fn verify_reports_a_purge_interrupted_after_the_first_rename() {
    let fs = base(true);
    fs.rename("msgs", "purge.old").expect("mv");
    settle(&fs);
    let st = open(&copy_of(&fs), RecoveryMode::Strict)
        .expect("open recovers it")
        .state();
    assert_eq!(st.msgs, 25);
    let v = verify(&fs).unwrap_or_else(|e| panic!("verify refuses what open recovers: {e}"));
    assert!(v.interrupted_purge.is_some(), "{v:?}");
}

// ------------------------------------------------------------------ sandbox (host-fs)

mod sandbox {
    use super::*;
    use seqstore_fs::HostFs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::{Path, PathBuf};

    /// A tempdir with `root/` (the store) and `outside/` (a secret file, a directory with a
    /// file); returns it and a listing of everything outside with contents.
    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().join("root");
        let out = t.path().join("outside");
        std::fs::create_dir_all(out.join("dir")).expect("mkdir");
        std::fs::write(out.join("secret"), b"do not touch").expect("write");
        std::fs::write(out.join("file"), b"SQBK-looking bait").expect("write");
        std::fs::write(out.join("dir/inner"), b"inner").expect("write");
        std::fs::create_dir_all(&root).expect("mkdir");
        (t, root, out)
    }

    fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read_dir") {
                let p = e.expect("entry").path();
                let meta = std::fs::symlink_metadata(&p).expect("meta");
                let name = p.strip_prefix(dir).expect("prefix").display().to_string();
                if meta.is_dir() {
                    out.push((format!("{name}/"), Vec::new()));
                    stack.push(p);
                } else {
                    out.push((name, std::fs::read(&p).unwrap_or_default()));
                }
            }
        }
        out.sort();
        out
    }

    fn host_store(root: &Path) -> Result<Store<HostFs>, Error> {
        let fs = HostFs::open(root).expect("root");
        Store::builder(fs)
            .config(cfg(RecoveryMode::TolerateCorruptTail))
            .clock(ManualClock::new(1))
            .open()
    }

    /// A store with 3 messages, closed.
    fn filled(root: &Path) {
        let mut s = host_store(root).expect("open");
        for i in 0..3 {
            s.append("s", b"", &seqstore_crash_matrix::payload(i, 10))
                .expect("append");
        }
        s.close().expect("close");
    }

    /// Each escape attempt: the store gives a typed error or treats the link as a stray, and
    /// nothing outside the root is read into the store, written, created or removed.
    #[test]
    fn symlinks_out_of_the_root_are_never_followed() {
        type Case = (
            &'static str,
            fn(&Path, &Path),
            fn(&Path) -> Result<String, String>,
        );
        let cases: Vec<Case> = vec![
            (
                "msgs -> /outside/dir (no store yet)",
                |root, out| symlink(out.join("dir"), root.join("msgs")).unwrap(),
                |root| match host_store(root) {
                    Err(e @ Error::Io { .. }) => Ok(format!("refused: {e}")),
                    Err(e) => Err(format!("unexpected {e:?}")),
                    Ok(mut s) => s
                        .append("s", b"", b"x")
                        .map(|_| "opened (link treated as stray)".into())
                        .map_err(|e| e.to_string()),
                },
            ),
            (
                "msgs/5.blk -> /outside/file",
                |root, out| {
                    filled(root);
                    std::fs::remove_file(root.join("index.db")).unwrap();
                    symlink(out.join("file"), root.join("msgs/5.blk")).unwrap();
                },
                |root| match host_store(root) {
                    Err(e @ Error::Io { .. }) => Ok(format!("refused: {e}")),
                    Err(e) => Err(format!("unexpected {e:?}")),
                    Ok(mut s) => {
                        let st = s.state();
                        s.append("s", b"", b"x").map_err(|e| e.to_string())?;
                        Ok(format!("opened {st:?}"))
                    }
                },
            ),
            (
                "index.db -> /outside/secret",
                |root, out| {
                    filled(root);
                    std::fs::remove_file(root.join("index.db")).unwrap();
                    symlink(out.join("secret"), root.join("index.db")).unwrap();
                },
                |root| {
                    let s = host_store(root).map_err(|e| e.to_string())?;
                    let rep = s.recovery_report().clone();
                    if s.state().msgs != 3 {
                        return Err(format!("state {:?}", s.state()));
                    }
                    // close replaces the link itself (rename does not follow it)
                    s.close().map_err(|e| e.to_string())?;
                    Ok(format!("opened, index rejected: {:?}", rep.index_rejected))
                },
            ),
            (
                "index.db.tmp -> /outside/secret, then close()",
                |root, out| {
                    filled(root);
                    symlink(out.join("secret"), root.join("index.db.tmp")).unwrap();
                },
                |root| {
                    let s = host_store(root).map_err(|e| e.to_string())?;
                    match s.close() {
                        Err(e @ Error::Io { .. }) => Ok(format!("close refused: {e}")),
                        Err(e) => Err(format!("unexpected {e:?}")),
                        Ok(()) => Ok("closed".into()),
                    }
                },
            ),
            (
                "purge.old -> /outside/dir, then purge()",
                |root, out| {
                    filled(root);
                    symlink(out.join("dir"), root.join("purge.old")).unwrap();
                },
                |root| {
                    let mut s = host_store(root).map_err(|e| e.to_string())?;
                    match s.purge() {
                        Ok(n) => Ok(format!("purged {n}")),
                        Err(e @ Error::Io { .. }) => Ok(format!("purge refused: {e}")),
                        Err(e) => Err(format!("unexpected {e:?}")),
                    }
                },
            ),
            (
                "purge.new -> /outside/dir (a purge 'in progress')",
                |root, out| {
                    filled(root);
                    symlink(out.join("dir"), root.join("purge.new")).unwrap();
                },
                |root| match host_store(root) {
                    Ok(s) => Ok(format!("opened {:?}", s.state())),
                    Err(e @ Error::Io { .. }) => Ok(format!("refused: {e}")),
                    Err(e) => Err(format!("unexpected {e:?}")),
                },
            ),
        ];
        for (name, setup, run) in cases {
            let (_t, root, out) = tree();
            setup(&root, &out);
            let before = snapshot(&out);
            let outcome = run(&root).unwrap_or_else(|e| panic!("{name}: {e}"));
            let v = verify(&HostFs::open(&root).expect("root")).map(|r| r.stray);
            assert_eq!(snapshot(&out), before, "{name}: something outside changed");
            println!("| {name} | {outcome} | verify: {v:?} |");
        }
    }

    /// chmod 000 on a block: as root (these tests' usual user) permissions do not deny reads,
    /// so the store opens normally; as another user open must refuse with `Io` naming the file.
    #[test]
    fn unreadable_block() {
        let (_t, root, _) = tree();
        filled(&root);
        std::fs::remove_file(root.join("index.db")).unwrap();
        let blk = root.join("msgs/1.blk");
        std::fs::set_permissions(&blk, std::fs::Permissions::from_mode(0o000)).unwrap();
        let root_user = std::fs::File::open(&blk).is_ok();
        let r = host_store(&root).map(|s| s.state());
        std::fs::set_permissions(&blk, std::fs::Permissions::from_mode(0o644)).unwrap();
        if root_user {
            println!("running as root: mode 000 does not deny reads; the store opens");
            assert_eq!(r.expect("opens as root").msgs, 3);
        } else {
            match r {
                Err(Error::Io { path, source, .. }) => {
                    assert_eq!(path, "msgs/1.blk");
                    assert_eq!(source.kind(), std::io::ErrorKind::PermissionDenied);
                }
                other => panic!("expected Io PermissionDenied on msgs/1.blk, got {other:?}"),
            }
        }
    }
}
