//! The operations of the differential test and their seeded generator. Every operation is
//! valid in any state: its arguments are picks (`k`-th live message, `k`-th pending one, a
//! sequence around the stream) resolved when it runs, so any subsequence of a failing list
//! still runs, which is what shrinking needs.

use std::fmt;

/// The subjects messages are published on (the stream takes `orders.>`, `audit`, `a.>`).
pub const SUBJECTS: [&str; 6] = [
    "orders.eu.1",
    "orders.eu.2",
    "orders.us.1",
    "orders.us.2",
    "audit",
    "a.b.c",
];

/// The filters of purges and reads: wildcards of both kinds, literals, one matching nothing.
pub const FILTERS: [&str; 9] = [
    "orders.>",
    "orders.*.1",
    "orders.eu.*",
    "audit",
    "*",
    "a.>",
    ">",
    "orders.us.2",
    "none.x",
];

/// A purge request's form (NATS `STREAM.PURGE` fields; `seq` and `keep` exclude each other
/// there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PurgeForm {
    /// Everything.
    All,
    /// `{"filter"}`.
    Filter(u8),
    /// `{"seq"}`: a compact (NATS: `PurgeEx` without a filter).
    Seq(u16),
    /// `{"keep"}`.
    Keep(u8),
    /// `{"filter","keep"}`.
    FilterKeep(u8, u8),
    /// `{"filter","seq"}`.
    FilterSeq(u8, u16),
}

/// One operation, run on both sides and compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Publish on `SUBJECTS[subject]` a payload of `len` bytes.
    Publish { subject: u8, len: u8 },
    /// Delete (NATS: `no_erase`) a picked sequence.
    Delete(u16),
    /// Erase (NATS: a secure delete) a picked sequence.
    Erase(u16),
    /// A purge request.
    Purge(PurgeForm),
    /// seqstore `compact(seq)` against NATS's purge with `seq` and no filter.
    Compact(u16),
    /// The durable pull consumer fetches up to `n` messages (1 to 3).
    Fetch(u8),
    /// The consumer acks its `k`-th pending message (explicit ack).
    Ack(u16),
    /// The consumer naks its `k`-th pending message (NATS `-NAK`, no delay): the next fetch
    /// delivers it again before anything new.
    Nak(u16),
    /// The consumer is deleted and added again.
    Recreate,
    /// Get a picked sequence.
    Get(u16),
    /// The newest message matching a filter (NATS `last_by_subj`, wildcards allowed).
    Last(u8),
    /// The first message matching a filter at or after a picked sequence (`next_by_subj`).
    Next(u8, u16),
    /// Messages per subject matching a filter (`subjects_filter`).
    Subjects(u8),
    /// The first message at or after a picked message's time, shifted by -1, 0 or +1 ns.
    TimeSeq(u16, u8),
    /// Every message, one by one.
    Content,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// The workspace's one seeded generator (splitmix64): a printed seed replays the same
/// operations.
pub use seqstore_fault_fs::Rng;

/// A number below `n` (`n > 0`), as a byte.
fn byte_below(r: &mut Rng, n: u64) -> u8 {
    r.below(n) as u8
}

/// 16 random bits.
fn bits16(r: &mut Rng) -> u16 {
    r.next_u64() as u16
}

/// `n` operations from `seed`: mostly publishes early on, every removal and purge form,
/// consumer fetches and acks, and reads.
pub fn generate(seed: u64, n: usize) -> Vec<Op> {
    let mut r = Rng::new(seed);
    let f = FILTERS.len() as u64;
    (0..n)
        .map(|_| match r.below(100) {
            0..=29 => Op::Publish {
                subject: byte_below(&mut r, SUBJECTS.len() as u64),
                len: byte_below(&mut r, 40),
            },
            30..=35 => Op::Delete(bits16(&mut r)),
            36..=37 => Op::Erase(bits16(&mut r)),
            38..=44 => Op::Purge(match r.below(12) {
                0 => PurgeForm::All,
                1..=2 => PurgeForm::Filter(byte_below(&mut r, f)),
                3..=4 => PurgeForm::Seq(bits16(&mut r)),
                5..=6 => PurgeForm::Keep(byte_below(&mut r, 4)),
                7..=9 => PurgeForm::FilterKeep(byte_below(&mut r, f), byte_below(&mut r, 4)),
                _ => PurgeForm::FilterSeq(byte_below(&mut r, f), bits16(&mut r)),
            }),
            45..=47 => Op::Compact(bits16(&mut r)),
            48..=59 => Op::Fetch(1 + byte_below(&mut r, 3)),
            60..=66 => Op::Ack(bits16(&mut r)),
            67..=69 => Op::Nak(bits16(&mut r)),
            70 => Op::Recreate,
            71..=75 => Op::Get(bits16(&mut r)),
            76..=80 => Op::Last(byte_below(&mut r, f)),
            81..=85 => Op::Next(byte_below(&mut r, f), bits16(&mut r)),
            86..=89 => Op::Subjects(byte_below(&mut r, f)),
            90..=95 => Op::TimeSeq(bits16(&mut r), byte_below(&mut r, 3)),
            _ => Op::Content,
        })
        .collect()
}

/// A sequence picked by `k` around a stream of `first..=last`: mostly inside, sometimes just
/// outside, now and then past the end (never 0).
pub fn pick_seq(k: u16, first: u64, last: u64) -> u64 {
    let k = k as u64;
    let first = first.max(1);
    if k.is_multiple_of(10) {
        return last + 1 + k / 10 % 5;
    }
    let lo = first.saturating_sub(1).max(1);
    let span = last.max(lo) - lo + 3;
    lo + k % span
}
