//! Running a WASI command component with the served filesystem: wasmtime-wasi provides
//! `wasi:cli`, `io`, `clocks` and `random`; `wasi:filesystem` is [`crate::host`]'s.
//!
//! A run is deterministic for one seed: the wall and monotonic clocks start at fixed points
//! and advance 1 ms per reading, and both random sources are a byte cycle drawn from the seed.

use crate::error::Error;
use crate::host::{ServedFs, View};
use crate::served::Shared;
use seqstore_wasm_engine::EPOCH_TICK;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::bindings::sync::CommandPre;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Most bytes of stdout or stderr kept from one run.
const OUTPUT_CAP: usize = 16 << 20;
/// The wall clock's reading at a run's start: 2026-01-01T00:00:00Z.
const WALL_START: Duration = Duration::from_secs(1_767_225_600);

/// The store data of one run.
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    served: Shared,
    root: String,
    marks: bool,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn view(s: &mut HostState) -> View<'_> {
    View {
        table: &mut s.table,
        served: &s.served,
        root: &s.root,
        marks: s.marks,
    }
}

/// Instances live in a pool: a crash check instantiates its checker once per image, and
/// reusing slots saves each instantiation its mmap, page faults and munmap. The first 4 MiB
/// of a memory stay mapped (a Rust guest's stack and heap of a check fit) and are reset in
/// place; with Linux's `PAGEMAP_SCAN` (6.7 and later) only the pages the run wrote are
/// reset, not the whole 4 MiB (most of a guest's 1 MiB stack is never touched). The limits
/// hold 64 programs running at once, each up to 4 GiB of memory (a bigger one fails to
/// grow, like any wasm32 program at its limit); the pool reserves address space for them,
/// and a slot's 4 MiB stay resident once used.
fn pool() -> wasmtime::PoolingAllocationConfig {
    let mut p = wasmtime::PoolingAllocationConfig::new();
    p.total_component_instances(64)
        .total_core_instances(64 * 16)
        .total_memories(64 * 4)
        .total_tables(64 * 16)
        .max_core_instances_per_component(16)
        .max_memories_per_component(4)
        .max_tables_per_component(16)
        .max_tables_per_module(4)
        .max_memory_size(4 << 30)
        .linear_memory_keep_resident(4 << 20)
        .table_keep_resident(64 << 10)
        .pagemap_scan(wasmtime::Enabled::Auto);
    p
}

/// One engine per process, with a thread that advances its epoch (the time limit).
fn engine() -> Result<&'static Engine, Error> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let mut cfg = wasmtime::Config::new();
            cfg.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool()));
            seqstore_wasm_engine::epoch_engine(cfg, "seqstore-wasi-trace-epoch")
        })
        .as_ref()
        .map_err(|e| Error::Program(e.clone()))
}

/// A WASI command component (`wasm32-wasip2`, exporting `wasi:cli/run`), compiled and linked
/// once, run any number of times (from several threads at once). Clones share the compiled
/// code.
#[derive(Clone)]
pub struct Program {
    pre: CommandPre<HostState>,
    /// The same component linked to wasmtime-wasi's own filesystem (a real directory).
    stock: CommandPre<HostState>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Program")
    }
}

impl Program {
    /// Compiles `wasm` and links it against WASI, with this crate's `wasi:filesystem`. A
    /// component is taken as it is; a core module (WASI preview 1) is first made a component
    /// with wasmtime's own preview-1 adapter (which cannot fsync a directory: such programs
    /// get EBADF there, as under any preview-1 runtime).
    pub fn new(wasm: &[u8]) -> Result<Program, Error> {
        let adapted;
        let wasm = if is_core_module(wasm) {
            adapted = adapt_preview1(wasm)?;
            &adapted[..]
        } else {
            wasm
        };
        let engine = engine()?;
        let component = Component::new(engine, wasm)
            .map_err(|e| Error::Program(format!("compiling: {e:?}")))?;
        let pre = |served: bool| {
            let mut linker = Linker::<HostState>::new(engine);
            let linked = if served {
                link(&mut linker)
            } else {
                wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            };
            linked.map_err(|e| Error::Program(format!("linking WASI: {e:?}")))?;
            let pre = linker
                .instantiate_pre(&component)
                .map_err(|e| Error::Program(format!("linking the program: {e:?}")))?;
            CommandPre::new(pre)
                .map_err(|e| Error::Program(format!("not a WASI command (wasi:cli/run): {e:?}")))
        };
        Ok(Program {
            pre: pre(true)?,
            stock: pre(false)?,
        })
    }

    /// [`Program::new`] on the file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Program, Error> {
        let wasm = std::fs::read(path).map_err(|e| Error::Io(path.display().to_string(), e))?;
        Program::new(&wasm)
    }
}

/// A component starts with `\0asm` and a layer field of 1; a core module's is 0.
fn is_core_module(wasm: &[u8]) -> bool {
    wasm.len() >= 8 && &wasm[..4] == b"\0asm" && wasm[6..8] == [0, 0]
}

/// A preview-1 command module as a component, through the command adapter.
fn adapt_preview1(module: &[u8]) -> Result<Vec<u8>, Error> {
    use wasi_preview1_component_adapter_provider as p1;
    fn adapt(e: impl std::fmt::Debug) -> Error {
        Error::Program(format!("adapting a preview-1 module: {e:?}"))
    }
    wit_component::ComponentEncoder::default()
        .module(module)
        .map_err(adapt)?
        .adapter(
            p1::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            p1::WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
        )
        .map_err(adapt)?
        .validate(true)
        .encode()
        .map_err(adapt)
}

/// Everything of WASI from wasmtime-wasi, then `wasi:filesystem` (types, preopens) again
/// from this crate, shadowing wasmtime-wasi's.
fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::filesystem::preopens;
    use wasmtime_wasi::p2::bindings::sync::filesystem::types;
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    linker.allow_shadowing(true);
    types::add_to_linker::<HostState, ServedFs>(linker, view)?;
    preopens::add_to_linker::<HostState, ServedFs>(linker, view)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// How to run a program.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Its arguments (after the program name).
    pub args: Vec<String>,
    /// Its environment.
    pub env: Vec<(String, String)>,
    /// Where the served tree is preopened in the guest (default `/data`).
    pub guest_dir: String,
    /// Seeds the clocks' start and the random sources.
    pub seed: u64,
    /// A run longer than this is stopped (a trap; default 120 s).
    pub timeout: Duration,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            args: Vec::new(),
            env: Vec::new(),
            guest_dir: "/data".into(),
            seed: 0x5eed,
            timeout: Duration::from_secs(120),
        }
    }
}

impl RunConfig {
    /// The defaults with these arguments.
    pub fn with_args<S: AsRef<str>>(args: &[S]) -> Self {
        RunConfig {
            args: args.iter().map(|a| a.as_ref().to_string()).collect(),
            ..RunConfig::default()
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOutput {
    /// The exit code (WASI preview 2 carries success or failure: 0 or 1; `exit(n)` may
    /// carry `n`).
    pub code: i32,
    /// What it wrote to stdout.
    pub stdout: Vec<u8>,
    /// What it wrote to stderr.
    pub stderr: Vec<u8>,
}

/// A clock that starts at `start` and advances 1 ms per reading.
struct StepClock {
    start: u64,
    reads: AtomicU64,
}

impl StepClock {
    fn next(&self) -> u64 {
        let n = self.reads.fetch_add(1, Ordering::Relaxed);
        self.start + n * 1_000_000
    }
}

impl wasmtime_wasi::HostWallClock for StepClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }
    fn now(&self) -> Duration {
        Duration::from_nanos(self.next())
    }
}

impl wasmtime_wasi::HostMonotonicClock for StepClock {
    fn resolution(&self) -> u64 {
        1_000_000
    }
    fn now(&self) -> u64 {
        self.next()
    }
}

/// 4 KiB of bytes drawn from `seed` (the workspace's one seeded generator).
fn seeded_bytes(seed: u64) -> Vec<u8> {
    let mut rng = seqstore_fault_fs::Rng::new(seed);
    (0..512)
        .flat_map(|_| rng.next_u64().to_le_bytes())
        .collect()
}

fn wasi_ctx(
    cfg: &RunConfig,
    stdout: &MemoryOutputPipe,
    stderr: &MemoryOutputPipe,
) -> WasiCtxBuilder {
    let mut b = WasiCtxBuilder::new();
    b.stdout(stdout.clone())
        .stderr(stderr.clone())
        .arg("program")
        .args(&cfg.args)
        .envs(&cfg.env)
        .allow_blocking_current_thread(true)
        .wall_clock(StepClock {
            start: WALL_START.as_nanos() as u64,
            reads: AtomicU64::new(0),
        })
        .monotonic_clock(StepClock {
            start: 0,
            reads: AtomicU64::new(0),
        })
        .secure_random(wasmtime_wasi::Deterministic::new(seeded_bytes(cfg.seed)))
        .insecure_random(wasmtime_wasi::Deterministic::new(seeded_bytes(!cfg.seed)))
        .insecure_random_seed(u128::from(cfg.seed));
    b
}

/// Runs `program` once on `served` (preopened at `cfg.guest_dir`; with the marks directory
/// if `marks`).
pub(crate) fn run_on(
    program: &Program,
    served: &Shared,
    cfg: &RunConfig,
    marks: bool,
) -> Result<RunOutput, Error> {
    let out = Pipes::new();
    let state = HostState {
        wasi: wasi_ctx(cfg, &out.stdout, &out.stderr).build(),
        table: ResourceTable::new(),
        served: served.clone(),
        root: cfg.guest_dir.clone(),
        marks,
    };
    execute(&program.pre, state, cfg, out)
}

/// Runs `program` once with wasmtime-wasi's own filesystem on the real directory `dir`
/// (preopened at `cfg.guest_dir`): the reference the served filesystem is compared with,
/// and the baseline of the capture's cost. Nothing is recorded.
pub fn run_on_dir(
    program: &Program,
    dir: &std::path::Path,
    cfg: &RunConfig,
) -> Result<RunOutput, Error> {
    let out = Pipes::new();
    let mut b = wasi_ctx(cfg, &out.stdout, &out.stderr);
    b.preopened_dir(dir, &cfg.guest_dir, wasmtime_wasi::FsPerms::ReadWrite)
        .map_err(|e| {
            Error::Io(
                dir.display().to_string(),
                std::io::Error::other(format!("{e:?}")),
            )
        })?;
    let state = HostState {
        wasi: b.build(),
        table: ResourceTable::new(),
        served: Shared::new(
            seqstore_fault_fs::FaultFs::new(seqstore_fault_fs::Model::Posix),
            false,
        ),
        root: cfg.guest_dir.clone(),
        marks: false,
    };
    execute(&program.stock, state, cfg, out)
}

/// A run's stdout and stderr.
struct Pipes {
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl Pipes {
    fn new() -> Self {
        Pipes {
            stdout: MemoryOutputPipe::new(OUTPUT_CAP),
            stderr: MemoryOutputPipe::new(OUTPUT_CAP),
        }
    }
}

fn execute(
    pre: &CommandPre<HostState>,
    state: HostState,
    cfg: &RunConfig,
    out: Pipes,
) -> Result<RunOutput, Error> {
    let mut store = Store::new(pre.engine(), state);
    store.epoch_deadline_trap();
    let ticks = (cfg.timeout.as_millis() / EPOCH_TICK.as_millis()).max(1);
    store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
    let run = pre
        .instantiate(&mut store)
        .and_then(|cmd| cmd.wasi_cli_run().call_run(&mut store));
    let code = seqstore_wasm_engine::command_exit_code(run).map_err(|e| {
        let err = String::from_utf8_lossy(&out.stderr.contents())
            .trim()
            .to_string();
        Error::Trap(if err.is_empty() {
            format!("{e:?}")
        } else {
            format!("{e:?}; stderr: {err}")
        })
    })?;
    Ok(RunOutput {
        code,
        stdout: out.stdout.contents().to_vec(),
        stderr: out.stderr.contents().to_vec(),
    })
}
