//! seqstore against the real nats-server 2.15.1, side by side.
//!
//! A seeded list of operations ([`ops::generate`]) runs on a JetStream file stream of a
//! nats-server on a loopback port and on a seqstore `Store` on a temp directory (host-fs).
//! After every operation the stream states are compared (messages, bytes, first and last
//! sequence, deleted count, subject count) and the durable pull consumer's info (delivered,
//! ack floor, ack-pending count, pending count; the consumer acks explicitly for even seeds
//! and with `AckAll` for odd ones, and naks lead to redeliveries, [`ack_policy_of`]); the
//! operation's own answer is compared too
//! (publish sequence, delete/erase outcome, purged count, fetched sequences, every read).
//! A failure names the operation and what differed; [`shrink`] cuts the list down to a short
//! one that still fails.
//!
//! What is compared and how (every departure is one of [`Exception`], none a loosened
//! comparison):
//! - **bytes**: NATS counts a message as 30 bytes + subject + payload (its record: 22-byte
//!   header, 8-byte hash), seqstore 36 + subject + payload (its record); so NATS's bytes are
//!   seqstore's minus 6 a message, compared exactly that way.
//! - **timestamps**: seqstore's clock is set to the time NATS stamped each message with, so
//!   the message-at-a-time read (`start_time`, `seq_from_time`) is compared exactly.
//! - **consumer terminations**: NATS acknowledges a removed pending message in a goroutine
//!   (`processTerm`), so a consumer info right after a removal may not show it yet: the
//!   consumer comparison is retried for up to a second before it counts as a difference.

pub mod ops;
pub mod server;

use anyhow::{anyhow, bail, Context as _, Result};
use async_nats::jetstream::{self, consumer::PullConsumer};
use base64::Engine as _;
use futures_util::StreamExt as _;
use ops::{pick_seq, Op, PurgeForm, FILTERS, SUBJECTS};
use seqstore_core::{AckPolicy, ConsumerConfig, ManualClock, Store};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The consumer both sides run.
const CONSUMER: &str = "w";

/// A documented difference the comparison takes into account (docs/NATS-DIFFERENCES.md);
/// counted per run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exception {
    /// A purge with a filter removed a pending message above the new first sequence while
    /// the consumer's ack floor was below that first sequence: NATS's consumer `purge` then
    /// sets the ack floor to (the highest removed consumer sequence, first - 1), a pair of
    /// sequences of different messages, and its consumer store ignores every later ack
    /// below that consumer sequence. seqstore acknowledges each removed message by the ack
    /// rule instead (as NATS does for a delete). The ack floor is not compared at that step,
    /// and the consumer is recreated on both sides.
    FilteredPurgeAckFloor,
    /// A purge with a filter removed two or more messages, one of them pending, while the
    /// consumer's ack floor was at or past the new first sequence - 1: NATS's consumer
    /// `purge` does nothing then and, with more than one message purged, no per-message
    /// termination runs either, so the removed message stays pending in NATS for good.
    /// seqstore acknowledges it (as NATS does for a delete, or for a purge of one message).
    /// Neither the ack floor nor the ack-pending count is compared at that step, and the
    /// consumer is recreated on both sides.
    FilteredPurgeLeavesPending,
    /// Under `AckAll`, a purge with a filter removed a pending message while older ones were
    /// pending and stay in the stream: NATS's consumer `purge` takes the removed message out
    /// of pending and moves the ack floor to it, but leaves the older ones pending (below its
    /// own floor), where a delete of that message acknowledges them all by the `AckAll`
    /// rule (processTerm, checked here too). seqstore treats the purge's removal as a
    /// delete's. Neither the ack floor nor the ack-pending count is compared at that step,
    /// and the consumer is recreated on both sides.
    FilteredPurgeAckAllLeavesOlder,
    /// Under `AckAll`, an ack of a pending message named a consumer sequence at or below the
    /// ack floor's, or a removal took such a message: an ack of a redelivery put the floor's
    /// consumer sequence past it (deliver 1 and 2, nak 1, redeliver it as 3, ack that: floor
    /// (3, 1), 2 pending, delivered as 2). NATS's consumer ignores an ack at or below its
    /// floor's consumer sequence (a removal's termination acks with the message's first
    /// one), so the message stays pending in NATS: an ack of it is lost, a removed one
    /// pends for good. seqstore acknowledges it (floor (3, 2)). Neither the ack floor nor
    /// the ack-pending count is compared at that step, and the consumer is recreated on both
    /// sides.
    AckAllBelowFloor,
    /// Under `AckAll`, nothing pending, and a redelivery past the delivery the last ack
    /// named (or past a removed message's first delivery): NATS keeps its floor's consumer
    /// sequence at that delivery until its next purge (deliver 1, nak it, redeliver it as 2,
    /// delete it: floor (1, 1), delivered (2, 1)); seqstore's floor is the last delivery
    /// whenever nothing is pending (2, 1). The same stream sequence, nothing pending on
    /// either side. Compared: everything else; NATS's floor consumer sequence, lower than
    /// seqstore's, is taken as seqstore's, and the consumer is recreated on both sides (the
    /// floors stay apart until the next ack).
    AckAllFloorAtLastAck,
    /// A purge or compact acknowledged a pending message below the new first sequence and
    /// those acks took the ack floor past the purge point (the consumer case: deliver 1-3,
    /// ack 2, compact 2 gives floor 2). NATS keeps the consumer's own ack floor beside its
    /// store's, and only the store's moved; the next purge writes the consumer's lower one
    /// back over it (e.g. floor (1, 2) where 2 was delivered as consumer sequence 2).
    /// seqstore has one floor. The step itself is compared in full; the consumer is then
    /// recreated on both sides.
    PurgeFloorsApart,
    /// A removal (delete, erase, filtered purge) took a pending message, and a purge or
    /// compact covered it before the consumer's next fetch or ack. NATS acknowledged it at
    /// the removal (its goroutine ran long before the purge) and then purged the rest;
    /// seqstore records a removal's acknowledgement at the consumer's next call, which the
    /// purge overtook, so it counts the message among those the purge removed: the ack floor
    /// may take the higher consumer sequence (e.g. (2, 2) where NATS shows (1, 2)). The
    /// ack floor is not compared at that step, and the consumer is recreated on both sides.
    PurgeOvertakesRemovalAck,
    /// NATS's consumer moves its own next-to-deliver sequence past removed messages when it
    /// looks for the next one, and writes its delivered and ack-floor stream sequences from
    /// that into its store (a purge's update, the floor when nothing is pending) — which
    /// consumer info reports: e.g. delivered 8 where 8 was deleted after 7 was delivered, or
    /// a floor of 3 where 3 was purged and 2 acked. seqstore keeps the last message delivered
    /// and the last acked. The two name the same position: no message lies between them.
    /// Compared: the consumer sequences agree, NATS's stream sequence is higher and every
    /// stream sequence between the two is removed in seqstore; it is then taken as
    /// seqstore's.
    DeliveredPastRemoved,
    /// A stream that never had a message, purged: NATS reports first sequence 1 (its purge
    /// sets first = last + 1), seqstore 0 (what NATS itself reports for a stream that never
    /// had a message; seqstore keeps no record that tells the two apart across a restart).
    /// Compared: the last sequence is 0, no messages, NATS's first is 1 and seqstore's 0.
    FirstOfPurgedEmptyStream,
    /// `last_by_subj` with the filter `>`: NATS loads the message at its last sequence
    /// (`LoadLastMsg` takes the stream's last sequence for `>`), which says "no message" when
    /// that one was deleted although others match; seqstore answers the newest stored
    /// message. Compared: NATS has no message at its last sequence, and seqstore's answer is
    /// the highest sequence NATS does have (found by NATS's gets, downwards).
    LastOfFullWildcard,
    /// After a compact onto deleted messages at the end of the stream, NATS reports as the
    /// first sequence one of a removed message (and counts the sequences from there to the
    /// real first as deleted), and from there its store goes wrong: its first sequence can
    /// go back, and a later compact removes messages at and above its own sequence (found by
    /// this test: compact 5 over 2, 3 with 4, 5 deleted reports first 2; then, after
    /// publishing 6 and 7, deleting 6 and publishing 8 and 9, compact 6 removes 7, 8 and 9).
    /// seqstore reports the first stored message (`last + 1` when none). Compared at that
    /// step: NATS has no message from its first sequence up to seqstore's, its deleted count
    /// is seqstore's plus that gap (with messages left), and everything else in the stream
    /// state agrees; the consumer is not compared (NATS moves it to its wrong first), and
    /// both sides start over with a new stream and a new store for the rest of the
    /// operations, since NATS's store cannot be compared any more.
    FirstSeqOfRemovedMessage,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Stats {
    /// Operations run.
    pub ops: usize,
    /// How often each exception applied.
    pub exceptions: BTreeMap<Exception, u64>,
    /// Operations whose answer was not trivial (a message found, something removed, ...).
    pub non_trivial: usize,
}

/// A difference: the operation at index `at` and what differed.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The index of the operation after which the sides differed.
    pub at: usize,
    /// What differed.
    pub what: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "after operation {}: {}", self.at, self.what)
    }
}

/// A nats-server and a client connected to it, for any number of runs.
pub struct Harness {
    // dropped before the runtime it runs on, and before the server
    js: jetstream::Context,
    rt: tokio::runtime::Runtime,
    server: server::Server,
    runs: u64,
    /// The consumers' ack policy in the runs from here on (`Explicit` or `All`).
    pub ack: AckPolicy,
}

impl Harness {
    /// Starts `bin` and connects.
    pub fn start(bin: &std::path::Path) -> Result<Harness> {
        let server = server::Server::start(bin)?;
        let (rt, js) = server::connect(&server.url())?;
        Ok(Harness {
            js,
            rt,
            server,
            runs: 0,
            ack: AckPolicy::Explicit,
        })
    }

    /// The end of the server's log.
    pub fn server_log(&self) -> String {
        self.server.log_tail()
    }

    /// Runs `ops` on a fresh stream and a fresh store. `Ok(Err(_))`: the sides differed;
    /// `Err(_)`: the harness itself failed (server gone, I/O).
    pub fn run(&mut self, ops: &[Op]) -> Result<std::result::Result<Stats, Failure>> {
        self.runs += 1;
        let name = format!("P{}", self.runs);
        let (js, ack) = (self.js.clone(), self.ack);
        self.rt.block_on(async move {
            let mut run = Run::new(js, name, ack).await?;
            let r = run.all(ops).await;
            run.finish().await?;
            r
        })
    }
}

/// Runs `ops` and, if they fail, shrinks them: chunks and then single operations are left out
/// while the rest still fails (at most `budget` runs). Returns the shortest failing list
/// found and its failure.
pub fn shrink(h: &mut Harness, ops: &[Op], budget: usize) -> Result<Option<(Vec<Op>, Failure)>> {
    let Err(mut fail) = h.run(ops)? else {
        return Ok(None);
    };
    let mut cur: Vec<Op> = ops[..=fail.at.min(ops.len() - 1)].to_vec();
    let mut runs = 0;
    let mut chunk = cur.len().div_ceil(2);
    while chunk >= 1 && runs < budget {
        let mut i = 0;
        let mut cut_any = false;
        while i < cur.len() && runs < budget {
            let mut cand = cur.clone();
            cand.drain(i..(i + chunk).min(cand.len()));
            runs += 1;
            if let Err(f) = h.run(&cand)? {
                cand.truncate(f.at + 1);
                cur = cand;
                fail = f;
                cut_any = true;
            } else {
                i += chunk;
            }
        }
        if !cut_any {
            if chunk == 1 {
                break;
            }
            chunk = chunk.div_ceil(2);
        }
    }
    Ok(Some((cur, fail)))
}

/// The state both sides report, in NATS's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StreamView {
    msgs: u64,
    bytes: u64,
    first: u64,
    last: u64,
    deleted: u64,
    subjects: u64,
}

/// A consumer's info, in NATS's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ConsumerView {
    delivered: (u64, u64),
    ack_floor: (u64, u64),
    ack_pending: u64,
    pending: u64,
}

/// One run: a NATS stream and its consumer, a seqstore store and its consumer.
struct Run {
    /// The consumer's ack policy.
    ack: AckPolicy,
    js: jetstream::Context,
    name: String,
    consumer: PullConsumer,
    /// The NATS messages delivered and not acked, to ack them.
    delivered: BTreeMap<u64, jetstream::Message>,
    store: Store<seqstore_fs::HostFs>,
    clock: ManualClock,
    _dir: tempfile::TempDir,
    stats: Stats,
    /// The time NATS stamped the last message with (ns).
    last_ts: i64,
    /// Pending messages removed since the consumer's last fetch, ack or recreation.
    unrecorded: std::collections::BTreeSet<u64>,
    /// The messages nakked and not delivered again yet, in the order of their naks: NATS's
    /// redelivery queue, which a fetch serves before new messages. Every purge and compact
    /// empties it: NATS's consumer `purge` keeps only the entries at or above its next
    /// sequence to deliver, which no delivered message is (a nakked message left pending
    /// comes again only after the ack wait). What the client delivers is the client's
    /// choice; seqstore keeps no redelivery queue, so the harness follows NATS's.
    nakked: Vec<u64>,
    /// The last operation was an `AckAll` ack naming a consumer sequence at or below the
    /// floor's (see [`Exception::AckAllBelowFloor`]).
    acked_below_floor: bool,
    /// The last comparison took NATS's floor as seqstore's
    /// ([`Exception::AckAllFloorAtLastAck`]): the consumers are recreated.
    floors_apart: bool,
}

fn diff(at: usize, what: String) -> std::result::Result<Stats, Failure> {
    Err(Failure { at, what })
}

impl Run {
    async fn new(js: jetstream::Context, name: String, ack: AckPolicy) -> Result<Run> {
        js.create_stream(jetstream::stream::Config {
            name: name.clone(),
            subjects: vec!["orders.>".into(), "audit".into(), "a.>".into()],
            storage: jetstream::stream::StorageType::File,
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow!("create stream {name}: {e}"))?;
        let consumer = add_nats_consumer(&js, &name, ack).await?;
        let dir = tempfile::tempdir()?;
        let fs = seqstore_fs::HostFs::create(dir.path())?;
        let clock = ManualClock::new(1);
        let mut store = Store::builder(fs)
            .config(seqstore_core::Config::default())
            .clock(clock.clone())
            .open()?;
        store.consumer_add(&consumer_cfg(ack))?;
        Ok(Run {
            ack,
            js,
            name,
            consumer,
            delivered: BTreeMap::new(),
            store,
            clock,
            _dir: dir,
            stats: Stats::default(),
            last_ts: 1,
            unrecorded: Default::default(),
            nakked: Vec::new(),
            acked_below_floor: false,
            floors_apart: false,
        })
    }

    /// A new stream and a new store in place of these, for the rest of the operations.
    async fn restart(&mut self) -> Result<()> {
        self.finish().await?;
        let name = format!("{}_", self.name);
        let stats = std::mem::take(&mut self.stats);
        *self = Run::new(self.js.clone(), name, self.ack).await?;
        self.stats = stats;
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        self.delivered.clear();
        self.js
            .delete_stream(&self.name)
            .await
            .map_err(|e| anyhow!("delete stream {}: {e}", self.name))?;
        Ok(())
    }

    async fn all(&mut self, ops: &[Op]) -> Result<std::result::Result<Stats, Failure>> {
        for (at, op) in ops.iter().enumerate() {
            let before = self.store.consumer_state(CONSUMER)?;
            let msgs_before = self.store.state().msgs;
            if let Err(what) = self.one(*op).await? {
                return Ok(diff(at, format!("{op}: {what}")));
            }
            self.stats.ops += 1;
            let stream_exception = match self.compare_stream().await? {
                Ok(e) => e,
                Err(what) => return Ok(diff(at, format!("{op}: stream: {what}"))),
            };
            // a filtered purge that removed a pending message above the new first sequence
            let filtered = matches!(
                op,
                Op::Purge(
                    PurgeForm::Filter(..) | PurgeForm::FilterKeep(..) | PurgeForm::FilterSeq(..)
                )
            );
            let first = self.store.state().first_seq;
            let after = self.store.consumer_state(CONSUMER)?;
            let removed_pending = before
                .pending
                .keys()
                .any(|q| *q >= first && !after.pending.contains_key(q));
            let purged = msgs_before.saturating_sub(self.store.state().msgs);
            let purge = matches!(op, Op::Purge(_) | Op::Compact(_));
            let point = first.saturating_sub(1);
            let overtaken = purge && self.unrecorded.iter().any(|&q| q <= point);
            if matches!(op, Op::Fetch(_) | Op::Ack(_) | Op::Recreate) {
                self.unrecorded.clear();
            } else if !purge || filtered {
                self.unrecorded.extend(
                    before
                        .pending
                        .keys()
                        .filter(|q| !after.pending.contains_key(q)),
                );
            }
            if let Some((e, _)) = stream_exception {
                // NATS's store is wrong from here (see the exception): start over
                if e == Exception::FirstSeqOfRemovedMessage {
                    self.restart().await?;
                    continue;
                }
            }
            // (read only where it decides: a filtered purge that removed a pending message)
            let older_left = filtered
                && removed_pending
                && self.ack == AckPolicy::All
                && self.removed_above_live(&before)?;
            let below_floor = std::mem::take(&mut self.acked_below_floor)
                || (self.ack == AckPolicy::All && self.removed_below_floor(&before)?);
            let exception = match filtered && removed_pending {
                _ if below_floor => Some(Exception::AckAllBelowFloor),
                true if older_left => Some(Exception::FilteredPurgeAckAllLeavesOlder),
                true if before.ack_floor.stream < first => Some(Exception::FilteredPurgeAckFloor),
                true if purged >= 2 => Some(Exception::FilteredPurgeLeavesPending),
                _ if overtaken => Some(Exception::PurgeOvertakesRemovalAck),
                _ if purge
                    && before.ack_floor.stream <= point
                    && before.pending.keys().any(|&q| q <= point)
                    && after.ack_floor.stream > point =>
                {
                    Some(Exception::PurgeFloorsApart)
                }
                _ => None,
            };
            if let Err(what) = self.compare_consumer(exception).await? {
                return Ok(diff(at, format!("{op}: consumer: {what}")));
            }
            if let Some(e) = exception {
                *self.stats.exceptions.entry(e).or_default() += 1;
                self.recreate().await?;
            } else if std::mem::take(&mut self.floors_apart) {
                self.recreate().await?;
            }
        }
        Ok(Ok(std::mem::take(&mut self.stats)))
    }

    /// Whether a message pending in `before` is gone from the stream while an older one
    /// pending then is still in it.
    fn removed_above_live(&mut self, before: &seqstore_core::ConsumerState) -> Result<bool> {
        let mut live_below = false;
        for &q in before.pending.keys() {
            match self.seq_get(q)? {
                Some(_) => live_below = true,
                None if live_below => return Ok(true),
                None => {}
            }
        }
        Ok(false)
    }

    /// Whether a message pending in `before` with a first consumer sequence at or below the
    /// floor's is gone from the stream.
    fn removed_below_floor(&mut self, before: &seqstore_core::ConsumerState) -> Result<bool> {
        for (&q, p) in &before.pending {
            if p.sequence <= before.ack_floor.consumer && self.seq_get(q)?.is_none() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn seq_state(&self) -> StreamView {
        let s = self.store.state();
        StreamView {
            msgs: s.msgs,
            bytes: s.bytes - 6 * s.msgs,
            first: s.first_seq,
            last: s.last_seq,
            deleted: s.num_deleted,
            subjects: s.num_subjects,
        }
    }

    async fn api(&self, subject: String, body: Value) -> Result<Value> {
        self.js
            .request(subject.clone(), &body)
            .await
            .map_err(|e| anyhow!("{subject} {body}: {e}"))
    }

    async fn nats_state(&self) -> Result<StreamView> {
        let v = self
            .api(format!("STREAM.INFO.{}", self.name), json!({}))
            .await?;
        let st = &v["state"];
        let n = |k: &str| st[k].as_u64().unwrap_or(0);
        Ok(StreamView {
            msgs: n("messages"),
            bytes: n("bytes"),
            first: n("first_seq"),
            last: n("last_seq"),
            deleted: n("num_deleted"),
            subjects: n("num_subjects"),
        })
    }

    /// The stream states, equal or explained by an exception (returned, with NATS's first
    /// sequence).
    async fn compare_stream(
        &mut self,
    ) -> Result<std::result::Result<Option<(Exception, u64)>, String>> {
        let (n, s) = (self.nats_state().await?, self.seq_state());
        if n == s {
            return Ok(Ok(None));
        }
        if n.last == 0
            && n.msgs == 0
            && n.first == 1
            && s.first == 0
            && n == (StreamView { first: 1, ..s })
        {
            let e = Exception::FirstOfPurgedEmptyStream;
            *self.stats.exceptions.entry(e).or_default() += 1;
            return Ok(Ok(Some((e, n.first))));
        }
        if n.first < s.first && n.msgs == s.msgs {
            // NATS counts the sequences from its first to seqstore's as deleted
            let gap = s.first - n.first;
            let only_first = StreamView {
                first: s.first,
                deleted: match n.msgs {
                    0 => s.deleted,
                    _ => n.deleted.saturating_sub(gap),
                },
                ..n
            };
            let mut none_below = true;
            for q in n.first..s.first.min(n.first + 1000) {
                none_below &= self.nats_get(q).await?.is_none();
            }
            if only_first == s && none_below {
                let e = Exception::FirstSeqOfRemovedMessage;
                *self.stats.exceptions.entry(e).or_default() += 1;
                return Ok(Ok(Some((e, n.first))));
            }
        }
        Ok(Err(format!("nats {n:?}\n  seqstore {s:?}")))
    }

    fn seq_consumer(&mut self) -> Result<ConsumerView> {
        let st = self.store.consumer_state(CONSUMER)?;
        let (pending, _) = self
            .store
            .num_pending(st.delivered.stream + 1, ">", false)?;
        Ok(ConsumerView {
            delivered: (st.delivered.consumer, st.delivered.stream),
            ack_floor: (st.ack_floor.consumer, st.ack_floor.stream),
            ack_pending: st.pending.len() as u64,
            pending,
        })
    }

    async fn nats_consumer(&mut self) -> Result<ConsumerView> {
        let i = self
            .consumer
            .info()
            .await
            .map_err(|e| anyhow!("consumer info: {e}"))?;
        Ok(ConsumerView {
            delivered: (i.delivered.consumer_sequence, i.delivered.stream_sequence),
            ack_floor: (i.ack_floor.consumer_sequence, i.ack_floor.stream_sequence),
            ack_pending: i.num_ack_pending as u64,
            pending: i.num_pending,
        })
    }

    /// The consumers' infos, retried for up to a second (NATS applies a removal to its
    /// consumers in a goroutine); under an exception without what it names.
    async fn compare_consumer(
        &mut self,
        exception: Option<Exception>,
    ) -> Result<std::result::Result<(), String>> {
        let s = self.seq_consumer()?;
        let mut n = self.nats_consumer().await?;
        for _ in 0..50 {
            for (np, sp) in [
                (&mut n.delivered, s.delivered),
                (&mut n.ack_floor, s.ack_floor),
            ] {
                if np.0 == sp.0 && np.1 > sp.1 {
                    let mut removed = true;
                    for q in sp.1 + 1..=np.1.min(sp.1 + 1000) {
                        removed &= self.seq_get(q)?.is_none();
                    }
                    if removed {
                        *self
                            .stats
                            .exceptions
                            .entry(Exception::DeliveredPastRemoved)
                            .or_default() += 1;
                        np.1 = sp.1;
                    }
                }
            }
            if self.ack == AckPolicy::All
                && s.ack_pending == 0
                && n.ack_pending == 0
                && n.ack_floor.1 == s.ack_floor.1
                && n.ack_floor.0 < s.ack_floor.0
            {
                *self
                    .stats
                    .exceptions
                    .entry(Exception::AckAllFloorAtLastAck)
                    .or_default() += 1;
                n.ack_floor.0 = s.ack_floor.0;
                self.floors_apart = true;
            }
            let same = match exception {
                None
                | Some(Exception::FirstOfPurgedEmptyStream)
                | Some(Exception::DeliveredPastRemoved)
                | Some(Exception::AckAllFloorAtLastAck)
                | Some(Exception::LastOfFullWildcard)
                | Some(Exception::PurgeFloorsApart)
                | Some(Exception::FirstSeqOfRemovedMessage) => n == s,
                Some(Exception::FilteredPurgeAckFloor)
                | Some(Exception::PurgeOvertakesRemovalAck) => {
                    ConsumerView {
                        ack_floor: s.ack_floor,
                        ..n
                    } == s
                }
                Some(Exception::FilteredPurgeLeavesPending)
                | Some(Exception::FilteredPurgeAckAllLeavesOlder)
                | Some(Exception::AckAllBelowFloor) => {
                    ConsumerView {
                        ack_floor: s.ack_floor,
                        ack_pending: s.ack_pending,
                        ..n
                    } == s
                }
            };
            if same {
                return Ok(Ok(()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            n = self.nats_consumer().await?;
        }
        Ok(Err(format!("nats {n:?}\n  seqstore {s:?}")))
    }

    async fn recreate(&mut self) -> Result<()> {
        self.delivered.clear();
        self.unrecorded.clear();
        self.nakked.clear();
        self.js
            .delete_consumer_from_stream(CONSUMER, &self.name)
            .await
            .map_err(|e| anyhow!("delete consumer: {e}"))?;
        self.consumer = add_nats_consumer(&self.js, &self.name, self.ack).await?;
        self.store.consumer_delete(CONSUMER)?;
        self.store.consumer_add(&consumer_cfg(self.ack))?;
        Ok(())
    }

    /// A message of NATS's: `(seq, subject, payload, time)` or `None` (no such message).
    async fn nats_msg(&self, body: Value) -> Result<Option<(u64, String, Vec<u8>, i64)>> {
        let v = self
            .api(format!("STREAM.MSG.GET.{}", self.name), body)
            .await?;
        if v["error"]["code"].as_u64() == Some(404) {
            return Ok(None);
        }
        let m = &v["message"];
        let (Some(seq), Some(subject)) = (m["seq"].as_u64(), m["subject"].as_str()) else {
            bail!("message get: {v}");
        };
        let data = base64::engine::general_purpose::STANDARD
            .decode(m["data"].as_str().unwrap_or(""))
            .context("message data")?;
        let t = time::OffsetDateTime::parse(
            m["time"].as_str().unwrap_or(""),
            &time::format_description::well_known::Rfc3339,
        )
        .context("message time")?;
        Ok(Some((
            seq,
            subject.to_string(),
            data,
            t.unix_timestamp_nanos() as i64,
        )))
    }

    async fn nats_get(&self, seq: u64) -> Result<Option<(u64, String, Vec<u8>)>> {
        let m = self.nats_msg(json!({ "seq": seq })).await?;
        Ok(m.map(|(q, s, d, _)| (q, s, d)))
    }

    fn seq_get(&mut self, seq: u64) -> Result<Option<(u64, String, Vec<u8>)>> {
        match self.store.get(seq) {
            Ok(m) => Ok(Some((m.seq, m.subject, m.payload))),
            Err(seqstore_core::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn seqs(&self) -> (u64, u64) {
        let s = self.store.state();
        (s.first_seq, s.last_seq)
    }

    /// The live sequences (seqstore's; compared with NATS's by the content check).
    fn live(&mut self) -> Result<Vec<u64>> {
        let mut v = Vec::new();
        let mut from = 0;
        while let Some(m) = self.store.next_matching(">", from)? {
            v.push(m.seq);
            from = m.seq + 1;
        }
        Ok(v)
    }

    /// One operation on both sides; `Ok(Err(_))`: their answers differ.
    async fn one(&mut self, op: Op) -> Result<std::result::Result<(), String>> {
        let (first, last) = self.seqs();
        let same = |what: &str, n: String, s: String| match n == s {
            true => Ok(()),
            false => Err(format!("{what}: nats {n}, seqstore {s}")),
        };
        Ok(match op {
            Op::Publish { subject, len } => {
                let subject = SUBJECTS[subject as usize % SUBJECTS.len()];
                let payload: Vec<u8> = (0..len).map(|i| i.wrapping_mul(31) ^ len).collect();
                let ack = self
                    .js
                    .publish(subject, bytes::Bytes::from(payload.clone()))
                    .await
                    .map_err(|e| anyhow!("publish: {e}"))?
                    .await
                    .map_err(|e| anyhow!("publish ack: {e}"))?;
                let Some((_, _, _, ts)) = self.nats_msg(json!({ "seq": ack.sequence })).await?
                else {
                    bail!("published message {} not found", ack.sequence);
                };
                // seqstore stamps max(clock, last): the same time as NATS's
                self.clock.set(ts);
                self.last_ts = ts;
                let seq = self.store.append(subject, b"", &payload)?;
                same("sequence", ack.sequence.to_string(), seq.to_string())
            }
            Op::Delete(k) | Op::Erase(k) => {
                let live = self.live()?;
                let seq = match live.is_empty() || k % 8 == 7 {
                    true => pick_seq(k, first, last),
                    false => live[k as usize % live.len()],
                };
                let erase = matches!(op, Op::Erase(_));
                let body = match erase {
                    true => json!({ "seq": seq }),
                    false => json!({ "seq": seq, "no_erase": true }),
                };
                let v = self
                    .api(format!("STREAM.MSG.DELETE.{}", self.name), body)
                    .await?;
                let n = v["success"].as_bool() == Some(true);
                let s = match erase {
                    true => self.store.erase(seq),
                    false => self.store.delete(seq),
                };
                let s = match s {
                    Ok(()) => true,
                    Err(seqstore_core::Error::NotFound { .. }) => false,
                    Err(e) => return Err(e.into()),
                };
                self.stats.non_trivial += s as usize;
                same(&format!("removed {seq}"), n.to_string(), s.to_string())
            }
            Op::Purge(form) => {
                self.nakked.clear();
                let f = |i: u8| FILTERS[i as usize % FILTERS.len()];
                let s = |k: u16| pick_seq(k, first, last);
                let (body, filter, up_to, keep) = match form {
                    PurgeForm::All => (json!({}), "", 0, 0),
                    PurgeForm::Filter(i) => (json!({ "filter": f(i) }), f(i), 0, 0),
                    PurgeForm::Seq(k) => (json!({ "seq": s(k) }), "", s(k), 0),
                    PurgeForm::Keep(n) => (json!({ "keep": n }), "", 0, n as u64),
                    PurgeForm::FilterKeep(i, n) => {
                        (json!({ "filter": f(i), "keep": n }), f(i), 0, n as u64)
                    }
                    PurgeForm::FilterSeq(i, k) => {
                        (json!({ "filter": f(i), "seq": s(k) }), f(i), s(k), 0)
                    }
                };
                let v = self
                    .api(format!("STREAM.PURGE.{}", self.name), body.clone())
                    .await?;
                let Some(n) = v["purged"].as_u64().or(v["success"].as_bool().map(|_| 0)) else {
                    bail!("purge {body}: {v}");
                };
                let p = match (filter, up_to, keep) {
                    ("", 0, 0) => self.store.purge()?,
                    _ => self.store.purge_ex(filter, up_to, keep)?,
                };
                self.stats.non_trivial += (p > 0) as usize;
                same(&format!("purged by {body}"), n.to_string(), p.to_string())
            }
            Op::Compact(k) => {
                self.nakked.clear();
                let seq = pick_seq(k, first, last);
                let v = self
                    .api(format!("STREAM.PURGE.{}", self.name), json!({ "seq": seq }))
                    .await?;
                let n = v["purged"].as_u64().unwrap_or(0);
                let p = self.store.compact(seq)?;
                self.stats.non_trivial += (p > 0) as usize;
                same(&format!("compacted to {seq}"), n.to_string(), p.to_string())
            }
            Op::Fetch(n) => {
                let n = (n as usize).clamp(1, 3);
                let mut batch = self
                    .consumer
                    .fetch()
                    .max_messages(n)
                    .messages()
                    .await
                    .map_err(|e| anyhow!("fetch: {e}"))?;
                let mut got = Vec::new();
                while let Some(m) = batch.next().await {
                    let m = m.map_err(|e| anyhow!("fetch: {e}"))?;
                    let i = m.info().map_err(|e| anyhow!("message info: {e}"))?;
                    let pair = (i.consumer_sequence, i.stream_sequence);
                    got.push(pair);
                    self.delivered.insert(pair.1, m);
                }
                let mut want = Vec::new();
                while want.len() < n {
                    let st = self.store.consumer_state(CONSUMER)?;
                    let d = st.delivered.consumer + 1;
                    // a nakked message first, if it is still pending (a removal or an ack of
                    // it took it out of NATS's redelivery queue too)
                    if !self.nakked.is_empty() {
                        let q = self.nakked.remove(0);
                        if st.pending.contains_key(&q) {
                            let dc = st.redelivered.get(&q).copied().unwrap_or(0) + 2;
                            self.store
                                .update_delivered(CONSUMER, d, q, dc, self.last_ts)?;
                            want.push((d, q));
                        }
                        continue;
                    }
                    let Some(m) = self.store.next_matching(">", st.delivered.stream + 1)? else {
                        break;
                    };
                    self.store
                        .update_delivered(CONSUMER, d, m.seq, 1, self.last_ts)?;
                    want.push((d, m.seq));
                }
                self.stats.non_trivial += !want.is_empty() as usize;
                same("fetched", format!("{got:?}"), format!("{want:?}"))
            }
            Op::Ack(k) => {
                let st = self.store.consumer_state(CONSUMER)?;
                if st.pending.is_empty() {
                    return Ok(Ok(()));
                }
                let (&q, _) = st
                    .pending
                    .iter()
                    .nth(k as usize % st.pending.len())
                    .unwrap();
                let Some(m) = self.delivered.remove(&q) else {
                    return Ok(Err(format!(
                        "seqstore has {q} pending, NATS never delivered it"
                    )));
                };
                // the ack names the delivery it answers: the last one of q
                let d = m.info().map_err(|e| anyhow!("message info: {e}"))?;
                let d = d.consumer_sequence;
                self.acked_below_floor = self.ack == AckPolicy::All && d <= st.ack_floor.consumer;
                m.double_ack().await.map_err(|e| anyhow!("ack {q}: {e}"))?;
                self.store.update_acks(CONSUMER, d, q)?;
                match self.ack {
                    // an ack of q acknowledges every delivery at or below it
                    AckPolicy::All => {
                        self.delivered.retain(|&x, _| x > q);
                        self.nakked.retain(|&x| x > q);
                    }
                    _ => self.nakked.retain(|&x| x != q),
                }
                self.stats.non_trivial += 1;
                Ok(())
            }
            Op::Nak(k) => {
                let st = self.store.consumer_state(CONSUMER)?;
                let waiting: Vec<u64> = st
                    .pending
                    .keys()
                    .copied()
                    .filter(|q| !self.nakked.contains(q))
                    .collect();
                if waiting.is_empty() {
                    return Ok(Ok(()));
                }
                let q = waiting[k as usize % waiting.len()];
                let Some(m) = self.delivered.get(&q) else {
                    return Ok(Err(format!(
                        "seqstore has {q} pending, NATS never delivered it"
                    )));
                };
                m.double_ack_with(jetstream::AckKind::Nak(None))
                    .await
                    .map_err(|e| anyhow!("nak {q}: {e}"))?;
                self.nakked.push(q);
                self.stats.non_trivial += 1;
                Ok(())
            }
            Op::Recreate => {
                self.recreate().await?;
                Ok(())
            }
            Op::Get(k) => {
                let seq = pick_seq(k, first, last);
                let (n, s) = (self.nats_get(seq).await?, self.seq_get(seq)?);
                self.stats.non_trivial += s.is_some() as usize;
                same(&format!("get {seq}"), format!("{n:?}"), format!("{s:?}"))
            }
            Op::Last(i) => {
                let f = FILTERS[i as usize % FILTERS.len()];
                let n = self.nats_msg(json!({ "last_by_subj": f })).await?;
                // a refusal is an answer too (seqstore once refused wildcards here)
                let s = match self.store.last_for_subject(f) {
                    Ok(s) => s,
                    Err(e) => {
                        return Ok(Err(format!(
                            "last {f}: nats {:?}, seqstore {e}",
                            n.map(|m| m.0)
                        )))
                    }
                };
                let (n, s) = (n.map(|m| m.0), s.map(|m| m.seq));
                self.stats.non_trivial += s.is_some() as usize;
                if f == ">" && n.is_none() && s.is_some() {
                    let mut highest = None;
                    for q in (first.max(1)..=last).rev() {
                        if self.nats_get(q).await?.is_some() {
                            highest = Some(q);
                            break;
                        }
                    }
                    if highest == s && self.nats_get(last).await?.is_none() {
                        *self
                            .stats
                            .exceptions
                            .entry(Exception::LastOfFullWildcard)
                            .or_default() += 1;
                        return Ok(Ok(()));
                    }
                }
                same(&format!("last {f}"), format!("{n:?}"), format!("{s:?}"))
            }
            Op::Next(i, k) => {
                let f = FILTERS[i as usize % FILTERS.len()];
                let from = pick_seq(k, first, last);
                let n = self
                    .nats_msg(json!({ "seq": from, "next_by_subj": f }))
                    .await?;
                let s = self.store.next_matching(f, from)?;
                let (n, s) = (n.map(|m| m.0), s.map(|m| m.seq));
                self.stats.non_trivial += s.is_some() as usize;
                same(
                    &format!("next {f} from {from}"),
                    format!("{n:?}"),
                    format!("{s:?}"),
                )
            }
            Op::Subjects(i) => {
                let f = FILTERS[i as usize % FILTERS.len()];
                let v = self
                    .api(
                        format!("STREAM.INFO.{}", self.name),
                        json!({ "subjects_filter": f }),
                    )
                    .await?;
                let n: BTreeMap<String, u64> = v["state"]["subjects"]
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .map(|(k, c)| (k.clone(), c.as_u64().unwrap_or(0)))
                            .collect()
                    })
                    .unwrap_or_default();
                let s = self.store.subjects_state(f)?;
                self.stats.non_trivial += !s.is_empty() as usize;
                same(&format!("subjects {f}"), format!("{n:?}"), format!("{s:?}"))
            }
            Op::TimeSeq(k, shift) => {
                let live = self.live()?;
                let ts = match live.is_empty() {
                    true => self.last_ts + 1,
                    false => self.store.get(live[k as usize % live.len()])?.ts,
                } + shift as i64
                    - 1;
                let t = time::OffsetDateTime::from_unix_timestamp_nanos(ts as i128)
                    .context("time")?
                    .format(&time::format_description::well_known::Rfc3339)
                    .context("format time")?;
                let n = self.nats_msg(json!({ "start_time": t })).await?;
                let s = self.store.seq_from_time(ts)?;
                let s = (s <= self.store.state().last_seq).then_some(s);
                self.stats.non_trivial += s.is_some() as usize;
                same(
                    &format!("first at {t}"),
                    format!("{:?}", n.map(|m| m.0)),
                    format!("{s:?}"),
                )
            }
            Op::Content => {
                let mut r = Ok(());
                for seq in first.max(1)..=last {
                    let (n, s) = (self.nats_get(seq).await?, self.seq_get(seq)?);
                    if n != s {
                        r = same(
                            &format!("content at {seq}"),
                            format!("{n:?}"),
                            format!("{s:?}"),
                        );
                        break;
                    }
                }
                r
            }
        })
    }
}

fn consumer_cfg(ack: AckPolicy) -> ConsumerConfig {
    ConsumerConfig {
        ack_policy: ack,
        ..ConsumerConfig::new(CONSUMER)
    }
}

/// The durable pull consumer on NATS: `ack` (explicit or all), every message, and an ack wait long
/// enough that nothing is redelivered during a run.
async fn add_nats_consumer(
    js: &jetstream::Context,
    stream: &str,
    ack: AckPolicy,
) -> Result<PullConsumer> {
    let ack_policy = match ack {
        AckPolicy::All => jetstream::consumer::AckPolicy::All,
        _ => jetstream::consumer::AckPolicy::Explicit,
    };
    js.create_consumer_on_stream(
        jetstream::consumer::pull::Config {
            durable_name: Some(CONSUMER.into()),
            ack_policy,
            ack_wait: Duration::from_secs(3600),
            ..Default::default()
        },
        stream,
    )
    .await
    .map_err(|e| anyhow!("create consumer: {e}"))
}

/// The seed of a run: `$SEQSTORE_SEED` when set (a replay), else `default`.
pub fn seed_from_env(default: u64) -> u64 {
    std::env::var("SEQSTORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The consumers' ack policy of the runs seeded with `seed`: `Explicit` for even seeds, `All`
/// for odd ones.
pub fn ack_policy_of(seed: u64) -> AckPolicy {
    match seed % 2 {
        0 => AckPolicy::Explicit,
        _ => AckPolicy::All,
    }
}

/// Runs `n` generated operations from `seed`; on a difference shrinks it and returns the
/// report of the shrunk list (the seed, the operation list, what differed).
pub fn check(h: &mut Harness, seed: u64, n: usize) -> Result<std::result::Result<Stats, String>> {
    let ops = ops::generate(seed, n);
    h.ack = ack_policy_of(seed);
    match h.run(&ops)? {
        Ok(stats) => Ok(Ok(stats)),
        Err(fail) => {
            let mut report = format!(
                "seqstore and nats-server differ (replay: SEQSTORE_SEED={seed}, {n} operations, \
                 ack policy {})\n\
                 {fail}\n",
                h.ack.name()
            );
            match shrink(h, &ops, 300)? {
                Some((small, f)) => {
                    report += &format!("shrunk to {} operations, {f}:\n", small.len());
                    for (i, op) in small.iter().enumerate() {
                        report += &format!("  {i:>3} {op}\n");
                    }
                }
                None => report += "(the replay did not fail again: not shrunk)\n",
            }
            Ok(Err(report))
        }
    }
}
