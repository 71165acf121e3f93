//! The consumer state machine: NATS's `consumerFileStore` rules for deliveries and acks, with
//! no I/O. The journal replays these very calls, so what a recovered store holds is what the
//! live one computed.

use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// How a consumer's messages are acknowledged (NATS `AckPolicy`); on a wire `explicit`,
/// `all`, `none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum AckPolicy {
    /// Every message is acknowledged on its own (NATS `AckExplicit`, the default).
    #[default]
    Explicit,
    /// An ack acknowledges every message delivered before it too (NATS `AckAll`).
    All,
    /// Nothing is acknowledged: a delivery is its own ack (NATS `AckNone`).
    None,
}

impl AckPolicy {
    /// The policy's byte in the journal and the checkpoint.
    pub fn code(self) -> u8 {
        match self {
            AckPolicy::Explicit => 0,
            AckPolicy::All => 1,
            AckPolicy::None => 2,
        }
    }
    /// The policy of a byte, if it names one.
    pub fn from_code(b: u8) -> Option<AckPolicy> {
        match b {
            0 => Some(AckPolicy::Explicit),
            1 => Some(AckPolicy::All),
            2 => Some(AckPolicy::None),
            _ => None,
        }
    }
    /// The name the CLI and JSON use (`explicit`, `all`, `none`).
    pub fn name(self) -> &'static str {
        match self {
            AckPolicy::Explicit => "explicit",
            AckPolicy::All => "all",
            AckPolicy::None => "none",
        }
    }
}

/// A consumer's configuration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConsumerConfig {
    /// The durable name (1 to 64 letters, digits, `-` and `_`).
    pub name: String,
    /// The ack policy (fixed at creation, as in NATS).
    pub ack_policy: AckPolicy,
    /// Deliveries after which a message is no longer pending (0: unlimited; NATS `MaxDeliver`).
    pub max_deliver: u64,
}

impl ConsumerConfig {
    /// An explicit-ack consumer without a delivery limit.
    pub fn new(name: impl Into<String>) -> Self {
        ConsumerConfig {
            name: name.into(),
            ack_policy: AckPolicy::Explicit,
            max_deliver: 0,
        }
    }

    /// Its settings without the name.
    pub fn settings(&self) -> ConsumerSettings {
        ConsumerSettings {
            ack_policy: self.ack_policy,
            max_deliver: self.max_deliver,
        }
    }
}

/// A consumer's settings without its name: what a request that names the consumer in its
/// path (the server's) or beside it (the raft log's) carries. In JSON a missing field takes
/// its default and an unknown one is refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
pub struct ConsumerSettings {
    /// The ack policy (fixed at creation, as in NATS).
    pub ack_policy: AckPolicy,
    /// Deliveries after which a message is no longer pending (0: unlimited; NATS `MaxDeliver`).
    pub max_deliver: u64,
}

impl ConsumerSettings {
    /// The configuration of the consumer `name` with these settings.
    pub fn named(self, name: impl Into<String>) -> ConsumerConfig {
        ConsumerConfig {
            name: name.into(),
            ack_policy: self.ack_policy,
            max_deliver: self.max_deliver,
        }
    }
}

/// A consumer sequence and the stream sequence it delivered (NATS `SequencePair`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SequencePair {
    /// The consumer's own delivery counter.
    pub consumer: u64,
    /// The stream sequence.
    pub stream: u64,
}

/// A message delivered and not yet acknowledged (NATS `Pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pending {
    /// The consumer sequence of its first delivery.
    pub sequence: u64,
    /// When it was last delivered (ns, the caller's clock).
    pub timestamp: i64,
}

/// A delivered message awaiting its ack, as the wire lists it: one entry of
/// [`ConsumerState::pending`] with its count from [`ConsumerState::redelivered`]. The raft
/// log's consumer info and the server's JSON both carry this type.
#[cfg(feature = "serde")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PendingAck {
    /// Its stream sequence.
    pub stream_seq: u64,
    /// The consumer sequence of its first delivery.
    pub consumer_seq: u64,
    /// When it was last delivered (ns since the epoch; in a cluster, the log's time).
    pub ts: i64,
    /// How many times it was delivered again (deliveries - 1).
    pub redelivered: u64,
}

/// A consumer's durable state (NATS `ConsumerState`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConsumerState {
    /// The last delivery.
    pub delivered: SequencePair,
    /// Everything at or below this is acknowledged.
    pub ack_floor: SequencePair,
    /// Stream sequence -> the delivery awaiting its ack.
    pub pending: BTreeMap<u64, Pending>,
    /// Stream sequence -> times it was delivered again (deliveries - 1).
    pub redelivered: BTreeMap<u64, u64>,
}

impl ConsumerState {
    /// The state of a consumer that starts at stream sequence `start` (nothing delivered).
    pub fn starting_at(start: u64) -> Self {
        let at = SequencePair {
            consumer: 0,
            stream: start.saturating_sub(1),
        };
        ConsumerState {
            delivered: at,
            ack_floor: at,
            ..ConsumerState::default()
        }
    }

    /// Records a delivery of stream sequence `sseq` as consumer sequence `dseq`, its `dc`-th
    /// (1: first delivery), at `ts`. A first delivery must move both sequences forward; a
    /// redelivery must be of a pending message, with a new consumer sequence.
    pub fn update_delivered(
        &mut self,
        cfg: &ConsumerConfig,
        dseq: u64,
        sseq: u64,
        dc: u64,
        ts: i64,
    ) -> Result<()> {
        let back = || Error::DeliveredBackwards {
            name: cfg.name.clone(),
            dseq,
            sseq,
            delivered: (self.delivered.consumer, self.delivered.stream),
        };
        if dc == 0 || dseq <= self.delivered.consumer {
            return Err(back());
        }
        if dc == 1 {
            if sseq <= self.delivered.stream {
                return Err(back());
            }
            self.delivered = SequencePair {
                consumer: dseq,
                stream: sseq,
            };
            if cfg.ack_policy == AckPolicy::None {
                self.ack_floor = self.delivered;
            } else {
                let p = Pending {
                    sequence: dseq,
                    timestamp: ts,
                };
                self.pending.insert(sseq, p);
            }
            return Ok(());
        }
        if cfg.ack_policy == AckPolicy::None {
            return Err(Error::NoAckPolicy {
                name: cfg.name.clone(),
            });
        }
        let Some(p) = self.pending.get_mut(&sseq) else {
            return Err(Error::NotPending {
                name: cfg.name.clone(),
                seq: sseq,
            });
        };
        // the original consumer sequence stays: it is what the ack floor counts by
        p.timestamp = ts;
        self.delivered.consumer = dseq;
        let r = self.redelivered.entry(sseq).or_insert(0);
        *r = (*r).max(dc - 1);
        if cfg.max_deliver > 0 && dc > cfg.max_deliver {
            // delivered for the last time: NATS stops tracking it (it will not come again);
            // the ack floor stays where it is, as in NATS's consumer store, unless nothing
            // is left pending
            self.pending.remove(&sseq);
            self.redelivered.remove(&sseq);
            self.settle();
        }
        Ok(())
    }

    /// Acknowledges stream sequence `sseq`, delivered as consumer sequence `dseq` (its first
    /// delivery's or a redelivery's). Under `All` every pending message at or below it is
    /// acknowledged with it, and the floor's consumer sequence is `dseq`, as in NATS.
    pub fn update_acks(&mut self, cfg: &ConsumerConfig, dseq: u64, sseq: u64) -> Result<()> {
        if cfg.ack_policy == AckPolicy::None {
            return Err(Error::NoAckPolicy {
                name: cfg.name.clone(),
            });
        }
        let Some(p) = self.pending.get(&sseq).copied() else {
            return Err(Error::NotPending {
                name: cfg.name.clone(),
                seq: sseq,
            });
        };
        if dseq < p.sequence || dseq > self.delivered.consumer {
            return Err(Error::NotPending {
                name: cfg.name.clone(),
                seq: sseq,
            });
        }
        // `All` puts the floor at the delivery the ack names (NATS's AckAll: a redelivery's
        // consumer sequence when that is what was acked); `Explicit` counts by the first one
        let floor_dseq = match cfg.ack_policy {
            AckPolicy::All => dseq,
            _ => p.sequence,
        };
        self.ack(cfg.ack_policy, floor_dseq, sseq);
        Ok(())
    }

    /// The ack of pending stream sequence `sseq` by NATS's rules
    /// (`consumerFileStore.UpdateAcks`), `dseq` being the delivery the floor takes: the one
    /// the ack named under `All`, else the message's first. `All`: every pending message at
    /// or below it goes and the floor is (`dseq`, `sseq`) — never below the floor's own
    /// consumer sequence — or the last delivery when nothing is left pending (NATS keeps
    /// the acked delivery there until its next purge when a redelivery is past it: a
    /// difference the differential test lists). `Explicit`: it goes; with nothing left
    /// pending the floor is the last delivery, else the floor moves only if this message was
    /// the one right above it (its consumer sequence is the floor's + 1), and then to just
    /// below the oldest pending message after it. So a gap in the consumer sequences (a
    /// message removed before it was delivered) holds the floor until everything below the
    /// next pending message is acknowledged: NATS's floor, not the highest one the pending
    /// set would allow.
    fn ack(&mut self, policy: AckPolicy, dseq: u64, sseq: u64) {
        if policy == AckPolicy::All {
            let rest = self.pending.split_off(&(sseq + 1));
            for s in std::mem::replace(&mut self.pending, rest).into_keys() {
                self.redelivered.remove(&s);
            }
            // (a redelivery acked before may have put the floor's consumer sequence past
            // this message's: the floor does not go back)
            self.ack_floor = SequencePair {
                consumer: dseq.max(self.ack_floor.consumer),
                stream: sseq,
            };
            self.settle();
            return;
        }
        self.pending.remove(&sseq);
        self.redelivered.remove(&sseq);
        if self.pending.is_empty() {
            self.ack_floor = self.delivered;
        } else if dseq == self.ack_floor.consumer + 1 {
            self.ack_floor = SequencePair {
                consumer: dseq,
                stream: sseq,
            };
            if self.delivered.consumer > dseq {
                let next = self.pending.range(sseq + 1..=self.delivered.stream).next();
                if let Some((&s, p)) = next.filter(|(_, p)| p.sequence > 0) {
                    self.ack_floor = SequencePair {
                        consumer: p.sequence - 1,
                        stream: s - 1,
                    };
                }
            }
        }
    }

    /// With nothing pending, everything delivered is acknowledged: the floor is the last
    /// delivery (what [`ConsumerState::clamp_to_stream`], and so every view of the state,
    /// shows). Run after each change that can empty the pending set, so that the state a
    /// call computes is the one the store shows and the journal replays.
    fn settle(&mut self) {
        if self.pending.is_empty() {
            self.ack_floor = self.delivered;
        }
    }

    /// What the removal of stream sequence `sseq` from the stream (delete, erase, a
    /// filtered purge, ttl expiry) does to the consumer: a pending message is acknowledged
    /// by the rules of [`ConsumerState::update_acks`] (NATS's `processTerm`: "treat like an
    /// ack"), anything else is unchanged. Returns whether it was pending.
    pub fn terminate(&mut self, policy: AckPolicy, sseq: u64) -> bool {
        let Some(p) = self.pending.get(&sseq).copied() else {
            return false;
        };
        self.ack(policy, p.sequence, sseq);
        true
    }

    /// The state as the consumer sees the stream now: [`ConsumerState::clamp_to_stream`]
    /// with the stream's purge floor + 1 as `first`, then [`ConsumerState::terminate`] of
    /// every pending message `gone` says the stream no longer holds, oldest first.
    pub fn in_line(
        &mut self,
        policy: AckPolicy,
        first: u64,
        last: u64,
        gone: impl Fn(u64) -> bool,
    ) {
        self.clamp_to_stream(policy, first, last);
        let dead: Vec<u64> = self.pending.keys().copied().filter(|&q| gone(q)).collect();
        for q in dead {
            self.terminate(policy, q);
        }
    }

    /// Brings the state in line with a stream purged or compacted up to `first - 1` (NATS's
    /// consumer `purge`, run at every purge and compact) whose last sequence is `last`.
    ///
    /// Below `first` nothing is left to deliver or ack. If the ack floor is below `first`,
    /// each pending message there is acknowledged by the ack rule (NATS's consumer store
    /// sees one `UpdateAcks` per message), and then the state moves to delivered ≥
    /// `first - 1`, ack floor `first - 1` with the highest consumer sequence removed — unless
    /// the acks already took the floor higher (NATS's store refuses that update as older
    /// than what it holds), which keeps the acks' floor. With nothing pending the floor is
    /// the last delivery.
    ///
    /// Above `last` (after a truncate) nothing was delivered: pending messages there are
    /// dropped and the delivered sequence and the ack floor move down to `last`.
    /// Idempotent, and applied to the same state with the same stream always gives the same
    /// result.
    pub fn clamp_to_stream(&mut self, policy: AckPolicy, first: u64, last: u64) {
        let floor = first.saturating_sub(1).min(last);
        if self.ack_floor.stream <= floor {
            let keep = self.pending.split_off(&(floor + 1));
            let removed = std::mem::replace(&mut self.pending, keep);
            let mut acked = self.clone();
            acked.pending.extend(removed.iter().map(|(&q, &p)| (q, p)));
            let mut consumer = self.ack_floor.consumer;
            for (&q, p) in &removed {
                acked.ack(policy, p.sequence, q);
                self.redelivered.remove(&q);
                consumer = consumer.max(p.sequence);
            }
            self.ack_floor = SequencePair {
                consumer,
                stream: floor,
            };
            self.delivered.consumer = self.delivered.consumer.max(consumer);
            self.delivered.stream = self.delivered.stream.max(floor);
            self.settle();
            if acked.ack_floor.stream > self.ack_floor.stream {
                *self = acked;
            }
        }
        if self.delivered.stream > last {
            for s in self.pending.split_off(&(last + 1)).into_keys() {
                self.redelivered.remove(&s);
            }
            self.delivered.stream = last;
            self.ack_floor.stream = self.ack_floor.stream.min(last);
        }
        self.settle();
    }

    /// Whether stream sequence `sseq` would be delivered again as a new message: it is above
    /// the last delivery. (A pending message is redelivered as itself, not as new.)
    pub fn is_new(&self, sseq: u64) -> bool {
        sseq > self.delivered.stream
    }

    /// Whether `sseq` is acknowledged: at or below the ack floor, or delivered and no longer
    /// pending.
    pub fn is_acked(&self, sseq: u64) -> bool {
        sseq <= self.ack_floor.stream
            || (sseq <= self.delivered.stream && !self.pending.contains_key(&sseq))
    }
}
