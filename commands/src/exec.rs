//! Running one command on a [`StreamStore`]: the same code for the native store, the WASI
//! command's store, the CLI's wasm guest and a cluster.

use clap::Args;
use seqstore_core::surface::StreamStore;
use seqstore_core::{AckPolicy, Clock, ConsumerConfig};
use std::io::Read;

use crate::output::{ConsumerInfo, Msg, Output, Report, Subjects};
use crate::{ConsumerCmd, Error, Result, StoreCmd};

/// Runs `cmd` on `store` and returns what it prints. `clock` stamps consumer deliveries.
/// `verify` reads the directory without a store: see [`crate::execute`].
pub fn run<B: StreamStore, X: Args>(
    store: &mut B,
    cmd: &StoreCmd<X>,
    clock: &dyn Clock,
) -> Result<Output>
where
    Error: From<B::Error>,
{
    use StoreCmd::*;
    match cmd {
        Append { .. } | Skip { .. } | Delete { .. } | Erase { .. } | Purge { .. } => {
            write(store, cmd)
        }
        Compact { .. } | Truncate { .. } | Sync { .. } | Checkpoint { .. } => write(store, cmd),
        Get { .. } | Last { .. } | Next { .. } | Prev { .. } => message(store, cmd),
        Pending { .. } | TimeSeq { .. } | Subjects { .. } | State { .. } | Dump { .. } => {
            read(store, cmd)
        }
        Report { .. } => read(store, cmd),
        Verify { .. } => unreachable!("verify reads the directory, not a store: see execute"),
        Consumer { cmd } => consumer(store, cmd, clock),
    }
}

/// The commands that change the stream.
fn write<B: StreamStore, X: Args>(store: &mut B, cmd: &StoreCmd<X>) -> Result<Output>
where
    Error: From<B::Error>,
{
    use StoreCmd::*;
    Ok(match cmd {
        Append {
            subject,
            data,
            headers,
            ttl,
            ..
        } => {
            let payload = match data {
                Some(d) => d.clone().into_bytes(),
                None => {
                    let mut v = Vec::new();
                    std::io::stdin().read_to_end(&mut v).map_err(Error::Stdin)?;
                    v
                }
            };
            let h = headers.as_bytes();
            Output::Seq(match ttl {
                None => store.append(subject, h, &payload)?,
                Some(t) => store.append_with_ttl(subject, h, &payload, *t)?,
            })
        }
        Skip { seq, count, .. } => Output::LastSeq(store.skip_many(*seq, *count)?),
        Delete {
            seq, erase: false, ..
        } => {
            store.delete(*seq)?;
            Output::Deleted(*seq)
        }
        Delete { seq, .. } | Erase { seq, .. } => {
            store.erase(*seq)?;
            Output::Erased(*seq)
        }
        Purge {
            filter,
            keep,
            up_to,
            ..
        } => {
            let purged = match filter {
                None if *keep == 0 && *up_to == 0 => store.purge()?,
                f => store.purge_ex(f.as_deref().unwrap_or(">"), *up_to, *keep)?,
            };
            let st = store.state()?;
            Output::Purged {
                purged,
                first: st.first_seq,
                last: st.last_seq,
            }
        }
        Compact { seq, .. } => Output::Removed(store.compact(*seq)?),
        Truncate { seq, .. } => Output::Removed(store.truncate(*seq)?),
        Sync { .. } => {
            store.sync()?;
            Output::Synced
        }
        Checkpoint { .. } => {
            store.checkpoint()?;
            Output::Checkpoint
        }
        _ => unreachable!("run sends only writes here"),
    })
}

/// The reads of one message; none is an error ([`Error::NoMessage`]).
fn message<B: StreamStore, X: Args>(store: &mut B, cmd: &StoreCmd<X>) -> Result<Output>
where
    Error: From<B::Error>,
{
    use StoreCmd::*;
    let (found, what) = match cmd {
        Get { seq, .. } => (Some(store.get(*seq)?), String::new()),
        Last { subject, .. } => (
            store.last_for_subject(subject)?,
            format!("with subject {subject:?}"),
        ),
        Next { filter, from, .. } => {
            let filters: Vec<&str> = filter.iter().map(String::as_str).collect();
            (
                store.next_matching_multi(&filters, *from)?,
                format!("matching {filter:?} at or after {from}"),
            )
        }
        Prev { filter, from, .. } => {
            let filters: Vec<&str> = filter.iter().map(String::as_str).collect();
            let at = from.unwrap_or(u64::MAX);
            let what = match from {
                None => format!("matching {filter:?}"),
                Some(_) => format!("matching {filter:?} at or before {at}"),
            };
            (store.prev_matching_multi(&filters, at)?, what)
        }
        _ => unreachable!("run sends only single-message reads here"),
    };
    match found {
        Some(m) => Ok(Output::Msg((&m).into())),
        None => Err(Error::NoMessage { what }),
    }
}

/// The other reads.
fn read<B: StreamStore, X: Args>(store: &mut B, cmd: &StoreCmd<X>) -> Result<Output>
where
    Error: From<B::Error>,
{
    use StoreCmd::*;
    Ok(match cmd {
        Pending {
            filter,
            from,
            last_per_subject,
            ..
        } => {
            let filters: Vec<&str> = filter.iter().map(String::as_str).collect();
            let (pending, valid_through) =
                store.num_pending_multi(*from, &filters, *last_per_subject)?;
            Output::Pending {
                pending,
                valid_through,
            }
        }
        TimeSeq { ts, .. } => Output::Seq(store.seq_from_time(*ts)?),
        Subjects { filter, .. } => Output::Subjects(self::Subjects(store.subjects_state(filter)?)),
        State { .. } => Output::State(store.state()?),
        Dump { .. } => {
            let mut msgs = Vec::new();
            let mut from = 0;
            while let Some(m) = store.next_matching_multi(&[">"], from)? {
                from = m.seq + 1;
                msgs.push(Msg::from(&m));
            }
            Output::Msgs(msgs)
        }
        Report { .. } => Output::Report(self::Report::from(&store.recovery_report())),
        _ => unreachable!("run sends only reads here"),
    })
}

/// Runs `cmd` on `store` and closes it (sync, index.db). A failed command drops the store
/// without closing it.
pub fn run_and_close<B: StreamStore, X: Args>(
    mut store: B,
    cmd: &StoreCmd<X>,
    clock: &dyn Clock,
) -> Result<Output>
where
    Error: From<B::Error>,
{
    let out = run(&mut store, cmd, clock)?;
    store.close()?;
    Ok(out)
}

fn consumer<B: StreamStore, X: Args>(
    store: &mut B,
    cmd: &ConsumerCmd<X>,
    clock: &dyn Clock,
) -> Result<Output>
where
    Error: From<B::Error>,
{
    Ok(match cmd {
        ConsumerCmd::Add {
            name,
            ack,
            max_deliver,
            ..
        } => {
            store.consumer_add(&ConsumerConfig {
                name: name.clone(),
                ack_policy: AckPolicy::from(*ack),
                max_deliver: *max_deliver,
            })?;
            Output::ConsumerAdded(name.clone())
        }
        ConsumerCmd::Next { name, count, .. } => {
            let mut msgs = Vec::new();
            while (msgs.len() as u64) < *count {
                let st = store.consumer_state(name)?;
                let Some(m) = store.next_matching_multi(&[">"], st.delivered.stream + 1)? else {
                    break;
                };
                store.update_delivered(
                    name,
                    st.delivered.consumer + 1,
                    m.seq,
                    1,
                    clock.now_ns(),
                )?;
                msgs.push(Msg::from(&m));
            }
            Output::Delivered {
                name: name.clone(),
                msgs,
            }
        }
        ConsumerCmd::Ack { name, seq, .. } => {
            let st = store.consumer_state(name)?;
            let dseq = st.pending.get(seq).map_or(0, |p| p.sequence);
            store.update_acks(name, dseq, *seq)?;
            Output::Acked(*seq)
        }
        ConsumerCmd::Info { name, .. } => {
            let (cfg, st) = (store.consumer_config(name)?, store.consumer_state(name)?);
            Output::ConsumerInfo(ConsumerInfo::new(&cfg, &st))
        }
        ConsumerCmd::List { .. } => Output::Consumers(store.consumer_names()?),
        ConsumerCmd::Rm { name, .. } => {
            store.consumer_delete(name)?;
            Output::ConsumerRemoved(name.clone())
        }
    })
}
