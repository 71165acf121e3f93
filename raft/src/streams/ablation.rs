//! The state machine's ablation switches (feature `ablation`, tests only): each breaks crash
//! safety on purpose, so that `tests/stream_sm_crash.rs` can show its checker finds it.

use super::{gen_dir, read_snapshot, SmAblation, Stream, StreamCore, WORK};
use crate::error::{Error, Result};
use crate::meta;
use crate::sharedfs::{SharedFs, SubFs};
use crate::types::{store_config, LogId, StreamConfig};
use openraft::{BasicNode, StoredMembership};
use seqstore_core::{Fs, ManualClock, Store};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

const APPLIED_FILE: &str = "sm-applied";
const APPLIED_TMP: &str = "sm-applied.tmp";
const APPLIED_MAGIC: &[u8; 4] = b"SQSA";

/// What `AppliedAfterData` records after each batch.
#[derive(Serialize, Deserialize)]
struct Applied {
    last_applied: Option<LogId>,
    now: i64,
    last_membership: StoredMembership<u64, BasicNode>,
    gen: u64,
    streams: Vec<(String, StreamConfig)>,
}

impl<F: Fs> StreamCore<F> {
    /// [`StreamCore::open`] with one crash-safety step removed.
    pub fn open_ablated(fs: F, ablation: SmAblation) -> Result<Self> {
        let fs = SharedFs(Arc::new(fs));
        let mut core = match ablation {
            SmAblation::SnapshotUnsynced => Self::open_shared(fs)?,
            SmAblation::AppliedAfterData => Self::open_working(fs)?,
            SmAblation::SnapshotWithoutConsumers => Self::open_shared(fs)?,
        };
        core.durable = ablation != SmAblation::SnapshotUnsynced;
        core.applied_file = ablation == SmAblation::AppliedAfterData;
        core.drop_consumers = ablation == SmAblation::SnapshotWithoutConsumers;
        if core.drop_consumers {
            core.strip_consumers()?;
        }
        Ok(core)
    }

    /// Deletes every consumer of every stream: what a restore from a snapshot without them
    /// would hold.
    pub(super) fn strip_consumers(&mut self) -> Result<()> {
        for s in self.streams.values_mut() {
            for name in s.store.consumer_names() {
                s.store.consumer_delete(&name)?;
            }
        }
        Ok(())
    }

    /// Syncs every store, then records `last_applied` durably.
    pub(super) fn record_applied(&mut self) -> Result<()> {
        for s in self.streams.values_mut() {
            s.store.sync()?;
        }
        let rec = Applied {
            last_applied: self.last_applied,
            now: self.now,
            last_membership: self.last_membership.clone(),
            gen: self.gen,
            streams: self
                .streams
                .iter()
                .map(|(n, s)| (n.clone(), s.config))
                .collect(),
        };
        let body = postcard::to_stdvec(&rec).map_err(|e| Error::corrupt(APPLIED_FILE, e))?;
        let bytes = meta::frame(APPLIED_MAGIC, &body);
        meta::replace_file(&self.fs, APPLIED_FILE, APPLIED_TMP, &bytes, true)
    }

    /// Reopens the working copies `sm-applied` names, as they are on disk.
    fn open_working(fs: SharedFs<F>) -> Result<Self> {
        let Some(b) = meta::read_file(&fs, APPLIED_FILE)? else {
            return Self::open_shared(fs);
        };
        let body = meta::unframe(APPLIED_MAGIC, APPLIED_FILE, &b)?;
        let rec: Applied =
            postcard::from_bytes(body).map_err(|e| Error::corrupt(APPLIED_FILE, e))?;
        let _ = fs.create_dir(WORK);
        let _ = fs.create_dir(&gen_dir(rec.gen));
        let mut streams = BTreeMap::new();
        let clock = ManualClock::new(0);
        for (name, config) in rec.streams {
            let dir = format!("{}/{name}", gen_dir(rec.gen));
            let _ = fs.create_dir(&dir);
            let store = Store::builder(SubFs::new(fs.clone(), dir))
                .config(store_config(&config))
                .clock(clock.clone())
                .open()?;
            streams.insert(name, Stream { config, store });
        }
        let current = read_snapshot(&fs)?;
        clock.set(rec.now);
        Ok(StreamCore {
            fs,
            gen: rec.gen,
            streams,
            clock,
            now: rec.now,
            last_applied: rec.last_applied,
            last_membership: rec.last_membership,
            floor: super::floor_of(&current),
            current,
            built: 0,
            durable: true,
            applied_file: true,
            drop_consumers: false,
        })
    }
}
