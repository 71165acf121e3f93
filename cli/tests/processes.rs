//! Several processes on one store, as scripts run them: `seqstore append` from parallel
//! writers, purges, deletes and `verify` beside them, appends through the wasm guest
//! (`--guest`) and through the `seqstore-guest` WASI command under plain wasmtime-wasi (no
//! file locks: its marker-file protocol), all at once on one real directory. One process owns a store from open to
//! close (the store's lock), so the commands run one after another and every one of them
//! either gets a sequence that is really its message's or fails and changes nothing.
//!
//! The workload is random from a seed (printed; `SEQSTORE_SEED` replays the same commands,
//! though not the same interleaving, which is the operating system's). The negative control
//! runs the same writers with the lock ablated (`--ablation no-store-lock`, the crash lab's
//! build) and must find acknowledged messages lost or overwritten.
//!
//! `kill -9` of the lock holder: the kernel releases the lock with the process, so another
//! process opens the store at once and recovers it. `kill -9` of a writer appending to a closed
//! stream: the next open reads only the tail and equals a full rebuild.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The seed of this run: `SEQSTORE_SEED`, else `default`.
fn seed(default: u64) -> u64 {
    std::env::var("SEQSTORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

// the workspace's one seeded generator (splitmix64)
use seqstore_fault_fs::Rng;

fn run(dir: &Path, args: &[&str]) -> Output {
    common::seqstore(dir, args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

/// What one append command reported: its message, and the sequence it printed (`None`: the
/// command failed, with its stderr).
#[derive(Debug)]
struct Acked {
    subject: String,
    payload: String,
    seq: Result<u64, String>,
}

/// The writer's `extra` that runs its commands as the `seqstore-guest` WASI command under
/// plain wasmtime-wasi (what a stock WASI runtime gives it: a preopened directory, no file
/// locks), in this process.
const WASI: &str = "wasi";

/// Runs the `seqstore-guest` WASI command on `dir` preopened as `/data`.
fn wasi_command(dir: &Path, args: &[&str]) -> seqstore_wasm::CommandOutput {
    let opts = seqstore_wasm::GuestOptions {
        call_timeout: Some(Duration::from_secs(300)),
        ..seqstore_wasm::GuestOptions::default()
    };
    seqstore_wasm::run_guest_command(dir, args, &opts).expect("run the WASI command")
}

/// A writer: `count` appends of random messages on subjects `w{id}.*`, each its own process.
fn writer(dir: &Path, id: usize, seed: u64, count: usize, extra: &[&str]) -> Vec<Acked> {
    let mut rng = Rng::new(seed ^ (id as u64 + 1).wrapping_mul(0x1000_0001));
    (0..count)
        .map(|i| {
            let subject = format!("w{id}.{}", rng.below(4));
            let pad: String = (0..rng.below(200))
                .map(|_| (b'a' + rng.below(26) as u8) as char)
                .collect();
            let payload = format!("w{id}-{i}-{pad}");
            let mut args = vec!["append", "--subject", &subject, "--data", &payload];
            args.extend_from_slice(&["--wait", "120s", "--json"]);
            let (ok, stdout, stderr) = if extra == [WASI] {
                let out = wasi_command(dir, &args);
                (out.code == 0, out.stdout, out.stderr)
            } else {
                args.extend_from_slice(extra);
                let out = run(dir, &args);
                (out.status.success(), out.stdout, out.stderr)
            };
            let seq = if ok {
                let v: serde_json::Value = serde_json::from_slice(&stdout).expect("append's JSON");
                Ok(v["seq"].as_u64().expect("a sequence"))
            } else {
                Err(text(&stderr))
            };
            Acked {
                subject,
                payload,
                seq,
            }
        })
        .collect()
}

/// A process that keeps changing the stream beside the writers without touching their
/// messages: appends on `junk.*`, filtered purges and deletes of them, and `verify`. Returns
/// the failures it saw.
fn churner(dir: &Path, seed: u64, rounds: usize) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0xc0ffee);
    let mut failures = Vec::new();
    let mut check = |what: &str, out: Output| {
        if !out.status.success() {
            failures.push(format!("{what}: {}", text(&out.stderr)));
        }
        out
    };
    for _ in 0..rounds {
        let wait = ["--wait", "120s"];
        match rng.below(4) {
            0 => {
                check(
                    "purge",
                    run(dir, &[&["purge", "--filter", "junk.>"][..], &wait].concat()),
                );
            }
            1 => {
                let out = check(
                    "append junk",
                    run(
                        dir,
                        &[&["append", "--subject", "junk.a", "--data", "j"][..], &wait].concat(),
                    ),
                );
                if out.status.success() {
                    let seq = text(&out.stdout);
                    check("delete", run(dir, &[&["delete", &seq][..], &wait].concat()));
                }
            }
            2 => {
                let out = check("verify", run(dir, &[&["verify"][..], &wait].concat()));
                let _ = out;
            }
            _ => {
                check(
                    "append junk",
                    run(
                        dir,
                        &[&["append", "--subject", "junk.b", "--data", "j"][..], &wait].concat(),
                    ),
                );
            }
        }
    }
    failures
}

/// The stream's messages, by sequence: `(subject, payload)` from `dump --json`.
fn dump(dir: &Path) -> BTreeMap<u64, (String, String)> {
    let out = run(dir, &["dump", "--json"]);
    assert!(out.status.success(), "dump: {}", text(&out.stderr));
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a message's JSON");
            (
                v["seq"].as_u64().expect("seq"),
                (
                    v["subject"].as_str().expect("subject").to_string(),
                    v["payload"].as_str().expect("a text payload").to_string(),
                ),
            )
        })
        .collect()
}

/// Everything wrong with the store in `dir` after the writers' `acked`: failed appends,
/// sequences acknowledged twice, acknowledged messages missing or different, writer
/// messages nobody acknowledged, and a failing `verify`.
fn violations(dir: &Path, acked: &[Acked], other_failures: &[String]) -> Vec<String> {
    let mut out: Vec<String> = other_failures.to_vec();
    let mut by_seq: BTreeMap<u64, &Acked> = BTreeMap::new();
    for a in acked {
        match &a.seq {
            Err(e) => out.push(format!("append {:?} failed: {e}", a.payload)),
            Ok(seq) => {
                if let Some(first) = by_seq.insert(*seq, a) {
                    out.push(format!(
                        "sequence {seq} acknowledged twice: {:?} and {:?}",
                        first.payload, a.payload
                    ));
                }
            }
        }
    }
    let verify = run(dir, &["verify"]);
    if !verify.status.success() {
        out.push(format!(
            "verify: {} {}",
            text(&verify.stdout),
            text(&verify.stderr)
        ));
        return out;
    }
    let stored = dump(dir);
    for (seq, a) in &by_seq {
        match stored.get(seq) {
            Some((s, p)) if *s == a.subject && *p == a.payload => {}
            Some((s, p)) => out.push(format!(
                "sequence {seq} holds {s} {p:?}, acknowledged for {} {:?}",
                a.subject, a.payload
            )),
            None => out.push(format!(
                "acknowledged sequence {seq} ({:?}) is gone",
                a.payload
            )),
        }
    }
    let acked_seqs: BTreeSet<u64> = by_seq.keys().copied().collect();
    for (seq, (s, p)) in &stored {
        if s.starts_with('w') && !acked_seqs.contains(seq) {
            out.push(format!("sequence {seq} ({s} {p:?}) was never acknowledged"));
        }
    }
    out
}

/// Writers, a churner and a guest writer at once, each command its own process: nothing
/// acknowledged is lost, duplicated or changed, and the store verifies.
#[test]
fn parallel_processes_never_corrupt_the_store() {
    let seed = seed(20261203);
    println!("seed {seed} (SEQSTORE_SEED={seed} replays the commands)");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    // the store exists before the churner's first verify (which never creates one)
    common::ok(
        &tmp.path().join("store"),
        &["append", "--subject", "setup", "--data", "s"],
    );
    let started = Instant::now();
    let (acked, failures) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..3)
            .map(|id| {
                s.spawn({
                    let dir = dir.clone();
                    move || writer(&dir, id, seed, 40, &[])
                })
            })
            .collect();
        let guest = s.spawn({
            let dir = dir.clone();
            move || writer(&dir, 8, seed, 8, &["--guest"])
        });
        let wasi = s.spawn({
            let dir = dir.clone();
            move || writer(&dir, 9, seed, 8, &[WASI])
        });
        let churn = s.spawn({
            let dir = dir.clone();
            move || churner(&dir, seed, 20)
        });
        let mut acked: Vec<Acked> = writers
            .into_iter()
            .flat_map(|w| w.join().expect("writer"))
            .collect();
        acked.extend(guest.join().expect("guest writer"));
        acked.extend(wasi.join().expect("WASI writer"));
        (acked, churn.join().expect("churner"))
    });
    let v = violations(&dir, &acked, &failures);
    println!(
        "{} appends from 5 writers (3 native, --guest, WASI) beside 20 churn commands in {:.1} s",
        acked.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(v.is_empty(), "seed {seed}: {} violations: {v:#?}", v.len());
}

/// The negative control: the same native writers with the lock ablated lose or overwrite
/// acknowledged messages (or corrupt the store). Rounds of fresh directories until one
/// shows it, at most five.
#[test]
fn without_the_lock_parallel_writers_corrupt_the_store() {
    let seed = seed(20261203);
    println!("seed {seed}");
    let ablated = ["--ablation", "no-store-lock"];
    for round in 0..5u64 {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("store");
        let acked: Vec<Acked> = std::thread::scope(|s| {
            let writers: Vec<_> = (0..4)
                .map(|id| {
                    s.spawn({
                        let dir = dir.clone();
                        move || writer(&dir, id, seed + round, 50, &ablated)
                    })
                })
                .collect();
            writers
                .into_iter()
                .flat_map(|w| w.join().expect("writer"))
                .collect()
        });
        let v = violations(&dir, &acked, &[]);
        // failed appends are not enough: acknowledged data must be shown lost or damaged
        let lost: Vec<&String> = v.iter().filter(|m| !m.starts_with("append ")).collect();
        println!(
            "round {round}: without the lock, {} failed appends, {} acknowledged messages \
             lost, duplicated or changed (or verify failed), e.g. {:?}",
            v.len() - lost.len(),
            lost.len(),
            &lost[..lost.len().min(3)]
        );
        if !lost.is_empty() {
            return;
        }
    }
    panic!("seed {seed}: five rounds of writers without the lock found nothing: the test cannot see what the lock prevents");
}

/// `kill -9` of the process holding the store mid-append: the kernel releases its lock, so
/// the next open (another process, no wait) succeeds at once and recovers.
#[test]
fn a_killed_holder_leaves_no_lock_behind() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    common::ok(dir, &["append", "--subject", "a", "--data", "first"]);
    // a holder that keeps appending from standard input until it is killed: the payload
    // read blocks with the store open and locked
    let mut holder = Command::new(env!("CARGO_BIN_EXE_seqstore"))
        .args(["append", "--subject", "a", "--dir"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the holder");
    // wait until it holds the lock: a no-wait open is refused
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = run(dir, &["state", "--wait", "0"]);
        if !out.status.success() {
            let err = text(&out.stderr);
            assert!(
                err.contains("in use") && err.contains("locked by process"),
                "{err}"
            );
            assert!(
                err.contains(&holder.id().to_string()),
                "names the holder's pid: {err}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the holder never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    holder.kill().expect("kill -9");
    holder.wait().expect("reap");
    let out = run(dir, &["state", "--wait", "0", "--json"]);
    assert!(out.status.success(), "after kill -9: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["msgs"].as_u64(), Some(1));
    assert!(run(dir, &["verify"]).status.success());
}

/// The environment that makes this test binary the writer of
/// `a_killed_writer_reopens_from_its_tail_as_a_rebuild_would`: the store's directory.
const WRITER_DIR: &str = "SEQSTORE_TEST_TAIL_WRITER_DIR";

/// The payload of `seq`, as the writer appends it and the checks expect it.
fn tail_payload(seq: u64) -> Vec<u8> {
    format!("tail-{seq:08}-{}", "x".repeat((seq % 97) as usize)).into_bytes()
}

/// The writer (this binary again, under [`WRITER_DIR`]): appends durably (`SyncPolicy::Always`)
/// on five subjects until it is killed, a line `acked SEQ` on stdout after each append.
fn tail_writer(dir: &str) {
    use std::io::Write;
    let fs = seqstore_fs::HostFs::open(dir).expect("writer: open dir");
    let mut s = seqstore_core::Store::open(fs, seqstore_core::Config::default()).expect("open");
    let mut out = std::io::stdout().lock();
    for _ in 0..1_000_000 {
        let next = s.state().last_seq + 1;
        let subject = format!("tail.{}", next % 5);
        let seq = s
            .append(&subject, b"", &tail_payload(next))
            .expect("append");
        assert_eq!(seq, next);
        writeln!(out, "acked {seq}").expect("stdout");
        out.flush().expect("stdout");
    }
}

/// Bytes this thread has read through system calls so far (`rchar` of /proc/thread-self/io:
/// every read, whatever served it), so that a store opened on this thread counts its own.
fn thread_read_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").expect("/proc/thread-self/io");
    (io.lines())
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("rchar")
}

/// What an open of a store found: its state, its recovery report, the bytes the open read,
/// and every stored message as (sequence, subject, payload).
struct Opened {
    state: seqstore_core::StreamState,
    report: seqstore_core::RecoveryReport,
    read: u64,
    msgs: Vec<(u64, String, Vec<u8>)>,
}

/// The store on `dir`, opened on this thread (so that its reads are counted), and read whole.
/// A rebuild too scans on this thread alone (`rebuild_threads` 1): its workers' reads would be
/// counted on theirs.
fn open_and_read(dir: &Path) -> Opened {
    let before = thread_read_bytes();
    let fs = seqstore_fs::HostFs::open(dir).expect("open dir");
    let cfg = seqstore_core::Config::default().with_rebuild_threads(1);
    let mut s = seqstore_core::Store::open(fs, cfg).expect("open");
    let read = thread_read_bytes() - before;
    let st = s.state();
    let msgs = (st.first_seq..=st.last_seq)
        .filter_map(|q| s.get(q).ok())
        .map(|m| (m.seq, m.subject, m.payload))
        .collect();
    Opened {
        state: st,
        report: s.recovery_report().clone(),
        read,
        msgs,
    }
}

/// Copies the files of `from` (the store's tree: files and directories) into `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().expect("type").is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}

/// `kill -9` of a process appending durably, at a random point, on a stream closed first (so
/// `index.db` vouches for its blocks): the next open takes the tail path, reads the tail and
/// not the closed stream (counted by the kernel, not by the store), and gives exactly what a
/// full rebuild of the same directory gives (`index.db` removed from a copy), every
/// acknowledged message included. Random from the seed: the closed stream's length, when the
/// writer is killed, and so how much of a block the tail is and where the kill lands.
#[test]
fn a_killed_writer_reopens_from_its_tail_as_a_rebuild_would() {
    if let Ok(dir) = std::env::var(WRITER_DIR) {
        return tail_writer(&dir);
    }
    let seed = seed(20261207);
    println!("seed {seed} (SEQSTORE_SEED={seed} replays the kill points)");
    let mut rng = Rng::new(seed);
    for round in 0..6 {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (dir, copy) = (tmp.path().join("store"), tmp.path().join("rebuilt"));
        std::fs::create_dir(&dir).expect("mkdir");
        // the closed stream: about 6 to 20 MiB, so that it spans blocks
        let closed = 40_000 + rng.below(100_000);
        let fs = seqstore_fs::HostFs::open(&dir).expect("open dir");
        let cfg = seqstore_core::Config::default().with_sync(seqstore_core::SyncPolicy::Never);
        let mut s = seqstore_core::Store::open(fs, cfg).expect("open");
        for seq in 1..=closed {
            s.append(&format!("tail.{}", seq % 5), b"", &tail_payload(seq))
                .expect("append");
        }
        s.close().expect("close");
        let acks = 1 + rng.below(400);
        let mut writer = Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--exact",
                "a_killed_writer_reopens_from_its_tail_as_a_rebuild_would",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WRITER_DIR, &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the writer");
        // its stderr, drained beside it (a full pipe would stop it), for a writer that ends
        let stderr = writer.stderr.take().expect("stderr");
        let errs = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stderr), &mut s);
            s
        });
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(
            writer.stdout.take().expect("stdout"),
        ));
        let (mut seen, mut acked) = (0, 0);
        let mut out = Vec::new();
        while seen < acks {
            let Some(Ok(line)) = lines.next() else {
                let status = writer.wait().expect("reap");
                let errs = errs.join().unwrap_or_default();
                panic!(
                    "seed {seed} round {round}: the writer ended after {seen} of {acks} acks \
                     ({status}); stdout:\n{}\nstderr:\n{errs}",
                    out.join("\n")
                );
            };
            if let Some(q) = line.strip_prefix("acked ") {
                (seen, acked) = (seen + 1, q.parse().expect("seq"));
            } else {
                out.push(line);
            }
        }
        writer.kill().expect("kill -9");
        writer.wait().expect("reap");
        drop(errs);
        copy_tree(&dir, &copy);
        std::fs::remove_file(copy.join("index.db")).expect("remove the copy's index.db");
        let Opened {
            state: st,
            report: rep,
            read,
            msgs,
        } = open_and_read(&dir);
        let Opened {
            state: st_rb,
            report: rep_rb,
            read: read_rb,
            msgs: msgs_rb,
        } = open_and_read(&copy);
        let ctx = format!("seed {seed} round {round}: {closed} closed, killed after ack {acked}");
        assert!(
            rep.used_index && rep.tail_scanned > 0,
            "{ctx}: not the tail path: {rep:?}"
        );
        assert!(!rep_rb.used_index, "{ctx}: the copy did not rebuild");
        assert_eq!(st, st_rb, "{ctx}: the crash open and the rebuild differ");
        assert!(
            msgs == msgs_rb,
            "{ctx}: the crash open's messages differ from the rebuild's"
        );
        assert!(
            st.last_seq >= acked,
            "{ctx}: acknowledged {acked}, last {}",
            st.last_seq
        );
        for (seq, subject, payload) in &msgs {
            assert_eq!(
                (subject.as_str(), payload),
                (format!("tail.{}", seq % 5).as_str(), &tail_payload(*seq)),
                "{ctx}: seq {seq}"
            );
        }
        assert_eq!(
            msgs.len() as u64,
            st.last_seq,
            "{ctx}: a message is missing"
        );
        // the tail, not the stream: what the open read is the tail it scanned (from the
        // length index.db recorded to the end of the file: the appends and the rest of the
        // block's preallocated zeros, which it checks hold nothing) and a fixed allowance
        // (index.db, each vouched block's header and last crc, the first live record)
        let index_len = std::fs::metadata(dir.join("index.db")).map_or(0, |m| m.len());
        assert!(
            read <= rep.tail_scanned + index_len + (128 << 10) && read < read_rb,
            "{ctx}: the crash open read {read} bytes (tail {} scanned), the rebuild {read_rb}",
            rep.tail_scanned
        );
        println!(
            "{ctx}: crash open read {read} bytes (tail {} scanned), the rebuild {read_rb}",
            rep.tail_scanned
        );
    }
}
