//! The public value types: messages, stream state, recovery reports.

/// A message read back from the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMsg {
    /// Its sequence.
    pub seq: u64,
    /// Its timestamp (ns since the epoch, from the store's clock).
    pub ts: i64,
    /// Its subject.
    pub subject: String,
    /// Its opaque header bytes.
    pub headers: Vec<u8>,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// The stream's counters, as NATS reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct StreamState {
    /// Messages stored.
    pub msgs: u64,
    /// Bytes stored (encoded record sizes).
    pub bytes: u64,
    /// Lowest stored sequence, or `last_seq + 1` when empty (0 for a stream that never had a
    /// sequence, as NATS reports it).
    pub first_seq: u64,
    /// Timestamp of the first stored message (0 when empty).
    pub first_ts: i64,
    /// Highest sequence ever assigned (survives deletes and purges).
    pub last_seq: u64,
    /// Timestamp of the last sequence's record.
    pub last_ts: i64,
    /// Sequences between first and last that are deleted.
    pub num_deleted: u64,
    /// Distinct subjects with at least one stored message.
    pub num_subjects: u64,
}

/// A range of sequences, inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeqRange {
    /// First sequence.
    pub first: u64,
    /// Last sequence.
    pub last: u64,
}

/// A cut made by recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The block file.
    pub file: String,
    /// Where it was cut.
    pub offset: u64,
    /// Bytes dropped.
    pub dropped: u64,
    /// Why.
    pub reason: String,
}

/// A damaged record that recovery stepped over: a valid record after it frames it, so only
/// this one is lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedRecord {
    /// The block file.
    pub file: String,
    /// Where the record starts.
    pub offset: u64,
    /// What was wrong with it.
    pub reason: String,
}

/// A record recovery ignored because its sequence went backwards (a record no write of the
/// store puts there; it is left on disk and reported).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfOrderRecord {
    /// The block file.
    pub file: String,
    /// Where the record starts.
    pub offset: u64,
    /// The sequence it carries.
    pub seq: u64,
}

/// What `open` found and did. Nothing recovery changes is hidden: every cut, every lost
/// sequence and every ignored file is listed here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// State came from `index.db`: the blocks it vouches for were not scanned.
    pub used_index: bool,
    /// Bytes of block files past what `index.db` vouched for, scanned by an open from it:
    /// the records written since the last `close` or `checkpoint` (0 after a clean close).
    pub tail_scanned: u64,
    /// Why `index.db` was not used, if it existed.
    pub index_rejected: Option<String>,
    /// An interrupted purge was completed (its new block was durable).
    pub purge_completed: bool,
    /// An interrupted purge was rolled back (its new block was not durable).
    pub purge_rolled_back: bool,
    /// Blocks cut at their first bad record.
    pub cuts: Vec<Cut>,
    /// Single damaged records skipped inside a block.
    pub skipped: Vec<SkippedRecord>,
    /// Sequences that had records and are gone (damage, not deletes).
    pub lost: Vec<SeqRange>,
    /// Block files removed because no byte of them was durable.
    pub removed_blank: Vec<String>,
    /// Files and directories in the store that recovery does not know and left alone.
    pub ignored: Vec<String>,
    /// Records ignored because their sequence went backwards.
    pub out_of_order: Vec<OutOfOrderRecord>,
    /// Records made void by a truncate that were removed from disk by recovery.
    pub truncate_cleanup: bool,
}

impl RecoveryReport {
    /// Whether recovery had to drop anything that had been written.
    pub fn lost_data(&self) -> bool {
        !self.cuts.is_empty() || !self.skipped.is_empty() || !self.lost.is_empty()
    }
}

/// How many messages a filter selects and the sequences they span, as NATS's `SimpleState`
/// (`Store::filtered_state`, `Store::subjects_state_detail`). All zero when none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilteredState {
    /// Messages selected.
    pub msgs: u64,
    /// The lowest selected sequence (0 when none).
    pub first: u64,
    /// The highest selected sequence (0 when none).
    pub last: u64,
}

impl FilteredState {
    /// Counts message `seq`, selected after every message counted so far (a walk in
    /// sequence order).
    pub(crate) fn count(&mut self, seq: u64) {
        self.msgs += 1;
        if self.first == 0 {
            self.first = seq;
        }
        self.last = seq;
    }
}
