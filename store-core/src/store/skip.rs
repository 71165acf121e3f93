//! The replica's writes (NATS `StoreRawMsg`, `SkipMsg`, `SkipMsgs`): a message stored at a
//! given sequence and timestamp, and sequences marked used without a message.

use super::sync::S_SKIP;
use super::{append, Store};
use crate::admit::Admission;
use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::record::{self, encode, Kind, REC_OVERHEAD};

impl<F: Fs> Store<F> {
    /// Stores a message with the sequence and timestamp a leader gave it (NATS `StoreRawMsg`).
    /// `seq` must be `last_seq + 1`: at or below it would reuse a sequence, above it would
    /// leave a gap nothing explains (skip the sequences between first): both are
    /// `SequenceMismatch`, and a `ts` below the last timestamp is `InvalidArgument` (reads by
    /// time rely on timestamps not going back); nothing is written then. Otherwise
    /// [`Store::append`]: the same checks, limits and sync policy.
    pub fn append_raw(
        &mut self,
        seq: u64,
        ts: i64,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<u64> {
        self.append_raw_inner(seq, ts, subject, headers, payload, true)
    }

    /// `append_raw` without its `Always` fsync, for `SharedStore`'s group commit (as
    /// `append_buffered`): the sequence and the write number to be durable before the ack.
    pub(crate) fn append_raw_buffered(
        &mut self,
        seq: u64,
        ts: i64,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<(u64, u64)> {
        let seq = self.append_raw_inner(seq, ts, subject, headers, payload, false)?;
        Ok((seq, self.dur.writes()))
    }

    fn append_raw_inner(
        &mut self,
        seq: u64,
        ts: i64,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        sync_always: bool,
    ) -> Result<u64> {
        self.check_writable()?;
        self.check_next(seq)?;
        if ts < self.seq.last_ts() {
            return Err(Error::InvalidArgument(format!(
                "append_raw: timestamp {ts} below the last timestamp {}",
                self.seq.last_ts()
            )));
        }
        self.check_message(subject, headers, payload)?;
        let mut rec = Vec::new();
        let crc = encode(
            &mut rec,
            Kind::Msg,
            0,
            seq,
            ts,
            subject.as_bytes(),
            headers,
            payload,
        );
        let enc = append::Encoded {
            bytes: &rec,
            seq,
            ts,
            crc,
        };
        self.append_inner(
            append::Subj::Name(subject),
            headers,
            payload,
            sync_always,
            Some(enc),
        )
    }

    /// Marks the next sequence used without a message (NATS `SkipMsg`); `seq` must be
    /// `last_seq + 1` (`SequenceMismatch` otherwise). Returns it. See [`Store::skip_many`]. (Not
    /// `skip`: that name is the ablation switch's, `sync.rs`.)
    pub fn skip_msg(&mut self, seq: u64) -> Result<u64> {
        self.skip_many(seq, 1)
    }

    /// Marks `count` sequences from `first` (which must be `last_seq + 1`) used without a
    /// message (NATS `SkipMsgs`): the last sequence becomes `first + count - 1`, and no append
    /// is ever given one of them again. One skip record; durable before this returns in every
    /// sync policy (**skip.data**, **skip.dir**), like a structural operation: a skip tells a
    /// replica's caller that those sequences are settled, and a crash that brought the last
    /// sequence back below them would hand them out again. Returns the new last sequence.
    pub fn skip_many(&mut self, first: u64, count: u64) -> Result<u64> {
        self.check_writable()?;
        self.trim_entries();
        self.check_next(first)?;
        if count == 0 {
            return Err(Error::InvalidArgument("skip_many: a count of 0".into()));
        }
        let last = first
            .checked_add(count - 1)
            .filter(|&l| l <= record::MAX_SEQ)
            .ok_or(Error::LimitExceeded {
                limit: "sequence space",
            })?;
        let ts = self.now().max(self.seq.last_ts());
        let mut rec = Vec::with_capacity(REC_OVERHEAD + record::SKIP_LEN);
        let crc = record::encode_skip(&mut rec, last, count, ts);
        self.write_record(Kind::Skip, last, ts, "", &[], &[], Some((&rec, crc)))?;
        self.sync_inner(S_SKIP)?;
        self.seq.set_last(last, ts);
        if self.seq.msgs() == 0 {
            self.set_first_from(last + 1)?;
        } else {
            self.seq.check();
        }
        Ok(last)
    }

    /// Refuses a sequence other than `last_seq + 1` (`SequenceMismatch`), or one past the
    /// sequence space.
    fn check_next(&self, seq: u64) -> Result<()> {
        if seq != Admission::next_seq(self.seq.last())? {
            return Err(Error::SequenceMismatch {
                seq,
                last_seq: self.seq.last(),
            });
        }
        Ok(())
    }
}
