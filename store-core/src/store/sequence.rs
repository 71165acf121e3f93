//! The stream's sequence: its range of live messages, its last sequence (which only a
//! truncate lowers), the floor below which no sequence is handed out again, and the totals.
//! This file owns that part of the store's state: every change goes through a method here,
//! and each checks the invariants (`broken`) in debug builds, as the store changes it and as
//! it is read back from `index.db` or rebuilt from the blocks.

use super::types::StreamState;
use crate::index::Snapshot;

/// The sequence part of a [`super::Store`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Sequence {
    /// The first live message's sequence; `last + 1` when there is none.
    first: u64,
    /// Its timestamp (0 when there is none).
    first_ts: i64,
    /// The last sequence handed out (0: none yet).
    last: u64,
    last_ts: i64,
    /// No sequence at or below it is handed out again (purges and removals of the newest
    /// messages raise it; it is kept durable by a floor record).
    floor: u64,
    /// The number of a block that holds a floor record for `floor` (`None`: not known, as
    /// after an open). Recovery knows the floor only from such a record, so a drop of the
    /// front blocks that would remove the last one writes it again (`remove.rs`).
    floor_held_by: Option<u64>,
    /// Live messages and their stored bytes.
    msgs: u64,
    bytes: u64,
}

impl Default for Sequence {
    fn default() -> Self {
        Sequence {
            first: 1,
            first_ts: 0,
            last: 0,
            last_ts: 0,
            floor: 0,
            floor_held_by: None,
            msgs: 0,
            bytes: 0,
        }
    }
}

impl Sequence {
    pub(super) fn first(&self) -> u64 {
        self.first
    }

    pub(super) fn first_ts(&self) -> i64 {
        self.first_ts
    }

    pub(super) fn last(&self) -> u64 {
        self.last
    }

    pub(super) fn last_ts(&self) -> i64 {
        self.last_ts
    }

    pub(super) fn floor(&self) -> u64 {
        self.floor
    }

    pub(super) fn floor_held_by(&self) -> Option<u64> {
        self.floor_held_by
    }

    pub(super) fn msgs(&self) -> u64 {
        self.msgs
    }

    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// What the state says of the sequence that cannot be so, or `None`. Each write keeps these
    /// true; a state that breaks one is a bug in the store (or a damaged `index.db`, which is
    /// refused with this reason).
    pub(super) fn broken(&self) -> Option<&'static str> {
        if self.first == 0 {
            return Some("the first sequence is 0");
        }
        if self.floor > self.last {
            return Some("the floor is above the last sequence");
        }
        if self.first <= self.floor {
            return Some("the first sequence is at or below the floor");
        }
        if (self.msgs == 0) != (self.bytes == 0) {
            return Some("live messages without bytes, or bytes without live messages");
        }
        if self.msgs == 0 {
            return (self.first != self.last.wrapping_add(1))
                .then_some("no live message, but the first sequence is not the last + 1");
        }
        if self.first > self.last {
            return Some("live messages, but the first sequence is after the last");
        }
        if self.msgs > self.last - self.first + 1 {
            return Some("more live messages than sequences from the first to the last");
        }
        None
    }

    /// Asserts [`Sequence::broken`] in debug builds.
    pub(super) fn check(&self) {
        debug_assert_eq!(self.broken(), None, "{self:?}");
    }

    /// A message at `seq`, stored in `len` bytes, was added (the newest).
    #[inline]
    pub(super) fn added(&mut self, seq: u64, ts: i64, len: u64) {
        debug_assert!(seq > self.last && len > 0, "{seq} after {self:?}");
        self.msgs += 1;
        self.bytes += len;
        self.last = seq;
        self.last_ts = ts;
        if self.msgs == 1 {
            self.first = seq;
            self.first_ts = ts;
        }
        self.check();
    }

    /// A live message stored in `len` bytes was removed; the caller moves `first` next
    /// (`set_first`) when it was the first.
    #[inline]
    pub(super) fn removed(&mut self, len: u64) {
        debug_assert!(self.msgs > 0 && self.bytes >= len, "{len} from {self:?}");
        self.msgs -= 1;
        self.bytes -= len;
    }

    /// The first live message is now `seq` (at `ts`); `None`: there is none.
    pub(super) fn set_first(&mut self, first: Option<(u64, i64)>) {
        (self.first, self.first_ts) = first.unwrap_or((self.last + 1, 0));
        self.check();
    }

    /// The last sequence is now `seq` at `ts`: raised by a skip, a compact past it or what a
    /// rebuild read, lowered by a truncate (which removed every message after it first). The
    /// caller moves the first message next (`Store::set_first_from`) or, where it cannot
    /// have moved, calls `check`.
    pub(super) fn set_last(&mut self, seq: u64, ts: i64) {
        self.last = seq;
        self.last_ts = ts;
    }

    /// A rebuild starts counting: no floor, nothing live (the range is set when it ends).
    pub(super) fn recount(&mut self) {
        (self.floor, self.floor_held_by, self.msgs, self.bytes) = (0, None, 0, 0);
    }

    /// A rebuild (or the replay of `index.db`'s tail) counted `msgs` live messages of
    /// `bytes` in a block it read.
    pub(super) fn counted(&mut self, msgs: u64, bytes: u64) {
        self.msgs += msgs;
        self.bytes += bytes;
    }

    /// A floor record for `seq` was written to block `block`: it holds the floor if `seq` is
    /// at or above it (every caller raises the floor to `seq` next).
    pub(super) fn floor_written(&mut self, seq: u64, block: Option<u64>) {
        if seq >= self.floor {
            self.floor_held_by = block;
        }
    }

    /// A purge removed every message up to `last`; block `held_by` holds its floor record.
    pub(super) fn purged_all(&mut self, held_by: u64) {
        self.msgs = 0;
        self.bytes = 0;
        self.floor = self.last;
        self.floor_held_by = Some(held_by);
        self.set_first(None);
    }

    /// Raises the floor to at least `seq`.
    pub(super) fn raise_floor(&mut self, seq: u64) {
        self.floor = self.floor.max(seq);
    }

    /// The sequence part of the state `snap` (`index.db`) records; the floor's block is not
    /// known. The caller refuses it if it is [`Sequence::broken`].
    pub(super) fn of_index(snap: &Snapshot) -> Sequence {
        Sequence {
            first: snap.first_seq,
            first_ts: snap.first_ts,
            last: snap.last_seq,
            last_ts: snap.last_ts,
            floor: snap.floor,
            floor_held_by: None,
            msgs: snap.msgs,
            bytes: snap.bytes,
        }
    }

    /// The state [`super::Store::state`] reports.
    pub(super) fn state(&self, num_subjects: u64) -> StreamState {
        StreamState {
            msgs: self.msgs,
            bytes: self.bytes,
            // NATS reports a stream that never had a sequence as first=0, last=0
            first_seq: if self.last == 0 { 0 } else { self.first },
            first_ts: self.first_ts,
            last_seq: self.last,
            last_ts: self.last_ts,
            num_deleted: if self.msgs == 0 {
                0
            } else {
                (self.last - self.first + 1) - self.msgs
            },
            num_subjects,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Sequence;

    /// One case per claim `broken` refuses, and the states the store passes through.
    #[test]
    fn broken_names_each_impossible_state() {
        let ok = Sequence::default();
        assert_eq!(ok.broken(), None);
        let live = Sequence {
            first: 5,
            last: 9,
            msgs: 3,
            bytes: 300,
            ..ok.clone()
        };
        assert_eq!(live.broken(), None);
        let cases = [
            Sequence {
                first: 0,
                ..live.clone()
            },
            Sequence {
                bytes: 0,
                ..live.clone()
            },
            Sequence {
                msgs: 0,
                ..live.clone()
            },
            Sequence {
                first: 10,
                ..live.clone()
            },
            Sequence {
                msgs: 6,
                ..live.clone()
            },
            Sequence {
                msgs: 0,
                bytes: 0,
                ..live.clone()
            },
            Sequence {
                floor: 10,
                ..live.clone()
            },
            Sequence {
                floor: 5,
                ..live.clone()
            },
        ];
        for (i, s) in cases.iter().enumerate() {
            assert!(s.broken().is_some(), "case {i}: {s:?}");
        }
        let mut s = Sequence::default();
        s.added(3, 30, 10);
        s.added(4, 40, 10);
        s.removed(10);
        s.set_first(Some((4, 40)));
        s.set_last(7, 70);
        s.check();
        s.purged_all(2);
        assert_eq!((s.first, s.last, s.floor, s.msgs), (8, 7, 7, 0));
    }
}
