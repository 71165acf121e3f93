//! A plain in-memory `Fs` for store-core's own unit tests (no durability model: that is
//! fault-fs's job). Files are shared buffers, so handles survive renames as inodes do.

use crate::fs::{split_path, DirEntry, FastPaths, Fs, FsFile, OpenOptions};
use std::collections::BTreeMap;
use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

type Data = Arc<Mutex<Vec<u8>>>;

#[derive(Clone)]
enum Node {
    File(Data),
    Dir,
}

#[derive(Clone, Default)]
pub struct MemFs {
    nodes: Arc<Mutex<BTreeMap<String, Node>>>,
    syncs: Arc<AtomicU64>,
    /// Microseconds each file fsync takes (to see group commit work).
    sync_us: u64,
    /// What file fsyncs do from now on: `SYNC_OK`, `SYNC_ERR` or `SYNC_PANIC`.
    sync_mode: Arc<AtomicU8>,
    /// `Some`: files have fast paths, say `batch_crc32()` (as the wasm guest's do) and count
    /// `crc32_ranges` calls.
    batch_crc: Option<Arc<AtomicU64>>,
    /// The locks held (`Fs::lock`), shared by clones as the tree is.
    pub locks: crate::fs::MemLocks,
}

/// File fsyncs succeed.
pub const SYNC_OK: u8 = 0;
/// File fsyncs return an I/O error.
pub const SYNC_ERR: u8 = 1;
/// File fsyncs panic (a buggy `Fs` implementation).
pub const SYNC_PANIC: u8 = 2;

pub struct MemFile(
    Data,
    Arc<AtomicU64>,
    u64,
    Arc<AtomicU8>,
    Option<Arc<AtomicU64>>,
);

fn err(k: ErrorKind) -> io::Error {
    io::Error::new(k, format!("{k:?}"))
}

fn norm(path: &str) -> io::Result<String> {
    Ok(split_path(path)?.join("/"))
}

fn parent(p: &str) -> &str {
    crate::fs::parent_of(p)
}

impl MemFs {
    pub fn new() -> Self {
        Self::default()
    }
    fn check_parent(nodes: &BTreeMap<String, Node>, p: &str) -> io::Result<()> {
        let par = parent(p);
        if par.is_empty() || matches!(nodes.get(par), Some(Node::Dir)) {
            Ok(())
        } else {
            Err(err(ErrorKind::NotFound))
        }
    }
    /// Raw access for corruption tests.
    pub fn bytes(&self, path: &str) -> Vec<u8> {
        match self.nodes.lock().unwrap().get(path) {
            Some(Node::File(d)) => d.lock().unwrap().clone(),
            _ => panic!("no file {path}"),
        }
    }
    /// Every path with its bytes (`None` for a directory).
    pub fn tree(&self) -> Vec<(String, Option<Vec<u8>>)> {
        let n = self.nodes.lock().unwrap();
        n.iter()
            .map(|(p, node)| match node {
                Node::File(d) => (p.clone(), Some(d.lock().unwrap().clone())),
                Node::Dir => (p.clone(), None),
            })
            .collect()
    }
    pub fn set_bytes(&self, path: &str, b: Vec<u8>) {
        match self.nodes.lock().unwrap().get(path) {
            Some(Node::File(d)) => *d.lock().unwrap() = b,
            _ => panic!("no file {path}"),
        }
    }
    /// A filesystem whose file fsyncs take `us` microseconds.
    pub fn with_sync_delay(us: u64) -> Self {
        MemFs {
            sync_us: us,
            ..Self::default()
        }
    }
    /// Sets what file fsyncs do from now on (`SYNC_OK`, `SYNC_ERR`, `SYNC_PANIC`).
    pub fn set_sync_mode(&self, mode: u8) {
        self.sync_mode.store(mode, Ordering::SeqCst);
    }
    /// A filesystem whose files ask for batched checksums (`FastPaths::batch_crc32`), computed
    /// here, the calls counted (`crc32_batches`).
    pub fn with_batch_crc() -> Self {
        MemFs {
            batch_crc: Some(Arc::default()),
            ..Self::default()
        }
    }
    /// `crc32_ranges` calls so far (with `with_batch_crc`).
    pub fn crc32_batches(&self) -> u64 {
        self.batch_crc
            .as_ref()
            .map_or(0, |c| c.load(Ordering::SeqCst))
    }
    /// File fsyncs so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }
    pub fn paths(&self) -> Vec<String> {
        self.nodes.lock().unwrap().keys().cloned().collect()
    }
}

impl FsFile for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let d = self.0.lock().unwrap();
        let off = offset as usize;
        if off >= d.len() {
            return Ok(0);
        }
        let n = buf.len().min(d.len() - off);
        buf[..n].copy_from_slice(&d[off..off + n]);
        Ok(n)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut d = self.0.lock().unwrap();
        let end = offset as usize + buf.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.lock().unwrap().len() as u64)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        self.1.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_micros(self.2));
        match self.3.load(Ordering::SeqCst) {
            SYNC_ERR => Err(err(ErrorKind::Other)),
            SYNC_PANIC => panic!("MemFs: injected panic in sync_data"),
            _ => Ok(()),
        }
    }
    fn sync_all(&self) -> io::Result<()> {
        Ok(())
    }
    fn fast_paths(&self) -> Option<&dyn FastPaths> {
        self.4.as_ref().map(|_| self as &dyn FastPaths)
    }
}

// Only with batched checksums (`MemFs::with_batch_crc`): a plain `MemFs` has no fast paths.
impl FastPaths for MemFile {
    fn batch_crc32(&self) -> bool {
        true
    }
    fn crc32_ranges(&self, buf: &[u8], ranges: &[(u32, u32)], out: &mut Vec<u32>) {
        if let Some(c) = &self.4 {
            c.fetch_add(1, Ordering::SeqCst);
        }
        out.extend(
            ranges
                .iter()
                .map(|&(s, l)| crate::record::crc32(&buf[s as usize..(s + l) as usize])),
        );
    }
    // With batched checksums (the wasm guest's model), a scan's read arrives in a buffer of
    // its own, exactly `len` long, as the guest's list from its host does.
    fn read_vec_at(&self, buf: &mut Vec<u8>, len: usize, offset: u64) -> io::Result<()> {
        let d = self.0.lock().unwrap();
        let (off, end) = (offset as usize, offset as usize + len);
        if end > d.len() {
            return Err(err(ErrorKind::UnexpectedEof));
        }
        *buf = d[off..end].to_vec();
        Ok(())
    }
}

impl Fs for MemFs {
    type File = MemFile;
    fn open(&self, path: &str, o: OpenOptions) -> io::Result<MemFile> {
        o.validate()?;
        let p = norm(path)?;
        let mut n = self.nodes.lock().unwrap();
        match n.get(&p) {
            Some(Node::Dir) => Err(err(ErrorKind::IsADirectory)),
            _ if p.is_empty() => Err(err(ErrorKind::IsADirectory)),
            Some(Node::File(_)) if o.create_new => Err(err(ErrorKind::AlreadyExists)),
            Some(Node::File(d)) => {
                if o.truncate {
                    d.lock().unwrap().clear();
                }
                Ok(MemFile(
                    d.clone(),
                    self.syncs.clone(),
                    self.sync_us,
                    self.sync_mode.clone(),
                    self.batch_crc.clone(),
                ))
            }
            None if o.create || o.create_new => {
                Self::check_parent(&n, &p)?;
                let d: Data = Default::default();
                n.insert(p, Node::File(d.clone()));
                Ok(MemFile(
                    d,
                    self.syncs.clone(),
                    self.sync_us,
                    self.sync_mode.clone(),
                    self.batch_crc.clone(),
                ))
            }
            None => Err(err(ErrorKind::NotFound)),
        }
    }
    fn create_dir(&self, path: &str) -> io::Result<()> {
        let p = norm(path)?;
        let mut n = self.nodes.lock().unwrap();
        if p.is_empty() || n.contains_key(&p) {
            return Err(err(ErrorKind::AlreadyExists));
        }
        Self::check_parent(&n, &p)?;
        n.insert(p, Node::Dir);
        Ok(())
    }
    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        let p = norm(path)?;
        let n = self.nodes.lock().unwrap();
        if !p.is_empty() && !matches!(n.get(&p), Some(Node::Dir)) {
            return Err(err(ErrorKind::NotFound));
        }
        let mut out: Vec<DirEntry> = n
            .iter()
            .filter(|(k, _)| !k.is_empty() && parent(k) == p)
            .map(|(k, v)| DirEntry {
                name: k.rsplit('/').next().unwrap().to_string(),
                is_dir: matches!(v, Node::Dir),
            })
            .collect();
        out.sort();
        Ok(out)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (f, t) = (norm(from)?, norm(to)?);
        let mut n = self.nodes.lock().unwrap();
        let node = n.get(&f).cloned().ok_or(err(ErrorKind::NotFound))?;
        Self::check_parent(&n, &t)?;
        let moved: Vec<(String, Node)> = n
            .iter()
            .filter(|(k, _)| **k == f || k.starts_with(&format!("{f}/")))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if matches!(node, Node::Dir) && n.keys().any(|k| k.starts_with(&format!("{t}/"))) {
            return Err(err(ErrorKind::DirectoryNotEmpty));
        }
        for (k, _) in &moved {
            n.remove(k);
        }
        n.remove(&t);
        for (k, v) in moved {
            n.insert(format!("{t}{}", &k[f.len()..]), v);
        }
        Ok(())
    }
    fn remove_file(&self, path: &str) -> io::Result<()> {
        let p = norm(path)?;
        let mut n = self.nodes.lock().unwrap();
        match n.get(&p) {
            Some(Node::File(_)) => {
                n.remove(&p);
                Ok(())
            }
            Some(Node::Dir) => Err(err(ErrorKind::IsADirectory)),
            None => Err(err(ErrorKind::NotFound)),
        }
    }
    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        let p = norm(path)?;
        let mut n = self.nodes.lock().unwrap();
        if !matches!(n.get(&p), Some(Node::Dir)) {
            return Err(err(ErrorKind::NotFound));
        }
        n.retain(|k, _| *k != p && !k.starts_with(&format!("{p}/")));
        Ok(())
    }
    fn lock(&self, name: &str) -> Result<crate::fs::FsLock, crate::fs::LockError> {
        self.locks.lock(name)
    }
    fn sync_dir(&self, path: &str) -> io::Result<()> {
        let p = norm(path)?;
        let n = self.nodes.lock().unwrap();
        if p.is_empty() || matches!(n.get(&p), Some(Node::Dir)) {
            Ok(())
        } else {
            Err(err(ErrorKind::NotFound))
        }
    }
}
