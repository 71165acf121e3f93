//! The consumer-ack table: durable acks under `Always` through `SharedStore`,
//! one consumer acking alone (`acks_1`) against 64 consumers acking at once, one thread each
//! (`acks_64`): their records share the group commit's fsyncs.

use std::time::{Duration, Instant};

use anyhow::Result;
use seqstore_core::{ConsumerConfig, SharedStore, SyncPolicy};

use crate::groups::open_store;
use crate::report::{Table, Unit};
use crate::util::Ctx;

pub(crate) const ACKS: &str = "consumer_acks_always_per_s";
pub(crate) const ACK_CELLS: &[&str] = &["acks_1", "acks_64"];

pub(crate) fn new_table() -> Table {
    Table::new(
        ACKS,
        "consumer acks, durable before return (acks/s)",
        Unit::PerSec,
        ACK_CELLS,
    )
    .fsync_bound()
}

/// Acks for `secs` seconds or `max` acks per consumer, whichever comes first. Untimed
/// first: `max` messages, every consumer created and every message delivered to it (under
/// `Never`, one sync at the close), then the store reopened under `Always`.
pub(crate) fn ack_cell(ctx: &mut Ctx<'_>, cell: &str, secs: f64, max: u64) -> Result<f64> {
    let consumers: u64 = if cell == "acks_1" { 1 } else { 64 };
    let dir = ctx.tempdir(cell)?;
    let p = dir.path();
    let names: Vec<String> = (0..consumers).map(|k| format!("c{k}")).collect();
    let mut s = open_store(p, SyncPolicy::Never)?;
    for i in 0..max {
        s.append(ctx.subject(i), b"", &ctx.payload)?;
    }
    for n in &names {
        s.consumer_add(&ConsumerConfig::new(n.as_str()))?;
        for q in 1..=max {
            s.update_delivered(n, q, q, 1, 0)?;
        }
    }
    s.close()?;
    let store = SharedStore::new(open_store(p, SyncPolicy::Always)?);
    let dur = Duration::from_secs_f64(secs);
    let t = Instant::now();
    let n = std::thread::scope(|sc| -> Result<u64> {
        let hs: Vec<_> = names
            .iter()
            .map(|name| {
                let st = store.clone();
                sc.spawn(move || -> Result<u64> {
                    let mut q = 0u64;
                    while q < max && t.elapsed() < dur {
                        q += 1;
                        st.update_acks(name, q, q)?;
                    }
                    Ok(q)
                })
            })
            .collect();
        let mut total = 0;
        for h in hs {
            total += h.join().map_err(|_| anyhow::anyhow!("acker panicked"))??;
        }
        Ok(total)
    })?;
    let v = n as f64 / t.elapsed().as_secs_f64().max(1e-9);
    drop(store);
    ctx.finish_dir(dir)?;
    Ok(v)
}
