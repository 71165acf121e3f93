//! Appends: one message, pre-encoded records, and runs of them.

use super::sync::S_APPEND;
use super::Store;
use crate::admit::Admission;
use crate::config::{Discard, SyncPolicy};
use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::record::{self, encoded_len, Kind, BLOCK_HEADER_LEN};

/// A record encoded by the caller of [`Store::append_encoded`], with its decoded fields.
#[derive(Clone, Copy)]
pub(super) struct Encoded<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) seq: u64,
    pub(super) ts: i64,
    pub(super) crc: u32,
}

/// The subject of an append: its name, or (for a record encoded by the caller, whose bytes
/// name it) the id of a subject the store holds.
#[derive(Clone, Copy)]
pub(super) enum Subj<'a> {
    Name(&'a str),
    Known(u32),
}

impl<F: Fs> Store<F> {
    /// Appends a message; returns its sequence (`last_seq + 1`). Under `Always` the message
    /// is durable when this returns.
    pub fn append(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> Result<u64> {
        self.append_inner(Subj::Name(subject), headers, payload, true, None)
    }

    /// `append` without its `Always` fsync: the message is written (buffered) and indexed, and
    /// becomes durable with the next sync. The group commit of `SharedStore` calls this, then
    /// shares one fsync among every writer that got here before it.
    /// Returns the sequence and the write number that must be durable before it is
    /// acknowledged.
    pub(crate) fn append_buffered(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<(u64, u64)> {
        let seq = self.append_inner(Subj::Name(subject), headers, payload, false, None)?;
        Ok((seq, self.dur.writes()))
    }

    /// Appends a message that the caller has already encoded as a record ([`record::encode`]:
    /// kind message, no flags) for the sequence and timestamp it predicted: `last_seq + 1`, and
    /// `max(clock reading at the time of its append call, last_ts)`. The store checks the
    /// message exactly as [`Store::append`] does (same errors, same order, no side effect on
    /// error), refuses a record whose sequence is not `last_seq + 1` or whose timestamp is
    /// below `last_ts` (`InvalidArgument`, nothing written), takes the timestamp from the
    /// record instead of reading its clock, and copies the bytes into the block as they are.
    ///
    /// **The crc is trusted, not recomputed**: that is the point (the wasm host encodes the
    /// guest's appends natively, where crc32 has SIMD, and sends the records in batches). A
    /// wrong crc harms only the caller's own message: every read and every recovery scan
    /// verifies it, so it comes back as `Corrupt`, never as a wrong message.
    // Inlined into the wasm guest's batch loop, its hot caller: called out of line (it has two
    // callers there) it cost ~60 more wasm instructions per append (callgrind).
    #[inline(always)]
    pub(crate) fn append_encoded(&mut self, rec: &[u8]) -> Result<u64> {
        let r = match record::decode_raw_trusting_crc(rec) {
            Ok(r) if r.len == rec.len() && r.kind == Kind::Msg && r.flags == 0 => r,
            _ => {
                return Err(Error::InvalidArgument(
                    "append_encoded: not one whole message record".into(),
                ))
            }
        };
        let enc = Encoded {
            bytes: rec,
            seq: r.seq,
            ts: r.ts,
            crc: r.crc,
        };
        // Subject bytes equal to a name the store holds are valid UTF-8 and a valid subject:
        // neither check runs (the UTF-8 check was 5% of the guest's share of an append).
        let subject = match self.subjects.hit(r.subject) {
            Some(id) => Subj::Known(id),
            None => match std::str::from_utf8(r.subject) {
                Ok(s) => Subj::Name(s),
                Err(_) => {
                    return Err(Error::InvalidArgument(
                        "append_encoded: not one whole message record".into(),
                    ))
                }
            },
        };
        self.append_inner(subject, r.headers, r.payload, true, Some(enc))
    }

    /// [`Store::append_encoded`] for whole message records back to back in `records` (each
    /// starts with its length field), in order: the same checks, results and bytes as one call
    /// per record. Stops at the first record refused (or whose length field runs past the
    /// buffer: `InvalidArgument`, nothing of it written) and returns how many it applied and
    /// that error. The wasm guest applies its host's batched appends through this.
    ///
    /// Under `SyncPolicy::Never` without limits a record whose subject the store holds, that
    /// fits the newest block and does not fill the write buffer, is applied in a short path
    /// (`append_in_run`) that makes `append_encoded`'s checks and updates and leaves the
    /// record's bytes where they are; consecutive such records are copied into the write
    /// buffer in one piece. Every other record, and every check that fails, goes through
    /// `append_encoded` itself, so errors are its own. In the guest an unsynced append took
    /// 12% fewer instructions, host and wasm together (callgrind: one `memory.copy` per run of
    /// records instead of one per record, no per-record call chain).
    pub(crate) fn append_encoded_run(&mut self, records: &[u8]) -> (usize, Result<()>) {
        let short = self.cfg.sync == SyncPolicy::Never
            && self.cfg.limits == crate::config::Limits::default();
        let (mut applied, mut at, mut seg) = (0usize, 0usize, 0usize);
        let result = loop {
            let Some(rest) = records.get(at..).filter(|r| !r.is_empty()) else {
                break Ok(());
            };
            let len = rest
                .get(..4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
            let Some(rec) = rest.get(..len).filter(|_| len > 0) else {
                break Err(Error::InvalidArgument(
                    "append_encoded_run: a record's length field runs past the buffer".into(),
                ));
            };
            if short && self.append_in_run(rec, at - seg) {
                applied += 1;
                at += len;
                continue;
            }
            // the records before this one are in the block, as `append_encoded` expects
            self.wbuf.extend_from_slice(&records[seg..at]);
            seg = at;
            if let Err(e) = self.append_encoded(rec) {
                break Err(e);
            }
            applied += 1;
            at += len;
            seg = at;
        };
        self.wbuf.extend_from_slice(&records[seg..at]);
        (applied, result)
    }

    /// The short path of [`Store::append_encoded_run`]: applies `rec` as `append_encoded`
    /// would, when nothing can fail — the store open and writable, the record a whole message
    /// with the next sequence and a timestamp not below the last, its subject one the memo
    /// holds (a valid name), its sizes within the limits, room for it in the newest block
    /// (loaded, and not one open left for a new block: `Durability::own_block_first`) and in
    /// the write buffer, where `pending` bytes of the run wait to be copied
    /// before it. Returns false, having changed nothing, otherwise: the caller then makes the
    /// ordinary call, which gives the same outcome and error as it always does.
    #[inline(always)]
    pub(super) fn append_in_run(&mut self, rec: &[u8], pending: usize) -> bool {
        if self.closed
            || self.dur.poisoned()
            || self.dur.own_block_first()
            || Admission::next_seq(self.seq.last()).is_err()
        {
            return false;
        }
        let r = match record::decode_raw_trusting_crc(rec) {
            Ok(r) if r.len == rec.len() && r.kind == Kind::Msg && r.flags == 0 => r,
            _ => return false,
        };
        let seq = self.seq.last() + 1;
        if r.seq != seq
            || r.ts < self.seq.last_ts()
            || Admission::new(&self.cfg)
                .sizes(r.headers.len(), r.payload.len())
                .is_err()
            || self.wbuf.len() + pending + rec.len() >= self.cfg.write_buffer
        {
            return false;
        }
        let Some(sid) = self.subjects.hit(r.subject) else {
            return false;
        };
        let Some(b) = self.blocks.last() else {
            return false;
        };
        let off = b.span.len + (self.wbuf.len() + pending) as u64;
        let len = rec.len() as u64;
        // as `write_record`: a roll is the ordinary path's
        if (off > BLOCK_HEADER_LEN && off + len > self.cfg.block_size) || b.index.entries.is_none()
        {
            return false;
        }
        // Nothing can fail from here: `write_record`'s and `append_inner`'s updates.
        let pos = self.blocks.len() - 1;
        self.note_written(pos, seq, r.crc);
        self.add_entry(pos, seq, r.ts, off, len, sid);
        true
    }

    /// One append: the admission checks in their order, the write, the `Always` fsync, then
    /// the index, the limits and the `Interval` sync. Longer than 70 lines: it is the hot path
    /// of every append, native and in the guest, where a call that is not inlined is measured
    /// in instructions per append (`append_encoded` out of line cost ~60 wasm instructions,
    /// callgrind); a split of this one has not been measured yet, so it stays whole, its
    /// steps in order below.
    pub(super) fn append_inner(
        &mut self,
        subj: Subj<'_>,
        headers: &[u8],
        payload: &[u8],
        sync_always: bool,
        encoded: Option<Encoded<'_>>,
    ) -> Result<u64> {
        self.check_writable()?;
        self.trim_entries();
        // a subject already in the index was validated when it was first stored
        let (subject, known) = match subj {
            Subj::Name(s) => (s, self.subjects.lookup(s)),
            // Only with the record encoded: the name is not needed to write it.
            Subj::Known(id) => {
                debug_assert!(encoded.is_some());
                ("", Some(id))
            }
        };
        let admission = Admission::new(&self.cfg);
        admission.message(subject, known.is_some(), headers.len(), payload.len())?;
        let len = match encoded {
            Some(e) => e.bytes.len() as u64,
            None => encoded_len(subject.len(), headers.len(), payload.len()) as u64,
        };
        let l = self.cfg.limits;
        if l.discard == Discard::New {
            if l.max_msgs > 0 && self.seq.msgs() >= l.max_msgs {
                return Err(Error::LimitExceeded { limit: "max_msgs" });
            }
            if l.max_bytes > 0 && self.seq.bytes() + len > l.max_bytes {
                return Err(Error::LimitExceeded { limit: "max_bytes" });
            }
        }
        let seq = Admission::next_seq(self.seq.last())?;
        let (ts, pre) = match encoded {
            None => (self.now().max(self.seq.last_ts()), None),
            Some(e) => {
                if e.seq != seq || e.ts < self.seq.last_ts() {
                    return Err(Error::InvalidArgument(format!(
                        "append_encoded: record for seq {} ts {}, the store is at seq {} ts {}",
                        e.seq,
                        e.ts,
                        self.seq.last(),
                        self.seq.last_ts()
                    )));
                }
                (e.ts, Some((e.bytes, e.crc)))
            }
        };
        let (pos, off, len) =
            self.write_record(Kind::Msg, seq, ts, subject, headers, payload, pre)?;
        let always = sync_always && self.cfg.sync == SyncPolicy::Always;
        if always {
            // acknowledged only once durable
            self.sync_inner(S_APPEND)?;
        }
        let sid = match known {
            Some(id) => id,
            None => self.subjects.intern(subject),
        };
        self.add_entry(pos, seq, ts, off, len as u64, sid);
        if l != crate::config::Limits::default() {
            self.enforce_limits(Some(sid))?;
            if always {
                // whatever the limits wrote; the same named site, so that removing it removes
                // it. (Without limits nothing was written since the sync above.)
                self.sync_inner(S_APPEND)?;
            }
        }
        if matches!(self.cfg.sync, SyncPolicy::Interval(_)) {
            // (not a call under `Never`: ~60 wasm instructions per append for an `Ok(())`)
            self.maybe_sync()?;
        }
        Ok(seq)
    }
}
