//! `--server URL`: the store commands on a seqstore-server cluster, through seqstore-client,
//! with the same output as on a directory. A server holds many streams (`--stream`, default
//! `default`); `append` creates it when it is missing, as `append` creates a store in an empty
//! directory. Reads are linearizable (the leader's); every acknowledged write is committed on
//! a majority's fsynced log, so `sync` has nothing left to do. What a cluster does not serve —
//! `erase`, `time-seq`, `checkpoint`, `report`, `verify` (they are about one directory's
//! files) — is refused with a message that says so.

use seqstore_client::wire::{self, AckPolicy, NextRequest};
use seqstore_client::{BlockingStream, Client, Error as ClientError};
use seqstore_commands::{ConsumerCmd, ConsumerInfo, Error, Msg, Output, Result, StoreCmd};
use seqstore_core::surface::StreamStore;
use seqstore_core::{ConsumerConfig, RecoveryReport, StreamState};

use crate::CliExtra;

/// Runs `cmd` on the cluster at `servers`, on `stream`.
pub(crate) fn run(
    cmd: &StoreCmd<CliExtra>,
    servers: &[String],
    stream: &str,
    token: Option<String>,
) -> Result<Output> {
    let blocking = BlockingStream::new(Client::new(servers, token), stream);
    let mut r = Remote(blocking.map_err(|e| Error::Backend(Box::new(e)))?);
    match cmd {
        StoreCmd::Consumer { cmd } => r.consumer(cmd),
        StoreCmd::Verify { .. } => Err(unserved("verify")),
        StoreCmd::Report { .. } => Err(unserved("report")),
        cmd => {
            if cmd.creates() {
                let config = wire::StreamConfig::default();
                let created = r.0.client().create_stream_if_absent(stream, &config);
                r.wait(created)?;
            }
            let clock = seqstore_fs::SystemClock;
            seqstore_commands::run_and_close(r, cmd, &clock)
        }
    }
}

/// The cluster as a [`StreamStore`] for the shared commands: the client's blocking adapter,
/// its errors as the commands'.
struct Remote(BlockingStream);

fn client(e: ClientError) -> Error {
    match e {
        ClientError::NoMessage(what) => Error::NoMessage { what },
        e => Error::Backend(Box::new(e)),
    }
}

fn unserved(what: &str) -> Error {
    Error::Backend(
        format!("{what} is not served by seqstore-server (it is about a directory's files)").into(),
    )
}

impl Remote {
    fn wait<T>(
        &self,
        f: impl std::future::Future<Output = std::result::Result<T, ClientError>>,
    ) -> Result<T> {
        self.0.block_on(f).map_err(client)
    }

    /// The consumer commands: each write is one log entry on the cluster (a pull included).
    fn consumer(&mut self, cmd: &ConsumerCmd<CliExtra>) -> Result<Output> {
        let (c, s) = (self.0.client(), self.0.stream());
        Ok(match cmd {
            ConsumerCmd::Add {
                name,
                ack,
                max_deliver,
                ..
            } => {
                let cfg = ConsumerConfig {
                    name: name.clone(),
                    ack_policy: AckPolicy::from(*ack),
                    max_deliver: *max_deliver,
                };
                self.0.consumer_add(&cfg).map_err(client)?;
                Output::ConsumerAdded(name.clone())
            }
            ConsumerCmd::Next { name, count, .. } => {
                let batch = u32::try_from(*count).unwrap_or(u32::MAX);
                let req = NextRequest {
                    batch,
                    ..NextRequest::default()
                };
                let ds = self.wait(c.consumer_next(s, name, &req))?;
                let msgs = (ds.into_iter())
                    .map(|d| d.message.into_stored().map(|m| Msg::from(&m)))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(client)?;
                Output::Delivered {
                    name: name.clone(),
                    msgs,
                }
            }
            ConsumerCmd::Ack { name, seq, .. } => {
                self.wait(c.consumer_ack(s, name, *seq))?;
                Output::Acked(*seq)
            }
            ConsumerCmd::Info { name, .. } => {
                let i = self.wait(c.consumer_info(s, name))?;
                Output::ConsumerInfo(ConsumerInfo::new(&i.store_config(), &i.store_state()))
            }
            ConsumerCmd::List { .. } => Output::Consumers(self.consumer_names()?),
            ConsumerCmd::Rm { name, .. } => {
                self.0.consumer_delete(name).map_err(client)?;
                Output::ConsumerRemoved(name.clone())
            }
        })
    }
}

/// Each operation is the client adapter's.
impl StreamStore for Remote {
    type Error = Error;

    seqstore_core::forward_stream_ops!(
        [acked sync_purge changes reads] BlockingStream, this => &mut this.0, client
    );
    fn state(&mut self) -> Result<StreamState> {
        self.0.state().map_err(client)
    }
    fn consumer_names(&mut self) -> Result<Vec<String>> {
        self.0.consumer_names().map_err(client)
    }
    fn recovery_report(&self) -> RecoveryReport {
        self.0.recovery_report()
    }
    fn close(self) -> Result<()> {
        self.0.close().map_err(client)
    }
}
