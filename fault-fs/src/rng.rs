//! A tiny deterministic PRNG and hash: crash images and fault injection must replay from a seed
//! on every platform and every run, so nothing here depends on `RandomState` or addresses.

/// splitmix64: one add and three xor-multiply steps per output; good enough statistical quality
/// for choosing subsets, and trivially seekable by seed. The one seeded generator of the
/// workspace: fault-fs's crash images and faults, the random workloads and corpus mutations of
/// the crash matrix, the wasm host's equivalence tests and the bench all draw from it, so a
/// printed seed replays the same run everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        finalize(self.0)
    }

    /// A number in `0..n` by modulo (0 when `n == 0`): the mapping the workload generators'
    /// recorded seeds were drawn with.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A number in `lo..=hi` (`lo <= hi`).
    pub fn within(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, of: &'a [T]) -> &'a T {
        &of[self.below(of.len() as u64) as usize]
    }

    /// True `percent` times in 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Between 0 and `max` random bytes.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max as u64 + 1) as usize;
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// Uniform in `0..n` (0 when `n == 0`) by multiply-shift: the crash images' mapping.
    pub(crate) fn scaled_below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p` (clamped to 0..=1 by construction of the comparison).
    pub(crate) fn probability(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// The splitmix64 output function: a bijective avalanche of 64 bits.
pub(crate) fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Derives independent seeds from a base seed and a few coordinates (crash point, image number).
pub(crate) fn derive(base: u64, a: u64, b: u64) -> u64 {
    finalize(finalize(base ^ finalize(a.wrapping_add(0x632B_E59B_D9B4_E019))) ^ b)
}

/// A 64-bit streaming hash for deduplicating crash images. Deterministic (no per-process key);
/// collisions only matter if two *different* images collide, which would skip one check — at
/// 64 bits and a few thousand images per crash point that is negligible.
#[derive(Clone, Debug)]
pub(crate) struct Hasher(u64);

impl Hasher {
    pub(crate) fn new() -> Self {
        Hasher(0x243F_6A88_85A3_08D3)
    }

    pub(crate) fn u64(&mut self, w: u64) {
        self.0 = (self.0 ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 ^= self.0 >> 29;
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.u64(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.u64(u64::from_le_bytes(w));
        }
    }

    pub(crate) fn finish(&self) -> u64 {
        finalize(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_reproducible_and_spread() {
        let a: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..4).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        let mut r = Rng::new(1);
        let hits = (0..10_000).filter(|_| r.probability(0.25)).count();
        assert!((2_000..3_000).contains(&hits), "{hits}");
        let hits = (0..10_000).filter(|_| r.chance(25)).count();
        assert!((2_000..3_000).contains(&hits), "{hits}");
        assert!((0..1000).all(|_| r.scaled_below(7) < 7 && r.below(7) < 7));
        assert!((0..1000).all(|_| (3..=5).contains(&r.within(3, 5))));
        assert_eq!((r.scaled_below(0), r.below(0)), (0, 0));
    }

    #[test]
    fn hash_distinguishes_padding() {
        let h = |b: &[u8]| {
            let mut h = Hasher::new();
            h.bytes(b);
            h.finish()
        };
        assert_ne!(h(b"a"), h(b"a\0"));
        assert_ne!(h(b""), h(b"\0"));
        assert_eq!(h(b"abcdefghij"), h(b"abcdefghij"));
    }
}
