//! The NATS stream reads: `seq_from_time`, `num_pending` and `filtered_state` on the 1k- and
//! the 1M-message stream (for the last two the ratio is the goal: within 2×, so neither walks
//! the messages), a miss to memory measured in the same rounds (`miss_64mib`: `seq_from_time`
//! on 1M messages is held to 2 of them, its exact answer needs memory that 1k keeps in the
//! caches), and `get_batch` in the wasm guest against native (goal ≥ 0.7×: the guest crosses
//! its boundary once per batch).
//!
//! Both streams are the ones `streams` wrote (64 subjects in turn, 128-byte payloads,
//! wall-clock timestamps), opened from their index.db and warmed. Each call gets arguments
//! drawn before the clock starts: a sequence uniform over the stream for `num_pending`
//! (filter `orders.eu.*`, every subject) and `filtered_state` (a literal subject, one in 64),
//! a time uniform between the first and the last timestamp for `seq_from_time`. One untimed
//! round first, then `reps` rounds alternating the cells.

use seqstore_core::surface::StreamStore;
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use anyhow::{ensure, Result};
use seqstore_core::{Store, SyncPolicy};
use seqstore_fs::HostFs;

use crate::report::Table;
use crate::util::{Ctx, Rng};
use crate::BenchOpts;

/// The table of the three reads, µs per call.
pub(crate) const READS: &str = "reads15_us";
/// The batch-read table, messages per second.
pub(crate) const BATCH: &str = "get_batch_msgs_per_s";
/// Its cells: a cell per read and stream size.
pub(crate) const READ_CELLS: &[&str] = &[
    "seq_from_time_1k",
    "seq_from_time_1m",
    "num_pending_1k",
    "num_pending_1m",
    "filtered_state_1k",
    "filtered_state_1m",
    MISS,
];
/// The cell of one dependent load that misses every cache: a pointer chase over 64 MiB.
pub(crate) const MISS: &str = "miss_64mib";
/// The chase's span, bytes: well past the last-level cache, so each step goes to memory (and,
/// with 4 KiB pages, mostly misses the TLB too, as the store's reads of a large stream do).
const MISS_SPAN: usize = 64 << 20;
/// Steps per timed round of the chase.
const MISS_STEPS: usize = 2_000_000;
/// Calls per timed round of each read cell.
const CALLS: usize = 20_000;
/// Messages per `get_batch` call.
const BATCH_MSGS: usize = 100;

/// One store's arguments, drawn once.
struct Args {
    seqs: Vec<u64>,
    times: Vec<i64>,
}

fn args(s: &Store<HostFs>, seed: u64) -> Args {
    let st = s.state();
    let mut rng = Rng::new(seed);
    let span = (st.last_ts - st.first_ts).max(1) as u64;
    Args {
        seqs: (0..CALLS).map(|_| rng.below(st.last_seq) + 1).collect(),
        times: (0..CALLS)
            .map(|_| st.first_ts + rng.below(span) as i64)
            .collect(),
    }
}

/// µs per call of read `which` (`seq_from_time`, `num_pending`, `filtered_state`).
fn time_reads(s: &mut Store<HostFs>, a: &Args, which: &str) -> Result<f64> {
    let t = Instant::now();
    let mut sum = 0u64;
    match which {
        "seq_from_time" => {
            for &ts in &a.times {
                sum += s.seq_from_time(ts)?;
            }
        }
        "num_pending" => {
            for &q in &a.seqs {
                sum += s.num_pending(q, "orders.eu.*", false)?.0;
            }
        }
        _ => {
            for &q in &a.seqs {
                sum += s.filtered_state("orders.eu.000007", q)?.msgs;
            }
        }
    }
    black_box(sum);
    Ok(t.elapsed().as_secs_f64() * 1e6 / CALLS as f64)
}

fn open(path: &Path, n: u64) -> Result<Store<HostFs>> {
    let s = crate::groups::open_store(path, SyncPolicy::Never)?;
    ensure!(
        s.recovery_report().used_index && s.state().msgs == n,
        "{}: not opened from index.db with {n} messages ({} messages; index.db rejected: {:?})",
        path.display(),
        s.state().msgs,
        s.recovery_report().index_rejected
    );
    Ok(s)
}

/// The reads table on the two closed streams (`small`, `big`: path, messages).
pub(crate) fn run_reads(
    ctx: &mut Ctx<'_>,
    opts: &BenchOpts,
    table: &mut Table,
    small: (&Path, u64),
    big: (&Path, u64),
) -> Result<()> {
    ctx.tick(&format!(
        "{READS}: {} rounds of {CALLS} calls a cell",
        opts.reps
    ));
    let mut stores = [open(small.0, small.1)?, open(big.0, big.1)?];
    let a = [args(&stores[0], 0x0005_eed1), args(&stores[1], 0x0005_eed2)];
    let chain = miss_chain(MISS_SPAN, 0x0005_eed3);
    for round in 0..=opts.reps {
        let miss = chase(&chain, MISS_STEPS);
        if round > 0 {
            table.push(MISS, miss);
        }
        for which in ["seq_from_time", "num_pending", "filtered_state"] {
            for (k, size) in ["1k", "1m"].iter().enumerate() {
                let us = time_reads(&mut stores[k], &a[k], which)?;
                if round > 0 {
                    table.push(&format!("{which}_{size}"), us);
                }
            }
        }
    }
    Ok(())
}

/// One cycle through the cache lines of `span` bytes in a random order: the first word of each
/// line holds the index of the next line's first word, the rest of the line is unused.
/// Following it is one dependent load per step that no prefetcher can guess.
fn miss_chain(span: usize, seed: u64) -> Vec<usize> {
    const WORDS_PER_LINE: usize = 64 / std::mem::size_of::<usize>();
    let lines = span / 64;
    let mut order: Vec<usize> = (0..lines).collect();
    let mut rng = Rng::new(seed);
    for i in (1..lines).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let mut chain = vec![0usize; lines * WORDS_PER_LINE];
    for k in 0..lines {
        chain[order[k] * WORDS_PER_LINE] = order[(k + 1) % lines] * WORDS_PER_LINE;
    }
    chain
}

/// µs per step of `steps` dependent loads along `chain`.
fn chase(chain: &[usize], steps: usize) -> f64 {
    let mut at = 0;
    let t = Instant::now();
    for _ in 0..steps {
        at = chain[at];
    }
    black_box(at);
    t.elapsed().as_secs_f64() * 1e6 / steps as f64
}

/// The batch table on the big stream: native `get_batch` and, with the `guest` feature, the
/// guest's (`GuestStore::get_batch`, one call into the component per batch), alternating.
/// One process owns a store at a time (the store lock), so each round opens the native store,
/// warms it with an untimed pass, times a pass and closes it, then does the same with the
/// guest; closing writes index.db back, so every open is from the index.
pub(crate) fn run_batch(
    ctx: &mut Ctx<'_>,
    opts: &BenchOpts,
    table: &mut Table,
    big: (&Path, u64),
) -> Result<()> {
    let calls = (opts.gets as usize / BATCH_MSGS).max(10);
    ctx.tick(&format!(
        "{BATCH}: {} rounds of {calls} batches of {BATCH_MSGS}",
        opts.reps
    ));
    let mut rng = Rng::new(0xba7c);
    let top = big.1.saturating_sub(BATCH_MSGS as u64).max(1);
    let froms: Vec<u64> = (0..calls).map(|_| rng.below(top) + 1).collect();
    for round in 0..=opts.reps {
        let mut s = open(big.0, big.1)?;
        let mut pass = || -> Result<f64> {
            let t = Instant::now();
            let mut n = 0;
            for &q in &froms {
                n += s.get_batch(q, ">", BATCH_MSGS, 0)?.len();
            }
            Ok(n as f64 / t.elapsed().as_secs_f64())
        };
        pass()?;
        let native = pass()?;
        s.close()?;
        #[cfg(feature = "guest")]
        let guest = {
            let mut g = crate::groups::open_guest(big.0, SyncPolicy::Never, false)?;
            let mut pass = || -> Result<f64> {
                let t = Instant::now();
                let mut n = 0;
                for &q in &froms {
                    n += g.get_batch(q, ">", BATCH_MSGS, 0)?.len();
                }
                Ok(n as f64 / t.elapsed().as_secs_f64())
            };
            pass()?;
            let guest = pass()?;
            g.close()?;
            guest
        };
        if round > 0 {
            table.push("seqstore", native);
            #[cfg(feature = "guest")]
            table.push("guest", guest);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chase is one cycle through every line (a shorter cycle would stay in the caches and
    /// make a miss look cheaper than it is), for several seeds and sizes.
    #[test]
    fn the_miss_chain_is_one_cycle_through_every_line() {
        let words = 64 / std::mem::size_of::<usize>();
        for seed in 0..20 {
            let lines = 1 + seed as usize * 37;
            let chain = miss_chain(64 * lines, seed);
            let mut seen = vec![false; lines];
            let mut at = 0;
            for _ in 0..lines {
                assert_eq!(at % words, 0, "seed {seed}: a step lands inside a line");
                assert!(!seen[at / words], "seed {seed}: line {} twice", at / words);
                seen[at / words] = true;
                at = chain[at];
            }
            assert_eq!(
                at, 0,
                "seed {seed}: the chase does not close after {lines} lines"
            );
        }
    }
}
