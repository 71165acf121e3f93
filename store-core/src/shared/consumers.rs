//! The consumer calls on `SharedStore`. Deliveries and acks under `Always` take the
//! group-commit path of appends: the record is written under the lock without an fsync and
//! numbered (`Store::writes`), and the caller returns once a leader's fsync covered it —
//! the journal is among the files a group ticket fsyncs, so acks from many consumers (and
//! appends) share one fsync.

use super::{lock, SharedStore};
use crate::consumer::codec::Op;
use crate::error::{Error, Result};
use crate::fs::Fs;

impl<F: Fs> SharedStore<F> {
    /// `Store::update_acks`, sharing the fsync with concurrent acks and appends under
    /// `Always`.
    pub fn update_acks(&self, name: &str, dseq: u64, sseq: u64) -> Result<()> {
        self.consumer_grouped(name, Op::Ack { dseq, sseq })
    }

    /// `Store::update_delivered`, sharing the fsync as `update_acks` does.
    pub fn update_delivered(
        &self,
        name: &str,
        dseq: u64,
        sseq: u64,
        dc: u64,
        ts: i64,
    ) -> Result<()> {
        self.consumer_grouped(name, Op::Delivered { dseq, sseq, dc, ts })
    }

    fn consumer_grouped(&self, name: &str, op: Op) -> Result<()> {
        let mut g = lock(&self.inner.state);
        if !self.inner.always {
            return g.store.consumer_write(name, op, true).map(|_| ());
        }
        if g.failed {
            return Err(Error::Poisoned);
        }
        let write = g.store.consumer_write(name, op, false)?;
        self.wait_durable_from(g, write, true)
    }
}
