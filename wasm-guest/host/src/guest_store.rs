//! [`GuestStore`]: the native `Store` API, run in the guest.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use store_core::{Clock, Config, Fs, RecoveryReport, StoredMsg, StreamState};
use wasmtime::component::{Instance, ResourceAny, ResourceTable};
use wasmtime::Trap;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::bindings::exports::seqstore::store::stream as wit;
use crate::convert::{
    from_wit_error, from_wit_msg, from_wit_report, from_wit_state, from_wit_subjects, to_wit_config,
};
use crate::engine::{self, Kind, EPOCH_TICK};
use crate::error::{Error, Result};
use crate::state::{DynFs, HostState, Limiter, NoFs};

mod stream15;

/// Where [`GuestStore::open_dir`] mounts the host directory inside the guest (the same
/// convention as the `seqstore-guest` command: `wasmtime run --dir D::/data`).
pub const GUEST_DIR: &str = "/data";

/// How much of the guest's stderr is kept for trap messages.
const STDERR_CAP: usize = 64 << 10;

/// The host's batching of unsynced appends (see [`GuestStore::append`]) sends its queue once
/// it holds this many bytes of records: large enough that the boundary's cost per call
/// (~0.5 µs) is lost in the message's own, small enough to stay in the CPU caches.
const FLUSH_BYTES: usize = 64 << 10;

/// Most subjects the host remembers as valid (then it forgets them all and starts again): a
/// bound on the memory of [`ValidSubjects`].
const MAX_VALID_SUBJECTS: usize = 4096;

/// FxHash (rustc's, as store-core's subject map): a few ns for a 16-byte subject.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 =
                (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Subjects the host has checked with `validate_subject` and found valid. Validation is a pure
/// function of the string, so remembering it changes no result; it spares the queued path a
/// ~60 ns tokenization per append (store-core likewise skips it for subjects it holds).
type ValidSubjects = std::collections::HashSet<Box<str>, std::hash::BuildHasherDefault<FxHasher>>;

/// Appends to `buf` the message record the guest's store would write for this append at
/// sequence `seq` and timestamp `ts`: store-core's own encoder (crc32 with SIMD, natively).
#[inline]
fn encode_msg(buf: &mut Vec<u8>, seq: u64, ts: i64, subject: &str, headers: &[u8], payload: &[u8]) {
    store_core::record::encode(
        buf,
        store_core::record::Kind::Msg,
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

/// A seqstore [`Store`](store_core::Store) running in a WASI sandbox.
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
    /// it has no WASI filesystem. Like `Store::open_with_clock`.
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
        let (fs, storage): (Box<dyn DynFs>, wit::Storage) = match backing {
            Backing::Fs(fs) => (fs, wit::Storage::ImportedFs),
            Backing::Dir { host, root } => {
                // Report a missing directory the way host-fs does, as the store's I/O error.
                if let Err(source) = std::fs::metadata(&host) {
                    return Err(Error::Store(store_core::Error::Io {
                        op: "open root",
                        path: host.display().to_string(),
                        source,
                    }));
                }
                // Must come before `preopened_dir`, which captures the setting: file I/O
                // then runs on this thread instead of a tokio blocking thread per call.
                wasi.allow_blocking_current_thread(true);
                wasi.preopened_dir(&host, GUEST_DIR, FsPerms::ReadWrite)
                    .map_err(|e| Error::Setup(format!("preopening {}: {e:?}", host.display())))?;
                (Box::new(NoFs), wit::Storage::PreopenedDir(root))
            }
        };
        let state = HostState {
            wasi: wasi.build(),
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
        let mut store = wasmtime::Store::new(pre.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        let deadline = deadline_ticks(opts.call_timeout);
        store.set_epoch_deadline(deadline);
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
                .map_err(|e| Error::Store(store_core::Error::InvalidConfig(e)))?;
        }
        let iface = guest.seqstore_store_stream().store();
        let handle = iface
            .call_open(&mut store, &storage, to_wit_config(&cfg))
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
            batchable: cfg.sync == store_core::SyncPolicy::Never
                && cfg.limits == store_core::Limits::default(),
            config: cfg,
            basis: None,
            queue: Vec::new(),
            queued: 0,
            valid_subjects: ValidSubjects::default(),
            #[cfg(test)]
            batched: 0,
            #[cfg(test)]
            encoded_one: 0,
        })
    }

    /// Runs one guest call that may change the store, after sending the queued appends: the
    /// host no longer knows the store's state afterwards.
    pub(crate) fn raw<W>(
        &mut self,
        f: impl FnOnce(
            &wit::GuestStore<'_>,
            &mut wasmtime::Store<HostState>,
            ResourceAny,
        ) -> wasmtime::Result<W>,
    ) -> Result<W> {
        let r = self.raw_read(f);
        self.basis = None;
        r
    }

    /// [`Self::raw`] for a call that changes nothing in the store (neither its last sequence
    /// and timestamp nor whether it is poisoned): what the host knows stays true.
    pub(crate) fn raw_read<W>(
        &mut self,
        f: impl FnOnce(
            &wit::GuestStore<'_>,
            &mut wasmtime::Store<HostState>,
            ResourceAny,
        ) -> wasmtime::Result<W>,
    ) -> Result<W> {
        self.flush_queue()?;
        self.raw_unqueued(f)
    }

    /// [`Self::raw_read`] for calls that return the store's `result<_, error>`.
    fn call_read<T>(
        &mut self,
        f: impl FnOnce(
            &wit::GuestStore<'_>,
            &mut wasmtime::Store<HostState>,
            ResourceAny,
        ) -> wasmtime::Result<Result<T, wit::Error>>,
    ) -> Result<T> {
        self.raw_read(f)?
            .map_err(|e| Error::Store(from_wit_error(e)))
    }

    /// Runs one guest call with a fresh deadline; a trap kills the instance.
    fn raw_unqueued<W>(
        &mut self,
        f: impl FnOnce(
            &wit::GuestStore<'_>,
            &mut wasmtime::Store<HostState>,
            ResourceAny,
        ) -> wasmtime::Result<W>,
    ) -> Result<W> {
        if self.dead {
            return Err(Error::Dead);
        }
        let Some(handle) = self.handle else {
            return Err(Error::Store(store_core::Error::Closed));
        };
        self.store.set_epoch_deadline(self.deadline);
        let iface = self.guest.seqstore_store_stream().store();
        f(&iface, &mut self.store, handle).map_err(|e| {
            self.dead = true;
            classify(e, self.store.data(), self.call_timeout)
        })
    }

    /// [`Self::raw`] for calls that return the store's `result<_, error>`.
    fn call<T>(
        &mut self,
        f: impl FnOnce(
            &wit::GuestStore<'_>,
            &mut wasmtime::Store<HostState>,
            ResourceAny,
        ) -> wasmtime::Result<Result<T, wit::Error>>,
    ) -> Result<T> {
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

    /// Appends a message; returns its sequence. Under `SyncPolicy::Always` it is durable
    /// when this returns.
    ///
    /// # Batching
    /// Under `SyncPolicy::Never` with no limits (`Limits::default()`), where nothing an append
    /// does is durable before a later call anyway, the host batches appends: it checks the
    /// message with store-core's own functions (subject, sizes), predicts its sequence
    /// (`last_seq + 1`) and timestamp (the clock read now, at this call, never below the last
    /// one), encodes the record natively with store-core's encoder (so its crc32 is computed
    /// with SIMD) and queues it; the queue goes to the guest in one call
    /// (`Store::append_encoded` per record) once it holds 64 KiB, and before any other call
    /// (reads included) and at close and drop. The results are those of one guest call per
    /// append: same sequences, timestamps, errors (a message the host's checks refuse goes to
    /// the guest alone, which returns its own error) and files, byte for byte.
    ///
    /// Under the other policies, or with limits, the host checks, predicts and encodes the
    /// message the same way but sends it at once (`append-encoded-one`): the guest appends it
    /// exactly as `append` (its syncs, limits and errors are the store's own), and only the
    /// checksum is computed natively instead of in wasm (a quarter of the guest's CPU time in
    /// a durable append).
    ///
    /// One difference: an **I/O error** met while the guest applies the queue (creating the
    /// next block file, writing the store's write buffer out) is returned by the call that
    /// sent the queue — a later append, a read, `sync`, `close` — rather than by the append
    /// that hit it, and it **poisons** the store (`Error::Poisoned` for every later write until
    /// reopened), since the queued messages after it had their sequences handed out already;
    /// they are lost, as unsynced messages are in a crash. Native store-core has the same
    /// shape with its own write buffer, which also reports a failed write on a later call
    /// (and poisons). A trap loses the queue with the instance.
    pub fn append(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> Result<u64> {
        if let Some(seq) = self.try_queue(subject, headers, payload)? {
            return Ok(seq);
        }
        // One buffer instead of three lists: each list costs a call into the guest's
        // allocator, which dominated the cost of a buffered append.
        let (Ok(sl), Ok(hl)) = (u32::try_from(subject.len()), u32::try_from(headers.len())) else {
            // Far beyond any limit; let the store refuse it with its own error.
            return self.call(|g, s, h| g.call_append(s, h, subject, headers, payload));
        };
        let mut buf = std::mem::take(&mut self.pack);
        buf.clear();
        buf.extend_from_slice(subject.as_bytes());
        buf.extend_from_slice(headers);
        buf.extend_from_slice(payload);
        let r = self.call(|g, s, h| g.call_append_packed(s, h, sl, hl, &buf));
        self.keep_pack(buf);
        let a = r?;
        // An append that succeeded left the store open, not poisoned, and at this sequence and
        // timestamp (limits may have removed old messages; that changes neither).
        self.basis = Some((a.seq, a.last_ts));
        Ok(a.seq)
    }

    /// Queues the append, or under a policy that does not batch sends it encoded at once, if
    /// the host can predict everything about it (see [`Self::append`]): `Ok(Some(seq))` when
    /// queued or appended, `Ok(None)` when the guest must see it as it is (the queue was not
    /// touched), `Err` when sending a full queue failed or the encoded append failed (its
    /// own error, as `append`'s).
    fn try_queue(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> Result<Option<u64>> {
        let Some((last_seq, last_ts)) = self.basis.filter(|_| !self.dead) else {
            // Unknown state, or a trapped instance (the direct path returns `Dead`).
            return Ok(None);
        };
        // `Store::append`'s admission check, the same function (open and not poisoned:
        // `basis`; limits: a store with limits does not batch). A message that fails it goes
        // to the guest, which returns the store's own error (after the queue, in order). A
        // subject the store already holds is not checked there, so a store recovered with a
        // subject that this check refuses still behaves natively; a name that passed once is
        // remembered here, as the store would hold it.
        let known = self.valid_subjects.contains(subject);
        let admitted = store_core::Admission::new(&self.config)
            .message(subject, known, headers.len(), payload.len())
            .and_then(|()| store_core::Admission::next_seq(last_seq));
        let Ok(seq) = admitted else {
            self.flush_queue()?;
            return Ok(None);
        };
        if !known {
            if self.valid_subjects.len() >= MAX_VALID_SUBJECTS {
                self.valid_subjects.clear();
            }
            self.valid_subjects.insert(subject.into());
        }
        // The timestamp the guest's clock import would return during its own append call now.
        let ts = self.store.data().clock.now_ns().max(last_ts);
        if !self.batchable {
            return self
                .append_encoded_now(seq, ts, subject, headers, payload)
                .map(Some);
        }
        encode_msg(&mut self.queue, seq, ts, subject, headers, payload);
        self.queued += 1;
        self.basis = Some((seq, ts));
        #[cfg(test)]
        {
            self.batched += 1;
        }
        if self.queue.len() >= FLUSH_BYTES {
            self.flush_queue()?;
        }
        Ok(Some(seq))
    }

    /// The append of a message the host checked and predicted (`seq`, `ts`) under a policy
    /// that does not batch: encoded here, appended by the guest now, exactly as `append`; only
    /// the encoding (and its crc) is the host's. Any error is this append's own. Out of line:
    /// the queued path around it is the hot one.
    #[inline(never)]
    fn append_encoded_now(
        &mut self,
        seq: u64,
        ts: i64,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<u64> {
        let mut buf = std::mem::take(&mut self.pack);
        buf.clear();
        encode_msg(&mut buf, seq, ts, subject, headers, payload);
        let r = self.call(|g, s, h| g.call_append_encoded_one(s, h, &buf));
        self.keep_pack(buf);
        let a = r?;
        if a.seq != seq || a.last_ts != ts {
            // The guest checks the record's sequence and timestamp against the store's, so
            // this cannot happen unless host and guest run different rules.
            return Err(Error::Store(store_core::Error::InvalidArgument(format!(
                "encoded append: the guest stored seq {} ts {}, the host predicted seq {seq} \
                 ts {ts}",
                a.seq, a.last_ts
            ))));
        }
        self.basis = Some((seq, ts));
        #[cfg(test)]
        {
            self.encoded_one += 1;
        }
        Ok(seq)
    }

    /// Sends the queued appends to the guest (see [`Self::append`]). An error is that of the
    /// first record the guest refused (the store is then poisoned) or the sandbox's.
    fn flush_queue(&mut self) -> Result<()> {
        if self.queued == 0 {
            return Ok(());
        }
        let (data, n) = (std::mem::take(&mut self.queue), self.queued);
        self.queued = 0;
        let expected = self.basis;
        let r = self.raw_unqueued(|g, s, h| g.call_append_encoded(s, h, &data));
        if data.capacity() <= 4 * FLUSH_BYTES {
            self.queue = data;
            self.queue.clear();
        }
        let out = r.inspect_err(|_| self.basis = None)?;
        if let Some(e) = out.error {
            self.basis = None;
            return Err(Error::Store(from_wit_error(e)));
        }
        if out.applied != n || Some((out.last_seq, out.last_ts)) != expected {
            // The guest checks each record's sequence and timestamp, so this cannot happen
            // unless host and guest run different store-core rules; never let it pass.
            self.basis = None;
            return Err(Error::Store(store_core::Error::InvalidArgument(format!(
                "batched appends: the guest applied {} of {n}, ending at seq {} ts {}, the host \
                 predicted {expected:?}",
                out.applied, out.last_seq, out.last_ts
            ))));
        }
        Ok(())
    }

    /// Appends several messages `(subject, headers, payload)`, exactly as that many
    /// [`append`](Self::append) calls in a row would (one that fails does not stop the
    /// others): one result per message, under any sync policy. Under `SyncPolicy::Never`
    /// without limits that is what it does, since plain `append` batches there on its own
    /// (the host encodes, and computes the checksums natively); under the other policies the
    /// batch goes to the guest in a single call, and must fit in the guest's memory cap along
    /// with the store.
    pub fn append_batch<'a, I>(&mut self, msgs: I) -> Result<Vec<store_core::Result<u64>>>
    where
        I: IntoIterator<Item = (&'a str, &'a [u8], &'a [u8])>,
    {
        if self.batchable {
            let mut out = Vec::new();
            for (subject, headers, payload) in msgs {
                match self.append(subject, headers, payload) {
                    Ok(seq) => out.push(Ok(seq)),
                    Err(Error::Store(e)) => out.push(Err(e)),
                    // The sandbox's own errors (a trap, a limit): the instance is gone.
                    Err(e) => return Err(e),
                }
            }
            return Ok(out);
        }
        let mut buf = std::mem::take(&mut self.pack);
        buf.clear();
        let mut lens = Vec::new();
        for (subject, headers, payload) in msgs {
            let len = |b: &[u8]| u32::try_from(b.len());
            match (len(subject.as_bytes()), len(headers), len(payload)) {
                (Ok(subject_len), Ok(headers_len), Ok(payload_len)) => {
                    lens.push(wit::PackedMsg {
                        subject_len,
                        headers_len,
                        payload_len,
                    });
                    buf.extend_from_slice(subject.as_bytes());
                    buf.extend_from_slice(headers);
                    buf.extend_from_slice(payload);
                }
                _ => {
                    // Not representable; far beyond every limit of the store.
                    self.keep_pack(buf);
                    return Err(Error::Store(store_core::Error::TooLarge {
                        what: "batched message",
                        len: (subject.len() + headers.len() + payload.len()) as u64,
                        max: u64::from(u32::MAX),
                    }));
                }
            }
        }
        let r = self.raw(|g, s, h| g.call_append_batch(s, h, &lens, &buf));
        self.keep_pack(buf);
        Ok(r?.into_iter().map(|r| r.map_err(from_wit_error)).collect())
    }

    /// Keeps the packing buffer for the next append, unless one large message grew it.
    fn keep_pack(&mut self, buf: Vec<u8>) {
        if buf.capacity() <= 1 << 20 {
            self.pack = buf;
        }
    }

    /// The message with sequence `seq`.
    pub fn get(&mut self, seq: u64) -> Result<StoredMsg> {
        self.call_read(|g, s, h| g.call_get(s, h, seq))
            .map(from_wit_msg)
    }

    /// The newest message stored under `subject` (a literal subject).
    pub fn last_for_subject(&mut self, subject: &str) -> Result<Option<StoredMsg>> {
        self.call_read(|g, s, h| g.call_last_for_subject(s, h, subject))
            .map(|m| m.map(from_wit_msg))
    }

    /// The first message at or after `from_seq` whose subject matches `filter`.
    pub fn next_matching(&mut self, filter: &str, from_seq: u64) -> Result<Option<StoredMsg>> {
        self.call_read(|g, s, h| g.call_next_matching(s, h, filter, from_seq))
            .map(|m| m.map(from_wit_msg))
    }

    /// The last message at or before `from_seq` whose subject matches `filter`
    /// (`Store::prev_matching`).
    pub fn prev_matching(&mut self, filter: &str, from_seq: u64) -> Result<Option<StoredMsg>> {
        self.prev_matching_multi(&[filter], from_seq)
    }

    /// The last message at or before `from_seq` whose subject matches any of `filters`
    /// (`Store::prev_matching_multi`; an empty list: any subject).
    pub fn prev_matching_multi(
        &mut self,
        filters: &[&str],
        from_seq: u64,
    ) -> Result<Option<StoredMsg>> {
        let filters: Vec<String> = filters.iter().map(|f| f.to_string()).collect();
        self.call_read(|g, s, h| g.call_prev_matching(s, h, &filters, from_seq))
            .map(|m| m.map(from_wit_msg))
    }

    /// Up to `max_msgs` messages at or after `from_seq` matching `filter`, within `max_bytes`
    /// (`Store::get_batch`), in one call into the guest: the guest returns their records
    /// (`get-batch-records`, one list of bytes, checked there) and they are decoded here,
    /// natively. `max_msgs` above `u32::MAX` asks for `u32::MAX`.
    pub fn get_batch(
        &mut self,
        from_seq: u64,
        filter: &str,
        max_msgs: usize,
        max_bytes: u64,
    ) -> Result<Vec<StoredMsg>> {
        let n = u32::try_from(max_msgs).unwrap_or(u32::MAX);
        let recs = self
            .call_read(|g, s, h| g.call_get_batch_records(s, h, from_seq, filter, n, max_bytes))?;
        crate::convert::decode_records(&recs).map_err(Error::Store)
    }

    /// The first sequence with a timestamp at or after `ts` (`Store::seq_from_time`).
    pub fn seq_from_time(&mut self, ts: i64) -> Result<u64> {
        self.call_read(|g, s, h| g.call_seq_from_time(s, h, ts))
    }

    /// How many messages at or after `from_seq` match `filter`, and the last sequence
    /// (`Store::num_pending`).
    pub fn num_pending(
        &mut self,
        from_seq: u64,
        filter: &str,
        last_per_subject: bool,
    ) -> Result<(u64, u64)> {
        self.num_pending_multi(from_seq, &[filter], last_per_subject)
    }

    /// `num_pending` for any of `filters` (`Store::num_pending_multi`).
    pub fn num_pending_multi(
        &mut self,
        from_seq: u64,
        filters: &[&str],
        last_per_subject: bool,
    ) -> Result<(u64, u64)> {
        let filters: Vec<String> = filters.iter().map(|f| f.to_string()).collect();
        self.call_read(|g, s, h| g.call_num_pending(s, h, from_seq, &filters, last_per_subject))
    }

    /// Message counts per subject for the subjects matching `filter`.
    pub fn subjects_state(&mut self, filter: &str) -> Result<BTreeMap<String, u64>> {
        self.call_read(|g, s, h| g.call_subjects_state(s, h, filter))
            .map(from_wit_subjects)
    }

    /// The stream's counters.
    pub fn state(&mut self) -> Result<StreamState> {
        self.raw_read(|g, s, h| g.call_state(s, h))
            .map(from_wit_state)
    }

    /// Deletes message `seq` (a tombstone, durable per the sync policy).
    pub fn delete(&mut self, seq: u64) -> Result<()> {
        self.call(|g, s, h| g.call_delete(s, h, seq))
    }

    /// Deletes message `seq` and overwrites its bytes on disk with zeros.
    pub fn erase(&mut self, seq: u64) -> Result<()> {
        self.call(|g, s, h| g.call_erase(s, h, seq))
    }

    /// Removes every message, keeping the sequence; crash-atomic. Returns how many.
    pub fn purge(&mut self) -> Result<u64> {
        self.call(|g, s, h| g.call_purge(s, h))
    }

    /// Removes the messages matching `filter` below `up_to_seq` (0: no bound), keeping the
    /// newest `keep` of each subject. Returns how many.
    pub fn purge_ex(&mut self, filter: &str, up_to_seq: u64, keep: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_purge_ex(s, h, filter, up_to_seq, keep))
    }

    /// Removes every message below `seq`. Returns how many.
    pub fn compact(&mut self, seq: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_compact(s, h, seq))
    }

    /// Removes every message above `seq` (`last_seq` becomes `seq`). Returns how many.
    pub fn truncate(&mut self, seq: u64) -> Result<u64> {
        self.call(|g, s, h| g.call_truncate(s, h, seq))
    }

    /// Makes everything written so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.call(|g, s, h| g.call_sync(s, h))
    }

    /// Runs time-driven work (`max_age`, the `Interval` sync); call it from a timer.
    pub fn tick(&mut self) -> Result<()> {
        self.call(|g, s, h| g.call_tick(s, h))
    }

    /// Writes `index.db` so the next open need not read the blocks.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.call(|g, s, h| g.call_checkpoint(s, h))
    }

    /// `write-at-sync-data` calls the host served to this instance (for the tests).
    #[cfg(test)]
    pub(crate) fn write_syncs(&self) -> u64 {
        self.store.data().write_syncs.get()
    }

    /// Whether an earlier I/O failure poisoned the store.
    pub fn is_poisoned(&mut self) -> Result<bool> {
        self.raw_read(|g, s, h| g.call_is_poisoned(s, h))
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
        store_core::Ablation::Full => kind,
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
