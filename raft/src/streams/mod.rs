//! The state machine: seqstore streams, one [`Store`] per stream.
//!
//! **Where `last_applied` lives.** In the snapshot file, beside the streams' data, and nowhere
//! else. The snapshot file (`sm-snapshot`) is the state machine's only durable state: the
//! last applied log id, the last membership, and every stream's config and
//! `Store::snapshot_to` image, in one framed file replaced crash-atomically (temp file,
//! fsync, rename, directory fsync). The streams the state machine serves live in
//! `work/<generation>/<stream>/`, stores that never fsync an append (`SyncPolicy::Never`):
//! a working copy. [`StreamCore::open`] removes `work/` and rebuilds every stream from the
//! snapshot file with `restore`, and reports the snapshot's log id as `last_applied`;
//! openraft re-applies the committed entries after it (they are in the log: openraft purges
//! the log only behind a snapshot that `build_snapshot` or `install_snapshot` returned, and
//! both return only once the file is durable).
//!
//! Why not trust the working copy and make re-application idempotent: after a power cut a
//! store that does not fsync every write comes back with *some* of the entries applied after
//! the last durable point — any subset the filesystem kept, not a prefix (under the posix
//! model a later block can survive an earlier one's loss). Recognising "this append is
//! already there" by sequence fails on such a hole, and the other operations are not
//! idempotent against later ones: a `Purge` re-applied after an append it preceded removes
//! that append; a stream that discards new messages refuses an append the first time and
//! accepts it on re-application when a later (already applied) delete made room. Recording
//! the applied index per entry crash-atomically with the data would need a store fsync and
//! a metadata fsync per entry. (The ablation `AppliedAfterData` is the rejected design; the
//! crash test finds it applying an append twice.) Rebuilding from the snapshot makes the recovered state exactly
//! "the snapshot, then the log after it, each entry once", by construction; the price is a
//! restart that restores the snapshot and replays the log since it (bounded by openraft's
//! snapshot policy), and no fsync on the apply path (the raft log is already durable).
//!
//! **Snapshots.** `build_snapshot` syncs each stream (`snapshot_to` does) and writes the file.
//! `install_snapshot` restores the new streams into a fresh generation directory, then
//! replaces the file (the commit point), then switches to the new generation and removes the
//! old one: a power cut before the rename recovers the old state, after it the new one, never
//! a mix (recovery reads only the file).
//!
//! **Determinism.** Every store runs on one [`ManualClock`], the state machine's time: before
//! a request is applied it moves to the request's `ts` (the leader's clock) if that is later,
//! so it never goes back, and it is part of the snapshot. Every timestamp a store writes, every
//! age it computes and every per-message ttl it hides on reads follows the log, never a
//! follower's clock; see [`crate::types`]. Stores are opened with the clock at 0, so that
//! opening one expires nothing (the limits are re-enforced on open), then it is set back.

#[cfg(feature = "ablation")]
mod ablation;
mod apply;
mod consumer;
mod machine;

pub use machine::{StreamSnapshotBuilder, StreamStateMachine};

use crate::error::{Error, Result};
use crate::meta;
use crate::sharedfs::{SharedFs, SubFs};
use crate::types::{store_config, ApplyError, ConsumerInfo, Entry, LogId, Response, StreamConfig};
use openraft::{BasicNode, EntryPayload, SnapshotMeta, StoredMembership};
use seqstore_core::{Fs, ManualClock, Store, StoredMsg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::sync::Arc;

const SNAP_FILE: &str = "sm-snapshot";
const SNAP_TMP: &str = "sm-snapshot.tmp";
const SNAP_MAGIC: &[u8; 4] = b"SQST";
const WORK: &str = "work";

/// Durability ablation switches of the state machine (feature `ablation`, tests only): **each
/// breaks crash safety on purpose**, the negative controls of `tests/stream_sm_crash.rs`.
#[cfg(feature = "ablation")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SmAblation {
    /// The snapshot file is replaced without its two fsyncs.
    SnapshotUnsynced,
    /// The design the module doc rejects: the working copies are trusted, and `last_applied`
    /// is recorded after each applied batch (every store synced, then `sm-applied` replaced
    /// durably); open reopens the working copies and re-application starts after the recorded
    /// index, with no idempotence check. A crash after some of a batch reached the disk
    /// applies it again on top of what survived.
    AppliedAfterData,
    /// A snapshot that does not carry the consumers: every restore (open, install) drops
    /// them, so the deliveries and acks before the snapshot are lost on that replica.
    SnapshotWithoutConsumers,
}

/// The snapshot file: openraft's metadata and the snapshot data ([`Image`], postcard).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotFile {
    /// openraft's snapshot metadata.
    pub meta: SnapshotMeta<u64, BasicNode>,
    /// postcard of the [`Image`] at `meta.last_log_id`: what followers are sent.
    #[serde(with = "crate::bytes")]
    pub data: Vec<u8>,
}

/// The whole state machine at one log id.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Image {
    /// The last entry applied.
    pub last_applied: Option<LogId>,
    /// The state machine's time (the latest request `ts` applied).
    pub now: i64,
    /// The last membership applied.
    pub last_membership: StoredMembership<u64, BasicNode>,
    /// Every stream.
    pub streams: Vec<StreamImage>,
}

/// One stream in an [`Image`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StreamImage {
    /// Its name.
    pub name: String,
    /// Its config.
    pub config: StreamConfig,
    /// `Store::snapshot_to` of its store.
    #[serde(with = "crate::bytes")]
    pub data: Vec<u8>,
}

/// One stream's messages and counters, for comparisons between replicas.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamDump {
    /// Its config.
    pub config: StreamConfig,
    /// `(first_seq, last_seq, msgs, last_ts)`.
    pub counters: (u64, u64, u64, i64),
    /// Every stored message, by sequence.
    pub msgs: Vec<DumpMsg>,
    /// Every consumer's config and state, by name.
    pub consumers: BTreeMap<String, ConsumerInfo>,
}

/// One message of a [`StreamDump`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpMsg {
    /// Its sequence.
    pub seq: u64,
    /// Its subject.
    pub subject: String,
    /// Its timestamp.
    pub ts: i64,
    /// Its headers.
    #[serde(with = "crate::bytes")]
    pub headers: Vec<u8>,
    /// Its payload.
    #[serde(with = "crate::bytes")]
    pub payload: Vec<u8>,
}

pub(crate) struct Stream<F: Fs> {
    config: StreamConfig,
    store: Store<SubFs<F>>,
}

/// The synchronous state machine under [`StreamStateMachine`]'s lock.
pub struct StreamCore<F: Fs> {
    fs: SharedFs<F>,
    gen: u64,
    streams: BTreeMap<String, Stream<F>>,
    /// Every store's clock: the state machine's time.
    clock: ManualClock,
    now: i64,
    last_applied: Option<LogId>,
    last_membership: StoredMembership<u64, BasicNode>,
    current: Option<SnapshotFile>,
    /// How far `current` (durable) covers the log.
    floor: crate::floor::SnapshotFloor,
    built: u64,
    durable: bool,
    /// The `AppliedAfterData` ablation: record `last_applied` after every batch.
    #[cfg(feature = "ablation")]
    applied_file: bool,
    /// The `SnapshotWithoutConsumers` ablation: drop the consumers of every restore.
    #[cfg(feature = "ablation")]
    drop_consumers: bool,
}

fn floor_of(current: &Option<SnapshotFile>) -> crate::floor::SnapshotFloor {
    let f = crate::floor::SnapshotFloor::default();
    f.raise(current.as_ref().and_then(|c| c.meta.last_log_id));
    f
}

fn decode_image(bytes: &[u8]) -> Result<Image> {
    postcard::from_bytes(bytes).map_err(|e| Error::corrupt("snapshot data", e))
}

fn gen_dir(gen: u64) -> String {
    format!("{WORK}/{gen}")
}

fn ignore_missing(r: std::io::Result<()>, op: &'static str, path: &str) -> Result<()> {
    match r {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(Error::io(op, path, e)),
        _ => Ok(()),
    }
}

impl<F: Fs> StreamCore<F> {
    /// Opens the state machine on `fs`: the snapshot file's state, streams rebuilt from it.
    pub fn open(fs: F) -> Result<Self> {
        Self::open_shared(SharedFs(Arc::new(fs)))
    }

    fn open_shared(fs: SharedFs<F>) -> Result<Self> {
        let current = read_snapshot(&fs)?;
        let image = match &current {
            Some(f) => decode_image(&f.data)?,
            None => Image::default(),
        };
        ignore_missing(fs.remove_dir_all(WORK), "remove_dir_all", WORK)?;
        fs.create_dir(WORK)
            .map_err(|e| Error::io("create_dir", WORK, e))?;
        let clock = ManualClock::new(0);
        let streams = materialize(&fs, 0, &image, &clock)?;
        clock.set(image.now);
        Ok(StreamCore {
            fs,
            gen: 0,
            streams,
            clock,
            now: image.now,
            last_applied: image.last_applied,
            last_membership: image.last_membership,
            floor: floor_of(&current),
            current,
            built: 0,
            durable: true,
            #[cfg(feature = "ablation")]
            applied_file: false,
            #[cfg(feature = "ablation")]
            drop_consumers: false,
        })
    }

    /// The last applied log id and membership.
    pub fn applied(&self) -> (Option<LogId>, StoredMembership<u64, BasicNode>) {
        (self.last_applied, self.last_membership.clone())
    }

    /// The current snapshot, if any.
    pub fn current_snapshot(&self) -> Option<&SnapshotFile> {
        self.current.as_ref()
    }

    /// What follows a batch of applied entries: nothing (the raft log is the durable record),
    /// but for an ablation.
    pub(crate) fn after_batch(&mut self) -> Result<()> {
        #[cfg(feature = "ablation")]
        if self.applied_file {
            return self.record_applied();
        }
        Ok(())
    }

    /// Applies one entry. `Err` only for a failure of the node (I/O, corruption): the state
    /// machine must not go on then.
    pub fn apply(&mut self, e: Entry) -> Result<Response> {
        self.last_applied = Some(e.log_id);
        match e.payload {
            EntryPayload::Blank => Ok(Response::None),
            EntryPayload::Membership(m) => {
                self.last_membership = StoredMembership::new(Some(e.log_id), m);
                Ok(Response::None)
            }
            EntryPayload::Normal(req) => self.apply_request(req),
        }
    }

    fn create_stream(&mut self, name: String, config: StreamConfig) -> Result<Response> {
        if !apply::valid_name(&name) {
            return Ok(Response::Err(ApplyError::InvalidStreamName(name)));
        }
        if self.streams.contains_key(&name) {
            return Ok(Response::Err(ApplyError::StreamExists(name)));
        }
        let dir = format!("{}/{name}", gen_dir(self.gen));
        // a leftover of a refused create or a deleted stream of this generation
        ignore_missing(self.fs.remove_dir_all(&dir), "remove_dir_all", &dir)?;
        self.fs
            .create_dir(&dir)
            .map_err(|e| Error::io("create_dir", &dir, e))?;
        let opened = Store::builder(SubFs::new(self.fs.clone(), dir))
            .config(store_config(&config))
            .clock(self.clock.clone())
            .open();
        match opened {
            Ok(store) => {
                let s = Stream { config, store };
                self.streams.insert(name, s);
                Ok(Response::Done)
            }
            Err(e) => apply::answer(Err(e)),
        }
    }

    fn delete_stream(&mut self, name: &str) -> Result<Response> {
        let Some(s) = self.streams.remove(name) else {
            return Ok(Response::Err(ApplyError::UnknownStream(name.into())));
        };
        drop(s.store);
        let dir = format!("{}/{name}", gen_dir(self.gen));
        ignore_missing(self.fs.remove_dir_all(&dir), "remove_dir_all", &dir)?;
        Ok(Response::Done)
    }

    /// The state as snapshot data (each stream synced and exported).
    fn image(&mut self) -> Result<Image> {
        let mut streams = Vec::with_capacity(self.streams.len());
        for (name, s) in &mut self.streams {
            let mut data = Vec::new();
            s.store.snapshot_to(&mut data)?;
            streams.push(StreamImage {
                name: name.clone(),
                config: s.config,
                data,
            });
        }
        Ok(Image {
            last_applied: self.last_applied,
            now: self.now,
            last_membership: self.last_membership.clone(),
            streams,
        })
    }

    /// Builds a snapshot of the applied state and makes it durable and current.
    pub fn build_snapshot(&mut self) -> Result<SnapshotFile> {
        let image = self.image()?;
        self.built += 1;
        let id = match image.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id, l.index, self.built),
            None => format!("none-{}", self.built),
        };
        let meta = SnapshotMeta {
            last_log_id: image.last_applied,
            last_membership: image.last_membership.clone(),
            snapshot_id: id,
        };
        let data = postcard::to_stdvec(&image).map_err(|e| Error::corrupt("snapshot", e))?;
        let file = SnapshotFile { meta, data };
        self.write_snapshot(&file)?;
        self.floor.raise(file.meta.last_log_id);
        self.current = Some(file.clone());
        Ok(file)
    }

    fn write_snapshot(&self, file: &SnapshotFile) -> Result<()> {
        let body = postcard::to_stdvec(file).map_err(|e| Error::corrupt("snapshot", e))?;
        let bytes = meta::frame(SNAP_MAGIC, &body);
        meta::replace_file(&self.fs, SNAP_FILE, SNAP_TMP, &bytes, self.durable)
    }

    /// Replaces the whole state with a snapshot's (a follower behind the leader's log): the
    /// new streams are restored beside the old ones, the file replaced (the commit point),
    /// then the old streams are dropped.
    pub fn install_snapshot(&mut self, file: SnapshotFile) -> Result<()> {
        let r = self.install(file);
        if r.is_err() {
            self.floor.fail();
        }
        r
    }

    /// The floor raised whenever a snapshot file became durable (see [`crate::floor`]).
    pub fn snapshot_floor(&self) -> crate::floor::SnapshotFloor {
        self.floor.clone()
    }

    fn install(&mut self, file: SnapshotFile) -> Result<()> {
        let image = decode_image(&file.data)?;
        if image.last_applied != file.meta.last_log_id {
            return Err(Error::corrupt(
                "snapshot",
                "its data and its metadata name different log ids",
            ));
        }
        let gen = self.gen + 1;
        self.clock.set(0);
        let made = materialize(&self.fs, gen, &image, &self.clock);
        self.clock.set(self.now);
        let streams = match made {
            Ok(s) => s,
            Err(e) => {
                let _ = self.fs.remove_dir_all(&gen_dir(gen));
                return Err(e);
            }
        };
        self.write_snapshot(&file)?;
        let old = std::mem::replace(&mut self.streams, streams);
        drop(old);
        // the old generation is garbage now; open removes `work/` whole anyway
        let _ = self.fs.remove_dir_all(&gen_dir(self.gen));
        self.gen = gen;
        self.now = image.now;
        self.clock.set(image.now);
        self.last_applied = image.last_applied;
        self.last_membership = image.last_membership;
        self.floor.raise(file.meta.last_log_id);
        self.current = Some(file);
        #[cfg(feature = "ablation")]
        if self.drop_consumers {
            self.strip_consumers()?;
        }
        self.after_batch()
    }

    /// The stream names.
    pub fn stream_names(&self) -> Vec<String> {
        self.streams.keys().cloned().collect()
    }

    /// Runs `f` on stream `name`'s config and store, `None` if there is no such stream. For
    /// the node's read API (`get`, `next_matching`, `state`, ...) only: a write through this
    /// store would bypass the log and make this replica diverge from the others.
    pub fn read_stream<T>(
        &mut self,
        name: &str,
        f: impl FnOnce(&StreamConfig, &mut Store<SubFs<F>>) -> T,
    ) -> Option<T> {
        let s = self.streams.get_mut(name)?;
        Some(f(&s.config, &mut s.store))
    }

    /// Message `seq` of `stream`, `None` if either does not exist.
    pub fn get(&mut self, stream: &str, seq: u64) -> Result<Option<StoredMsg>> {
        let Some(s) = self.streams.get_mut(stream) else {
            return Ok(None);
        };
        match s.store.get(seq) {
            Ok(m) => Ok(Some(m)),
            Err(seqstore_core::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Consumer `name` of `stream` (config and state, in line with the stream), `None` if
    /// either does not exist.
    pub fn consumer_info(&self, stream: &str, name: &str) -> Result<Option<ConsumerInfo>> {
        match self.streams.get(stream) {
            Some(s) => consumer::info(s, name),
            None => Ok(None),
        }
    }

    /// The consumer names of `stream`, `None` if it does not exist.
    pub fn consumer_names(&self, stream: &str) -> Option<Vec<String>> {
        self.streams.get(stream).map(|s| s.store.consumer_names())
    }

    /// Every stream's messages and counters.
    pub fn dump(&mut self) -> Result<BTreeMap<String, StreamDump>> {
        let mut out = BTreeMap::new();
        for (name, s) in &mut self.streams {
            out.insert(name.clone(), dump_stream(s)?);
        }
        Ok(out)
    }
}

fn dump_stream<F: Fs>(s: &mut Stream<F>) -> Result<StreamDump> {
    let st = s.store.state();
    let mut msgs = Vec::new();
    let mut from = st.first_seq.max(1);
    while let Some(m) = s.store.next_matching(">", from)? {
        from = m.seq + 1;
        msgs.push(DumpMsg {
            seq: m.seq,
            subject: m.subject,
            ts: m.ts,
            headers: m.headers,
            payload: m.payload,
        });
    }
    let mut consumers = BTreeMap::new();
    for name in s.store.consumer_names() {
        if let Some(c) = consumer::info(s, &name)? {
            consumers.insert(name, c);
        }
    }
    Ok(StreamDump {
        config: s.config,
        counters: (st.first_seq, st.last_seq, st.msgs, st.last_ts),
        msgs,
        consumers,
    })
}

/// Restores every stream of `image` into `work/<gen>/`, each reopened on `clock` (which the
/// caller keeps at 0 meanwhile: opening a store re-enforces its limits, and must expire
/// nothing the log did not).
fn materialize<F: Fs>(
    fs: &SharedFs<F>,
    gen: u64,
    image: &Image,
    clock: &ManualClock,
) -> Result<BTreeMap<String, Stream<F>>> {
    let root = gen_dir(gen);
    fs.create_dir(&root)
        .map_err(|e| Error::io("create_dir", &root, e))?;
    let mut out = BTreeMap::new();
    for si in &image.streams {
        let dir = format!("{root}/{}", si.name);
        if !apply::valid_name(&si.name) || out.contains_key(&si.name) {
            return Err(Error::corrupt("snapshot", format!("stream {:?}", si.name)));
        }
        fs.create_dir(&dir)
            .map_err(|e| Error::io("create_dir", &dir, e))?;
        let sub = SubFs::new(fs.clone(), dir);
        let cfg = store_config(&si.config);
        // restored and opened on the state machine's clock
        let (store, _) = Store::builder(sub)
            .config(cfg)
            .clock(clock.clone())
            .restore(&si.data[..])?;
        let s = Stream {
            config: si.config,
            store,
        };
        out.insert(si.name.clone(), s);
    }
    Ok(out)
}

fn read_snapshot<F: Fs>(fs: &SharedFs<F>) -> Result<Option<SnapshotFile>> {
    let Some(b) = meta::read_file(fs, SNAP_FILE)? else {
        return Ok(None);
    };
    let body = meta::unframe(SNAP_MAGIC, SNAP_FILE, &b)?;
    let f = postcard::from_bytes(body).map_err(|e| Error::corrupt(SNAP_FILE, e))?;
    Ok(Some(f))
}
