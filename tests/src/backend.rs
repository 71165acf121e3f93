//! The backends a workload runs on: the native store, `SharedStore`, the wasm guest, all
//! through [`StreamOps`] (store-core's `StreamStore`).

use crate::*;

/// A store of any backend as the workloads and the checker drive it: store-core's
/// [`StreamStore`], its errors store-core's own, so that the native `Store`, `SharedStore` and
/// the wasm guest run the very same matrix.
pub type StreamOps = dyn StreamStore<Error = Error>;

/// One consumer call, as a workload step names it ([`consumer_call`]); each returns `None`
/// but `State`.
#[derive(Clone, Debug)]
pub enum ConsumerCall<'a> {
    /// `consumer_add`.
    Add(&'a ConsumerConfig),
    /// `update_delivered(name, dseq, sseq, dc, ts)`.
    Delivered(&'a str, u64, u64, u64, i64),
    /// `update_acks(name, dseq, sseq)`.
    Ack(&'a str, u64, u64),
    /// `consumer_reset(name, start)`.
    Reset(&'a str, u64),
    /// `consumer_delete(name)`.
    Delete(&'a str),
    /// `consumer_state(name)`.
    State(&'a str),
}

/// Runs a consumer call on a store of any backend.
pub fn consumer_call(
    s: &mut StreamOps,
    call: ConsumerCall<'_>,
) -> Result<Option<ConsumerState>, Error> {
    match call {
        ConsumerCall::Add(c) => s.consumer_add(c)?,
        ConsumerCall::Delivered(n, d, q, dc, ts) => s.update_delivered(n, d, q, dc, ts)?,
        ConsumerCall::Ack(n, d, q) => s.update_acks(n, d, q)?,
        ConsumerCall::Reset(n, start) => s.consumer_reset(n, start)?,
        ConsumerCall::Delete(n) => s.consumer_delete(n)?,
        ConsumerCall::State(n) => return s.consumer_state(n).map(Some),
    }
    Ok(None)
}

/// Opens a store of some backend on a fault-fs filesystem.
pub trait Backend: Sync {
    /// The backend's name in reports (`native`, `guest`).
    fn name(&self) -> &'static str;
    /// Opens (recovers) a store on `fs`.
    fn open(&self, fs: FaultFs, cfg: Config, clock: ManualClock) -> Result<Box<StreamOps>, Error>;
}

/// The native `Store`.
pub struct Native;

impl Backend for Native {
    fn name(&self) -> &'static str {
        "native"
    }
    fn open(&self, fs: FaultFs, cfg: Config, clock: ManualClock) -> Result<Box<StreamOps>, Error> {
        Ok(Box::new(
            Store::builder(fs).config(cfg).clock(clock).open()?,
        ))
    }
}

/// The native store behind a `SharedStore` (group commit): appends under `Always` go through
/// the leader/follower fsync path.
pub struct Shared;

impl Backend for Shared {
    fn name(&self) -> &'static str {
        "shared"
    }
    fn open(&self, fs: FaultFs, cfg: Config, clock: ManualClock) -> Result<Box<StreamOps>, Error> {
        let store = Store::builder(fs).config(cfg).clock(clock).open()?;
        Ok(Box::new(seqstore_core::SharedStore::new(store)))
    }
}

/// The store running as a wasm32-wasip2 guest under wasmtime, its filesystem (fault-fs) served
/// by the host through the WIT `fs` import. A crash drops the instance and the next open
/// instantiates a fresh guest on the image.
#[cfg(feature = "guest")]
pub struct Guest;

#[cfg(feature = "guest")]
pub(crate) fn guest_err(e: seqstore_wasm::Error) -> Error {
    match e {
        seqstore_wasm::Error::Store(e) => e,
        // a trap or a sandbox limit: no store-core variant says it; keep the text
        other => Error::Io {
            op: "guest",
            path: String::new(),
            source: std::io::Error::other(other.to_string()),
        },
    }
}

/// The guest's store with its errors as store-core's (`guest_err`).
#[cfg(feature = "guest")]
pub(crate) struct GuestOps(pub(crate) seqstore_wasm::GuestStore);

#[cfg(feature = "guest")]
impl StreamStore for GuestOps {
    type Error = Error;

    seqstore_core::forward_stream_ops!(
        [acked sync_purge changes reads] seqstore_wasm::GuestStore, this => &mut this.0, guest_err
    );
    fn state(&mut self) -> Result<StreamState, Error> {
        self.0.state().map_err(guest_err)
    }
    fn consumer_names(&mut self) -> Result<Vec<String>, Error> {
        self.0.consumer_names().map_err(guest_err)
    }
    fn recovery_report(&self) -> seqstore_core::RecoveryReport {
        self.0.recovery_report().clone()
    }
    fn close(self) -> Result<(), Error> {
        self.0.close().map_err(guest_err)
    }
}

#[cfg(feature = "guest")]
impl Backend for Guest {
    fn name(&self) -> &'static str {
        "guest"
    }
    fn open(&self, fs: FaultFs, cfg: Config, clock: ManualClock) -> Result<Box<StreamOps>, Error> {
        let g = seqstore_wasm::GuestStore::from_fs(fs, cfg, Box::new(clock)).map_err(guest_err)?;
        Ok(Box::new(GuestOps(g)))
    }
}
