//! Values across the WIT boundary: store-core's types to the generated ones and back.

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::sync::Mutex;
use std::time::Duration;

use seqstore_core::Cut;
use seqstore_core::{
    Config, Discard, RecoveryMode, RecoveryReport, SeqRange, StoredMsg, StreamState, SyncPolicy,
};

use crate::bindings::exports::seqstore::store::stream as wit;
use crate::bindings::seqstore::store::fs::{ErrorCode, FsError};

/// `io::ErrorKind` to the WIT code (the guest has the inverse). Kinds the `Fs` contract does
/// not use travel as `other`; the message keeps their text.
pub(crate) fn kind_to_code(kind: io::ErrorKind) -> ErrorCode {
    use io::ErrorKind as K;
    match kind {
        K::NotFound => ErrorCode::NotFound,
        K::AlreadyExists => ErrorCode::AlreadyExists,
        K::PermissionDenied => ErrorCode::PermissionDenied,
        K::InvalidInput => ErrorCode::InvalidInput,
        K::InvalidData => ErrorCode::InvalidData,
        K::IsADirectory => ErrorCode::IsADirectory,
        K::NotADirectory => ErrorCode::NotADirectory,
        K::DirectoryNotEmpty => ErrorCode::DirectoryNotEmpty,
        K::StorageFull => ErrorCode::StorageFull,
        K::ReadOnlyFilesystem => ErrorCode::ReadOnlyFilesystem,
        K::UnexpectedEof => ErrorCode::UnexpectedEof,
        K::Interrupted => ErrorCode::Interrupted,
        K::Unsupported => ErrorCode::Unsupported,
        K::OutOfMemory => ErrorCode::OutOfMemory,
        _ => ErrorCode::Other,
    }
}

/// The WIT code to `io::ErrorKind`.
pub(crate) fn code_to_kind(code: ErrorCode) -> io::ErrorKind {
    use io::ErrorKind as K;
    match code {
        ErrorCode::NotFound => K::NotFound,
        ErrorCode::AlreadyExists => K::AlreadyExists,
        ErrorCode::PermissionDenied => K::PermissionDenied,
        ErrorCode::InvalidInput => K::InvalidInput,
        ErrorCode::InvalidData => K::InvalidData,
        ErrorCode::IsADirectory => K::IsADirectory,
        ErrorCode::NotADirectory => K::NotADirectory,
        ErrorCode::DirectoryNotEmpty => K::DirectoryNotEmpty,
        ErrorCode::StorageFull => K::StorageFull,
        ErrorCode::ReadOnlyFilesystem => K::ReadOnlyFilesystem,
        ErrorCode::UnexpectedEof => K::UnexpectedEof,
        ErrorCode::Interrupted => K::Interrupted,
        ErrorCode::Unsupported => K::Unsupported,
        ErrorCode::OutOfMemory => K::OutOfMemory,
        ErrorCode::Other => K::Other,
    }
}

/// An `io::Error` of the host's filesystem, for the guest. The message is the error's full
/// text, so the guest's `io::Error` displays as the host's did.
pub(crate) fn to_fs_error(e: &io::Error) -> FsError {
    FsError {
        code: kind_to_code(e.kind()),
        message: e.to_string(),
    }
}

/// Most distinct strings [`intern`] keeps. store-core uses a few dozen; the cap only matters
/// against a guest that makes up new ones on every call.
const INTERN_MAX: usize = 4096;
/// Longest string [`intern`] keeps.
const INTERN_MAX_LEN: usize = 256;

/// store-core's error has `&'static str` fields (the operation, a reason, a limit name). The
/// guest sends them as strings; this gives each distinct one a `'static` copy, leaked once
/// and reused, within a fixed budget so that a misbehaving guest cannot grow it without bound.
pub(crate) fn intern(s: &str) -> &'static str {
    static SEEN: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    if s.len() > INTERN_MAX_LEN {
        return "(name too long)";
    }
    // A poisoned lock only means another thread panicked mid-insert; the set is still valid.
    let mut guard = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let set = guard.get_or_insert_with(HashSet::new);
    if let Some(&known) = set.get(s) {
        return known;
    }
    if set.len() >= INTERN_MAX {
        return "(unrecognized)";
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    set.insert(leaked);
    leaked
}

/// The guest's error variant as store-core's `Error`.
pub(crate) fn from_wit_error(e: wit::Error) -> seqstore_core::Error {
    use seqstore_core::Error as E;
    match e {
        wit::Error::Io(io) => E::Io {
            op: intern(&io.op),
            path: io.path,
            source: io::Error::new(code_to_kind(io.code), io.message),
        },
        wit::Error::Corrupt(c) => E::Corrupt {
            file: c.file,
            offset: c.offset,
            reason: c.reason,
        },
        wit::Error::InvalidSubject(s) => E::InvalidSubject {
            subject: s.subject,
            reason: intern(&s.reason),
        },
        wit::Error::TooLarge(t) => E::TooLarge {
            what: intern(&t.what),
            len: t.len,
            max: t.max,
        },
        wit::Error::NotFound(seq) => E::NotFound { seq },
        wit::Error::Poisoned => E::Poisoned,
        wit::Error::LimitExceeded(l) => E::LimitExceeded { limit: intern(&l) },
        wit::Error::InvalidArgument(s) => E::InvalidArgument(s),
        wit::Error::InvalidConfig(s) => E::InvalidConfig(s),
        wit::Error::Closed => E::Closed,
        wit::Error::TooManyResults(max) => E::TooManyResults { max },
        wit::Error::SequenceMismatch(m) => E::SequenceMismatch {
            seq: m.seq,
            last_seq: m.last_seq,
        },
        wit::Error::WrongKey((file, reason)) => E::WrongKey { file, reason },
        // A store-core variant this interface does not carry yet: keep its text.
        wit::Error::Other(s) => E::InvalidArgument(format!("(guest error) {s}")),
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// store-core's `Config` for the guest. Its ablation switch (feature `ablation`) does not
/// travel in the config record: `GuestStore::open_inner` sets it through the test hooks.
pub(crate) fn to_wit_config(c: &Config) -> wit::Config {
    wit::Config {
        block_size: c.block_size,
        sync: match c.sync {
            SyncPolicy::Always => wit::SyncPolicy::Always,
            // A zero interval is refused by `Config::validate` in the guest, as natively.
            SyncPolicy::Interval(d) => wit::SyncPolicy::Interval(nanos(d)),
            SyncPolicy::Never => wit::SyncPolicy::Never,
        },
        max_payload: c.max_payload,
        max_headers: c.max_headers,
        limits: wit::Limits {
            max_msgs: c.limits.max_msgs,
            max_bytes: c.limits.max_bytes,
            // zero (unlimited) is the WIT's absent max-age
            max_age: (!c.limits.max_age.is_zero()).then(|| nanos(c.limits.max_age)),
            max_msgs_per_subject: c.limits.max_msgs_per_subject,
            discard: match c.limits.discard {
                Discard::Old => wit::Discard::Old,
                Discard::New => wit::Discard::New,
            },
        },
        recovery: match c.recovery {
            RecoveryMode::TolerateCorruptTail => wit::RecoveryMode::TolerateCorruptTail,
            RecoveryMode::Strict => wit::RecoveryMode::Strict,
        },
        write_buffer: c.write_buffer as u64,
        block_cache: c.block_cache,
        entry_cache: c.entry_cache,
        encryption: c.encryption.as_ref().map(|e| wit::Encryption {
            cipher: match e.cipher {
                seqstore_core::Cipher::Aes256Gcm => wit::Cipher::Aes256Gcm,
                _ => wit::Cipher::Xchacha20Poly1305,
            },
            key: e.key().to_vec(),
        }),
        compress: c.compression == seqstore_core::Compression::Lz4,
    }
}

pub(crate) fn from_wit_msg(m: wit::StoredMsg) -> StoredMsg {
    StoredMsg {
        seq: m.seq,
        ts: m.ts,
        subject: m.subject,
        headers: m.headers,
        payload: m.payload,
    }
}

/// The records of `get-batch-records` as messages, decoded (the crc checked again, natively:
/// what crossed the boundary is what is returned). A record that does not decode is the
/// guest's fault, `Corrupt` with its offset in the list.
pub(crate) fn decode_records(recs: &[u8]) -> Result<Vec<StoredMsg>, seqstore_core::Error> {
    use seqstore_core::internal::record::{decode, Decoded, Kind};
    let mut out = Vec::new();
    let mut at = 0;
    while at < recs.len() {
        match decode(&recs[at..]) {
            Decoded::Record(r) if r.kind == Kind::Msg => {
                out.push(r.owned_msg());
                at += r.len;
            }
            _ => {
                return Err(seqstore_core::Error::Corrupt {
                    file: "(get-batch-records from the guest)".into(),
                    offset: at as u64,
                    reason: "not a whole message record".into(),
                })
            }
        }
    }
    Ok(out)
}

pub(crate) fn from_wit_filtered(f: wit::FilteredState) -> seqstore_core::FilteredState {
    seqstore_core::FilteredState {
        msgs: f.msgs,
        first: f.first,
        last: f.last,
    }
}

pub(crate) fn from_wit_state(s: wit::StreamState) -> StreamState {
    StreamState {
        msgs: s.msgs,
        bytes: s.bytes,
        first_seq: s.first_seq,
        first_ts: s.first_ts,
        last_seq: s.last_seq,
        last_ts: s.last_ts,
        num_deleted: s.num_deleted,
        num_subjects: s.num_subjects,
    }
}

pub(crate) fn from_wit_subjects(v: Vec<(String, u64)>) -> BTreeMap<String, u64> {
    v.into_iter().collect()
}

pub(crate) fn from_wit_report(r: wit::RecoveryReport) -> RecoveryReport {
    RecoveryReport {
        used_index: r.used_index,
        tail_scanned: r.tail_scanned,
        index_rejected: r.index_rejected,
        purge_completed: r.purge_completed,
        purge_rolled_back: r.purge_rolled_back,
        cuts: r
            .cuts
            .into_iter()
            .map(|c| Cut {
                file: c.file,
                offset: c.offset,
                dropped: c.dropped,
                reason: c.reason,
            })
            .collect(),
        skipped: r
            .skipped
            .into_iter()
            .map(|s| seqstore_core::SkippedRecord {
                file: s.file,
                offset: s.offset,
                reason: s.reason,
            })
            .collect(),
        lost: r
            .lost
            .into_iter()
            .map(|l| SeqRange {
                first: l.first,
                last: l.last,
            })
            .collect(),
        removed_blank: r.removed_blank,
        ignored: r.ignored,
        out_of_order: r
            .out_of_order
            .into_iter()
            .map(|o| seqstore_core::OutOfOrderRecord {
                file: o.file,
                offset: o.offset,
                seq: o.seq,
            })
            .collect(),
        truncate_cleanup: r.truncate_cleanup,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_round_trip() {
        use io::ErrorKind as K;
        for k in [
            K::NotFound,
            K::AlreadyExists,
            K::PermissionDenied,
            K::InvalidInput,
            K::InvalidData,
            K::IsADirectory,
            K::NotADirectory,
            K::DirectoryNotEmpty,
            K::StorageFull,
            K::ReadOnlyFilesystem,
            K::UnexpectedEof,
            K::Interrupted,
            K::Unsupported,
            K::OutOfMemory,
            K::Other,
        ] {
            assert_eq!(code_to_kind(kind_to_code(k)), k);
        }
        assert_eq!(kind_to_code(K::TimedOut), ErrorCode::Other);
    }

    #[test]
    fn intern_reuses_and_bounds() {
        let a = intern("sync_data");
        let b = intern(&String::from("sync_data"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(intern(&"x".repeat(1000)), "(name too long)");
    }

    #[test]
    fn config_survives_the_trip() {
        let c = Config::default()
            .with_sync(SyncPolicy::Interval(Duration::from_millis(5)))
            .with_limits(
                seqstore_core::Limits::default()
                    .with_max_age(Duration::from_secs(3))
                    .with_discard(Discard::New),
            );
        let w = to_wit_config(&c);
        assert!(matches!(w.sync, wit::SyncPolicy::Interval(5_000_000)));
        assert_eq!(w.limits.max_age, Some(3_000_000_000));
        assert_eq!(w.write_buffer, c.write_buffer as u64);
        assert_eq!(w.block_cache, c.block_cache);
        assert_eq!(w.entry_cache, c.entry_cache);
    }
}
