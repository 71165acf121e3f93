//! What the stream state machine's design costs: N appends of 128 bytes to one stream on
//! host-fs, a snapshot build, and the open that rebuilds the stream from it (a restart).
//!
//! `cargo run --release -p seqstore-raft --example sm_restart -- 1000000 [DIR]`

use openraft::testing::log_id;
use openraft::EntryPayload;
use seqstore_fs::HostFs;
use seqstore_raft::{Entry, Op, Request, StreamConfig, StreamCore};
use std::time::Instant;

fn entry(i: u64, op: Op) -> Entry {
    Entry {
        log_id: log_id(1, 1, i),
        payload: EntryPayload::Normal(Request { ts: i as i64, op }),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(Ok(100_000), |s| s.parse())?;
    let base = args
        .next()
        .unwrap_or_else(|| std::env::temp_dir().display().to_string());
    let dir = tempfile::tempdir_in(base)?;
    let mut c = StreamCore::open(HostFs::create(dir.path())?)?;
    let config = StreamConfig::default();
    let name = "s".to_string();
    c.apply(entry(0, Op::CreateStream { name, config }))?;
    let t = Instant::now();
    for i in 1..=n {
        let op = Op::Append {
            stream: "s".into(),
            subject: format!("x.{}", i % 16),
            headers: Vec::new(),
            payload: vec![7; 128],
            ttl_ms: 0,
        };
        c.apply(entry(i, op))?;
    }
    let apply = t.elapsed();
    let t = Instant::now();
    let snap = c.build_snapshot()?;
    let build = t.elapsed();
    drop(c);
    let t = Instant::now();
    let c = StreamCore::open(HostFs::create(dir.path())?)?;
    let open = t.elapsed();
    assert_eq!(c.applied().0.map(|l| l.index), Some(n));
    println!(
        "{n} appends: apply {apply:.2?}, snapshot {} bytes built in {build:.2?}, open (restore) {open:.2?}",
        snap.data.len()
    );
    Ok(())
}
