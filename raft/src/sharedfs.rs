//! An `Fs` shared by reference count, so that the stream store and the metadata file of one
//! log go through the very same filesystem object (fault-fs must see both in one trace).

use seqstore_core::fs::{DirEntry, Fs, FsLock, LockError, OpenOptions};
use std::io;
use std::sync::Arc;

/// `Arc<F>` as an `Fs`: every call is forwarded, with the caller's location kept
/// (`#[track_caller]`), so fault-fs names the line of this crate or of store-core that issued it.
#[derive(Debug)]
pub struct SharedFs<F>(pub Arc<F>);

impl<F> Clone for SharedFs<F> {
    fn clone(&self) -> Self {
        SharedFs(Arc::clone(&self.0))
    }
}

impl<F: Fs> Fs for SharedFs<F> {
    type File = F::File;

    #[track_caller]
    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<F::File> {
        self.0.open(path, opts)
    }
    #[track_caller]
    fn create_dir(&self, path: &str) -> io::Result<()> {
        self.0.create_dir(path)
    }
    #[track_caller]
    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        self.0.read_dir(path)
    }
    #[track_caller]
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.0.rename(from, to)
    }
    #[track_caller]
    fn remove_file(&self, path: &str) -> io::Result<()> {
        self.0.remove_file(path)
    }
    #[track_caller]
    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        self.0.remove_dir_all(path)
    }
    #[track_caller]
    fn sync_dir(&self, path: &str) -> io::Result<()> {
        self.0.sync_dir(path)
    }
    #[track_caller]
    fn lock(&self, name: &str) -> Result<FsLock, LockError> {
        self.0.lock(name)
    }
}

/// A sub-directory of a [`SharedFs`] as an `Fs` of its own: every path (and lock name) is
/// prefixed with `dir/`, so a store opened on it lives in that directory and never sees its
/// siblings. The directory itself must exist. One filesystem object underneath, so fault-fs
/// records every stream's writes and the state machine's own files in one trace.
#[derive(Debug)]
pub struct SubFs<F> {
    fs: SharedFs<F>,
    dir: String,
}

impl<F> Clone for SubFs<F> {
    fn clone(&self) -> Self {
        SubFs {
            fs: self.fs.clone(),
            dir: self.dir.clone(),
        }
    }
}

impl<F> SubFs<F> {
    /// `dir` (relative, no trailing `/`) of `fs`.
    pub fn new(fs: SharedFs<F>, dir: impl Into<String>) -> Self {
        SubFs {
            fs,
            dir: dir.into(),
        }
    }

    fn at(&self, path: &str) -> String {
        if path.is_empty() || path == "." {
            self.dir.clone()
        } else {
            format!("{}/{path}", self.dir)
        }
    }
}

impl<F: Fs> Fs for SubFs<F> {
    type File = F::File;

    #[track_caller]
    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<F::File> {
        self.fs.0.open(&self.at(path), opts)
    }
    #[track_caller]
    fn create_dir(&self, path: &str) -> io::Result<()> {
        self.fs.0.create_dir(&self.at(path))
    }
    #[track_caller]
    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        self.fs.0.read_dir(&self.at(path))
    }
    #[track_caller]
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.fs.0.rename(&self.at(from), &self.at(to))
    }
    #[track_caller]
    fn remove_file(&self, path: &str) -> io::Result<()> {
        self.fs.0.remove_file(&self.at(path))
    }
    #[track_caller]
    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        self.fs.0.remove_dir_all(&self.at(path))
    }
    #[track_caller]
    fn sync_dir(&self, path: &str) -> io::Result<()> {
        self.fs.0.sync_dir(&self.at(path))
    }
    #[track_caller]
    fn lock(&self, name: &str) -> Result<FsLock, LockError> {
        self.fs.0.lock(&self.at(name))
    }
}
