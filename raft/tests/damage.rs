//! Damage to durable entries, told from a power cut (`seqstore_raft::damaged`): every record
//! carries the last sequence that was durable when it was written, so a hole at or below what a
//! later record vouches for is damage at rest. Seeded: a log of random batches, each synced, a
//! byte of a random record of any batch but the last (which nothing after it vouches for)
//! changed; the reopened log must hold the node (`damaged()`) until it holds its last index
//! again, durably, across reopens. The control (`Ablation::TrustDamage`) takes every hole for
//! a power cut's. The crash test (`crash.rs`) holds the other side: no power cut, at any
//! point, is taken for damage.

use openraft::testing::log_id;
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fault_fs::{FaultFs, Model, Rng};
use seqstore_raft::log::Ablation;
use seqstore_raft::{Entry, LogConfig, LogCore};

fn entry(index: u64) -> Entry {
    crate::entries::append_entry(log_id(1, 1, index), 60)
}

/// One block (large), so that every record is in `msgs/1.blk`.
fn cfg(ablation: Ablation) -> LogConfig {
    let mut c = LogConfig::default().with_block_size(1 << 20);
    c.ablation = ablation;
    c
}

const BLOCK: &str = "msgs/1.blk";

/// Where the data of the block ends: past its last non-zero byte (the rest is preallocated).
fn data_end(fs: &FaultFs) -> u64 {
    let Ok(f) = fs.open(BLOCK, OpenOptions::read_only()) else {
        return 0; // not written yet
    };
    let mut b = vec![0u8; f.len().unwrap() as usize];
    f.read_exact_at(&mut b, 0).unwrap();
    b.iter().rposition(|&x| x != 0).map_or(0, |p| p as u64 + 1)
}

/// Changes the byte at `at` of the block, durably (rot at rest).
fn rot(fs: &FaultFs, at: u64) {
    let f = fs
        .open(BLOCK, OpenOptions::new().read(true).write(true))
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
    f.sync_data().unwrap();
}

/// A log of 2..6 synced batches of 1..5 entries on `fs`; the byte range of each batch in the
/// block, and the last index.
fn write_batches(fs: &FaultFs, rng: &mut Rng) -> (Vec<(u64, u64)>, u64) {
    let mut core = LogCore::open(fs.clone(), cfg(Ablation::Full)).unwrap();
    let (mut ranges, mut next) = (Vec::new(), 0);
    for _ in 0..rng.within(2, 6) {
        let from = data_end(fs);
        let n = rng.within(1, 5);
        core.append_buffered((next..next + n).map(entry)).unwrap();
        core.sync().unwrap();
        next += n;
        ranges.push((from, data_end(fs)));
    }
    drop(core);
    (ranges, next - 1)
}

#[test]
fn damage_to_a_synced_batch_holds_the_node_until_it_is_filled_again() {
    let base: u64 = std::env::var("SEQSTORE_SEED").map_or(20261207, |s| s.parse().unwrap());
    println!("seed {base} (SEQSTORE_SEED replays)");
    for i in 0..60u64 {
        let seed = base.wrapping_add(i);
        let mut rng = Rng::new(seed);
        let fs = FaultFs::new(Model::Posix);
        let (ranges, last) = write_batches(&fs, &mut rng);
        // a byte of any batch but the last; the first batch's range starts after the header
        let (from, to) = ranges[rng.below(ranges.len() as u64 - 1) as usize];
        let at = rng.within(from.max(64), to - 1);
        rot(&fs, at);
        let ctx = format!("seed {seed}: byte {at} of batches {ranges:?}, last index {last}");

        // (on a copy: it cuts the log durably, the records that show the damage with it)
        let control = LogCore::open(fs.crash(), cfg(Ablation::TrustDamage)).unwrap();
        assert_eq!(control.damaged(), None, "{ctx}: the control found damage");
        let cut = control.log_state().1.map_or(0, |l| l.index + 1);
        assert!(cut <= last, "{ctx}: nothing was cut ({cut})");
        drop(control);

        let mut core = LogCore::open(fs.clone(), cfg(Ablation::Full)).unwrap();
        assert_eq!(core.damaged(), Some(last), "{ctx}: damage not found");
        // filled again up to the last index but one: still held, also across a reopen
        let next = core.next_index();
        core.append_buffered((next..last).map(entry)).unwrap();
        core.sync().unwrap();
        assert_eq!(core.damaged(), Some(last), "{ctx}: let go short of {last}");
        drop(core);
        let mut core = LogCore::open(fs.clone(), cfg(Ablation::Full)).unwrap();
        assert_eq!(
            core.damaged(),
            Some(last),
            "{ctx}: the hold did not survive a reopen"
        );
        // the last index, synced: let go, durably
        core.append_buffered([entry(last)]).unwrap();
        core.sync().unwrap();
        assert_eq!(core.damaged(), None, "{ctx}: still held at {last}");
        drop(core);
        let core = LogCore::open(fs.crash(), cfg(Ablation::Full)).unwrap();
        assert_eq!(core.damaged(), None, "{ctx}: held again after a power cut");
    }
}

/// A one-node cluster whose log finds damage is its own only copy: nothing can fill it, so it
/// is not held (held, it would never lead again). Its log: a stream created and 40 appends,
/// one entry each, in blocks of 1 KiB; the node stops, a byte of its first block's records
/// changes, and it starts again: damage found, and it leads.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_damaged_node_that_is_its_only_voter_leads_again() {
    use openraft::{BasicNode, Config, Raft};
    use seqstore_raft::{gate, LogStore, Op, Request, StreamConfig, StreamStateMachine};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    let (log_fs, sm_fs) = (FaultFs::new(Model::Posix), FaultFs::new(Model::Posix));
    let config = Arc::new(Config::default().validate().expect("config"));
    let start = |log_fs: &FaultFs, sm_fs: &FaultFs| {
        let log =
            LogStore::open(log_fs.clone(), cfg(Ablation::Full).with_inline_io(true)).expect("log");
        let sm = StreamStateMachine::open(sm_fs.clone())
            .expect("sm")
            .with_inline_io(true);
        (log, sm)
    };
    let (log, sm) = start(&log_fs, &sm_fs);
    let raft = Raft::new(1, config.clone(), crate::nowhere::Nowhere, log, sm)
        .await
        .expect("raft");
    raft.initialize(BTreeMap::from([(1, BasicNode::new("-"))]))
        .await
        .expect("initialize");
    let write = |op| Request { ts: 1, op };
    let create = Op::CreateStream {
        name: "s".into(),
        config: StreamConfig::default(),
    };
    raft.client_write(write(create)).await.expect("create");
    for i in 0..40u8 {
        let op = Op::Append {
            stream: "s".into(),
            subject: "x".into(),
            headers: Vec::new(),
            payload: vec![i; 40],
            ttl_ms: 0,
        };
        raft.client_write(write(op)).await.expect("append");
    }
    raft.shutdown().await.expect("shutdown");
    rot(&log_fs, 200);

    let (log_fs, sm_fs) = (log_fs.fork(), sm_fs.fork());
    let (log, sm) = start(&log_fs, &sm_fs);
    assert!(log.damaged().is_some(), "no damage found");
    let raft = Raft::new(1, config, crate::nowhere::Nowhere, log.clone(), sm)
        .await
        .expect("raft");
    gate::hold_elections(&raft, &log);
    let led = raft
        .wait(Some(std::time::Duration::from_secs(30)))
        .current_leader(1, "leads again")
        .await;
    assert!(led.is_ok(), "the only voter was held: {led:?}");
}
