//! The native backend: a cap-std `Dir` on the store root.

use crate::{entry_name, path_error, with_path};
use cap_std::fs::Dir;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use store_core::fs::split_path;
use store_core::{DirEntry, Fs, FsFile, OpenOptions};

/// The store's filesystem on a directory of the host, confined beneath it (see the crate docs).
#[derive(Debug)]
pub struct HostFs {
    dir: Dir,
}

/// A validated path relative to the root: `None` is the root itself.
fn relative(op: &'static str, path: &str) -> io::Result<Option<String>> {
    let parts = split_path(path).map_err(|e| with_path(op, path, e))?;
    Ok(if parts.is_empty() {
        None
    } else {
        Some(parts.join("/"))
    })
}

impl HostFs {
    /// Opens the existing directory `path` as the store root. `path` is resolved with the
    /// process's ambient authority (it is the one path that is); everything after goes through
    /// the returned handle only.
    pub fn open(path: impl AsRef<Path>) -> io::Result<HostFs> {
        let path = path.as_ref();
        let dir = Dir::open_ambient_dir(path, cap_std::ambient_authority())
            .map_err(|e| with_path("open root", &path.to_string_lossy(), e))?;
        Ok(HostFs { dir })
    }

    /// Creates the directory `path` (and its missing parents, as `std::fs::create_dir_all`) and
    /// opens it as the store root. The creation is not made durable: sync the parent directory
    /// by other means if that matters.
    pub fn create(path: impl AsRef<Path>) -> io::Result<HostFs> {
        let path = path.as_ref();
        std::fs::create_dir_all(path)
            .map_err(|e| with_path("create root", &path.to_string_lossy(), e))?;
        HostFs::open(path)
    }

    /// Uses an already opened directory as the store root.
    pub fn from_dir(dir: Dir) -> HostFs {
        HostFs { dir }
    }
}

impl Fs for HostFs {
    type File = HostFile;

    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<HostFile> {
        opts.validate().map_err(|e| with_path("open", path, e))?;
        let Some(rel) = relative("open", path)? else {
            return Err(path_error(
                io::ErrorKind::IsADirectory,
                "open",
                path,
                "the root is a directory",
            ));
        };
        let mut o = cap_std::fs::OpenOptions::new();
        o.read(opts.read)
            .write(opts.write)
            .create(opts.create)
            .create_new(opts.create_new)
            .truncate(opts.truncate);
        let file = self
            .dir
            .open_with(&rel, &o)
            .map_err(|e| with_path("open", path, e))?
            .into_std();
        // Linux lets a directory be opened read-only; the store wants a file or an error.
        if file
            .metadata()
            .map_err(|e| with_path("open", path, e))?
            .is_dir()
        {
            return Err(path_error(
                io::ErrorKind::IsADirectory,
                "open",
                path,
                "is a directory",
            ));
        }
        Ok(HostFile { file })
    }

    fn create_dir(&self, path: &str) -> io::Result<()> {
        match relative("create_dir", path)? {
            None => Err(path_error(
                io::ErrorKind::AlreadyExists,
                "create_dir",
                path,
                "the root exists",
            )),
            Some(rel) => self
                .dir
                .create_dir(&rel)
                .map_err(|e| with_path("create_dir", path, e)),
        }
    }

    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        let err = |e| with_path("read_dir", path, e);
        let iter = match relative("read_dir", path)? {
            None => self.dir.entries(),
            Some(rel) => self.dir.read_dir(&rel),
        }
        .map_err(err)?;
        let mut out = Vec::new();
        for entry in iter {
            let entry = entry.map_err(err)?;
            // `file_type` does not follow symlinks: a symlink is reported as not a directory.
            let is_dir = entry.file_type().map_err(err)?.is_dir();
            out.push(DirEntry {
                name: entry_name(entry.file_name(), path)?,
                is_dir,
            });
        }
        out.sort_unstable();
        Ok(out)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (Some(f), Some(t)) = (relative("rename", from)?, relative("rename", to)?) else {
            return Err(path_error(
                io::ErrorKind::InvalidInput,
                "rename",
                &format!("{from} -> {to}"),
                "the root cannot be renamed or replaced",
            ));
        };
        self.dir
            .rename(&f, &self.dir, &t)
            .map_err(|e| with_path("rename", &format!("{from} -> {to}"), e))
    }

    fn remove_file(&self, path: &str) -> io::Result<()> {
        match relative("remove_file", path)? {
            None => Err(path_error(
                io::ErrorKind::IsADirectory,
                "remove_file",
                path,
                "the root is a directory",
            )),
            Some(rel) => self
                .dir
                .remove_file(&rel)
                .map_err(|e| with_path("remove_file", path, e)),
        }
    }

    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        match relative("remove_dir_all", path)? {
            None => Err(path_error(
                io::ErrorKind::InvalidInput,
                "remove_dir_all",
                path,
                "the root cannot be removed",
            )),
            Some(rel) => self
                .dir
                .remove_dir_all(&rel)
                .map_err(|e| with_path("remove_dir_all", path, e)),
        }
    }

    fn sync_dir(&self, path: &str) -> io::Result<()> {
        let err = |e| with_path("sync_dir", path, e);
        // cap-std opens directories with `O_PATH` on Linux (`open_ambient_dir`, `open_dir`), and
        // `fsync` on an `O_PATH` descriptor fails with `EBADF`. So: `open_dir` checks that
        // `path` is a directory beneath the root (`O_DIRECTORY`, never a FIFO or device), then
        // `"."` relative to it is opened `O_RDONLY`, a real descriptor of that same directory.
        let read = cap_std::fs::OpenOptions::new().read(true).clone();
        let file = match relative("sync_dir", path)? {
            None => self.dir.open_with(".", &read),
            Some(rel) => self
                .dir
                .open_dir(&rel)
                .and_then(|d| d.open_with(".", &read)),
        }
        .map_err(err)?
        .into_std();
        file.sync_all().map_err(err)
    }
}

/// An open file of a [`HostFs`]: a `std::fs::File` used with positioned I/O.
#[derive(Debug)]
pub struct HostFile {
    file: std::fs::File,
}

impl HostFile {
    /// The underlying std file.
    pub fn as_std(&self) -> &std::fs::File {
        &self.file
    }

    /// Consumes the handle, returning the underlying std file.
    pub fn into_std(self) -> std::fs::File {
        self.file
    }
}

impl FsFile for HostFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()
    }
}
