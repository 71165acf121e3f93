//! The filesystem state: an inode table whose every node carries its live and its durable
//! version, plus the logs of what is not durable yet. Everything is `Clone` and cheap to clone
//! (`Arc`s all the way down) because the explorer snapshots it after every operation.

use crate::data::{Data, WholePages};
use crate::rng::Hasher;
use crate::CallSite;
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

pub(crate) type Ino = u64;
pub(crate) const ROOT: Ino = 0;
pub(crate) type Entries = Arc<BTreeMap<String, Ino>>;

#[derive(Clone)]
pub(crate) enum Node {
    File(FileNode),
    Dir(DirNode),
}

#[derive(Clone)]
pub(crate) struct FileNode {
    /// What reads see.
    pub(crate) live: Data,
    /// What a crash keeps for sure (if the file's name survives).
    pub(crate) durable: Data,
    /// Data writes and `set_len`s since the last successful sync, in issue order.
    pub(crate) pending: Vec<DataOp>,
    /// Set when a failed sync dropped pending operations: from then on `live` is no longer
    /// `durable` + `pending`, so a sync must replay `pending` instead of copying `live`.
    pub(crate) diverged: bool,
}

#[derive(Clone)]
pub(crate) struct DirNode {
    pub(crate) live: Entries,
    /// Entries as of the durable base (the namespace log's folded prefix).
    pub(crate) durable: Entries,
}

#[derive(Clone)]
pub(crate) struct DataOp {
    /// Index of the traced operation that issued it (also the global issue order).
    pub(crate) op: u64,
    pub(crate) site: CallSite,
    pub(crate) kind: DataKind,
}

#[derive(Clone)]
pub(crate) enum DataKind {
    /// `whole`: the pages the write covers whole, shared by the crash images that keep it.
    Write {
        off: u64,
        bytes: Arc<[u8]>,
        whole: Arc<WholePages>,
    },
    SetLen(u64),
}

/// One unsynced namespace operation (Posix model only; under Ordered they are durable at once).
#[derive(Clone)]
pub(crate) struct NsEntry {
    pub(crate) op: u64,
    pub(crate) site: CallSite,
    /// Shared: the log is cloned with every snapshot, the operation never changes.
    pub(crate) kind: Arc<NsOp>,
    /// Directories that still have to be synced before this entry is durable (a rename waits
    /// for both parents: rename is atomic, so it is durable only when both sides are).
    pub(crate) waiting: [Option<Ino>; 2],
}

impl NsEntry {
    pub(crate) fn durable(&self) -> bool {
        self.waiting.iter().all(Option::is_none)
    }
}

#[derive(Clone, Debug)]
pub(crate) enum NsOp {
    /// A create or mkdir: `dir[name] = ino`.
    Link { dir: Ino, name: String, ino: Ino },
    /// A remove_file, or the top entry of a remove_dir_all.
    Unlink { dir: Ino, name: String, ino: Ino },
    /// `renameat2(RENAME_EXCHANGE)`: the two names swap their inodes atomically.
    Exchange {
        a_dir: Ino,
        a_name: String,
        a_ino: Ino,
        b_dir: Ino,
        b_name: String,
        b_ino: Ino,
    },
    /// An atomic move of `ino`, replacing whatever the target name held.
    Rename {
        from_dir: Ino,
        from_name: String,
        to_dir: Ino,
        to_name: String,
        ino: Ino,
    },
}

impl NsOp {
    pub(crate) fn dirs(&self) -> [Option<Ino>; 2] {
        match self {
            NsOp::Link { dir, .. } | NsOp::Unlink { dir, .. } => [Some(*dir), None],
            NsOp::Rename {
                from_dir: a_dir,
                to_dir: b_dir,
                ..
            }
            | NsOp::Exchange { a_dir, b_dir, .. } => {
                if a_dir == b_dir {
                    [Some(*a_dir), None]
                } else {
                    [Some(*a_dir), Some(*b_dir)]
                }
            }
        }
    }

    pub(crate) fn inodes(&self) -> [Ino; 4] {
        match self {
            NsOp::Link { dir, ino, .. } | NsOp::Unlink { dir, ino, .. } => [*dir, *ino, *ino, *ino],
            NsOp::Rename {
                from_dir,
                to_dir,
                ino,
                ..
            } => [*from_dir, *to_dir, *ino, *ino],
            NsOp::Exchange {
                a_dir,
                a_ino,
                b_dir,
                b_ino,
                ..
            } => [*a_dir, *b_dir, *a_ino, *b_ino],
        }
    }
}

#[derive(Clone)]
pub(crate) struct Core {
    pub(crate) nodes: BTreeMap<Ino, Arc<Node>>,
    pub(crate) next_ino: Ino,
    /// Unsynced namespace operations in issue order, starting at the first one that is not
    /// durable: the durable prefix is folded into the nodes' `durable` entries eagerly. Durable
    /// entries after a non-durable one stay here because applying them depends on whether the
    /// earlier one is applied (e.g. an unlink of a name a pending rename created).
    pub(crate) ns_log: Vec<NsEntry>,
}

pub(crate) fn internal(what: &str) -> io::Error {
    io::Error::other(format!("fault-fs internal invariant broken: {what}"))
}

impl Core {
    pub(crate) fn new() -> Self {
        let root = DirNode {
            live: Entries::default(),
            durable: Entries::default(),
        };
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT, Arc::new(Node::Dir(root)));
        Core {
            nodes,
            next_ino: ROOT + 1,
            ns_log: Vec::new(),
        }
    }

    pub(crate) fn node(&self, ino: Ino) -> io::Result<&Node> {
        self.nodes
            .get(&ino)
            .map(|n| &**n)
            .ok_or_else(|| internal("inode missing"))
    }

    pub(crate) fn node_mut(&mut self, ino: Ino) -> io::Result<&mut Node> {
        self.nodes
            .get_mut(&ino)
            .map(Arc::make_mut)
            .ok_or_else(|| internal("inode missing"))
    }

    pub(crate) fn file(&self, ino: Ino) -> io::Result<&FileNode> {
        match self.node(ino)? {
            Node::File(f) => Ok(f),
            Node::Dir(_) => Err(internal("file handle on a directory")),
        }
    }

    pub(crate) fn file_mut(&mut self, ino: Ino) -> io::Result<&mut FileNode> {
        match self.node_mut(ino)? {
            Node::File(f) => Ok(f),
            Node::Dir(_) => Err(internal("file handle on a directory")),
        }
    }

    pub(crate) fn is_dir(&self, ino: Ino) -> bool {
        matches!(self.nodes.get(&ino).map(|n| &**n), Some(Node::Dir(_)))
    }

    /// Live entries of a directory; `NotADirectory` for a file.
    pub(crate) fn live_entries(&self, ino: Ino) -> io::Result<&Entries> {
        match self.node(ino)? {
            Node::Dir(d) => Ok(&d.live),
            Node::File(_) => Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            )),
        }
    }

    pub(crate) fn live_entries_mut(&mut self, ino: Ino) -> io::Result<&mut BTreeMap<String, Ino>> {
        match self.node_mut(ino)? {
            Node::Dir(d) => Ok(Arc::make_mut(&mut d.live)),
            Node::File(_) => Err(internal("directory expected")),
        }
    }

    /// Follows `comps` from the root through live directories.
    pub(crate) fn walk(&self, comps: &[&str]) -> io::Result<Ino> {
        let mut cur = ROOT;
        for c in comps {
            cur = *self.live_entries(cur)?.get(*c).ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("no such entry: {c:?}"))
            })?;
        }
        Ok(cur)
    }

    /// Like [`Core::walk`] but the result must be a directory.
    pub(crate) fn walk_dir(&self, comps: &[&str]) -> io::Result<Ino> {
        let ino = self.walk(comps)?;
        self.live_entries(ino)?;
        Ok(ino)
    }

    pub(crate) fn alloc(&mut self, node: Node) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, Arc::new(node));
        ino
    }

    /// Makes the namespace log's durable prefix part of the durable base.
    pub(crate) fn fold_durable_prefix(&mut self) {
        let n = self.ns_log.iter().take_while(|e| e.durable()).count();
        if n == 0 {
            return;
        }
        let mut view = NsView::new(&self.nodes);
        for e in &self.ns_log[..n] {
            view.apply(&e.kind);
        }
        let over = view.over;
        for (ino, entries) in over {
            if let Some(Node::Dir(d)) = self.nodes.get_mut(&ino).map(Arc::make_mut) {
                d.durable = entries;
            }
        }
        self.ns_log.drain(..n);
    }

    /// Total live bytes of files reachable from the root or held open (`extra`).
    pub(crate) fn live_bytes(&self, extra: impl Iterator<Item = Ino>) -> u64 {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack: Vec<Ino> = vec![ROOT];
        stack.extend(extra);
        let mut total = 0;
        while let Some(ino) = stack.pop() {
            if !seen.insert(ino) {
                continue;
            }
            match self.nodes.get(&ino).map(|n| &**n) {
                Some(Node::File(f)) => total += f.live.len(),
                Some(Node::Dir(d)) => stack.extend(d.live.values().copied()),
                None => {}
            }
        }
        total
    }

    /// Removes inodes that no name (live or durable), no pending namespace operation and no
    /// open handle (`roots`) can reach any more: they can never be seen again, and dropping them
    /// keeps snapshots small in long workloads that create and delete many files.
    pub(crate) fn collect_garbage(&mut self, roots: impl Iterator<Item = Ino>) {
        let mut marked = std::collections::BTreeSet::new();
        let mut stack: Vec<Ino> = vec![ROOT];
        stack.extend(roots);
        for e in &self.ns_log {
            stack.extend(e.kind.inodes());
        }
        while let Some(ino) = stack.pop() {
            if !marked.insert(ino) {
                continue;
            }
            if let Some(Node::Dir(d)) = self.nodes.get(&ino).map(|n| &**n) {
                stack.extend(d.live.values().copied());
                stack.extend(d.durable.values().copied());
            }
        }
        self.nodes.retain(|ino, _| marked.contains(ino));
    }

    /// A canonical hash of the *live* tree (names, kinds, contents), for deduplicating images
    /// (in an image live = durable).
    pub(crate) fn live_hash(&self) -> u64 {
        let mut h = Hasher::new();
        self.hash_dir(ROOT, &mut h, 0);
        h.finish()
    }

    fn hash_dir(&self, ino: Ino, h: &mut Hasher, depth: usize) {
        // depth guard: the tree is acyclic by construction; this only bounds a broken invariant
        if depth > 4096 {
            return;
        }
        let Some(Node::Dir(d)) = self.nodes.get(&ino).map(|n| &**n) else {
            return;
        };
        h.u64(d.live.len() as u64);
        for (name, &child) in d.live.iter() {
            h.bytes(name.as_bytes());
            match self.nodes.get(&child).map(|n| &**n) {
                Some(Node::File(f)) => {
                    h.u64(1);
                    f.live.hash_into(h);
                }
                Some(Node::Dir(_)) => {
                    h.u64(2);
                    self.hash_dir(child, h, depth + 1);
                }
                None => h.u64(3),
            }
        }
    }
}

/// Directory entries of the durable base with a copy-on-write overlay: the namespace log is
/// replayed onto it, both to fold durable entries and to build crash images.
pub(crate) struct NsView<'a> {
    nodes: &'a BTreeMap<Ino, Arc<Node>>,
    pub(crate) over: BTreeMap<Ino, Entries>,
}

impl<'a> NsView<'a> {
    pub(crate) fn new(nodes: &'a BTreeMap<Ino, Arc<Node>>) -> Self {
        NsView {
            nodes,
            over: BTreeMap::new(),
        }
    }

    pub(crate) fn entries(&self, dir: Ino) -> Option<&Entries> {
        if let Some(e) = self.over.get(&dir) {
            return Some(e);
        }
        match self.nodes.get(&dir).map(|n| &**n) {
            Some(Node::Dir(d)) => Some(&d.durable),
            _ => None,
        }
    }

    fn entries_mut(&mut self, dir: Ino) -> Option<&mut BTreeMap<String, Ino>> {
        if !self.over.contains_key(&dir) {
            let base = self.entries(dir)?.clone();
            self.over.insert(dir, base);
        }
        self.over.get_mut(&dir).map(Arc::make_mut)
    }

    fn is_dir(&self, ino: Ino) -> bool {
        matches!(self.nodes.get(&ino).map(|n| &**n), Some(Node::Dir(_)))
    }

    /// Whether `x` is `anc` or lies below it in this view.
    fn within(&self, x: Ino, anc: Ino) -> bool {
        let mut stack = vec![anc];
        let mut seen = std::collections::BTreeSet::new();
        while let Some(d) = stack.pop() {
            if d == x {
                return true;
            }
            if !seen.insert(d) {
                continue;
            }
            if let Some(e) = self.entries(d) {
                stack.extend(e.values().copied().filter(|&c| self.is_dir(c)));
            }
        }
        false
    }

    /// Applies one namespace operation if its preconditions hold in this view; returns whether
    /// it was applied. The preconditions are those of the system call itself, evaluated on the
    /// view instead of the live tree (see the crate docs, "Applying a subset"):
    /// - link: the name is free;
    /// - unlink: the name still refers to the very inode that was removed;
    /// - rename: the source name still refers to the moved inode; a target that exists must be
    ///   of the same kind (file over file, or directory over an *empty* directory); a directory
    ///   may not move into itself or below itself.
    pub(crate) fn apply(&mut self, op: &NsOp) -> bool {
        match op {
            NsOp::Exchange {
                a_dir,
                a_name,
                a_ino,
                b_dir,
                b_name,
                b_ino,
            } => {
                // both names must still refer to the inodes that were swapped
                let holds = |v: &Self, d: &Ino, n: &String, i: &Ino| {
                    v.entries(*d).and_then(|e| e.get(n)) == Some(i)
                };
                if !holds(self, a_dir, a_name, a_ino) || !holds(self, b_dir, b_name, b_ino) {
                    return false;
                }
                if let Some(e) = self.entries_mut(*a_dir) {
                    e.insert(a_name.clone(), *b_ino);
                }
                if let Some(e) = self.entries_mut(*b_dir) {
                    e.insert(b_name.clone(), *a_ino);
                }
                true
            }
            NsOp::Link { dir, name, ino } => {
                match self.entries(*dir) {
                    Some(e) if !e.contains_key(name) => {}
                    _ => return false,
                }
                if let Some(e) = self.entries_mut(*dir) {
                    e.insert(name.clone(), *ino);
                }
                true
            }
            NsOp::Unlink { dir, name, ino } => {
                if self.entries(*dir).and_then(|e| e.get(name)) != Some(ino) {
                    return false;
                }
                if let Some(e) = self.entries_mut(*dir) {
                    e.remove(name);
                }
                true
            }
            NsOp::Rename {
                from_dir,
                from_name,
                to_dir,
                to_name,
                ino,
            } => {
                if self.entries(*from_dir).and_then(|e| e.get(from_name)) != Some(ino) {
                    return false;
                }
                let Some(target_dir) = self.entries(*to_dir) else {
                    return false;
                };
                let src_dir = self.is_dir(*ino);
                if let Some(&t) = target_dir.get(to_name) {
                    if t == *ino {
                        return false;
                    }
                    let t_dir = self.is_dir(t);
                    if t_dir != src_dir {
                        return false;
                    }
                    if t_dir && !self.entries(t).is_none_or(|e| e.is_empty()) {
                        return false;
                    }
                }
                if src_dir && self.within(*to_dir, *ino) {
                    return false;
                }
                if let Some(e) = self.entries_mut(*from_dir) {
                    e.remove(from_name);
                }
                if let Some(e) = self.entries_mut(*to_dir) {
                    e.insert(to_name.clone(), *ino);
                }
                true
            }
        }
    }
}
