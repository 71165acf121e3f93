//! `seqstore-bench [--quick] [--json] [--json-out FILE] [--markdown FILE] [--dir PATH]
//! [--reps N] [--only TABLE[,TABLE…]] [--nats-server PATH]`: seqstore measured against a naive
//! log, okaywal, fjall, the wasm guest and NATS JetStream, in one process. `--json-out` also
//! writes the JSON of the same run to FILE; `--markdown` writes the run as a Markdown page
//! (docs/BENCHMARKS.md is one) with the machine, the fsync probe, the date and the commit.
//!
//! Run it with `cargo run --release -p seqstore-bench -- --quick`. It is its own binary, not a
//! subcommand of `seqstore`, so that the command line does not build fjall, okaywal, async-nats
//! and tokio. The memory rows re-execute this binary, one child per stream size.

use std::process::ExitCode;

use seqstore_bench::{run, BenchOpts, Machine};

fn usage() -> ExitCode {
    eprintln!(
        "usage: seqstore-bench [--quick] [--json] [--json-out FILE] [--markdown FILE] [--dir PATH] [--reps N] [--only TABLE,...] [--nats-server PATH]\n\
         tables: append_nosync_msgs_per_s append_every1000_msgs_per_s append_always_msgs_per_s\n\
         consumer_acks_always_per_s nats_publish_msgs_per_s recover_rebuild_s_per_gib\n\
         recover_index_ms purge_ms get_random_msgs_per_s reads15_us get_batch_msgs_per_s\n\
         memory_peak_rss_mib (prefixes work)"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    // the memory rows re-execute this binary, one child per stream size
    if let Some(code) = seqstore_bench::child_main() {
        return code;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
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
        Ok(r) => {
            if let Some(f) = json_out {
                if let Err(e) = std::fs::write(&f, format!("{:#}\n", r.to_json())) {
                    eprintln!("seqstore-bench: writing {f}: {e}");
                    return ExitCode::FAILURE;
                }
            }
            if let Some(f) = markdown {
                let command = std::iter::once("cargo run --release -p seqstore-bench --".into())
                    .chain(args.iter().map(|a| a.to_string()))
                    .collect::<Vec<String>>()
                    .join(" ");
                let page = r.markdown(&Machine::detect(), &command);
                if let Err(e) = std::fs::write(&f, page) {
                    eprintln!("seqstore-bench: writing {f}: {e}");
                    return ExitCode::FAILURE;
                }
            }
            if json {
                println!("{}", r.to_json());
            } else {
                print!("{}", r.table());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("seqstore-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
