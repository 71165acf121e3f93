//! The consumer calls' types: the guest's `consumer-*` exports' records and errors as
//! store-core's (`GuestStore`'s consumer calls use them).

use crate::bindings::exports::seqstore::store::stream as wit;
use crate::convert::{from_wit_error, intern};
use crate::Error;
use seqstore_core::{AckPolicy, ConsumerConfig, ConsumerState, Pending, SequencePair};

pub(crate) fn from_consumer_error(e: wit::ConsumerError) -> Error {
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

pub(crate) fn to_wit_config(c: &ConsumerConfig) -> wit::ConsumerConfig {
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

pub(crate) fn from_wit_config(c: wit::ConsumerConfig) -> ConsumerConfig {
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

pub(crate) fn from_wit_consumer_state(s: wit::ConsumerState) -> ConsumerState {
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
