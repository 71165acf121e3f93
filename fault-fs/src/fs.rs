//! [`FaultFs`]: the in-memory `Fs` with a durability model, traces and fault injection.

use crate::core::{Core, DataKind, DataOp, FileNode, Ino, Node, NsEntry, NsOp, ROOT};
use crate::image::{self, Cand, Choice, Spec};
use crate::rng::Rng;
use crate::{CallSite, Error, FaultFsConfig, FaultKind, Model, OpArg, OpKind, Stat, TraceEntry};
use seqstore_core::fs::split_path;
use seqstore_core::fs::{DirEntry, Fs, FsFile, OpenOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, ErrorKind};
use std::ops::ControlFlow;
use std::panic::Location;
use std::sync::{Arc, Mutex, MutexGuard};

/// An in-memory filesystem that knows what is durable. Cloning gives another handle on the
/// same filesystem (the state is behind an `Arc<Mutex<_>>`); [`FaultFs::crash`] and friends
/// give new, independent filesystems.
///
/// # The store's lock
/// [`Fs::lock`] is kept in memory beside the tree, shared by the clones and outside the
/// trace: it is no file, needs no fsync, and touches nothing a crash image keeps. A second
/// lock of a name while one is held fails as another process's would; every crash image
/// starts with no lock held (the power cut ended every process).
#[derive(Clone)]
pub struct FaultFs {
    inner: Arc<Mutex<State>>,
    locks: seqstore_core::fs::MemLocks,
}

pub(crate) struct State {
    pub(crate) cfg: FaultFsConfig,
    pub(crate) core: Arc<Core>,
    pub(crate) trace: Vec<TraceEntry>,
    faults: Faults,
    /// Open handles per inode: an unlinked file stays readable and writable while open.
    handles: BTreeMap<Ino, usize>,
    /// Explorer mode: the state after every mutating operation, with the op count after it.
    pub(crate) snapshots: Option<Vec<(u64, Arc<Core>)>>,
    /// Inode count above which the next mutating operation collects garbage.
    gc_at: usize,
}

#[derive(Default)]
struct Faults {
    at: BTreeMap<u64, FaultKind>,
    kinds: BTreeMap<OpKind, FaultKind>,
    capacity: Option<u64>,
    flip: Option<(Rng, f64)>,
}

impl std::fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.lock();
        f.debug_struct("FaultFs")
            .field("model", &st.cfg.model)
            .field("ops", &st.trace.len())
            .field("inodes", &st.core.nodes.len())
            .finish()
    }
}

/// What an operation closure works on: the state, plus the operation's identity.
struct Ctx<'a> {
    core: &'a mut Arc<Core>,
    cfg: &'a FaultFsConfig,
    handles: &'a mut BTreeMap<Ino, usize>,
    capacity: Option<u64>,
    index: u64,
    site: CallSite,
    injected: Option<FaultKind>,
    mutated: bool,
}

fn err(kind: ErrorKind, msg: &str) -> io::Error {
    io::Error::new(kind, msg.to_string())
}

/// EBADF as the OS reports it, so that a write through a read-only handle fails with the same
/// error kind as on a real file (std has no stable `ErrorKind` for it).
fn ebadf() -> io::Error {
    #[cfg(unix)]
    {
        io::Error::from_raw_os_error(9)
    }
    #[cfg(target_os = "wasi")]
    {
        io::Error::from_raw_os_error(8)
    }
    #[cfg(not(any(unix, target_os = "wasi")))]
    {
        io::Error::other("bad file descriptor")
    }
}

/// Applies the shared path rules, plus NAME_MAX (255 bytes per component, ENAMETOOLONG).
fn components(path: &str) -> io::Result<Vec<&str>> {
    let comps = split_path(path)?;
    if comps.iter().any(|c| c.len() > 255) {
        return Err(err(ErrorKind::InvalidFilename, "file name too long"));
    }
    Ok(comps)
}

/// The live entry `path` names: its directory, its name and its inode. `root` is the error
/// for the root (it is no entry of a directory), `missing` the message of `NotFound`.
fn live_entry<'p>(
    core: &Core,
    path: &'p str,
    root: (ErrorKind, &str),
    missing: &str,
) -> io::Result<(Ino, &'p str, Ino)> {
    let comps = components(path)?;
    let Some((name, parent_comps)) = comps.split_last() else {
        return Err(err(root.0, root.1));
    };
    let dir = core.walk_dir(parent_comps)?;
    let ino = *core
        .live_entries(dir)?
        .get(*name)
        .ok_or_else(|| err(ErrorKind::NotFound, missing))?;
    Ok((dir, *name, ino))
}

impl Ctx<'_> {
    fn core(&self) -> &Core {
        self.core
    }

    fn core_mut(&mut self) -> &mut Core {
        self.mutated = true;
        Arc::make_mut(self.core)
    }

    fn check_injected(&self) -> io::Result<()> {
        match self.injected {
            Some(f) => Err(f.error()),
            None => Ok(()),
        }
    }

    /// Records a namespace change made to the live tree: durable at once under Ordered,
    /// pending on its parent(s) under Posix.
    /// Removes `name` (naming `ino`) from directory `dir`'s live entries, a namespace change.
    fn unlink(&mut self, dir: Ino, name: &str, ino: Ino) -> io::Result<()> {
        self.core_mut().live_entries_mut(dir)?.remove(name);
        self.log_ns(NsOp::Unlink {
            dir,
            name: name.to_string(),
            ino,
        });
        Ok(())
    }

    fn log_ns(&mut self, op: NsOp) {
        let (model, index, site) = (self.cfg.model, self.index, self.site);
        let core = self.core_mut();
        match model {
            Model::Ordered => {
                for d in op.dirs().into_iter().flatten() {
                    if let Ok(Node::Dir(dn)) = core.node_mut(d) {
                        dn.durable = dn.live.clone();
                    }
                }
            }
            Model::Posix => core.ns_log.push(NsEntry {
                op: index,
                site,
                waiting: op.dirs(),
                kind: Arc::new(op),
            }),
        }
    }

    /// Fails with ENOSPC if growing live file data by `growth` bytes exceeds the capacity.
    fn check_capacity(&self, growth: u64) -> io::Result<()> {
        if let Some(cap) = self.capacity {
            if growth > 0 {
                let used = self.core().live_bytes(self.handles.keys().copied());
                if used.saturating_add(growth) > cap {
                    return Err(err(ErrorKind::StorageFull, "ENOSPC (capacity limit)"));
                }
            }
        }
        Ok(())
    }

    fn check_size(&self, end: u64) -> io::Result<()> {
        if end > self.cfg.max_file_size {
            return Err(err(ErrorKind::FileTooLarge, "EFBIG (max_file_size)"));
        }
        Ok(())
    }

    fn write(&mut self, ino: Ino, off: u64, buf: &[u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let end = off
            .checked_add(buf.len() as u64)
            .ok_or_else(|| err(ErrorKind::InvalidInput, "offset overflow"))?;
        self.check_size(end)?;
        let cur = self.core().file(ino)?.live.len();
        self.check_capacity(end.saturating_sub(cur))?;
        let (index, site) = (self.index, self.site);
        let f = self.core_mut().file_mut(ino)?;
        f.live.write(off, buf);
        f.pending.push(DataOp {
            op: index,
            site,
            kind: DataKind::Write {
                off,
                bytes: Arc::from(buf),
                whole: Arc::default(),
            },
        });
        Ok(())
    }

    fn set_len(&mut self, ino: Ino, len: u64) -> io::Result<()> {
        self.check_size(len)?;
        let cur = self.core().file(ino)?.live.len();
        if len == cur {
            return Ok(());
        }
        self.check_capacity(len.saturating_sub(cur))?;
        let (index, site) = (self.index, self.site);
        let f = self.core_mut().file_mut(ino)?;
        f.live.set_len(len);
        f.pending.push(DataOp {
            op: index,
            site,
            kind: DataKind::SetLen(len),
        });
        Ok(())
    }

    /// fsync/fdatasync of a file. An injected failure has Linux semantics ("fsyncgate"): the
    /// dirty data is dropped from the pending log — it stays visible to reads but can never
    /// become durable — and the error is returned; a later sync returns Ok having nothing to do.
    fn sync_file(&mut self, ino: Ino) -> io::Result<()> {
        if self.core().file(ino)?.pending.is_empty() {
            return self.check_injected();
        }
        let injected = self.injected;
        let f = self.core_mut().file_mut(ino)?;
        if let Some(fault) = injected {
            f.pending.clear();
            f.diverged = true;
            return Err(fault.error());
        }
        if f.diverged {
            let pending = std::mem::take(&mut f.pending);
            for op in pending {
                match op.kind {
                    DataKind::Write { off, bytes, .. } => f.durable.write(off, &bytes),
                    DataKind::SetLen(len) => f.durable.set_len(len),
                }
            }
        } else {
            f.durable = f.live.clone();
            f.pending.clear();
        }
        Ok(())
    }

    fn open_handle(&mut self, ino: Ino) {
        *self.handles.entry(ino).or_default() += 1;
    }
}

impl FaultFs {
    /// An empty filesystem with the default settings for `model`.
    pub fn new(model: Model) -> Self {
        Self::from_core(FaultFsConfig::new(model), Core::new())
    }

    /// An empty filesystem with these settings.
    pub fn with_config(cfg: FaultFsConfig) -> Result<Self, Error> {
        cfg.validate()?;
        Ok(Self::from_core(cfg, Core::new()))
    }

    pub(crate) fn from_core(cfg: FaultFsConfig, core: Core) -> Self {
        let gc_at = (core.nodes.len() * 2).max(64);
        FaultFs {
            inner: Arc::new(Mutex::new(State {
                cfg,
                core: Arc::new(core),
                trace: Vec::new(),
                faults: Faults::default(),
                handles: BTreeMap::new(),
                snapshots: None,
                gc_at,
            })),
            locks: Default::default(),
        }
    }

    /// A poisoned lock only means a panic elsewhere while holding it; every operation leaves
    /// the state consistent before it can panic, so the state is still usable.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The settings.
    pub fn config(&self) -> FaultFsConfig {
        self.lock().cfg.clone()
    }

    /// Whether the lock `name` ([`Fs::lock`]) is held now.
    pub fn is_locked(&self, name: &str) -> bool {
        self.locks.is_held(name)
    }

    /// The model.
    pub fn model(&self) -> Model {
        self.lock().cfg.model
    }

    /// Every operation issued so far, in order.
    pub fn trace(&self) -> Vec<TraceEntry> {
        self.lock().trace.clone()
    }

    /// How many operations were issued so far (failed ones included).
    pub fn op_count(&self) -> u64 {
        self.lock().trace.len() as u64
    }

    pub(crate) fn start_recording(&self) {
        let mut st = self.lock();
        let first = (st.trace.len() as u64, st.core.clone());
        st.snapshots = Some(vec![first]);
    }

    /// An independent copy of this filesystem as it is now (its live tree, what is durable of
    /// it, its settings), with an empty trace, no faults armed and no lock held: a program
    /// may change the copy (e.g. a checker recovering a crash image) without touching this one.
    pub fn fork(&self) -> FaultFs {
        let (cfg, core) = self.state();
        FaultFs::from_core(cfg, (*core).clone())
    }

    pub(crate) fn state(&self) -> (FaultFsConfig, Arc<Core>) {
        let st = self.lock();
        (st.cfg.clone(), st.core.clone())
    }

    fn op<T>(
        &self,
        kind: OpKind,
        path: &str,
        to: Option<&str>,
        arg: OpArg,
        loc: &'static Location<'static>,
        f: impl FnOnce(&mut Ctx<'_>) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut guard = self.lock();
        let st = &mut *guard;
        let index = st.trace.len() as u64;
        let injected = st
            .faults
            .at
            .get(&index)
            .or_else(|| st.faults.kinds.get(&kind))
            .copied();
        let site = CallSite::from_location(loc);
        let mut cx = Ctx {
            core: &mut st.core,
            cfg: &st.cfg,
            handles: &mut st.handles,
            capacity: st.faults.capacity,
            index,
            site,
            injected,
            mutated: false,
        };
        let res = f(&mut cx);
        let mutated = cx.mutated;
        st.trace.push(TraceEntry {
            index,
            kind,
            path: path.to_string(),
            to: to.map(str::to_string),
            arg,
            call_site: site,
            result: res.as_ref().map(|_| ()).map_err(io::Error::kind),
            mutated,
        });
        if mutated {
            if st.core.nodes.len() > st.gc_at {
                Arc::make_mut(&mut st.core).collect_garbage(st.handles.keys().copied());
                st.gc_at = (st.core.nodes.len() * 2).max(64);
            }
            if let Some(s) = &mut st.snapshots {
                s.push((index + 1, st.core.clone()));
            }
        }
        res
    }

    // ----- crash images -----

    /// The pessimistic crash image: nothing unsynced survives (under Ordered the namespace,
    /// being durable at once, is kept; unsynced data is dropped).
    pub fn crash(&self) -> FaultFs {
        self.image_of(Spec::Pessimistic)
    }

    /// A random crash image the model allows (a subset of the unsynced operations — a prefix
    /// under Ordered — with torn writes), reproducible from `seed`.
    pub fn crash_seeded(&self, seed: u64) -> FaultFs {
        self.image_of(Spec::Random(seed))
    }

    fn image_of(&self, spec: Spec) -> FaultFs {
        let (cfg, core) = self.state();
        let cands = image::candidates(&core, cfg.sector_size);
        let choices = spec.choices(&cands, cfg.model, cfg.sector_size);
        FaultFs::from_core(cfg, image::build(&core, &cands, &choices))
    }

    /// The distinct crash images at this point, at most `max`, in a deterministic order:
    /// nothing kept, everything kept, then for each unsynced operation from the newest back:
    /// the prefix before it, everything but it (Posix), and it torn at up to
    /// `max_tears_per_write` sector boundaries. Duplicates (by a canonical hash of the image)
    /// are removed; `crash_images(usize::MAX).len()` counts the distinct images.
    pub fn crash_images(&self, max: usize) -> Vec<FaultFs> {
        let (cfg, core) = self.state();
        let mut out = Vec::new();
        for_each_image(&cfg, &core, max, &[], |img| {
            out.push(FaultFs::from_core(cfg.clone(), img.core));
            ControlFlow::Continue(())
        });
        out
    }

    // ----- fault injection -----

    /// Makes the operation with trace index `n` (0-based: `op_count()` just before it is
    /// issued) fail with `fault`, without effect — except a sync, which drops its dirty state
    /// (fsyncgate, see [`OpKind::is_sync`] and the crate docs).
    pub fn fail_op(&self, n: u64, fault: FaultKind) {
        self.lock().faults.at.insert(n, fault);
    }

    /// Makes every operation of `kind` fail with `fault` until [`FaultFs::clear_faults`].
    pub fn fail_kind(&self, kind: OpKind, fault: FaultKind) {
        self.lock().faults.kinds.insert(kind, fault);
    }

    /// Limits the total live file data (files reachable from the root or held open) to
    /// `bytes`: a write or `set_len` that would grow it beyond fails with ENOSPC
    /// (`StorageFull`) and has no effect. `None` removes the limit.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.lock().faults.capacity = bytes;
    }

    /// Each `read_at` that returns data flips one bit of it with `probability`, from a PRNG
    /// seeded with `seed` (models silent corruption; checksums should catch it).
    pub fn bit_flip_on_read(&self, seed: u64, probability: f64) -> Result<(), Error> {
        if !(0.0..=1.0).contains(&probability) {
            return Err(Error::InvalidProbability(probability));
        }
        self.lock().faults.flip = Some((Rng::new(seed), probability));
        Ok(())
    }

    /// Removes every injected fault, the capacity limit and bit flips.
    pub fn clear_faults(&self) {
        self.lock().faults = Faults::default();
    }

    // ----- helpers for tests (not traced, no faults) -----

    /// The live contents of a file (not traced, faults not applied).
    pub fn read_file(&self, path: &str) -> io::Result<Vec<u8>> {
        let st = self.lock();
        let ino = st.core.walk(&components(path)?)?;
        match st.core.node(ino)? {
            Node::File(f) => Ok(f.live.to_vec()),
            Node::Dir(_) => Err(err(ErrorKind::IsADirectory, "is a directory")),
        }
    }

    /// What the live tree holds at `path` (`NotFound` when nothing is there). A query, not an
    /// operation: not traced, no faults. A host serving the tree to a program answers its
    /// stats this way, without the reads of directories a stat through [`Fs`] would issue.
    pub fn stat(&self, path: &str) -> io::Result<Stat> {
        let st = self.lock();
        let ino = st.core.walk(&components(path)?)?;
        match st.core.node(ino)? {
            Node::File(f) => Ok(Stat::File { len: f.live.len() }),
            Node::Dir(_) => Ok(Stat::Dir),
        }
    }

    /// Every live path, sorted; directories end with `/`.
    pub fn list_tree(&self) -> Vec<String> {
        self.dump_lines(false)
    }

    /// A canonical text dump of the live tree: one line per entry, `path/` for directories,
    /// `path = "escaped contents"` for files. Equal trees give equal dumps.
    pub fn dump(&self) -> String {
        self.dump_lines(true)
            .iter()
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// A 64-bit canonical hash of the live tree (what image deduplication compares).
    pub fn image_hash(&self) -> u64 {
        self.lock().core.live_hash()
    }

    fn dump_lines(&self, contents: bool) -> Vec<String> {
        let st = self.lock();
        let mut out = Vec::new();
        let mut stack: Vec<(String, Ino)> = vec![(String::new(), ROOT)];
        let mut seen = BTreeSet::new();
        while let Some((prefix, dir)) = stack.pop() {
            if !seen.insert(dir) {
                continue;
            }
            let Ok(entries) = st.core.live_entries(dir) else {
                continue;
            };
            for (name, &ino) in entries.iter() {
                let path = format!("{prefix}{name}");
                match st.core.node(ino) {
                    Ok(Node::Dir(_)) => {
                        out.push(format!("{path}/"));
                        stack.push((format!("{path}/"), ino));
                    }
                    Ok(Node::File(f)) if contents => {
                        let bytes = f.live.to_vec();
                        out.push(format!("{path} = \"{}\"", bytes.escape_ascii()));
                    }
                    _ => out.push(path),
                }
            }
        }
        // one canonical order whatever the walk: sorted paths
        out.sort();
        out
    }
}

/// One distinct crash image at a crash point.
pub(crate) struct Img<'a> {
    pub(crate) n: usize,
    pub(crate) spec: Spec,
    pub(crate) cands: &'a [Cand],
    pub(crate) choices: Vec<Choice>,
    pub(crate) core: Core,
}

/// Visits the distinct images of a state: up to `max_enum` from the ALICE-style enumeration,
/// then one per random seed, skipping any image seen before (by canonical hash).
pub(crate) fn for_each_image(
    cfg: &FaultFsConfig,
    core: &Core,
    max_enum: usize,
    seeds: &[u64],
    mut f: impl FnMut(Img<'_>) -> ControlFlow<()>,
) {
    let sector = cfg.sector_size;
    let cands = image::candidates(core, sector);
    let specs = image::enumerate(&cands, cfg.model, cfg.max_tears_per_write, sector);
    let mut seen = BTreeSet::new();
    let mut n = 0;
    let mut enumerated = 0;
    let randoms = seeds.iter().map(|&s| Spec::Random(s));
    for spec in specs.into_iter().chain(randoms) {
        let is_random = matches!(spec, Spec::Random(_));
        if !is_random && enumerated >= max_enum {
            continue;
        }
        let choices = spec.choices(&cands, cfg.model, sector);
        let img = image::build(core, &cands, &choices);
        if !seen.insert(img.live_hash()) {
            continue;
        }
        if !is_random {
            enumerated += 1;
        }
        let flow = f(Img {
            n,
            spec,
            cands: &cands,
            choices,
            core: img,
        });
        n += 1;
        if flow.is_break() {
            return;
        }
    }
}

impl Fs for FaultFs {
    type File = FaultFile;

    #[track_caller]
    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<FaultFile> {
        let loc = Location::caller();
        let ino = self.op(OpKind::Open, path, None, OpArg::Open(opts), loc, |cx| {
            cx.check_injected()?;
            opts.validate()?;
            let comps = components(path)?;
            let Some((name, parent_comps)) = comps.split_last() else {
                return Err(err(ErrorKind::IsADirectory, "the root is a directory"));
            };
            let parent = cx.core().walk_dir(parent_comps)?;
            let existing = cx.core().live_entries(parent)?.get(*name).copied();
            let ino = match existing {
                Some(ino) => {
                    if opts.create_new {
                        return Err(err(ErrorKind::AlreadyExists, "file exists"));
                    }
                    if cx.core().is_dir(ino) {
                        return Err(err(ErrorKind::IsADirectory, "is a directory"));
                    }
                    if opts.truncate {
                        cx.set_len(ino, 0)?;
                    }
                    ino
                }
                None => {
                    if !(opts.create || opts.create_new) {
                        return Err(err(ErrorKind::NotFound, "no such file"));
                    }
                    let core = cx.core_mut();
                    let ino = core.alloc(Node::File(FileNode {
                        live: Default::default(),
                        durable: Default::default(),
                        pending: Vec::new(),
                        diverged: false,
                    }));
                    core.live_entries_mut(parent)?.insert(name.to_string(), ino);
                    cx.log_ns(NsOp::Link {
                        dir: parent,
                        name: name.to_string(),
                        ino,
                    });
                    ino
                }
            };
            cx.open_handle(ino);
            Ok(ino)
        })?;
        Ok(FaultFile {
            fs: self.clone(),
            ino,
            path: path.into(),
            read: opts.read,
            write: opts.write,
        })
    }

    #[track_caller]
    fn create_dir(&self, path: &str) -> io::Result<()> {
        let loc = Location::caller();
        self.op(OpKind::CreateDir, path, None, OpArg::None, loc, |cx| {
            cx.check_injected()?;
            let comps = components(path)?;
            let Some((name, parent_comps)) = comps.split_last() else {
                return Err(err(ErrorKind::AlreadyExists, "the root exists"));
            };
            let parent = cx.core().walk_dir(parent_comps)?;
            if cx.core().live_entries(parent)?.contains_key(*name) {
                return Err(err(ErrorKind::AlreadyExists, "entry exists"));
            }
            let core = cx.core_mut();
            let ino = core.alloc(Node::Dir(crate::core::DirNode {
                live: Default::default(),
                durable: Default::default(),
            }));
            core.live_entries_mut(parent)?.insert(name.to_string(), ino);
            cx.log_ns(NsOp::Link {
                dir: parent,
                name: name.to_string(),
                ino,
            });
            Ok(())
        })
    }

    #[track_caller]
    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        let loc = Location::caller();
        self.op(OpKind::ReadDir, path, None, OpArg::None, loc, |cx| {
            cx.check_injected()?;
            let core = cx.core();
            let dir = core.walk_dir(&components(path)?)?;
            Ok(core
                .live_entries(dir)?
                .iter()
                .map(|(name, &ino)| DirEntry {
                    name: name.clone(),
                    is_dir: core.is_dir(ino),
                })
                .collect())
        })
    }

    #[track_caller]
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let loc = Location::caller();
        self.op(OpKind::Rename, from, Some(to), OpArg::None, loc, |cx| {
            cx.check_injected()?;
            let fc = components(from)?;
            let tc = components(to)?;
            let (Some((fname, fparent)), Some((tname, tparent))) =
                (fc.split_last(), tc.split_last())
            else {
                return Err(err(
                    ErrorKind::InvalidInput,
                    "the root cannot be renamed or replaced",
                ));
            };
            // Linux's order: both parents, then the source, then the ancestry checks, then
            // the target's type
            let core = cx.core();
            let from_dir = core.walk_dir(fparent)?;
            let to_dir = core.walk_dir(tparent)?;
            let src = *core
                .live_entries(from_dir)?
                .get(*fname)
                .ok_or_else(|| err(ErrorKind::NotFound, "no such file"))?;
            if from_dir == to_dir && fname == tname {
                return Ok(());
            }
            let src_dir = core.is_dir(src);
            // paths have no symlinks or `..`, so ancestry is a prefix test on components
            let below = |a: &[&str], b: &[&str]| b.len() > a.len() && b[..a.len()] == a[..];
            if below(&fc, &tc) {
                return Err(err(
                    ErrorKind::InvalidInput,
                    "cannot move a directory into itself",
                ));
            }
            if below(&tc, &fc) {
                return Err(err(
                    ErrorKind::DirectoryNotEmpty,
                    "the target is an ancestor of the source",
                ));
            }
            if let Some(&t) = core.live_entries(to_dir)?.get(*tname) {
                if t == src {
                    // two links to one file: POSIX's rename does nothing (both names stay)
                    return Ok(());
                }
                let t_dir = core.is_dir(t);
                if src_dir && !t_dir {
                    return Err(err(ErrorKind::NotADirectory, "target is not a directory"));
                }
                if !src_dir && t_dir {
                    return Err(err(ErrorKind::IsADirectory, "target is a directory"));
                }
                if t_dir && !core.live_entries(t)?.is_empty() {
                    return Err(err(ErrorKind::DirectoryNotEmpty, "target not empty"));
                }
            }
            let core = cx.core_mut();
            core.live_entries_mut(from_dir)?.remove(*fname);
            core.live_entries_mut(to_dir)?
                .insert(tname.to_string(), src);
            cx.log_ns(NsOp::Rename {
                from_dir,
                from_name: fname.to_string(),
                to_dir,
                to_name: tname.to_string(),
                ino: src,
            });
            Ok(())
        })
    }

    #[track_caller]
    fn remove_file(&self, path: &str) -> io::Result<()> {
        let loc = Location::caller();
        self.op(OpKind::RemoveFile, path, None, OpArg::None, loc, |cx| {
            cx.check_injected()?;
            let root = (ErrorKind::IsADirectory, "the root is a directory");
            let (dir, name, ino) = live_entry(cx.core(), path, root, "no such file")?;
            if cx.core().is_dir(ino) {
                return Err(err(ErrorKind::IsADirectory, "is a directory"));
            }
            cx.unlink(dir, name, ino)
        })
    }

    #[track_caller]
    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        let loc = Location::caller();
        self.op(OpKind::RemoveDirAll, path, None, OpArg::None, loc, |cx| {
            cx.check_injected()?;
            let root = (ErrorKind::InvalidInput, "cannot remove the root");
            let (dir, name, ino) = live_entry(cx.core(), path, root, "no such directory")?;
            if !cx.core().is_dir(ino) {
                return Err(err(ErrorKind::NotADirectory, "not a directory"));
            }
            // The subtree is detached as a whole: only the top entry's removal is a namespace
            // change (durable with its parent); the inner entries stay as they were, so an
            // image that undoes the removal brings the whole tree back.
            cx.unlink(dir, name, ino)
        })
    }

    fn lock(&self, name: &str) -> Result<seqstore_core::fs::FsLock, seqstore_core::fs::LockError> {
        self.locks.lock(name)
    }

    #[track_caller]
    fn sync_dir(&self, path: &str) -> io::Result<()> {
        let loc = Location::caller();
        self.op(OpKind::SyncDir, path, None, OpArg::None, loc, |cx| {
            let resolved = components(path).and_then(|c| cx.core().walk_dir(&c));
            let dir = match (resolved, cx.injected) {
                (Ok(dir), _) => dir,
                (Err(e), None) => return Err(e),
                (Err(_), Some(f)) => return Err(f.error()),
            };
            let waiting = cx
                .core()
                .ns_log
                .iter()
                .any(|e| e.waiting.contains(&Some(dir)));
            if !waiting {
                return cx.check_injected();
            }
            let injected = cx.injected;
            let core = cx.core_mut();
            if let Some(fault) = injected {
                // fsyncgate for directories: the changes waiting on this directory are lost
                // for good; a later sync_dir returns Ok without making them durable.
                core.ns_log.retain(|e| !e.waiting.contains(&Some(dir)));
                core.fold_durable_prefix();
                return Err(fault.error());
            }
            for e in &mut core.ns_log {
                for w in &mut e.waiting {
                    if *w == Some(dir) {
                        *w = None;
                    }
                }
            }
            core.fold_durable_prefix();
            Ok(())
        })
    }
}

/// An open file of a [`FaultFs`]. It refers to the inode, not the name: after a rename it
/// still reaches the file, and after an unlink it can still be read and written (such a file
/// is gone at the next crash).
pub struct FaultFile {
    fs: FaultFs,
    ino: Ino,
    path: Arc<str>,
    read: bool,
    write: bool,
}

impl std::fmt::Debug for FaultFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultFile")
            .field("path", &self.path)
            .field("read", &self.read)
            .field("write", &self.write)
            .finish()
    }
}

impl Drop for FaultFile {
    fn drop(&mut self) {
        let mut st = self.fs.lock();
        if let Some(n) = st.handles.get_mut(&self.ino) {
            *n -= 1;
            if *n == 0 {
                st.handles.remove(&self.ino);
            }
        }
    }
}

impl FaultFile {
    fn op<T>(
        &self,
        kind: OpKind,
        arg: OpArg,
        loc: &'static Location<'static>,
        f: impl FnOnce(&mut Ctx<'_>, Ino) -> io::Result<T>,
    ) -> io::Result<T> {
        let ino = self.ino;
        self.fs
            .op(kind, &self.path, None, arg, loc, |cx| f(cx, ino))
    }
}

impl FsFile for FaultFile {
    #[track_caller]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let loc = Location::caller();
        let arg = OpArg::Range {
            offset,
            len: buf.len() as u64,
        };
        let n = self.op(OpKind::ReadAt, arg, loc, |cx, ino| {
            cx.check_injected()?;
            if !self.read {
                return Err(ebadf());
            }
            Ok(cx.core().file(ino)?.live.read(offset, buf))
        })?;
        if n > 0 {
            let mut st = self.fs.lock();
            if let Some((rng, p)) = &mut st.faults.flip {
                if rng.probability(*p) {
                    let bit = rng.scaled_below(n as u64 * 8);
                    buf[(bit / 8) as usize] ^= 1 << (bit % 8);
                }
            }
        }
        Ok(n)
    }

    #[track_caller]
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let loc = Location::caller();
        let arg = OpArg::Range {
            offset,
            len: buf.len() as u64,
        };
        self.op(OpKind::WriteAt, arg, loc, |cx, ino| {
            cx.check_injected()?;
            // std's write_all_at issues no system call for an empty buffer: no EBADF either
            if !self.write && !buf.is_empty() {
                return Err(ebadf());
            }
            cx.write(ino, offset, buf)
        })
    }

    #[track_caller]
    fn len(&self) -> io::Result<u64> {
        let loc = Location::caller();
        self.op(OpKind::Len, OpArg::None, loc, |cx, ino| {
            cx.check_injected()?;
            Ok(cx.core().file(ino)?.live.len())
        })
    }

    #[track_caller]
    fn set_len(&self, len: u64) -> io::Result<()> {
        let loc = Location::caller();
        self.op(OpKind::SetLen, OpArg::Len(len), loc, |cx, ino| {
            cx.check_injected()?;
            if !self.write {
                // ftruncate on a descriptor not open for writing is EINVAL on Linux
                return Err(err(ErrorKind::InvalidInput, "file not open for writing"));
            }
            cx.set_len(ino, len)
        })
    }

    #[track_caller]
    fn sync_data(&self) -> io::Result<()> {
        let loc = Location::caller();
        self.op(OpKind::SyncData, OpArg::None, loc, |cx, ino| {
            cx.sync_file(ino)
        })
    }

    #[track_caller]
    fn sync_all(&self) -> io::Result<()> {
        let loc = Location::caller();
        self.op(OpKind::SyncAll, OpArg::None, loc, |cx, ino| {
            cx.sync_file(ino)
        })
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<FaultFs>();
    is::<FaultFile>();
}

/// Namespace operations beyond the `Fs` trait, for replaying programs that use them (the
/// syscall-trace checker of `trace-check/`): hard links and `RENAME_EXCHANGE`. Both are
/// namespace operations like a create or a rename: durable at once under Ordered, waiting for
/// a `sync_dir` of their parent(s) under Posix, undone whole by a crash that loses them.
impl FaultFs {
    /// `link(from, to)`: a second name for the file `from`. Fails as Linux does: `NotFound`
    /// without `from`, `AlreadyExists` if `to` exists, `PermissionDenied` (EPERM) for a
    /// directory.
    #[track_caller]
    pub fn hard_link(&self, from: &str, to: &str) -> io::Result<()> {
        let loc = Location::caller();
        self.op(OpKind::HardLink, from, Some(to), OpArg::None, loc, |cx| {
            cx.check_injected()?;
            let ino = cx.core().walk(&components(from)?)?;
            if cx.core().is_dir(ino) {
                return Err(err(ErrorKind::PermissionDenied, "hard link to a directory"));
            }
            let tc = components(to)?;
            let Some((name, parent_comps)) = tc.split_last() else {
                return Err(err(ErrorKind::AlreadyExists, "the root exists"));
            };
            let dir = cx.core().walk_dir(parent_comps)?;
            if cx.core().live_entries(dir)?.contains_key(*name) {
                return Err(err(ErrorKind::AlreadyExists, "entry exists"));
            }
            cx.core_mut()
                .live_entries_mut(dir)?
                .insert(name.to_string(), ino);
            cx.log_ns(NsOp::Link {
                dir,
                name: name.to_string(),
                ino,
            });
            Ok(())
        })
    }

    /// `renameat2(a, b, RENAME_EXCHANGE)`: the two existing names swap what they refer to,
    /// atomically (an image shows both swapped or neither). `NotFound` if either is missing,
    /// `InvalidInput` if one is an ancestor of the other.
    #[track_caller]
    pub fn exchange(&self, a: &str, b: &str) -> io::Result<()> {
        let loc = Location::caller();
        self.op(OpKind::Exchange, a, Some(b), OpArg::None, loc, |cx| {
            cx.check_injected()?;
            let (ac, bc) = (components(a)?, components(b)?);
            let (Some((an, ap)), Some((bn, bp))) = (ac.split_last(), bc.split_last()) else {
                return Err(err(ErrorKind::InvalidInput, "the root cannot be exchanged"));
            };
            let below = |x: &[&str], y: &[&str]| y.len() > x.len() && y[..x.len()] == x[..];
            if below(&ac, &bc) || below(&bc, &ac) {
                return Err(err(ErrorKind::InvalidInput, "one name is below the other"));
            }
            let core = cx.core();
            let (a_dir, b_dir) = (core.walk_dir(ap)?, core.walk_dir(bp)?);
            let get = |d: Ino, n: &str| -> io::Result<Ino> {
                core.live_entries(d)?
                    .get(n)
                    .copied()
                    .ok_or_else(|| err(ErrorKind::NotFound, "no such file"))
            };
            let (a_ino, b_ino) = (get(a_dir, an)?, get(b_dir, bn)?);
            if a_ino == b_ino {
                return Ok(());
            }
            let core = cx.core_mut();
            core.live_entries_mut(a_dir)?.insert(an.to_string(), b_ino);
            core.live_entries_mut(b_dir)?.insert(bn.to_string(), a_ino);
            cx.log_ns(NsOp::Exchange {
                a_dir,
                a_name: an.to_string(),
                a_ino,
                b_dir,
                b_name: bn.to_string(),
                b_ino,
            });
            Ok(())
        })
    }
}
