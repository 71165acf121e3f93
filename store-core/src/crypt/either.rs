//! [`CryptFile`]: a file of the layer's format, or the file below itself when the layer has
//! nothing to do (no encryption, no compression), so that one store type serves both.

use super::file::Framed;
use crate::fs::{FastPaths, FsFile};
use std::io;

/// A file of [`super::CryptFs`].
pub struct CryptFile<FF>(pub(super) Either<FF>);

pub(super) enum Either<FF> {
    /// The layer is plain: every call goes straight through (the file's own fast paths
    /// included).
    Plain(FF),
    Framed(Framed<FF>),
}

macro_rules! each {
    ($self:expr, $f:ident => $e:expr) => {
        match &$self.0 {
            Either::Plain($f) => $e,
            Either::Framed($f) => $e,
        }
    };
}

impl<FF: FsFile> FsFile for CryptFile<FF> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        each!(self, f => f.read_at(buf, offset))
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        each!(self, f => f.write_all_at(buf, offset))
    }
    fn len(&self) -> io::Result<u64> {
        each!(self, f => f.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        each!(self, f => f.set_len(len))
    }
    fn sync_data(&self) -> io::Result<()> {
        each!(self, f => f.sync_data())
    }
    fn sync_all(&self) -> io::Result<()> {
        each!(self, f => f.sync_all())
    }
    // Forwarded, so that a store's plain reads through a plain layer are the file's own.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        each!(self, f => f.read_exact_at(buf, offset))
    }
    // A plain layer's file offers the fast paths of the file below (if any); a framed one,
    // its own.
    fn fast_paths(&self) -> Option<&dyn FastPaths> {
        each!(self, f => f.fast_paths())
    }
}
