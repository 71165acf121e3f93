//! Parse rate of the strace capture: `cargo run --release -p seqstore-trace --example
//! parse_rate -- TRACE ROOT [RUNS]` parses TRACE (paths under ROOT count) RUNS times (default
//! 5) and prints the median lines/s and MB/s.

use seqstore_trace::strace::{parse, ParseConfig};
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(trace), Some(root)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: parse_rate TRACE ROOT [RUNS]");
    };
    let runs: usize = args.get(3).map(|r| r.parse()).transpose()?.unwrap_or(5);
    let text = std::fs::read_to_string(trace)?;
    let cfg = ParseConfig {
        roots: vec![root.clone()],
        marks: None,
        cwd: "/".into(),
    };
    let mut secs = Vec::new();
    let mut ops = 0;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        ops = parse(&text, &cfg)?.ops.len();
        secs.push(t.elapsed().as_secs_f64());
    }
    secs.sort_by(f64::total_cmp);
    let s = secs[secs.len() / 2];
    let lines = text.lines().count();
    println!(
        "{lines} lines, {:.1} MB, {ops} ops: {:.1} ms median of {runs} ({:.0} lines/s, {:.0} MB/s)",
        text.len() as f64 / 1e6,
        s * 1e3,
        lines as f64 / s,
        text.len() as f64 / s / 1e6
    );
    Ok(())
}
