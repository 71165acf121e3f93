//! The host side of the guest's imports: the `fs` interface forwarded to any store-core
//! [`Fs`], the `clock` interface, WASI, and the memory cap.

use std::io;

use seqstore_core::fs::{DirEntry, Fs, FsFile, OpenOptions, WriteSyncError};
use seqstore_core::Clock;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::ResourceLimiter;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::seqstore::store::{checksum, clock, fs as wit_fs};
use crate::convert::to_fs_error;

/// Largest read the host performs for one `read-at` call, whatever the guest asks for:
/// `read_at` may return fewer bytes, so this bounds host memory per call without changing
/// semantics. store-core reads 1 MiB at a time.
const MAX_READ: u64 = 16 << 20;

/// [`Fs`] with the file type boxed, so one non-generic host state (and one pre-linked
/// component) serves every filesystem type.
pub(crate) trait DynFs: Send + Sync {
    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<Box<dyn FsFile>>;
    fn create_dir(&self, path: &str) -> io::Result<()>;
    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>>;
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    fn remove_file(&self, path: &str) -> io::Result<()>;
    fn remove_dir_all(&self, path: &str) -> io::Result<()>;
    fn sync_dir(&self, path: &str) -> io::Result<()>;
    /// Takes the store's lock, which the host holds for its guest (`seqstore_core::internal::lock_store`).
    fn lock_store(&self) -> seqstore_core::Result<seqstore_core::fs::FsLock>;
}

impl<F: Fs> DynFs for F
where
    F::File: 'static,
{
    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<Box<dyn FsFile>> {
        Fs::open(self, path, opts).map(|f| Box::new(f) as Box<dyn FsFile>)
    }
    fn create_dir(&self, path: &str) -> io::Result<()> {
        Fs::create_dir(self, path)
    }
    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        Fs::read_dir(self, path)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        Fs::rename(self, from, to)
    }
    fn remove_file(&self, path: &str) -> io::Result<()> {
        Fs::remove_file(self, path)
    }
    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        Fs::remove_dir_all(self, path)
    }
    fn sync_dir(&self, path: &str) -> io::Result<()> {
        Fs::sync_dir(self, path)
    }
    fn lock_store(&self) -> seqstore_core::Result<seqstore_core::fs::FsLock> {
        seqstore_core::internal::lock_store(self)
    }
}

/// The `fs` import of a store that lives in a preopened directory: the guest uses WASI's
/// filesystem there, and this one refuses everything.
pub(crate) struct NoFs;

fn no_fs<T>() -> io::Result<T> {
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        "this guest store lives in a preopened directory; the imported fs is not available",
    ))
}

impl DynFs for NoFs {
    fn open(&self, _: &str, _: OpenOptions) -> io::Result<Box<dyn FsFile>> {
        no_fs()
    }
    fn create_dir(&self, _: &str) -> io::Result<()> {
        no_fs()
    }
    fn read_dir(&self, _: &str) -> io::Result<Vec<DirEntry>> {
        no_fs()
    }
    fn rename(&self, _: &str, _: &str) -> io::Result<()> {
        no_fs()
    }
    fn remove_file(&self, _: &str) -> io::Result<()> {
        no_fs()
    }
    fn remove_dir_all(&self, _: &str) -> io::Result<()> {
        no_fs()
    }
    fn lock_store(&self) -> seqstore_core::Result<seqstore_core::fs::FsLock> {
        // the host locks the preopened directory itself (`GuestStore::open_inner`)
        Err(seqstore_core::Error::Io {
            op: "lock",
            path: seqstore_core::internal::LOCK_FILE.into(),
            source: no_fs::<()>().unwrap_err(),
        })
    }
    fn sync_dir(&self, _: &str) -> io::Result<()> {
        no_fs()
    }
}

/// An open file of the host's filesystem, owned by the guest through a resource handle.
pub struct FileRep(Box<dyn FsFile>);

/// The memory cap, and what hit it.
pub(crate) struct Limiter {
    pub(crate) max_memory: usize,
    /// The size a refused `memory.grow` asked for: a trap that follows is this limit.
    pub(crate) refused: Option<usize>,
}

/// Most table elements (function references) a guest may have; store-core needs a few
/// hundred.
const MAX_TABLE_ELEMENTS: usize = 1 << 16;

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.refused = Some(desired);
            // Trap instead of letting `memory.grow` return -1: the guest's allocator would
            // abort anyway, and a trap names the cause.
            return Err(wasmtime::format_err!(
                "guest memory cap: {desired} bytes asked for, cap {}",
                self.max_memory
            ));
        }
        Ok(maximum.is_none_or(|m| desired <= m))
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS && maximum.is_none_or(|m| desired <= m))
    }
}

/// Everything a guest instance's host functions use (the `T` of its wasmtime `Store`).
pub(crate) struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) fs: Box<dyn DynFs>,
    pub(crate) clock: Box<dyn Clock>,
    pub(crate) limiter: Limiter,
    /// What the guest wrote to stderr (a panic message, if it panics), capped.
    pub(crate) stderr: MemoryOutputPipe,
    pub(crate) open_files: usize,
    pub(crate) max_open_files: usize,
    /// `write-at-sync-data` calls served (the tests check durable appends use it).
    #[cfg(test)]
    pub(crate) write_syncs: std::cell::Cell<u64>,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

type FsResult<T> = wasmtime::Result<Result<T, wit_fs::FsError>>;

/// A host filesystem result for the guest: an `io::Error` is the guest's to handle (the store
/// turns it into its own error), never a trap.
fn fs_result<T>(r: io::Result<T>) -> FsResult<T> {
    Ok(r.map_err(|e| to_fs_error(&e)))
}

type WriteSyncResult = wasmtime::Result<Result<(), wit_fs::WriteSyncError>>;

impl HostState {
    fn file(&self, h: &Resource<FileRep>) -> wasmtime::Result<&dyn FsFile> {
        // A handle the guest does not own is a guest bug: trap.
        Ok(&*self.table.get(h)?.0)
    }

    /// `file.write-at`, on bytes wherever they are (the guest's memory, see `link_fs_writes`).
    fn write_at_slice(&self, h: &Resource<FileRep>, data: &[u8], offset: u64) -> FsResult<()> {
        fs_result(self.file(h)?.write_all_at(data, offset))
    }

    /// `file.write-at-sync-data`, as `write_at_slice`.
    fn write_at_sync_data_slice(
        &self,
        h: &Resource<FileRep>,
        data: &[u8],
        offset: u64,
    ) -> WriteSyncResult {
        #[cfg(test)]
        self.write_syncs.set(self.write_syncs.get() + 1);
        // The host's own `Fs` decides how: its file's fast path if it has one, else its
        // write, then its sync.
        let r = seqstore_core::internal::fast::write_all_at_sync_data(self.file(h)?, data, offset);
        Ok(match r {
            Ok(()) => Ok(()),
            Err(WriteSyncError::Sync(e)) => Err(wit_fs::WriteSyncError::Sync(to_fs_error(&e))),
            Err(WriteSyncError::Write(e)) => Err(wit_fs::WriteSyncError::Write(to_fs_error(&e))),
            // (a step this host does not know: the guest treats a failed write as the worse)
            Err(e) => Err(wit_fs::WriteSyncError::Write(to_fs_error(
                &io::Error::other(format!("{e:?}")),
            ))),
        })
    }
}

/// Redefines the `fs` imports that take bytes from the guest (`file.write-at`,
/// `file.write-at-sync-data`) so that the host writes them from the guest's memory where they
/// are: the generated bindings first copy a `list<u8>` argument into a fresh `Vec` (a
/// malloc, a copy and a free per call; callgrind: 1.5% of an unsynced guest append's
/// instructions, 4% of a durable one's). Same types, same results; the linker checks the
/// types at link time.
pub(crate) fn link_fs_writes(
    linker: &mut wasmtime::component::Linker<HostState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::WasmList;
    use wasmtime::StoreContextMut;
    linker.allow_shadowing(true);
    let mut fs = linker.instance("seqstore:store/fs@0.1.0")?;
    fs.func_wrap(
        "[method]file.write-at",
        |cx: StoreContextMut<'_, HostState>,
         (h, data, offset): (Resource<FileRep>, WasmList<u8>, u64)| {
            let bytes = data.as_le_slice(&cx);
            Ok((cx.data().write_at_slice(&h, bytes, offset)?,))
        },
    )?;
    fs.func_wrap(
        "[method]file.write-at-sync-data",
        |cx: StoreContextMut<'_, HostState>,
         (h, data, offset): (Resource<FileRep>, WasmList<u8>, u64)| {
            let bytes = data.as_le_slice(&cx);
            Ok((cx.data().write_at_sync_data_slice(&h, bytes, offset)?,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

impl wit_fs::HostFile for HostState {
    fn read_at(&mut self, h: Resource<FileRep>, len: u64, offset: u64) -> FsResult<Vec<u8>> {
        let f = self.file(&h)?;
        // `len` comes from the guest: never allocate more than MAX_READ for it.
        let mut buf = vec![0u8; len.min(MAX_READ) as usize];
        let r = f.read_at(&mut buf, offset).map(|n| {
            buf.truncate(n);
            buf
        });
        fs_result(r)
    }

    fn read_framed_at(
        &mut self,
        h: Resource<FileRep>,
        len: u64,
        offset: u64,
    ) -> FsResult<(Vec<u8>, Vec<u32>)> {
        let f = self.file(&h)?;
        // `len` comes from the guest: never allocate more than MAX_READ for it.
        let mut buf = vec![0u8; len.min(MAX_READ) as usize];
        // Read on until full or the end: the framing is only as good as the bytes read.
        let mut got = 0;
        let r = loop {
            if got == buf.len() {
                break Ok(());
            }
            match f.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break Ok(()),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        fs_result(r.map(|()| {
            buf.truncate(got);
            let mut crcs = Vec::new();
            seqstore_core::internal::record::framed_crcs(&buf, &mut crcs);
            (buf, crcs)
        }))
    }

    // (shadowed in the linker by a version that reads `data` in place: `link_fs_writes`)
    fn write_at(&mut self, h: Resource<FileRep>, data: Vec<u8>, offset: u64) -> FsResult<()> {
        self.write_at_slice(&h, &data, offset)
    }

    fn len(&mut self, h: Resource<FileRep>) -> FsResult<u64> {
        fs_result(self.file(&h)?.len())
    }

    fn set_len(&mut self, h: Resource<FileRep>, len: u64) -> FsResult<()> {
        fs_result(self.file(&h)?.set_len(len))
    }

    fn sync_data(&mut self, h: Resource<FileRep>) -> FsResult<()> {
        fs_result(self.file(&h)?.sync_data())
    }

    // (shadowed as `write_at` is)
    fn write_at_sync_data(
        &mut self,
        h: Resource<FileRep>,
        data: Vec<u8>,
        offset: u64,
    ) -> WriteSyncResult {
        self.write_at_sync_data_slice(&h, &data, offset)
    }

    fn sync_all(&mut self, h: Resource<FileRep>) -> FsResult<()> {
        fs_result(self.file(&h)?.sync_all())
    }

    fn drop(&mut self, h: Resource<FileRep>) -> wasmtime::Result<()> {
        self.table.delete(h)?;
        self.open_files = self.open_files.saturating_sub(1);
        Ok(())
    }
}

impl wit_fs::Host for HostState {
    fn open(&mut self, path: String, o: wit_fs::OpenOptions) -> FsResult<Resource<FileRep>> {
        if self.open_files >= self.max_open_files {
            // The host's table (and its file descriptors) must not grow without bound.
            return fs_result(Err(io::Error::other(format!(
                "open {path:?}: the guest has {} files open, the most allowed",
                self.open_files
            ))));
        }
        let opts = OpenOptions {
            read: o.read,
            write: o.write,
            create: o.create,
            create_new: o.create_new,
            truncate: o.truncate,
        };
        match self.fs.open(&path, opts) {
            Ok(f) => {
                let h = self.table.push(FileRep(f))?;
                self.open_files += 1;
                Ok(Ok(h))
            }
            Err(e) => fs_result(Err(e)),
        }
    }

    fn create_dir(&mut self, path: String) -> FsResult<()> {
        fs_result(self.fs.create_dir(&path))
    }

    fn read_dir(&mut self, path: String) -> FsResult<Vec<wit_fs::DirEntry>> {
        fs_result(self.fs.read_dir(&path).map(|v| {
            v.into_iter()
                .map(|e| wit_fs::DirEntry {
                    name: e.name,
                    is_dir: e.is_dir,
                })
                .collect()
        }))
    }

    fn rename(&mut self, from: String, to: String) -> FsResult<()> {
        fs_result(self.fs.rename(&from, &to))
    }

    fn remove_file(&mut self, path: String) -> FsResult<()> {
        fs_result(self.fs.remove_file(&path))
    }

    fn remove_dir_all(&mut self, path: String) -> FsResult<()> {
        fs_result(self.fs.remove_dir_all(&path))
    }

    fn sync_dir(&mut self, path: String) -> FsResult<()> {
        fs_result(self.fs.sync_dir(&path))
    }
}

impl clock::Host for HostState {
    fn now_ns(&mut self) -> wasmtime::Result<i64> {
        Ok(self.clock.now_ns())
    }
}

impl checksum::Host for HostState {
    fn crc32_ranges(&mut self, data: Vec<u8>, ranges: Vec<u32>) -> wasmtime::Result<Vec<u32>> {
        if !ranges.len().is_multiple_of(2) {
            return Err(wasmtime::format_err!(
                "crc32-ranges: an odd number of values"
            ));
        }
        ranges
            .chunks_exact(2)
            .map(|r| {
                let (start, len) = (r[0] as usize, r[1] as usize);
                match data.get(start..start.saturating_add(len)) {
                    Some(bytes) => Ok(seqstore_core::internal::record::crc32(bytes)),
                    // The guest computed the ranges from this very buffer: a bug, so a trap.
                    None => Err(wasmtime::format_err!(
                        "crc32-ranges: range {start}+{len} outside {} bytes",
                        data.len()
                    )),
                }
            })
            .collect()
    }
}
