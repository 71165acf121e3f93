//! A block's entries, one a message: full (32 bytes each) for the newest block, which every
//! append extends, and bit-packed (a few bytes each) for a sealed block, whose entries only
//! change by a deleted mark.
//!
//! Packed layout (`Packed`): the entries are cut into runs of `RUN` messages. Each run keeps
//! its smallest offset (u32) and timestamp (i64): 0.75 bytes a message. Each message keeps one
//! field of `W` bits in a bit stream, from the low bit up:
//!
//! ```text
//! offset − run's offset | length − block's shortest | subject (block-local id) | deleted | ts − run's ts
//! ```
//!
//! where each part is as wide as the block's largest value needs. The sequence is not stored:
//! a block's sequences are consecutive but for gaps, kept as `(index, sequence)` pairs where a
//! stretch of consecutive sequences starts. With 8 MiB blocks, records of a few hundred bytes
//! and a few thousand subjects a field is ~45 bits at 1k messages/s, ~55 at 1 message/s: with
//! the runs' samples, 6.5–7.7 bytes a message. A block whose field would need more than 64
//! bits stays full (`Entries::pack` says whether it packed).

/// One message's place in its block: what the entries of a block hold for it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub(super) seq: u64,
    pub(super) ts: i64,
    pub(super) off: u32,
    pub(super) len: u32,
    pub(super) subj: u32,
    pub(super) deleted: bool,
}

impl Entry {
    /// The entry of the message record `r`, at `off` in its block, whose subject's id is
    /// `subj`: deleted if `deleted` says so (else only if it is erased).
    pub(super) fn of(
        off: u64,
        r: &crate::record::RawRecord<'_>,
        subj: u32,
        deleted: bool,
    ) -> Entry {
        Entry {
            seq: r.seq,
            ts: r.ts,
            off: off as u32,
            len: r.len as u32,
            subj,
            deleted: deleted || r.flags & crate::record::FLAG_ERASED != 0,
        }
    }
}

/// Messages per run: one (offset, timestamp) sample each.
pub(super) const RUN: usize = 16;

/// The widest field that packs with its timestamp: 58 bits and the runs' samples make 8
/// bytes a message. Wider, the field drops the timestamp (`Packed::ts_exact` false).
const WIDEST_WITH_TS: u32 = 58;

/// The entries of one block.
pub(super) enum Entries {
    Full(Vec<Entry>),
    Packed(Box<Packed>),
}

/// The empty entries, for reads of a block that has none loaded.
pub(super) static EMPTY: Entries = Entries::Full(Vec::new());

/// Widths in bits of the parts of a packed field, and of the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Widths {
    off: u32,
    len: u32,
    subj: u32,
    ts: u32,
    total: u32,
}

/// A sealed block's entries, bit-packed (see the module doc).
pub(super) struct Packed {
    n: usize,
    w: Widths,
    /// Whether the fields hold each message's timestamp; if not, an entry's `ts` is its
    /// run's smallest (a lower bound; `Store::entry_ts` reads the record for the exact one).
    ts_exact: bool,
    /// The fields, `w.total` bits each, and one word of padding so that a field is always
    /// read as two words.
    words: Vec<u64>,
    min_len: u32,
    run_off: Vec<u32>,
    run_ts: Vec<i64>,
    /// `run_ts` by time.
    time_dir: TimeDir,
    /// (index, sequence) where a stretch of consecutive sequences starts; the first at 0.
    seq_runs: Vec<(u32, u64)>,
    /// Block-local subject id → the store's subject id (in the order they first came).
    dict: Vec<u32>,
}

/// A directory of a block's run samples by time: bucket `k` of `K` even slices of the
/// samples' time span names the first sample at or after the slice's start (about two
/// samples a bucket: 4 bytes per 32 messages). A time search then reads one bucket and the
/// few samples between two buckets (one cache line when the stream was written at a steady
/// rate), where a binary search of a large block's samples misses the cache on most of its
/// path. Uneven times only widen a bucket: the search stays exact.
#[derive(Clone, Debug, Default)]
pub(super) struct TimeDir {
    /// The first sample's time and the span to the last one's (0: no directory).
    t0: i64,
    span: u64,
    /// `K + 1` sample indexes, non-decreasing; `dir[K]` is the number of samples.
    dir: Vec<u32>,
}

impl TimeDir {
    /// Fewer samples than this are searched directly.
    const MIN_SAMPLES: usize = 64;

    /// The directory of `v` (samples non-decreasing, as a stream's runs are; any order gives
    /// a directory whose searches stay in range), about two samples a bucket.
    pub(super) fn new(v: &[i64]) -> TimeDir {
        let n = v.len();
        let (Some(&t0), Some(&t1)) = (v.first(), v.last()) else {
            return TimeDir::default();
        };
        if n < Self::MIN_SAMPLES || t1 <= t0 || u32::try_from(n).is_err() {
            return TimeDir::default();
        }
        let span = (i128::from(t1) - i128::from(t0)) as u64;
        let k = n / 2;
        let mut dir = Vec::with_capacity(k + 1);
        let mut r = 0usize;
        for b in 0..k {
            let bound = i128::from(t0) + (u128::from(span) * b as u128 / k as u128) as i128;
            while r < n && i128::from(v[r]) < bound {
                r += 1;
            }
            dir.push(r as u32);
        }
        dir.push(n as u32);
        TimeDir { t0, span, dir }
    }

    /// `v.partition_point(|&t| t < ts)` for the `v` this directory was made of, non-decreasing
    /// (any `v` of that length: an index in `0..=v.len()`).
    pub(super) fn point(&self, v: &[i64], ts: i64) -> usize {
        if self.span == 0 || self.dir.len() != v.len() / 2 + 1 {
            return v.partition_point(|&t| t < ts);
        }
        if ts <= self.t0 {
            return 0;
        }
        let k = self.dir.len() - 1;
        let off = (i128::from(ts) - i128::from(self.t0)) as u128;
        if off > u128::from(self.span) {
            return v.len();
        }
        // bucket b: its bound (t0 + b·span/K, rounded down) is at or below ts, the next
        // one's at or above it (the last bucket ends at the last sample, which is ts or
        // later), so the answer lies between their first samples
        let b = match u64::try_from(off * k as u128) {
            Ok(x) => (x / self.span) as usize,
            Err(_) => (off * k as u128 / u128::from(self.span)) as usize,
        };
        let b = b.min(k - 1);
        let (lo, hi) = (self.dir[b] as usize, self.dir[b + 1] as usize);
        lo + v[lo..hi].partition_point(|&t| t < ts)
    }

    fn heap_bytes(&self) -> usize {
        self.dir.capacity() * 4
    }
}

/// Bits needed for `x`.
fn bits(x: u64) -> u32 {
    64 - x.leading_zeros()
}

fn mask(w: u32) -> u64 {
    if w >= 64 {
        u64::MAX
    } else {
        (1u64 << w) - 1
    }
}

/// The distinct subject ids of `e` in the order they first come (block-local id → the
/// store's id), and each entry's block-local id. One pass with a small open-addressing table
/// (a block holds few subjects): packing runs for every block a read or a rebuild loads.
fn subject_dict(e: &[Entry]) -> (Vec<u32>, Vec<u32>) {
    const EMPTY: u64 = u64::MAX;
    let mut dict: Vec<u32> = Vec::new();
    let mut locals = Vec::with_capacity(e.len());
    // (store id, local id) per slot; at most half full
    let mut keys = vec![EMPTY; 64];
    let mut vals = vec![0u32; 64];
    let slot = |keys: &[u64], subj: u32| {
        let m = keys.len() - 1;
        let mut i = (u64::from(subj).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & m;
        while keys[i] != EMPTY && keys[i] != u64::from(subj) {
            i = (i + 1) & m;
        }
        i
    };
    let mut last: Option<(u32, u32)> = None;
    for x in e {
        if let Some((_, local)) = last.filter(|(s, _)| *s == x.subj) {
            locals.push(local);
            continue;
        }
        let i = slot(&keys, x.subj);
        let local = if keys[i] == EMPTY {
            let local = dict.len() as u32;
            dict.push(x.subj);
            keys[i] = u64::from(x.subj);
            vals[i] = local;
            if dict.len() * 2 > keys.len() {
                (keys, vals) = grown(&dict, keys.len() * 4, slot);
            }
            local
        } else {
            vals[i]
        };
        locals.push(local);
        last = Some((x.subj, local));
    }
    dict.shrink_to_fit();
    (dict, locals)
}

/// `subject_dict`'s table rebuilt with `n` slots.
fn grown(dict: &[u32], n: usize, slot: impl Fn(&[u64], u32) -> usize) -> (Vec<u64>, Vec<u32>) {
    let (mut keys, mut vals) = (vec![u64::MAX; n], vec![0u32; n]);
    for (local, &subj) in dict.iter().enumerate() {
        let i = slot(&keys, subj);
        keys[i] = u64::from(subj);
        vals[i] = local as u32;
    }
    (keys, vals)
}

impl Packed {
    /// Packs `e` (sorted by sequence and by offset, as a block's scan yields them), or `None`
    /// if a field would need more than 64 bits or there is nothing to pack.
    fn build(e: &[Entry]) -> Option<Packed> {
        if e.is_empty() || u32::try_from(e.len()).is_err() {
            return None;
        }
        let (dict, locals) = subject_dict(e);
        let min_len = e.iter().map(|x| x.len).min()?;
        let max_len = e.iter().map(|x| x.len).max()?;
        let runs = e.len().div_ceil(RUN);
        let (mut run_off, mut run_ts) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        let (mut max_doff, mut max_dts) = (0u64, 0u64);
        for run in e.chunks(RUN) {
            let off = run.iter().map(|x| x.off).min()?;
            let ts = run.iter().map(|x| x.ts).min()?;
            for x in run {
                max_doff = max_doff.max(u64::from(x.off - off));
                max_dts = max_dts.max(x.ts.wrapping_sub(ts) as u64);
            }
            run_off.push(off);
            run_ts.push(ts);
        }
        let mut w = {
            let (off, len) = (bits(max_doff), bits(u64::from(max_len - min_len)));
            let (subj, ts) = (bits(dict.len() as u64 - 1), bits(max_dts));
            let total = off + len + subj + 1 + ts;
            Widths {
                off,
                len,
                subj,
                ts,
                total,
            }
        };
        let ts_exact = w.total <= WIDEST_WITH_TS;
        if !ts_exact {
            w.total -= w.ts;
            w.ts = 0;
        }
        if w.total > 64 {
            return None;
        }
        let mut seq_runs = vec![(0u32, e[0].seq)];
        for (i, pair) in e.windows(2).enumerate() {
            if pair[1].seq != pair[0].seq + 1 {
                seq_runs.push((i as u32 + 1, pair[1].seq));
            }
        }
        let words = vec![0u64; (e.len() * w.total as usize).div_ceil(64) + 1];
        let mut p = Packed {
            n: e.len(),
            w,
            ts_exact,
            words,
            min_len,
            run_off,
            time_dir: TimeDir::new(&run_ts),
            run_ts,
            seq_runs,
            dict,
        };
        for (i, (x, &local)) in e.iter().zip(&locals).enumerate() {
            p.put(i, x, local);
        }
        p.seq_runs.shrink_to_fit();
        Some(p)
    }

    fn put(&mut self, i: usize, x: &Entry, local: u32) {
        let w = self.w;
        let local = u64::from(local);
        let run = i / RUN;
        let mut v = match self.ts_exact {
            true => x.ts.wrapping_sub(self.run_ts[run]) as u64,
            false => 0,
        };
        v = (v << 1) | u64::from(x.deleted);
        v = (v << w.subj) | local;
        v = (v << w.len) | u64::from(x.len - self.min_len);
        v = (v << w.off) | u64::from(x.off - self.run_off[run]);
        let (pos, shift) = ((i * w.total as usize) / 64, (i * w.total as usize) % 64);
        self.words[pos] |= v << shift;
        if shift > 0 && shift + w.total as usize > 64 {
            self.words[pos + 1] |= v >> (64 - shift);
        }
    }

    #[inline]
    fn field(&self, i: usize) -> u64 {
        let at = i * self.w.total as usize;
        let (pos, shift) = (at / 64, at % 64);
        let mut v = self.words[pos] >> shift;
        if shift > 0 {
            v |= self.words[pos + 1] << (64 - shift);
        }
        v & mask(self.w.total)
    }

    #[inline]
    fn seq(&self, i: usize) -> u64 {
        let r = match self.seq_runs.len() {
            1 => 0,
            _ => self.seq_runs.partition_point(|s| s.0 as usize <= i) - 1,
        };
        let (start, seq) = self.seq_runs[r];
        seq + (i - start as usize) as u64
    }

    #[inline]
    fn get(&self, i: usize) -> Entry {
        let w = self.w;
        let mut v = self.field(i);
        let mut take = |width: u32| {
            let part = v & mask(width);
            v = if width >= 64 { 0 } else { v >> width };
            part
        };
        let run = i / RUN;
        let off = self.run_off[run] + take(w.off) as u32;
        let len = self.min_len + take(w.len) as u32;
        let subj = self.dict[take(w.subj) as usize];
        let deleted = take(1) == 1;
        let ts = self.run_ts[run].wrapping_add(take(w.ts) as i64);
        Entry {
            seq: self.seq(i),
            ts,
            off,
            len,
            subj,
            deleted,
        }
    }

    /// Entry `i`'s timestamp alone (its run's smallest when the fields hold none).
    fn ts(&self, i: usize) -> i64 {
        let run_ts = self.run_ts[i / RUN];
        if !self.ts_exact {
            return run_ts;
        }
        let w = self.w;
        let shift = w.off + w.len + w.subj + 1;
        let v = if shift >= 64 {
            0
        } else {
            self.field(i) >> shift
        };
        run_ts.wrapping_add((v & mask(w.ts)) as i64)
    }

    /// The first index whose timestamp is at or above `ts`: a search of the runs' samples
    /// (one array, through its [`TimeDir`]), then the fields of one run.
    fn ts_point(&self, ts: i64) -> usize {
        let r = self.time_dir.point(&self.run_ts, ts);
        if r == 0 {
            return 0;
        }
        let (lo, hi) = ((r - 1) * RUN, (r * RUN).min(self.n));
        if !self.ts_exact {
            return hi;
        }
        (lo..hi).find(|&i| self.ts(i) >= ts).unwrap_or(hi)
    }

    fn set_deleted(&mut self, i: usize) {
        let at = i * self.w.total as usize + (self.w.off + self.w.len + self.w.subj) as usize;
        self.words[at / 64] |= 1u64 << (at % 64);
    }

    fn heap_bytes(&self) -> u64 {
        (self.words.capacity() * 8
            + self.run_off.capacity() * 4
            + self.run_ts.capacity() * 8
            + self.time_dir.heap_bytes()
            + self.seq_runs.capacity() * 16
            + self.dict.capacity() * 4) as u64
            + std::mem::size_of::<Packed>() as u64
    }
}

impl Entries {
    pub(super) fn len(&self) -> usize {
        match self {
            Entries::Full(v) => v.len(),
            Entries::Packed(p) => p.n,
        }
    }

    /// Entry `i`; panics past the end, as indexing a slice does.
    #[inline]
    pub(super) fn at(&self, i: usize) -> Entry {
        match self {
            Entries::Full(v) => v[i],
            Entries::Packed(p) => {
                assert!(i < p.n, "entry {i} of {}", p.n);
                p.get(i)
            }
        }
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<Entry> {
        (i < self.len()).then(|| self.at(i))
    }

    /// The sequence of entry `i` (cheaper than `at(i).seq` when packed).
    #[inline]
    pub(super) fn seq_at(&self, i: usize) -> u64 {
        match self {
            Entries::Full(v) => v[i].seq,
            Entries::Packed(p) => {
                assert!(i < p.n, "entry {i} of {}", p.n);
                p.seq(i)
            }
        }
    }

    pub(super) fn iter(&self) -> Iter<'_> {
        self.range(0, self.len())
    }

    /// Entries `start..end`.
    pub(super) fn range(&self, start: usize, end: usize) -> Iter<'_> {
        assert!(
            start <= end && end <= self.len(),
            "{start}..{end} of {}",
            self.len()
        );
        Iter {
            e: self,
            front: start,
            back: end,
        }
    }

    /// The first index whose entry `pred` is false for (`pred` true for a prefix), as
    /// `slice::partition_point` (the tests' reference for `ts_point`).
    #[cfg(test)]
    pub(super) fn partition_point(&self, mut pred: impl FnMut(&Entry) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(&self.at(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The first index whose timestamp is at or above `ts` (`partition_point(|e| e.ts < ts)`
    /// when timestamps do not decrease, without decoding whole entries).
    pub(super) fn ts_point(&self, ts: i64) -> usize {
        match self {
            Entries::Full(v) => v.partition_point(|e| e.ts < ts),
            Entries::Packed(p) => p.ts_point(ts),
        }
    }

    /// The first index whose sequence is at or above `seq`.
    pub(super) fn seq_point(&self, seq: u64) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.seq_at(mid) < seq {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The index of the entry of `seq`, or where it would go (as `binary_search`). Sequences
    /// in a block are consecutive unless something left a gap: the direct slot is tried first.
    pub(super) fn index_of(&self, seq: u64) -> Result<usize, usize> {
        if self.len() == 0 {
            return Err(0);
        }
        // (the first sequence alone: a find on every get need not decode the whole entry)
        let first = self.seq_at(0);
        if seq < first {
            return Err(0);
        }
        let g = (seq - first) as usize;
        if g < self.len() && self.seq_at(g) == seq {
            return Ok(g);
        }
        let i = self.seq_point(seq);
        if i < self.len() && self.seq_at(i) == seq {
            Ok(i)
        } else {
            Err(i)
        }
    }

    /// Whether every entry's `ts` is the message's (else a lower bound: its run's smallest,
    /// and `Store::entry_ts` reads the record).
    pub(super) fn ts_exact(&self) -> bool {
        match self {
            Entries::Full(_) => true,
            Entries::Packed(p) => p.ts_exact,
        }
    }

    /// Marks entry `i` deleted.
    pub(super) fn set_deleted(&mut self, i: usize) {
        match self {
            Entries::Full(v) => v[i].deleted = true,
            Entries::Packed(p) => {
                assert!(i < p.n, "entry {i} of {}", p.n);
                p.set_deleted(i)
            }
        }
    }

    /// Keeps the first `n` entries (a truncate's cut), packed or not.
    pub(super) fn keep_first(&mut self, n: usize) {
        match self {
            Entries::Full(v) => v.truncate(n),
            Entries::Packed(_) if n == 0 => *self = Entries::Full(Vec::new()),
            Entries::Packed(p) => {
                if n < p.n {
                    // (what the fields beyond `n` hold is never read again; the last run's
                    // sample stays a lower bound of what is left of it)
                    p.n = n;
                    p.run_off.truncate(n.div_ceil(RUN));
                    p.run_ts.truncate(n.div_ceil(RUN));
                    p.time_dir = TimeDir::new(&p.run_ts);
                    p.seq_runs.retain(|r| (r.0 as usize) < n);
                }
            }
        }
    }

    /// The entries as a vector to extend: the newest block's, which is never packed (a
    /// block is packed once sealed; the rebuild packs a block when the next one starts).
    pub(super) fn full_mut(&mut self) -> &mut Vec<Entry> {
        debug_assert!(
            self.ts_exact(),
            "unpacking entries without their timestamps"
        );
        if let Entries::Packed(p) = self {
            let v = (0..p.n).map(|i| p.get(i)).collect();
            *self = Entries::Full(v);
        }
        match self {
            Entries::Full(v) => v,
            Entries::Packed(_) => unreachable!("unpacked above"),
        }
    }

    /// Packs full entries (a block being sealed); false if they stay full (empty, or a field
    /// would need more than 64 bits).
    pub(super) fn pack(&mut self) -> bool {
        match self {
            Entries::Packed(_) => true,
            Entries::Full(v) => match Packed::build(v) {
                Some(p) => {
                    *self = Entries::Packed(Box::new(p));
                    true
                }
                None => {
                    v.shrink_to_fit();
                    false
                }
            },
        }
    }

    /// Bytes these entries hold on the heap (the entry cache's measure).
    pub(super) fn heap_bytes(&self) -> u64 {
        match self {
            Entries::Full(v) => (v.capacity() * std::mem::size_of::<Entry>()) as u64,
            Entries::Packed(p) => p.heap_bytes(),
        }
    }
}

impl From<Vec<Entry>> for Entries {
    fn from(v: Vec<Entry>) -> Self {
        Entries::Full(v)
    }
}

/// Entries by value, in order (either end).
pub(super) struct Iter<'a> {
    e: &'a Entries,
    front: usize,
    back: usize,
}

impl Iterator for Iter<'_> {
    type Item = Entry;

    #[inline]
    fn next(&mut self) -> Option<Entry> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.e.at(self.front - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Entry> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            self.e.at(self.back)
        })
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
#[path = "entries_tests.rs"]
mod tests;
