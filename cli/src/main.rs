//! `seqstore`: the purge demo (the main job), the crash matrix, and store operations on a real
//! directory.

mod archive;
mod consumer;
#[cfg(feature = "ablation")]
mod demo_nats;
#[cfg(feature = "ablation")]
mod lab;
#[cfg(feature = "ablation")]
mod random;
mod store_ops;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use host_fs::{HostFs, SystemClock};
use indicatif::ProgressBar;
use serde_json::{json, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use store_core::{Config, Store, StoredMsg, SyncPolicy};

mod trace;

use store_ops::{msg_json, parse_duration, store_op, AnyStore};

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

#[derive(Clone, Copy, ValueEnum)]
enum SyncArg {
    Always,
    Interval,
    Never,
}

#[derive(clap::Args)]
struct DirArg {
    /// The store directory.
    #[arg(long, short)]
    dir: PathBuf,
    /// Run the operation inside the wasm sandbox (the store as a WASI guest under wasmtime,
    /// given only this directory), on the same files.
    #[arg(long)]
    guest: bool,
    /// Encrypt the store at rest (XChaCha20-Poly1305) under the key in FILE: 32 raw bytes or
    /// 64 hex digits. Every later command on the store needs the same key (a wrong one is
    /// refused at open).
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Compress what the store writes (lz4 per frame of up to 16 KiB). Reading needs no flag
    /// (each frame says whether it is compressed), but an unencrypted compressed store must be
    /// opened with `--compress` or a key: plainly it is not a store.
    #[arg(long)]
    compress: bool,
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
    /// Measure seqstore against a naive log, okaywal, fjall, the wasm guest and NATS JetStream
    /// (when a nats-server is found), in one run (ratios, never absolute times: this
    /// machine's fsync latency swings 20x).
    Bench {
        /// The short run (under 2 minutes).
        #[arg(long)]
        quick: bool,
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Where to write (a directory on the disk to measure; default: a temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The nats-server for the NATS JetStream rows (default: $NATS_SERVER_BIN, else
        /// nats-server on the PATH; without one the rows are skipped).
        #[arg(long, value_name = "PATH")]
        nats_server: Option<PathBuf>,
    },
    /// Append a message (payload from --data or standard input); prints its sequence.
    Append {
        #[command(flatten)]
        dir: DirArg,
        /// The subject (tokens separated by '.').
        #[arg(long)]
        subject: String,
        /// The payload; read from standard input when absent.
        #[arg(long)]
        data: Option<String>,
        /// Opaque header bytes.
        #[arg(long, default_value = "")]
        headers: String,
        /// Durability of the append.
        #[arg(long, value_enum, default_value = "always")]
        sync: SyncArg,
        /// Time to live: the message expires this long after it is stored (e.g. 10s, 500ms,
        /// 2m, 1h; units ns, us, ms, s, m, h).
        #[arg(long, value_parser = parse_duration)]
        ttl: Option<Duration>,
    },
    /// Mark sequences used without a message (NATS SkipMsgs): SEQ must be the next sequence;
    /// prints the new last sequence. Durable when it returns.
    Skip {
        #[command(flatten)]
        dir: DirArg,
        seq: u64,
        /// How many sequences from SEQ.
        #[arg(long, default_value_t = 1)]
        count: u64,
    },
    /// Print the message with sequence SEQ.
    Get {
        #[command(flatten)]
        dir: DirArg,
        seq: u64,
        #[arg(long)]
        json: bool,
    },
    /// Print the newest message of a subject.
    Last {
        #[command(flatten)]
        dir: DirArg,
        #[arg(long)]
        subject: String,
        #[arg(long)]
        json: bool,
    },
    /// Print the first message at or after --from matching a filter (`*`, `>` wildcards;
    /// --filter may be repeated: a message matching any of them).
    Next {
        #[command(flatten)]
        dir: DirArg,
        #[arg(long, default_value = ">")]
        filter: Vec<String>,
        #[arg(long, default_value_t = 0)]
        from: u64,
        #[arg(long)]
        json: bool,
    },
    /// Print the last message at or before --from (default: the last sequence) matching a
    /// filter (repeatable: any of them).
    Prev {
        #[command(flatten)]
        dir: DirArg,
        #[arg(long, default_value = ">")]
        filter: Vec<String>,
        #[arg(long)]
        from: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// Print how many messages at or after --from match a filter (repeatable: any of them),
    /// and the last sequence the count is valid through (NATS's NumPending).
    Pending {
        #[command(flatten)]
        dir: DirArg,
        #[arg(long, default_value = ">")]
        filter: Vec<String>,
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Count only the last message of each subject (subjects whose last message is at or
        /// after --from).
        #[arg(long)]
        last_per_subject: bool,
        #[arg(long)]
        json: bool,
    },
    /// Print the first sequence whose timestamp is at or after TS (ns since the epoch), or
    /// the last sequence + 1 when none is (NATS's GetSeqFromTime).
    TimeSeq {
        #[command(flatten)]
        dir: DirArg,
        ts: i64,
        #[arg(long)]
        json: bool,
    },
    /// Delete a message (a tombstone); --erase also overwrites its bytes on disk.
    Delete {
        #[command(flatten)]
        dir: DirArg,
        seq: u64,
        #[arg(long)]
        erase: bool,
    },
    /// Purge the stream (or, with --filter/--keep/--up-to, some of it). The sequence survives.
    Purge {
        #[command(flatten)]
        dir: DirArg,
        #[arg(long)]
        filter: Option<String>,
        #[arg(long, default_value_t = 0)]
        keep: u64,
        #[arg(long, default_value_t = 0)]
        up_to: u64,
    },
    /// Remove every message below SEQ.
    Compact {
        #[command(flatten)]
        dir: DirArg,
        seq: u64,
    },
    /// Remove every message above SEQ (lowers the last sequence).
    Truncate {
        #[command(flatten)]
        dir: DirArg,
        seq: u64,
    },
    /// Print the stream state.
    State {
        #[command(flatten)]
        dir: DirArg,
        #[arg(long)]
        json: bool,
    },
    /// Crash-check any program from its syscall trace (strace): every crash image the model
    /// allows is checked by CHECK.
    Trace(trace::TraceArgs),
    /// Print every message.
    Dump {
        #[command(flatten)]
        dir: DirArg,
        #[arg(long)]
        json: bool,
    },
    /// Write a consistent snapshot of the store (a tar stream: its blocks and a manifest with
    /// every file's length and crc32) to standard output or to a new file.
    Snapshot {
        /// The store directory.
        dir: PathBuf,
        /// Write to this new file (fsynced) instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Restore a snapshot into DIR (created if missing; it must be empty), from standard input
    /// or a file. Every file is checked against the manifest; a damaged, truncated or
    /// other-version snapshot is refused and leaves DIR empty.
    Restore {
        /// The directory to restore into.
        dir: PathBuf,
        /// Read the snapshot from this file instead of standard input.
        #[arg(long)]
        from: Option<PathBuf>,
    },
    /// Durable consumers: add, next (deliver), ack, info, list, rm.
    Consumer {
        /// The key of an encrypted store (as the store commands' `--key-file`).
        #[arg(long, global = true, value_name = "FILE")]
        key_file: Option<PathBuf>,
        /// The store is compressed without a key (as the store commands' `--compress`).
        #[arg(long, global = true)]
        compress: bool,
        #[command(subcommand)]
        cmd: consumer::ConsumerCmd,
    },
    /// Re-read every record and checksum without changing anything; non-zero exit on damage.
    Verify {
        #[command(flatten)]
        dir: DirArg,
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    restore_sigpipe();
    // `seqstore bench` re-executes this binary for its memory rows (one child per stream size)
    if let Some(code) = seqstore_bench::child_main() {
        return code;
    }
    let cli = Cli::parse();
    match run(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("seqstore: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Rust starts programs with SIGPIPE ignored, so a write to a closed pipe (`seqstore … | head`)
/// is an error that `println!` turns into a panic. A command-line tool should end quietly
/// there, as coreutils do: the default action, which ends the process.
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
        Cmd::LabOnly { .. } => bail!(
            "demo and crashcheck run the store's deliberately broken fsync variants, which \
             this build leaves out; run them from the crash lab build: \
             cargo run --release -p seqstore --features ablation -- demo"
        ),
        Cmd::Verify { dir, json } => verify(&dir, json),
        Cmd::Consumer {
            key_file,
            compress,
            cmd,
        } => consumer::run(cmd, &store_ops::layer_from(key_file.as_deref(), compress)?),
        Cmd::Bench {
            quick,
            json,
            dir,
            nats_server,
        } => bench(quick, json, dir, nats_server),
        Cmd::Trace(args) => trace::run(args),
        Cmd::Snapshot { dir, out } => {
            archive::snapshot(&dir, out.as_deref(), Config::default()).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Restore { dir, from } => {
            archive::restore(&dir, from.as_ref(), Config::default()).map(|()| ExitCode::SUCCESS)
        }
        other => store_op(other),
    }
}

fn verify(d: &DirArg, as_json: bool) -> Result<ExitCode> {
    let dir = &d.dir;
    let layer = store_ops::layer_config(d)?;
    let fs = store_core::CryptFs::new(HostFs::open(dir)?, layer)?;
    let r = store_core::verify(&fs).with_context(|| format!("verifying {}", dir.display()))?;
    if as_json {
        let problems: Vec<Value> = r
            .problems
            .iter()
            .map(|p| json!({"file": p.file, "offset": p.offset, "what": p.what}))
            .collect();
        let lost: Vec<Value> = r
            .lost
            .iter()
            .map(|l| json!({"first": l.first, "last": l.last}))
            .collect();
        println!(
            "{}",
            json!({"ok": r.is_clean(), "blocks": r.blocks, "records": r.records,
                   "messages": r.messages, "last_seq": r.last_seq, "problems": problems,
                   "lost": lost, "interrupted_purge": r.interrupted_purge,
                   "index": format!("{:?}", r.index), "stray": r.stray})
        );
    } else {
        println!(
            "{} blocks, {} records ({} messages), last sequence {}",
            r.blocks, r.records, r.messages, r.last_seq
        );
        println!("index.db: {:?}", r.index);
        if let Some(p) = &r.interrupted_purge {
            println!("interrupted purge: {p} (the next open completes or rolls it back)");
        }
        for s in &r.stray {
            println!("stray: {s} (ignored by the store)");
        }
        for p in &r.problems {
            println!("DAMAGE {} at offset {}: {}", p.file, p.offset, p.what);
        }
        for l in &r.lost {
            println!("LOST sequences {}..={}", l.first, l.last);
        }
        println!("{}", if r.is_clean() { "ok" } else { "damaged" });
    }
    Ok(if r.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn bench(
    quick: bool,
    as_json: bool,
    dir: Option<PathBuf>,
    nats_server: Option<PathBuf>,
) -> Result<ExitCode> {
    let mut opts = if quick {
        seqstore_bench::BenchOpts::quick()
    } else {
        seqstore_bench::BenchOpts::default()
    };
    opts.dir = dir;
    opts.nats_server = nats_server;
    let pb = ProgressBar::new_spinner();
    pb.enable_steady_tick(Duration::from_millis(120));
    let report = seqstore_bench::run(&opts, &|m: &str| pb.set_message(m.to_string()))?;
    pb.finish_and_clear();
    if as_json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.table());
    }
    Ok(ExitCode::SUCCESS)
}
