//! One layered file: the map from logical ranges to the frames that hold them, built by one
//! scan at open, and the reads, appends of frames, and syncs on top of it.

// Parses bytes read from a disk: no index that a damaged file (or a short read) could put out
// of range.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use super::format::{
    check_header, compress, decompress, file_header, frame_aad, FrameHdr, HeaderCheck, FILE_HDR,
    FRAME_HDR, FRAME_MAGIC, FRAME_MAX, FRAME_OVERHEAD, KIND_DATA, KIND_LEN, NONCE, TAG,
};
use super::{Fault, Shared};
use crate::fast;
use crate::fs::{FastPaths, FsFile};
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// Decrypted frames kept per file (a record read after another usually falls in the same one).
const CACHE_FRAMES: usize = 4;
/// Bytes the open scan reads at a time.
const SCAN_WINDOW: usize = 1 << 20;

/// A logical range `[key, end)` held by the frame at physical offset `frame` (`total` bytes),
/// from byte `skip` of its plaintext on. Small: a file has one per frame (24 bytes; the
/// frame's header is read again, authenticated, with its body).
#[derive(Clone, Copy, Debug)]
struct Ext {
    end: u64,
    frame: u64,
    skip: u32,
    total: u32,
}

#[derive(Default)]
struct State {
    len: u64,
    ext: BTreeMap<u64, Ext>,
    /// Where the next frame goes.
    phys_end: u64,
    /// The physical length the last successful sync covered.
    synced: u64,
    /// A write failed: the bytes at `phys_end` are unknown, so nothing more is appended.
    broken: bool,
    /// Bytes of plaintext that frames in the file still hold but a later frame wrote over or
    /// cut (an erase's old record): they stay in the file until it is rewritten.
    superseded: u64,
    cache: Vec<(u64, Arc<Vec<u8>>)>,
    /// The frames of the last write, kept for the next (a fresh buffer of a few hundred KiB
    /// per write costs the allocator an mmap and the first touch of every page).
    out: Vec<u8>,
}

/// The most of `State::out` kept between writes.
const OUT_KEEP: usize = 1 << 20;

/// A file in the layer's format.
pub(super) struct Framed<FF> {
    inner: FF,
    shared: Arc<Shared>,
    nonce: [u8; NONCE],
    st: Mutex<State>,
}

fn tampered(offset: u64, reason: impl Into<String>) -> io::Error {
    Fault::Tampered {
        offset,
        reason: reason.into(),
    }
    .into_io()
}

/// Reads the physical file through a window, for the scan at open.
struct Window<'a, FF> {
    f: &'a FF,
    plen: u64,
    start: u64,
    buf: Vec<u8>,
}

impl<FF: FsFile> Window<'_, FF> {
    /// `len` bytes at `off`, or `None` past the physical end.
    fn get(&mut self, off: u64, len: usize) -> io::Result<Option<&[u8]>> {
        if off.saturating_add(len as u64) > self.plen {
            return Ok(None);
        }
        let have = off >= self.start && off + len as u64 <= self.start + self.buf.len() as u64;
        if !have {
            let n = (len.max(SCAN_WINDOW) as u64).min(self.plen - off) as usize;
            fast::read_vec_at(self.f, &mut self.buf, n, off)?;
            self.buf.truncate(n);
            self.start = off;
        }
        let at = (off - self.start) as usize;
        // (a read shorter than asked is the file's fault, refused rather than indexed past)
        match self.buf.get(at..at + len) {
            Some(b) => Ok(Some(b)),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("read_vec_at returned fewer than {len} bytes at {off}"),
            )),
        }
    }
}

impl<FF: FsFile> Framed<FF> {
    pub(super) fn open(inner: FF, shared: Arc<Shared>, write: bool) -> io::Result<Self> {
        let plen = inner.len()?;
        let mut hdr = vec![0u8; (plen as usize).min(FILE_HDR)];
        inner.read_exact_at(&mut hdr, 0)?;
        let nonce = match check_header(&shared.sealer, &hdr).map_err(Fault::into_io)? {
            HeaderCheck::Valid(nonce) => nonce,
            HeaderCheck::Blank if !write => {
                // nothing durable here, and nothing to write: an empty file
                let f = Framed {
                    inner,
                    shared,
                    nonce: [0; NONCE],
                    st: Mutex::new(State::default()),
                };
                f.st().broken = true;
                return Ok(f);
            }
            HeaderCheck::Blank => {
                // A new file, or one whose header never became durable (so nor did anything
                // after it): start it over.
                let nonce = shared.next_nonce()?;
                let h = file_header(&shared.sealer, &nonce)?;
                if plen > 0 {
                    inner.set_len(0)?;
                }
                inner.write_all_at(&h, 0)?;
                let st = State {
                    phys_end: FILE_HDR as u64,
                    ..State::default()
                };
                return Ok(Framed {
                    inner,
                    shared,
                    nonce,
                    st: Mutex::new(st),
                });
            }
        };
        let f = Framed {
            inner,
            shared,
            nonce,
            st: Mutex::new(State::default()),
        };
        let (st, torn) = f.scan(plen)?;
        if write && torn {
            // the bytes from the first frame that does not authenticate on were never synced
            // (no later frame says so): cut them, so that new frames follow the good ones
            f.inner.set_len(st.phys_end)?;
        }
        *f.st() = st;
        Ok(f)
    }

    fn st(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Authenticates every frame and applies it; returns the state and whether a torn tail was
    /// found (it ends at `phys_end`).
    fn scan(&self, plen: u64) -> io::Result<(State, bool)> {
        let mut w = Window {
            f: &self.inner,
            plen,
            start: 0,
            buf: Vec::new(),
        };
        let mut st = State {
            phys_end: FILE_HDR as u64,
            ..State::default()
        };
        let mut scratch = Vec::new();
        loop {
            let pos = st.phys_end;
            if pos == plen {
                return Ok((st, false));
            }
            match self.frame_at(&mut w, pos, &mut scratch)? {
                Some(h) => {
                    st.synced = st.synced.max(h.synced);
                    apply(&mut st, pos, h);
                    st.phys_end = pos + h.total() as u64;
                }
                None => break,
            }
        }
        // A bad frame: torn by a crash if nothing after it was synced. A later frame that
        // authenticates and says the file had been synced past it proves otherwise.
        let bad = st.phys_end;
        let mut p = bad + 1;
        while let Some(m) = w.get(p, FRAME_MAGIC.len())? {
            if m == FRAME_MAGIC {
                if let Some(h) = self.frame_at(&mut w, p, &mut scratch)? {
                    if h.synced > bad {
                        return Err(tampered(
                            bad,
                            "a frame that was synced does not authenticate",
                        ));
                    }
                    p += h.total() as u64;
                    continue;
                }
            }
            p += 1;
        }
        Ok((st, true))
    }

    /// The authenticated header of the frame at `pos`, or `None` if there is none that
    /// authenticates (its plaintext is left in `scratch`).
    fn frame_at(
        &self,
        w: &mut Window<'_, FF>,
        pos: u64,
        scratch: &mut Vec<u8>,
    ) -> io::Result<Option<FrameHdr>> {
        let Some(hb) = w.get(pos, FRAME_HDR)? else {
            return Ok(None);
        };
        let Some(h) = FrameHdr::decode(hb, pos) else {
            return Ok(None);
        };
        let Some(bytes) = w.get(pos, h.total())? else {
            return Ok(None);
        };
        Ok(self.open_frame(&h, pos, bytes, scratch).then_some(h))
    }

    /// Authenticates and decrypts the whole frame `bytes` (header included) into `out`.
    fn open_frame(&self, h: &FrameHdr, at: u64, bytes: &[u8], out: &mut Vec<u8>) -> bool {
        let hdr: [u8; FRAME_HDR] = h.encode();
        let Some((head, rest)) = bytes.split_first_chunk::<FRAME_HDR>() else {
            return false;
        };
        if *head != hdr {
            return false;
        }
        let Some((body, rest)) = rest.split_at_checked(h.stored as usize) else {
            return false;
        };
        let Some(tag) = rest.get(..TAG) else {
            return false;
        };
        out.clear();
        out.extend_from_slice(body);
        let aad = frame_aad(&hdr, &self.nonce, at);
        self.shared.sealer.open(&h.nonce, &aad, out, tag)
    }

    /// Appends one frame for `plain` (at `logical`) to `out`, which goes to physical offset
    /// `base`.
    fn push_frame(
        &self,
        base: u64,
        out: &mut Vec<u8>,
        kind: u8,
        logical: u64,
        plain: &[u8],
        synced: u64,
    ) -> io::Result<FrameHdr> {
        let at = out.len();
        out.resize(at + FRAME_HDR, 0);
        let flags = compress(self.shared.compression, plain, out);
        let stored = out.len() - at - FRAME_HDR;
        let h = FrameHdr {
            kind,
            flags,
            logical,
            stored: stored as u32,
            plain: plain.len() as u32,
            synced,
            nonce: self.shared.next_nonce()?,
        };
        let hdr = h.encode();
        // `out` grew by the header's room at `at`, then the body after it
        let Some((room, body)) = out
            .get_mut(at..)
            .and_then(|f| f.split_first_chunk_mut::<FRAME_HDR>())
        else {
            return Err(io::Error::other("frame buffer shorter than its header"));
        };
        *room = hdr;
        let aad = frame_aad(&hdr, &self.nonce, base + at as u64);
        let tag = self.shared.sealer.seal(&h.nonce, &aad, body)?;
        out.extend_from_slice(&tag);
        Ok(h)
    }

    /// Appends the frames in `out` (built with `push_frame`) and applies their headers.
    fn append(&self, st: &mut State, out: &[u8], hdrs: &[FrameHdr]) -> io::Result<()> {
        if let Err(e) = self.inner.write_all_at(out, st.phys_end) {
            st.broken = true;
            return Err(e);
        }
        for h in hdrs {
            let at = st.phys_end;
            apply(st, at, *h);
            st.phys_end += h.total() as u64;
        }
        Ok(())
    }

    fn writable(st: &State) -> io::Result<()> {
        if st.broken {
            return Err(io::Error::other(
                "an earlier write to this file failed, or it was opened read-only",
            ));
        }
        Ok(())
    }

    /// The plaintext of the frame of `e`, from the cache or decrypted.
    fn plaintext(&self, st: &mut State, e: &Ext) -> io::Result<Arc<Vec<u8>>> {
        if let Some(i) = st.cache.iter().position(|(at, _)| *at == e.frame) {
            let hit = st.cache.remove(i);
            st.cache.push(hit.clone());
            return Ok(hit.1);
        }
        let mut bytes = Vec::new();
        let total = e.total as usize;
        fast::read_vec_at(&self.inner, &mut bytes, total, e.frame)?;
        let bad = || tampered(e.frame, "a frame no longer authenticates");
        let bytes = bytes.get(..total).ok_or_else(bad)?;
        let h = FrameHdr::decode(bytes, e.frame).ok_or_else(bad)?;
        let mut body = Vec::new();
        if h.total() != total || !self.open_frame(&h, e.frame, bytes, &mut body) {
            return Err(bad());
        }
        let plain = decompress(&h, body)
            .ok_or_else(|| tampered(e.frame, "an authenticated frame does not decompress"))?;
        let plain = Arc::new(plain);
        if st.cache.len() == CACHE_FRAMES {
            st.cache.remove(0);
        }
        st.cache.push((e.frame, plain.clone()));
        Ok(plain)
    }

    fn sync_with(&self, sync: impl FnOnce(&FF) -> io::Result<()>) -> io::Result<()> {
        let upto = self.st().phys_end;
        sync(&self.inner)?;
        let mut st = self.st();
        st.synced = st.synced.max(upto);
        Ok(())
    }
}

/// Applies one authenticated frame at physical offset `at` to the logical view.
fn apply(st: &mut State, at: u64, h: FrameHdr) {
    match h.kind {
        KIND_LEN => {
            st.superseded += truncate(&mut st.ext, h.logical);
            st.len = h.logical;
        }
        _ => {
            let end = h.logical + h.plain as u64;
            st.superseded += cover(
                &mut st.ext,
                h.logical,
                Ext {
                    end,
                    frame: at,
                    skip: 0,
                    total: h.total() as u32,
                },
            );
            st.len = st.len.max(end);
        }
    }
}

/// Makes `new` (starting at `start`) the holder of its range, cutting what it overlaps.
/// Returns how many bytes of older frames it took over.
fn cover(map: &mut BTreeMap<u64, Ext>, start: u64, new: Ext) -> u64 {
    let end = new.end;
    let mut over = 0;
    if let Some((&s, e)) = map.range_mut(..start).next_back() {
        if e.end > start {
            let old = *e;
            over += old.end.min(end) - start;
            e.end = start;
            if old.end > end {
                let tail = Ext {
                    skip: old.skip + (end - s) as u32,
                    ..old
                };
                map.insert(end, tail);
            }
        }
    }
    let inside: Vec<u64> = map.range(start..end).map(|(&k, _)| k).collect();
    for k in inside {
        if let Some(old) = map.remove(&k) {
            over += old.end.min(end) - k;
            if old.end > end {
                let tail = Ext {
                    skip: old.skip + (end - k) as u32,
                    ..old
                };
                map.insert(end, tail);
            }
        }
    }
    map.insert(start, new);
    over
}

/// Drops everything at or past `len`; returns how many bytes of frames that was.
fn truncate(map: &mut BTreeMap<u64, Ext>, len: u64) -> u64 {
    let mut cut = 0;
    if let Some((_, e)) = map.range_mut(..len).next_back() {
        cut += e.end.saturating_sub(len);
        e.end = e.end.min(len);
    }
    cut + map
        .split_off(&len)
        .iter()
        .map(|(&k, e)| e.end - k)
        .sum::<u64>()
}

impl<FF: FsFile> FsFile for Framed<FF> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut st = self.st();
        if offset >= st.len || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(st.len - offset) as usize;
        let end = offset + n as u64;
        let Some(buf) = buf.get_mut(..n) else {
            return Ok(0); // (n <= buf.len())
        };
        buf.fill(0);
        let from = match st.ext.range(..=offset).next_back() {
            Some((&s, e)) if e.end > offset => s,
            _ => offset,
        };
        let hits: Vec<(u64, Ext)> = st.ext.range(from..end).map(|(&s, e)| (s, *e)).collect();
        for (s, e) in hits {
            let (a, b) = (s.max(offset), e.end.min(end));
            if a >= b {
                continue;
            }
            let plain = self.plaintext(&mut st, &e)?;
            let src = e.skip as usize + (a - s) as usize;
            let part = plain
                .get(src..src + (b - a) as usize)
                .ok_or_else(|| tampered(e.frame, "a frame shorter than its range"))?;
            // (offset <= a < b <= end = offset + n)
            buf.get_mut((a - offset) as usize..(b - offset) as usize)
                .ok_or_else(|| tampered(e.frame, "a frame range outside the read"))?
                .copy_from_slice(part);
        }
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        if offset.checked_add(buf.len() as u64).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "write past u64::MAX",
            ));
        }
        let mut st = self.st();
        Self::writable(&st)?;
        let frames = buf.len().div_ceil(FRAME_MAX);
        let mut out = std::mem::take(&mut st.out);
        out.clear();
        out.reserve(buf.len() + frames * FRAME_OVERHEAD);
        let mut hdrs = Vec::with_capacity(frames);
        for (i, chunk) in buf.chunks(FRAME_MAX).enumerate() {
            let logical = offset + (i * FRAME_MAX) as u64;
            hdrs.push(self.push_frame(
                st.phys_end,
                &mut out,
                KIND_DATA,
                logical,
                chunk,
                st.synced,
            )?);
        }
        let r = self.append(&mut st, &out, &hdrs);
        if out.capacity() <= OUT_KEEP {
            st.out = out;
        }
        r
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.st().len)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.st();
        Self::writable(&st)?;
        let mut out = Vec::with_capacity(FRAME_OVERHEAD);
        let h = self.push_frame(st.phys_end, &mut out, KIND_LEN, len, &[], st.synced)?;
        self.append(&mut st, &out, &[h])
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync_with(|f| f.sync_data())
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync_with(|f| f.sync_all())
    }

    // It says when it is worth rewriting; the rest are the defaults, on its own methods (not
    // the file below's: its bytes are frames).
    fn fast_paths(&self) -> Option<&dyn FastPaths> {
        Some(self)
    }
}

impl<FF: FsFile> FastPaths for Framed<FF> {
    /// True when the file holds more than twice the frames one write of its bytes would make
    /// (plus two: small appends), or frames whose bytes were written over or cut (an erased
    /// record's old frame: with it gone from the logical file, it must go from the disk).
    fn worth_rewriting(&self) -> bool {
        let st = self.st();
        let whole = st.len.div_ceil(FRAME_MAX as u64);
        st.ext.len() as u64 > 2 * whole + 2 || st.superseded > 0
    }
}
