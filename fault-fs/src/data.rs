//! File contents as copy-on-write pages.
//!
//! The explorer snapshots the whole filesystem after every operation and builds thousands of
//! crash images from each snapshot, so cloning contents must be O(1) and a write must copy only
//! the pages it touches: a file is an `Arc` of a vector of `Arc` pages (`None` = a page of zeros,
//! which also makes extending a file cheap).

use crate::rng::Hasher;
use std::sync::{Arc, OnceLock};

pub(crate) const PAGE: usize = 4096;
const PAGE_U64: u64 = PAGE as u64;

/// A page and, once computed, the digest of its bytes. Images share pages with the snapshot
/// they come from, so deduplicating thousands of images hashes each page once (this was a third
/// of the explorer's time on store workloads). Every mutation goes through `bytes_mut`, which
/// forgets the digest.
pub(crate) struct Page {
    bytes: [u8; PAGE],
    digest: OnceLock<u64>,
}

impl Clone for Page {
    fn clone(&self) -> Self {
        Page {
            bytes: self.bytes,
            digest: self.digest.clone(),
        }
    }
}

impl Page {
    fn zeroed() -> Self {
        Page {
            bytes: [0; PAGE],
            digest: OnceLock::new(),
        }
    }
    fn bytes_mut(&mut self) -> &mut [u8; PAGE] {
        self.digest = OnceLock::new();
        &mut self.bytes
    }
    fn digest(&self) -> u64 {
        *self.digest.get_or_init(|| page_digest(&self.bytes))
    }
}

/// The pages one write covers whole, along the file's page grid, built the first time a crash
/// image keeps the write (`None`: a page of zeros). Shared by every image that keeps it (the
/// operation's clones share it), so such images share the pages and their digests instead
/// of copying and hashing the bytes again.
pub(crate) type WholePages = OnceLock<Vec<Option<Arc<Page>>>>;

/// Invariant: every byte at or past `len` inside an allocated page is zero, so that extending the
/// file (by `set_len` or a write past the end) reveals zeros without touching those pages.
#[derive(Clone, Default)]
pub(crate) struct Data {
    len: u64,
    pages: Arc<Vec<Option<Arc<Page>>>>,
}

fn split(pos: u64) -> (usize, usize) {
    ((pos / PAGE_U64) as usize, (pos % PAGE_U64) as usize)
}

impl Data {
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Copies bytes at `off` into `buf`; returns how many (0 at or past the end).
    pub(crate) fn read(&self, off: u64, buf: &mut [u8]) -> usize {
        if off >= self.len {
            return 0;
        }
        let n = (buf.len() as u64).min(self.len - off) as usize;
        let mut done = 0;
        while done < n {
            let (pi, po) = split(off + done as u64);
            let take = (PAGE - po).min(n - done);
            match self.pages.get(pi).and_then(Option::as_ref) {
                Some(p) => buf[done..done + take].copy_from_slice(&p.bytes[po..po + take]),
                None => buf[done..done + take].fill(0),
            }
            done += take;
        }
        n
    }

    /// Writes `src` at `off`, extending (zero-filled) as needed. The caller bounds `off + len`.
    pub(crate) fn write(&mut self, off: u64, src: &[u8]) {
        if src.is_empty() {
            return;
        }
        let end = off + src.len() as u64;
        let need = end.div_ceil(PAGE_U64) as usize;
        let pages = Arc::make_mut(&mut self.pages);
        if pages.len() < need {
            pages.resize(need, None);
        }
        let mut done = 0;
        while done < src.len() {
            let (pi, po) = split(off + done as u64);
            let take = (PAGE - po).min(src.len() - done);
            write_in_page(&mut pages[pi], po, &src[done..done + take]);
            done += take;
        }
        self.len = self.len.max(end);
    }

    /// Writes `bytes[from..to]` at `off + from`: part of the write of `bytes` at `off`, whose
    /// whole pages `whole` holds (or will hold, built here on first use). The same result as
    /// [`Data::write`] of that part; the pages the part covers whole are `whole`'s, shared.
    pub(crate) fn write_part(
        &mut self,
        off: u64,
        bytes: &[u8],
        (from, to): (usize, usize),
        whole: &WholePages,
    ) {
        let (start, end) = (off + from as u64, off + to as u64);
        if start >= end {
            return;
        }
        let first_whole = off.div_ceil(PAGE_U64) as usize;
        let pages = Arc::make_mut(&mut self.pages);
        let need = end.div_ceil(PAGE_U64) as usize;
        if pages.len() < need {
            pages.resize(need, None);
        }
        let mut pos = start;
        while pos < end {
            let (pi, po) = split(pos);
            let take = (PAGE - po).min((end - pos) as usize);
            if take == PAGE {
                // page-aligned and inside the write: one of its whole pages
                let w = whole.get_or_init(|| whole_pages(off, bytes));
                pages[pi] = w[pi - first_whole].clone();
            } else {
                let at = (pos - off) as usize;
                write_in_page(&mut pages[pi], po, &bytes[at..at + take]);
            }
            pos += take as u64;
        }
        self.len = self.len.max(end);
    }

    /// Truncates or extends with zeros.
    pub(crate) fn set_len(&mut self, len: u64) {
        if len < self.len {
            let pages = Arc::make_mut(&mut self.pages);
            pages.truncate(len.div_ceil(PAGE_U64) as usize);
            let (pi, po) = split(len);
            if po != 0 {
                // the page `len` falls in, if it was ever written: a file extended by
                // `set_len` holds fewer pages than its length spans, and the last one held
                // may be an earlier page, whose bytes must stay
                if let Some(Some(p)) = pages.get_mut(pi) {
                    // keep the invariant: the cut-off tail must read as zeros if re-extended
                    Arc::make_mut(p).bytes_mut()[po..].fill(0);
                }
            }
        }
        self.len = len;
    }

    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len as usize];
        self.read(0, &mut v);
        v
    }

    /// Feeds the contents into `h` canonically: equal contents give equal hashes whatever the
    /// page layout (an absent page and an allocated page of zeros hash alike).
    pub(crate) fn hash_into(&self, h: &mut Hasher) {
        static ZERO: OnceLock<u64> = OnceLock::new();
        let zero = *ZERO.get_or_init(|| page_digest(&[0; PAGE]));
        h.u64(self.len);
        for i in 0..self.len.div_ceil(PAGE_U64) as usize {
            h.u64(match self.pages.get(i).and_then(Option::as_ref) {
                Some(p) => p.digest(),
                None => zero,
            });
        }
    }
}

/// Writes `part` into a page at `po`. Zeros where no page is held change nothing (an absent
/// page reads and hashes as zeros): a preallocation allocates, copies and hashes no pages.
fn write_in_page(page: &mut Option<Arc<Page>>, po: usize, part: &[u8]) {
    if page.is_some() || !all_zero(part) {
        let page = page.get_or_insert_with(|| Arc::new(Page::zeroed()));
        Arc::make_mut(page).bytes_mut()[po..po + part.len()].copy_from_slice(part);
    }
}

/// The pages the write of `bytes` at `off` covers whole, in file order.
fn whole_pages(off: u64, bytes: &[u8]) -> Vec<Option<Arc<Page>>> {
    let end = off + bytes.len() as u64;
    let (first, last) = (off.div_ceil(PAGE_U64), end / PAGE_U64);
    (first..last.max(first))
        .map(|i| {
            let at = (i * PAGE_U64 - off) as usize;
            let b = &bytes[at..at + PAGE];
            (!all_zero(b)).then(|| {
                let mut p = Page::zeroed();
                p.bytes_mut().copy_from_slice(b);
                Arc::new(p)
            })
        })
        .collect()
}

/// Whether every byte of `b` is zero (or'ed 64 bytes at a time: a loop that vectorizes).
fn all_zero(b: &[u8]) -> bool {
    b.chunks(64).all(|c| c.iter().fold(0, |a, &x| a | x) == 0)
}

fn page_digest(b: &[u8; PAGE]) -> u64 {
    let mut h = Hasher::new();
    h.bytes(b);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_truncate_extend() {
        let mut d = Data::default();
        d.write(4090, b"0123456789");
        assert_eq!(d.len(), 4100);
        let mut b = [9u8; 12];
        assert_eq!(d.read(4089, &mut b), 11);
        assert_eq!(&b[..11], b"\x000123456789");
        let snap = d.clone();
        d.set_len(4093);
        d.set_len(5000);
        let v = d.to_vec();
        assert_eq!(&v[4090..4093], b"012");
        assert!(v[4093..].iter().all(|&x| x == 0));
        // the snapshot is untouched by the copy-on-write changes
        assert_eq!(&snap.to_vec()[4090..], b"0123456789");
    }

    #[test]
    fn shrinking_a_file_extended_by_set_len_keeps_its_written_pages() {
        // one written page, then a length past the next page that was never written (as a
        // store's preallocated block cut back by recovery): the cut must not touch page 0
        let mut d = Data::default();
        d.write(0, &[7u8; 3584]);
        d.set_len(4194);
        d.set_len(4115);
        let v = d.to_vec();
        assert_eq!(v.len(), 4115);
        assert!(v[..3584].iter().all(|&x| x == 7), "page 0 kept");
        assert!(v[3584..].iter().all(|&x| x == 0));
    }

    /// Equal bytes, or a failure naming the first offset that differs.
    fn same(got: &[u8], want: &[u8], ctx: &str) {
        assert_eq!(got.len(), want.len(), "{ctx}: length");
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            panic!("{ctx}: byte {i} is {} instead of {}", got[i], want[i]);
        }
    }

    #[test]
    fn writes_of_zeros_and_data_match_a_plain_buffer() {
        // Zeros written where no page is held allocate none; zeros over written bytes must
        // still replace them; a part of a write through its shared whole pages is the same
        // as writing that part. Random writes (all zeros, data, or data with zero runs),
        // parts of earlier writes, length changes and snapshots, against a Vec, the hash
        // against a fresh copy's.
        let seed = std::env::var("SEQSTORE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0xda7a);
        let mut rng = crate::Rng::new(seed);
        let h = |d: &Data| {
            let mut h = Hasher::new();
            d.hash_into(&mut h);
            h.finish()
        };
        let mut writes: Vec<(u64, Vec<u8>, WholePages)> = Vec::new();
        for case in 0..200 {
            let (mut d, mut want) = (Data::default(), Vec::new());
            let mut snaps = Vec::new();
            for step in 0..40 {
                let ctx = format!("SEQSTORE_SEED={seed} case {case} step {step}");
                let off = rng.below(5 * PAGE_U64);
                let len = rng.below(3 * PAGE_U64) as usize;
                match rng.below(4) {
                    0 => d.set_len(off),
                    k => {
                        let fill = |i: usize| match k {
                            1 => 0,
                            2 => (i % 251) as u8 | 1,
                            _ => ((i / 700) % 2 * (i % 13)) as u8,
                        };
                        let src: Vec<u8> = (0..len).map(fill).collect();
                        writes.push((off, src, WholePages::new()));
                        // a new write, or a part of an earlier one (as a crash image keeps
                        // a write whole or torn), through its shared whole pages
                        let (off, src, whole) = &writes[rng.below(writes.len() as u64) as usize];
                        let (mut from, mut to) = (0, src.len());
                        if rng.below(2) == 0 {
                            from = rng.below(src.len() as u64 + 1) as usize;
                            to = from + rng.below((src.len() - from) as u64 + 1) as usize;
                            d.write_part(*off, src, (from, to), whole);
                        } else if rng.below(2) == 0 {
                            d.write_part(*off, src, (from, to), whole);
                        } else {
                            d.write(*off, src);
                        }
                        let (start, end) = (*off as usize + from, *off as usize + to);
                        if start < end {
                            if want.len() < end {
                                want.resize(end, 0);
                            }
                            want[start..end].copy_from_slice(&src[from..to]);
                        }
                    }
                }
                want.resize(d.len() as usize, 0);
                same(&d.to_vec(), &want, &ctx);
                let mut fresh = Data::default();
                fresh.write(0, &want);
                fresh.set_len(want.len() as u64);
                assert_eq!(h(&d), h(&fresh), "{ctx}");
                snaps.push((d.clone(), want.clone()));
            }
            for (i, (d, want)) in snaps.iter().enumerate() {
                same(
                    &d.to_vec(),
                    want,
                    &format!("SEQSTORE_SEED={seed} case {case}: snapshot {i}"),
                );
            }
        }
    }

    #[test]
    fn hash_is_canonical() {
        let mut a = Data::default();
        a.set_len(10_000);
        let mut b = Data::default();
        b.write(0, &[0u8; 10_000]);
        let h = |d: &Data| {
            let mut h = Hasher::new();
            d.hash_into(&mut h);
            h.finish()
        };
        assert_eq!(h(&a), h(&b));
        b.write(5, b"x");
        assert_ne!(h(&a), h(&b));
    }
}
