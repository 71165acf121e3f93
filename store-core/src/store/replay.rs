//! The per-record rules of reading a store's blocks in order: which records count, where the
//! stream's last sequence and floor are, and which sequences are gone without a record that
//! explains it. One set of rules, used by recovery (`recover.rs`, which also builds the
//! in-memory index) and by the read-only `verify`, so that the two cannot disagree about a
//! directory.

use super::types::SeqRange;
use std::collections::BTreeSet;

/// What a record does to the stream, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It counts.
    Apply,
    /// It cannot have been written by the store where it stands (a message at or below a
    /// sequence already seen, a truncate below the floor): it is ignored and reported.
    OutOfOrder,
    /// It contradicts the records before it in a way no crash explains: the directory is
    /// damaged there (open refuses it, verify reports it).
    Damaged(&'static str),
}

/// The state of a replay: what the records seen so far say about the stream.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// The highest floor record.
    pub(crate) floor: u64,
    /// The last sequence (the highest named by a record, or a truncate's target).
    pub(crate) max_seq: u64,
    /// The timestamp of the record that set `max_seq`.
    pub(crate) max_ts: i64,
    /// The previous message record's sequence.
    prev_msg: u64,
    /// The highest message record applied in the block being read.
    block_msg_max: u64,
    /// Ranges between consecutive message records.
    gaps: Vec<SeqRange>,
    /// Tombstones that no message record before them matched: they explain a gap.
    explained: BTreeSet<u64>,
}

impl Replay {
    /// The next records come from a new block file.
    /// The replay after a stream prefix that `index.db` summarizes: its floor and its last
    /// sequence and time (taken as the last message's, so that a message after it that skips
    /// sequences is a gap).
    pub(crate) fn resume(floor: u64, last_seq: u64, last_ts: i64) -> Replay {
        Replay {
            floor,
            max_seq: last_seq,
            max_ts: last_ts,
            prev_msg: last_seq,
            ..Default::default()
        }
    }

    pub(crate) fn start_block(&mut self) {
        self.block_msg_max = 0;
    }

    /// A message record with sequence `seq`.
    pub(crate) fn message(&mut self, seq: u64, ts: i64) -> Verdict {
        if seq <= self.max_seq {
            return Verdict::OutOfOrder;
        }
        if self.prev_msg > 0 && seq > self.prev_msg + 1 {
            self.gaps.push(SeqRange {
                first: self.prev_msg + 1,
                last: seq - 1,
            });
        }
        self.prev_msg = seq;
        self.block_msg_max = seq;
        self.raise(seq, ts);
        Verdict::Apply
    }

    /// A tombstone for `seq`; `matched`: a message record read before it holds `seq`.
    pub(crate) fn tombstone(&mut self, seq: u64, ts: i64, matched: bool) {
        if !matched {
            self.explained.insert(seq);
        }
        self.raise(seq, ts);
    }

    /// A skip record for `first..=last`: those sequences were used without a message. They
    /// count as message records do for the gaps (a range between messages, not a loss) and
    /// for the last sequence; a skip at or below a sequence already seen cannot have been
    /// written there (the store skips only from `last + 1`).
    pub(crate) fn skip(&mut self, first: u64, last: u64, ts: i64) -> Verdict {
        if first <= self.max_seq {
            return Verdict::OutOfOrder;
        }
        if self.prev_msg > 0 && first > self.prev_msg + 1 {
            self.gaps.push(SeqRange {
                first: self.prev_msg + 1,
                last: first - 1,
            });
        }
        self.prev_msg = last;
        self.raise(last, ts);
        Verdict::Apply
    }

    /// A floor record: everything at or below `seq` is removed.
    pub(crate) fn floor(&mut self, seq: u64, ts: i64) {
        self.floor = self.floor.max(seq);
        self.raise(seq, ts);
    }

    /// Whether a truncate record to `seq` can stand here: truncate refuses to go below
    /// `first - 1`, which is at or above the floor; and it writes its record at the start of
    /// a new block, so no message record above `seq` comes before it in its block.
    pub(crate) fn truncate_verdict(&self, seq: u64) -> Verdict {
        if seq < self.floor {
            Verdict::OutOfOrder
        } else if self.block_msg_max > seq {
            Verdict::Damaged("truncate record after the records it voids")
        } else {
            Verdict::Apply
        }
    }

    /// A truncate record to `seq` (after [`Replay::truncate_verdict`] said `Apply`): the last
    /// sequence becomes `seq`, and what was seen above it no longer counts — its gaps and its
    /// tombstones, because those sequences are issued again.
    pub(crate) fn truncate(&mut self, seq: u64, ts: i64) {
        self.max_seq = seq;
        self.max_ts = ts;
        self.prev_msg = self.prev_msg.min(seq);
        self.gaps.retain(|g| g.first <= seq);
        if let Some(g) = self.gaps.last_mut() {
            g.last = g.last.min(seq);
        }
        self.explained.retain(|&t| t <= seq);
    }

    fn raise(&mut self, seq: u64, ts: i64) {
        if seq > self.max_seq {
            self.max_seq = seq;
            self.max_ts = ts;
        }
    }

    /// The sequences between message records that neither the floor nor a tombstone explains:
    /// they had records, and the records are gone.
    pub(crate) fn lost(&self) -> Vec<SeqRange> {
        lost_ranges(&self.gaps, self.floor, &self.explained)
    }
}

/// The sequences in `gaps` above `floor` that no sequence of `explained` accounts for.
pub(crate) fn lost_ranges(
    gaps: &[SeqRange],
    floor: u64,
    explained: &BTreeSet<u64>,
) -> Vec<SeqRange> {
    // O(gaps + tombstones), never O(sequences): a forged record at 2^62 must not make recovery
    // walk 2^62 numbers.
    let mut out = Vec::new();
    for g in gaps {
        let mut lo = g.first.max(floor.saturating_add(1));
        if lo > g.last {
            continue;
        }
        for &t in explained.range(lo..=g.last) {
            if t > lo {
                out.push(SeqRange {
                    first: lo,
                    last: t - 1,
                });
            }
            lo = t + 1;
        }
        if lo <= g.last {
            out.push(SeqRange {
                first: lo,
                last: g.last,
            });
        }
    }
    out
}
