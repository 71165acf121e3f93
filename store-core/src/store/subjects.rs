//! Subjects: the name table, the FxHash map, and the direct-mapped memo in front of it.

use crate::record;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (rustc's): a few ns for a 16-byte subject where SipHash takes ~20. Also the wasm
/// host's hasher for the subjects it has validated (through `internal`).
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl FxHasher {
    #[inline]
    pub(super) fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let (words, r) = bytes.as_chunks::<8>();
        for w in words {
            self.add(u64::from_le_bytes(*w));
        }
        if !r.is_empty() {
            let mut b = [0u8; 8];
            b[..r.len()].copy_from_slice(r);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type SubjectMap = HashMap<String, u32, BuildHasherDefault<FxHasher>>;

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SubjectInfo {
    pub(super) msgs: u64,
    /// First and last live sequence; 0 means "not known, search".
    pub(super) first: u64,
    pub(super) last: u64,
}

/// A two-way set-associative memo in front of the subject map, for the block scans of open
/// and for appends: most records repeat a recent subject, and a hit costs one multiply and a
/// short compare where the map costs a full hash, a probe and a `memcmp` call (the map lookup
/// was 22% of a rebuild; in the wasm guest `memcmp` is a byte loop). Two ways per set because
/// direct-mapped, two subjects of a round-robin that share a slot evict each other on every
/// record (4 of the bench's 64 subjects did: 6% of appends missed). A miss falls through to
/// the map: the memo only ever holds ids the map gave for the current name table (which only
/// grows; the store's memo is reset with it in `rebuild`), and a hit is checked against the
/// name (its first 16 bytes here, the rest against the interned string), so it cannot change
/// an answer.
pub(super) struct SubjectMemo(pub(super) [MemoSlot; 2 * MEMO_SETS]);

/// Sets of [`SubjectMemo`] (a power of two: the set is the top bits of a multiplicative hash).
pub(super) const MEMO_SETS: usize = 256;

/// A memo slot: the id, and the name's length and first 16 bytes (zero-padded), so that a hit
/// on a short subject is decided without touching the interned string.
#[derive(Clone, Copy)]
pub(super) struct MemoSlot {
    pub(super) id: u32,
    pub(super) len: usize,
    pub(super) head: [u64; 2],
}

impl SubjectMemo {
    pub(super) fn new() -> Self {
        SubjectMemo(
            [MemoSlot {
                id: u32::MAX,
                len: usize::MAX,
                head: [0; 2],
            }; 2 * MEMO_SETS],
        )
    }

    /// The first 16 bytes of `name` as two little-endian words, zero-padded. Built without a
    /// variable-length copy: in the wasm guest that is a `memory.copy` libcall per subject.
    #[inline]
    pub(super) fn head(name: &[u8]) -> [u64; 2] {
        if let Some(([a, b], _)) = name.as_chunks::<8>().0.split_first_chunk::<2>() {
            return [u64::from_le_bytes(*a), u64::from_le_bytes(*b)];
        }
        // Shorter names in two loads that overlap (the bytes both hold land on the same bits):
        // a byte loop costs a shift and an or a byte, for every append and every record read.
        let n = name.len();
        if let (Some(a), Some(b)) = (name.first_chunk::<8>(), name.last_chunk::<8>()) {
            // 8..16 bytes: the last eight, moved down past the bytes the first eight hold
            let hi = u64::from_le_bytes(*b).checked_shr(8 * (16 - n as u32));
            return [u64::from_le_bytes(*a), hi.unwrap_or(0)];
        }
        if let (Some(a), Some(b)) = (name.first_chunk::<4>(), name.last_chunk::<4>()) {
            // 4..8 bytes: the last four moved up to where they stand
            let lo = u64::from(u32::from_le_bytes(*a))
                | u64::from(u32::from_le_bytes(*b)) << (8 * (n - 4));
            return [lo, 0];
        }
        let mut w = [0u64; 2];
        for (i, &c) in name.iter().enumerate() {
            w[i / 8] |= u64::from(c) << (8 * (i % 8));
        }
        w
    }

    /// The set for `name`, its head, and the id there if it holds `name`. Always inlined:
    /// left to the compiler it was called out of line from the append path once that path
    /// grew (+23 instructions an append, callgrind).
    #[inline(always)]
    pub(super) fn probe(&self, names: &[String], b: &[u8]) -> (usize, [u64; 2], Option<u32>) {
        let head = Self::head(b);
        let k = ((head[0] ^ head[1].rotate_left(29) ^ b.len() as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            >> (64 - MEMO_SETS.trailing_zeros())) as usize;
        // The heads are compared as words, the rest of a long name by `same_bytes`: a slice
        // `==` is a call to `memcmp`, which in the wasm guest is a byte loop (16% of the
        // guest's rebuild for 17-byte subjects).
        let holds = |m: &MemoSlot| {
            m.len == b.len()
                && ((m.head[0] ^ head[0]) | (m.head[1] ^ head[1])) == 0
                && (b.len() <= 16
                    || names
                        .get(m.id as usize)
                        .is_some_and(|n| same_bytes(&n.as_bytes()[16.min(n.len())..], &b[16..])))
        };
        let hit = self.0[2 * k..2 * k + 2]
            .iter()
            .find(|m| holds(m))
            .map(|m| m.id);
        (k, head, hit)
    }

    /// Remembers `id` for the name of length `len` and head `head` in set `k`: the newest
    /// in way 0, the one it displaces in way 1 (the older of way 1 is forgotten).
    #[inline]
    pub(super) fn remember(&mut self, k: usize, id: u32, len: usize, head: [u64; 2]) {
        self.0[2 * k + 1] = self.0[2 * k];
        self.0[2 * k] = MemoSlot { id, len, head };
    }

    /// The id of the subject whose name is `name`, if the memo holds it (no map lookup).
    #[inline]
    pub(super) fn hit(&self, names: &[String], name: &[u8]) -> Option<u32> {
        self.probe(names, name).2
    }

    /// The id of `name` if the store holds it (memo, then map; a map hit is remembered).
    #[inline]
    pub(super) fn lookup(&mut self, names: &[String], ids: &SubjectMap, name: &str) -> Option<u32> {
        let (k, head, hit) = self.probe(names, name.as_bytes());
        if hit.is_some() {
            return hit;
        }
        let id = *ids.get(name)?;
        self.remember(k, id, name.len(), head);
        Some(id)
    }
}

/// `a == b`, eight bytes at a time and without a call to `memcmp` (a byte loop in wasm).
#[inline]
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let ((wa, ra), (wb, rb)) = (a.as_chunks::<8>(), b.as_chunks::<8>());
    let mut diff = 0u64;
    for (x, y) in wa.iter().zip(wb) {
        diff |= u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
    }
    for (x, y) in ra.iter().zip(rb) {
        diff |= u64::from(x ^ y);
    }
    diff == 0
}

/// A read record's subject ([`SubjectTable::read_subject`]).
#[derive(Clone, Copy, Debug)]
pub(super) enum ReadSubject<'n> {
    /// A name the memo holds: its id.
    Known(u32),
    /// Bytes the memo does not hold, checked as text.
    New(&'n str),
}

/// Every subject the store has seen: names by id, the map from name to id, the memo in
/// front of the map for appends, and per subject its live count and first/last sequence.
/// Ids are never reused while the table lives (a rebuild clears it; the memo is reset with
/// the names, so it never holds an id of an older table).
pub(super) struct SubjectTable {
    names: Vec<String>,
    ids: SubjectMap,
    info: Vec<SubjectInfo>,
    memo: Box<SubjectMemo>,
    /// Subjects with at least one live message.
    live: u64,
}

impl SubjectTable {
    pub(super) fn new() -> Self {
        SubjectTable {
            names: Vec::new(),
            ids: SubjectMap::default(),
            info: Vec::new(),
            memo: Box::new(SubjectMemo::new()),
            live: 0,
        }
    }

    /// Forgets every subject (a rebuild starts over).
    pub(super) fn clear(&mut self) {
        self.names.clear();
        self.ids.clear();
        self.info.clear();
        *self.memo = SubjectMemo::new();
        self.live = 0;
    }

    /// The names, by id (a table that only interned).
    pub(super) fn into_names(self) -> Vec<String> {
        self.names
    }

    /// The id of `name`, interning it if new (the map; no memo).
    pub(super) fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        self.info.push(SubjectInfo::default());
        id
    }

    /// The subject of a record read from disk (`name`: its bytes, `flags`: its flags), as a
    /// scan's own `memo` knows it. Its bytes are checked as text ([`record::subject_text`])
    /// only when the memo does not hold them: a hit is a name interned before, so checked
    /// then. `Err`: the record's subject is not UTF-8.
    #[inline]
    pub(super) fn read_subject<'n>(
        &self,
        memo: &SubjectMemo,
        name: &'n [u8],
        flags: u8,
    ) -> Result<ReadSubject<'n>, &'static str> {
        match memo.hit(&self.names, name) {
            Some(id) => Ok(ReadSubject::Known(id)),
            None => record::subject_text(name, flags).map(ReadSubject::New),
        }
    }

    /// The id of the subject [`Self::read_subject`] read from `name`, interned if new (and
    /// remembered in `memo`).
    #[inline]
    pub(super) fn intern_read(
        &mut self,
        memo: &mut SubjectMemo,
        name: &[u8],
        subject: ReadSubject<'_>,
    ) -> u32 {
        let text = match subject {
            ReadSubject::Known(id) => return id,
            ReadSubject::New(text) => text,
        };
        let id = self.intern(text);
        // (an erased record's subject that is not text reads as "": not those bytes' name)
        if text.len() == name.len() {
            let (k, head, _) = memo.probe(&self.names, name);
            memo.remember(k, id, name.len(), head);
        }
        id
    }

    /// [`Self::read_subject`] and [`Self::intern_read`] in one.
    #[inline]
    pub(super) fn intern_bytes(
        &mut self,
        memo: &mut SubjectMemo,
        name: &[u8],
        flags: u8,
    ) -> Result<u32, &'static str> {
        let subject = self.read_subject(memo, name, flags)?;
        Ok(self.intern_read(memo, name, subject))
    }

    /// The id of the subject `name`, if the appends' memo holds it (no map lookup).
    #[inline]
    pub(super) fn hit(&self, name: &[u8]) -> Option<u32> {
        self.memo.hit(&self.names, name)
    }

    /// The id of `name` if the store holds it (memo, then map; a map hit is remembered).
    #[inline]
    pub(super) fn lookup(&mut self, name: &str) -> Option<u32> {
        self.memo.lookup(&self.names, &self.ids, name)
    }

    /// The id of `name` if the store holds it (the map only).
    pub(super) fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    pub(super) fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// Every name, by id.
    pub(super) fn names(&self) -> &[String] {
        &self.names
    }

    /// How many ids there are (live or not).
    pub(super) fn len(&self) -> usize {
        self.names.len()
    }

    pub(super) fn info(&self, id: u32) -> SubjectInfo {
        self.info[id as usize]
    }

    pub(super) fn info_mut(&mut self, id: u32) -> &mut SubjectInfo {
        &mut self.info[id as usize]
    }

    /// Every subject's counts, by id.
    pub(super) fn infos(&self) -> &[SubjectInfo] {
        &self.info
    }

    /// Subjects with at least one live message.
    pub(super) fn live(&self) -> u64 {
        self.live
    }

    /// Counts a new live message `seq` of `id` (the highest of its subject so far).
    #[inline]
    pub(super) fn added(&mut self, id: u32, seq: u64) {
        let s = &mut self.info[id as usize];
        if s.msgs == 0 {
            self.live += 1;
            s.first = seq;
        }
        s.msgs += 1;
        s.last = seq;
    }

    /// Uncounts the live message `seq` of `id`; a first or last it was becomes unknown
    /// (searched for when next asked).
    pub(super) fn removed(&mut self, id: u32, seq: u64) {
        let s = &mut self.info[id as usize];
        debug_assert!(s.msgs > 0, "removing from an empty subject");
        s.msgs -= 1;
        if s.msgs == 0 {
            *s = SubjectInfo::default();
            self.live -= 1;
        } else {
            if s.first == seq {
                s.first = 0;
            }
            if s.last == seq {
                s.last = 0;
            }
        }
    }

    /// Sets the counts of `id` as `index.db` gives them.
    pub(super) fn set(&mut self, id: u32, info: SubjectInfo) {
        let s = &mut self.info[id as usize];
        self.live -= u64::from(s.msgs > 0);
        self.live += u64::from(info.msgs > 0);
        *s = info;
    }

    /// No subject has a live message any more (a purge); the names stay.
    pub(super) fn clear_counts(&mut self) {
        self.info.fill(SubjectInfo::default());
        self.live = 0;
    }

    /// A truncate to `seq`: a last above it is no longer known.
    pub(super) fn forget_last_above(&mut self, seq: u64) {
        for s in &mut self.info {
            if s.last > seq {
                s.last = 0;
            }
        }
    }
}

#[cfg(test)]
mod memo_tests {
    use super::{same_bytes, SubjectMemo, SubjectTable, MEMO_SETS};

    #[test]
    fn memo_answers_as_the_map_does() {
        // Names of every length up to 40, sharing long prefixes, in more sets than there are:
        // many collide. Interned through the memo twice over, then looked up.
        let names: Vec<String> = (0..3 * MEMO_SETS)
            .map(|i| {
                let base = format!("orders.eu.{i:06}.tail-for-length");
                base[..1 + i % base.len()].to_string() + &"x".repeat(i % 7)
            })
            .collect();
        let mut t = SubjectTable::new();
        let mut memo = SubjectMemo::new();
        let mut got = Vec::new();
        for _ in 0..2 {
            for n in &names {
                got.push(t.intern_bytes(&mut memo, n.as_bytes(), 0).expect("text"));
            }
        }
        let (table, ids) = (t.names.clone(), t.ids.clone());
        for (i, n) in names.iter().chain(&names).enumerate() {
            assert_eq!(got[i], ids[n.as_str()], "{n:?}");
            assert_eq!(table[got[i] as usize], *n);
            assert_eq!(memo.lookup(&table, &ids, n), Some(ids[n.as_str()]), "{n:?}");
        }
        assert_eq!(memo.lookup(&table, &ids, "not.interned"), None);
        // Two names of one set, alternating: both stay remembered (two ways).
        let first = names[0].as_str();
        let (k, _, _) = memo.probe(&table, first.as_bytes());
        let other = names[1..]
            .iter()
            .find(|n| memo.probe(&table, n.as_bytes()).0 == k)
            .expect("3x more names than sets: some share a set");
        memo.lookup(&table, &ids, first);
        memo.lookup(&table, &ids, other);
        for _ in 0..3 {
            assert_eq!(memo.hit(&table, first.as_bytes()), Some(ids[first]));
            assert_eq!(
                memo.hit(&table, other.as_bytes()),
                Some(ids[other.as_str()])
            );
        }
    }

    #[test]
    fn head_is_the_first_sixteen_bytes_zero_padded() {
        // every length up to 40, every byte distinct and non-zero
        let a: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(53) | 0x41).collect();
        for n in 0..=a.len() {
            let mut want = [0u64; 2];
            for (i, &c) in a[..n.min(16)].iter().enumerate() {
                want[i / 8] |= u64::from(c) << (8 * (i % 8));
            }
            assert_eq!(SubjectMemo::head(&a[..n]), want, "len {n}");
        }
    }

    #[test]
    fn agrees_with_slice_eq() {
        // every length up to 40 (whole words and remainders), equal and differing at each byte
        let a: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37) ^ 0x55).collect();
        for n in 0..=a.len() {
            let x = &a[..n];
            assert!(same_bytes(x, &a[..n]), "len {n}");
            for i in 0..n {
                let mut y = x.to_vec();
                y[i] ^= 0x80;
                assert!(!same_bytes(x, &y), "len {n}, differing at {i}");
            }
            if n > 0 {
                assert!(!same_bytes(x, &a[..n - 1]), "len {n} against {}", n - 1);
            }
        }
    }
}
