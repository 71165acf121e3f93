//! A [`FaultFs`] loaded from a real directory, everything in it durable: the starting state of
//! a program whose syscalls are replayed (`trace-check/`), where the directory may already
//! hold data.

use crate::{Error, FaultFs, FaultFsConfig};
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use std::io;
use std::path::Path;

impl FaultFs {
    /// A filesystem holding a copy of the tree at `dir` (regular files and directories), all
    /// of it durable: crashing it right away changes nothing. A symlink, socket or other
    /// special file in the tree is an `Unsupported` error naming it (fault-fs models files
    /// and directories only); names that are not UTF-8 are `InvalidData`.
    pub fn from_dir(cfg: FaultFsConfig, dir: &Path) -> io::Result<FaultFs> {
        cfg.validate()
            .map_err(|e: Error| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let fs = FaultFs::with_config(cfg.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        copy_tree(&fs, dir, "")?;
        // the copy went through the traced operations: start afresh from its (durable) state
        let (_, core) = fs.state();
        Ok(FaultFs::from_core(cfg, (*core).clone()))
    }
}

/// Copies the real directory `dir` into `fs` at `at` ("" = the root), fsyncing every file and
/// directory so that the copy is durable.
fn copy_tree(fs: &FaultFs, dir: &Path, at: &str) -> io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().into_string().map_err(|n| {
            io::Error::new(io::ErrorKind::InvalidData, format!("name not UTF-8: {n:?}"))
        })?;
        let path = if at.is_empty() {
            name
        } else {
            format!("{at}/{name}")
        };
        let ty = e.file_type()?;
        if ty.is_dir() {
            fs.create_dir(&path)?;
            copy_tree(fs, &e.path(), &path)?;
        } else if ty.is_file() {
            let bytes = std::fs::read(e.path())?;
            let f = fs.open(&path, OpenOptions::read_write_create())?;
            f.write_all_at(&bytes, 0)?;
            f.sync_all()?;
        } else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{}: not a regular file or directory", e.path().display()),
            ));
        }
    }
    fs.sync_dir(at)
}
