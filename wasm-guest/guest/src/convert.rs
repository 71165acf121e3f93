//! The values that cross the boundary: store-core's errors, config, messages and recovery
//! report as their WIT types, and the WIT `fs` error codes as `io::ErrorKind`s.

use std::io;
use std::time::Duration;

use seqstore_core::Config;

use crate::{wit, wit_fs};

// ------------------------------------------------------------------ errors across the boundary

/// `io::ErrorKind` to the WIT code. Kinds the contract does not name become `other`; the
/// message keeps their text.
pub(crate) fn kind_to_code(kind: io::ErrorKind) -> wit_fs::ErrorCode {
    use io::ErrorKind as K;
    use wit_fs::ErrorCode as C;
    match kind {
        K::NotFound => C::NotFound,
        K::AlreadyExists => C::AlreadyExists,
        K::PermissionDenied => C::PermissionDenied,
        K::InvalidInput => C::InvalidInput,
        K::InvalidData => C::InvalidData,
        K::IsADirectory => C::IsADirectory,
        K::NotADirectory => C::NotADirectory,
        K::DirectoryNotEmpty => C::DirectoryNotEmpty,
        K::StorageFull => C::StorageFull,
        K::ReadOnlyFilesystem => C::ReadOnlyFilesystem,
        K::UnexpectedEof => C::UnexpectedEof,
        K::Interrupted => C::Interrupted,
        K::Unsupported => C::Unsupported,
        K::OutOfMemory => C::OutOfMemory,
        _ => C::Other,
    }
}

/// The WIT code back to `io::ErrorKind` (the inverse of [`kind_to_code`]).
pub(crate) fn code_to_kind(code: wit_fs::ErrorCode) -> io::ErrorKind {
    use io::ErrorKind as K;
    use wit_fs::ErrorCode as C;
    match code {
        C::NotFound => K::NotFound,
        C::AlreadyExists => K::AlreadyExists,
        C::PermissionDenied => K::PermissionDenied,
        C::InvalidInput => K::InvalidInput,
        C::InvalidData => K::InvalidData,
        C::IsADirectory => K::IsADirectory,
        C::NotADirectory => K::NotADirectory,
        C::DirectoryNotEmpty => K::DirectoryNotEmpty,
        C::StorageFull => K::StorageFull,
        C::ReadOnlyFilesystem => K::ReadOnlyFilesystem,
        C::UnexpectedEof => K::UnexpectedEof,
        C::Interrupted => K::Interrupted,
        C::Unsupported => K::Unsupported,
        C::OutOfMemory => K::OutOfMemory,
        C::Other => K::Other,
    }
}

pub(crate) fn from_fs_error(e: wit_fs::FsError) -> io::Error {
    io::Error::new(code_to_kind(e.code), e.message)
}

/// store-core's error as the WIT variant. The `&'static str` fields travel as strings.
pub(crate) fn to_wit_error(e: seqstore_core::Error) -> wit::Error {
    use seqstore_core::Error as E;
    match e {
        E::Io { op, path, source } => wit::Error::Io(wit::IoError {
            op: op.to_string(),
            path,
            code: kind_to_code(source.kind()),
            message: source.to_string(),
        }),
        E::Corrupt {
            file,
            offset,
            reason,
        } => wit::Error::Corrupt(wit::CorruptError {
            file,
            offset,
            reason,
        }),
        E::InvalidSubject { subject, reason } => {
            wit::Error::InvalidSubject(wit::InvalidSubjectError {
                subject,
                reason: reason.to_string(),
            })
        }
        E::TooLarge { what, len, max } => wit::Error::TooLarge(wit::TooLargeError {
            what: what.to_string(),
            len,
            max,
        }),
        E::NotFound { seq } => wit::Error::NotFound(seq),
        E::Poisoned => wit::Error::Poisoned,
        E::LimitExceeded { limit } => wit::Error::LimitExceeded(limit.to_string()),
        E::InvalidArgument(s) => wit::Error::InvalidArgument(s),
        E::InvalidConfig(s) => wit::Error::InvalidConfig(s),
        E::Closed => wit::Error::Closed,
        E::TooManyResults { max } => wit::Error::TooManyResults(max),
        E::SequenceMismatch { seq, last_seq } => {
            wit::Error::SequenceMismatch(wit::SequenceMismatchError { seq, last_seq })
        }
        // `Error` is non-exhaustive: a variant added later still crosses, as its text.
        E::WrongKey { file, reason } => wit::Error::WrongKey((file, reason)),
        other => wit::Error::Other(other.to_string()),
    }
}

pub(crate) fn nanos(ns: u64) -> Duration {
    Duration::from_nanos(ns)
}

/// The WIT config as store-core's; in a test-hooks build, with the ablation switch the host set
/// through `test-hooks.set-ablation` (the config record has no such field). The WIT's absent
/// `max-age` is store-core's zero (unlimited).
pub(crate) fn to_config(c: wit::Config) -> Config {
    use seqstore_core::{Discard, Limits, RecoveryMode, SyncPolicy};
    let limits = Limits::default()
        .with_max_msgs(c.limits.max_msgs)
        .with_max_bytes(c.limits.max_bytes)
        .with_max_age(c.limits.max_age.map(nanos).unwrap_or_default())
        .with_max_msgs_per_subject(c.limits.max_msgs_per_subject)
        .with_discard(match c.limits.discard {
            wit::Discard::Old => Discard::Old,
            wit::Discard::New => Discard::New,
        });
    let encryption = c.encryption.and_then(|e| {
        let cipher = match e.cipher {
            wit::Cipher::Xchacha20Poly1305 => seqstore_core::Cipher::XChaCha20Poly1305,
            wit::Cipher::Aes256Gcm => seqstore_core::Cipher::Aes256Gcm,
        };
        // a key of another length: no key, and `open` refuses the config (below)
        <[u8; 32]>::try_from(e.key.as_slice())
            .ok()
            .map(|k| seqstore_core::Encryption::new(cipher, k))
    });
    let cfg = Config::default()
        .with_block_size(c.block_size)
        .with_sync(match c.sync {
            wit::SyncPolicy::Always => SyncPolicy::Always,
            wit::SyncPolicy::Interval(ns) => SyncPolicy::Interval(nanos(ns)),
            wit::SyncPolicy::Never => SyncPolicy::Never,
        })
        .with_max_payload(c.max_payload)
        .with_max_headers(c.max_headers)
        .with_limits(limits)
        .with_recovery(match c.recovery {
            wit::RecoveryMode::TolerateCorruptTail => RecoveryMode::TolerateCorruptTail,
            wit::RecoveryMode::Strict => RecoveryMode::Strict,
        })
        // Too large for this address space: saturate, and `Config::validate` refuses it.
        .with_write_buffer(usize::try_from(c.write_buffer).unwrap_or(usize::MAX))
        .with_block_cache(c.block_cache)
        .with_entry_cache(c.entry_cache)
        .with_encryption(encryption)
        .with_compression(if c.compress {
            seqstore_core::Compression::Lz4
        } else {
            seqstore_core::Compression::None
        });
    #[cfg(feature = "test-hooks")]
    let cfg = cfg.with_ablation(crate::test_hooks::ablation());
    cfg
}

pub(crate) fn to_msg(m: seqstore_core::StoredMsg) -> wit::StoredMsg {
    wit::StoredMsg {
        seq: m.seq,
        ts: m.ts,
        subject: m.subject,
        headers: m.headers,
        payload: m.payload,
    }
}

pub(crate) fn to_report(r: &seqstore_core::RecoveryReport) -> wit::RecoveryReport {
    wit::RecoveryReport {
        used_index: r.used_index,
        tail_scanned: r.tail_scanned,
        index_rejected: r.index_rejected.clone(),
        purge_completed: r.purge_completed,
        purge_rolled_back: r.purge_rolled_back,
        cuts: r
            .cuts
            .iter()
            .map(|c| wit::Cut {
                file: c.file.clone(),
                offset: c.offset,
                dropped: c.dropped,
                reason: c.reason.clone(),
            })
            .collect(),
        skipped: r
            .skipped
            .iter()
            .map(|s| wit::SkippedRecord {
                file: s.file.clone(),
                offset: s.offset,
                reason: s.reason.clone(),
            })
            .collect(),
        lost: r
            .lost
            .iter()
            .map(|l| wit::SeqRange {
                first: l.first,
                last: l.last,
            })
            .collect(),
        removed_blank: r.removed_blank.clone(),
        ignored: r.ignored.clone(),
        out_of_order: r
            .out_of_order
            .iter()
            .map(|o| wit::OutOfOrderRecord {
                file: o.file.clone(),
                offset: o.offset,
                seq: o.seq,
            })
            .collect(),
        truncate_cleanup: r.truncate_cleanup,
    }
}

pub(crate) fn to_filtered(f: seqstore_core::FilteredState) -> wit::FilteredState {
    wit::FilteredState {
        msgs: f.msgs,
        first: f.first,
        last: f.last,
    }
}
