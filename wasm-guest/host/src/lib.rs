//! Runs seqstore's store as a sandboxed WebAssembly component under wasmtime.
//!
//! [`GuestStore`] implements store-core's
//! [`StreamStore`](seqstore_core::surface::StreamStore), the operations of its native
//! [`Store`](seqstore_core::Store), with the same result types ([`StoredMsg`], [`StreamState`], [`RecoveryReport`], store-core's
//! [`Error`](seqstore_core::Error) inside [`Error::Store`]), but the store runs inside a WASI
//! guest (`wasm-guest/guest`, built for `wasm32-wasip2` by this crate's build script and
//! embedded in it). The host decides what filesystem the guest gets:
//! - [`GuestStore::from_fs`]: any store-core [`Fs`](seqstore_core::Fs) (host-fs, fault-fs, your own). The guest
//!   sees it through the WIT `fs` import, which this crate forwards to it; the guest has no
//!   WASI filesystem at all.
//! - [`GuestStore::open_dir`]: a host directory, preopened through wasmtime-wasi as `/data`;
//!   the guest uses host-fs's WASI backend on it.
//!
//! Time always comes from the [`Clock`] the host passes (the WIT `clock` import).
//!
//! ```no_run
//! # fn main() -> Result<(), seqstore_wasm::Error> {
//! use seqstore_core::surface::StreamStore;
//! use seqstore_core::{Config, ManualClock};
//! use seqstore_wasm::GuestStore;
//!
//! let fs = seqstore_fs::HostFs::create("/tmp/mystream").expect("store directory");
//! let mut store = GuestStore::from_fs(fs, Config::default(), Box::new(ManualClock::new(1)))?;
//! let seq = store.append("orders.eu", b"", b"hello")?;
//! assert_eq!(store.get(seq)?.payload, b"hello");
//! store.close()
//! # }
//! ```
//!
//! # Sandbox
//! Each instance has a memory cap and a per-call deadline ([`GuestOptions`]). A guest that
//! exceeds either, or traps for any other reason, is stopped and the call returns
//! [`Error::MemoryLimit`], [`Error::Timeout`] or [`Error::Trap`]. **A trap leaves the instance
//! unusable**: every later call returns [`Error::Dead`]. Drop the `GuestStore` and open a new
//! one on the same filesystem: it recovers from what is on disk, as after a process crash.
//!
//! # Cost
//! The component is compiled once per process (on first use) and pre-linked; opening a
//! `GuestStore` instantiates it (tens of microseconds) and runs the store's recovery.
//! Dropping one runs the guest store's destructor (which writes out its append buffer, as
//! dropping a native store does) and frees the instance.
//!
//! A call into the guest costs a few hundred nanoseconds, so under `SyncPolicy::Never` without
//! limits `GuestStore`'s [`append`](seqstore_core::surface::StreamStore::append) queues
//! messages on the host and sends them 64 KiB at a time (same results; an I/O error comes back
//! from the call that sent the queue and poisons the store: see its docs). Record checksums are computed by the host (crc32 in wasm has no SIMD):
//! for those queued appends, and for recovery's block scan (the `checksum` import).

#![warn(missing_docs)]

mod cli;
mod compile_cache;
mod consumers;
mod convert;
mod engine;
mod error;
mod guest_store;
mod state;
#[cfg(test)]
mod tests;

/// The bindings `wasmtime::component::bindgen!` generates from `wasm-guest/wit`.
#[allow(missing_docs)]
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "store",
        // Host functions return `wasmtime::Result` so that a bad resource handle from the
        // guest traps instead of panicking the host.
        imports: { default: trappable },
        with: {
            "seqstore:store/fs.file": crate::state::FileRep,
        },
    });
}

#[cfg(feature = "ablation")]
pub use cli::guest_command_test_hooks_wasm;
pub use cli::{guest_command_wasm, run_guest_command, CommandOutput};
pub use error::{Error, Result};
pub use guest_store::{GuestOptions, GuestStore, GUEST_DIR};
pub use seqstore_core::{Clock, Config, RecoveryReport, StoredMsg, StreamState};
pub use seqstore_wasm_engine::{command_exit_code, epoch_engine, EPOCH_TICK};

/// The `store` component this crate runs (world `seqstore:store/store`), for embedders that
/// want to run it with their own wasmtime setup.
pub fn store_component_wasm() -> &'static [u8] {
    engine::STORE_WASM
}

/// Keeps compiled components in `dir` from now on, and loads them from there instead of
/// compiling them again: the second process that runs the guest skips Cranelift (a second or
/// more per component). Call it before the first open; `false` if a directory was set already
/// (the first stays). `dir` must be writable only by trusted users: what it holds is loaded
/// as machine code. Entries are keyed by the component and the engine, so an upgrade never
/// loads a stale one; nothing removes old entries.
pub fn cache_compiled_components(dir: impl Into<std::path::PathBuf>) -> bool {
    compile_cache::set_dir(dir.into())
}

/// Where the `seqstore` command caches compiled components: `SEQSTORE_WASM_CACHE` if set
/// (`off` for no cache), else `$XDG_CACHE_HOME/seqstore/wasm`, else
/// `$HOME/.cache/seqstore/wasm`; `None` for no cache.
pub fn default_compile_cache_dir() -> Option<std::path::PathBuf> {
    compile_cache::default_dir()
}

/// Compiles the component now (it is otherwise compiled on the first open), so that a
/// latency-sensitive first open does not pay for it. Idempotent.
pub fn warm_up() -> Result<()> {
    engine::store_pre(engine::Kind::Store)
        .map(|_| ())
        .map_err(Error::Setup)
}
