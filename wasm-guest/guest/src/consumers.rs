//! The consumer calls of the `store` resource: store-core's `Store` consumer
//! methods, their types and errors converted to the WIT ones.

use super::{to_wit_error, wit, GuestStoreRes};
use seqstore_core::{AckPolicy, ConsumerConfig, ConsumerState, Error};

type CR<T> = Result<T, wit::ConsumerError>;

pub(crate) fn to_consumer_error(e: Error) -> wit::ConsumerError {
    use wit::ConsumerError as C;
    match e {
        Error::ConsumerNotFound { name } => C::NotFound(name),
        Error::ConsumerExists { name } => C::Exists(name),
        Error::InvalidConsumerName { name, reason } => C::InvalidName((name, reason.into())),
        Error::NotPending { name, seq } => C::NotPending((name, seq)),
        Error::DeliveredBackwards {
            name,
            dseq,
            sseq,
            delivered,
        } => C::DeliveredBackwards((name, dseq, sseq, delivered.0, delivered.1)),
        Error::NoAckPolicy { name } => C::NoAckPolicy(name),
        other => C::Store(to_wit_error(other)),
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

fn to_wit_config(c: ConsumerConfig) -> wit::ConsumerConfig {
    wit::ConsumerConfig {
        name: c.name,
        ack_policy: match c.ack_policy {
            AckPolicy::Explicit => wit::AckPolicy::Explicit,
            AckPolicy::All => wit::AckPolicy::All,
            AckPolicy::None => wit::AckPolicy::None,
        },
        max_deliver: c.max_deliver,
    }
}

fn to_wit_state(s: ConsumerState) -> wit::ConsumerState {
    let pair = |p: seqstore_core::SequencePair| wit::SequencePair {
        consumer: p.consumer,
        stream: p.stream,
    };
    wit::ConsumerState {
        delivered: pair(s.delivered),
        ack_floor: pair(s.ack_floor),
        pending: s
            .pending
            .into_iter()
            .map(|(q, p)| wit::PendingAck {
                stream_seq: q,
                sequence: p.sequence,
                timestamp: p.timestamp,
            })
            .collect(),
        redelivered: s.redelivered.into_iter().collect(),
    }
}

impl GuestStoreRes {
    fn consumer<T>(
        &self,
        f: impl FnOnce(
            &mut seqstore_core::Store<seqstore_core::CryptFs<super::GuestFs>>,
        ) -> seqstore_core::Result<T>,
    ) -> CR<T> {
        f(&mut self.0.borrow_mut()).map_err(to_consumer_error)
    }

    pub(crate) fn consumer_add(&self, c: wit::ConsumerConfig) -> CR<()> {
        self.consumer(|s| s.consumer_add(&from_wit_config(c)))
    }
    pub(crate) fn consumer_update(&self, c: wit::ConsumerConfig) -> CR<()> {
        self.consumer(|s| s.consumer_update(&from_wit_config(c)))
    }
    pub(crate) fn update_delivered(&self, n: String, d: u64, q: u64, dc: u64, ts: i64) -> CR<()> {
        self.consumer(|s| s.update_delivered(&n, d, q, dc, ts))
    }
    pub(crate) fn update_acks(&self, n: String, d: u64, q: u64) -> CR<()> {
        self.consumer(|s| s.update_acks(&n, d, q))
    }
    pub(crate) fn consumer_state(&self, n: String) -> CR<wit::ConsumerState> {
        self.consumer(|s| s.consumer_state(&n)).map(to_wit_state)
    }
    pub(crate) fn consumer_config(&self, n: String) -> CR<wit::ConsumerConfig> {
        self.consumer(|s| s.consumer_config(&n)).map(to_wit_config)
    }
    pub(crate) fn consumer_reset(&self, n: String, start: u64) -> CR<()> {
        self.consumer(|s| s.consumer_reset(&n, start))
    }
    pub(crate) fn consumer_delete(&self, n: String) -> CR<()> {
        self.consumer(|s| s.consumer_delete(&n))
    }
    pub(crate) fn consumer_names(&self) -> Vec<String> {
        self.0.borrow().consumer_names()
    }
}
