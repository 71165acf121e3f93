//! One stream's operations, declared once: [`StreamStore`].
//!
//! The native [`Store`](crate::Store), the thread-shared
//! [`SharedStore`](crate::SharedStore), the wasm guest (`seqstore_wasm::GuestStore`) and the
//! CLI's cluster client all implement it, so a program (the CLI's commands, the crash matrix)
//! is written once against the trait and runs on any of them. An operation is declared in the
//! lists below and nowhere else on this side of the disk: the trait's method, the forwarding
//! in every implementation that only forwards, and the names the WIT interface is checked
//! against (`operation_names`) all come from them.
//!
//! Adding an operation: write it on `Store`; add one line to the group it belongs to below;
//! then the compiler names each implementation that genuinely differs (the guest's, with its
//! WIT function; the cluster client's). CONTRIBUTING.md lists the steps.

/// The operations of one group, handed to [`__stream_ops!`](crate::__stream_ops) in `$mode`.
///
/// The groups, by how a [`SharedStore`](crate::SharedStore) runs them: `acked` (writes it
/// sends through its group commit), `sync_purge` (writes that leave every sealed block's bytes
/// as they are: they need not wait for a streaming snapshot), `changes` (the other writes),
/// `reads`. Each line is `fn name(&mut self, args) -> T;`; the trait returns
/// `Result<T, Self::Error>`. Store-core's own method of the same name (same arguments) is the
/// reference; its documentation says the fsyncs.
#[doc(hidden)]
#[macro_export]
macro_rules! __stream_group {
    (acked $mode:ident $args:tt) => {
        $crate::__stream_ops! { $mode $args
            /// Appends a message (subject, NATS headers, payload); returns its sequence,
            /// `last_seq + 1`. Durable on return under `SyncPolicy::Always`.
            fn append(&mut self, subject: &str, headers: &[u8], payload: &[u8]) -> u64;
            /// `append` of a message that expires `ttl` after its timestamp.
            fn append_with_ttl(
                &mut self,
                subject: &str,
                headers: &[u8],
                payload: &[u8],
                ttl: ::core::time::Duration
            ) -> u64;
            /// A replica's append at the sequence and timestamp its leader gave it; a sequence
            /// other than `last_seq + 1` is `SequenceMismatch`.
            fn append_raw(
                &mut self,
                seq: u64,
                ts: i64,
                subject: &str,
                headers: &[u8],
                payload: &[u8]
            ) -> u64;
            /// Marks `seq` (which must be `last_seq + 1`) used without a message (NATS
            /// `SkipMsg`); durable on return in every sync policy.
            fn skip_msg(&mut self, seq: u64) -> u64;
            /// Marks `count` sequences from `first` (`last_seq + 1`) used (NATS `SkipMsgs`);
            /// durable on return; returns the new last sequence.
            fn skip_many(&mut self, first: u64, count: u64) -> u64;
            /// Records consumer `name`'s ack of delivery `dseq` (stream sequence `sseq`).
            fn update_acks(&mut self, name: &str, dseq: u64, sseq: u64) -> ();
            /// Records consumer `name`'s delivery `dseq` of stream sequence `sseq` (`dc`-th
            /// time, at `ts`).
            fn update_delivered(
                &mut self,
                name: &str,
                dseq: u64,
                sseq: u64,
                dc: u64,
                ts: i64
            ) -> ();
        }
    };
    (sync_purge $mode:ident $args:tt) => {
        $crate::__stream_ops! { $mode $args
            /// Makes everything written so far durable.
            fn sync(&mut self) -> ();
            /// Removes every message, keeping the sequence; crash-atomic. Returns how many.
            fn purge(&mut self) -> u64;
        }
    };
    (changes $mode:ident $args:tt) => {
        $crate::__stream_ops! { $mode $args
            /// Deletes message `seq` (a tombstone, durable per the sync policy).
            fn delete(&mut self, seq: u64) -> ();
            /// Deletes message `seq` and overwrites its bytes on disk with zeros.
            fn erase(&mut self, seq: u64) -> ();
            /// Removes the messages matching `filter` below `up_to_seq` (0: no bound), keeping
            /// the newest `keep` of each subject. Returns how many.
            fn purge_ex(&mut self, filter: &str, up_to_seq: u64, keep: u64) -> u64;
            /// Removes every message below `seq`. Returns how many.
            fn compact(&mut self, seq: u64) -> u64;
            /// Removes every message above `seq` (`last_seq` becomes `seq`). Returns how many.
            fn truncate(&mut self, seq: u64) -> u64;
            /// Runs time-driven work (`max_age`, ttls, the `Interval` sync): call it from a
            /// timer.
            fn tick(&mut self) -> ();
            /// Syncs, then writes `index.db` so the next open need not read the blocks.
            fn checkpoint(&mut self) -> ();
            /// Adds a durable consumer (an existing one with the same config: no change).
            fn consumer_add(&mut self, cfg: &$crate::ConsumerConfig) -> ();
            /// Changes a consumer's config (its ack policy stays).
            fn consumer_update(&mut self, cfg: &$crate::ConsumerConfig) -> ();
            /// Moves consumer `name` to start at stream sequence `start` again.
            fn consumer_reset(&mut self, name: &str, start: u64) -> ();
            /// Removes consumer `name`.
            fn consumer_delete(&mut self, name: &str) -> ();
        }
    };
    (reads $mode:ident $args:tt) => {
        $crate::__stream_ops! { $mode $args
            /// The message with sequence `seq` (`NotFound` if it is not stored).
            fn get(&mut self, seq: u64) -> $crate::StoredMsg;
            /// The newest message under `subject` (or matching it, with wildcards).
            fn last_for_subject(&mut self, subject: &str) -> ::core::option::Option<$crate::StoredMsg>;
            /// The first message at or after `from_seq` whose subject matches `filter`.
            fn next_matching(
                &mut self,
                filter: &str,
                from_seq: u64
            ) -> ::core::option::Option<$crate::StoredMsg>;
            /// `next_matching` for any of `filters` (an empty list: any subject).
            fn next_matching_multi(
                &mut self,
                filters: &[&str],
                from_seq: u64
            ) -> ::core::option::Option<$crate::StoredMsg>;
            /// The last message at or before `from_seq` whose subject matches `filter`.
            fn prev_matching(
                &mut self,
                filter: &str,
                from_seq: u64
            ) -> ::core::option::Option<$crate::StoredMsg>;
            /// `prev_matching` for any of `filters` (an empty list: any subject).
            fn prev_matching_multi(
                &mut self,
                filters: &[&str],
                from_seq: u64
            ) -> ::core::option::Option<$crate::StoredMsg>;
            /// Up to `max_msgs` messages at or after `from_seq` matching `filter`, within
            /// `max_bytes` (at least one when one matches).
            fn get_batch(
                &mut self,
                from_seq: u64,
                filter: &str,
                max_msgs: usize,
                max_bytes: u64
            ) -> ::std::vec::Vec<$crate::StoredMsg>;
            /// The first sequence with a timestamp at or after `ts` (`last_seq + 1` if none).
            fn seq_from_time(&mut self, ts: i64) -> u64;
            /// How many messages at or after `from_seq` match `filter`, with the first and last
            /// of their sequences (NATS's `FilteredState`).
            fn filtered_state(&mut self, filter: &str, from_seq: u64) -> $crate::FilteredState;
            /// `filtered_state` for any of `filters`.
            fn filtered_state_multi(
                &mut self,
                filters: &[&str],
                from_seq: u64
            ) -> $crate::FilteredState;
            /// Message counts per subject for the subjects matching `filter`.
            fn subjects_state(
                &mut self,
                filter: &str
            ) -> ::std::collections::BTreeMap<::std::string::String, u64>;
            /// `filtered_state` per subject matching `filter`.
            fn subjects_state_detail(
                &mut self,
                filter: &str
            ) -> ::std::collections::BTreeMap<::std::string::String, $crate::FilteredState>;
            /// The last sequence of each subject matching any of `filters`, at or below
            /// `max_seq` (0: no bound), at most `max_count` of them (0: no bound), ascending.
            fn multi_last_seqs(
                &mut self,
                filters: &[&str],
                max_seq: u64,
                max_count: usize
            ) -> ::std::vec::Vec<u64>;
            /// The last sequence of every subject, ascending (NATS's `AllLastSeqs`).
            fn all_last_seqs(&mut self) -> ::std::vec::Vec<u64>;
            /// The subject of stored message `seq`.
            fn subject_for_seq(&mut self, seq: u64) -> ::std::string::String;
            /// How many messages at or after `from_seq` match `filter` (the last of each
            /// subject only, with `last_per_subject`), and the last sequence it counted to.
            fn num_pending(
                &mut self,
                from_seq: u64,
                filter: &str,
                last_per_subject: bool
            ) -> (u64, u64);
            /// `num_pending` for any of `filters`.
            fn num_pending_multi(
                &mut self,
                from_seq: u64,
                filters: &[&str],
                last_per_subject: bool
            ) -> (u64, u64);
            /// Consumer `name`'s delivered and ack floors and its pending messages.
            fn consumer_state(&mut self, name: &str) -> $crate::ConsumerState;
            /// Consumer `name`'s config.
            fn consumer_config(&mut self, name: &str) -> $crate::ConsumerConfig;
        }
    };
}

/// Expands one group's list (from [`__stream_group!`](crate::__stream_group)) in one mode:
/// `declare ()` the trait's methods; `forward (Type, this => target, map_err)` methods that
/// call `<Type>::name(target, args…)` (with `this` bound to `self`) and map the error;
/// `forward_named (…)` the same, handing `map("name", result)` the whole result; `names ()` an
/// array of the operations' names.
#[doc(hidden)]
#[macro_export]
macro_rules! __stream_ops {
    (declare () $( $(#[$m:meta])* fn $name:ident(&mut self $(, $a:ident: $t:ty)*) -> $r:ty; )*) => {
        $( $(#[$m])* fn $name(&mut self $(, $a: $t)*) -> ::core::result::Result<$r, Self::Error>; )*
    };
    (forward ($ty:ty, $this:ident => $target:expr, $map:expr)
        $( $(#[$m:meta])* fn $name:ident(&mut self $(, $a:ident: $t:ty)*) -> $r:ty; )*) => {
        // where `Type` is `Self` and lacks the inherent method, the call resolves to this very
        // method: refused here (the lint is silent when the macro runs in another crate)
        $( #[deny(unconditional_recursion)]
        fn $name(&mut self $(, $a: $t)*) -> ::core::result::Result<$r, Self::Error> {
            let $this = self;
            <$ty>::$name($target $(, $a)*).map_err($map)
        } )*
    };
    (forward_named ($ty:ty, $this:ident => $target:expr, $map:expr)
        $( $(#[$m:meta])* fn $name:ident(&mut self $(, $a:ident: $t:ty)*) -> $r:ty; )*) => {
        $( #[deny(unconditional_recursion)]
        fn $name(&mut self $(, $a: $t)*) -> ::core::result::Result<$r, Self::Error> {
            let $this = self;
            let r = <$ty>::$name($target $(, $a)*);
            ($map)(stringify!($name), r)
        } )*
    };
    (names () $( $(#[$m:meta])* fn $name:ident(&mut self $(, $a:ident: $t:ty)*) -> $r:ty; )*) => {
        [$(stringify!($name)),*]
    };
}

/// Implements the listed groups of [`StreamStore`] methods by forwarding each to the method
/// of the same name of another type: `forward_stream_ops!([reads changes] Type, this =>
/// target, map_err)` writes, for every operation `op` of those groups, `fn op(&mut self,
/// args…) { let this = self; <Type>::op(target, args…).map_err(map_err) }`. Inside an
/// `impl StreamStore for …` block; the methods that are not forwarded are written there by
/// hand. `forward_stream_ops!(named [groups] Type, this => target, f)` hands `f` the
/// operation's name and its whole result instead (`f("get", result)`: a wrapper that logs).
#[macro_export]
macro_rules! forward_stream_ops {
    (named [$($group:ident)*] $ty:ty, $this:ident => $target:expr, $map:expr) => {
        $( $crate::__stream_group!($group forward_named ($ty, $this => $target, $map)); )*
    };
    ([$($group:ident)*] $ty:ty, $this:ident => $target:expr, $map:expr) => {
        $( $crate::__stream_group!($group forward ($ty, $this => $target, $map)); )*
    };
}

/// One stream's operations, the same on every layer that serves them: see the
/// [module](self). Each method is `Store`'s method of the same name, whose documentation says
/// what it fsyncs; an implementation returns its own error type for what its layer adds (a
/// guest's trap, a node's HTTP error).
pub trait StreamStore {
    /// What the layer returns when an operation fails.
    type Error: std::error::Error + Send + Sync + 'static;

    __stream_group!(acked declare ());
    __stream_group!(sync_purge declare ());
    __stream_group!(changes declare ());
    __stream_group!(reads declare ());

    /// The stream's counters (messages, bytes, first and last sequence, …).
    fn state(&mut self) -> Result<crate::StreamState, Self::Error>;
    /// The names of the stream's consumers.
    fn consumer_names(&mut self) -> Result<Vec<String>, Self::Error>;
    /// What the open's recovery found and repaired.
    fn recovery_report(&self) -> crate::RecoveryReport;
    /// Syncs, writes `index.db` and closes (releasing the store's lock).
    fn close(self) -> Result<(), Self::Error>
    where
        Self: Sized;
}

/// Every operation of [`StreamStore`], by its Rust name, in declaration order: what another
/// interface to the store (the guest's WIT) is checked against.
pub fn operation_names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    v.extend(__stream_group!(acked names ()));
    v.extend(__stream_group!(sync_purge names ()));
    v.extend(__stream_group!(changes names ()));
    v.extend(__stream_group!(reads names ()));
    v.extend(["state", "consumer_names", "recovery_report", "close"]);
    v
}

impl<F: crate::Fs> StreamStore for crate::Store<F> {
    type Error = crate::Error;

    forward_stream_ops!([acked sync_purge changes reads] crate::Store<F>, this => this, ::core::convert::identity);

    fn state(&mut self) -> Result<crate::StreamState, Self::Error> {
        Ok(crate::Store::state(self))
    }
    fn consumer_names(&mut self) -> Result<Vec<String>, Self::Error> {
        Ok(crate::Store::consumer_names(self))
    }
    fn recovery_report(&self) -> crate::RecoveryReport {
        crate::Store::recovery_report(self).clone()
    }
    fn close(self) -> Result<(), Self::Error> {
        crate::Store::close(self)
    }
}
