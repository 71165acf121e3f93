//! Workloads: the steps, the events they note, and the named workloads of the matrix.

use crate::*;

/// One step of a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Open (recover) the store on the live filesystem.
    Open,
    /// Drop the store (no close, no sync) and open it again, as a restarted process would.
    Reopen,
    /// Append a message of `size` bytes (its first bytes identify it).
    Append(&'static str, u16),
    /// `sync()`.
    Sync,
    /// `delete(seq)`.
    Delete(u64),
    /// `erase(seq)`.
    Erase(u64),
    /// `purge()`.
    Purge,
    /// `purge_ex(filter, up_to, keep)`.
    PurgeEx(&'static str, u64, u64),
    /// `compact(seq)`.
    Compact(u64),
    /// `truncate(seq)`.
    Truncate(u64),
    /// Advance the clock and `tick()` (drives the `Interval` policy).
    Tick(u64),
    /// `checkpoint()`: sync, then write `index.db`.
    Checkpoint,
    /// What `close()` does — checkpoint, then drop — and open again: the open takes the
    /// `index.db` path.
    Close,
    /// Drop the store and open it with `max_msgs = n` (the limits remove the oldest messages at
    /// open), then drop it and open it again without limits.
    TrimOnOpen(u64),
    /// `append_with_ttl` of a message of `size` bytes that expires `ttl` ns after its
    /// timestamp.
    AppendTtl(&'static str, u16, u64),
    /// `append_raw` of a message of `size` bytes at `last_seq + 1`, stamped with the clock.
    AppendRaw(&'static str, u16),
    /// `skip_many(last_seq + 1, count)`.
    Skip(u64),
    /// `consumer_add` of consumer `name` with ack policy `policy` (`explicit`, `all`,
    /// `none`).
    ConsumerAdd(&'static str, &'static str),
    /// `update_delivered` of the next stream sequence after the consumer's last delivery
    /// (nothing if it delivered the last one, or does not exist).
    Deliver(&'static str),
    /// `update_delivered` again of the consumer's oldest pending message.
    Redeliver(&'static str),
    /// `update_acks` of the consumer's `k mod n`-th pending message (n pending).
    Ack(&'static str, u8),
    /// `consumer_reset(name, start)`.
    ConsumerReset(&'static str, u64),
    /// `consumer_delete(name)`.
    ConsumerDelete(&'static str),
}

impl Step {
    /// Whether the step is a consumer call (backends without consumers, the wasm guest,
    /// skip them).
    pub fn is_consumer(&self) -> bool {
        matches!(
            self,
            Step::ConsumerAdd(..)
                | Step::Deliver(_)
                | Step::Redeliver(_)
                | Step::Ack(..)
                | Step::ConsumerReset(..)
                | Step::ConsumerDelete(_)
        )
    }
}

/// What the workload learned, noted in the journal as it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `append` of the message with this id is about to run and will get `seq`: from here on
    /// a crash image may hold it.
    Appending {
        /// The sequence it will get.
        seq: u64,
        /// The payload's id.
        id: u64,
    },
    /// `append` returned `seq` for the message with this id; `durable` under `Always`.
    Appended {
        /// The sequence.
        seq: u64,
        /// The payload's id.
        id: u64,
        /// Acknowledged durable.
        durable: bool,
    },
    /// `sync()` returned: everything before it is durable.
    Synced,
    /// `delete(seq)` is about to run.
    Deleting {
        /// The sequence.
        seq: u64,
    },
    /// `delete(seq)` returned.
    Deleted {
        /// The sequence.
        seq: u64,
        /// Acknowledged durable.
        durable: bool,
    },
    /// A structural operation that removes sequences `<= upto` (purge, compact) started.
    FloorStart {
        /// The last sequence it removes.
        upto: u64,
    },
    /// It returned (durably).
    FloorDone {
        /// The last sequence it removed.
        upto: u64,
    },
    /// `purge_ex` is about to run.
    Removing,
    /// `purge_ex` returned having durably removed these.
    Removed {
        /// The sequences.
        seqs: Vec<u64>,
    },
    /// `truncate(seq)` started.
    TruncateStart {
        /// The target.
        seq: u64,
    },
    /// `truncate(seq)` returned (durably).
    TruncateDone {
        /// The target.
        seq: u64,
    },
    /// The next `Appending` is of a message with a ttl that runs out at `deadline` (ns, the
    /// store's clock): a store opened at or after it must not return the message.
    Ttl {
        /// When it expires.
        deadline: i64,
    },
    /// `skip_many` returned: every sequence up to `last` is used, durably.
    Skipped {
        /// The last sequence it skipped.
        last: u64,
    },
    /// A consumer call returned: the consumer's state now (`None`: deleted); `durable` when
    /// the call promised it (`Always`, or a truncate's durable clamp).
    Consumer {
        /// The consumer.
        name: &'static str,
        /// Its ack policy (the rules that bring a state in line with a recovered stream).
        ack: seqstore_core::AckPolicy,
        /// Its state as `consumer_state` reports it.
        state: Option<seqstore_core::ConsumerState>,
        /// Acknowledged durable.
        durable: bool,
    },
}

/// A named workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Its name (`seed`, `purge-then-append`, ...).
    pub name: &'static str,
    /// Its steps.
    pub steps: Vec<Step>,
    /// Block size to run it with (small ones force rollover).
    pub block_size: u64,
}

pub(crate) fn appends(subjects: &[&'static str], n: usize, size: u16) -> Vec<Step> {
    (0..n)
        .map(|i| Step::Append(subjects[i % subjects.len()], size))
        .collect()
}

/// The number of messages the seed scenario appends before its purge.
pub const SEED_K: u64 = 8;

/// The workloads of the crash matrix. `seed` is the scenario of the original bug.
pub fn workloads() -> Vec<Workload> {
    let cat = |parts: Vec<Vec<Step>>| parts.into_iter().flatten().collect::<Vec<_>>();
    let k = SEED_K as usize;
    vec![
        Workload {
            name: "seed",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["orders.eu"], k, 40),
                vec![Step::Sync, Step::Purge],
            ]),
            block_size: 1 << 20,
        },
        Workload {
            name: "purge-then-append",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["orders.eu"], 5, 40),
                vec![Step::Sync, Step::Purge],
                appends(&["orders.us"], 3, 40),
                vec![Step::Sync],
            ]),
            block_size: 1 << 20,
        },
        Workload {
            name: "purge-deletes-blocks",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["a.1", "a.2"], 30, 60),
                vec![
                    Step::Delete(3),
                    Step::Delete(11),
                    Step::Delete(20),
                    Step::Sync,
                    Step::Purge,
                ],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "purge-ex",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["a.1", "a.2", "b.1"], 12, 30),
                vec![
                    Step::Sync,
                    Step::PurgeEx("a.*", 0, 1),
                    Step::PurgeEx(">", 11, 0),
                    Step::Append("b.1", 30),
                ],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "compact",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["c"], 10, 30),
                vec![Step::Sync],
                // these roll into a new block that nothing has synced yet
                appends(&["c"], 8, 30),
                vec![Step::Compact(6)],
                appends(&["c"], 2, 30),
                vec![Step::Compact(20), Step::Append("c", 30)],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "truncate",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["t"], 24, 40),
                vec![Step::Sync, Step::Delete(5), Step::Truncate(10)],
                appends(&["t"], 2, 40),
                vec![Step::Sync],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "reopen",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["o"], 3, 40),
                vec![Step::Reopen],
                appends(&["o"], 2, 40),
                vec![Step::Sync],
            ]),
            block_size: 1 << 20,
        },
        Workload {
            name: "delete-front-block",
            // 97-byte records: block 1 holds ten messages and the first tombstone, so
            // deleting 1..=10 empties it while the other tombstones land in block 2
            steps: cat(vec![
                vec![Step::Open],
                appends(&["d"], 10, 60),
                vec![Step::Sync],
                (1..=10).map(Step::Delete).collect(),
                vec![
                    Step::Append("d", 60),
                    Step::Erase(11),
                    Step::Append("d", 60),
                ],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "drop-several-blocks",
            // one 922-byte record per 1 KiB block: purge_ex empties three front blocks at once
            steps: cat(vec![
                vec![Step::Open],
                appends(&["d.1"], 3, 883),
                vec![
                    Step::Append("d.2", 40),
                    Step::Sync,
                    Step::PurgeEx("*.1", 0, 0),
                ],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "reopen-sync",
            // a restarted process's sync() must cover what the previous one never synced
            steps: cat(vec![
                vec![Step::Open],
                appends(&["o"], 3, 40),
                vec![Step::Reopen, Step::Sync],
            ]),
            block_size: 1 << 20,
        },
        Workload {
            name: "erase-last",
            // records larger than a sector, so the in-place overwrite can tear
            steps: cat(vec![
                vec![Step::Open],
                appends(&["e"], 2, 600),
                vec![Step::Sync, Step::Erase(2), Step::Append("e", 40)],
            ]),
            // two 636-byte records fill the block: the erase's tombstone starts block 2
            block_size: 1290,
        },
        Workload {
            name: "purge-pending-interval",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["p"], 4, 40),
                vec![Step::Sync],
                appends(&["p"], 4, 40),
                vec![Step::Tick(300_000), Step::Purge, Step::Append("p", 40)],
            ]),
            block_size: 1 << 20,
        },
        Workload {
            // the delete of seq 3 is unsynced under never and interval, so compact(4) finds
            // nothing to do in memory; it must still write a floor record and sync (returning
            // early without them let a crash bring back last=2, or seq 3)
            name: "compact-after-unsynced-delete",
            steps: vec![
                Step::Open,
                Step::Append("a.x", 40),
                Step::Append("a.x", 40),
                Step::Purge,
                Step::Append("c", 40),
                Step::Delete(3),
                Step::Compact(4),
                Step::Append("a.y", 8),
                Step::Reopen,
                Step::Sync,
            ],
            block_size: 1024,
        },
        Workload {
            // every match of the filter was removed by unsynced deletes: purge_ex finds nothing
            // to remove and must still leave none of them to come back
            name: "purge-ex-after-unsynced-deletes",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["a.1", "b.1"], 4, 40),
                vec![
                    Step::Sync,
                    Step::Delete(1),
                    Step::Delete(3),
                    Step::PurgeEx("a.*", 0, 0),
                    Step::Append("b.1", 40),
                ],
            ]),
            block_size: 1024,
        },
        Workload {
            // truncate at or above the last sequence cuts nothing, and still promises last
            name: "truncate-at-last",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["t"], 3, 40),
                vec![Step::Truncate(3), Step::Truncate(7), Step::Append("t", 40)],
            ]),
            block_size: 1024,
        },
        Workload {
            // truncate whose kept tombstones (43 of them, for sequences at or below the cut)
            // fill more than one new block: the cleanup, live and in recovery, must keep
            // every block the commit wrote, not only the one holding the truncate record
            name: "truncate-spills-tombstones",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["s.a", "s.b"], 90, 10),
                vec![
                    Step::PurgeEx("s.a", 0, 0),
                    Step::Truncate(86),
                    Step::Append("s.b", 10),
                    Step::Reopen,
                ],
            ]),
            block_size: 1024,
        },
        Workload {
            // erase of a message an unsynced delete removed: NotFound, and it stays removed
            name: "erase-after-unsynced-delete",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["e"], 2, 40),
                vec![Step::Sync, Step::Delete(2), Step::Erase(2)],
            ]),
            block_size: 1024,
        },
        Workload {
            // the limits remove the oldest messages at open, their floor record starting block
            // 2 (six 167-byte records leave 6 bytes in block 1); then index.db is written and
            // the next open takes the index path
            name: "limits-on-open-and-index",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["l.1", "l.2"], 6, 128),
                vec![Step::TrimOnOpen(2), Step::Append("l.1", 40), Step::Close],
                appends(&["l.2"], 2, 40),
                vec![Step::Truncate(8), Step::Close, Step::Append("l.1", 40)],
            ]),
            block_size: 1024,
        },
        Workload {
            name: "rollover",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["r.1", "r.2"], 20, 100),
                vec![Step::Delete(1), Step::Delete(2), Step::Tick(2_000_000)],
                appends(&["r.1"], 10, 100),
                vec![Step::Sync],
            ]),
            block_size: 1024,
        },
        // the ttl writes. Two 1 ms ttls fill the first block; the tick expires both (two
        // tombstones, then the empty block goes); a 2 s ttl runs out before the crash image is
        // opened (at 4 s); a 60 s one does not.
        Workload {
            name: "ttl-expiry-then-reopen",
            steps: vec![
                Step::Open,
                Step::AppendTtl("t.a", 300, 1_000_000),
                Step::AppendTtl("t.a", 300, 1_000_000),
                Step::Append("t.b", 300),
                Step::AppendTtl("t.a", 300, 60_000_000_000),
                Step::AppendTtl("t.c", 40, 2_000_000_000),
                Step::Sync,
                Step::Tick(2_000_000),
                Step::Append("t.b", 40),
                Step::Reopen,
                Step::Append("t.b", 40),
                Step::Sync,
            ],
            block_size: 1024,
        },
        Workload {
            name: "raw-appends",
            steps: vec![
                Step::Open,
                Step::AppendRaw("r.a", 40),
                Step::AppendRaw("r.b", 40),
                Step::Skip(2),
                Step::AppendRaw("r.a", 40),
                Step::Sync,
                Step::Reopen,
                Step::AppendRaw("r.a", 40),
                Step::Skip(1),
                Step::AppendRaw("r.b", 40),
            ],
            block_size: 1 << 20,
        },
        // The first skip starts a new block (its name is what skip.dir keeps); skips after a
        // delete of the last message and after a purge.
        Workload {
            name: "skips-then-crash",
            steps: vec![
                Step::Open,
                Step::Append("s", 975),
                Step::Skip(5),
                Step::Append("s", 40),
                Step::Delete(7),
                Step::Skip(1),
                Step::Purge,
                Step::Skip(3),
                Step::Append("s", 40),
            ],
            block_size: 1024,
        },
        // durable consumers: deliver, ack out of order, redeliver, ack; the journal's
        // records cross sector boundaries (torn record writes)
        Workload {
            name: "consumer-deliver-ack",
            steps: cat(vec![
                vec![Step::Open],
                appends(&["c.a"], 6, 40),
                vec![
                    Step::ConsumerAdd("work", "explicit"),
                    Step::Deliver("work"),
                    Step::Deliver("work"),
                    Step::Deliver("work"),
                    Step::Ack("work", 1),
                    Step::Redeliver("work"),
                    Step::Ack("work", 0),
                    Step::Sync,
                    Step::Deliver("work"),
                    Step::Ack("work", 0),
                    Step::Deliver("work"),
                ],
            ]),
            block_size: 1 << 20,
        },
        // an ack-all and an ack-none consumer across a purge and a reopen: the ack floor
        // moves up to the purge, durably, without a consumer write
        Workload {
            name: "consumer-purge-reopen",
            steps: cat(vec![
                vec![
                    Step::Open,
                    Step::ConsumerAdd("all", "all"),
                    Step::ConsumerAdd("none", "none"),
                ],
                appends(&["p.a"], 5, 40),
                vec![
                    Step::Deliver("all"),
                    Step::Deliver("all"),
                    Step::Deliver("all"),
                    Step::Deliver("none"),
                    Step::Ack("all", 1),
                    Step::Purge,
                    Step::Append("p.a", 40),
                    Step::Deliver("all"),
                    Step::Reopen,
                    Step::Deliver("none"),
                    Step::Ack("all", 0),
                    Step::Sync,
                ],
            ]),
            block_size: 1024,
        },
        // found by the random explorer (campaign seed 20261282, workload 2059): an ack-all
        // ack of a redelivered message that leaves nothing pending sets the floor to the last
        // delivery, in the call's own result as in the store's view of it
        Workload {
            name: "consumer-ack-all-redelivered",
            steps: cat(vec![
                vec![Step::Open, Step::ConsumerAdd("all", "all")],
                appends(&["r.a"], 2, 40),
                vec![
                    Step::Deliver("all"),
                    Step::Redeliver("all"),
                    Step::Ack("all", 0),
                    Step::Reopen,
                    Step::Deliver("all"),
                ],
            ]),
            block_size: 1024,
        },
        // a truncate below the consumer's deliveries, then new messages at the same
        // sequences: the consumer must come back at the cut, not past the new messages
        Workload {
            name: "consumer-truncate",
            steps: cat(vec![
                vec![Step::Open, Step::ConsumerAdd("t", "explicit")],
                appends(&["t.a"], 8, 40),
                vec![
                    Step::Deliver("t"),
                    Step::Deliver("t"),
                    Step::Deliver("t"),
                    Step::Deliver("t"),
                    Step::Deliver("t"),
                    Step::Ack("t", 0),
                    Step::Sync,
                    Step::Truncate(3),
                ],
                appends(&["t.a"], 3, 40),
                vec![Step::Deliver("t"), Step::Ack("t", 0)],
            ]),
            block_size: 1024,
        },
        // removals of pending messages (a delete, a purge by subject) acknowledge them, a
        // compact onto deleted messages moves the consumer (NATS's rules): the consumer's
        // next records carry those acks, and a crash between must recover a state the
        // consumer went through
        Workload {
            name: "consumer-removals",
            steps: cat(vec![
                vec![Step::Open, Step::ConsumerAdd("r", "explicit")],
                appends(&["r.a", "r.b"], 8, 40),
                vec![
                    Step::Deliver("r"),
                    Step::Deliver("r"),
                    Step::Deliver("r"),
                    Step::Deliver("r"),
                    Step::Delete(2),
                    Step::Ack("r", 0),
                    Step::PurgeEx("r.b", 0, 0),
                    Step::Sync,
                    Step::Deliver("r"),
                    Step::Delete(5),
                    Step::Compact(6),
                    Step::Reopen,
                    Step::Deliver("r"),
                    Step::Ack("r", 0),
                ],
            ]),
            block_size: 1024,
        },
        // found by the random explorer (campaign seed 1, workload 48): a restarted process's
        // sync() must cover the consumer journal the previous one never synced
        Workload {
            name: "consumer-reopen-sync",
            steps: vec![
                Step::Open,
                Step::ConsumerAdd("c2", "all"),
                Step::Reopen,
                Step::Sync,
            ],
            block_size: 1290,
        },
        // checkpoints (a crash in the middle of one), a close through index.db, a delete and
        // a reset
        Workload {
            name: "consumer-checkpoint",
            steps: cat(vec![
                vec![
                    Step::Open,
                    Step::ConsumerAdd("k1", "explicit"),
                    Step::ConsumerAdd("k2", "all"),
                ],
                appends(&["k.a"], 4, 40),
                vec![
                    Step::Deliver("k1"),
                    Step::Deliver("k2"),
                    Step::Ack("k1", 0),
                    Step::Checkpoint,
                    Step::Deliver("k1"),
                    Step::Deliver("k2"),
                    Step::Ack("k2", 0),
                    Step::Close,
                    Step::Ack("k1", 0),
                    Step::ConsumerDelete("k2"),
                    Step::ConsumerReset("k1", 3),
                    Step::Deliver("k1"),
                    Step::Checkpoint,
                    Step::Ack("k1", 0),
                ],
            ]),
            block_size: 1 << 20,
        },
        // index.db with ttls pending (its version-2 ttl section): a checkpoint and a close
        // with two short ttls and a long one, the open through index.db, then the tick that
        // expires the short ones and a second checkpoint and close: a store opened from the
        // index must know the deadlines (the checker: no message returned past its deadline)
        Workload {
            name: "ttl-checkpoint-index",
            steps: vec![
                Step::Open,
                Step::AppendTtl("t.a", 200, 1_000_000),
                Step::Append("t.b", 200),
                Step::AppendTtl("t.a", 200, 1_000_000),
                Step::AppendTtl("t.c", 200, 60_000_000_000),
                Step::Checkpoint,
                Step::Close,
                Step::Tick(2_000_000),
                Step::Append("t.b", 40),
                Step::Close,
                Step::AppendTtl("t.a", 40, 1_000_000),
                Step::Checkpoint,
            ],
            block_size: 1024,
        },
        // found by the random explorer (campaign seed 99, workload 40): a torn erase of the
        // record before a ttl record; the scan's resync must know the ttl field's 8 bytes, or
        // it takes the ttl record for damage and cuts the acknowledged message
        Workload {
            name: "torn-erase-before-ttl",
            steps: vec![
                Step::Open,
                Step::Append("c", 600),
                Step::AppendTtl("a.2", 40, 3_600_000_000_000),
                Step::Erase(1),
            ],
            block_size: 1290,
        },
    ]
}

/// The sync policies every workload runs under. The interval is 1 ms of the workload's
/// clock, which advances 250 µs per step.
pub fn policies() -> Vec<(&'static str, SyncPolicy)> {
    vec![
        ("always", SyncPolicy::Always),
        ("interval", SyncPolicy::Interval(Duration::from_millis(1))),
        ("never", SyncPolicy::Never),
    ]
}

/// Nanoseconds the workload clock moves per step.
pub const STEP_NS: i64 = 250_000;

/// The store configuration a run uses.
pub fn config(block_size: u64, sync: SyncPolicy, ablation: Ablation) -> Config {
    Config::default()
        .with_block_size(block_size)
        .with_sync(sync)
        .with_ablation(ablation)
        // Tiny blocks (many of them) run with no entry cache: every operation may find a
        // sealed block's entries dropped and read them again, and every rebuild drops them
        // as it goes. Larger blocks keep the default, which these workloads never fill.
        .with_entry_cache(if block_size < 4096 {
            0
        } else {
            Config::default().entry_cache
        })
        // Zeros ahead of the newest block in steps that these small workloads cross often
        // (a quarter of the block, at most 4 KiB: 256 to 4096 bytes over the block sizes),
        // and that keep the crash images small.
        .with_preallocate((block_size / 4).min(4096))
        // Tiny blocks preallocate under `Never` too (the raft log's configuration); larger
        // ones keep the default, none.
        .with_preallocate_under_never(block_size < 4096)
        // Tiny blocks run with the fewest block files open (2): nearly every operation on a
        // sealed block closes another's handle and opens its own, recovery's and every sync's
        // included, under every crash point. Not with an fsync removed: a roll then fsyncs
        // written blocks to close them (`store/files.rs`, no named site), which would make
        // up for the removed one (truncate.markers-data) and hide what it protects.
        .with_open_blocks(if block_size < 4096 && matches!(ablation, Ablation::Full) {
            2
        } else {
            Config::default().open_blocks
        })
}

/// The payload of the message with id `id`: the id in decimal, padded to `size` bytes.
pub fn payload(id: u64, size: u16) -> Vec<u8> {
    let mut p = format!("id{id:010}:").into_bytes();
    p.resize((size as usize).max(p.len()), b'.');
    p
}

pub(crate) fn payload_id(p: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(p.get(2..12)?).ok()?;
    if !p.starts_with(b"id") {
        return None;
    }
    s.parse().ok()
}
