//! The headline property through openraft's trait on the real filesystem: after purging
//! everything, `get_log_state()` returns `last_log_id == last_purged_log_id`, before and after
//! a reopen, with the whole `LogId` (term, node, index); and the vote survives a reopen.

use openraft::storage::RaftLogStorage;
use openraft::testing::log_id;
use openraft::{EntryPayload, Vote};
use seqstore_fs::HostFs;
use seqstore_raft::{Entry, LogConfig, LogStore};
use std::path::Path;

fn open(dir: &Path) -> LogStore<HostFs> {
    LogStore::open(HostFs::open(dir).expect("dir"), LogConfig::default()).expect("open")
}

fn blank(term: u64, node: u64, index: u64) -> Entry {
    Entry {
        log_id: log_id(term, node, index),
        payload: EntryPayload::Blank,
    }
}

async fn append(log: &LogStore<HostFs>, entries: Vec<Entry>) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let cb = Box::new(move |r: std::io::Result<()>| {
        let _ = tx.send(r.map_err(|e| e.to_string()));
    });
    log.append_with(entries, cb).await.expect("append");
    rx.await.expect("callback").expect("durable");
}

#[tokio::test]
async fn purged_log_id_survives_reopen_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    append(&log, vec![blank(1, 3, 0), blank(1, 3, 1), blank(2, 7, 2)]).await;
    log.save_vote(&Vote::new(2, 7)).await.unwrap();
    log.purge(log_id(2, 7, 2)).await.unwrap();
    let st = log.get_log_state().await.unwrap();
    assert_eq!(st.last_purged_log_id, Some(log_id(2, 7, 2)));
    assert_eq!(st.last_log_id, st.last_purged_log_id);
    drop(log);

    let mut log = open(dir.path());
    let st = log.get_log_state().await.unwrap();
    assert_eq!(
        st.last_purged_log_id,
        Some(log_id(2, 7, 2)),
        "term and node kept"
    );
    assert_eq!(st.last_log_id, st.last_purged_log_id);
    assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(2, 7)));
    // a snapshot beyond the end: purge past the last entry
    log.purge(log_id(3, 1, 9)).await.unwrap();
    drop(log);

    let mut log = open(dir.path());
    let st = log.get_log_state().await.unwrap();
    assert_eq!(st.last_purged_log_id, Some(log_id(3, 1, 9)));
    assert_eq!(st.last_log_id, Some(log_id(3, 1, 9)));
    append(&log, vec![blank(3, 1, 10)]).await;
    drop(log);
    let mut log = open(dir.path());
    let st = log.get_log_state().await.unwrap();
    assert_eq!(st.last_log_id, Some(log_id(3, 1, 10)));
    assert_eq!(st.last_purged_log_id, Some(log_id(3, 1, 9)));
}
