//! [`GuestStore`]: the native `Store` API, run in the guest.

use std::path::Path;
use std::time::Duration;

use seqstore_core::{Clock, Config, Fs, RecoveryReport, StreamState};
use wasmtime::component::{Instance, ResourceAny, ResourceTable};
use wasmtime::Trap;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use crate::bindings::exports::seqstore::store::stream as wit;
use crate::convert::{
    from_wit_error, from_wit_report, from_wit_state, from_wit_subjects, to_wit_config,
};
use crate::engine::{self, Kind};
use crate::error::{Error, Result};
use crate::state::{DynFs, HostState, Limiter, NoFs};
use seqstore_wasm_engine::EPOCH_TICK;

mod queue;
mod stream;

/// Where [`GuestStore::open_dir`] mounts the host directory inside the guest (the same
/// convention as the `seqstore-guest` command: `wasmtime run --dir D::/data`).
pub const GUEST_DIR: &str = "/data";

/// How much of the guest's stderr is kept for trap messages.
const STDERR_CAP: usize = 64 << 10;

/// The host's batching of unsynced appends (see `queue.rs`) sends its queue once
/// it holds this many bytes of records: large enough that the boundary's cost per call is
/// lost in the messages' own, small enough to stay in the CPU caches.
const FLUSH_BYTES: usize = 64 << 10;

/// Most subjects the host remembers as valid (then it forgets them all and starts again): a
/// bound on the memory of [`ValidSubjects`].
const MAX_VALID_SUBJECTS: usize = 4096;

// FxHash: store-core's subject map's hasher, a few ns for a 16-byte subject
use seqstore_core::internal::FxHasher;

/// Subjects the host has checked with `validate_subject` and found valid. Validation is a pure
/// function of the string, so remembering it changes no result; it spares the queued path a
/// tokenization per append (store-core likewise skips it for subjects it holds).
type ValidSubjects = std::collections::HashSet<Box<str>, std::hash::BuildHasherDefault<FxHasher>>;

/// Appends to `buf` the message record the guest's store would write for this append at
/// sequence `seq` and timestamp `ts`: store-core's own encoder (crc32 with SIMD, natively).
#[inline]
fn encode_msg(buf: &mut Vec<u8>, seq: u64, ts: i64, subject: &str, headers: &[u8], payload: &[u8]) {
    seqstore_core::internal::record::encode(
        buf,
        seqstore_core::internal::record::Kind::Msg,
        0,
        seq,
        ts,
        subject.as_bytes(),
        headers,
        payload,
    );
}

/// Epoch ticks that stand for "no deadline" (far from overflowing `current + delta`).
const NO_DEADLINE: u64 = u64::MAX / 4;

/// The sandbox limits of one guest instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestOptions {
    /// Most linear memory the guest may use, in bytes (default 1 GiB). store-core keeps about
    /// 32 bytes per message in memory, plus its write buffer and read chunks.
    pub max_memory: usize,
    /// Longest one call may run before it is interrupted (default 60 s; `None`: no limit).
    /// Checked every 10 ms of guest execution; time spent in the host's filesystem calls
    /// counts but cannot be interrupted.
    pub call_timeout: Option<Duration>,
    /// Most files the guest may have open through the `fs` import at once (default 65 536).
    /// store-core keeps one open per block.
    pub max_open_files: usize,
}

impl Default for GuestOptions {
    fn default() -> Self {
        GuestOptions {
            max_memory: 1 << 30,
            call_timeout: Some(Duration::from_secs(60)),
            max_open_files: 1 << 16,
        }
    }
}

/// A seqstore [`Store`](seqstore_core::Store) running in a WASI sandbox.
///
/// The methods are the native store's, with the same names and value types. Differences:
/// - every method takes `&mut self` and returns [`Result`](crate::Result) (a call into the
///   guest can always trap), including `state`, `subjects_state` and `is_poisoned`;
/// - the store's own errors are [`Error::Store`] with store-core's variants; the sandbox's
///   are the other variants of [`Error`];
/// - after a trap ([`Error::is_trap`]) the instance is unusable: reopen.
pub struct GuestStore {
    store: wasmtime::Store<HostState>,
    guest: crate::bindings::Store,
    /// Only the test hooks look exports up by name; the store's are in `guest`.
    #[cfg_attr(not(test), allow(dead_code))]
    instance: Instance,
    /// The guest's store resource; `None` once closed.
    handle: Option<ResourceAny>,
    config: Config,
    report: RecoveryReport,
    /// Epoch ticks each call may run.
    deadline: u64,
    call_timeout: Option<Duration>,
    /// A call trapped: the instance's state is undefined.
    dead: bool,
    /// Reused buffer for `append-packed`.
    pack: Vec<u8>,
    /// Whether the config lets the host batch appends: `SyncPolicy::Never` and no limits
    /// (where the host can predict every outcome of an append exactly).
    batchable: bool,
    /// What the host knows of the guest store while it may batch: `(last_seq, last_ts)`,
    /// counting the queued records, and that the store is open and not poisoned. `None` after
    /// any call that may have changed either (every call but the read-only ones); the next
    /// append then goes to the guest directly and tells the host again.
    basis: Option<(u64, i64)>,
    /// The store's lock, held for the guest (`None`: a root outside the preopen, which the
    /// guest refuses). Released after `Drop` has sent the queue and closed the guest's store.
    _lock: Option<seqstore_core::fs::FsLock>,
    /// Appends acknowledged but not yet sent: whole records, encoded here, back to back.
    queue: Vec<u8>,
    /// How many records `queue` holds.
    queued: u32,
    /// Subjects already checked (the queued path's subject check).
    valid_subjects: ValidSubjects,
    /// Messages that went through the queue (the tests check the batched path ran).
    #[cfg(test)]
    pub(crate) batched: u64,
    /// Messages appended encoded one at a time (`append-encoded-one`).
    #[cfg(test)]
    pub(crate) encoded_one: u64,
}

impl std::fmt::Debug for GuestStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestStore")
            .field("config", &self.config)
            .field("dead", &self.dead)
            .field("closed", &self.handle.is_none())
            .finish_non_exhaustive()
    }
}

/// Where the guest store lives.
pub(crate) enum Backing {
    /// The host's `Fs`, through the import.
    Fs(Box<dyn DynFs>),
    /// A host directory preopened as [`GUEST_DIR`]; the guest opens the store at `root`
    /// (normally [`GUEST_DIR`] itself).
    Dir {
        host: std::path::PathBuf,
        root: String,
    },
}

/// A trap as the host's error. `state` tells whether the memory cap caused it.
pub(crate) fn classify(e: wasmtime::Error, state: &HostState, timeout: Option<Duration>) -> Error {
    if let Some(requested) = state.limiter.refused {
        return Error::MemoryLimit {
            limit: state.limiter.max_memory,
            requested,
        };
    }
    if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return Error::Timeout {
            limit: timeout.unwrap_or_default(),
        };
    }
    let mut msg = format!("{e:?}");
    let stderr = state.stderr.contents();
    if !stderr.is_empty() {
        msg.push_str("\nguest stderr:\n");
        msg.push_str(String::from_utf8_lossy(&stderr).trim_end());
    }
    Error::Trap(msg)
}

/// The lock of the store the guest opens at `root` inside the preopen of `host`: the host
/// path `root` names, if it lies inside the preopen. A root outside it takes no lock here:
/// the guest cannot reach it and refuses it.
fn lock_guest_root(host: &Path, root: &str) -> Result<Option<seqstore_core::fs::FsLock>> {
    let rel = match root.strip_prefix(GUEST_DIR) {
        Some("") => "",
        Some(rest) => match rest.strip_prefix('/') {
            Some(rel) => rel,
            None => return Ok(None),
        },
        None => return Ok(None),
    };
    if rel.split('/').any(|c| c == "..") {
        return Ok(None);
    }
    let dir = host.join(rel);
    let fs = seqstore_fs::HostFs::open(&dir).map_err(|source| {
        Error::Store(seqstore_core::Error::Io {
            op: "open root",
            path: dir.display().to_string(),
            source,
        })
    })?;
    seqstore_core::internal::lock_store(&fs)
        .map(Some)
        .map_err(Error::Store)
}

/// One call into the guest: given the component's exports, the wasmtime store and the guest
/// store's handle, it calls an export and returns what the call returned (a trap is the
/// `Err`).
pub(crate) trait GuestCall<W>:
    FnOnce(&wit::GuestStore<'_>, &mut wasmtime::Store<HostState>, ResourceAny) -> wasmtime::Result<W>
{
}

impl<W, F> GuestCall<W> for F where
    F: FnOnce(
        &wit::GuestStore<'_>,
        &mut wasmtime::Store<HostState>,
        ResourceAny,
    ) -> wasmtime::Result<W>
{
}

/// The wasmtime store of one guest instance, under `opts`' sandbox limits: the memory cap
/// (its limiter), the open-file cap, and the call deadline, set for the first call (an epoch
/// deadline that traps).
pub(crate) fn sandboxed_store(
    engine: &wasmtime::Engine,
    wasi: WasiCtx,
    fs: Box<dyn DynFs>,
    clock: Box<dyn Clock>,
    stderr: MemoryOutputPipe,
    opts: &GuestOptions,
) -> wasmtime::Store<HostState> {
    let state = HostState {
        wasi,
        table: ResourceTable::new(),
        fs,
        clock,
        limiter: Limiter {
            max_memory: opts.max_memory,
            refused: None,
        },
        stderr,
        open_files: 0,
        max_open_files: opts.max_open_files,
        #[cfg(test)]
        write_syncs: Default::default(),
    };
    let mut store = wasmtime::Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.epoch_deadline_trap();
    store.set_epoch_deadline(deadline_ticks(opts.call_timeout));
    store
}

pub(crate) fn deadline_ticks(timeout: Option<Duration>) -> u64 {
    match timeout {
        // Round up, plus one tick: the current tick may be about to end.
        Some(t) => (t.as_nanos() / EPOCH_TICK.as_nanos()) as u64 + 2,
        None => NO_DEADLINE,
    }
}

impl GuestStore {
    /// Opens (or creates, recovering) the store at the root of `fs`, in a new guest instance
    /// with the default [`GuestOptions`]. The guest reaches `fs` only through the `fs` import;
    /// it has no WASI filesystem. Like `Store::builder(fs).clock(c).open()`.
    pub fn from_fs<F: Fs + 'static>(fs: F, cfg: Config, clock: Box<dyn Clock>) -> Result<Self> {
        Self::from_fs_with(fs, cfg, clock, &GuestOptions::default())
    }

    /// [`GuestStore::from_fs`] with explicit sandbox limits.
    pub fn from_fs_with<F: Fs + 'static>(
        fs: F,
        cfg: Config,
        clock: Box<dyn Clock>,
        opts: &GuestOptions,
    ) -> Result<Self> {
        Self::open_inner(Kind::Store, Backing::Fs(Box::new(fs)), cfg, clock, opts)
    }

    /// Opens (or creates, recovering) the store in the existing host directory `dir`, which
    /// the guest gets as the WASI preopen [`GUEST_DIR`] and uses through host-fs's WASI
    /// backend. Nothing outside `dir` is reachable from the guest.
    pub fn open_dir(dir: impl AsRef<Path>, cfg: Config, clock: Box<dyn Clock>) -> Result<Self> {
        Self::open_dir_with(dir, cfg, clock, &GuestOptions::default())
    }

    /// [`GuestStore::open_dir`] with explicit sandbox limits.
    pub fn open_dir_with(
        dir: impl AsRef<Path>,
        cfg: Config,
        clock: Box<dyn Clock>,
        opts: &GuestOptions,
    ) -> Result<Self> {
        let backing = Backing::Dir {
            host: dir.as_ref().to_path_buf(),
            root: GUEST_DIR.to_string(),
        };
        Self::open_inner(Kind::Store, backing, cfg, clock, opts)
    }

    /// Instantiates the component `kind` and opens the store in it.
    pub(crate) fn open_inner(
        kind: Kind,
        backing: Backing,
        cfg: Config,
        clock: Box<dyn Clock>,
        opts: &GuestOptions,
    ) -> Result<Self> {
        #[cfg(feature = "ablation")]
        let kind = ablated_kind(kind, &cfg);
        let pre = engine::store_pre(kind).map_err(Error::Setup)?;
        let stderr = MemoryOutputPipe::new(STDERR_CAP);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stderr(stderr.clone());
        // The host holds the store's lock for the guest's whole life, taken before the guest
        // recovers anything; the guest's own `Fs::lock` then takes nothing.
        let (fs, storage, lock): (Box<dyn DynFs>, wit::Storage, _) = match backing {
            Backing::Fs(fs) => {
                let lock = fs.lock_store().map_err(Error::Store)?;
                (fs, wit::Storage::ImportedFs, Some(lock))
            }
            Backing::Dir { host, root } => {
                // Report a missing directory the way host-fs does, as the store's I/O error.
                if let Err(source) = std::fs::metadata(&host) {
                    return Err(Error::Store(seqstore_core::Error::Io {
                        op: "open root",
                        path: host.display().to_string(),
                        source,
                    }));
                }
                let lock = lock_guest_root(&host, &root)?;
                // Must come before `preopened_dir`, which captures the setting: file I/O
                // then runs on this thread instead of a tokio blocking thread per call.
                wasi.allow_blocking_current_thread(true);
                wasi.preopened_dir(&host, GUEST_DIR, FsPerms::ReadWrite)
                    .map_err(|e| Error::Setup(format!("preopening {}: {e:?}", host.display())))?;
                (Box::new(NoFs), wit::Storage::PreopenedDir(root), lock)
            }
        };
        let mut store = sandboxed_store(pre.engine(), wasi.build(), fs, clock, stderr, opts);
        let deadline = deadline_ticks(opts.call_timeout);
        let trap = |e: wasmtime::Error, store: &wasmtime::Store<HostState>| {
            classify(e, store.data(), opts.call_timeout)
        };
        let instance = pre
            .instance_pre()
            .instantiate(&mut store)
            .map_err(|e| trap(e, &store))?;
        let guest = crate::bindings::Store::new(&mut store, &instance)
            .map_err(|e| Error::Setup(format!("component exports: {e:?}")))?;
        #[cfg(feature = "ablation")]
        if kind == Kind::TestHooks {
            set_ablation(&instance, &mut store, &cfg)
                .map_err(|e| trap(e, &store))?
                .map_err(|e| Error::Store(seqstore_core::Error::InvalidConfig(e)))?;
        }
        let iface = guest.seqstore_store_stream().store();
        let handle = iface
            .call_open(&mut store, &storage, &to_wit_config(&cfg))
            .map_err(|e| trap(e, &store))?
            .map_err(|e| Error::Store(from_wit_error(e)))?;
        store.set_epoch_deadline(deadline);
        let report = iface
            .call_recovery_report(&mut store, handle)
            .map_err(|e| trap(e, &store))?;
        Ok(GuestStore {
            store,
            guest,
            instance,
            handle: Some(handle),
            report: from_wit_report(report),
            deadline,
            call_timeout: opts.call_timeout,
            dead: false,
            pack: Vec::new(),
            batchable: cfg.sync == seqstore_core::SyncPolicy::Never
                && cfg.limits == seqstore_core::Limits::default(),
            config: cfg,
            basis: None,
            queue: Vec::new(),
            queued: 0,
            valid_subjects: ValidSubjects::default(),
            #[cfg(test)]
            batched: 0,
            #[cfg(test)]
            encoded_one: 0,
            _lock: lock,
        })
    }

    /// Runs one guest call that may change the store, after sending the queued appends: the
    /// host no longer knows the store's state afterwards.
    pub(crate) fn raw<W>(&mut self, f: impl GuestCall<W>) -> Result<W> {
        let r = self.raw_read(f);
        self.basis = None;
        r
    }

    /// [`Self::raw`] for a call that changes nothing in the store (neither its last sequence
    /// and timestamp nor whether it is poisoned): what the host knows stays true.
    pub(crate) fn raw_read<W>(&mut self, f: impl GuestCall<W>) -> Result<W> {
        self.flush_queue()?;
        self.raw_unqueued(f)
    }

    /// [`Self::raw_read`] for calls that return the store's `result<_, error>`.
    fn call_read<T>(&mut self, f: impl GuestCall<Result<T, wit::Error>>) -> Result<T> {
        self.raw_read(f)?
            .map_err(|e| Error::Store(from_wit_error(e)))
    }

    /// Runs one guest call with a fresh deadline; a trap kills the instance.
    fn raw_unqueued<W>(&mut self, f: impl GuestCall<W>) -> Result<W> {
        if self.dead {
            return Err(Error::Dead);
        }
        let Some(handle) = self.handle else {
            return Err(Error::Store(seqstore_core::Error::Closed));
        };
        self.store.set_epoch_deadline(self.deadline);
        let iface = self.guest.seqstore_store_stream().store();
        f(&iface, &mut self.store, handle).map_err(|e| {
            self.dead = true;
            classify(e, self.store.data(), self.call_timeout)
        })
    }

    /// [`Self::raw`] for calls that return the store's `result<_, error>`.
    fn call<T>(&mut self, f: impl GuestCall<Result<T, wit::Error>>) -> Result<T> {
        self.raw(f)?.map_err(|e| Error::Store(from_wit_error(e)))
    }

    /// What recovery found and did at open.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether a call trapped, leaving this instance unusable (reopen it).
    pub fn is_trapped(&self) -> bool {
        self.dead
    }

    /// Syncs, writes `index.db`, and closes the store, then frees the instance.
    pub fn close(mut self) -> Result<()> {
        // The queued appends first; their error, if any, is the one returned, but the store is
        // closed either way (a poisoned store's close refuses to sync and frees it).
        let flushed = self.flush_queue();
        let r = self
            .raw_unqueued(|g, s, h| g.call_close(s, h))
            .and_then(|r| r.map_err(|e| Error::Store(from_wit_error(e))));
        // The guest consumed the handle (even when close failed); Drop must not drop it again.
        self.handle = None;
        flushed.and(r)
    }

    /// Test hooks: the component's `test-hooks` export `name`, typed.
    #[cfg(test)]
    pub(crate) fn test_hook<P, R>(&mut self, name: &str) -> wasmtime::component::TypedFunc<P, R>
    where
        P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower + Send + Sync,
        R: wasmtime::component::ComponentNamedList + wasmtime::component::Lift + Send + Sync,
    {
        hook_func(&self.instance, &mut self.store, name)
    }

    /// Test hooks: calls `f` like any other guest call (deadline, trap classification).
    #[cfg(test)]
    pub(crate) fn test_call<R>(
        &mut self,
        f: impl FnOnce(&mut wasmtime::Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R> {
        self.raw(|_, s, _| f(s))
    }
}

/// The component a store with `cfg` runs in: an ablated one in the test-hooks component, the
/// only one that has the switches.
#[cfg(feature = "ablation")]
fn ablated_kind(kind: Kind, cfg: &Config) -> Kind {
    match cfg.ablation {
        seqstore_core::Ablation::Full => kind,
        _ => Kind::TestHooks,
    }
}

/// Sets `cfg`'s ablation switch in a test-hooks instance, for the store it opens next; the
/// guest's refusal of the name is the inner error.
#[cfg(feature = "ablation")]
fn set_ablation(
    instance: &Instance,
    store: &mut wasmtime::Store<HostState>,
    cfg: &Config,
) -> wasmtime::Result<std::result::Result<(), String>> {
    let set =
        hook_func::<(String,), (std::result::Result<(), String>,)>(instance, store, "set-ablation");
    Ok(set.call(&mut *store, (cfg.ablation.name(),))?.0)
}

/// The test-hooks component's export `name`, typed. Only a test-hooks instance has them; the
/// callers (the sandbox tests, an ablated open) run one.
#[cfg(any(test, feature = "ablation"))]
fn hook_func<P, R>(
    instance: &Instance,
    store: &mut wasmtime::Store<HostState>,
    name: &str,
) -> wasmtime::component::TypedFunc<P, R>
where
    P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower + Send + Sync,
    R: wasmtime::component::ComponentNamedList + wasmtime::component::Lift + Send + Sync,
{
    let iface = instance
        .get_export_index(&mut *store, None, "seqstore:store/test-hooks@0.1.0")
        .expect("test-hooks export (a test-hooks component)");
    let func = instance
        .get_export_index(&mut *store, Some(&iface), name)
        .expect("test hook");
    instance
        .get_typed_func(&mut *store, func)
        .expect("test hook type")
}

impl Drop for GuestStore {
    fn drop(&mut self) {
        // Run the guest store's destructor, as dropping a native store would: it writes out
        // the append buffer (without an fsync). Skipped after a trap: the instance's memory
        // may be inconsistent, and nothing it still held was acknowledged as durable.
        // The queued appends first, as a native store's drop writes out its buffer; an error
        // has nowhere to go (as natively).
        let _ = self.flush_queue();
        if let (Some(handle), false) = (self.handle.take(), self.dead) {
            self.store.set_epoch_deadline(self.deadline);
            let _ = handle.resource_drop(&mut self.store);
        }
    }
}
