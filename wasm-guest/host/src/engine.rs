//! One wasmtime [`Engine`] per process, each component compiled and linked once.
//!
//! Compiling the store component takes Cranelift a noticeable time (much longer in a debug
//! build of the host), so it happens once per process, on first use, and every
//! [`GuestStore`](crate::GuestStore) after that only instantiates the pre-linked component.

use std::sync::OnceLock;

use seqstore_wasm_engine::epoch_engine;
use wasmtime::component::Linker;
use wasmtime::Engine;
use wasmtime_wasi::p2::bindings::sync::CommandPre;

use crate::bindings::StorePre;
use crate::state::HostState;

/// The `store` component (exports `stream`, imports `fs` and `clock`).
pub(crate) static STORE_WASM: &[u8] = include_bytes!(env!("SEQSTORE_STORE_WASM"));
/// The `seqstore-guest` WASI command.
pub(crate) static CLI_WASM: &[u8] = include_bytes!(env!("SEQSTORE_GUEST_CLI_WASM"));
/// The `store` component with the test-only hooks.
#[cfg(any(test, feature = "ablation"))]
pub(crate) static TEST_HOOKS_WASM: &[u8] = include_bytes!(env!("SEQSTORE_TEST_HOOKS_WASM"));
/// The `seqstore-guest` command with the test-only hooks (`SEQSTORE_ABLATION`).
#[cfg(feature = "ablation")]
pub(crate) static CLI_TEST_HOOKS_WASM: &[u8] =
    include_bytes!(env!("SEQSTORE_GUEST_CLI_TEST_HOOKS_WASM"));

/// The process's engine. Epoch interruption is on (the call deadline); a background thread
/// advances the epoch every [`crate::EPOCH_TICK`] for as long as the process runs.
pub(crate) fn engine() -> Result<&'static Engine, String> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            // this crate's own tests share the command's cache, as a user's runs would
            #[cfg(test)]
            if let Some(dir) = crate::compile_cache::default_dir() {
                crate::compile_cache::set_dir(dir);
            }
            let mut cfg = wasmtime::Config::new();
            if std::env::var_os("SEQSTORE_WASM_PERFMAP").is_some() {
                // For profiling: `perf` then names the guest's functions (/tmp/perf-PID.map).
                cfg.profiler(wasmtime::ProfilingStrategy::PerfMap);
            }
            epoch_engine(cfg, "seqstore-wasm-epoch")
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Compiles a store component and links it against WASI and the host's `fs` and `clock`.
fn link_store(wasm: &[u8]) -> Result<StorePre<HostState>, String> {
    let engine = engine()?;
    let component = crate::compile_cache::component(engine, wasm)
        .map_err(|e| format!("compiling the component: {e:?}"))?;
    let mut linker = Linker::<HostState>::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
        .map_err(|e| format!("linking WASI: {e:?}"))?;
    crate::bindings::Store::add_to_linker::<HostState, wasmtime::component::HasSelf<HostState>>(
        &mut linker,
        |s| s,
    )
    .map_err(|e| format!("linking the fs and clock imports: {e:?}"))?;
    crate::state::link_fs_writes(&mut linker)
        .map_err(|e| format!("linking the fs imports that write: {e:?}"))?;
    let pre = linker
        .instantiate_pre(&component)
        .map_err(|e| format!("linking the component: {e:?}"))?;
    StorePre::new(pre).map_err(|e| format!("component exports: {e:?}"))
}

/// Which store component an instance runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The one applications get.
    Store,
    /// With the test-only hooks: the sandbox tests, and a store with an ablation switch.
    #[cfg(any(test, feature = "ablation"))]
    TestHooks,
}

/// The pre-linked store component of `kind`, compiled on first use.
pub(crate) fn store_pre(kind: Kind) -> Result<&'static StorePre<HostState>, String> {
    static STORE: OnceLock<Result<StorePre<HostState>, String>> = OnceLock::new();
    #[cfg(any(test, feature = "ablation"))]
    static TEST_HOOKS: OnceLock<Result<StorePre<HostState>, String>> = OnceLock::new();
    let (cell, wasm) = match kind {
        Kind::Store => (&STORE, STORE_WASM),
        #[cfg(any(test, feature = "ablation"))]
        Kind::TestHooks => (&TEST_HOOKS, TEST_HOOKS_WASM),
    };
    cell.get_or_init(|| link_store(wasm))
        .as_ref()
        .map_err(Clone::clone)
}

/// The pre-linked `seqstore-guest` command (WASI only), compiled on first use.
pub(crate) fn command_pre() -> Result<&'static CommandPre<HostState>, String> {
    static CLI: OnceLock<Result<CommandPre<HostState>, String>> = OnceLock::new();
    CLI.get_or_init(|| {
        let engine = engine()?;
        let component = crate::compile_cache::component(engine, CLI_WASM)
            .map_err(|e| format!("compiling the command: {e:?}"))?;
        let mut linker = Linker::<HostState>::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| format!("linking WASI: {e:?}"))?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| format!("linking the command: {e:?}"))?;
        CommandPre::new(pre).map_err(|e| format!("command exports: {e:?}"))
    })
    .as_ref()
    .map_err(Clone::clone)
}
