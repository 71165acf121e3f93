//! Error injection: for every workload of the crash matrix, fail the N-th filesystem operation
//! (every N the workload reaches) with EIO, then with ENOSPC. The call that hits it must return
//! a typed `Error::Io` of that kind (never panic, never swallow it into an acknowledgement); a
//! failed write or fsync must poison the store (`Error::Poisoned` for every later write until
//! reopened); and recovering crash images of what is left (the pessimistic one and seeded
//! random ones), and the live directory itself, must hold every message whose durability was
//! acknowledged before the error (`check_image` with the journal as it stood).
//!
//! Plus fault-fs's fsyncgate semantics (a failed `sync_data` drops the pending writes for good,
//! and a retried sync returns Ok without writing them): the store must never acknowledge them.
//!
//! `SEQSTORE_SEED` seeds the random crash images (printed on failure).

use crate::seed;
use seqstore_core::surface::StreamStore;
use seqstore_core::{Ablation, Config, Error, ManualClock, StreamState, SyncPolicy};
use seqstore_crash_matrix::payload;
use seqstore_crash_matrix::*;
use seqstore_fault_fs::{FaultFs, FaultKind, Journal, Model, OpKind};
use std::io::ErrorKind;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ------------------------------------------------------------------ a backend that keeps errors

/// One error a store call returned, kept typed enough to check.
#[derive(Clone, Debug)]
struct Returned {
    call: &'static str,
    io_kind: Option<ErrorKind>,
    text: String,
}

type Log = Arc<Mutex<Vec<Returned>>>;

/// The native backend, logging every error a store call returns (the `Runner` only keeps its
/// text).
#[derive(Default)]
struct Recording {
    log: Log,
}

fn note<T>(log: &Log, call: &'static str, r: Result<T, Error>) -> Result<T, Error> {
    // the Runner asks `consumer_state` whether a consumer exists: "no consumer" is its answer
    let probe = call == "consumer_state" && matches!(r, Err(Error::ConsumerNotFound { .. }));
    if let (Err(e), false) = (&r, probe) {
        log.lock().unwrap().push(Returned {
            call,
            io_kind: e.io_kind(),
            text: e.to_string(),
        });
    }
    r
}

impl Backend for Recording {
    fn name(&self) -> &'static str {
        "native"
    }
    fn open(&self, fs: FaultFs, cfg: Config, clock: ManualClock) -> Result<Box<StreamOps>, Error> {
        let inner = note(&self.log, "open", Native.open(fs, cfg, clock))?;
        Ok(Box::new(RecOps {
            inner,
            log: self.log.clone(),
        }))
    }
}

struct RecOps {
    inner: Box<StreamOps>,
    log: Log,
}

impl StreamStore for RecOps {
    type Error = Error;

    seqstore_core::forward_stream_ops!(
        named [acked sync_purge changes reads] StreamOps, this => &mut *this.inner,
        |call, r| note(&this.log, call, r)
    );
    fn state(&mut self) -> Result<StreamState, Error> {
        note(&self.log, "state", self.inner.state())
    }
    fn consumer_names(&mut self) -> Result<Vec<String>, Error> {
        note(&self.log, "consumer_names", self.inner.consumer_names())
    }
    fn recovery_report(&self) -> seqstore_core::RecoveryReport {
        self.inner.recovery_report()
    }
    fn close(self) -> Result<(), Error> {
        // a boxed trait object is not closed by value; the matrix drops its stores (a crash)
        drop(self);
        Ok(())
    }
}

// ------------------------------------------------------------------ the sweep

fn io_kind(f: FaultKind) -> ErrorKind {
    match f {
        FaultKind::Eio => ErrorKind::Other,
        FaultKind::Enospc => ErrorKind::StorageFull,
    }
}

/// Operations whose failure must poison the store: the ones after which the file (or the
/// directory) is in an unknown state.
fn poisons(kind: OpKind) -> bool {
    matches!(
        kind,
        OpKind::WriteAt | OpKind::SyncData | OpKind::SyncAll | OpKind::SyncDir
    )
}

#[derive(Debug, Default)]
struct Stats {
    cases: usize,
    step_errors: usize,
    absorbed: usize,
    poison_checked: usize,
    harness_reads: usize,
    images: usize,
}

/// Runs `w` under `policy` with operation `n` failing with `fault`, then checks everything
/// the module docs list. `Ok(false)`: the workload ended before operation `n`.
fn run_case(
    w: &Workload,
    policy: SyncPolicy,
    n: u64,
    fault: FaultKind,
    seed: u64,
    st: &mut Stats,
) -> Result<bool, String> {
    let cfg = config(w.block_size, policy, Ablation::Full);
    let fs = FaultFs::new(Model::Posix);
    fs.fail_op(n, fault);
    let rec = Recording::default();
    let mut runner = Runner::new(&rec, cfg.clone());
    let mut j = Journal::new();
    let mut failed: Option<(usize, String)> = None;
    let mut starts = Vec::new();
    // how many errors the store had returned when the last step began
    let mut logged_before = 0;
    for (i, step) in w.steps.iter().enumerate() {
        starts.push(fs.op_count());
        logged_before = rec.log.lock().unwrap().len();
        match catch_unwind(AssertUnwindSafe(|| runner.step(&fs, step, &mut j))) {
            Err(p) => {
                let p = seqstore_crash_matrix::robust::panic_text(&*p);
                return Err(format!("step {i} {step:?} panicked: {p}"));
            }
            // the workload stops at the injected failure, returned or absorbed: the journal
            // is then what had been acknowledged when it came
            Ok(Ok(())) if fs.op_count() > n => break,
            Ok(Ok(())) => {}
            Ok(Err(m)) => {
                failed = Some((i, m));
                break;
            }
        }
    }
    let trace = fs.trace();
    let Some(hit) = trace.get(n as usize).cloned() else {
        return Ok(false);
    };
    st.cases += 1;
    assert!(hit.result.is_err(), "fault-fs did not fail op {n}: {hit}");
    let log = rec.log.lock().unwrap().clone();
    let reopens = |i: usize| matches!(w.steps[i], Step::Reopen | Step::Close | Step::TrimOnOpen(_));
    match &failed {
        // a step that reopens dropped the store, whose write-out of its unacknowledged buffer
        // failed (a drop cannot return it): those messages are gone, and the Runner's check
        // that the live files kept what was written (a consumer's delivered position past the
        // stream's end, clamped at open) fails; the images are checked below
        Some((i, _))
            if log.len() == logged_before && reopens(*i) && hit.kind == OpKind::WriteAt =>
        {
            st.absorbed += 1;
        }
        Some((i, m)) => {
            st.step_errors += 1;
            let Some(last) = log[logged_before..].last() else {
                return Err(format!("step {i} failed without a store error: {m}"));
            };
            if last.io_kind != Some(io_kind(fault)) {
                return Err(format!(
                    "step {i} ({}) hit by `{hit}` returned {:?}, expected Error::Io of kind {:?}",
                    last.call,
                    last.text,
                    io_kind(fault)
                ));
            }
            // index.db is an accelerator: a checkpoint that cannot write it reports the error
            // and leaves the (synced) blocks, and the store, as they were
            if poisons(hit.kind) && !hit.path.starts_with("index.db") {
                if let Some(s) = runner.ops() {
                    st.poison_checked += 1;
                    let a = s.append("after.fault", b"", b"x");
                    let y = s.sync();
                    let p = s.purge();
                    if !matches!(
                        (&a, &y, &p),
                        (
                            Err(Error::Poisoned),
                            Err(Error::Poisoned),
                            Err(Error::Poisoned)
                        )
                    ) {
                        return Err(format!(
                            "after `{hit}` failed: append {a:?}, sync {y:?}, purge {p:?}; expected Poisoned"
                        ));
                    }
                }
            }
        }
        // a store `get` returned it, and the Runner's bookkeeping around a purge_ex ignored
        // it: its journal then names the unreadable message as removed, so no image check
        None if log
            .iter()
            .any(|r| r.call == "get" && r.io_kind == Some(io_kind(fault))) =>
        {
            st.harness_reads += 1;
            return Ok(true);
        }
        None => {
            // the store absorbed the failure: allowed only where it says so (purge's final
            // removal of purge.old, which recovery redoes; the write-out of an unacknowledged
            // buffer when a store is dropped without close, here by a step that reopens)
            st.absorbed += 1;
            let at = starts.partition_point(|&s| s <= n) - 1;
            let step = w.steps[at].clone();
            let drop_flush = hit.kind == OpKind::WriteAt && reopens(at);
            // index.db is an accelerator: one that cannot be read, or whose blocks cannot be
            // read to validate it (an open after Close takes that path), is rejected, and open
            // rebuilds from the blocks, reading them again
            let read = matches!(hit.kind, OpKind::Open | OpKind::ReadAt | OpKind::Len);
            let index = read && (hit.path == "index.db" || step == Step::Close);
            if !(hit.kind == OpKind::RemoveDirAll || drop_flush || index) {
                return Err(format!(
                    "`{hit}` at {} failed but no call returned an error",
                    hit.call_site
                ));
            }
        }
    }
    // recovery, with the journal as it stood when the error came
    let events = j.events().to_vec();
    drop(runner);
    fs.clear_faults();
    let mut images = vec![("pessimistic".to_string(), fs.crash())];
    for k in 0..3u64 {
        let s = seed ^ (n << 8) ^ k;
        images.push((format!("seeded {s:#x}"), fs.crash_seeded(s)));
    }
    images.push(("live (restart without power loss)".into(), fs.clone()));
    for (name, img) in images {
        st.images += 1;
        check_image(&Native, &cfg, &img, &events)
            .map_err(|e| format!("after `{hit}` failed, {name} image: {e}"))?;
    }
    Ok(true)
}

fn baseline_ops(w: &Workload, policy: SyncPolicy) -> u64 {
    let cfg = config(w.block_size, policy, Ablation::Full);
    let fs = FaultFs::new(Model::Posix);
    let mut runner = Runner::new(&Native, cfg);
    let mut j = Journal::new();
    for step in &w.steps {
        runner
            .step(&fs, step, &mut j)
            .unwrap_or_else(|e| panic!("{}: {e}", w.name));
    }
    fs.op_count()
}

fn sweep(policies: &[(&str, SyncPolicy)], floor: usize) {
    let seed = seed();
    let mut st = Stats::default();
    let mut failures = Vec::new();
    let t = std::time::Instant::now();
    for w in workloads() {
        for &(pname, policy) in policies {
            let total = baseline_ops(&w, policy);
            for fault in [FaultKind::Eio, FaultKind::Enospc] {
                for n in 0..total {
                    if let Err(e) = run_case(&w, policy, n, fault, seed, &mut st) {
                        failures.push(format!("{} {pname} op {n} {fault:?}: {e}", w.name));
                    }
                }
            }
        }
    }
    println!(
        "{} (workload, N, error) cases [{}]: {} calls returned the typed error, {} failures \
         absorbed by design, {} poisoning checks, {} read faults in the harness's own reads, {} \
         recovered images; {:.1?} (SEQSTORE_SEED={seed})",
        st.cases,
        policies.iter().map(|p| p.0).collect::<Vec<_>>().join(","),
        st.step_errors,
        st.absorbed,
        st.poison_checked,
        st.harness_reads,
        st.images,
        t.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases failed (SEQSTORE_SEED={seed}):\n{}",
        failures.len(),
        st.cases,
        failures
            .iter()
            .take(25)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(st.cases > floor, "only {} cases ran", st.cases);
    assert!(st.poison_checked > floor / 10, "{st:?}");
}

#[test]
fn every_op_fails_with_eio_then_enospc_always() {
    sweep(&[("always", SyncPolicy::Always)], 1000);
}

#[test]
fn every_op_fails_with_eio_then_enospc_interval_never() {
    sweep(
        &[
            ("interval", SyncPolicy::Interval(Duration::from_millis(1))),
            ("never", SyncPolicy::Never),
        ],
        1000,
    );
}

// ------------------------------------------------------------------ fsyncgate

fn store_on(fs: &FaultFs, sync: SyncPolicy) -> seqstore_core::Store<FaultFs> {
    let cfg = Config::default().with_sync(sync);
    seqstore_core::Store::builder(fs.clone())
        .config(cfg)
        .clock(ManualClock::new(1_000_000_000))
        .open()
        .expect("open")
}

fn reopen_state(img: &FaultFs) -> StreamState {
    store_on(img, SyncPolicy::Always).state()
}

/// Always: a failed `sync_data` (fault-fs drops the dirty pages, as Linux does) fails the
/// append with a typed `Io`, poisons the store (every write, and `sync`, is `Poisoned`: a
/// retried fsync would return Ok without writing), reads keep working, and the message it could
/// not make durable is never acknowledged: after a crash the stream ends at the last acked one.
#[test]
fn failed_fsync_poisons_and_nothing_unsynced_is_acked() {
    let fs = FaultFs::new(Model::Posix);
    let mut s = store_on(&fs, SyncPolicy::Always);
    for i in 0..3 {
        s.append("a", b"", &payload(i, 20)).expect("append");
    }
    fs.fail_kind(OpKind::SyncData, FaultKind::Eio);
    let e = s
        .append("a", b"", b"never acked")
        .expect_err("the fsync fails");
    assert_eq!(e.io_kind(), Some(ErrorKind::Other), "{e}");
    assert!(s.is_poisoned());
    fs.clear_faults();
    assert!(matches!(s.append("a", b"", b"x"), Err(Error::Poisoned)));
    assert!(
        matches!(s.sync(), Err(Error::Poisoned)),
        "a retried sync would lie"
    );
    assert!(matches!(s.delete(1), Err(Error::Poisoned)));
    assert!(matches!(s.purge(), Err(Error::Poisoned)));
    assert!(matches!(s.compact(2), Err(Error::Poisoned)));
    assert!(matches!(s.truncate(1), Err(Error::Poisoned)));
    assert!(matches!(s.checkpoint(), Err(Error::Poisoned)));
    assert_eq!(s.get(2).expect("reads still work").payload, payload(1, 20));
    assert_eq!(s.state().last_seq, 3, "the failed append is not counted");
    drop(s);
    // the power goes: what was acknowledged is there, what was not is not
    let img = fs.crash();
    let st = reopen_state(&img);
    assert_eq!((st.msgs, st.last_seq), (3, 3), "{st:?}");
}

/// Never: `sync()` fails (fsyncgate drops the writes); a second `sync()` must not return Ok
/// (fault-fs would return Ok there without writing anything): it is `Poisoned`.
#[test]
fn failed_sync_is_not_retried_into_a_lie() {
    for kind in [OpKind::SyncData, OpKind::SyncDir] {
        let fs = FaultFs::new(Model::Posix);
        let mut s = store_on(&fs, SyncPolicy::Never);
        for i in 0..3 {
            s.append("a", b"", &payload(i, 20)).expect("append");
        }
        fs.fail_kind(kind, FaultKind::Enospc);
        let e = s.sync().expect_err("sync fails");
        assert_eq!(e.io_kind(), Some(ErrorKind::StorageFull), "{kind}: {e}");
        fs.clear_faults();
        assert!(matches!(s.sync(), Err(Error::Poisoned)), "{kind}");
        assert!(matches!(s.tick(), Err(Error::Poisoned)), "{kind}");
        assert!(
            matches!(s.append("a", b"", b"x"), Err(Error::Poisoned)),
            "{kind}"
        );
    }
}

/// Found by the `model_ops` fuzz target (Interval policy): a process appends without syncing
/// and stops (no close); the next process opens the store, sees those messages, and its
/// `sync()` returns Ok. A power cut then loses them and brings the stream back to 0,0: a
/// reopened store never fsyncs the block data it found (only the directories), so its `sync()`
/// does not cover the previous process's writes (its blocks are loaded `dirty: false`).
#[test]
fn sync_after_reopen_makes_found_data_durable() {
    for policy in [
        SyncPolicy::Never,
        SyncPolicy::Interval(Duration::from_secs(3600)),
    ] {
        let fs = FaultFs::new(Model::Posix);
        let mut s = store_on(&fs, policy);
        for i in 0..3 {
            s.append("a", b"", &payload(i, 20)).expect("append");
        }
        drop(s); // the process stops without close: the buffer is written, not synced
        let mut s = store_on(&fs, policy);
        assert_eq!(s.state().last_seq, 3);
        s.sync().expect("sync");
        drop(s);
        let st = reopen_state(&fs.crash());
        assert_eq!(
            (st.msgs, st.last_seq),
            (3, 3),
            "{policy:?}: sync() returned Ok with last=3, the crash recovered {st:?}"
        );
    }
}

/// After a failed fsync and a reopen on the same (live) filesystem, the new store sees the
/// data whose fsync failed (fault-fs keeps it readable but never durable, as Linux's page
/// cache does). Messages it then acknowledges under Always must survive a crash.
#[test]
fn acks_after_reopen_following_a_failed_fsync_survive() {
    let fs = FaultFs::new(Model::Posix);
    let mut s = store_on(&fs, SyncPolicy::Always);
    for i in 0..3 {
        s.append("a", b"", &payload(i, 20)).expect("append");
    }
    fs.fail_kind(OpKind::SyncData, FaultKind::Eio);
    s.append("a", b"", b"unsynced").expect_err("fsync fails");
    fs.clear_faults();
    drop(s);
    let mut s = store_on(&fs, SyncPolicy::Always);
    let acked: Vec<u64> = (10..13)
        .map(|i| {
            s.append("a", b"", &payload(i, 20))
                .expect("append after reopen")
        })
        .collect();
    drop(s);
    let img = fs.crash();
    let mut s = store_on(&img, SyncPolicy::Always);
    for seq in acked {
        let got = s.get(seq).map(|m| m.payload);
        assert!(
            got.is_ok(),
            "seq {seq} was acknowledged after the reopen but is gone after a crash: {got:?}; \
             recovery: {:?}",
            s.recovery_report()
        );
    }
}

/// A failed fsync of `msgs/` loses, for good, the name of a block created before it (fault-fs,
/// like Linux, drops the directory's pending changes; the next process still sees the file in
/// the page cache, and its own `sync_dir` returns Ok without writing the name). Messages the
/// next process acknowledges must not go into that block: a power cut takes the block's name
/// and them with it. The control (`Ablation::AppendToFoundBlock`, the fix reverted) loses them.
#[test]
fn acks_after_reopen_following_a_failed_msgs_fsync_survive() {
    let lost = acked_then_lost_after_a_failed_msgs_fsync(Ablation::Full);
    assert!(
        lost.is_empty(),
        "acknowledged after the reopen, gone after a power cut: {lost:?}"
    );
    let lost = acked_then_lost_after_a_failed_msgs_fsync(Ablation::AppendToFoundBlock);
    assert!(
        !lost.is_empty(),
        "the control lost nothing: the test shows nothing"
    );
}

/// The sequences acknowledged by the process after the failure that a power cut then took.
fn acked_then_lost_after_a_failed_msgs_fsync(ablation: Ablation) -> Vec<u64> {
    let fs = FaultFs::new(Model::Posix);
    let mut cfg = Config::default()
        .with_sync(SyncPolicy::Always)
        .with_block_size(4096);
    cfg.ablation = ablation;
    let open = |fs: &FaultFs| {
        seqstore_core::Store::builder(fs.clone())
            .config(cfg.clone())
            .clock(ManualClock::new(1_000_000_000))
            .open()
            .expect("open")
    };
    let mut s = open(&fs);
    s.append("a", b"", &payload(0, 100)).expect("append");
    fs.fail_kind(OpKind::SyncDir, FaultKind::Eio);
    // appends until one rolls to a new block, whose name the failed fsync loses
    let failed = (1..200).find(|&i| s.append("a", b"", &payload(i, 100)).is_err());
    assert!(failed.is_some(), "no append rolled to a new block");
    fs.clear_faults();
    drop(s);
    let mut s = open(&fs);
    let acked: Vec<u64> = (1000..1003)
        .map(|i| {
            s.append("a", b"", &payload(i, 100))
                .expect("append after reopen")
        })
        .collect();
    drop(s);
    let mut s = open(&fs.crash());
    let report = format!("{:?}", s.recovery_report());
    let lost: Vec<u64> = acked.into_iter().filter(|&q| s.get(q).is_err()).collect();
    if !lost.is_empty() {
        println!("{ablation}: lost {lost:?}; recovery: {report}");
    }
    lost
}
