//! An `Fs` shared by reference count, so that the stream store and the metadata file of one
//! log go through the very same filesystem object (fault-fs must see both in one trace).

use seqstore_core::{DirEntry, Fs, FsLock, LockError, OpenOptions};
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
