//! [`CryptFile`]: a file of the layer's format, or the file below itself when the layer has
//! nothing to do (no encryption, no compression), so that one store type serves both.

use super::file::Framed;
use crate::fs::{FsFile, FsFileExt, WriteSyncError};
use std::io;

/// A file of [`super::CryptFs`].
pub struct CryptFile<FF>(pub(super) Either<FF>);

pub(super) enum Either<FF> {
    /// The layer is plain: every call goes straight through (the file's own batched reads
    /// and syncs included).
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

impl<FF: FsFileExt> FsFile for CryptFile<FF> {
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
}

impl<FF: FsFileExt> FsFileExt for CryptFile<FF> {
    fn write_all_at_sync_data(&self, buf: &[u8], offset: u64) -> Result<(), WriteSyncError> {
        each!(self, f => f.write_all_at_sync_data(buf, offset))
    }
    fn batch_crc32(&self) -> bool {
        each!(self, f => f.batch_crc32())
    }
    fn worth_rewriting(&self) -> bool {
        each!(self, f => f.worth_rewriting())
    }
    fn crc32_ranges(&self, buf: &[u8], ranges: &[(u32, u32)], out: &mut Vec<u32>) {
        each!(self, f => f.crc32_ranges(buf, ranges, out))
    }
    fn read_vec_at(&self, buf: &mut Vec<u8>, len: usize, offset: u64) -> io::Result<()> {
        each!(self, f => f.read_vec_at(buf, len, offset))
    }
    fn read_framed_at(
        &self,
        buf: &mut Vec<u8>,
        len: usize,
        offset: u64,
        crcs: &mut Vec<u32>,
    ) -> io::Result<()> {
        each!(self, f => f.read_framed_at(buf, len, offset, crcs))
    }
}
