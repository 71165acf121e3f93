//! `seqstore consumer add|next|ack|info|list|rm`: durable consumers (issue #16) on a store
//! directory, natively (the wasm guest's interface has no consumer calls yet).

use super::{msg_json, AnyStore};
use anyhow::{bail, Result};
use clap::{Subcommand, ValueEnum};
use host_fs::HostFs;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use store_core::crypt::LayerConfig;
use store_core::{AckPolicy, Clock, Config, ConsumerConfig, ConsumerState, Store};

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum AckArg {
    Explicit,
    All,
    None,
}

/// The consumer subcommands.
#[derive(Subcommand)]
pub(crate) enum ConsumerCmd {
    /// Create a durable consumer (adding one that exists with the same settings does nothing).
    Add {
        /// The store directory.
        #[arg(long, short)]
        dir: PathBuf,
        /// Its name: 1-64 ASCII letters, digits, '-' or '_'.
        name: String,
        /// How its messages are acknowledged.
        #[arg(long, value_enum, default_value = "explicit")]
        ack: AckArg,
        /// Deliveries after which a message is no longer pending (0: unlimited).
        #[arg(long, default_value_t = 0)]
        max_deliver: u64,
    },
    /// Deliver the consumer's next messages (records each delivery durably; prints them).
    Next {
        #[arg(long, short)]
        dir: PathBuf,
        name: String,
        /// At most this many.
        #[arg(long, default_value_t = 1)]
        count: u64,
        #[arg(long)]
        json: bool,
    },
    /// Acknowledge stream sequence SEQ (delivered to the consumer and pending).
    Ack {
        #[arg(long, short)]
        dir: PathBuf,
        name: String,
        seq: u64,
    },
    /// Print a consumer's configuration and state.
    Info {
        #[arg(long, short)]
        dir: PathBuf,
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// List the consumers.
    List {
        #[arg(long, short)]
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Delete a consumer and its state.
    Rm {
        #[arg(long, short)]
        dir: PathBuf,
        name: String,
    },
}

fn open(dir: &Path, layer: &LayerConfig) -> Result<Store<store_core::CryptFs<HostFs>>> {
    let cfg = Config {
        encryption: layer.encryption.clone(),
        compression: layer.compression,
        ..Config::default()
    };
    match crate::store_ops::open_store_at(dir, cfg, false, false)? {
        AnyStore::Native(s) => Ok(s),
        AnyStore::Guest(_) => bail!("consumers run natively"),
    }
}

/// A consumer's configuration and state as one JSON object.
pub(crate) fn info_json(cfg: &ConsumerConfig, st: &ConsumerState) -> Value {
    let pair = |p: store_core::SequencePair| json!({"consumer": p.consumer, "stream": p.stream});
    let pending: Vec<Value> = st
        .pending
        .iter()
        .map(|(s, p)| json!({"stream_seq": s, "consumer_seq": p.sequence, "ts": p.timestamp}))
        .collect();
    let redelivered: Vec<Value> = st
        .redelivered
        .iter()
        .map(|(s, n)| json!({"stream_seq": s, "count": n}))
        .collect();
    json!({"name": cfg.name, "ack_policy": cfg.ack_policy.name(), "max_deliver": cfg.max_deliver,
           "delivered": pair(st.delivered), "ack_floor": pair(st.ack_floor),
           "num_pending": st.pending.len(), "pending": pending, "redelivered": redelivered})
}

pub(crate) fn run(cmd: ConsumerCmd, layer: &LayerConfig) -> Result<ExitCode> {
    match cmd {
        ConsumerCmd::Add {
            dir,
            name,
            ack,
            max_deliver,
        } => {
            let mut s = open(&dir, layer)?;
            let ack_policy = match ack {
                AckArg::Explicit => AckPolicy::Explicit,
                AckArg::All => AckPolicy::All,
                AckArg::None => AckPolicy::None,
            };
            let cfg = ConsumerConfig {
                name,
                ack_policy,
                max_deliver,
            };
            s.consumer_add(&cfg)?;
            s.close()?;
        }
        ConsumerCmd::Next {
            dir,
            name,
            count,
            json,
        } => return next(&dir, &name, count, json, layer),
        ConsumerCmd::Ack { dir, name, seq } => {
            let mut s = open(&dir, layer)?;
            let st = s.consumer_state(&name)?;
            let dseq = st.pending.get(&seq).map_or(0, |p| p.sequence);
            s.update_acks(&name, dseq, seq)?;
            s.close()?;
        }
        ConsumerCmd::Info { dir, name, json } => {
            let s = open(&dir, layer)?;
            let (cfg, st) = (s.consumer_config(&name)?, s.consumer_state(&name)?);
            if json {
                println!("{}", info_json(&cfg, &st));
            } else {
                println!(
                    "name        {}\nack policy  {}\ndelivered   consumer {} stream {}\nack floor   consumer {} stream {}\npending     {}\nredelivered {}",
                    cfg.name, cfg.ack_policy.name(), st.delivered.consumer, st.delivered.stream,
                    st.ack_floor.consumer, st.ack_floor.stream, st.pending.len(), st.redelivered.len()
                );
            }
            s.close()?;
        }
        ConsumerCmd::List { dir, json } => {
            let s = open(&dir, layer)?;
            let names = s.consumer_names();
            if json {
                println!("{}", json!({ "consumers": names }));
            } else {
                names.iter().for_each(|n| println!("{n}"));
            }
            s.close()?;
        }
        ConsumerCmd::Rm { dir, name } => {
            let mut s = open(&dir, layer)?;
            s.consumer_delete(&name)?;
            s.close()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `consumer next`: delivers up to `count` messages after the consumer's last delivery;
/// exit code 1 when there was none to deliver.
fn next(dir: &Path, name: &str, count: u64, json: bool, layer: &LayerConfig) -> Result<ExitCode> {
    let mut s = open(dir, layer)?;
    let mut delivered = 0;
    while delivered < count {
        let st = s.consumer_state(name)?;
        let Some(m) = s.next_matching(">", st.delivered.stream + 1)? else {
            break;
        };
        let ts = host_fs::SystemClock.now_ns();
        s.update_delivered(name, st.delivered.consumer + 1, m.seq, 1, ts)?;
        if json {
            println!("{}", msg_json(&m));
        } else {
            println!(
                "{}\t{}\t{}",
                m.seq,
                m.subject,
                String::from_utf8_lossy(&m.payload)
            );
        }
        delivered += 1;
    }
    s.close()?;
    if delivered == 0 {
        eprintln!("seqstore: no message to deliver to {name}");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
