//! The consumer calls of [`GuestStore`]: the guest's `consumer-*` exports, with
//! store-core's types and typed errors on this side.

use crate::bindings::exports::seqstore::store::stream as wit;
use crate::convert::{from_wit_error, intern};
use crate::{Error, GuestStore, Result};
use seqstore_core::{AckPolicy, ConsumerConfig, ConsumerState, Pending, SequencePair};

fn from_consumer_error(e: wit::ConsumerError) -> Error {
    use seqstore_core::Error as E;
    use wit::ConsumerError as C;
    Error::Store(match e {
        C::Store(e) => from_wit_error(e),
        C::NotFound(name) => E::ConsumerNotFound { name },
        C::Exists(name) => E::ConsumerExists { name },
        C::InvalidName((name, reason)) => E::InvalidConsumerName {
            name,
            reason: intern(&reason),
        },
        C::NotPending((name, seq)) => E::NotPending { name, seq },
        C::DeliveredBackwards((name, dseq, sseq, c, s)) => E::DeliveredBackwards {
            name,
            dseq,
            sseq,
            delivered: (c, s),
        },
        C::NoAckPolicy(name) => E::NoAckPolicy { name },
    })
}

fn to_wit_config(c: &ConsumerConfig) -> wit::ConsumerConfig {
    wit::ConsumerConfig {
        name: c.name.clone(),
        ack_policy: match c.ack_policy {
            AckPolicy::Explicit => wit::AckPolicy::Explicit,
            AckPolicy::All => wit::AckPolicy::All,
            AckPolicy::None => wit::AckPolicy::None,
        },
        max_deliver: c.max_deliver,
    }
}

fn from_wit_config(c: wit::ConsumerConfig) -> ConsumerConfig {
    ConsumerConfig {
        name: c.name,
        ack_policy: match c.ack_policy {
            wit::AckPolicy::Explicit => AckPolicy::Explicit,
            wit::AckPolicy::All => AckPolicy::All,
            wit::AckPolicy::None => AckPolicy::None,
        },
        max_deliver: c.max_deliver,
    }
}

fn from_wit_state(s: wit::ConsumerState) -> ConsumerState {
    let pair = |p: wit::SequencePair| SequencePair {
        consumer: p.consumer,
        stream: p.stream,
    };
    ConsumerState {
        delivered: pair(s.delivered),
        ack_floor: pair(s.ack_floor),
        pending: s
            .pending
            .into_iter()
            .map(|p| {
                let v = Pending {
                    sequence: p.sequence,
                    timestamp: p.timestamp,
                };
                (p.stream_seq, v)
            })
            .collect(),
        redelivered: s.redelivered.into_iter().collect(),
    }
}

impl GuestStore {
    /// `Store::consumer_add`.
    pub fn consumer_add(&mut self, cfg: &ConsumerConfig) -> Result<()> {
        let c = to_wit_config(cfg);
        self.raw(|g, s, h| g.call_consumer_add(s, h, &c))?
            .map_err(from_consumer_error)
    }

    /// `Store::consumer_update`.
    pub fn consumer_update(&mut self, cfg: &ConsumerConfig) -> Result<()> {
        let c = to_wit_config(cfg);
        self.raw(|g, s, h| g.call_consumer_update(s, h, &c))?
            .map_err(from_consumer_error)
    }

    /// `Store::update_delivered`.
    pub fn update_delivered(
        &mut self,
        name: &str,
        dseq: u64,
        sseq: u64,
        dc: u64,
        ts: i64,
    ) -> Result<()> {
        self.raw(|g, s, h| g.call_update_delivered(s, h, name, dseq, sseq, dc, ts))?
            .map_err(from_consumer_error)
    }

    /// `Store::update_acks`.
    pub fn update_acks(&mut self, name: &str, dseq: u64, sseq: u64) -> Result<()> {
        self.raw(|g, s, h| g.call_update_acks(s, h, name, dseq, sseq))?
            .map_err(from_consumer_error)
    }

    /// `Store::consumer_state`.
    pub fn consumer_state(&mut self, name: &str) -> Result<ConsumerState> {
        self.raw_read(|g, s, h| g.call_consumer_state(s, h, name))?
            .map(from_wit_state)
            .map_err(from_consumer_error)
    }

    /// `Store::consumer_config`.
    pub fn consumer_config(&mut self, name: &str) -> Result<ConsumerConfig> {
        self.raw_read(|g, s, h| g.call_consumer_config(s, h, name))?
            .map(from_wit_config)
            .map_err(from_consumer_error)
    }

    /// `Store::consumer_reset`.
    pub fn consumer_reset(&mut self, name: &str, start: u64) -> Result<()> {
        self.raw(|g, s, h| g.call_consumer_reset(s, h, name, start))?
            .map_err(from_consumer_error)
    }

    /// `Store::consumer_delete`.
    pub fn consumer_delete(&mut self, name: &str) -> Result<()> {
        self.raw(|g, s, h| g.call_consumer_delete(s, h, name))?
            .map_err(from_consumer_error)
    }

    /// `Store::consumer_names`.
    pub fn consumer_names(&mut self) -> Result<Vec<String>> {
        self.raw_read(|g, s, h| g.call_consumer_names(s, h))
    }
}
