//! How the store (and a layer or host that forwards files) calls the optional
//! [`FastPaths`] of a file: each helper takes the file's fast path if [`FsFile::fast_paths`]
//! offers one, and otherwise does what that method's default does, on the file itself. A
//! backend without fast paths therefore sees the same operations, in the same order, as if it
//! had implemented every default.

use crate::fs::{FastPaths, FsFile, WriteSyncError};
use std::io;

/// A file without fast paths seen as one with every default: the defaults of [`FastPaths`]
/// are the one statement of what the store does without them.
struct Plain<'a, H: ?Sized>(&'a H);

impl<H: FsFile + ?Sized> FsFile for Plain<'_, H> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
}

impl<H: FsFile + ?Sized> FastPaths for Plain<'_, H> {}

/// [`FastPaths::write_all_at_sync_data`] of `f`.
#[track_caller]
pub fn write_all_at_sync_data<H: FsFile + ?Sized>(
    f: &H,
    buf: &[u8],
    offset: u64,
) -> Result<(), WriteSyncError> {
    match f.fast_paths() {
        Some(p) => p.write_all_at_sync_data(buf, offset),
        None => Plain(f).write_all_at_sync_data(buf, offset),
    }
}

/// [`FastPaths::worth_rewriting`] of `f`.
pub fn worth_rewriting<H: FsFile + ?Sized>(f: &H) -> bool {
    match f.fast_paths() {
        Some(p) => p.worth_rewriting(),
        None => Plain(f).worth_rewriting(),
    }
}

/// [`FastPaths::batch_crc32`] of `f`.
pub fn batch_crc32<H: FsFile + ?Sized>(f: &H) -> bool {
    match f.fast_paths() {
        Some(p) => p.batch_crc32(),
        None => Plain(f).batch_crc32(),
    }
}

/// [`FastPaths::crc32_ranges`] of `f`.
pub fn crc32_ranges<H: FsFile + ?Sized>(
    f: &H,
    buf: &[u8],
    ranges: &[(u32, u32)],
    out: &mut Vec<u32>,
) {
    match f.fast_paths() {
        Some(p) => p.crc32_ranges(buf, ranges, out),
        None => Plain(f).crc32_ranges(buf, ranges, out),
    }
}

/// [`FastPaths::read_vec_at`] of `f`.
#[track_caller]
pub fn read_vec_at<H: FsFile + ?Sized>(
    f: &H,
    buf: &mut Vec<u8>,
    len: usize,
    offset: u64,
) -> io::Result<()> {
    match f.fast_paths() {
        Some(p) => p.read_vec_at(buf, len, offset),
        None => Plain(f).read_vec_at(buf, len, offset),
    }
}

/// [`FastPaths::read_framed_at`] of `f`.
#[track_caller]
pub fn read_framed_at<H: FsFile + ?Sized>(
    f: &H,
    buf: &mut Vec<u8>,
    len: usize,
    offset: u64,
    crcs: &mut Vec<u32>,
) -> io::Result<()> {
    match f.fast_paths() {
        Some(p) => p.read_framed_at(buf, len, offset, crcs),
        None => Plain(f).read_framed_at(buf, len, offset, crcs),
    }
}
