//! The host's queue of unsynced appends: `GuestStore`'s `append` predicts the guest's answer
//! with store-core's own admission check and encoder, and sends the queued records in one call
//! (`append-encoded`) once they fill [`FLUSH_BYTES`], or before any other call.

use super::*;

impl GuestStore {
    /// Appends a message; returns its sequence. Under `SyncPolicy::Always` it is durable
    /// when this returns.
    ///
    /// # Batching
    /// Under `SyncPolicy::Never` with no limits (`Limits::default()`), where nothing an append
    /// does is durable before a later call anyway, the host batches appends: it checks the
    /// message with store-core's own functions (subject, sizes), predicts its sequence
    /// (`last_seq + 1`) and timestamp (the clock read now, at this call, never below the last
    /// one), encodes the record natively with store-core's encoder (so its crc32 is computed
    /// with SIMD) and queues it; the queue goes to the guest in one call
    /// (`Store::append_encoded` per record) once it holds 64 KiB, and before any other call
    /// (reads included) and at close and drop. The results are those of one guest call per
    /// append: same sequences, timestamps, errors (a message the host's checks refuse goes to
    /// the guest alone, which returns its own error) and files, byte for byte.
    ///
    /// Under the other policies, or with limits, the host checks, predicts and encodes the
    /// message the same way but sends it at once (`append-encoded-one`): the guest appends it
    /// exactly as `append` (its syncs, limits and errors are the store's own), and only the
    /// checksum is computed natively instead of in wasm (a quarter of the guest's CPU time in
    /// a durable append).
    ///
    /// One difference: an **I/O error** met while the guest applies the queue (creating the
    /// next block file, writing the store's write buffer out) is returned by the call that
    /// sent the queue — a later append, a read, `sync`, `close` — rather than by the append
    /// that hit it, and it **poisons** the store (`Error::Poisoned` for every later write until
    /// reopened), since the queued messages after it had their sequences handed out already;
    /// they are lost, as unsynced messages are in a crash. Native store-core has the same
    /// shape with its own write buffer, which also reports a failed write on a later call
    /// (and poisons). A trap loses the queue with the instance.
    pub(super) fn append_queued(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<u64> {
        if let Some(seq) = self.try_queue(subject, headers, payload)? {
            return Ok(seq);
        }
        // One buffer instead of three lists: each list costs a call into the guest's
        // allocator, which dominated the cost of a buffered append.
        let (Ok(sl), Ok(hl)) = (u32::try_from(subject.len()), u32::try_from(headers.len())) else {
            // Far beyond any limit; let the store refuse it with its own error.
            return self.call(|g, s, h| g.call_append(s, h, subject, headers, payload));
        };
        let mut buf = std::mem::take(&mut self.pack);
        buf.clear();
        buf.extend_from_slice(subject.as_bytes());
        buf.extend_from_slice(headers);
        buf.extend_from_slice(payload);
        let r = self.call(|g, s, h| g.call_append_packed(s, h, sl, hl, &buf));
        self.keep_pack(buf);
        let a = r?;
        // An append that succeeded left the store open, not poisoned, and at this sequence and
        // timestamp (limits may have removed old messages; that changes neither).
        self.basis = Some((a.seq, a.last_ts));
        Ok(a.seq)
    }

    /// Queues the append, or under a policy that does not batch sends it encoded at once, if
    /// the host can predict everything about it (see [`Self::append`]): `Ok(Some(seq))` when
    /// queued or appended, `Ok(None)` when the guest must see it as it is (the queue was not
    /// touched), `Err` when sending a full queue failed or the encoded append failed (its
    /// own error, as `append`'s).
    pub(super) fn try_queue(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<Option<u64>> {
        let Some((last_seq, last_ts)) = self.basis.filter(|_| !self.dead) else {
            // Unknown state, or a trapped instance (the direct path returns `Dead`).
            return Ok(None);
        };
        // `Store::append`'s admission check, the same function (open and not poisoned:
        // `basis`; limits: a store with limits does not batch). A message that fails it goes
        // to the guest, which returns the store's own error (after the queue, in order). A
        // subject the store already holds is not checked there, so a store recovered with a
        // subject that this check refuses still behaves natively; a name that passed once is
        // remembered here, as the store would hold it.
        let known = self.valid_subjects.contains(subject);
        let admitted = seqstore_core::internal::Admission::new(&self.config)
            .message(subject, known, headers.len(), payload.len())
            .and_then(|()| seqstore_core::internal::Admission::next_seq(last_seq));
        let Ok(seq) = admitted else {
            self.flush_queue()?;
            return Ok(None);
        };
        if !known {
            if self.valid_subjects.len() >= MAX_VALID_SUBJECTS {
                self.valid_subjects.clear();
            }
            self.valid_subjects.insert(subject.into());
        }
        // The timestamp the guest's clock import would return during its own append call now.
        let ts = self.store.data().clock.now_ns().max(last_ts);
        if !self.batchable {
            return self
                .append_encoded_now(seq, ts, subject, headers, payload)
                .map(Some);
        }
        encode_msg(&mut self.queue, seq, ts, subject, headers, payload);
        self.queued += 1;
        self.basis = Some((seq, ts));
        #[cfg(test)]
        {
            self.batched += 1;
        }
        if self.queue.len() >= FLUSH_BYTES {
            self.flush_queue()?;
        }
        Ok(Some(seq))
    }

    /// The append of a message the host checked and predicted (`seq`, `ts`) under a policy
    /// that does not batch: encoded here, appended by the guest now, exactly as `append`; only
    /// the encoding (and its crc) is the host's. Any error is this append's own. Out of line:
    /// the queued path around it is the hot one.
    #[inline(never)]
    pub(super) fn append_encoded_now(
        &mut self,
        seq: u64,
        ts: i64,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
    ) -> Result<u64> {
        let mut buf = std::mem::take(&mut self.pack);
        buf.clear();
        encode_msg(&mut buf, seq, ts, subject, headers, payload);
        let r = self.call(|g, s, h| g.call_append_encoded_one(s, h, &buf));
        self.keep_pack(buf);
        let a = r?;
        if a.seq != seq || a.last_ts != ts {
            // The guest checks the record's sequence and timestamp against the store's, so
            // this cannot happen unless host and guest run different rules.
            return Err(Error::Store(seqstore_core::Error::InvalidArgument(
                format!(
                    "encoded append: the guest stored seq {} ts {}, the host predicted seq {seq} \
                 ts {ts}",
                    a.seq, a.last_ts
                ),
            )));
        }
        self.basis = Some((seq, ts));
        #[cfg(test)]
        {
            self.encoded_one += 1;
        }
        Ok(seq)
    }

    /// Sends the queued appends to the guest (see [`Self::append`]). An error is that of the
    /// first record the guest refused (the store is then poisoned) or the sandbox's.
    pub(super) fn flush_queue(&mut self) -> Result<()> {
        if self.queued == 0 {
            return Ok(());
        }
        let (data, n) = (std::mem::take(&mut self.queue), self.queued);
        self.queued = 0;
        let expected = self.basis;
        let r = self.raw_unqueued(|g, s, h| g.call_append_encoded(s, h, &data));
        if data.capacity() <= 4 * FLUSH_BYTES {
            self.queue = data;
            self.queue.clear();
        }
        let out = r.inspect_err(|_| self.basis = None)?;
        if let Some(e) = out.error {
            self.basis = None;
            return Err(Error::Store(from_wit_error(e)));
        }
        if out.applied != n || Some((out.last_seq, out.last_ts)) != expected {
            // The guest checks each record's sequence and timestamp, so this cannot happen
            // unless host and guest run different store-core rules; never let it pass.
            self.basis = None;
            return Err(Error::Store(seqstore_core::Error::InvalidArgument(
                format!(
                "batched appends: the guest applied {} of {n}, ending at seq {} ts {}, the host \
                 predicted {expected:?}",
                out.applied, out.last_seq, out.last_ts
            ),
            )));
        }
        Ok(())
    }

    /// Appends several messages `(subject, headers, payload)`, exactly as that many
    /// [`append`](seqstore_core::surface::StreamStore::append) calls in a row would (one that fails does not stop the
    /// others): one result per message, under any sync policy. Under `SyncPolicy::Never`
    /// without limits that is what it does, since plain `append` batches there on its own
    /// (the host encodes, and computes the checksums natively); under the other policies the
    /// batch goes to the guest in a single call, and must fit in the guest's memory cap along
    /// with the store.
    pub fn append_batch<'a, I>(&mut self, msgs: I) -> Result<Vec<seqstore_core::Result<u64>>>
    where
        I: IntoIterator<Item = (&'a str, &'a [u8], &'a [u8])>,
    {
        if self.batchable {
            let mut out = Vec::new();
            for (subject, headers, payload) in msgs {
                match self.append_queued(subject, headers, payload) {
                    Ok(seq) => out.push(Ok(seq)),
                    Err(Error::Store(e)) => out.push(Err(e)),
                    // The sandbox's own errors (a trap, a limit): the instance is gone.
                    Err(e) => return Err(e),
                }
            }
            return Ok(out);
        }
        let mut buf = std::mem::take(&mut self.pack);
        buf.clear();
        let mut lens = Vec::new();
        for (subject, headers, payload) in msgs {
            let len = |b: &[u8]| u32::try_from(b.len());
            match (len(subject.as_bytes()), len(headers), len(payload)) {
                (Ok(subject_len), Ok(headers_len), Ok(payload_len)) => {
                    lens.push(wit::PackedMsg {
                        subject_len,
                        headers_len,
                        payload_len,
                    });
                    buf.extend_from_slice(subject.as_bytes());
                    buf.extend_from_slice(headers);
                    buf.extend_from_slice(payload);
                }
                _ => {
                    // Not representable; far beyond every limit of the store.
                    self.keep_pack(buf);
                    return Err(Error::Store(seqstore_core::Error::TooLarge {
                        what: "batched message",
                        len: (subject.len() + headers.len() + payload.len()) as u64,
                        max: u64::from(u32::MAX),
                    }));
                }
            }
        }
        let r = self.raw(|g, s, h| g.call_append_batch(s, h, &lens, &buf));
        self.keep_pack(buf);
        Ok(r?.into_iter().map(|r| r.map_err(from_wit_error)).collect())
    }

    /// Keeps the packing buffer for the next append, unless one large message grew it.
    pub(super) fn keep_pack(&mut self, buf: Vec<u8>) {
        if buf.capacity() <= 1 << 20 {
            self.pack = buf;
        }
    }
}
