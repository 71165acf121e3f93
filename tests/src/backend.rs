//! The backends a workload runs on: the native store, `SharedStore`, the wasm guest, all
//! through [`StreamOps`].

use crate::*;

/// The operations a workload and the checker need from a store, so that the native `Store`
/// and the wasm guest run the very same matrix.
pub trait StreamOps {
    /// `Store::append`.
    fn append(&mut self, subject: &str, payload: &[u8]) -> Result<u64, Error>;
    /// `Store::get`.
    fn get(&mut self, seq: u64) -> Result<StoredMsg, Error>;
    /// `Store::state`.
    fn state(&mut self) -> Result<StreamState, Error>;
    /// `Store::sync`.
    fn sync(&mut self) -> Result<(), Error>;
    /// `Store::tick`.
    fn tick(&mut self) -> Result<(), Error>;
    /// `Store::delete`.
    fn delete(&mut self, seq: u64) -> Result<(), Error>;
    /// `Store::erase`.
    fn erase(&mut self, seq: u64) -> Result<(), Error>;
    /// `Store::purge`.
    fn purge(&mut self) -> Result<u64, Error>;
    /// `Store::purge_ex`.
    fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> Result<u64, Error>;
    /// `Store::compact`.
    fn compact(&mut self, seq: u64) -> Result<u64, Error>;
    /// `Store::truncate`.
    fn truncate(&mut self, seq: u64) -> Result<u64, Error>;
    /// `Store::checkpoint` (sync, then write `index.db`).
    fn checkpoint(&mut self) -> Result<(), Error>;
    /// `Store::append_with_ttl` (a backend without it: `InvalidArgument`).
    fn append_with_ttl(
        &mut self,
        _subject: &str,
        _payload: &[u8],
        _ttl_ns: u64,
    ) -> Result<u64, Error> {
        Err(unsupported("append_with_ttl"))
    }
    /// `Store::append_raw`.
    fn append_raw(
        &mut self,
        _seq: u64,
        _ts: i64,
        _subject: &str,
        _payload: &[u8],
    ) -> Result<u64, Error> {
        Err(unsupported("append_raw"))
    }
    /// `Store::skip_many`.
    fn skip_many(&mut self, _first: u64, _count: u64) -> Result<u64, Error> {
        Err(unsupported("skip_many"))
    }
    /// The consumer calls (`Store::consumer_add`, ...), one entry point.
    fn consumer(&mut self, _call: ConsumerCall<'_>) -> Result<Option<ConsumerState>, Error> {
        Err(unsupported("consumers"))
    }
}

/// One consumer call through [`StreamOps::consumer`]; each returns `None` but `State`.
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

/// Runs a consumer call on a native store.
pub fn consumer_call<F: seqstore_core::Fs>(
    s: &mut Store<F>,
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

/// What a backend without one of the newer operations returns (every backend here has them
/// now, the wasm guest through its WIT interface; kept for a backend that lacks them).
fn unsupported(op: &str) -> Error {
    Error::InvalidArgument(format!("{op}: not supported by this backend"))
}

impl<F: seqstore_core::Fs> StreamOps for Store<F> {
    fn append(&mut self, subject: &str, payload: &[u8]) -> Result<u64, Error> {
        Store::append(self, subject, b"", payload)
    }
    fn get(&mut self, seq: u64) -> Result<StoredMsg, Error> {
        Store::get(self, seq)
    }
    fn state(&mut self) -> Result<StreamState, Error> {
        Ok(Store::state(self))
    }
    fn sync(&mut self) -> Result<(), Error> {
        Store::sync(self)
    }
    fn tick(&mut self) -> Result<(), Error> {
        Store::tick(self)
    }
    fn delete(&mut self, seq: u64) -> Result<(), Error> {
        Store::delete(self, seq)
    }
    fn erase(&mut self, seq: u64) -> Result<(), Error> {
        Store::erase(self, seq)
    }
    fn purge(&mut self) -> Result<u64, Error> {
        Store::purge(self)
    }
    fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> Result<u64, Error> {
        Store::purge_ex(self, filter, up_to, keep)
    }
    fn compact(&mut self, seq: u64) -> Result<u64, Error> {
        Store::compact(self, seq)
    }
    fn truncate(&mut self, seq: u64) -> Result<u64, Error> {
        Store::truncate(self, seq)
    }
    fn checkpoint(&mut self) -> Result<(), Error> {
        Store::checkpoint(self)
    }
    fn append_with_ttl(
        &mut self,
        subject: &str,
        payload: &[u8],
        ttl_ns: u64,
    ) -> Result<u64, Error> {
        Store::append_with_ttl(self, subject, b"", payload, Duration::from_nanos(ttl_ns))
    }
    fn append_raw(
        &mut self,
        seq: u64,
        ts: i64,
        subject: &str,
        payload: &[u8],
    ) -> Result<u64, Error> {
        Store::append_raw(self, seq, ts, subject, b"", payload)
    }
    fn skip_many(&mut self, first: u64, count: u64) -> Result<u64, Error> {
        Store::skip_many(self, first, count)
    }
    fn consumer(&mut self, call: ConsumerCall<'_>) -> Result<Option<ConsumerState>, Error> {
        consumer_call(self, call)
    }
}

/// Opens a store of some backend on a fault-fs filesystem.
pub trait Backend: Sync {
    /// The backend's name in reports (`native`, `guest`).
    fn name(&self) -> &'static str;
    /// Whether its stores have `append_with_ttl`, `append_raw` and `skip_many` (all three
    /// backends here do; one without them has a workload's steps of those kinds skipped,
    /// `Runner::step`).
    fn has_write15(&self) -> bool {
        true
    }
    /// Whether its stores have the consumer calls (every backend now; the wasm guest through
    /// its WIT interface's consumer block).
    fn has_consumers(&self) -> bool {
        true
    }
    /// Opens (recovers) a store on `fs`.
    fn open(
        &self,
        fs: FaultFs,
        cfg: Config,
        clock: ManualClock,
    ) -> Result<Box<dyn StreamOps>, Error>;
}

/// The native `Store`.
pub struct Native;

impl Backend for Native {
    fn name(&self) -> &'static str {
        "native"
    }
    fn open(
        &self,
        fs: FaultFs,
        cfg: Config,
        clock: ManualClock,
    ) -> Result<Box<dyn StreamOps>, Error> {
        Ok(Box::new(
            Store::builder(fs).config(cfg).clock(clock).open()?,
        ))
    }
}

/// The native store behind a `SharedStore` (group commit): appends under `Always` go through
/// the leader/follower fsync path.
pub struct Shared;

impl<F: seqstore_core::Fs> StreamOps for seqstore_core::SharedStore<F> {
    fn append(&mut self, subject: &str, payload: &[u8]) -> Result<u64, Error> {
        seqstore_core::SharedStore::append(self, subject, b"", payload)
    }
    fn get(&mut self, seq: u64) -> Result<StoredMsg, Error> {
        self.with(|s| s.get(seq))
    }
    fn state(&mut self) -> Result<StreamState, Error> {
        Ok(self.with(|s| Store::state(s)))
    }
    fn sync(&mut self) -> Result<(), Error> {
        self.with(|s| s.sync())
    }
    fn tick(&mut self) -> Result<(), Error> {
        self.with(|s| s.tick())
    }
    fn delete(&mut self, seq: u64) -> Result<(), Error> {
        self.with(|s| s.delete(seq))
    }
    fn erase(&mut self, seq: u64) -> Result<(), Error> {
        self.with(|s| s.erase(seq))
    }
    fn purge(&mut self) -> Result<u64, Error> {
        self.with(|s| s.purge())
    }
    fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> Result<u64, Error> {
        self.with(|s| s.purge_ex(filter, up_to, keep))
    }
    fn compact(&mut self, seq: u64) -> Result<u64, Error> {
        self.with(|s| s.compact(seq))
    }
    fn truncate(&mut self, seq: u64) -> Result<u64, Error> {
        self.with(|s| s.truncate(seq))
    }
    fn checkpoint(&mut self) -> Result<(), Error> {
        self.with(|s| s.checkpoint())
    }
    fn append_with_ttl(
        &mut self,
        subject: &str,
        payload: &[u8],
        ttl_ns: u64,
    ) -> Result<u64, Error> {
        seqstore_core::SharedStore::append_with_ttl(
            self,
            subject,
            b"",
            payload,
            Duration::from_nanos(ttl_ns),
        )
    }
    fn append_raw(
        &mut self,
        seq: u64,
        ts: i64,
        subject: &str,
        payload: &[u8],
    ) -> Result<u64, Error> {
        seqstore_core::SharedStore::append_raw(self, seq, ts, subject, b"", payload)
    }
    fn skip_many(&mut self, first: u64, count: u64) -> Result<u64, Error> {
        seqstore_core::SharedStore::skip_many(self, first, count)
    }
    fn consumer(&mut self, call: ConsumerCall<'_>) -> Result<Option<ConsumerState>, Error> {
        // acks go through the group-commit path (`SharedStore::update_acks`)
        match call {
            ConsumerCall::Ack(n, d, q) => {
                seqstore_core::SharedStore::update_acks(self, n, d, q).map(|_| None)
            }
            other => self.with(|s| consumer_call(s, other)),
        }
    }
}

impl Backend for Shared {
    fn name(&self) -> &'static str {
        "shared"
    }
    fn open(
        &self,
        fs: FaultFs,
        cfg: Config,
        clock: ManualClock,
    ) -> Result<Box<dyn StreamOps>, Error> {
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

#[cfg(feature = "guest")]
impl StreamOps for seqstore_wasm::GuestStore {
    fn append(&mut self, subject: &str, payload: &[u8]) -> Result<u64, Error> {
        seqstore_wasm::GuestStore::append(self, subject, b"", payload).map_err(guest_err)
    }
    fn get(&mut self, seq: u64) -> Result<StoredMsg, Error> {
        seqstore_wasm::GuestStore::get(self, seq).map_err(guest_err)
    }
    fn state(&mut self) -> Result<StreamState, Error> {
        seqstore_wasm::GuestStore::state(self).map_err(guest_err)
    }
    fn sync(&mut self) -> Result<(), Error> {
        seqstore_wasm::GuestStore::sync(self).map_err(guest_err)
    }
    fn tick(&mut self) -> Result<(), Error> {
        seqstore_wasm::GuestStore::tick(self).map_err(guest_err)
    }
    fn delete(&mut self, seq: u64) -> Result<(), Error> {
        seqstore_wasm::GuestStore::delete(self, seq).map_err(guest_err)
    }
    fn erase(&mut self, seq: u64) -> Result<(), Error> {
        seqstore_wasm::GuestStore::erase(self, seq).map_err(guest_err)
    }
    fn purge(&mut self) -> Result<u64, Error> {
        seqstore_wasm::GuestStore::purge(self).map_err(guest_err)
    }
    fn purge_ex(&mut self, filter: &str, up_to: u64, keep: u64) -> Result<u64, Error> {
        seqstore_wasm::GuestStore::purge_ex(self, filter, up_to, keep).map_err(guest_err)
    }
    fn compact(&mut self, seq: u64) -> Result<u64, Error> {
        seqstore_wasm::GuestStore::compact(self, seq).map_err(guest_err)
    }
    fn truncate(&mut self, seq: u64) -> Result<u64, Error> {
        seqstore_wasm::GuestStore::truncate(self, seq).map_err(guest_err)
    }
    fn checkpoint(&mut self) -> Result<(), Error> {
        seqstore_wasm::GuestStore::checkpoint(self).map_err(guest_err)
    }
    fn consumer(&mut self, call: ConsumerCall<'_>) -> Result<Option<ConsumerState>, Error> {
        use seqstore_wasm::GuestStore as G;
        let r = match call {
            ConsumerCall::Add(c) => G::consumer_add(self, c),
            ConsumerCall::Delivered(n, d, q, dc, ts) => G::update_delivered(self, n, d, q, dc, ts),
            ConsumerCall::Ack(n, d, q) => G::update_acks(self, n, d, q),
            ConsumerCall::Reset(n, start) => G::consumer_reset(self, n, start),
            ConsumerCall::Delete(n) => G::consumer_delete(self, n),
            ConsumerCall::State(n) => {
                return G::consumer_state(self, n).map(Some).map_err(guest_err)
            }
        };
        r.map(|()| None).map_err(guest_err)
    }
    fn append_with_ttl(
        &mut self,
        subject: &str,
        payload: &[u8],
        ttl_ns: u64,
    ) -> Result<u64, Error> {
        let ttl = Duration::from_nanos(ttl_ns);
        seqstore_wasm::GuestStore::append_with_ttl(self, subject, b"", payload, ttl)
            .map_err(guest_err)
    }
    fn append_raw(
        &mut self,
        seq: u64,
        ts: i64,
        subject: &str,
        payload: &[u8],
    ) -> Result<u64, Error> {
        seqstore_wasm::GuestStore::append_raw(self, seq, ts, subject, b"", payload)
            .map_err(guest_err)
    }
    fn skip_many(&mut self, first: u64, count: u64) -> Result<u64, Error> {
        seqstore_wasm::GuestStore::skip_many(self, first, count).map_err(guest_err)
    }
}

#[cfg(feature = "guest")]
impl Backend for Guest {
    fn name(&self) -> &'static str {
        "guest"
    }
    fn open(
        &self,
        fs: FaultFs,
        cfg: Config,
        clock: ManualClock,
    ) -> Result<Box<dyn StreamOps>, Error> {
        let g = seqstore_wasm::GuestStore::from_fs(fs, cfg, Box::new(clock)).map_err(guest_err)?;
        Ok(Box::new(g))
    }
}
