//! The log storage, crash-checked with fault-fs: workloads of storage calls (save_vote, append
//! with its durability callback, truncate, purge, reopen) run through the real `LogStore` (its
//! I/O thread and group commit included), crashed at every operation boundary under both
//! models, every image recovered and checked:
//! - a vote acknowledged is never older after recovery;
//! - the last purged `LogId` never goes back, and is exactly one that a purge was given;
//! - `last_log_id >= last_purged_log_id`; the entries present are contiguous (no hole);
//! - every entry whose callback fired is present (unless a later truncate or purge removed it);
//! - an entry an acknowledged truncate removed never comes back (the tsoracle #260 shape: a
//!   durable vote beside a lost truncate).
//!
//! Negative controls: each ablation switch (feature `ablation`, dev-only) removes one
//! durability step, and the explorer must find the violation it causes.
//!
//! Randomized workloads are seeded: `SEQSTORE_SEED=<n>` replays one.

use openraft::testing::log_id;
use openraft::Vote;
use seqstore_fault_fs::{
    explore, explore_from, CrashCtx, ExploreConfig, FaultFs, Journal, Model, Report,
};
use seqstore_raft::log::Ablation;
use seqstore_raft::{Entry, LogConfig, LogCore, LogId, LogStore};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

#[derive(Clone, Debug)]
enum Step {
    Vote(u64, u64),
    /// Entries of this term at the log's next indices.
    Append(u64, usize),
    /// Truncate from this index on.
    Truncate(u64),
    /// Purge up to and including this index.
    Purge(u64),
    Commit(u64),
    Reopen,
}

#[derive(Clone, Debug)]
enum Event {
    VoteAcked(Vote<u64>),
    AppendStarted(Vec<LogId>),
    Flushed(Vec<LogId>),
    TruncStarted(u64),
    TruncAcked(u64),
    PurgeStarted(LogId),
    PurgeAcked(LogId),
}

fn entry(id: LogId) -> Entry {
    // ~128 bytes per record: several records per 512-byte sector, tears inside them
    crate::entries::append_entry(id, 76)
}

struct Runner {
    cfg: LogConfig,
    rt: tokio::runtime::Runtime,
    log: Option<LogStore<FaultFs>>,
    /// The log ids of the entries as the workload believes them (index -> id).
    ids: Vec<LogId>,
}

impl Runner {
    fn new(cfg: LogConfig) -> Self {
        Runner {
            cfg,
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime"),
            log: None,
            ids: Vec::new(),
        }
    }

    fn open(&mut self, fs: &FaultFs) -> Result<(), String> {
        if self.log.is_none() {
            let log = LogStore::open(fs.clone(), self.cfg.clone()).map_err(|e| e.to_string())?;
            let (_, last) = self
                .rt
                .block_on(log.state_now())
                .map_err(|e| e.to_string())?;
            self.ids.truncate(last.map_or(0, |l| l.index as usize + 1));
            self.log = Some(log);
        }
        Ok(())
    }

    fn step(&mut self, fs: &FaultFs, s: &Step, j: &mut Journal<Event>) -> Result<(), String> {
        self.open(fs)?;
        let log = self.log.clone().expect("opened");
        let e = |e: seqstore_raft::Error| e.to_string();
        match *s {
            Step::Vote(term, node) => {
                let v = Vote::new(term, node);
                self.rt.block_on(log.save_vote_now(v)).map_err(e)?;
                j.note(fs, Event::VoteAcked(v));
            }
            Step::Append(term, n) => self.append(fs, &log, term, n, j)?,
            Step::Truncate(i) => {
                j.note(fs, Event::TruncStarted(i));
                let id = log_id(0, 0, i);
                self.rt.block_on(log.truncate_now(id)).map_err(e)?;
                self.ids.truncate(i as usize);
                j.note(fs, Event::TruncAcked(i));
            }
            Step::Purge(i) => {
                // the id openraft would give: the entry's own, or a snapshot's beyond the end
                let term = self.ids.last().map_or(1, |l| l.leader_id.term);
                let id = self.ids.get(i as usize).copied();
                let id = id.unwrap_or(log_id(term, 1, i));
                j.note(fs, Event::PurgeStarted(id));
                self.rt.block_on(log.purge_now(id)).map_err(e)?;
                j.note(fs, Event::PurgeAcked(id));
            }
            Step::Commit(i) => {
                let id = self.ids.get(i as usize).copied();
                let mut l = log.clone();
                self.rt
                    .block_on(openraft::storage::RaftLogStorage::save_committed(
                        &mut l, id,
                    ))
                    .map_err(|e| e.to_string())?;
            }
            Step::Reopen => {
                drop(log);
                self.log = None; // joins the I/O thread, drops the store
                self.open(fs)?;
            }
        }
        Ok(())
    }

    /// Appends `n` entries and waits for their durability callback, noting both.
    fn append(
        &mut self,
        fs: &FaultFs,
        log: &LogStore<FaultFs>,
        term: u64,
        n: usize,
        j: &mut Journal<Event>,
    ) -> Result<(), String> {
        let (_, last) = self
            .rt
            .block_on(log.state_now())
            .map_err(|e| e.to_string())?;
        let next = last.map_or(0, |l| l.index + 1);
        let ids: Vec<LogId> = (next..next + n as u64)
            .map(|i| log_id(term, 1, i))
            .collect();
        j.note(fs, Event::AppendStarted(ids.clone()));
        let (tx, rx) = mpsc::channel();
        let entries = ids.iter().copied().map(entry).collect();
        let cb = Box::new(move |r: std::io::Result<()>| {
            let _ = tx.send(r.map_err(|e| e.to_string()));
        });
        self.rt
            .block_on(log.append_with(entries, cb))
            .map_err(|e| e.to_string())?;
        rx.recv().map_err(|e| e.to_string())??;
        j.note(fs, Event::Flushed(ids.clone()));
        self.ids.truncate(next as usize);
        self.ids.extend(ids);
        Ok(())
    }
}

/// What the events up to a crash promise about the recovered log.
#[derive(Default)]
struct Expect {
    vote: Option<Vote<u64>>,
    purge_acked: Option<LogId>,
    purges_started: BTreeSet<LogId>,
    /// Entries whose callback fired and that no truncate (even one not acknowledged) may have
    /// removed since; those at or below the recovered last purged index are excused.
    durable: BTreeMap<u64, LogId>,
    /// Every id ever appended at each index.
    appended: BTreeMap<u64, BTreeSet<LogId>>,
    /// Ids an acknowledged truncate removed and no later append wrote again.
    forbidden: BTreeMap<u64, BTreeSet<LogId>>,
}

impl Expect {
    fn from_events(events: &[Event]) -> Self {
        let mut x = Expect::default();
        for ev in events {
            match ev {
                Event::VoteAcked(v) => x.vote = Some(*v),
                Event::AppendStarted(ids) => {
                    for id in ids {
                        x.appended.entry(id.index).or_default().insert(*id);
                        if let Some(f) = x.forbidden.get_mut(&id.index) {
                            f.remove(id);
                        }
                    }
                }
                Event::Flushed(ids) => x.durable.extend(ids.iter().map(|id| (id.index, *id))),
                Event::TruncStarted(i) => x.durable.retain(|k, _| k < i),
                Event::TruncAcked(i) => {
                    for (k, ids) in x.appended.range(i..) {
                        x.forbidden.entry(*k).or_default().extend(ids);
                    }
                }
                // entries a purge may have removed are excused only by the recovered purged id
                Event::PurgeStarted(p) => _ = x.purges_started.insert(*p),
                Event::PurgeAcked(p) => x.purge_acked = x.purge_acked.max(Some(*p)),
            }
        }
        x
    }
}

/// Recovers the image and checks it against what the events promise. If recovery wrote
/// anything (a cut, a redone compaction, the store's own repairs), it is crashed in turn at
/// every operation boundary (`explore_from` on the image) and each of those images is checked
/// the same way: a crash during recovery must be as safe as one before it.
fn check(img: &FaultFs, events: &[Event], cfg: &LogConfig, nested: bool) -> Result<(), String> {
    let pristine = img.crash(); // everything in an image is durable: this is a copy
    let x = Expect::from_events(events);
    let mut core = LogCore::open(img.clone(), cfg.clone()).map_err(|e| format!("open: {e}"))?;
    if !nested && core.recovery_wrote() {
        check_recovery_crashes(&pristine, events, cfg)?;
    }
    // a power cut takes only what no fsync covered: never damage to what a record vouches
    // for (`seqstore_raft::damaged`), which would hold the node's vote for nothing
    if let Some(through) = core.damaged() {
        return Err(format!(
            "a power cut was taken for damage to durable entries (held until {through})"
        ));
    }
    if core.vote() < x.vote {
        return Err(format!(
            "vote went back: {:?} < acknowledged {:?}",
            core.vote(),
            x.vote
        ));
    }
    let (purged, last) = core.log_state();
    if purged.map(|p| p.index) < x.purge_acked.map(|p| p.index) {
        return Err(format!(
            "last purged went back: {purged:?} < acknowledged {:?}",
            x.purge_acked
        ));
    }
    if let Some(p) = purged {
        if !x.purges_started.contains(&p) {
            return Err(format!("last purged {p} is no id a purge was given"));
        }
    }
    if last < purged {
        return Err(format!("last log {last:?} < last purged {purged:?}"));
    }
    let entries = core.read(0, u64::MAX).map_err(|e| format!("read: {e}"))?;
    check_entries(&x, purged, last, &entries)?;
    check_usable(core, img, cfg)
}

/// Recoveries that wrote something and were crash-explored in turn (reported by the tests).
static NESTED: AtomicUsize = AtomicUsize::new(0);

fn check_recovery_crashes(
    start: &FaultFs,
    events: &[Event],
    cfg: &LogConfig,
) -> Result<(), String> {
    NESTED.fetch_add(1, Ordering::Relaxed);
    let mut ecfg = ExploreConfig::new(start.config().model);
    ecfg.fs = start.config();
    ecfg.stop_at_first_violation = true;
    ecfg.blame = false;
    let r = explore_from(
        &ecfg,
        start,
        &[()],
        |fs, _, _: &mut Journal<()>| {
            let core = LogCore::open(fs.clone(), cfg.clone()).map_err(|e| e.to_string())?;
            drop(core);
            Ok(())
        },
        |img, _| check(img, events, cfg, true),
    );
    if let Some(e) = r.workload_error {
        return Err(format!("recovery failed: {e}"));
    }
    match r.violations.first() {
        Some(v) => Err(format!("crash during recovery: {v}")),
        None => Ok(()),
    }
}

/// The recovered log takes the next append openraft would send, and keeps it across a reopen
/// (a recovery that cut a hole must leave a log that works, not only one that reads).
fn check_usable(mut core: LogCore<FaultFs>, img: &FaultFs, cfg: &LogConfig) -> Result<(), String> {
    let next = core.next_index();
    let id = log_id(99, 1, next);
    core.append_buffered([entry(id)])
        .and_then(|()| core.sync())
        .map_err(|e| format!("append after recovery: {e}"))?;
    drop(core);
    let core = LogCore::open(img.clone(), cfg.clone())
        .map_err(|e| format!("reopen after recovery: {e}"))?;
    if core.log_state().1 != Some(id) {
        return Err(format!(
            "append after recovery lost: {:?}",
            core.log_state()
        ));
    }
    Ok(())
}

fn check_entries(
    x: &Expect,
    purged: Option<LogId>,
    last: Option<LogId>,
    entries: &[Entry],
) -> Result<(), String> {
    let floor = purged.map_or(0, |p| p.index + 1);
    for (want, e) in (floor..).zip(entries) {
        let id = e.log_id;
        if id.index != want {
            return Err(format!("hole: index {} where {want} expected", id.index));
        }
        if !x.appended.get(&id.index).is_some_and(|s| s.contains(&id)) {
            return Err(format!("entry {id} was never appended"));
        }
        if x.forbidden.get(&id.index).is_some_and(|s| s.contains(&id)) {
            return Err(format!(
                "entry {id} came back after an acknowledged truncate"
            ));
        }
    }
    if entries.last().map(|e| e.log_id).or(purged) != last {
        return Err(format!("last log {last:?} is not the last entry present"));
    }
    for (i, id) in x.durable.range(floor..) {
        let got = entries.get((i - floor) as usize).map(|e| e.log_id);
        if got != Some(*id) {
            return Err(format!(
                "entry {id} was durable (callback fired) but is {got:?}"
            ));
        }
    }
    Ok(())
}

fn run(model: Model, seed: u64, steps: &[Step], cfg: LogConfig) -> Report {
    let mut ecfg = ExploreConfig::new(model);
    ecfg.seed = seed;
    ecfg.max_violations = 5;
    let mut runner = Runner::new(cfg.clone());
    let report = explore(
        &ecfg,
        steps,
        |fs, s, j| runner.step(fs, s, j),
        |img, ctx: &CrashCtx<'_, Event>| check(img, ctx.events, &cfg, false),
    );
    drop(runner);
    report
}

fn small(ablation: Ablation) -> LogConfig {
    // blocks roll every few entries: purge and truncate cross them
    let mut c = LogConfig::default().with_block_size(1024);
    c.ablation = ablation;
    c
}

/// The fixed workloads: each storage call, and the orders in which they hurt.
fn workloads() -> Vec<(&'static str, Vec<Step>)> {
    use Step::*;
    vec![
        (
            "vote-append",
            vec![Vote(1, 1), Append(1, 3), Vote(2, 2), Vote(3, 1)],
        ),
        (
            "truncate-then-vote",
            vec![
                Append(1, 5),
                Truncate(2),
                Vote(2, 2),
                Append(2, 2),
                Reopen,
                Vote(3, 3),
            ],
        ),
        (
            "purge-all",
            vec![Append(1, 4), Purge(3), Reopen, Append(1, 2), Purge(5)],
        ),
        (
            "purge-beyond-end-then-append",
            vec![
                Append(1, 2),
                Commit(1),
                Purge(6),
                Append(2, 3),
                Reopen,
                Truncate(8),
            ],
        ),
        // found by the random workloads: a record right after the purge point lost while the
        // next block survived (the `cut_front` path)
        (
            "hole-after-purge",
            vec![
                Vote(1, 1),
                Append(1, 2),
                Append(1, 3),
                Reopen,
                Purge(4),
                Append(1, 3),
                Append(1, 1),
                Reopen,
                Truncate(8),
                Vote(2, 2),
            ],
        ),
        // the same without a reopen before the purge: the entries after it go to the block
        // the purge left, not to one a reopen begins, and the hole is in the middle of a block
        (
            "hole-after-purge-in-place",
            vec![
                Vote(1, 1),
                Append(1, 2),
                Append(1, 3),
                Purge(4),
                Append(1, 3),
                Append(1, 1),
                Reopen,
                Truncate(8),
                Vote(2, 2),
            ],
        ),
        (
            "mixed",
            vec![
                Vote(1, 1),
                Append(1, 6),
                Commit(3),
                Purge(2),
                Truncate(4),
                Vote(2, 2),
                Append(2, 3),
                Reopen,
                Purge(5),
                Append(2, 1),
            ],
        ),
    ]
}

/// A seeded random workload (what a leader change, compaction and restart produce).
fn random_workload(seed: u64) -> Vec<Step> {
    let mut x = seed;
    let mut next = move || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let (mut term, mut len, mut purged) = (1u64, 0u64, 0u64);
    let mut steps = vec![Step::Vote(1, 1)];
    for _ in 0..12 {
        match next() % 6 {
            0 | 1 => {
                let n = 1 + next() % 3;
                steps.push(Step::Append(term, n as usize));
                len += n;
            }
            2 if len > purged + 1 => {
                let t = purged + 1 + next() % (len - purged);
                steps.push(Step::Truncate(t));
                len = t;
                term += 1;
                steps.push(Step::Vote(term, 1 + next() % 3));
            }
            3 if len > purged + 1 => {
                purged = purged + 1 + next() % (len - purged);
                steps.push(Step::Purge(purged - 1));
                len = len.max(purged);
            }
            4 => steps.push(Step::Reopen),
            _ => steps.push(Step::Commit(len.saturating_sub(1))),
        }
    }
    steps
}

fn seed() -> u64 {
    std::env::var("SEQSTORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2026)
}

#[test]
fn fixed_workloads_are_clean_under_both_models() {
    for (name, steps) in workloads() {
        for (model, inline) in Model::ALL.into_iter().flat_map(|m| [(m, false), (m, true)]) {
            let r = run(
                model,
                7,
                &steps,
                small(Ablation::Full).with_inline_io(inline),
            );
            assert!(
                r.workload_error.is_none(),
                "{name} {model:?} inline {inline}: {:?}",
                r.workload_error
            );
            assert!(
                r.is_clean(),
                "{name} {model:?} inline {inline}: {} violations, first: {}",
                r.violation_count,
                r.violations[0]
            );
            eprintln!(
                "{name} {model:?} inline {inline}: {} crash points, {} images",
                r.crash_points, r.images
            );
        }
    }
}

#[test]
fn random_workloads_are_clean_under_both_models() {
    let base = seed();
    let (mut points, mut images) = (0, 0);
    for k in 0..120 {
        let s = base.wrapping_add(k);
        let steps = random_workload(s);
        // odd seeds run the log's I/O inline (the server's mode), even ones on its thread
        let inline = s % 2 == 1;
        for model in Model::ALL {
            let r = run(
                model,
                s,
                &steps,
                small(Ablation::Full).with_inline_io(inline),
            );
            let why = format!("SEQSTORE_SEED={s} {model:?} inline {inline} {steps:?}");
            assert!(r.workload_error.is_none(), "{why}: {:?}", r.workload_error);
            assert!(r.is_clean(), "{why}: {}", r.violations[0]);
            (points, images) = (points + r.crash_points, images + r.images);
        }
    }
    eprintln!("random workloads from seed {base}: {points} crash points, {images} images");
    // (shared with the other tests running at the same time: a lower bound on this test's)
    eprintln!(
        "recoveries that wrote and were crash-explored in turn: {}",
        NESTED.load(Ordering::Relaxed)
    );
}

/// Runs a workload with a switch on and returns the violation messages found.
fn found(ablation: Ablation, model: Model, steps: &[Step]) -> Vec<String> {
    let r = run(model, 11, steps, small(ablation));
    assert!(
        r.workload_error.is_none(),
        "{ablation:?}: {:?}",
        r.workload_error
    );
    r.violations.iter().map(|v| v.message.clone()).collect()
}

#[test]
fn negative_control_purge_meta_unsynced_is_found() {
    use Step::*;
    let steps = [Append(1, 4), Purge(3), Vote(2, 1)];
    for model in Model::ALL {
        let v = found(Ablation::PurgeMetaUnsynced, model, &steps);
        assert!(
            !v.is_empty(),
            "{model:?}: an unsynced purge id was not found"
        );
        eprintln!("purge-meta-unsynced {model:?}: {}", v[0]);
    }
}

#[test]
fn negative_control_purge_before_meta_is_found() {
    use Step::*;
    let steps = [Append(1, 4), Purge(3), Vote(2, 1)];
    for model in Model::ALL {
        let v = found(Ablation::PurgeBeforeMeta, model, &steps);
        assert!(!v.is_empty(), "{model:?}: compact-before-id was not found");
        eprintln!("purge-before-meta {model:?}: {}", v[0]);
    }
}

#[test]
fn negative_control_truncate_unsynced_is_found() {
    use Step::*;
    // the tsoracle #260 shape: truncate acknowledged, then a durable vote, then power loss
    let steps = [Append(1, 5), Truncate(2), Vote(2, 2)];
    for model in Model::ALL {
        let v = found(Ablation::TruncateUnsynced, model, &steps);
        assert!(
            v.iter()
                .any(|m| m.contains("came back after an acknowledged truncate")),
            "{model:?}: a lost truncate was not found: {v:?}"
        );
    }
}

#[test]
fn negative_control_repair_offset_first_is_found() {
    // the front-hole repair with its two steps in the wrong order: only a crash *during*
    // recovery shows it, so this also shows the nested recovery exploration runs
    let steps = &workloads()
        .into_iter()
        .find(|(n, _)| *n == "hole-after-purge-in-place")
        .expect("workload")
        .1;
    let v = found(Ablation::RepairOffsetFirst, Model::Posix, steps);
    assert!(
        v.iter().any(|m| m.contains("crash during recovery")),
        "a wrongly ordered repair was not found: {v:?}"
    );
    eprintln!("repair-offset-first: {}", v[0]);
}

#[test]
fn negative_control_vote_unsynced_is_found() {
    use Step::*;
    let steps = [Vote(1, 1), Vote(2, 2), Append(2, 1)];
    for model in Model::ALL {
        let v = found(Ablation::VoteUnsynced, model, &steps);
        assert!(!v.is_empty(), "{model:?}: an unsynced vote was not found");
        eprintln!("vote-unsynced {model:?}: {}", v[0]);
    }
}
