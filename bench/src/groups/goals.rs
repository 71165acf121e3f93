//! The tables a run fills and the goals it checks them against (docs/BENCHMARKS.md shows a run).

use super::*;

/// Every table of the report, empty, in the order of the report.
pub(super) fn new_tables() -> [Table; 13] {
    let nosync = Table::new(
        NOSYNC,
        "append, no sync (msgs/s)",
        Unit::PerSec,
        &[
            "seqstore",
            "seqstore_encrypted",
            "seqstore_xchacha",
            "baseline",
            "okaywal",
            "fjall",
            "guest",
            "guest_wasi",
            "fjall_manual",
        ],
    );
    let every = Table::new(
        EVERY,
        "append, sync every 1000 (msgs/s)",
        Unit::PerSec,
        EVERY_ENGINES,
    )
    .fsync_bound();
    let always = Table::new(
        ALWAYS,
        "append, durable before return (msgs/s)",
        Unit::PerSec,
        &[
            "seqstore_1",
            "seqstore_16",
            "seqstore_64",
            "baseline_1",
            "fdatasync_probe_per_s",
        ],
    )
    .fsync_bound()
    .label("seqstore", "embedded");
    let nats = Table::new(
        NATS,
        "NATS JetStream, durable publish (publish + PubAck) (msgs/s)",
        Unit::PerSec,
        NATS_CELLS,
    )
    .fsync_bound()
    .label("", "server through client (loopback)");
    let memory = Table::new(
        MEMORY,
        "peak RSS of a child: write, sync, reopen, read all (MiB)",
        Unit::MiB,
        &[
            "small",
            "large",
            "small_reopen",
            "large_reopen",
            "small_entry_bytes_per_msg",
            "large_entry_bytes_per_msg",
        ],
    );
    let rebuild = Table::new(
        REBUILD,
        "recovery by scanning the blocks (s/GiB; read_crc32: read and crc32 every block byte)",
        Unit::SecPerGib,
        &[
            "seqstore",
            "read_crc32",
            "seqstore_1_thread",
            "guest",
            "guest_wasi",
            "seqstore_cold",
            "read_crc32_cold",
        ],
    );
    let index = Table::new(
        INDEX,
        "recovery from index.db (ms)",
        Unit::Ms,
        &[SMALL, BIG],
    );
    let purge = Table::new(PURGE, "purge (ms)", Unit::Ms, &[SMALL, BIG]);
    let index_cpu = Table::new(
        INDEX_CPU,
        "recovery from index.db, on-CPU time only (ms)",
        Unit::Ms,
        &[SMALL, BIG],
    );
    let purge_cpu = Table::new(
        PURGE_CPU,
        "purge, on-CPU time only (ms)",
        Unit::Ms,
        &[SMALL, BIG],
    );
    let get = Table::new(
        GET,
        "get by random sequence, warm (msgs/s)",
        Unit::PerSec,
        &["seqstore", "seqstore_cache_64mib", "seqstore_no_cache"],
    );
    let reads = Table::new(
        READS,
        "the NATS stream reads on a warm stream from index.db (µs per call)",
        Unit::Us,
        READ_CELLS,
    );
    let batch = Table::new(
        BATCH,
        "get_batch of 100 from random sequences, warm 1M stream (msgs/s)",
        Unit::PerSec,
        &["seqstore", "guest"],
    );
    [
        nosync, every, always, nats, rebuild, index, purge, get, memory, index_cpu, purge_cpu,
        reads, batch,
    ]
}

pub(super) fn goals(tables: &[Table]) -> Vec<Goal> {
    let m = |t: &str, c: &str| tables.iter().find(|x| x.key == t).and_then(|x| x.median(c));
    let ratio = |t: &str, a: &str, b: &str| Some(m(t, a)? / m(t, b)?);
    // two cells of different tables
    let cross = |(ta, a): (&str, &str), (tb, b): (&str, &str)| Some(m(ta, a)? / m(tb, b)?);
    let paired = |t: &str, a: &str, b: &str| -> Option<(f64, f64, f64)> {
        let t = tables.iter().find(|x| x.key == t)?;
        let sa = &t.cells.iter().find(|c| c.name == a)?.samples;
        let sb = &t.cells.iter().find(|c| c.name == b)?.samples;
        if sa.is_empty() || sa.len() != sb.len() {
            return None;
        }
        let r: Vec<f64> = sa.iter().zip(sb).map(|(x, y)| x / y).collect();
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some((crate::util::median(&r)?, lo, hi))
    };
    vec![
        Goal {
            name: "nosync_vs_baseline",
            what: "no sync: seqstore / baseline",
            value: ratio(NOSYNC, "seqstore", "baseline"),
            op: ">=",
            paired: paired(NOSYNC, "seqstore", "baseline"),
            target: 0.85,
        },
        Goal {
            name: "nosync_vs_okaywal",
            what: "no sync: seqstore / okaywal",
            value: ratio(NOSYNC, "seqstore", "okaywal"),
            op: ">=",
            paired: paired(NOSYNC, "seqstore", "okaywal"),
            // not slower than the WAL a user would pick instead
            target: 1.15,
        },
        Goal {
            // encryption at rest costs at most 40 % of the no-sync append rate
            name: "encrypted_vs_plain_nosync",
            what: "no sync: seqstore encrypted (AES-256-GCM) / seqstore plain",
            value: ratio(NOSYNC, "seqstore_encrypted", "seqstore"),
            op: ">=",
            paired: paired(NOSYNC, "seqstore_encrypted", "seqstore"),
            target: 0.6,
        },
        Goal {
            name: "nosync_vs_fjall",
            what: "no sync: seqstore / fjall",
            value: ratio(NOSYNC, "seqstore", "fjall"),
            op: ">=",
            paired: paired(NOSYNC, "seqstore", "fjall"),
            target: 8.0,
        },
        Goal {
            name: "every1000_vs_baseline",
            what: "sync every 1000: seqstore / baseline",
            value: ratio(EVERY, "seqstore", "baseline"),
            op: ">=",
            paired: paired(EVERY, "seqstore", "baseline"),
            target: 0.8,
        },
        Goal {
            name: "always1_vs_fdatasync",
            what: "sync always: seqstore_1 / fdatasync probe",
            value: ratio(ALWAYS, "seqstore_1", "fdatasync_probe_per_s"),
            op: ">=",
            paired: paired(ALWAYS, "seqstore_1", "fdatasync_probe_per_s"),
            target: 0.9,
        },
        Goal {
            name: "group64_vs_1",
            what: "sync always: seqstore_64 / seqstore_1",
            value: ratio(ALWAYS, "seqstore_64", "seqstore_1"),
            op: ">=",
            paired: paired(ALWAYS, "seqstore_64", "seqstore_1"),
            target: 10.0,
        },
        Goal {
            // 64 consumers acking at once share the group commit's fsyncs
            name: "acks64_vs_1",
            what: "consumer acks, sync always: acks_64 / acks_1",
            value: ratio(crate::acks::ACKS, "acks_64", "acks_1"),
            op: ">=",
            paired: paired(crate::acks::ACKS, "acks_64", "acks_1"),
            target: 10.0,
        },
        Goal {
            // embedded against a server through its client: says what it compares
            name: "vs_nats_always64",
            what: "seqstore_64 embedded / NATS always_64",
            value: cross((ALWAYS, "seqstore_64"), (NATS, "always_64")),
            op: ">=",
            paired: None,
            target: 22.0,
        },
        Goal {
            // the rate of a rebuild as a share of the least a checking recovery must do: read
            // and crc32 every byte of the blocks (times are s/GiB: limit / rebuild is rates'
            // rebuild / limit)
            name: "rebuild_vs_read_limit",
            what: "open without index.db, warm: rate / read+crc32 rate",
            value: ratio(REBUILD, "read_crc32", "seqstore"),
            op: ">=",
            paired: paired(REBUILD, "read_crc32", "seqstore"),
            target: 0.6,
        },
        Goal {
            name: "index_1m_vs_1k",
            what: "open from index.db: 1M / 1k messages",
            value: ratio(INDEX, BIG, SMALL),
            op: "<=",
            paired: paired(INDEX, BIG, SMALL),
            target: 1.6,
        },
        Goal {
            name: "purge_1m_vs_1k",
            what: "purge: 1M / 1k messages",
            value: ratio(PURGE, BIG, SMALL),
            op: "<=",
            paired: paired(PURGE, BIG, SMALL),
            target: 2.0,
        },
        Goal {
            // in misses to memory, measured in the same rounds: 1k messages fit the caches,
            // so a ratio of sizes would compare a hit with a miss
            name: "seq_from_time_vs_miss",
            what: "seq_from_time on 1M messages / one miss to memory (64 MiB chase)",
            value: ratio(READS, "seq_from_time_1m", MISS),
            op: "<=",
            paired: paired(READS, "seq_from_time_1m", MISS),
            target: 2.0,
        },
        Goal {
            name: "num_pending_1m_vs_1k",
            what: "num_pending (orders.eu.*): 1M / 1k messages",
            value: ratio(READS, "num_pending_1m", "num_pending_1k"),
            op: "<=",
            paired: paired(READS, "num_pending_1m", "num_pending_1k"),
            target: 2.0,
        },
        Goal {
            name: "filtered_state_1m_vs_1k",
            what: "filtered_state (one subject of 64): 1M / 1k messages",
            value: ratio(READS, "filtered_state_1m", "filtered_state_1k"),
            op: "<=",
            paired: paired(READS, "filtered_state_1m", "filtered_state_1k"),
            target: 2.0,
        },
        Goal {
            name: "guest_batch_vs_native",
            what: "get_batch of 100: guest / seqstore",
            value: ratio(BATCH, "guest", "seqstore"),
            op: ">=",
            paired: paired(BATCH, "guest", "seqstore"),
            target: 0.7,
        },
        Goal {
            name: "get_random_per_s",
            what: "random gets on a warm 1M stream (msgs/s)",
            value: m(GET, "seqstore"),
            op: ">=",
            paired: None,
            target: 1e6,
        },
        Goal {
            name: "memory_large_vs_small",
            what: "peak RSS: 4N / N messages (N = mem_msgs)",
            value: ratio(MEMORY, "large", "small"),
            op: "<=",
            paired: None,
            target: 1.3,
        },
        Goal {
            name: "entry_bytes_per_loaded_msg",
            what: "heap bytes a message of sealed blocks' loaded entries (4N stream, after reads)",
            value: m(MEMORY, "large_entry_bytes_per_msg"),
            op: "<=",
            paired: None,
            target: 8.0,
        },
        // The wasm guest against the native store; `None` without the `guest`
        // feature.
        Goal {
            name: "guest_nosync_vs_native",
            what: "no sync: guest / seqstore",
            value: ratio(NOSYNC, "guest", "seqstore"),
            op: ">=",
            paired: paired(NOSYNC, "guest", "seqstore"),
            target: 0.6,
        },
        Goal {
            // s/GiB: native over guest is the guest's speed relative to native, both on one
            // thread (a guest cannot start threads: this is what the sandbox costs)
            name: "guest_rebuild_vs_native",
            what: "rebuild speed, one thread: guest / seqstore (seqstore_1_thread s/GiB / guest s/GiB)",
            value: ratio(REBUILD, "seqstore_1_thread", "guest"),
            op: ">=",
            paired: paired(REBUILD, "seqstore_1_thread", "guest"),
            target: 0.5,
        },
    ]
}
