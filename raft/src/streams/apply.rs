//! Applying one request to the streams: the dispatch, and which store errors are the
//! request's own (deterministic, answered as [`Response::Err`]) and which are the node's
//! (I/O, corruption: the state machine stops).

use super::{Stream, StreamCore};
use crate::error::Result;
use crate::sharedfs::SubFs;
use crate::types::{ApplyError, Op, Request, Response};
use seqstore_core::{Fs, Store};

impl<F: Fs> StreamCore<F> {
    /// Applies `req`; a refused request changes nothing and is `Ok(Response::Err(..))`.
    pub(super) fn apply_request(&mut self, req: Request) -> Result<Response> {
        // the state machine's time: the leader's, never going back
        self.now = self.now.max(req.ts);
        self.clock.set(self.now);
        match req.op {
            Op::CreateStream { name, config } => self.create_stream(name, config),
            Op::DeleteStream { name } => self.delete_stream(&name),
            Op::Batch { ops } => self.apply_batch(req.ts, ops),
            op => {
                let name = stream_of(&op).to_string();
                let Some(s) = self.streams.get_mut(&name) else {
                    return Ok(Response::Err(ApplyError::UnknownStream(name)));
                };
                if is_consumer_op(&op) {
                    return super::consumer::apply(s, &name, op, self.now);
                }
                answer(on_store(s, op, self.now))
            }
        }
    }
}

impl<F: Fs> StreamCore<F> {
    /// Applies each operation as its own request at `ts` (the clock has moved to `ts`
    /// already, as for any entry, even if every operation is refused); a nested batch is
    /// refused.
    fn apply_batch(&mut self, ts: i64, ops: Vec<Op>) -> Result<Response> {
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            out.push(match op {
                Op::Batch { .. } => Response::Err(ApplyError::Refused("a batch in a batch".into())),
                op => self.apply_request(Request { ts, op })?,
            });
        }
        Ok(Response::Batch(out))
    }
}

/// The stream a per-stream operation names (the others never reach here).
fn stream_of(op: &Op) -> &str {
    match op {
        Op::Append { stream, .. }
        | Op::Delete { stream, .. }
        | Op::Purge { stream }
        | Op::PurgeEx { stream, .. }
        | Op::Compact { stream, .. }
        | Op::Truncate { stream, .. }
        | Op::Expire { stream }
        | Op::Skip { stream, .. }
        | Op::ConsumerAdd { stream, .. }
        | Op::ConsumerDelete { stream, .. }
        | Op::ConsumerNext { stream, .. }
        | Op::ConsumerAck { stream, .. } => stream,
        Op::CreateStream { name, .. } | Op::DeleteStream { name } => name,
        Op::Batch { .. } => "",
    }
}

fn is_consumer_op(op: &Op) -> bool {
    matches!(
        op,
        Op::ConsumerAdd { .. }
            | Op::ConsumerDelete { .. }
            | Op::ConsumerNext { .. }
            | Op::ConsumerAck { .. }
    )
}

/// Applies `op` to one stream at time `now` (the store's clock shows it too).
fn on_store<F: Fs>(s: &mut Stream<F>, op: Op, now: i64) -> seqstore_core::Result<Response> {
    let store: &mut Store<SubFs<F>> = &mut s.store;
    let st = store.state();
    match op {
        Op::Append {
            subject,
            headers,
            payload,
            ttl_ms,
            ..
        } => {
            // the next sequence survives purges (`last_seq` never goes back but by truncate);
            // `append_with_ttl` takes the same sequence and `max(clock, last_ts)` itself
            if ttl_ms > 0 {
                let ttl = std::time::Duration::from_millis(ttl_ms);
                return store
                    .append_with_ttl(&subject, &headers, &payload, ttl)
                    .map(Response::Seq);
            }
            let seq = st.last_seq + 1;
            let ts = now.max(st.last_ts);
            store
                .append_raw(seq, ts, &subject, &headers, &payload)
                .map(Response::Seq)
        }
        Op::Delete { seq, .. } => store.delete(seq).map(|()| Response::Removed(1)),
        Op::Purge { .. } => store.purge().map(Response::Removed),
        Op::PurgeEx {
            filter,
            up_to_seq,
            keep,
            ..
        } => store
            .purge_ex(&filter, up_to_seq, keep)
            .map(Response::Removed),
        Op::Compact { up_to, .. } => store.compact(up_to).map(Response::Removed),
        Op::Truncate { seq, .. } => store.truncate(seq).map(Response::Removed),
        Op::Expire { .. } => {
            store.tick()?;
            Ok(Response::Removed(st.msgs - store.state().msgs.min(st.msgs)))
        }
        Op::Skip { count, .. } => store.skip_many(st.last_seq + 1, count).map(Response::Seq),
        // the others are dispatched before here
        _ => Err(seqstore_core::Error::InvalidArgument(
            "not a message operation".into(),
        )),
    }
}

/// A store error that follows from the request and the replicated state alone is the
/// request's answer; any other (I/O, corruption, a poisoned store) stops the state machine.
pub(super) fn answer(r: seqstore_core::Result<Response>) -> Result<Response> {
    use seqstore_core::Error as E;
    match r {
        Ok(r) => Ok(r),
        Err(
            e @ (E::InvalidSubject { .. }
            | E::TooLarge { .. }
            | E::NotFound { .. }
            | E::LimitExceeded { .. }
            | E::InvalidArgument(_)
            | E::InvalidConfig(_)),
        ) => Ok(Response::Err(ApplyError::Refused(e.to_string()))),
        Err(e) => Err(e.into()),
    }
}

/// Stream names are directory names: 1 to 64 of `A-Z a-z 0-9 _ -`.
pub(super) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
