//! The `seqstore-guest` WASI command, run in-process on a preopened directory.

use std::path::Path;

use seqstore_wasm_engine::command_exit_code;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::engine;
use crate::error::{Error, Result};
use crate::guest_store::{GuestOptions, GUEST_DIR};
use crate::state::NoFs;

/// Most bytes of stdout or stderr kept from one command run; a command that writes more is
/// stopped (it traps), which only a `get` of a message above ~8 MiB can cause.
const OUTPUT_CAP: usize = 16 << 20;

/// What one run of the `seqstore-guest` command printed, and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandOutput {
    /// The exit code. WASI preview 2 carries only success or failure: 0 or 1.
    pub code: i32,
    /// What it wrote to stdout (its JSON lines on success).
    pub stdout: Vec<u8>,
    /// What it wrote to stderr (the error, on failure).
    pub stderr: Vec<u8>,
}

/// The `seqstore-guest` WASI command component, e.g. to write it out for
/// `wasmtime run --dir DIR::/data seqstore-guest.wasm ...`.
pub fn guest_command_wasm() -> &'static [u8] {
    engine::CLI_WASM
}

/// The `seqstore-guest` command built with the test-only hooks (feature `ablation`, the crash
/// lab's): it runs its store with the fsync ablation its environment's `SEQSTORE_ABLATION`
/// names (`no-tombstone-sync`, `no-dir-sync`, `skip:<site>`; `full` when unset), so that a
/// tool that records a WASI program's filesystem calls can be shown to find what each
/// removed fsync loses. Never what [`guest_command_wasm`] returns.
#[cfg(feature = "ablation")]
pub fn guest_command_test_hooks_wasm() -> &'static [u8] {
    engine::CLI_TEST_HOOKS_WASM
}

/// Runs the `seqstore-guest` command (the CLI's operations, e.g. `["append", "--subject",
/// "a", "--data", "x"]`) on the host directory `dir`, preopened as [`GUEST_DIR`], under the
/// sandbox limits `opts`. The command takes its time from WASI's wall clock.
pub fn run_guest_command(dir: &Path, args: &[&str], opts: &GuestOptions) -> Result<CommandOutput> {
    let pre = engine::command_pre().map_err(Error::Setup)?;
    let stdout = MemoryOutputPipe::new(OUTPUT_CAP);
    let stderr = MemoryOutputPipe::new(OUTPUT_CAP);
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(stdout.clone())
        .stderr(stderr.clone())
        .arg("seqstore-guest")
        .args(args)
        .allow_blocking_current_thread(true);
    wasi.preopened_dir(dir, GUEST_DIR, FsPerms::ReadWrite)
        .map_err(|e| Error::Setup(format!("preopening {}: {e:?}", dir.display())))?;
    let mut store = crate::guest_store::sandboxed_store(
        pre.engine(),
        wasi.build(),
        Box::new(NoFs),
        Box::new(WallClock),
        stderr.clone(),
        opts,
    );
    let run = pre
        .instantiate(&mut store)
        .and_then(|cmd| cmd.wasi_cli_run().call_run(&mut store));
    let code = command_exit_code(run)
        .map_err(|e| crate::guest_store::classify(e, store.data(), opts.call_timeout))?;
    Ok(CommandOutput {
        code,
        stdout: stdout.contents().to_vec(),
        stderr: stderr.contents().to_vec(),
    })
}

/// Unused by the command (it has no `clock` import), but the host state needs one.
struct WallClock;

impl seqstore_core::Clock for WallClock {
    fn now_ns(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}
