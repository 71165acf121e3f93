//! The consumer requests: adds, deletes, pulls and acks, applied to a stream's store.
//!
//! A pull ([`Op::ConsumerNext`]) is decided here, from the replicated state and the log's
//! time alone, so that every replica delivers the same messages with the same consumer
//! sequences and records the same state: the redeliveries are the pending messages whose last
//! delivery is `ack_wait_ms` older than the log's time (never a follower's clock), then come
//! new messages after the consumer's last delivered stream sequence.

use super::apply::answer;
use super::Stream;
use crate::error::Result;
use crate::sharedfs::SubFs;
use crate::types::{ApplyError, ConsumerInfo, Delivery, Op, Response, MAX_BATCH};
use seqstore_core::{ConsumerState, Fs, Store, StoredMsg};

type CoreError = seqstore_core::Error;

/// Applies consumer request `op` to `s` (named `stream`) at the log's time `now`.
pub(super) fn apply<F: Fs>(s: &mut Stream<F>, stream: &str, op: Op, now: i64) -> Result<Response> {
    let store = &mut s.store;
    let r = match op {
        Op::ConsumerAdd { name, config, .. } => {
            (store.consumer_add(&config.named(name))).map(|()| Response::Done)
        }
        Op::ConsumerDelete { name, .. } => store.consumer_delete(&name).map(|()| Response::Done),
        Op::ConsumerNext {
            name,
            filter,
            batch,
            ack_wait_ms,
            ..
        } => {
            if batch == 0 || batch > MAX_BATCH {
                return Ok(Response::Err(ApplyError::Refused(format!(
                    "batch {batch}: 1 to {MAX_BATCH}"
                ))));
            }
            let pull = Pull {
                filter: if filter.is_empty() {
                    ">".into()
                } else {
                    filter
                },
                batch: batch as usize,
                ack_wait_ns: i64::try_from(ack_wait_ms)
                    .unwrap_or(i64::MAX)
                    .saturating_mul(1_000_000),
                now,
            };
            next(store, &name, &pull).map(Response::Delivered)
        }
        Op::ConsumerAck {
            name, stream_seq, ..
        } => ack(store, &name, stream_seq),
        _ => Err(CoreError::InvalidArgument(
            "not a consumer operation".into(),
        )),
    };
    consumer_answer(stream, r)
}

/// A store error of a consumer call that follows from the request and the replicated state
/// is the request's answer, typed; the rest as [`answer`] decides.
fn consumer_answer(stream: &str, r: seqstore_core::Result<Response>) -> Result<Response> {
    let st = || stream.to_string();
    let e = match r {
        Err(CoreError::ConsumerNotFound { name }) => {
            ApplyError::UnknownConsumer { stream: st(), name }
        }
        Err(CoreError::ConsumerExists { name }) => {
            ApplyError::ConsumerExists { stream: st(), name }
        }
        Err(CoreError::InvalidConsumerName { name, .. }) => ApplyError::InvalidConsumerName(name),
        Err(CoreError::NotPending { name, seq }) => ApplyError::NotPending {
            stream: st(),
            name,
            stream_seq: seq,
        },
        Err(e @ (CoreError::NoAckPolicy { .. } | CoreError::DeliveredBackwards { .. })) => {
            ApplyError::Refused(e.to_string())
        }
        other => return answer(other),
    };
    Ok(Response::Err(e))
}

/// One pull's parameters.
struct Pull {
    filter: String,
    batch: usize,
    /// 0: no redeliveries.
    ack_wait_ns: i64,
    now: i64,
}

/// The pull: redeliveries, then new messages, each recorded before the next is chosen.
fn next<F: Fs>(
    store: &mut Store<SubFs<F>>,
    name: &str,
    pull: &Pull,
) -> seqstore_core::Result<Vec<Delivery>> {
    // refusals first, before any change: an unknown consumer, an invalid filter. After the
    // first delivery is recorded only the node's errors (I/O) are expected: each delivery is
    // chosen valid (a live message past the last delivery, or a pending one with the next
    // consumer sequence); a store refusal there would still be the same on every replica
    let st = store.consumer_state(name)?;
    seqstore_core::subject::validate_filter(&pull.filter)?;
    let max_deliver = store.consumer_config(name)?.max_deliver;
    let mut dseq = st.delivered.consumer;
    let mut out = Vec::new();
    for (sseq, dc) in due(&st, max_deliver, pull) {
        if out.len() == pull.batch {
            return Ok(out);
        }
        // a pending message the stream no longer shows (a ttl past, not yet expired)
        let m = match store.get(sseq) {
            Ok(m) => m,
            Err(CoreError::NotFound { .. }) => continue,
            Err(e) => return Err(e),
        };
        dseq += 1;
        store.update_delivered(name, dseq, sseq, dc, pull.now)?;
        out.push(delivery(m, dseq, dc));
    }
    let mut from = st.delivered.stream + 1;
    while out.len() < pull.batch {
        let Some(m) = store.next_matching(&pull.filter, from)? else {
            break;
        };
        from = m.seq + 1;
        dseq += 1;
        store.update_delivered(name, dseq, m.seq, 1, pull.now)?;
        out.push(delivery(m, dseq, 1));
    }
    Ok(out)
}

/// The pending messages due for redelivery at `pull.now`, oldest stream sequence first, with
/// the delivery count each would get; those that reached `max_deliver` stay pending
/// (acknowledgeable) and are not delivered again.
fn due(st: &ConsumerState, max_deliver: u64, pull: &Pull) -> Vec<(u64, u64)> {
    if pull.ack_wait_ns <= 0 {
        return Vec::new();
    }
    (st.pending.iter())
        .filter(|(_, p)| p.timestamp.saturating_add(pull.ack_wait_ns) <= pull.now)
        .map(|(&q, _)| (q, st.redelivered.get(&q).copied().unwrap_or(0) + 2))
        .filter(|&(_, dc)| max_deliver == 0 || dc <= max_deliver)
        .collect()
}

fn delivery(m: StoredMsg, consumer_seq: u64, delivery_count: u64) -> Delivery {
    Delivery {
        stream_seq: m.seq,
        consumer_seq,
        delivery_count,
        subject: m.subject,
        ts: m.ts,
        headers: m.headers,
        payload: m.payload,
    }
}

/// The ack of `sseq` as the consumer's state shows it now (in line with the stream): a
/// message not pending there is `NotPending`.
fn ack<F: Fs>(
    store: &mut Store<SubFs<F>>,
    name: &str,
    sseq: u64,
) -> seqstore_core::Result<Response> {
    let st = store.consumer_state(name)?;
    let Some(p) = st.pending.get(&sseq) else {
        if store.consumer_config(name)?.ack_policy == seqstore_core::AckPolicy::None {
            return Err(CoreError::NoAckPolicy { name: name.into() });
        }
        return Err(CoreError::NotPending {
            name: name.into(),
            seq: sseq,
        });
    };
    store.update_acks(name, p.sequence, sseq)?;
    Ok(Response::Done)
}

/// Consumer `name` of `s` as the state machine holds it, `None` if there is none.
pub(super) fn info<F: Fs>(s: &Stream<F>, name: &str) -> Result<Option<ConsumerInfo>> {
    let st = match s.store.consumer_state(name) {
        Ok(st) => st,
        Err(CoreError::ConsumerNotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let cfg = s.store.consumer_config(name)?;
    let mut info = ConsumerInfo::from_core(&cfg, &st);
    if info.pending.is_empty() {
        // store-core's in-line view of an `All` consumer whose last pending message was
        // removed from the stream keeps that message's first consumer sequence as the floor;
        // its next consumer write, and a restore, settle the floor at the last delivery. Show
        // the settled floor, so that a replica that applied the removal and one that restored
        // a snapshot after it agree (found by `tests/stream_sm_consumers.rs`'s model).
        info.ack_floor = info.delivered;
    }
    Ok(Some(info))
}
