//! Group commit above openraft: concurrent writes gathered into one log entry.
//!
//! openraft 0.9 runs its engine's commands after every API message, so each `client_write`
//! becomes its own log append, and the log's fsync (which openraft awaits before anything
//! else) is paid once per proposal: a leader commits at most one entry per fsync, however many
//! clients wait. A [`Batcher`] takes the writes of any number of callers, proposes whatever
//! has queued as one [`Op::Batch`] entry (a lone write as itself), and hands each caller its
//! own response. Applying a batch is the same as applying its operations in consecutive
//! entries at the batch's `ts`, so batching changes how many fsyncs a write shares, not what
//! it does. Up to [`BatchLimits::in_flight`] proposals are outstanding at once, so the next
//! batch is written while the previous one replicates.

use crate::types::{LogId, Op, Request, Response, TypeConfig, MAX_REQUEST_BYTES};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, Raft};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// How much one batch takes, and how many are outstanding.
#[derive(Clone, Copy, Debug)]
pub struct BatchLimits {
    /// Operations per entry (default 512).
    pub max_ops: usize,
    /// Encoded bytes per entry (default 1 MiB; a larger single write goes alone, up to
    /// [`MAX_REQUEST_BYTES`]).
    pub max_bytes: usize,
    /// Proposals outstanding at once (default 4).
    pub in_flight: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            max_ops: 512,
            max_bytes: 1 << 20,
            in_flight: 4,
        }
    }
}

/// A committed and applied write.
#[derive(Clone, Debug)]
pub struct Written {
    /// What applying the operation returned (a refusal is a `Response::Err`, not an error).
    pub response: Response,
    /// The log entry that carried it (shared by every write of its batch).
    pub log_id: LogId,
}

/// Why a write was not committed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The operation encodes to more than [`MAX_REQUEST_BYTES`]; nothing was proposed.
    #[error("the request takes {size} bytes in the log, more than {max}")]
    TooLarge {
        /// Its encoded size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// This node is not the leader: the write was not committed (not proposed, or its entry
    /// was removed by the next leader's log), so it can be sent to the leader.
    #[error("not the leader (the leader: {leader:?})")]
    NotLeader {
        /// The leader this node knows, if any.
        leader: Option<u64>,
        /// Its address.
        node: Option<BasicNode>,
    },
    /// Raft failed (stopped, or lost its leadership with the entry in flight): the write may
    /// or may not have been committed.
    #[error("raft: {0}")]
    Raft(String),
    /// The batcher has stopped.
    #[error("the batcher has stopped")]
    Closed,
}

type Reply = oneshot::Sender<Result<Written, WriteError>>;

struct Pending {
    op: Op,
    size: usize,
    reply: Reply,
}

/// Gathers writes into batches and proposes them (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct Batcher {
    tx: mpsc::UnboundedSender<Pending>,
}

/// The leader's clock for a proposal's `ts`, ns since the epoch.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock, ns since the epoch.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    })
}

impl Batcher {
    /// Starts the batching task on the current tokio runtime.
    pub fn start(raft: Raft<TypeConfig>, limits: BatchLimits, clock: Clock) -> Batcher {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(raft, limits, clock, rx));
        Batcher { tx }
    }

    /// Proposes `op` (with whatever else is waiting) and returns its own response once the
    /// entry is committed and applied.
    pub async fn write(&self, op: Op) -> Result<Written, WriteError> {
        let mut queued = self.write_all(vec![op])?;
        queued.pop().ok_or(WriteError::Closed)?.await
    }

    /// Queues `ops` in their order, behind whatever is waiting, and returns one future per
    /// operation for its response. All or nothing: if any operation is larger than
    /// [`MAX_REQUEST_BYTES`], none is queued. Consecutive operations share entries as
    /// [`Batcher::write`]s do; the futures may be awaited in any order.
    pub fn write_all(&self, ops: Vec<Op>) -> Result<Vec<Queued>, WriteError> {
        let mut sized = Vec::with_capacity(ops.len());
        for op in ops {
            let req = Request { ts: 0, op };
            let size = req.encoded_len();
            if size > MAX_REQUEST_BYTES {
                return Err(WriteError::TooLarge {
                    size,
                    max: MAX_REQUEST_BYTES,
                });
            }
            sized.push((req.op, size));
        }
        let mut queued = Vec::with_capacity(sized.len());
        for (op, size) in sized {
            let (reply, rx) = oneshot::channel();
            (self.tx.send(Pending { op, size, reply })).map_err(|_| WriteError::Closed)?;
            queued.push(Queued(rx));
        }
        Ok(queued)
    }
}

/// One queued write's response (see [`Batcher::write_all`]).
#[derive(Debug)]
pub struct Queued(oneshot::Receiver<Result<Written, WriteError>>);

impl std::future::Future for Queued {
    type Output = Result<Written, WriteError>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.map_err(|_| WriteError::Closed)?)
    }
}

/// The batching loop: waits for a write, takes every write queued behind it (within the
/// limits), proposes them as one entry on a task of its own.
async fn run(
    raft: Raft<TypeConfig>,
    limits: BatchLimits,
    clock: Clock,
    mut rx: mpsc::UnboundedReceiver<Pending>,
) {
    let slots = Arc::new(Semaphore::new(limits.in_flight.max(1)));
    let mut carry: Option<Pending> = None;
    loop {
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let first = match carry.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        let (mut batch, mut bytes) = (vec![first], 0);
        bytes += batch[0].size;
        while batch.len() < limits.max_ops {
            let Ok(p) = rx.try_recv() else { break };
            if bytes + p.size > limits.max_bytes.min(MAX_REQUEST_BYTES) {
                carry = Some(p);
                break;
            }
            bytes += p.size;
            batch.push(p);
        }
        let (raft, ts) = (raft.clone(), clock());
        tokio::spawn(async move {
            propose(&raft, ts, batch).await;
            drop(permit);
        });
    }
}

/// Proposes one entry for `batch` and answers every write in it.
async fn propose(raft: &Raft<TypeConfig>, ts: i64, batch: Vec<Pending>) {
    let (mut ops, replies): (Vec<Op>, Vec<Reply>) =
        batch.into_iter().map(|p| (p.op, p.reply)).unzip();
    let single = ops.len() == 1;
    let op = match ops.pop() {
        Some(op) if single => op,
        last => {
            ops.extend(last);
            Op::Batch { ops }
        }
    };
    match raft.client_write(Request { ts, op }).await {
        Ok(r) => {
            let log_id = r.log_id;
            let responses = match (single, r.data) {
                (true, data) => vec![data],
                (false, Response::Batch(v)) if v.len() == replies.len() => v,
                (false, other) => {
                    let e = WriteError::Raft(format!("a batch answered {other:?}"));
                    return fail(replies, e);
                }
            };
            for (reply, response) in replies.into_iter().zip(responses) {
                let _ = reply.send(Ok(Written { response, log_id }));
            }
        }
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
            let e = WriteError::NotLeader {
                leader: f.leader_id,
                node: f.leader_node,
            };
            fail(replies, e)
        }
        Err(e) => fail(replies, WriteError::Raft(e.to_string())),
    }
}

fn fail(replies: Vec<Reply>, e: WriteError) {
    for reply in replies {
        let _ = reply.send(Err(e.clone()));
    }
}
