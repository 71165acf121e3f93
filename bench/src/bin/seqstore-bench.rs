//! `seqstore-bench [--quick] [--json] [--json-out FILE] [--markdown FILE] [--dir PATH]
//! [--reps N] [--only TABLE[,TABLE…]] [--nats-server PATH]`: seqstore measured against a naive
//! log, okaywal, fjall, the wasm guest and NATS JetStream, in one process. `--json-out` also
//! writes the JSON of the same run to FILE; `--markdown` writes the run as a Markdown page
//! (docs/BENCHMARKS.md is one) with the machine, the fsync probe, the date and the commit.
//!
//! Run it with `cargo run --release -p seqstore-bench -- --quick`. It is its own binary, not a
//! subcommand of `seqstore`, so that the command line does not build fjall, okaywal, async-nats
//! and tokio. The memory rows re-execute this binary, one child per stream size.
//!
//! `seqstore-bench --scale [--scale-dir DIR] [--json] [--json-out FILE] [--markdown FILE]`: a
//! separate run (not part of `--quick`, not run in CI) of the store at 1M, 10M and 100M messages,
//! each in a child process of its own (this binary again): peak RSS, open from index.db,
//! rebuild against the read limit, random gets, `num_pending`, `filtered_state`, purge, the
//! write rate. It needs ~20 GB of disk (checked first) under DIR (default: the temp dir or the
//! cargo target dir, whichever has room), deleted after. `cargo run --release -p seqstore-bench
//! -- --scale --markdown docs/BENCHMARKS-SCALE.md` generates that page. (`--scale-sizes
//! N,N…`, for testing the mode, replaces the sizes.)
#![forbid(unsafe_code)]

use std::process::ExitCode;

use seqstore_bench::{run, run_replicated, run_scale, BenchOpts, Machine, ReplOpts, ScaleOpts};

fn usage() -> ExitCode {
    eprintln!(
        "usage: seqstore-bench [--quick] [--json] [--json-out FILE] [--markdown FILE] [--dir PATH] [--reps N] [--only TABLE,...] [--nats-server PATH]\n\
         tables: append_nosync_msgs_per_s append_every1000_msgs_per_s append_always_msgs_per_s\n\
         consumer_acks_always_per_s nats_publish_msgs_per_s recover_rebuild_s_per_gib\n\
         recover_index_ms purge_ms get_random_msgs_per_s reads15_us get_batch_msgs_per_s\n\
         memory_peak_rss_mib (prefixes work)\n\
         \n\
         or:    seqstore-bench --scale [--scale-dir DIR] [--json] [--json-out FILE] [--markdown FILE]\n\
         the store at 1M, 10M and 100M messages, each size in a child process (~20 GB of disk under\n\
         DIR, checked first, deleted after; not part of --quick): peak RSS, open from index.db,\n\
         rebuild vs the read limit, random gets, num_pending, filtered_state, purge, write rate.\n\
         The page: cargo run --release -p seqstore-bench -- --scale --markdown docs/BENCHMARKS-SCALE.md\n\
         \n\
         or:    seqstore-bench --replicated [--dir PATH] [--reps N] [--msgs-64 N] [--max-secs S] [--nats-server PATH] [--seqstore-server PATH] [--only CELL,...] [--json] [--json-out FILE] [--markdown FILE]\n\
         acknowledged appends/s of 3-node clusters on loopback with 1 and 64 clients: seqstore-server\n\
         (built beside this binary: cargo build --release -p seqstore-server) against a real NATS\n\
         JetStream cluster (R3 file stream, sync_interval: always and default; not part of --quick).\n\
         The page: cargo run --release -p seqstore-bench -- --replicated --markdown docs/BENCHMARKS-REPLICATED.md"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    // the memory rows re-execute this binary, one child per stream size
    if let Some(code) = seqstore_bench::child_main() {
        return code;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--scale") {
        return scale_main(&args);
    }
    if args.iter().any(|a| a == "--replicated") {
        return replicated_main(&args);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let mut opts = if quick {
        BenchOpts::quick()
    } else {
        BenchOpts::default()
    };
    let mut json = false;
    let mut json_out: Option<String> = None;
    let mut markdown: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => {}
            "--json" => json = true,
            "--json-out" => match it.next() {
                Some(f) => json_out = Some(f.clone()),
                None => return usage(),
            },
            "--markdown" => match it.next() {
                Some(f) => markdown = Some(f.clone()),
                None => return usage(),
            },
            "--dir" => match it.next() {
                Some(d) => opts.dir = Some(d.into()),
                None => return usage(),
            },
            "--reps" => match it.next().and_then(|n| n.parse().ok()) {
                Some(n) => opts.reps = n,
                None => return usage(),
            },
            "--nats-server" => match it.next() {
                Some(p) => opts.nats_server = Some(p.into()),
                None => return usage(),
            },
            "--only" => match it.next() {
                Some(t) => opts.only = t.split(',').map(str::to_string).collect(),
                None => return usage(),
            },
            _ => return usage(),
        }
    }
    match run(&opts, &|s| eprintln!("{s}")) {
        Ok(r) => emit(
            [json_out, markdown],
            || r.markdown(&Machine::detect(), &command_line(&args)),
            r.to_json(),
            if json { None } else { Some(r.table()) },
        ),
        Err(e) => {
            eprintln!("seqstore-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The command line that regenerates a page: `cargo run --release -p seqstore-bench --` and
/// this run's arguments.
fn command_line(args: &[String]) -> String {
    std::iter::once("cargo run --release -p seqstore-bench --".to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<String>>()
        .join(" ")
}

/// The outputs every mode takes: `--json`, `--json-out FILE`, `--markdown FILE`.
#[derive(Default)]
struct Outputs {
    json: bool,
    json_out: Option<String>,
    markdown: Option<String>,
}

/// Parses a mode's flags (`mode` itself and the outputs here, the others by `own`, which
/// answers whether it took the flag and its value was good); `None`: a usage error.
fn mode_args(
    args: &[String],
    mode: &str,
    mut own: impl FnMut(&str, &str) -> bool,
) -> Option<Outputs> {
    let mut out = Outputs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == mode || a == "--json" {
            out.json |= a == "--json";
            continue;
        }
        let v = it.next()?;
        match a.as_str() {
            "--json-out" => out.json_out = Some(v.clone()),
            "--markdown" => out.markdown = Some(v.clone()),
            _ if own(a, v) => {}
            _ => return None,
        }
    }
    Some(out)
}

/// What the `--scale` and `--replicated` reports share: a page, JSON and a text table.
trait ModeReport {
    fn markdown(&self, machine: &Machine, command: &str) -> String;
    fn to_json(&self) -> serde_json::Value;
    fn table(&self) -> String;
}

macro_rules! mode_report {
    ($t:ty) => {
        impl ModeReport for $t {
            fn markdown(&self, machine: &Machine, command: &str) -> String {
                <$t>::markdown(self, machine, command)
            }
            fn to_json(&self) -> serde_json::Value {
                <$t>::to_json(self)
            }
            fn table(&self) -> String {
                <$t>::table(self)
            }
        }
    };
}
mode_report!(seqstore_bench::ScaleReport);
mode_report!(seqstore_bench::ReplReport);

/// A mode's run: its page (made only if `--markdown` asks for it), JSON and table emitted as
/// `out` asks, or its error.
fn finish(
    mode: &str,
    args: &[String],
    out: Outputs,
    run: anyhow::Result<impl ModeReport>,
) -> ExitCode {
    match run {
        Ok(r) => emit(
            [out.json_out, out.markdown],
            || r.markdown(&Machine::detect(), &command_line(args)),
            r.to_json(),
            (!out.json).then(|| r.table()),
        ),
        Err(e) => {
            eprintln!("seqstore-bench {mode}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A positive number, or `None`.
fn positive<T: std::str::FromStr + PartialOrd + Default>(v: &str) -> Option<T> {
    v.parse().ok().filter(|n| *n > T::default())
}

/// `--scale`: its own options, its own report.
fn scale_main(args: &[String]) -> ExitCode {
    let mut opts = ScaleOpts::default();
    let out = mode_args(args, "--scale", |a, v| match a {
        "--scale-dir" => {
            opts.dir = Some(v.into());
            true
        }
        "--scale-sizes" => match v.split(',').map(|n| n.parse().ok()).collect() {
            Some(sizes) => {
                opts.sizes = sizes;
                true
            }
            None => false,
        },
        _ => false,
    });
    let Some(out) = out else { return usage() };
    finish(
        "--scale",
        args,
        out,
        run_scale(&opts, &|s| eprintln!("{s}")),
    )
}

/// `--replicated`: its own options, its own report.
fn replicated_main(args: &[String]) -> ExitCode {
    let mut opts = ReplOpts::default();
    let out = mode_args(args, "--replicated", |a, v| {
        match a {
            "--dir" => opts.dir = Some(v.into()),
            "--nats-server" => opts.nats_server = Some(v.into()),
            "--seqstore-server" => opts.seqstore_server = Some(v.into()),
            "--msgs-64" => return positive(v).map(|n| opts.msgs_64 = n).is_some(),
            "--max-secs" => return positive(v).map(|s| opts.max_secs = s).is_some(),
            "--reps" => return positive(v).map(|n| opts.reps = n).is_some(),
            "--only" => opts.only = v.split(',').map(str::to_string).collect(),
            _ => return false,
        }
        true
    });
    let Some(out) = out else { return usage() };
    finish(
        "--replicated",
        args,
        out,
        run_replicated(&opts, &|s| eprintln!("{s}")),
    )
}

/// A run's outputs: its JSON to `--json-out`, its page (made only if asked for) to
/// `--markdown`, then on stdout the text `table`, or the JSON when there is none (`--json`).
fn emit(
    [json_out, markdown]: [Option<String>; 2],
    page: impl FnOnce() -> String,
    value: serde_json::Value,
    table: Option<String>,
) -> ExitCode {
    let writes = [
        json_out.map(|f| (f, format!("{value:#}\n"))),
        markdown.map(|f| (f, page())),
    ];
    for (f, text) in writes.into_iter().flatten() {
        if let Err(e) = std::fs::write(&f, text) {
            eprintln!("seqstore-bench: writing {f}: {e}");
            return ExitCode::FAILURE;
        }
    }
    match table {
        Some(t) => print!("{t}"),
        None => println!("{value}"),
    }
    ExitCode::SUCCESS
}
