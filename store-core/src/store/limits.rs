//! The limits (max messages, bytes, age, per subject), enforced after appends and at open.

use super::layout::MSGS_DIR;
use super::Store;
use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::record::Kind;

impl<F: Fs> Store<F> {
    /// Removes what the limits no longer allow. `sid`: only that subject's per-subject limit
    /// (after an append); `None`: every subject (on open).
    pub(super) fn enforce_limits(&mut self, sid: Option<u32>) -> Result<()> {
        let l = self.cfg.limits;
        if l.max_msgs_per_subject > 0 {
            let sids: Vec<u32> = match sid {
                Some(s) => vec![s],
                None => (0..self.subjects.len() as u32).collect(),
            };
            for s in sids {
                while self.subjects.info(s).msgs > l.max_msgs_per_subject {
                    let Some(seq) = self.subject_first(s)? else {
                        break;
                    };
                    let (pos, i) = self.find(seq)?.ok_or(Error::corrupt(
                        MSGS_DIR,
                        0,
                        "subject's first message missing",
                    ))?;
                    let ts = self.marker_ts(seq, self.now());
                    self.marker(Kind::Tombstone, seq, ts)?;
                    self.mark_deleted(pos, i);
                    if seq == self.seq.first() {
                        self.set_first_from(seq + 1)?;
                    }
                }
            }
        }
        let mut new_floor = 0;
        let over = |s: &Self| {
            (l.max_msgs > 0 && s.seq.msgs() > l.max_msgs)
                || (l.max_bytes > 0 && s.seq.bytes() > l.max_bytes)
        };
        while self.seq.msgs() > 0 && over(self) {
            new_floor = self.seq.first();
            self.apply_floor(new_floor)?;
            self.set_first_from(new_floor + 1)?;
        }
        if !l.max_age.is_zero() {
            let age = l.max_age;
            let cutoff = self
                .now()
                .saturating_sub(age.as_nanos().min(i64::MAX as u128) as i64);
            while self.seq.msgs() > 0 && self.seq.first_ts() < cutoff {
                new_floor = self.seq.first();
                self.apply_floor(new_floor)?;
                self.set_first_from(new_floor + 1)?;
            }
        }
        // per-message ttls: the same age rule, a tombstone per expired message
        let expired = !self.ttl.is_empty() && self.expire_ttls()? > 0;
        if new_floor > 0 {
            let ts = self.marker_ts(new_floor, self.now());
            self.marker(Kind::Floor, new_floor, ts)?;
        }
        if new_floor > 0 || expired {
            self.drop_empty_front_blocks()?;
        }
        Ok(())
    }

    pub(super) fn enforce_limits_all(&mut self) -> Result<()> {
        if self.cfg.limits != crate::config::Limits::default() || !self.ttl.is_empty() {
            self.enforce_limits(None)?;
        }
        Ok(())
    }
}
