//! A store on a real directory, written by several threads at once.
//!
//! `Store` is one handle that owns the directory (a second `Store::open` of it, in this process
//! or another, is `Error::Locked`); `SharedStore` is how threads share it. Under
//! `SyncPolicy::Always` every `append` returns once its message is durable, and concurrent
//! appends share their fsyncs (group commit).

use seqstore_core::surface::StreamStore;
use seqstore_core::{Config, SharedStore, Store, SyncPolicy};
use seqstore_fs::HostFs;
use std::thread;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let cfg = Config::default().with_sync(SyncPolicy::Always);
    // the builder's clock is the directory's wall clock (seqstore_fs::SystemClock): messages
    // get wall-clock timestamps, which TTLs and max_age use
    let store = Store::builder(HostFs::create(dir.path())?)
        .config(cfg.clone())
        .open()?;
    let mut shared = SharedStore::new(store);

    let writers: Vec<_> = (0..4)
        .map(|w| {
            let s = shared.clone();
            thread::spawn(move || -> Result<Vec<u64>, seqstore_core::Error> {
                (0..25)
                    .map(|i| s.append(&format!("orders.w{w}"), b"", format!("{w}/{i}").as_bytes()))
                    .collect()
            })
        })
        .collect();
    let mut seqs = Vec::new();
    for w in writers {
        seqs.extend(w.join().expect("a writer panicked")?);
    }
    // every append got its own sequence: 1..=100, none twice
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=100).collect::<Vec<_>>());

    // the reads: the operations every store has (`StreamStore`), on this thread's handle
    let st = shared.state()?;
    println!(
        "{} messages, sequences {}..={}",
        st.msgs, st.first_seq, st.last_seq
    );
    println!("orders.w2: {:?}", shared.filtered_state("orders.w2", 1)?);

    // the last handle's close writes index.db and releases the directory; reopening recovers
    // the same stream
    shared.close()?;
    let store = Store::builder(HostFs::open(dir.path())?)
        .config(cfg)
        .open()?;
    assert_eq!(store.state().last_seq, 100);
    println!("reopened: {:?}", store.recovery_report());
    store.close()?;
    Ok(())
}

#[test]
fn runs() {
    main().unwrap();
}
