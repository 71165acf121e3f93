//! What seqstore's two wasmtime hosts set up the same way: the store's guest host
//! (`seqstore-wasm`) and the crash checker of WASI programs (`seqstore-wasi-trace`). A crate
//! of its own so that the checker does not build the store's guest components to get it.
//!
//! - [`epoch_engine`]: an engine with epoch interruption and the thread that advances the
//!   epoch, the clock of every call deadline;
//! - [`command_exit_code`]: a WASI command's exit code from what running it returned.

#![forbid(unsafe_code)]

use std::time::Duration;
use wasmtime::Engine;
use wasmtime_wasi::I32Exit;

/// How often an [`epoch_engine`]'s epoch advances: the unit of its stores' epoch deadlines,
/// and so the granularity of a call deadline given in time.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// An engine of `cfg` with epoch interruption turned on, and a background thread, named
/// `thread_name`, that advances its epoch every [`EPOCH_TICK`] for as long as the process
/// runs: a store given an epoch deadline of `n` ticks is interrupted after about `n` ticks.
/// The thread is never stopped, so this is for an engine kept for the process's lifetime
/// (one in a static). The error says which step failed.
pub fn epoch_engine(mut cfg: wasmtime::Config, thread_name: &str) -> Result<Engine, String> {
    cfg.epoch_interruption(true);
    let engine = Engine::new(&cfg).map_err(|e| format!("wasmtime engine: {e:?}"))?;
    let ticker = engine.clone();
    std::thread::Builder::new()
        .name(thread_name.into())
        .spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            ticker.increment_epoch();
        })
        .map_err(|e| format!("epoch thread: {e}"))?;
    Ok(engine)
}

/// The exit code of one run of a WASI command, from what instantiating it and calling its
/// `wasi:cli/run` returned: 0 for success, 1 for failure, or the code it passed to `exit`
/// (which wasmtime-wasi raises as an [`I32Exit`] error). Any other error (a trap, a failed
/// instantiation) is returned for the caller to describe.
pub fn command_exit_code(
    run: wasmtime::Result<std::result::Result<(), ()>>,
) -> std::result::Result<i32, wasmtime::Error> {
    match run {
        Ok(Ok(())) => Ok(0),
        Ok(Err(())) => Ok(1),
        Err(e) => match e.downcast_ref::<I32Exit>() {
            Some(I32Exit(code)) => Ok(*code),
            None => Err(e),
        },
    }
}
