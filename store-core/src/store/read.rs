//! Reads: by sequence, by subject, the next match of a filter, subject counts.

use super::layout::MSGS_DIR;
use super::types::StoredMsg;
use super::{io_at, Store};
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile};
use crate::record::{decode, Decoded, Kind};
use crate::subject;
use std::collections::BTreeMap;

impl<F: Fs> Store<F> {
    /// Reads and checks the record of entry `i` in block `pos` (checked after the read: crc,
    /// kind and sequence), from the write buffer, the block's cache or the file.
    pub(super) fn read_entry(&self, pos: usize, i: usize) -> Result<StoredMsg> {
        let b = &self.blocks[pos];
        let e = b.loaded().at(i);
        let off = e.off as u64;
        let len = e.len as usize;
        let mut owned = Vec::new();
        let bytes: &[u8] = if off >= b.span.len {
            let at = (off - b.span.len) as usize;
            &self.wbuf[at..at + len]
        } else if let Some(c) = b
            .copies
            .cache
            .as_deref()
            .filter(|c| off as usize + len <= c.len())
        {
            &c[off as usize..off as usize + len]
        } else {
            owned.resize(len, 0);
            let file = self.block_file(pos)?;
            io_at(file.read_exact_at(&mut owned, off), "read", &b.path)?;
            &owned
        };
        match decode(bytes) {
            Decoded::Record(r) if r.kind == Kind::Msg && r.seq == e.seq => Ok(r.owned_msg()),
            Decoded::Record(_) => Err(Error::corrupt(b.path.clone(), off, "wrong record here")),
            Decoded::Bad { reason, .. } => Err(Error::corrupt(b.path.clone(), off, reason)),
            _ => Err(Error::corrupt(b.path.clone(), off, "record cut short")),
        }
    }

    pub(super) fn subject_first(&mut self, sid: u32) -> Result<Option<u64>> {
        let s = self.subjects.info(sid);
        if s.msgs == 0 {
            return Ok(None);
        }
        if s.first != 0 {
            return Ok(Some(s.first));
        }
        let start = self
            .blocks
            .partition_point(|b| b.span.seq_ceiling < self.seq.first());
        for pos in start..self.blocks.len() {
            if self.blocks[pos].span.live == 0 {
                continue;
            }
            self.ensure_loaded(pos)?;
            let entries = self.blocks[pos].loaded();
            if let Some(e) = entries.iter().find(|e| !e.deleted && e.subj == sid) {
                self.subjects.info_mut(sid).first = e.seq;
                return Ok(Some(e.seq));
            }
        }
        Err(Error::corrupt(
            MSGS_DIR,
            0,
            "subject count without messages",
        ))
    }

    pub(super) fn subject_last(&mut self, sid: u32) -> Result<Option<u64>> {
        let s = self.subjects.info(sid);
        if s.msgs == 0 {
            return Ok(None);
        }
        if s.last != 0 {
            return Ok(Some(s.last));
        }
        for pos in (0..self.blocks.len()).rev() {
            if self.blocks[pos].span.live == 0 {
                continue;
            }
            self.ensure_loaded(pos)?;
            let entries = self.blocks[pos].loaded();
            if let Some(e) = entries.iter().rev().find(|e| !e.deleted && e.subj == sid) {
                self.subjects.info_mut(sid).last = e.seq;
                return Ok(Some(e.seq));
            }
        }
        Err(Error::corrupt(
            MSGS_DIR,
            0,
            "subject count without messages",
        ))
    }

    /// The message with sequence `seq`.
    pub fn get(&mut self, seq: u64) -> Result<StoredMsg> {
        self.check_open()?;
        self.trim_entries();
        if self.ttl_expired(seq) {
            return Err(Error::NotFound { seq });
        }
        if let Some(pos) = self.marked_block(seq) {
            self.prepare_read(pos)?;
            return self.read_marked(pos, seq)?.ok_or(Error::NotFound { seq });
        }
        match self.find(seq)? {
            Some((pos, i)) => {
                self.prepare_read(pos)?;
                self.read_entry(pos, i)
            }
            None => Err(Error::NotFound { seq }),
        }
    }

    /// The newest message stored under `subject`, or, when `subject` is a filter with
    /// wildcards (`*`, `>`), the newest message matching it (NATS's `last_by_subj` takes
    /// either).
    pub fn last_for_subject(&mut self, subject: &str) -> Result<Option<StoredMsg>> {
        self.check_open()?;
        self.trim_entries();
        if !subject::is_literal(subject) {
            subject::validate_filter(subject)?;
            return self.prev_matching(subject, u64::MAX);
        }
        subject::validate_subject(subject)?;
        let Some(sid) = self.subjects.id(subject) else {
            return Ok(None);
        };
        match self.subject_last(sid)? {
            // expired and not yet removed: the newest of the subject's messages still live
            // (the walk back hides every expired one)
            Some(seq) if self.ttl_expired(seq) => self.prev_matching(subject, seq),
            Some(seq) => self.get(seq).map(Some),
            None => Ok(None),
        }
    }

    /// The first message at or after `from_seq` whose subject matches `filter` (`*` matches
    /// one token, `>` the rest).
    pub fn next_matching(&mut self, filter: &str, from_seq: u64) -> Result<Option<StoredMsg>> {
        self.check_open()?;
        self.trim_entries();
        subject::validate_filter(filter)?;
        let from = from_seq.max(self.seq.first()).max(1);
        let literal = subject::is_literal(filter).then(|| self.subjects.id(filter));
        if literal == Some(None) {
            return Ok(None);
        }
        // 0 unknown, 1 matches, 2 does not
        let mut cache: Vec<u8> = Vec::new();
        let mut pos = self.blocks.partition_point(|b| b.span.seq_ceiling < from);
        while pos < self.blocks.len() {
            if self.blocks[pos].span.live > 0 {
                // a scan for a rare subject may pass every block: keep the cache bounded
                self.trim_entries();
                self.ensure_loaded(pos)?;
                let entries = self.blocks[pos].loaded();
                let start = entries.seq_point(from);
                for (i, e) in entries.range(start, entries.len()).enumerate() {
                    let i = start + i;
                    if e.deleted || self.ttl_expired(e.seq) {
                        continue;
                    }
                    let hit = match literal {
                        Some(Some(sid)) => e.subj == sid,
                        _ => {
                            let k = e.subj as usize;
                            if cache.len() <= k {
                                cache.resize(self.subjects.len(), 0);
                            }
                            if cache[k] == 0 {
                                cache[k] = if subject::matches(filter, &self.subjects.names()[k]) {
                                    1
                                } else {
                                    2
                                };
                            }
                            cache[k] == 1
                        }
                    };
                    if hit {
                        self.prepare_read(pos)?;
                        return self.read_entry(pos, i).map(Some);
                    }
                }
            }
            pos += 1;
        }
        Ok(None)
    }

    /// Message counts per subject for the subjects matching `filter`. A message past its
    /// ttl's deadline is not counted, removed or not (unlike in `state()`, which counts it
    /// until `tick` removes it, as NATS does).
    pub fn subjects_state(&mut self, filter: &str) -> Result<BTreeMap<String, u64>> {
        if self.check_open().is_ok() && self.expired_pending()? {
            let detail = self.subjects_state_detail(filter)?;
            return Ok(detail.into_iter().map(|(k, v)| (k, v.msgs)).collect());
        }
        self.subjects_counted(filter)
    }

    /// The subject counters as they are, every stored message counted until it is removed,
    /// as `state()` counts them (the snapshot manifest's digest, which `restore` compares
    /// with the state it gets).
    pub(crate) fn subjects_counted(&self, filter: &str) -> Result<BTreeMap<String, u64>> {
        self.check_open()?;
        subject::validate_filter(filter)?;
        Ok(self
            .subjects
            .infos()
            .iter()
            .enumerate()
            .filter(|(i, s)| s.msgs > 0 && subject::matches(filter, &self.subjects.names()[*i]))
            .map(|(i, s)| (self.subjects.names()[i].clone(), s.msgs))
            .collect())
    }
}
