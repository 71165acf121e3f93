//! seqstore's store as a WebAssembly component (world `seqstore:store/store`, see
//! `wasm-guest/wit/seqstore.wit`).
//!
//! store-core runs here unmodified. This crate only adapts the boundary:
//! - the imported `fs` interface becomes a store-core [`Fs`] ([`ImportedFs`]), so the host
//!   decides what filesystem the store gets (a real directory, fault-fs, anything);
//! - `storage::preopened-dir` instead uses host-fs's WASI backend on a directory the runtime
//!   preopened;
//! - the imported `clock` becomes the store's [`Clock`], so the host controls time;
//! - the exported `stream` interface is store-core's `Store` API, with its `Error` as a typed
//!   WIT variant.
//!
//! Built for `wasm32-wasip2` by wasm-host's build script. A native build compiles (so the
//! workspace builds and lints as one) but is not usable: the imports have no host there.

#![warn(missing_docs)]

use std::cell::RefCell;
use std::io;
use std::time::Duration;

use seqstore_core::fs::{
    DirEntry, FastPaths, Fs, FsFile, FsLock, LockError, OpenOptions, WriteSyncError,
};
use seqstore_core::internal::fast;
use seqstore_core::internal::StoreInternals;
use seqstore_core::{Clock, Store};

mod convert;
use convert::{from_fs_error, to_config, to_filtered, to_msg, to_report, to_wit_error};

/// The bindings wit-bindgen generates from `wasm-guest/wit` (undocumented generated code).
/// Its unsafe is the component ABI's glue (exported functions, raw pointers into linear
/// memory), generated, not written here: no component can exist without it.
#[allow(missing_docs, unsafe_code)]
mod bindings {
    #[cfg(not(feature = "test-hooks"))]
    wit_bindgen::generate!({
        path: "../wit",
        world: "store",
    });

    #[cfg(feature = "test-hooks")]
    wit_bindgen::generate!({
        path: "../wit",
        world: "store-test-hooks",
    });
}

use bindings::exports::seqstore::store::stream as wit;
use bindings::seqstore::store::{checksum as wit_checksum, clock as wit_clock, fs as wit_fs};

mod consumers;
#[cfg(feature = "test-hooks")]
mod test_hooks;

// ------------------------------------------------------------------ the imported filesystem

/// store-core's [`Fs`] on the imported `seqstore:store/fs` interface: every call is one call
/// to the host. store-core buffers appends (its write buffer), so these calls are few and large.
#[derive(Debug, Default)]
pub struct ImportedFs;

/// An open file of [`ImportedFs`]: a handle the host owns.
#[derive(Debug)]
pub struct ImportedFile(wit_fs::File);

/// `FastPaths::crc32_ranges` through the host: crc32 in wasm has no SIMD, the host's has. The
/// host checksums the very bytes passed (a copy of the guest's buffer), so what the store goes
/// on to use is what was checked. (The host serves the filesystem: a host that lied here could
/// as well have changed the bytes it read; the checksums guard against the media, as natively.)
fn host_crc32_ranges(buf: &[u8], ranges: &[(u32, u32)], out: &mut Vec<u32>) {
    if ranges.is_empty() {
        return;
    }
    // Only the span the ranges cover crosses the boundary.
    let lo = ranges.iter().map(|r| r.0).min().unwrap_or(0);
    let hi = ranges
        .iter()
        .map(|r| r.0 as usize + r.1 as usize)
        .max()
        .unwrap_or(0);
    let shifted: Vec<u32> = ranges.iter().flat_map(|&(s, l)| [s - lo, l]).collect();
    let crcs = wit_checksum::crc32_ranges(&buf[lo as usize..hi], &shifted);
    if crcs.len() == ranges.len() {
        out.extend_from_slice(&crcs);
    } else {
        // A broken host: compute them here rather than trust a short answer.
        out.extend(ranges.iter().map(|&(s, l)| {
            let s = s as usize;
            seqstore_core::internal::record::crc32(&buf[s..s + l as usize])
        }));
    }
}

impl ImportedFile {
    /// Puts the host's answer to a read of `len` bytes at `offset` in `buf` without copying
    /// it; reads the rest if the host returned fewer (it caps one read), and fails at the end
    /// of the file as `read_exact_at`.
    fn take_read(
        &self,
        buf: &mut Vec<u8>,
        mut data: Vec<u8>,
        len: usize,
        offset: u64,
    ) -> io::Result<()> {
        // A host that returns more than asked is broken; never trust it past `len`.
        data.truncate(len);
        let got = data.len();
        *buf = data;
        if got < len {
            buf.resize(len, 0);
            self.read_exact_at(&mut buf[got..len], offset + got as u64)?;
        }
        Ok(())
    }
}

impl FsFile for ImportedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let data = self
            .0
            .read_at(buf.len() as u64, offset)
            .map_err(from_fs_error)?;
        // A host that returns more than asked is broken; never trust it past `buf`.
        let n = data.len().min(buf.len());
        buf[..n].copy_from_slice(&data[..n]);
        Ok(n)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_at(buf, offset).map_err(from_fs_error)
    }
    fn len(&self) -> io::Result<u64> {
        self.0.len().map_err(from_fs_error)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len).map_err(from_fs_error)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data().map_err(from_fs_error)
    }
    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all().map_err(from_fs_error)
    }
    fn fast_paths(&self) -> Option<&dyn FastPaths> {
        Some(self)
    }
}

impl FastPaths for ImportedFile {
    fn batch_crc32(&self) -> bool {
        true
    }
    fn crc32_ranges(&self, buf: &[u8], ranges: &[(u32, u32)], out: &mut Vec<u32>) {
        host_crc32_ranges(buf, ranges, out)
    }
    // The list the host wrote into guest memory becomes the scan's buffer: one copy of the
    // bytes (host to guest) instead of two.
    fn read_vec_at(&self, buf: &mut Vec<u8>, len: usize, offset: u64) -> io::Result<()> {
        let data = self.0.read_at(len as u64, offset).map_err(from_fs_error)?;
        self.take_read(buf, data, len, offset)
    }
    // The host reads, frames and checksums: the bytes never cross back for their crcs. A
    // short read (the host caps one) keeps the crcs of the records it held; the scan checks
    // any later record itself.
    fn read_framed_at(
        &self,
        buf: &mut Vec<u8>,
        len: usize,
        offset: u64,
        crcs: &mut Vec<u32>,
    ) -> io::Result<()> {
        let (data, c) = self
            .0
            .read_framed_at(len as u64, offset)
            .map_err(from_fs_error)?;
        self.take_read(buf, data, len, offset)?;
        crcs.extend_from_slice(&c);
        Ok(())
    }
    // One crossing for a durable append's write and fsync.
    fn write_all_at_sync_data(&self, buf: &[u8], offset: u64) -> Result<(), WriteSyncError> {
        self.0.write_at_sync_data(buf, offset).map_err(|e| match e {
            wit_fs::WriteSyncError::Write(e) => WriteSyncError::Write(from_fs_error(e)),
            wit_fs::WriteSyncError::Sync(e) => WriteSyncError::Sync(from_fs_error(e)),
        })
    }
}

impl Fs for ImportedFs {
    type File = ImportedFile;
    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<ImportedFile> {
        let o = wit_fs::OpenOptions {
            read: opts.read,
            write: opts.write,
            create: opts.create,
            create_new: opts.create_new,
            truncate: opts.truncate,
        };
        wit_fs::open(path, o)
            .map(ImportedFile)
            .map_err(from_fs_error)
    }
    fn create_dir(&self, path: &str) -> io::Result<()> {
        wit_fs::create_dir(path).map_err(from_fs_error)
    }
    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        let mut v: Vec<DirEntry> = wit_fs::read_dir(path)
            .map_err(from_fs_error)?
            .into_iter()
            .map(|e| DirEntry {
                name: e.name,
                is_dir: e.is_dir,
            })
            .collect();
        // The contract says sorted; do not rely on the host for an invariant the store uses.
        v.sort();
        Ok(v)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        wit_fs::rename(from, to).map_err(from_fs_error)
    }
    fn remove_file(&self, path: &str) -> io::Result<()> {
        wit_fs::remove_file(path).map_err(from_fs_error)
    }
    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        wit_fs::remove_dir_all(path).map_err(from_fs_error)
    }
    fn sync_dir(&self, path: &str) -> io::Result<()> {
        wit_fs::sync_dir(path).map_err(from_fs_error)
    }
    fn lock(&self, _name: &str) -> Result<FsLock, LockError> {
        Ok(held_by_host())
    }
}

// ------------------------------------------------------------------ either filesystem

/// The filesystem a guest store runs on: the host's (through the import) or WASI's own.
/// One concrete type, so one `Store` type serves both.
#[derive(Debug)]
pub enum GuestFs {
    /// The imported `fs` interface.
    Imported(ImportedFs),
    /// host-fs over WASI's filesystem, rooted at a (normally preopened) directory.
    Wasi(seqstore_fs::HostFs),
}

/// A file of [`GuestFs`].
#[derive(Debug)]
pub enum GuestFile {
    /// From the imported `fs`.
    Imported(ImportedFile),
    /// From host-fs.
    Wasi(seqstore_fs::HostFile),
}

macro_rules! on_file {
    ($self:ident, $f:ident => $e:expr) => {
        match $self {
            GuestFile::Imported($f) => $e,
            GuestFile::Wasi($f) => $e,
        }
    };
}

impl FsFile for GuestFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        on_file!(self, f => f.read_at(buf, offset))
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        on_file!(self, f => f.write_all_at(buf, offset))
    }
    fn len(&self) -> io::Result<u64> {
        on_file!(self, f => f.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        on_file!(self, f => f.set_len(len))
    }
    fn sync_data(&self) -> io::Result<()> {
        on_file!(self, f => f.sync_data())
    }
    fn sync_all(&self) -> io::Result<()> {
        on_file!(self, f => f.sync_all())
    }
    // Both kinds of file: the checksums are the host's either way.
    fn fast_paths(&self) -> Option<&dyn FastPaths> {
        Some(self)
    }
}

// Each kind's own fast paths (host-fs's WASI file has none: the defaults, on it).
impl FastPaths for GuestFile {
    fn batch_crc32(&self) -> bool {
        true
    }
    fn crc32_ranges(&self, buf: &[u8], ranges: &[(u32, u32)], out: &mut Vec<u32>) {
        host_crc32_ranges(buf, ranges, out)
    }
    fn read_vec_at(&self, buf: &mut Vec<u8>, len: usize, offset: u64) -> io::Result<()> {
        on_file!(self, f => fast::read_vec_at(f, buf, len, offset))
    }
    fn read_framed_at(
        &self,
        buf: &mut Vec<u8>,
        len: usize,
        offset: u64,
        crcs: &mut Vec<u32>,
    ) -> io::Result<()> {
        match self {
            GuestFile::Imported(f) => fast::read_framed_at(f, buf, len, offset, crcs),
            // WASI's files cannot ask the host to frame: read, then send for the checksums
            // (this file's `crc32_ranges`: the host's).
            GuestFile::Wasi(_) => {
                seqstore_core::fs::read_framed_by_ranges(self, buf, len, offset, crcs)
            }
        }
    }
    fn write_all_at_sync_data(&self, buf: &[u8], offset: u64) -> Result<(), WriteSyncError> {
        on_file!(self, f => fast::write_all_at_sync_data(f, buf, offset))
    }
}

macro_rules! on_fs {
    ($self:ident, $f:ident => $e:expr) => {
        match $self {
            GuestFs::Imported($f) => $e,
            GuestFs::Wasi($f) => $e,
        }
    };
}

impl Fs for GuestFs {
    type File = GuestFile;
    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<GuestFile> {
        match self {
            GuestFs::Imported(f) => f.open(path, opts).map(GuestFile::Imported),
            GuestFs::Wasi(f) => f.open(path, opts).map(GuestFile::Wasi),
        }
    }
    fn create_dir(&self, path: &str) -> io::Result<()> {
        on_fs!(self, f => f.create_dir(path))
    }
    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        on_fs!(self, f => f.read_dir(path))
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        on_fs!(self, f => f.rename(from, to))
    }
    fn remove_file(&self, path: &str) -> io::Result<()> {
        on_fs!(self, f => f.remove_file(path))
    }
    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        on_fs!(self, f => f.remove_dir_all(path))
    }
    fn sync_dir(&self, path: &str) -> io::Result<()> {
        on_fs!(self, f => f.sync_dir(path))
    }
    // Both kinds: the component runs only under seqstore's host, which holds the store's
    // lock for the instance's whole life (wasm-host's `GuestStore` takes it before `open`).
    // The WASI command (`main.rs`) uses host-fs directly, with its marker-file lock.
    fn lock(&self, _name: &str) -> Result<FsLock, LockError> {
        Ok(held_by_host())
    }
}

/// The lock a guest store holds: nothing of its own, the host holds the real one.
fn held_by_host() -> FsLock {
    FsLock::new(())
}

/// The imported `clock` as the store's [`Clock`].
#[derive(Debug, Default)]
pub struct ImportedClock;

impl Clock for ImportedClock {
    fn now_ns(&self) -> i64 {
        wit_clock::now_ns()
    }
}

// ------------------------------------------------------------------ the exported store

type R<T> = Result<T, wit::Error>;

/// Splits a packed message (subject, headers, payload back to back) off `data`; the payload is
/// the rest of `data` unless its length is given. Lengths that do not fit are the host's
/// mistake, reported as `invalid-argument` (never a panic).
fn unpack(
    data: &[u8],
    subject_len: u32,
    headers_len: u32,
    payload_len: Option<u32>,
) -> R<(&str, &[u8], &[u8])> {
    let bad = |reason: &str| wit::Error::InvalidArgument(format!("packed message: {reason}"));
    let (s, h) = (subject_len as usize, headers_len as usize);
    let end = match payload_len {
        Some(p) => s.checked_add(h).and_then(|x| x.checked_add(p as usize)),
        None => s.checked_add(h).map(|x| x.max(data.len())),
    };
    match end {
        Some(end) if end <= data.len() => {
            let subject =
                std::str::from_utf8(&data[..s]).map_err(|_| bad("subject is not UTF-8"))?;
            Ok((subject, &data[s..s + h], &data[s + h..end]))
        }
        _ => Err(bad("lengths exceed the buffer")),
    }
}

fn wr<T>(r: seqstore_core::Result<T>) -> R<T> {
    r.map_err(to_wit_error)
}

/// The exported `store` resource: one store-core `Store`. The component model calls resource
/// methods with `&self` and one call at a time, so a `RefCell` gives the `&mut` store-core needs.
pub struct GuestStoreRes(RefCell<Store<seqstore_core::CryptFs<GuestFs>>>);

impl GuestStoreRes {
    fn with<T>(
        &self,
        f: impl FnOnce(&mut Store<seqstore_core::CryptFs<GuestFs>>) -> seqstore_core::Result<T>,
    ) -> R<T> {
        wr(f(&mut self.0.borrow_mut()))
    }
}

/// The component.
pub struct Component;

impl wit::Guest for Component {
    type Store = GuestStoreRes;
}

impl wit::GuestStore for GuestStoreRes {
    fn open(storage: wit::Storage, config: wit::Config) -> R<wit::Store> {
        if config
            .encryption
            .as_ref()
            .is_some_and(|e| e.key.len() != 32)
        {
            return Err(wit::Error::InvalidConfig(
                "an encryption key is 32 bytes".into(),
            ));
        }
        let fs = match storage {
            wit::Storage::ImportedFs => GuestFs::Imported(ImportedFs),
            wit::Storage::PreopenedDir(dir) => {
                let fs =
                    seqstore_fs::HostFs::open(&dir).map_err(|source| seqstore_core::Error::Io {
                        op: "open root",
                        path: dir.clone(),
                        source,
                    });
                GuestFs::Wasi(wr(fs)?)
            }
        };
        // through the encryption and compression layer (which passes a plain config through)
        let store = wr(Store::builder(fs)
            .config(to_config(config))
            .clock(ImportedClock)
            .open_layered())?;
        Ok(wit::Store::new(GuestStoreRes(RefCell::new(store))))
    }

    fn append(&self, subject: String, headers: Vec<u8>, payload: Vec<u8>) -> R<u64> {
        self.with(|s| s.append(&subject, &headers, &payload))
    }
    fn append_packed(&self, subject_len: u32, headers_len: u32, data: Vec<u8>) -> R<wit::Appended> {
        let (subject, headers, payload) = unpack(&data, subject_len, headers_len, None)?;
        self.with(|s| {
            let seq = s.append(subject, headers, payload)?;
            Ok(wit::Appended {
                seq,
                last_ts: s.state().last_ts,
            })
        })
    }
    fn append_encoded_one(&self, encoded: Vec<u8>) -> R<wit::Appended> {
        self.with(|s| {
            let seq = s.append_encoded(&encoded)?;
            Ok(wit::Appended {
                seq,
                last_ts: s.state().last_ts,
            })
        })
    }
    fn append_encoded(&self, records: Vec<u8>) -> wit::BatchOutcome {
        let mut store = self.0.borrow_mut();
        let (applied, r) = store.append_encoded_run(&records);
        let error = r.err().map(|e| {
            // The host acknowledged the records after this one with sequences the store
            // will now never assign to them: no other message may get them.
            store.poison();
            to_wit_error(e)
        });
        let st = store.state();
        wit::BatchOutcome {
            applied: applied as u32,
            error,
            last_seq: st.last_seq,
            last_ts: st.last_ts,
        }
    }
    fn append_batch(&self, msgs: Vec<wit::PackedMsg>, data: Vec<u8>) -> Vec<R<u64>> {
        let mut store = self.0.borrow_mut();
        // `None` once a message did not fit: the offsets of the rest are unknown.
        let mut rest = Some(&data[..]);
        msgs.iter()
            .map(|m| {
                let r = rest.map(|r| unpack(r, m.subject_len, m.headers_len, Some(m.payload_len)));
                let (subject, headers, payload) = match r {
                    Some(Ok(parts)) => parts,
                    Some(Err(e)) => {
                        rest = None;
                        return Err(e);
                    }
                    None => {
                        return Err(wit::Error::InvalidArgument(
                            "packed message: follows one whose lengths exceed the buffer".into(),
                        ))
                    }
                };
                rest = rest.map(|r| &r[subject.len() + headers.len() + payload.len()..]);
                wr(store.append(subject, headers, payload))
            })
            .collect()
    }
    fn append_with_ttl(
        &self,
        subject: String,
        headers: Vec<u8>,
        payload: Vec<u8>,
        ttl_ns: u64,
    ) -> R<u64> {
        let ttl = Duration::from_nanos(ttl_ns);
        self.with(|s| s.append_with_ttl(&subject, &headers, &payload, ttl))
    }
    fn append_raw(
        &self,
        seq: u64,
        ts: i64,
        subject: String,
        headers: Vec<u8>,
        payload: Vec<u8>,
    ) -> R<u64> {
        self.with(|s| s.append_raw(seq, ts, &subject, &headers, &payload))
    }
    fn skip_msg(&self, seq: u64) -> R<u64> {
        self.with(|s| s.skip_msg(seq))
    }
    fn skip_many(&self, first: u64, count: u64) -> R<u64> {
        self.with(|s| s.skip_many(first, count))
    }
    fn next_matching_multi(
        &self,
        filters: Vec<String>,
        from_seq: u64,
    ) -> R<Option<wit::StoredMsg>> {
        let filters: Vec<&str> = filters.iter().map(String::as_str).collect();
        self.with(|s| s.next_matching_multi(&filters, from_seq))
            .map(|m| m.map(to_msg))
    }
    fn filtered_state(&self, filters: Vec<String>, from_seq: u64) -> R<wit::FilteredState> {
        let filters: Vec<&str> = filters.iter().map(String::as_str).collect();
        self.with(|s| s.filtered_state_multi(&filters, from_seq))
            .map(to_filtered)
    }
    fn subjects_state_detail(&self, filter: String) -> R<Vec<(String, wit::FilteredState)>> {
        self.with(|s| s.subjects_state_detail(&filter))
            .map(|m| m.into_iter().map(|(k, v)| (k, to_filtered(v))).collect())
    }
    fn multi_last_seqs(&self, filters: Vec<String>, max_seq: u64, max_count: u64) -> R<Vec<u64>> {
        let filters: Vec<&str> = filters.iter().map(String::as_str).collect();
        // a count past this address space is no limit it could reach
        let max_count = usize::try_from(max_count).unwrap_or(usize::MAX);
        self.with(|s| s.multi_last_seqs(&filters, max_seq, max_count))
    }
    fn all_last_seqs(&self) -> R<Vec<u64>> {
        self.with(|s| s.all_last_seqs())
    }
    fn subject_for_seq(&self, seq: u64) -> R<String> {
        self.with(|s| s.subject_for_seq(seq))
    }
    fn get(&self, seq: u64) -> R<wit::StoredMsg> {
        self.with(|s| s.get(seq)).map(to_msg)
    }
    fn last_for_subject(&self, subject: String) -> R<Option<wit::StoredMsg>> {
        self.with(|s| s.last_for_subject(&subject))
            .map(|m| m.map(to_msg))
    }
    fn next_matching(&self, filter: String, from_seq: u64) -> R<Option<wit::StoredMsg>> {
        self.with(|s| s.next_matching(&filter, from_seq))
            .map(|m| m.map(to_msg))
    }
    fn prev_matching(&self, filters: Vec<String>, from_seq: u64) -> R<Option<wit::StoredMsg>> {
        let filters: Vec<&str> = filters.iter().map(String::as_str).collect();
        self.with(|s| s.prev_matching_multi(&filters, from_seq))
            .map(|m| m.map(to_msg))
    }
    fn get_batch(
        &self,
        from_seq: u64,
        filter: String,
        max_msgs: u32,
        max_bytes: u64,
    ) -> R<Vec<wit::StoredMsg>> {
        self.with(|s| s.get_batch(from_seq, &filter, max_msgs as usize, max_bytes))
            .map(|v| v.into_iter().map(to_msg).collect())
    }
    fn get_batch_records(
        &self,
        from_seq: u64,
        filter: String,
        max_msgs: u32,
        max_bytes: u64,
    ) -> R<Vec<u8>> {
        let mut out = Vec::new();
        self.with(|s| {
            s.get_batch_records(from_seq, &filter, max_msgs as usize, max_bytes, &mut out)
        })?;
        Ok(out)
    }
    fn seq_from_time(&self, ts: i64) -> R<u64> {
        self.with(|s| s.seq_from_time(ts))
    }
    fn num_pending(
        &self,
        from_seq: u64,
        filters: Vec<String>,
        last_per_subject: bool,
    ) -> R<(u64, u64)> {
        let filters: Vec<&str> = filters.iter().map(String::as_str).collect();
        self.with(|s| s.num_pending_multi(from_seq, &filters, last_per_subject))
    }
    fn subjects_state(&self, filter: String) -> R<Vec<(String, u64)>> {
        self.with(|s| s.subjects_state(&filter))
            .map(|m| m.into_iter().collect())
    }
    fn state(&self) -> wit::StreamState {
        let s = self.0.borrow().state();
        wit::StreamState {
            msgs: s.msgs,
            bytes: s.bytes,
            first_seq: s.first_seq,
            first_ts: s.first_ts,
            last_seq: s.last_seq,
            last_ts: s.last_ts,
            num_deleted: s.num_deleted,
            num_subjects: s.num_subjects,
        }
    }
    fn delete(&self, seq: u64) -> R<()> {
        self.with(|s| s.delete(seq))
    }
    fn erase(&self, seq: u64) -> R<()> {
        self.with(|s| s.erase(seq))
    }
    fn purge(&self) -> R<u64> {
        self.with(|s| s.purge())
    }
    fn purge_ex(&self, filter: String, up_to_seq: u64, keep: u64) -> R<u64> {
        self.with(|s| s.purge_ex(&filter, up_to_seq, keep))
    }
    fn compact(&self, seq: u64) -> R<u64> {
        self.with(|s| s.compact(seq))
    }
    fn truncate(&self, seq: u64) -> R<u64> {
        self.with(|s| s.truncate(seq))
    }
    fn sync(&self) -> R<()> {
        self.with(|s| s.sync())
    }
    fn tick(&self) -> R<()> {
        self.with(|s| s.tick())
    }
    fn checkpoint(&self) -> R<()> {
        self.with(|s| s.checkpoint())
    }
    fn recovery_report(&self) -> wit::RecoveryReport {
        to_report(self.0.borrow().recovery_report())
    }
    fn is_poisoned(&self) -> bool {
        self.0.borrow().is_poisoned()
    }
    fn close(store: wit::Store) -> R<()> {
        let res: GuestStoreRes = store.into_inner();
        wr(res.0.into_inner().close())
    }

    // ---- durable consumers (consumers.rs) ----
    fn consumer_add(&self, c: wit::ConsumerConfig) -> Result<(), wit::ConsumerError> {
        GuestStoreRes::consumer_add(self, c)
    }
    fn consumer_update(&self, c: wit::ConsumerConfig) -> Result<(), wit::ConsumerError> {
        GuestStoreRes::consumer_update(self, c)
    }
    fn update_delivered(
        &self,
        name: String,
        dseq: u64,
        sseq: u64,
        dc: u64,
        ts: i64,
    ) -> Result<(), wit::ConsumerError> {
        GuestStoreRes::update_delivered(self, name, dseq, sseq, dc, ts)
    }
    fn update_acks(&self, name: String, dseq: u64, sseq: u64) -> Result<(), wit::ConsumerError> {
        GuestStoreRes::update_acks(self, name, dseq, sseq)
    }
    fn consumer_state(&self, name: String) -> Result<wit::ConsumerState, wit::ConsumerError> {
        GuestStoreRes::consumer_state(self, name)
    }
    fn consumer_config(&self, name: String) -> Result<wit::ConsumerConfig, wit::ConsumerError> {
        GuestStoreRes::consumer_config(self, name)
    }
    fn consumer_reset(&self, name: String, start: u64) -> Result<(), wit::ConsumerError> {
        GuestStoreRes::consumer_reset(self, name, start)
    }
    fn consumer_delete(&self, name: String) -> Result<(), wit::ConsumerError> {
        GuestStoreRes::consumer_delete(self, name)
    }
    fn consumer_names(&self) -> Vec<String> {
        GuestStoreRes::consumer_names(self)
    }
}

// Natively there is no component to export into (and the linker cannot even spell the WIT
// export names), so the native build only type-checks the implementation.
// In a module of its own for the allow: the export glue is generated unsafe, as in `bindings`.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod export {
    use super::{bindings, Component};
    bindings::export!(Component with_types_in bindings);
}
