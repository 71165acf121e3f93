//! The key-value state machine, with snapshots kept durably in a file.
//!
//! The map lives in memory and is rebuilt on start from the last snapshot file plus the log
//! (openraft re-applies committed entries after `last_applied`). A snapshot (built here or
//! installed from the leader) is written crash-atomically to `sm-snapshot` (temp file, fsync,
//! rename, directory fsync) before it becomes the current one, so logs openraft purges after
//! it are never needed again. Snapshot format: the crate's framed file (`SQRS` magic,
//! version, crc) holding postcard of [`SnapshotFile`].

use crate::error::{Error, Result};
use crate::meta;
use crate::types::{Entry, LogId, Request, Response, TypeConfig};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder,
    SnapshotMeta, StorageError, StoredMembership,
};
use seqstore_core::Fs;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex, MutexGuard};

const SNAP_FILE: &str = "sm-snapshot";
const SNAP_TMP: &str = "sm-snapshot.tmp";
const SNAP_MAGIC: &[u8; 4] = b"SQRS";

/// What the state machine is: the map and how far it has applied.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct KvState {
    /// The last entry applied.
    pub last_applied: Option<LogId>,
    /// The last membership applied.
    pub last_membership: StoredMembership<u64, BasicNode>,
    /// The data.
    pub kv: BTreeMap<String, String>,
}

/// The snapshot file: its metadata and the serialized [`KvState`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotFile {
    /// openraft's snapshot metadata.
    pub meta: SnapshotMeta<u64, BasicNode>,
    /// postcard of the [`KvState`] at `meta.last_log_id`.
    pub data: Vec<u8>,
}

struct Inner<F: Fs> {
    fs: F,
    state: KvState,
    current: Option<SnapshotFile>,
    /// Snapshots built by this process (for unique ids).
    built: u64,
    /// False only for the ablation switch (snapshots written without fsyncs).
    durable: bool,
}

/// The key-value state machine. Clones share it (the node's API reads through a clone).
pub struct StateMachine<F: Fs + 'static> {
    inner: Arc<Mutex<Inner<F>>>,
}

impl<F: Fs + 'static> Clone for StateMachine<F> {
    fn clone(&self) -> Self {
        StateMachine {
            inner: Arc::clone(&self.inner),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn sm_err(e: Error) -> StorageError<u64> {
    e.to_storage(ErrorSubject::StateMachine, ErrorVerb::Write)
}

fn decode_state(bytes: &[u8]) -> Result<KvState> {
    postcard::from_bytes(bytes).map_err(|e| Error::corrupt("snapshot data", e))
}

impl<F: Fs + 'static> StateMachine<F> {
    /// Opens the state machine on `fs` (its own directory), restoring the last snapshot.
    pub fn open(fs: F) -> Result<Self> {
        let current = match meta::read_file(&fs, SNAP_FILE)? {
            Some(b) => {
                let body = meta::unframe(SNAP_MAGIC, SNAP_FILE, &b)?;
                let f: SnapshotFile =
                    postcard::from_bytes(body).map_err(|e| Error::corrupt(SNAP_FILE, e))?;
                Some(f)
            }
            None => None,
        };
        let state = match &current {
            Some(f) => decode_state(&f.data)?,
            None => KvState::default(),
        };
        Ok(StateMachine {
            inner: Arc::new(Mutex::new(Inner {
                fs,
                state,
                current,
                built: 0,
                durable: true,
            })),
        })
    }

    /// **Breaks durability on purpose** (feature `ablation`, tests only): snapshots are
    /// written without their fsyncs, the negative control of the snapshot crash test.
    #[cfg(feature = "ablation")]
    pub fn open_with_unsynced_snapshots(fs: F) -> Result<Self> {
        let sm = Self::open(fs)?;
        lock(&sm.inner).durable = false;
        Ok(sm)
    }

    /// The value of `key` as applied here.
    pub fn get(&self, key: &str) -> Option<String> {
        lock(&self.inner).state.kv.get(key).cloned()
    }

    /// A copy of the whole applied state.
    pub fn state(&self) -> KvState {
        lock(&self.inner).state.clone()
    }

    /// Writes `snap` durably and makes it current (on the blocking pool).
    async fn store_snapshot(&self, snap: SnapshotFile, state: Option<KvState>) -> Result<()> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let mut g = lock(&inner);
            let body = postcard::to_stdvec(&snap).map_err(|e| Error::corrupt("snapshot", e))?;
            let bytes = meta::frame(SNAP_MAGIC, &body);
            meta::replace_file(&g.fs, SNAP_FILE, SNAP_TMP, &bytes, g.durable)?;
            if let Some(s) = state {
                g.state = s;
            }
            g.current = Some(snap);
            Ok(())
        })
        .await
        .map_err(|e| Error::Join(e.to_string()))?
    }
}

/// Builds snapshots of a [`StateMachine`].
pub struct SnapshotBuilder<F: Fs + 'static> {
    sm: StateMachine<F>,
}

impl<F: Fs + 'static> RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder<F> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let (meta, data) = {
            let mut g = lock(&self.sm.inner);
            g.built += 1;
            let st = &g.state;
            let id = match st.last_applied {
                Some(l) => format!("{}-{}-{}", l.leader_id, l.index, g.built),
                None => format!("none-{}", g.built),
            };
            let meta = SnapshotMeta {
                last_log_id: st.last_applied,
                last_membership: st.last_membership.clone(),
                snapshot_id: id,
            };
            let data = postcard::to_stdvec(st).map_err(|e| sm_err(Error::corrupt("state", e)))?;
            (meta, data)
        };
        let file = SnapshotFile {
            meta: meta.clone(),
            data: data.clone(),
        };
        self.sm.store_snapshot(file, None).await.map_err(sm_err)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl<F: Fs + 'static> RaftStateMachine<TypeConfig> for StateMachine<F> {
    type SnapshotBuilder = SnapshotBuilder<F>;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let g = lock(&self.inner);
        Ok((g.state.last_applied, g.state.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut g = lock(&self.inner);
        let mut out = Vec::new();
        for e in entries {
            g.state.last_applied = Some(e.log_id);
            let r = match e.payload {
                EntryPayload::Blank => Response::default(),
                EntryPayload::Normal(Request::Set { key, value }) => Response {
                    previous: g.state.kv.insert(key, value),
                },
                EntryPayload::Membership(m) => {
                    g.state.last_membership = StoredMembership::new(Some(e.log_id), m);
                    Response::default()
                }
            };
            out.push(r);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder<F> {
        SnapshotBuilder { sm: self.clone() }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let data = snapshot.into_inner();
        let state = decode_state(&data).map_err(sm_err)?;
        let file = SnapshotFile {
            meta: meta.clone(),
            data,
        };
        self.store_snapshot(file, Some(state)).await.map_err(sm_err)
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let g = lock(&self.inner);
        Ok(g.current.as_ref().map(|f| Snapshot {
            meta: f.meta.clone(),
            snapshot: Box::new(Cursor::new(f.data.clone())),
        }))
    }
}
