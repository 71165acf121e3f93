//! Log entries for the log's own tests: an append of `payload` bytes on stream "s", its
//! subject and timestamp taken from the index, so that each entry is told apart on disk.

use openraft::EntryPayload;
use seqstore_raft::{Entry, LogId, Op, Request};

/// The entry `id` holding an append of `payload` bytes.
pub fn append_entry(id: LogId, payload: usize) -> Entry {
    Entry {
        log_id: id,
        payload: EntryPayload::Normal(Request {
            ts: id.index as i64,
            op: Op::Append {
                stream: "s".into(),
                subject: format!("k{}", id.index),
                headers: Vec::new(),
                payload: vec![b'v'; payload],
                ttl_ms: 0,
            },
        }),
    }
}
