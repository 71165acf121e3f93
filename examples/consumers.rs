//! A durable consumer: the store keeps what was delivered and what was acknowledged, so a
//! worker that restarts (or crashes) goes on from its ack floor and redelivers what was pending.
//!
//! The calls are NATS's consumer store (`UpdateDelivered`, `UpdateAcks`): your code decides
//! what to deliver next (here with `next_matching`); the store makes each decision durable.

use seqstore_core::{ConsumerConfig, Store};
use seqstore_fs::HostFs;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let open = |fs| Store::builder(fs).open();
    let mut store = open(HostFs::create(dir.path())?)?;
    for i in 1..=5 {
        store.append("jobs.resize", b"", format!("image {i}").as_bytes())?;
    }
    store.consumer_add(&ConsumerConfig::new("worker"))?;

    // deliver the first three jobs; acknowledge two of them
    let (mut dseq, mut from) = (0, 1);
    for _ in 0..3 {
        let msg = store.next_matching("jobs.>", from)?.expect("a job");
        dseq += 1;
        store.update_delivered("worker", dseq, msg.seq, 1, msg.ts)?;
        from = msg.seq + 1;
    }
    store.update_acks("worker", 1, 1)?;
    store.update_acks("worker", 2, 2)?;
    store.close()?;

    // after a restart: job 3 is still pending, and delivery goes on after job 3
    let store = open(HostFs::open(dir.path())?)?;
    let st = store.consumer_state("worker")?;
    println!("ack floor {:?}, delivered {:?}", st.ack_floor, st.delivered);
    println!("pending: {:?}", st.pending.keys().collect::<Vec<_>>());
    assert_eq!(st.ack_floor.stream, 2);
    assert_eq!(st.delivered.stream, 3);
    assert!(st.pending.contains_key(&3));
    store.close()?;
    Ok(())
}

#[test]
fn runs() {
    main().unwrap();
}
