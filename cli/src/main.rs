//! `seqstore`: the purge demo (the main job), the crash matrix, and store operations on a real
//! directory.

mod archive;
#[cfg(feature = "ablation")]
mod demo_nats;
#[cfg(feature = "ablation")]
mod lab;
#[cfg(feature = "ablation")]
mod random;
mod remote;
mod store_ops;

use anyhow::Result;
use clap::{Parser, Subcommand};
use seqstore_commands::{StoreCmd, EXIT_FAILED};
use std::path::PathBuf;
use std::process::ExitCode;

mod trace;
mod trace_wasm;

use store_ops::store_cmd;

#[derive(Parser)]
#[command(
    name = "seqstore",
    version,
    about = "A message-stream store that never loses its sequence"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// The flags `seqstore` adds to every store command (the shared ones are in
/// `seqstore_commands::Target`).
#[derive(clap::Args, Clone, Debug)]
struct CliExtra {
    /// Run the operation inside the wasm sandbox (the store as a WASI guest under wasmtime,
    /// given only this directory), on the same files.
    #[arg(long)]
    guest: bool,
    /// Run the operation on a seqstore-server cluster instead of a directory: a node's URL
    /// (http://HOST:PORT); several, comma-separated, to find the leader among them.
    #[arg(
        long,
        value_name = "URL",
        value_delimiter = ',',
        conflicts_with = "guest"
    )]
    server: Vec<String>,
    /// With --server: the stream (a server holds many; a directory is one).
    #[arg(
        long,
        value_name = "NAME",
        default_value = "default",
        requires = "server"
    )]
    stream: String,
    /// With --server: the bearer token the cluster was started with.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "SEQSTORE_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// Remove an fsync on purpose (full, no-tombstone-sync, no-dir-sync, skip:<site>): the
    /// negative control of `seqstore trace`. Off (full) by default; only in the crash lab's
    /// build (feature `ablation`).
    #[cfg(feature = "ablation")]
    #[arg(long, default_value = "full")]
    ablation: String,
}

#[derive(Subcommand)]
enum Cmd {
    /// The NATS purge bug, replayed: the seed scenario crashed at every operation boundary,
    /// for every fsync ablation and crash model.
    #[cfg(feature = "ablation")]
    Demo(lab::DemoArgs),
    /// Run the crash matrix (every workload × sync policy × model) on the real store.
    #[cfg(feature = "ablation")]
    Crashcheck(lab::CrashcheckArgs),
    /// Without the crash lab: says how to get `demo` and `crashcheck` (hidden).
    #[cfg(not(feature = "ablation"))]
    #[command(
        name = "demo",
        hide = true,
        alias = "crashcheck",
        disable_help_flag = true
    )]
    LabOnly {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The store commands (shared with the WASI command `seqstore-guest`).
    #[command(flatten)]
    Store(StoreCmd<CliExtra>),
    /// Crash-check any program from its syscall trace (strace), or a WASI program through the
    /// filesystem the host serves it (--wasm): every crash image the model allows is checked.
    Trace(trace::TraceArgs),
    /// Write a consistent snapshot of the store (a tar stream: its blocks and a manifest with
    /// every file's length and crc32) to standard output or to a new file.
    Snapshot {
        /// The store directory.
        #[arg(long, short, default_value = seqstore_commands::DEFAULT_DIR)]
        dir: PathBuf,
        /// The store directory, as an argument (the form before `--dir`; hidden).
        #[arg(hide = true, conflicts_with = "dir", value_name = "DIR")]
        dir_arg: Option<PathBuf>,
        /// Write to this new file (fsynced) instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        layer: archive::LayerArgs,
    },
    /// Restore a snapshot into --dir (created if missing; it must be empty), from standard
    /// input or a file. Every file is checked against the manifest; a damaged, truncated or
    /// other-version snapshot is refused and leaves the directory empty (but for the store's
    /// lock file).
    Restore {
        /// The directory to restore into.
        #[arg(long, short, default_value = seqstore_commands::DEFAULT_DIR)]
        dir: PathBuf,
        /// The directory, as an argument (the form before `--dir`; hidden).
        #[arg(hide = true, conflicts_with = "dir", value_name = "DIR")]
        dir_arg: Option<PathBuf>,
        /// Read the snapshot from this file instead of standard input.
        #[arg(long)]
        from: Option<PathBuf>,
        #[command(flatten)]
        layer: archive::LayerArgs,
    },
}

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = Cli::parse();
    // `--guest` then compiles each component once per machine, not once per command
    if let Some(dir) = seqstore_wasm::default_compile_cache_dir() {
        seqstore_wasm::cache_compiled_components(dir);
    }
    match run(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("seqstore: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Rust starts programs with SIGPIPE ignored, so a write to a closed pipe (`seqstore … | head`)
/// is an error that `println!` turns into a panic. A command-line tool should end quietly
/// there, as coreutils do: the default action, which ends the process. Unsafe because setting
/// a signal disposition is (std has no API for it but the unstable `-Zon-broken-pipe`).
#[allow(unsafe_code)]
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any other thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn run(cmd: Cmd) -> Result<ExitCode> {
    match cmd {
        #[cfg(feature = "ablation")]
        Cmd::Demo(a) => lab::demo_cmd(a),
        #[cfg(feature = "ablation")]
        Cmd::Crashcheck(a) => lab::crashcheck_cmd(a),
        #[cfg(not(feature = "ablation"))]
        Cmd::LabOnly { .. } => {
            eprintln!(
                "seqstore: demo and crashcheck run the store's deliberately broken fsync \
                 variants, which this build leaves out; run them from the crash lab build: \
                 cargo run -p seqstore --features ablation -- demo"
            );
            Ok(ExitCode::from(seqstore_commands::EXIT_USAGE))
        }
        Cmd::Store(cmd) => Ok(store_cmd(&cmd)),
        Cmd::Trace(args) => trace::run(args),
        Cmd::Snapshot {
            dir,
            dir_arg,
            out,
            layer,
        } => archive::snapshot(&dir_arg.unwrap_or(dir), out.as_deref(), &layer)
            .map(|()| ExitCode::SUCCESS),
        Cmd::Restore {
            dir,
            dir_arg,
            from,
            layer,
        } => archive::restore(&dir_arg.unwrap_or(dir), from.as_ref(), &layer)
            .map(|()| ExitCode::SUCCESS),
    }
}
