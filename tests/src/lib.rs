//! The purge proof: crash workloads, the invariant checker, and the fsync ablation matrix.
//!
//! A workload is a list of [`Step`]s run against a store on a live [`FaultFs`]. The crash
//! explorer (fault-fs) crashes at every operation boundary, builds every crash image the model
//! allows there, and hands each to [`check_image`], which reopens the store and asserts the
//! invariants below against what the workload had been told before the crash (the
//! [`Event`] journal):
//!
//! 1. after `purge()` returned: recovered `last_seq >= L` and nothing at or below L comes back;
//! 2. during a purge: the old state (what of it was durable) or the purged one, never 0,0 once
//!    a message was durable, never a mix (every durable old message, or none of the old ones);
//! 3. every message whose durability was acknowledged (`Always`, or `sync()` returned) is present
//!    with its payload unless a durable delete/purge/compact/truncate removed it, and every
//!    present message is one that was appended at that sequence and not durably removed;
//! 4. recovery never panics and never errors on a crash image;
//! 5. the first append after recovery gets `recovered last_seq + 1`.
//!
//! The same code drives the native store and, through [`StreamOps`], any other backend (the
//! wasm guest).

use fault_fs::{CrashCtx, ExploreConfig, FaultFs, Journal, Model, Report, Violation};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use store_core::{Ablation, Config, Error, ManualClock, Store, StoredMsg, StreamState, SyncPolicy};

/// The operations a workload and the checker need from a store, so that the native `Store`
/// and the wasm guest run the very same matrix.
pub trait StreamOps {
    /// `Store::append`.
    fn append(&mut self, subject: &str, payload: &[u8]) -> Result<u64, Error>;
    /// `Store::get`.
    fn get(&mut self, seq: u64) -> Result<StoredMsg, Error>;
    /// `Store::state`.
    fn state(&mut self) -> Result<StreamState, Error>;
    /// `Store::sync`.
    fn sync(&mut self) -> Result<(), Error>;
    /// `Store::tick`.
    fn tick(&mut self) -> Result<(), Error>;
    /// `Store::delete`.
    fn delete(&mut self, seq: u64) -> Result<(), Error>;
    /// `Store::erase`.
    fn erase(&mut self, seq: u64) -> Result<(), Error>;
    /// `Store::purge`.
    fn purge(&mut self) -> Result<u64, Error>;
    /// `Store::purge_ex`.
    fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> Result<u64, Error>;
    /// `Store::compact`.
    fn compact(&mut self, seq: u64) -> Result<u64, Error>;
    /// `Store::truncate`.
    fn truncate(&mut self, seq: u64) -> Result<u64, Error>;
}

impl<F: store_core::Fs> StreamOps for Store<F> {
    fn append(&mut self, subject: &str, payload: &[u8]) -> Result<u64, Error> {
        Store::append(self, subject, b"", payload)
    }
    fn get(&mut self, seq: u64) -> Result<StoredMsg, Error> {
        Store::get(self, seq)
    }
    fn state(&mut self) -> Result<StreamState, Error> {
        Ok(Store::state(self))
    }
    fn sync(&mut self) -> Result<(), Error> {
        Store::sync(self)
    }
    fn tick(&mut self) -> Result<(), Error> {
        Store::tick(self)
    }
    fn delete(&mut self, seq: u64) -> Result<(), Error> {
        Store::delete(self, seq)
    }
    fn erase(&mut self, seq: u64) -> Result<(), Error> {
        Store::erase(self, seq)
    }
    fn purge(&mut self) -> Result<u64, Error> {
        Store::purge(self)
    }
    fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> Result<u64, Error> {
        Store::purge_ex(self, filter, up_to, keep)
    }
    fn compact(&mut self, seq: u64) -> Result<u64, Error> {
        Store::compact(self, seq)
    }
    fn truncate(&mut self, seq: u64) -> Result<u64, Error> {
        Store::truncate(self, seq)
    }
}

/// Opens a store of some backend on a fault-fs filesystem.
pub trait Backend: Sync {
    /// The backend's name in reports (`native`, `guest`).
    fn name(&self) -> &'static str;
    /// Opens (recovers) a store on `fs`.
    fn open(
        &self,
        fs: FaultFs,
        cfg: Config,
        clock: ManualClock,
    ) -> Result<Box<dyn StreamOps>, Error>;
}

/// The native `Store`.
pub struct Native;

impl Backend for Native {
    fn name(&self) -> &'static str {
        "native"
    }
    fn open(
        &self,
        fs: FaultFs,
        cfg: Config,
        clock: ManualClock,
    ) -> Result<Box<dyn StreamOps>, Error> {
        Ok(Box::new(Store::open_with_clock(fs, cfg, Box::new(clock))?))
    }
}

/// The native store behind a `SharedStore` (group commit): appends under `Always` go through
/// the leader/follower fsync path.
pub struct Shared;

impl<F: store_core::Fs> StreamOps for store_core::SharedStore<F> {
    fn append(&mut self, subject: &str, payload: &[u8]) -> Result<u64, Error> {
        store_core::SharedStore::append(self, subject, b"", payload)
    }
    fn get(&mut self, seq: u64) -> Result<StoredMsg, Error> {
        self.with(|s| s.get(seq))
    }
    fn state(&mut self) -> Result<StreamState, Error> {
        Ok(self.with(|s| Store::state(s)))
    }
    fn sync(&mut self) -> Result<(), Error> {
        self.with(|s| s.sync())
    }
    fn tick(&mut self) -> Result<(), Error> {
        self.with(|s| s.tick())
    }
    fn delete(&mut self, seq: u64) -> Result<(), Error> {
        self.with(|s| s.delete(seq))
    }
    fn erase(&mut self, seq: u64) -> Result<(), Error> {
        self.with(|s| s.erase(seq))
    }
    fn purge(&mut self) -> Result<u64, Error> {
        self.with(|s| s.purge())
    }
    fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> Result<u64, Error> {
        self.with(|s| s.purge_ex(filter, up_to, keep))
    }
    fn compact(&mut self, seq: u64) -> Result<u64, Error> {
        self.with(|s| s.compact(seq))
    }
    fn truncate(&mut self, seq: u64) -> Result<u64, Error> {
        self.with(|s| s.truncate(seq))
    }
}

impl Backend for Shared {
    fn name(&self) -> &'static str {
        "shared"
    }
    fn open(
        &self,
        fs: FaultFs,
        cfg: Config,
        clock: ManualClock,
    ) -> Result<Box<dyn StreamOps>, Error> {
        let store = Store::open_with_clock(fs, cfg, Box::new(clock))?;
        Ok(Box::new(store_core::SharedStore::new(store)))
    }
}

/// One step of a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Open (recover) the store on the live filesystem.
    Open,
    /// Drop the store (no close, no sync) and open it again, as a restarted process would.
    Reopen,
    /// Append a message of `size` bytes (its first bytes identify it).
    Append(&'static str, u16),
    /// `sync()`.
    Sync,
    /// `delete(seq)`.
    Delete(u64),
    /// `erase(seq)`.
    Erase(u64),
    /// `purge()`.
    Purge,
    /// `purge_ex(filter, up_to, keep)`.
    PurgeEx(&'static str, u64, u64),
    /// `compact(seq)`.
    Compact(u64),
    /// `truncate(seq)`.
    Truncate(u64),
    /// Advance the clock and `tick()` (drives the `Interval` policy).
    Tick(u64),
}

/// What the workload learned, noted in the journal as it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `append` of the message with this id is about to run and will get `seq`: from here on
    /// a crash image may hold it.
    Appending {
        /// The sequence it will get.
        seq: u64,
        /// The payload's id.
        id: u64,
    },
    /// `append` returned `seq` for the message with this id; `durable` under `Always`.
    Appended {
        /// The sequence.
        seq: u64,
        /// The payload's id.
        id: u64,
        /// Acknowledged durable.
        durable: bool,
    },
    /// `sync()` returned: everything before it is durable.
    Synced,
    /// `delete(seq)` is about to run.
    Deleting {
        /// The sequence.
        seq: u64,
    },
    /// `delete(seq)` returned.
    Deleted {
        /// The sequence.
        seq: u64,
        /// Acknowledged durable.
        durable: bool,
    },
    /// A structural operation that removes sequences `<= upto` (purge, compact) started.
    FloorStart {
        /// The last sequence it removes.
        upto: u64,
    },
    /// It returned (durably).
    FloorDone {
        /// The last sequence it removed.
        upto: u64,
    },
    /// `purge_ex` is about to run.
    Removing,
    /// `purge_ex` returned having durably removed these.
    Removed {
        /// The sequences.
        seqs: Vec<u64>,
    },
    /// `truncate(seq)` started.
    TruncateStart {
        /// The target.
        seq: u64,
    },
    /// `truncate(seq)` returned (durably).
    TruncateDone {
        /// The target.
        seq: u64,
    },
}

/// A named workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Its name (`seed`, `purge-then-append`, ...).
    pub name: &'static str,
    /// Its steps.
    pub steps: Vec<Step>,
    /// Block size to run it with (small ones force rollover).
    pub block_size: u64,
}

fn appends(subjects: &[&'static str], n: usize, size: u16) -> Vec<Step> {
    (0..n)
        .map(|i| Step::Append(subjects[i % subjects.len()], size))
        .collect()
}

/// The number of messages the seed scenario appends before its purge.
pub const SEED_K: u64 = 8;

/// The workloads of the crash matrix. `seed` is the scenario of the original bug.
pub fn workloads() -> Vec<Workload> {
    let cat = |parts: Vec<Vec<Step>>| parts.into_iter().flatten().collect::<Vec<_>>();
    let k = SEED_K as usize;
    vec![
        Workload {
            name: "seed",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["orders.eu"], k, 40),
                vec![Step::Sync, Step::Purge],
            ]),
            block_size: 1 << 20,
        },
        Workload {
            name: "purge-then-append",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["orders.eu"], 5, 40),
                vec![Step::Sync, Step::Purge],
                appends(&["orders.us"], 3, 40),
                vec![Step::Sync],
            ]),
            block_size: 1 << 20,
        },
        Workload {
            name: "purge-deletes-blocks",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["a.1", "a.2"], 30, 60),
                vec![
                    Step::Delete(3),
                    Step::Delete(11),
                    Step::Delete(20),
                    Step::Sync,
                    Step::Purge,
                ],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "purge-ex",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["a.1", "a.2", "b.1"], 12, 30),
                vec![
                    Step::Sync,
                    Step::PurgeEx("a.*", 0, 1),
                    Step::PurgeEx(">", 11, 0),
                    Step::Append("b.1", 30),
                ],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "compact",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["c"], 10, 30),
                vec![Step::Sync],
                // these roll into a new block that nothing has synced yet
                appends(&["c"], 8, 30),
                vec![Step::Compact(6)],
                appends(&["c"], 2, 30),
                vec![Step::Compact(20), Step::Append("c", 30)],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "truncate",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["t"], 24, 40),
                vec![Step::Sync, Step::Delete(5), Step::Truncate(10)],
                appends(&["t"], 2, 40),
                vec![Step::Sync],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "reopen",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["o"], 3, 40),
                vec![Step::Reopen],
                appends(&["o"], 2, 40),
                vec![Step::Sync],
            ]),
            block_size: 1 << 20,
        },
        Workload {
            name: "delete-front-block",
            // 97-byte records: block 1 holds ten messages and the first tombstone, so
            // deleting 1..=10 empties it while the other tombstones land in block 2
            steps: cat(vec![
                vec![Step::Open],
                appends(&["d"], 10, 60),
                vec![Step::Sync],
                (1..=9).map(Step::Delete).collect(),
                vec![Step::Erase(10), Step::Append("d", 60)],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "purge-pending-interval",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["p"], 4, 40),
                vec![Step::Sync],
                appends(&["p"], 4, 40),
                vec![Step::Tick(300_000), Step::Purge, Step::Append("p", 40)],
            ]),
            block_size: 1 << 20,
        },
        Workload {
            name: "rollover",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["r.1", "r.2"], 20, 100),
                vec![Step::Delete(1), Step::Delete(2), Step::Tick(2_000_000)],
                appends(&["r.1"], 10, 100),
                vec![Step::Sync],
            ]),
            block_size: 1024,
        },
    ]
}

/// The sync policies every workload runs under. The interval is 1 ms of the workload's
/// clock, which advances 250 µs per step.
pub fn policies() -> Vec<(&'static str, SyncPolicy)> {
    vec![
        ("always", SyncPolicy::Always),
        ("interval", SyncPolicy::Interval(Duration::from_millis(1))),
        ("never", SyncPolicy::Never),
    ]
}

/// Nanoseconds the workload clock moves per step.
pub const STEP_NS: i64 = 250_000;

/// The store configuration a run uses.
pub fn config(block_size: u64, sync: SyncPolicy, ablation: Ablation) -> Config {
    Config {
        block_size,
        sync,
        ablation,
        ..Config::default()
    }
}

/// The payload of the message with id `id`: the id in decimal, padded to `size` bytes.
pub fn payload(id: u64, size: u16) -> Vec<u8> {
    let mut p = format!("id{id:010}:").into_bytes();
    p.resize((size as usize).max(p.len()), b'.');
    p
}

fn payload_id(p: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(p.get(2..12)?).ok()?;
    if !p.starts_with(b"id") {
        return None;
    }
    s.parse().ok()
}

/// Runs workload steps on a live filesystem, noting what it learns. Holds the open store.
pub struct Runner<'b> {
    backend: &'b dyn Backend,
    cfg: Config,
    clock: ManualClock,
    store: Option<Box<dyn StreamOps>>,
    next_id: u64,
}

impl<'b> Runner<'b> {
    /// A runner for `cfg` on `backend`.
    pub fn new(backend: &'b dyn Backend, cfg: Config) -> Self {
        Runner {
            backend,
            cfg,
            clock: ManualClock::new(1_000_000_000),
            store: None,
            next_id: 0,
        }
    }

    fn store(&mut self) -> Result<&mut Box<dyn StreamOps>, String> {
        self.store
            .as_mut()
            .ok_or_else(|| "no store open (the workload must start with Open)".to_string())
    }

    /// Runs one step.
    pub fn step(
        &mut self,
        fs: &FaultFs,
        step: &Step,
        j: &mut Journal<Event>,
    ) -> Result<(), String> {
        self.clock.advance(STEP_NS);
        let always = self.cfg.sync == SyncPolicy::Always;
        let e = |e: Error| format!("{step:?}: {e}");
        match *step {
            Step::Open | Step::Reopen => {
                self.store = None;
                if *step == Step::Open {
                    self.next_id = 0;
                }
                self.store = Some(
                    self.backend
                        .open(fs.clone(), self.cfg.clone(), self.clock.clone())
                        .map_err(e)?,
                );
            }
            Step::Append(subject, size) => {
                let id = self.next_id;
                self.next_id += 1;
                let next = self.store()?.state().map_err(e)?.last_seq + 1;
                j.note(fs, Event::Appending { seq: next, id });
                let seq = self
                    .store()?
                    .append(subject, &payload(id, size))
                    .map_err(e)?;
                if seq != next {
                    return Err(format!("append got seq {seq}, expected {next}"));
                }
                j.note(
                    fs,
                    Event::Appended {
                        seq,
                        id,
                        durable: always,
                    },
                );
            }
            Step::Sync => {
                self.store()?.sync().map_err(e)?;
                j.note(fs, Event::Synced);
            }
            Step::Tick(ns) => {
                self.clock.advance(ns as i64);
                self.store()?.tick().map_err(e)?;
            }
            Step::Delete(seq) | Step::Erase(seq) => {
                j.note(fs, Event::Deleting { seq });
                if matches!(step, Step::Delete(_)) {
                    self.store()?.delete(seq).map_err(e)?;
                } else {
                    self.store()?.erase(seq).map_err(e)?;
                }
                j.note(
                    fs,
                    Event::Deleted {
                        seq,
                        durable: always,
                    },
                );
            }
            Step::Purge => {
                let upto = self.store()?.state().map_err(e)?.last_seq;
                j.note(fs, Event::FloorStart { upto });
                self.store()?.purge().map_err(e)?;
                j.note(fs, Event::FloorDone { upto });
            }
            Step::Compact(seq) => {
                j.note(fs, Event::FloorStart { upto: seq - 1 });
                self.store()?.compact(seq).map_err(e)?;
                j.note(fs, Event::FloorDone { upto: seq - 1 });
            }
            Step::PurgeEx(filter, up_to, keep) => {
                let st = self.store()?.state().map_err(e)?;
                let before: Vec<u64> = (st.first_seq..=st.last_seq)
                    .filter(|&s| self.store.as_mut().is_some_and(|x| x.get(s).is_ok()))
                    .collect();
                j.note(fs, Event::Removing);
                self.store()?.purge_ex(filter, up_to, keep).map_err(e)?;
                let seqs = before
                    .into_iter()
                    .filter(|&s| self.store.as_mut().is_some_and(|x| x.get(s).is_err()))
                    .collect();
                j.note(fs, Event::Removed { seqs });
            }
            Step::Truncate(seq) => {
                j.note(fs, Event::TruncateStart { seq });
                self.store()?.truncate(seq).map_err(e)?;
                j.note(fs, Event::TruncateDone { seq });
            }
        }
        Ok(())
    }
}

/// What the journal says must (and may) be found after a crash.
#[derive(Debug, Default)]
struct Expect {
    /// The recovered last sequence must be at least this.
    durable_last: u64,
    /// seq -> id: acknowledged durable and not (possibly) removed.
    must: BTreeMap<u64, u64>,
    /// seq -> ids that may legitimately be found there.
    may: BTreeMap<u64, Vec<u64>>,
    /// Appends and deletes not yet durable.
    pending_appends: Vec<(u64, u64)>,
    pending_deletes: Vec<u64>,
    /// Acknowledged messages a `purge_ex` in flight may or may not remove.
    held: BTreeMap<u64, u64>,
    /// A floor operation in flight: its `upto`, and the acknowledged messages it may remove
    /// (all of them must survive, or none).
    floor_in_flight: Option<(u64, BTreeMap<u64, u64>)>,
}

impl Expect {
    fn from_events(events: &[Event]) -> Expect {
        let mut x = Expect::default();
        for ev in events {
            match ev {
                Event::Appending { seq, id } => {
                    x.may.entry(*seq).or_default().push(*id);
                }
                Event::Appended { seq, id, durable } => {
                    if *durable {
                        x.must.insert(*seq, *id);
                        x.durable_last = x.durable_last.max(*seq);
                    } else {
                        x.pending_appends.push((*seq, *id));
                    }
                }
                Event::Synced => {
                    for (seq, id) in std::mem::take(&mut x.pending_appends) {
                        if x.may.get(&seq).is_some_and(|v| v.contains(&id)) {
                            x.must.insert(seq, id);
                            x.durable_last = x.durable_last.max(seq);
                        }
                    }
                    for seq in std::mem::take(&mut x.pending_deletes) {
                        x.may.remove(&seq);
                    }
                }
                Event::Deleting { seq } => {
                    // from here the tombstone may be durable
                    x.must.remove(seq);
                    x.pending_appends.retain(|(s, _)| s != seq);
                }
                Event::Deleted { seq, durable } => {
                    x.must.remove(seq);
                    x.pending_appends.retain(|(s, _)| s != seq);
                    if *durable {
                        x.may.remove(seq);
                    } else {
                        x.pending_deletes.push(*seq);
                    }
                }
                Event::FloorStart { upto } => {
                    // it may commit before the crash: nothing at or below it is owed on its
                    // own any more, but the old messages come back all together or not at all
                    let old = x.must.iter().filter(|(s, _)| *s <= upto);
                    let old = old.map(|(s, i)| (*s, *i)).collect();
                    x.floor_in_flight = Some((*upto, old));
                    x.must.retain(|s, _| s > upto);
                }
                Event::FloorDone { upto } => {
                    x.floor_in_flight = None;
                    x.may.retain(|s, _| s > upto);
                    x.must.retain(|s, _| s > upto);
                    x.pending_appends.retain(|(s, _)| s > upto);
                    x.durable_last = x.durable_last.max(*upto);
                }
                Event::Removing => {
                    // any live message may be among those removed until it returns
                    x.held = std::mem::take(&mut x.must);
                }
                Event::Removed { seqs } => {
                    x.must = std::mem::take(&mut x.held);
                    for s in seqs {
                        x.may.remove(s);
                        x.must.remove(s);
                    }
                }
                Event::TruncateStart { seq } => {
                    x.must.retain(|s, _| s <= seq);
                    x.durable_last = x.durable_last.min(*seq);
                }
                Event::TruncateDone { seq } => {
                    x.may.retain(|s, _| s <= seq);
                    x.pending_appends.retain(|(s, _)| s <= seq);
                    x.durable_last = *seq;
                }
            }
        }
        x
    }
}

/// Recovers a store from `image` with `backend` and checks the invariants against the events.
/// The message of an `Err` starts with `recovered first=F last=L;` whenever recovery worked.
pub fn check_image(
    backend: &dyn Backend,
    cfg: &Config,
    image: &FaultFs,
    events: &[Event],
) -> Result<(), String> {
    let x = Expect::from_events(events);
    let clock = ManualClock::new(4_000_000_000);
    // 4. recovery never errors on a crash image
    let mut s = backend
        .open(image.clone(), cfg.clone(), clock)
        .map_err(|e| format!("recovery failed: {e}"))?;
    let st = s.state().map_err(|e| format!("state: {e}"))?;
    let fail = |why: String| {
        format!(
            "recovered first={} last={}; {why}",
            st.first_seq, st.last_seq
        )
    };
    // 1./2. the sequence never goes back below what was durable
    if st.last_seq < x.durable_last {
        return Err(fail(format!(
            "expected last >= {} (sequence lost)",
            x.durable_last
        )));
    }
    // 3. every acknowledged message is there, with its payload
    for (&seq, &id) in &x.must {
        match s.get(seq) {
            Ok(m) if payload_id(&m.payload) == Some(id) => {}
            Ok(m) => {
                return Err(fail(format!(
                    "seq {seq} holds id {:?}, expected id {id}",
                    payload_id(&m.payload)
                )))
            }
            Err(e) => return Err(fail(format!("acknowledged seq {seq} missing: {e}"))),
        }
    }
    // 3./1. whatever is there was appended there and not durably removed
    let mut present = 0u64;
    let mut first_present = None;
    let hi = st.last_seq.min(st.first_seq.saturating_add(10_000));
    for seq in st.first_seq.max(1)..=hi {
        match s.get(seq) {
            Ok(m) => {
                present += 1;
                first_present.get_or_insert(seq);
                let id = payload_id(&m.payload);
                let ok = id.is_some_and(|id| x.may.get(&seq).is_some_and(|v| v.contains(&id)));
                if !ok {
                    return Err(fail(format!(
                        "seq {seq} (id {id:?}) is back although it was removed or never written"
                    )));
                }
            }
            Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(fail(format!("get({seq}): {e}"))),
        }
    }
    if present != st.msgs {
        return Err(fail(format!(
            "state says {} messages, {present} readable",
            st.msgs
        )));
    }
    if st.msgs > 0 && first_present != Some(st.first_seq) {
        return Err(fail(format!(
            "first_seq {} but first message at {first_present:?}",
            st.first_seq
        )));
    }
    if st.msgs == 0 && st.first_seq != st.last_seq + 1 && (st.first_seq, st.last_seq) != (0, 0) {
        return Err(fail("empty stream with first != last + 1".into()));
    }
    // 2. a floor operation in flight: the old state or the new one, never a mix
    if let Some((upto, old)) = &x.floor_in_flight {
        let there = old
            .iter()
            .filter(|(q, id)| {
                s.get(**q)
                    .is_ok_and(|m| payload_id(&m.payload) == Some(**id))
            })
            .count();
        if there > 0 && there < old.len() {
            return Err(fail(format!(
                "{there} of {} acknowledged messages <= {upto} survived: a mix of old and new",
                old.len()
            )));
        }
        if there == 0 && !old.is_empty() && st.last_seq < *upto {
            return Err(fail(format!(
                "acknowledged messages gone but last < {upto}: neither the old nor the new state"
            )));
        }
    }
    // 5. the next append continues the sequence
    let seq = s
        .append("check.next", b"after recovery")
        .map_err(|e| fail(format!("append after recovery failed: {e}")))?;
    if seq != st.last_seq + 1 {
        return Err(fail(format!(
            "next append got {seq}, expected {}",
            st.last_seq + 1
        )));
    }
    Ok(())
}

/// One cell of a matrix: a workload under a policy, an ablation and a model.
#[derive(Clone, Debug)]
pub struct CellSpec {
    /// The workload.
    pub workload: Workload,
    /// Policy name.
    pub policy: &'static str,
    /// The policy.
    pub sync: SyncPolicy,
    /// The ablation.
    pub ablation: Ablation,
    /// The crash model.
    pub model: Model,
    /// The exploration seed.
    pub seed: u64,
}

/// A violation in terms a reader understands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Example {
    /// Recovered first sequence (0 if recovery failed).
    pub recovered_first: u64,
    /// Recovered last sequence.
    pub recovered_last: u64,
    /// The last sequence the workload had made durable.
    pub expected_last: u64,
    /// The operation whose effect was lost (or the last one before the crash).
    pub op: String,
    /// Its call site, `file:line`.
    pub call_site: String,
    /// The checker's message.
    pub message: String,
}

impl Example {
    fn from_violation(v: &Violation, expected_last: u64) -> Example {
        let num = |key: &str| -> u64 {
            v.message
                .split([' ', ';'])
                .find_map(|w| w.strip_prefix(key))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let (op, call_site) = match v.blame.first() {
            Some(b) => (b.op.clone(), b.call_site.clone()),
            None => (v.op.clone(), v.call_site.clone()),
        };
        Example {
            recovered_first: num("first="),
            recovered_last: num("last="),
            expected_last,
            op,
            call_site,
            message: v.message.clone(),
        }
    }
}

/// The outcome of one cell.
#[derive(Clone, Debug)]
pub struct CellResult {
    /// What ran.
    pub spec: CellSpec,
    /// The backend.
    pub backend: &'static str,
    /// The explorer's report.
    pub report: Report,
    /// The first violation, explained.
    pub example: Option<Example>,
}

/// Explores one cell. `progress` is forwarded to the explorer.
pub fn run_cell(
    backend: &dyn Backend,
    spec: &CellSpec,
    progress: Option<fault_fs::ProgressFn>,
) -> CellResult {
    let cfg = config(spec.workload.block_size, spec.sync, spec.ablation);
    let mut ecfg = ExploreConfig::new(spec.model);
    ecfg.seed = spec.seed;
    ecfg.progress = progress;
    ecfg.max_violations = 20;
    let mut runner = Runner::new(backend, cfg.clone());
    let report = fault_fs::explore(
        &ecfg,
        &spec.workload.steps,
        |fs, step, j| runner.step(fs, step, j),
        |img, ctx: &CrashCtx<'_, Event>| check_image(backend, &cfg, img, ctx.events),
    );
    let example = report.violations.first().map(|v| {
        // what the workload had made durable at that crash point, for the reader
        let mut rec = Runner::new(backend, cfg.clone());
        let events = fault_fs::replay_image(
            &ecfg,
            &spec.workload.steps,
            |fs, step, j| rec.step(fs, step, j),
            v.crash_point,
            v.image,
        )
        .map(|r| r.events)
        .unwrap_or_default();
        Example::from_violation(v, Expect::from_events(&events).durable_last)
    });
    CellResult {
        spec: spec.clone(),
        backend: backend.name(),
        report,
        example,
    }
}

/// The seed scenario for every ablation × model: the demo's table.
pub fn demo_cells(seed: u64) -> Vec<CellSpec> {
    let w = workloads()
        .into_iter()
        .find(|w| w.name == "seed")
        .expect("seed");
    let mut out = Vec::new();
    for ablation in Ablation::ALL {
        for model in Model::ALL {
            out.push(CellSpec {
                workload: w.clone(),
                policy: "always",
                sync: SyncPolicy::Always,
                ablation,
                model,
                seed,
            });
        }
    }
    out
}

/// The whole crash matrix of the real store: every workload × policy × model.
pub fn matrix_cells(workload: Option<&str>, model: Option<Model>, seed: u64) -> Vec<CellSpec> {
    let mut out = Vec::new();
    for w in workloads() {
        if workload.is_some_and(|n| n != w.name) {
            continue;
        }
        for (pname, sync) in policies() {
            for m in Model::ALL {
                if model.is_some_and(|x| x != m) {
                    continue;
                }
                out.push(CellSpec {
                    workload: w.clone(),
                    policy: pname,
                    sync,
                    ablation: Ablation::Full,
                    model: m,
                    seed,
                });
            }
        }
    }
    out
}

/// A shared progress callback.
pub type Progress = Arc<dyn Fn(&fault_fs::Progress) + Send + Sync>;

impl fmt::Display for CellResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<24} {:<9} {:<18} {:<8} {:<7} {:>6} crash points {:>7} images {:>5} violations",
            self.spec.workload.name,
            self.spec.policy,
            self.spec.ablation.name(),
            self.spec.model,
            self.backend,
            self.report.crash_points,
            self.report.images,
            self.report.violation_count
        )?;
        if let Some(e) = &self.report.workload_error {
            write!(f, "\n    workload error: {e}")?;
        }
        Ok(())
    }
}

/// What the purge-proof issue expects of a demo cell (the seed scenario).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// Zero violations.
    Clean,
    /// Violations.
    Violations,
    /// Violations, among them a recovery at first=0, last=0 (the production bug).
    ZeroZero,
}

impl Expected {
    /// The expectation for `ablation` under `model`: the real store is clean under both models;
    /// without the tombstone fsync the stream comes back at 0,0 under both; without directory
    /// fsyncs it breaks under posix only (ordered makes namespace operations durable at once).
    pub fn of(ablation: Ablation, model: Model) -> Expected {
        match (ablation, model) {
            (Ablation::Full, _) | (Ablation::NoDirSync, Model::Ordered) => Expected::Clean,
            (Ablation::NoTombstoneSync, _) => Expected::ZeroZero,
            _ => Expected::Violations,
        }
    }

    /// Whether a result meets this expectation.
    pub fn met_by(self, r: &Report) -> bool {
        if r.workload_error.is_some() {
            return false;
        }
        match self {
            Expected::Clean => r.violation_count == 0,
            Expected::Violations => r.violation_count > 0,
            Expected::ZeroZero => r
                .violations
                .iter()
                .any(|v| v.message.starts_with("recovered first=0 last=0;")),
        }
    }
}
