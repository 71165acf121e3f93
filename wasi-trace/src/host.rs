//! `wasi:filesystem` (types and preopens, 0.2.x) served from a [`FaultFs`] tree.
//!
//! wasmtime-wasi's generated host traits name its own `Descriptor` and
//! `DirectoryEntryStream` resource types, which wrap real files. This host implements the
//! same traits but keeps its own [`Desc`] and [`DirIter`] in the resource table: a handle's
//! `rep` indexes that table, and every lookup goes through [`ResourceTable::get`], which
//! checks the stored type, so a handle of another type is an error, never a misread.
//!
//! Not modelled: timestamps (`set-times` succeeds and changes nothing; stats carry none) and
//! symbolic links (`symlink-at` stops the guest with an error naming the call: fault-fs has
//! regular files and directories only).

use crate::served::{dir_path, is_dir, resolve, Desc, Kind, Shared};
use crate::streams::{FileInput, FileOutput};
use seqstore_core::fs::{Fs, FsFile};
use seqstore_fault_fs::{FaultFile, Stat};
use seqstore_trace::ops::{Op, OpenFlags, WriteAt};
use std::io;
use std::sync::Arc;
use wasmtime::component::{HasData, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode as Code;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as t;
use wasmtime_wasi::p2::bindings::sync::io::streams;
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, FsError, FsResult};

/// The guest path of the directory holding the marks file, and the file's name in it.
pub const MARKS_DIR: &str = "/.seqstore-trace";
/// The marks file's name in [`MARKS_DIR`].
pub const MARKS_NAME: &str = "marks";

/// What the filesystem host functions see of the store's data.
pub(crate) struct View<'a> {
    pub(crate) table: &'a mut ResourceTable,
    pub(crate) served: &'a Shared,
    /// The guest path of the served tree's root.
    pub(crate) root: &'a str,
    /// Whether the marks directory is preopened.
    pub(crate) marks: bool,
}

/// The [`HasData`] of this host's filesystem.
pub(crate) struct ServedFs;

impl HasData for ServedFs {
    type Data<'a> = View<'a>;
}

/// A directory listing being read.
pub(crate) struct DirIter(std::vec::IntoIter<t::DirectoryEntry>);

fn desc_of(r: &Resource<t::Descriptor>) -> Resource<Desc> {
    Resource::new_borrow(r.rep())
}

fn refused(call: &str) -> FsError {
    FsError::trap(wasmtime::Error::msg(format!(
        "{call}: symbolic links are not modelled (the served filesystem has regular files and directories only)"
    )))
}

impl View<'_> {
    fn desc(&self, fd: &Resource<t::Descriptor>) -> FsResult<&Desc> {
        Ok(self.table.get(&desc_of(fd))?)
    }

    fn push(&mut self, d: Desc) -> FsResult<Resource<t::Descriptor>> {
        let r = self.table.push(d)?;
        Ok(Resource::new_own(r.rep()))
    }

    /// The tree path of `rel` under the directory `fd`.
    fn at(&self, fd: &Resource<t::Descriptor>, rel: &str) -> FsResult<String> {
        match &self.desc(fd)?.kind {
            Kind::Dir(p) => Ok(resolve(&dir_path(p), rel)?),
            Kind::MarksDir => Err(Code::NotPermitted.into()),
            _ => Err(Code::NotDirectory.into()),
        }
    }

    fn file(&self, fd: &Resource<t::Descriptor>) -> FsResult<(&Desc, &Arc<FaultFile>)> {
        let d = self.desc(fd)?;
        match &d.kind {
            Kind::File(f, _) => Ok((d, f)),
            Kind::Dir(_) | Kind::MarksDir => Err(Code::IsDirectory.into()),
            Kind::Marks => Err(Code::Unsupported.into()),
        }
    }

    /// Records a namespace call that succeeded.
    fn note(&self, text: String, op: Op) {
        self.served.lock().record(|| text, op);
    }

    fn open_marks(
        &mut self,
        path: &str,
        oflags: t::OpenFlags,
    ) -> FsResult<Resource<t::Descriptor>> {
        if path.trim_start_matches("./") != MARKS_NAME || oflags.contains(t::OpenFlags::DIRECTORY) {
            return Err(Code::NotPermitted.into());
        }
        self.push(Desc {
            kind: Kind::Marks,
            ofd: 0,
            read: false,
            write: true,
        })
    }

    fn stat_path(&self, path: &str) -> FsResult<t::DescriptorStat> {
        match self.served.lock().fs.stat(path)? {
            Stat::Dir => Ok(stat(t::DescriptorType::Directory, 0)),
            Stat::File { len } => Ok(stat(t::DescriptorType::RegularFile, len)),
            _ => Err(Code::Unsupported.into()),
        }
    }
}

fn stat(type_: t::DescriptorType, size: u64) -> t::DescriptorStat {
    t::DescriptorStat {
        type_,
        link_count: 1,
        size,
        data_access_timestamp: None,
        data_modification_timestamp: None,
        status_change_timestamp: None,
    }
}

/// A stable identity for `metadata-hash`: the path's FNV-1a, by kind.
fn hash_of(kind: &Kind) -> t::MetadataHashValue {
    match kind {
        Kind::Dir(p) => path_hash(true, &dir_path(p)),
        Kind::File(_, p) => path_hash(false, p),
        Kind::MarksDir => key_hash("m:"),
        Kind::Marks => key_hash("m:marks"),
    }
}

/// The identity of the directory or file at `path` (the same as its descriptor's).
fn path_hash(dir: bool, path: &str) -> t::MetadataHashValue {
    key_hash(&format!("{}:{path}", if dir { "d" } else { "f" }))
}

fn key_hash(key: &str) -> t::MetadataHashValue {
    let h = fnv(key.as_bytes());
    t::MetadataHashValue {
        lower: h,
        upper: fnv(&h.to_le_bytes()),
    }
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

fn open_flags(oflags: t::OpenFlags, flags: t::DescriptorFlags) -> OpenFlags {
    OpenFlags {
        read: flags.contains(t::DescriptorFlags::READ),
        write: flags.contains(t::DescriptorFlags::WRITE),
        create: oflags.contains(t::OpenFlags::CREATE),
        excl: oflags.contains(t::OpenFlags::EXCLUSIVE),
        trunc: oflags.contains(t::OpenFlags::TRUNCATE),
        append: false,
        directory: oflags.contains(t::OpenFlags::DIRECTORY),
        path_only: false,
        sync: flags.intersects(
            t::DescriptorFlags::FILE_INTEGRITY_SYNC | t::DescriptorFlags::DATA_INTEGRITY_SYNC,
        ),
    }
}

impl preopens::Host for View<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<t::Descriptor>, String)>> {
        let (root, ofd) = {
            let mut s = self.served.lock();
            let ofd = s.ofd();
            let root = s.dir(String::new());
            let flags = OpenFlags {
                read: true,
                directory: true,
                ..OpenFlags::default()
            };
            let op = Op::Open {
                ofd,
                path: String::new(),
                flags,
            };
            s.record(|| format!("preopen {:?}", self.root), op);
            (root, ofd)
        };
        let mut out = vec![(
            self.push(Desc {
                kind: Kind::Dir(root),
                ofd,
                read: true,
                write: true,
            })?,
            self.root.to_string(),
        )];
        if self.marks {
            let d = Desc {
                kind: Kind::MarksDir,
                ofd: 0,
                read: false,
                write: true,
            };
            out.push((self.push(d)?, MARKS_DIR.to_string()));
        }
        Ok(out)
    }
}

impl t::Host for View<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<t::ErrorCode> {
        Ok(err.downcast()?.into())
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<streams::Error>,
    ) -> wasmtime::Result<Option<t::ErrorCode>> {
        let e: &wasmtime::Error = self.table.get(&err)?;
        Ok(e.downcast_ref::<io::Error>().map(|e| Code::from(e).into()))
    }
}

impl t::HostDirectoryEntryStream for View<'_> {
    fn read_directory_entry(
        &mut self,
        stream: Resource<t::DirectoryEntryStream>,
    ) -> FsResult<Option<t::DirectoryEntry>> {
        let it: &mut DirIter = self.table.get_mut(&Resource::new_borrow(stream.rep()))?;
        Ok(it.0.next())
    }

    fn drop(&mut self, stream: Resource<t::DirectoryEntryStream>) -> wasmtime::Result<()> {
        self.table
            .delete::<DirIter>(Resource::new_own(stream.rep()))?;
        Ok(())
    }
}

impl t::HostDescriptor for View<'_> {
    fn advise(
        &mut self,
        _fd: Resource<t::Descriptor>,
        _offset: t::Filesize,
        _len: t::Filesize,
        _advice: t::Advice,
    ) -> FsResult<()> {
        Ok(())
    }

    fn sync_data(&mut self, fd: Resource<t::Descriptor>) -> FsResult<()> {
        self.sync(fd)
    }

    fn get_flags(&mut self, fd: Resource<t::Descriptor>) -> FsResult<t::DescriptorFlags> {
        let d = self.desc(&fd)?;
        let mut f = t::DescriptorFlags::empty();
        if d.read {
            f |= t::DescriptorFlags::READ;
        }
        if d.write {
            f |= t::DescriptorFlags::WRITE;
            if matches!(d.kind, Kind::Dir(_)) {
                f |= t::DescriptorFlags::MUTATE_DIRECTORY;
            }
        }
        Ok(f)
    }

    fn get_type(&mut self, fd: Resource<t::Descriptor>) -> FsResult<t::DescriptorType> {
        Ok(match self.desc(&fd)?.kind {
            Kind::Dir(_) | Kind::MarksDir => t::DescriptorType::Directory,
            Kind::File(..) | Kind::Marks => t::DescriptorType::RegularFile,
        })
    }

    fn set_size(&mut self, fd: Resource<t::Descriptor>, size: t::Filesize) -> FsResult<()> {
        let (d, f) = self.file(&fd)?;
        if !d.write {
            return Err(Code::BadDescriptor.into());
        }
        f.set_len(size)?;
        let (ofd, path) = (
            d.ofd,
            match &d.kind {
                Kind::File(_, p) => p.clone(),
                _ => String::new(),
            },
        );
        self.note(
            format!("set-size({path:?}, {size})"),
            Op::SetLen { ofd, len: size },
        );
        Ok(())
    }

    fn set_times(
        &mut self,
        fd: Resource<t::Descriptor>,
        _atim: t::NewTimestamp,
        _mtim: t::NewTimestamp,
    ) -> FsResult<()> {
        self.desc(&fd)?;
        Ok(())
    }

    fn read(
        &mut self,
        fd: Resource<t::Descriptor>,
        len: t::Filesize,
        offset: t::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        let (d, f) = self.file(&fd)?;
        if !d.read {
            return Err(Code::BadDescriptor.into());
        }
        let size = f.len()?;
        let n = len.min(size.saturating_sub(offset)).min(16 << 20);
        let mut buf = vec![0; n as usize];
        let got = if n == 0 {
            0
        } else {
            f.read_at(&mut buf, offset)?
        };
        buf.truncate(got);
        Ok((buf, offset + got as u64 >= size))
    }

    fn write(
        &mut self,
        fd: Resource<t::Descriptor>,
        buf: Vec<u8>,
        offset: t::Filesize,
    ) -> FsResult<t::Filesize> {
        let d = self.desc(&fd)?;
        if !d.write {
            return Err(Code::BadDescriptor.into());
        }
        let (kind, ofd) = (d.kind.share(), d.ofd);
        self.served
            .lock()
            .write((&kind, ofd), &buf, WriteAt::Offset(offset))?;
        Ok(buf.len() as u64)
    }

    fn read_directory(
        &mut self,
        fd: Resource<t::Descriptor>,
    ) -> FsResult<Resource<t::DirectoryEntryStream>> {
        let entries = match &self.desc(&fd)?.kind {
            Kind::Dir(p) => {
                let p = dir_path(p);
                let es = self.served.lock().fs.read_dir(&p)?;
                es.into_iter()
                    .map(|e| t::DirectoryEntry {
                        type_: if e.is_dir {
                            t::DescriptorType::Directory
                        } else {
                            t::DescriptorType::RegularFile
                        },
                        name: e.name,
                    })
                    .collect()
            }
            Kind::MarksDir => Vec::new(),
            _ => return Err(Code::NotDirectory.into()),
        };
        let r = self.table.push(DirIter(Vec::into_iter(entries)))?;
        Ok(Resource::new_own(r.rep()))
    }

    fn sync(&mut self, fd: Resource<t::Descriptor>) -> FsResult<()> {
        let d = self.desc(&fd)?;
        let ofd = d.ofd;
        let text = match &d.kind {
            Kind::File(f, p) => {
                f.sync_all()?;
                format!("sync({p:?})")
            }
            Kind::Dir(p) => {
                let p = dir_path(p);
                self.served.lock().fs.sync_dir(&p)?;
                format!("sync(directory {p:?})")
            }
            Kind::MarksDir | Kind::Marks => return Ok(()),
        };
        self.note(text, Op::Fsync { ofd });
        Ok(())
    }

    fn create_directory_at(&mut self, fd: Resource<t::Descriptor>, path: String) -> FsResult<()> {
        let p = self.at(&fd, &path)?;
        self.served.lock().fs.create_dir(&p)?;
        self.note(format!("create-directory-at({p:?})"), Op::Mkdir { path: p });
        Ok(())
    }

    fn stat(&mut self, fd: Resource<t::Descriptor>) -> FsResult<t::DescriptorStat> {
        match &self.desc(&fd)?.kind {
            Kind::File(f, _) => Ok(stat(t::DescriptorType::RegularFile, f.len()?)),
            Kind::Marks => Ok(stat(t::DescriptorType::RegularFile, 0)),
            Kind::Dir(_) | Kind::MarksDir => Ok(stat(t::DescriptorType::Directory, 0)),
        }
    }

    fn stat_at(
        &mut self,
        fd: Resource<t::Descriptor>,
        _path_flags: t::PathFlags,
        path: String,
    ) -> FsResult<t::DescriptorStat> {
        if matches!(self.desc(&fd)?.kind, Kind::MarksDir) {
            return Ok(stat(t::DescriptorType::RegularFile, 0));
        }
        let p = self.at(&fd, &path)?;
        self.stat_path(&p)
    }

    fn set_times_at(
        &mut self,
        fd: Resource<t::Descriptor>,
        _path_flags: t::PathFlags,
        path: String,
        _atim: t::NewTimestamp,
        _mtim: t::NewTimestamp,
    ) -> FsResult<()> {
        let p = self.at(&fd, &path)?;
        self.stat_path(&p).map(|_| ())
    }

    fn link_at(
        &mut self,
        fd: Resource<t::Descriptor>,
        _old_path_flags: t::PathFlags,
        old_path: String,
        new_descriptor: Resource<t::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let from = self.at(&fd, &old_path)?;
        let to = self.at(&new_descriptor, &new_path)?;
        self.served.lock().fs.hard_link(&from, &to)?;
        self.note(format!("link-at({from:?}, {to:?})"), Op::Link { from, to });
        Ok(())
    }

    fn open_at(
        &mut self,
        fd: Resource<t::Descriptor>,
        _path_flags: t::PathFlags,
        path: String,
        oflags: t::OpenFlags,
        flags: t::DescriptorFlags,
    ) -> FsResult<Resource<t::Descriptor>> {
        if matches!(self.desc(&fd)?.kind, Kind::MarksDir) {
            return self.open_marks(&path, oflags);
        }
        let p = self.at(&fd, &path)?;
        let of = open_flags(oflags, flags);
        let (kind, ofd) = {
            let mut s = self.served.lock();
            let kind = s.open(&p, &of)?;
            let ofd = s.ofd();
            let op = Op::Open {
                ofd,
                path: p.clone(),
                flags: of,
            };
            s.record(|| format!("open-at({p:?}, {oflags:?}, {flags:?})"), op);
            (kind, ofd)
        };
        self.push(Desc {
            kind,
            ofd,
            read: of.read || !of.write,
            write: of.write,
        })
    }

    fn drop(&mut self, fd: Resource<t::Descriptor>) -> wasmtime::Result<()> {
        let d: Desc = self.table.delete(Resource::new_own(fd.rep()))?;
        if let Kind::Dir(_) | Kind::File(..) = d.kind {
            self.note(
                format!("close(description {})", d.ofd),
                Op::Close { ofd: d.ofd },
            );
        }
        Ok(())
    }

    fn readlink_at(&mut self, fd: Resource<t::Descriptor>, path: String) -> FsResult<String> {
        let p = self.at(&fd, &path)?;
        self.stat_path(&p)?;
        Err(Code::Invalid.into()) // exists, and is no symbolic link
    }

    fn remove_directory_at(&mut self, fd: Resource<t::Descriptor>, path: String) -> FsResult<()> {
        let p = self.at(&fd, &path)?;
        {
            let s = self.served.lock();
            if p.is_empty() {
                return Err(Code::Busy.into());
            }
            if !s.fs.read_dir(&p)?.is_empty() {
                return Err(Code::NotEmpty.into());
            }
            s.fs.remove_dir_all(&p)?;
        }
        self.note(format!("remove-directory-at({p:?})"), Op::Rmdir { path: p });
        Ok(())
    }

    fn rename_at(
        &mut self,
        fd: Resource<t::Descriptor>,
        old_path: String,
        new_fd: Resource<t::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let from = self.at(&fd, &old_path)?;
        let to = self.at(&new_fd, &new_path)?;
        {
            let mut s = self.served.lock();
            s.fs.rename(&from, &to)?;
            s.moved(&from, &to);
        }
        let op = Op::Rename {
            from: from.clone(),
            to: Some(to.clone()),
            noreplace: false,
        };
        self.note(format!("rename-at({from:?}, {to:?})"), op);
        Ok(())
    }

    fn symlink_at(
        &mut self,
        _fd: Resource<t::Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        Err(refused(&format!("symlink-at({src_path:?}, {dest_path:?})")))
    }

    fn unlink_file_at(&mut self, fd: Resource<t::Descriptor>, path: String) -> FsResult<()> {
        let p = self.at(&fd, &path)?;
        {
            let s = self.served.lock();
            if is_dir(&s.fs, &p) {
                return Err(Code::IsDirectory.into());
            }
            s.fs.remove_file(&p)?;
        }
        self.note(format!("unlink-file-at({p:?})"), Op::Unlink { path: p });
        Ok(())
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<t::Descriptor>,
        offset: t::Filesize,
    ) -> FsResult<Resource<streams::InputStream>> {
        let (d, f) = self.file(&fd)?;
        if !d.read {
            return Err(Code::BadDescriptor.into());
        }
        let s = FileInput {
            file: f.clone(),
            pos: offset,
        };
        Ok(self.table.push(Box::new(s) as DynInputStream)?)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<t::Descriptor>,
        offset: t::Filesize,
    ) -> FsResult<Resource<streams::OutputStream>> {
        self.output(&fd, Some(offset))
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<t::Descriptor>,
    ) -> FsResult<Resource<streams::OutputStream>> {
        self.output(&fd, None)
    }

    fn is_same_object(
        &mut self,
        a: Resource<t::Descriptor>,
        b: Resource<t::Descriptor>,
    ) -> wasmtime::Result<bool> {
        let ha = hash_of(&self.table.get(&desc_of(&a))?.kind);
        let hb = hash_of(&self.table.get(&desc_of(&b))?.kind);
        Ok((ha.lower, ha.upper) == (hb.lower, hb.upper))
    }

    fn metadata_hash(&mut self, fd: Resource<t::Descriptor>) -> FsResult<t::MetadataHashValue> {
        Ok(hash_of(&self.desc(&fd)?.kind))
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<t::Descriptor>,
        _path_flags: t::PathFlags,
        path: String,
    ) -> FsResult<t::MetadataHashValue> {
        let p = self.at(&fd, &path)?;
        let dir = matches!(self.stat_path(&p)?.type_, t::DescriptorType::Directory);
        Ok(path_hash(dir, &p))
    }
}

impl View<'_> {
    fn output(
        &mut self,
        fd: &Resource<t::Descriptor>,
        pos: Option<u64>,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let d = self.desc(fd)?;
        if !d.write {
            return Err(Code::BadDescriptor.into());
        }
        if let Kind::Dir(_) | Kind::MarksDir = d.kind {
            return Err(Code::IsDirectory.into());
        }
        let s = FileOutput {
            served: self.served.clone(),
            kind: d.kind.share(),
            ofd: d.ofd,
            pos,
        };
        Ok(self.table.push(Box::new(s) as DynOutputStream)?)
    }
}
