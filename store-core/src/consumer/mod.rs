//! Durable consumer state: what NATS keeps per consumer in
//! `server/store.go`'s `ConsumerState` — the last delivery (consumer and stream sequence),
//! the ack floor, the pending acks with their delivery times, the redelivery counts — stored
//! beside the stream in `consumers/` on the same [`crate::Fs`].
//!
//! - [`state`]: the state machine (`update_delivered`, `update_acks`, reset, and the clamp to
//!   the stream after purge, compact, limits and truncate). Pure: no I/O.
//! - `codec`: the byte layouts of the journal records and the checkpoint.
//! - `journal`: the files: one append-only, crc-checked journal per store and a compacted
//!   checkpoint written by temp file, fsync, rename and directory fsync; recovery replays the
//!   journal over the checkpoint and cuts a torn tail.
//!
//! The calls on [`crate::Store`] and what open does with these files are the store's
//! (`store/consumers.rs`, `store/consumer_checkpoint.rs`): this module knows nothing of the
//! store, so the store's modules import it and not the other way round.
//!
//! store-core/CONSUMERS.md has the rules, the write path and every fsync; ARCHITECTURE.md
//! ("Consumer files") the layouts.

pub(crate) mod codec;
pub(crate) mod journal;
pub mod state;
#[cfg(test)]
mod tests;

#[cfg(feature = "serde")]
pub use state::PendingAck;
pub use state::{
    AckPolicy, ConsumerConfig, ConsumerSettings, ConsumerState, Pending, SequencePair,
};

/// The directory holding the consumer files.
pub const CONSUMERS_DIR: &str = "consumers";

/// The longest consumer name accepted (bytes).
pub const MAX_NAME_LEN: usize = 64;

/// Checks that `name` is a safe file name and a NATS durable name: 1 to 64 bytes of ASCII
/// letters, digits, `-` and `_` (no `.`, no path separator, no wildcard, no whitespace).
pub fn check_name(name: &str) -> crate::Result<()> {
    let reason = if name.is_empty() {
        Some("empty")
    } else if name.len() > MAX_NAME_LEN {
        Some("longer than 64 bytes")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        Some("only ASCII letters, digits, '-' and '_' are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(crate::Error::InvalidConsumerName {
            name: name.chars().take(64).collect(),
            reason,
        }),
        None => Ok(()),
    }
}
