//! Store configuration.

use std::time::Duration;

/// When appends are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Every append (and every other write) is fsynced before the call returns.
    Always,
    /// Writes are fsynced when at least this long has passed since the last sync; checked on
    /// every operation and by [`crate::Store::tick`] (store-core runs nothing in the background: an embedder
    /// that wants a timer calls `tick`). A crash may lose what was written since the last sync.
    Interval(Duration),
    /// Only [`crate::Store::sync`], [`crate::Store::close`] and the structural operations
    /// (purge, compact, truncate, purge_ex, erase) fsync.
    Never,
}

/// What a full stream does with a new message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Discard {
    /// Remove the oldest messages to make room (the default).
    #[default]
    Old,
    /// Refuse the new message with [`crate::Error::LimitExceeded`].
    New,
}

/// What recovery does with damage it finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Cut a block at its first bad record (recovery does not fsync the cut: after a crash the
    /// next open cuts again; ARCHITECTURE.md, "A crash during recovery"), skip a single bad
    /// record that is framed by good ones, and report every cut and every lost sequence in
    /// [`crate::RecoveryReport`]. A torn tail after a crash is the expected case.
    #[default]
    TolerateCorruptTail,
    /// Accept only a torn tail of the newest block; any other damage is a
    /// [`crate::Error::Corrupt`] naming the file and offset, and nothing is changed on disk.
    Strict,
}

/// Stream limits, re-enforced on open. Zero means unlimited, for every limit (the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Limits {
    /// Most messages kept.
    pub max_msgs: u64,
    /// Most bytes kept (encoded record sizes).
    pub max_bytes: u64,
    /// Oldest message age kept (zero: unlimited).
    pub max_age: Duration,
    /// Most messages kept per subject (the oldest of that subject is removed).
    pub max_msgs_per_subject: u64,
    /// Remove old messages, or refuse new ones, when `max_msgs`/`max_bytes` is reached.
    pub discard: Discard,
}

/// A stream's limits in plain numbers (zero is unlimited for each): the form they cross a wire
/// or a replicated log in (seqstore-raft's stream config, the server's and client's JSON).
/// [`StreamConfig::config`] is the store configuration they make.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
pub struct StreamConfig {
    /// Most messages kept.
    pub max_msgs: u64,
    /// Most bytes kept.
    pub max_bytes: u64,
    /// Oldest age kept, in ms of the clock that stamps the messages.
    pub max_age_ms: u64,
    /// Most messages kept per subject.
    pub max_msgs_per_subject: u64,
    /// Refuse new messages when full, instead of removing the oldest.
    pub discard_new: bool,
    /// Largest payload accepted (0: the store's default, 1 MiB).
    pub max_payload: u32,
}

impl StreamConfig {
    /// Its limits.
    pub fn limits(&self) -> Limits {
        Limits::default()
            .with_max_msgs(self.max_msgs)
            .with_max_bytes(self.max_bytes)
            .with_max_age(Duration::from_millis(self.max_age_ms))
            .with_max_msgs_per_subject(self.max_msgs_per_subject)
            .with_discard(match self.discard_new {
                true => Discard::New,
                false => Discard::Old,
            })
    }

    /// `Config::default()` with these limits and payload size.
    pub fn config(&self) -> Config {
        let cfg = Config::default().with_limits(self.limits());
        match self.max_payload {
            0 => cfg,
            n => cfg.with_max_payload(n),
        }
    }
}

/// How to run a store: `Config::default()`, changed with the `with_*` setters (or by assigning
/// the public fields).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// A block is rolled over once it holds at least this many bytes (default 8 MiB).
    pub block_size: u64,
    /// Durability of appends (default `Always`: nothing acknowledged is ever lost).
    pub sync: SyncPolicy,
    /// Largest payload accepted (default 1 MiB, at most 32 MiB).
    pub max_payload: u32,
    /// Largest header block accepted (default 64 KiB, at most 1 MiB).
    pub max_headers: u32,
    /// Stream limits.
    pub limits: Limits,
    /// Recovery's tolerance for damage.
    pub recovery: RecoveryMode,
    /// Bytes of appends buffered in memory before they are written to the block file (default
    /// 256 KiB). `Always` writes and syncs every append regardless.
    pub write_buffer: usize,
    /// Bytes of sealed blocks kept in memory to serve reads (default 64 MiB; 0: none). A
    /// block is cached whole once reads of it by `pread` have cost about as much as loading
    /// it; when the cache is full it displaces the coldest cached block (the fewest recent
    /// reads) only if it is read at least twice as often, so reads spread over a stream larger
    /// than the cache settle on a fixed set. See `Store::get`.
    pub block_cache: u64,
    /// Bytes of zeros written ahead of the newest block's end, in steps of this size, under
    /// `Always` and `Interval` (default 1 MiB; 0: never; under `Never` only with
    /// [`Config::preallocate_under_never`]; never through encryption or compression). An
    /// fdatasync after a write inside the file's length has no new file length to commit,
    /// so on common filesystems (ext4, xfs) it is cheaper than one after a write that
    /// extends the file. A block is cut back to its records when it is sealed and at
    /// checkpoint; recovery reads the zeros as unwritten space.
    pub preallocate: u64,
    /// Write [`Config::preallocate`]'s zeros under `SyncPolicy::Never` too (default
    /// `false`: without fsyncs there is nothing to make cheaper). For an embedder that calls
    /// [`crate::Store::sync`] itself after each batch of appends, as a raft log does.
    pub preallocate_under_never: bool,
    /// Heap bytes of sealed blocks' in-memory entries (where each record is, its subject,
    /// whether it is deleted; packed, about 5 bytes a message for a dense stream, at most 8
    /// but for blocks too irregular to pack, which take 32) kept loaded (default 8 MiB, about
    /// 1.5 million messages; 0: only the newest block's). Beyond it the least recently used block's
    /// entries are dropped, keeping only its deleted sequences, and read again from the block
    /// on its next use (one scan of the block), so memory does not grow with the stream.
    pub entry_cache: u64,
    /// Block files held open (default 64, at least 2). A stream of more blocks opens the
    /// others on use and closes the least recently used, so its size is not bounded by the
    /// process's limit on open files. Beyond this count the store also holds the newest
    /// block, and sealed blocks written since their last fsync (under `Never` or `Interval`),
    /// which a read does not close and the next roll to a new block fsyncs and closes: at most
    /// about one and a half times this in all. A snapshot (`snapshot_to`) holds every block
    /// open while it runs.
    pub open_blocks: usize,
    /// Threads that scan blocks in a rebuild (an open that cannot use `index.db`, or a
    /// restore), while the opening thread applies what they found in order (default 2; no
    /// more than the CPUs the process may use, nor 64; 0 or 1: the opening thread scans,
    /// alone). Used where the `Fs` may be read from several threads
    /// ([`crate::Fs::parallel_reads`]: a real directory) and the blocks, counted at
    /// `block_size` each, come to 4 MiB or more; a wasm guest, which cannot start threads,
    /// rebuilds on its own thread. Each thread holds one block's entries and a 1 MiB read
    /// buffer while it works; all end before `open` returns.
    pub rebuild_threads: usize,
    /// Encryption at rest (default none): open the store with `StoreBuilder::open_layered`,
    /// which puts a [`crate::CryptFs`] under it. A wrong key is [`crate::Error::WrongKey`] at
    /// open.
    pub encryption: Option<crate::Encryption>,
    /// Compression of what the store writes (default none; lz4, a block compressed whole when
    /// it is sealed, in independently read 16 KiB frames), through the same layer as
    /// encryption: open with `StoreBuilder::open_layered`.
    pub compression: crate::Compression,
    /// Fsync call sites to skip, for the crash-proof tests and the demo only. See
    /// [`crate::Ablation`]: **it breaks durability on purpose**.
    #[cfg(feature = "ablation")]
    pub ablation: crate::Ablation,
}

/// The hard upper bound of `max_payload`.
pub const MAX_PAYLOAD_LIMIT: u32 = 32 << 20;
/// The hard upper bound of `max_headers`.
pub const MAX_HEADERS_LIMIT: u32 = 1 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            block_size: 8 << 20,
            sync: SyncPolicy::Always,
            max_payload: 1 << 20,
            max_headers: 64 << 10,
            limits: Limits::default(),
            recovery: RecoveryMode::default(),
            write_buffer: 256 << 10,
            block_cache: 64 << 20,
            preallocate: 1 << 20,
            preallocate_under_never: false,
            entry_cache: 8 << 20,
            open_blocks: 64,
            rebuild_threads: 2,
            encryption: None,
            compression: crate::Compression::None,
            #[cfg(feature = "ablation")]
            ablation: crate::Ablation::Full,
        }
    }
}

impl Config {
    /// Whether the store writes through the crypt layer (encryption or compression asked for;
    /// `Store::open` refuses a filesystem that does not apply exactly that layer).
    pub(crate) fn layered(&self) -> bool {
        self.encryption.is_some() || self.compression != crate::Compression::None
    }

    /// Checks the bounds ([`crate::Error::InvalidConfig`]); `Store::open` does.
    pub fn validate(&self) -> crate::Result<()> {
        self.check().map_err(crate::Error::InvalidConfig)
    }

    fn check(&self) -> Result<(), String> {
        if self.block_size < 1024 || self.block_size > (1 << 32) {
            return Err(format!(
                "block_size {} outside 1 KiB..=4 GiB",
                self.block_size
            ));
        }
        if self.max_payload > MAX_PAYLOAD_LIMIT {
            return Err(format!("max_payload above {MAX_PAYLOAD_LIMIT}"));
        }
        if self.max_headers > MAX_HEADERS_LIMIT {
            return Err(format!("max_headers above {MAX_HEADERS_LIMIT}"));
        }
        if let SyncPolicy::Interval(d) = self.sync {
            if d.is_zero() {
                return Err("sync interval must be > 0 (use Always)".into());
            }
        }
        if self.open_blocks < 2 {
            return Err("open_blocks below 2".into());
        }
        if self.write_buffer > 64 << 20 {
            return Err("write_buffer above 64 MiB".into());
        }
        Ok(())
    }
}

/// Builder-style setters: `Config::default().with_sync(SyncPolicy::Never).with_block_size(1 << 20)`.
/// The fields stay public for reading and assigning; `Config` is `#[non_exhaustive]`, so a
/// struct literal outside this crate does not compile and a new field is not a breaking change.
impl Config {
    /// Sets [`Config::block_size`].
    pub fn with_block_size(mut self, bytes: u64) -> Self {
        self.block_size = bytes;
        self
    }
    /// Sets [`Config::sync`].
    pub fn with_sync(mut self, sync: SyncPolicy) -> Self {
        self.sync = sync;
        self
    }
    /// Sets [`Config::max_payload`].
    pub fn with_max_payload(mut self, bytes: u32) -> Self {
        self.max_payload = bytes;
        self
    }
    /// Sets [`Config::max_headers`].
    pub fn with_max_headers(mut self, bytes: u32) -> Self {
        self.max_headers = bytes;
        self
    }
    /// Sets [`Config::limits`].
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
    /// Sets [`Config::recovery`].
    pub fn with_recovery(mut self, recovery: RecoveryMode) -> Self {
        self.recovery = recovery;
        self
    }
    /// Sets [`Config::write_buffer`].
    pub fn with_write_buffer(mut self, bytes: usize) -> Self {
        self.write_buffer = bytes;
        self
    }
    /// Sets [`Config::block_cache`].
    pub fn with_block_cache(mut self, bytes: u64) -> Self {
        self.block_cache = bytes;
        self
    }
    /// Sets [`Config::preallocate`].
    pub fn with_preallocate(mut self, bytes: u64) -> Self {
        self.preallocate = bytes;
        self
    }
    /// Sets [`Config::preallocate_under_never`].
    pub fn with_preallocate_under_never(mut self, on: bool) -> Self {
        self.preallocate_under_never = on;
        self
    }
    /// Sets [`Config::entry_cache`].
    pub fn with_entry_cache(mut self, bytes: u64) -> Self {
        self.entry_cache = bytes;
        self
    }
    /// Sets [`Config::open_blocks`].
    pub fn with_open_blocks(mut self, files: usize) -> Self {
        self.open_blocks = files;
        self
    }
    /// Sets [`Config::rebuild_threads`].
    pub fn with_rebuild_threads(mut self, threads: usize) -> Self {
        self.rebuild_threads = threads;
        self
    }
    /// Sets [`Config::encryption`] (`None`: not encrypted).
    pub fn with_encryption(mut self, encryption: Option<crate::Encryption>) -> Self {
        self.encryption = encryption;
        self
    }
    /// Sets [`Config::compression`].
    pub fn with_compression(mut self, compression: crate::Compression) -> Self {
        self.compression = compression;
        self
    }
    /// Sets [`Config::ablation`]: **it breaks durability on purpose**.
    #[cfg(feature = "ablation")]
    pub fn with_ablation(mut self, ablation: crate::Ablation) -> Self {
        self.ablation = ablation;
        self
    }
}

/// Builder-style setters, as for [`Config`]; `Limits` is `#[non_exhaustive]` too. Zero is
/// "unlimited" for every limit.
impl Limits {
    /// Sets [`Limits::max_msgs`] (0: unlimited).
    pub fn with_max_msgs(mut self, n: u64) -> Self {
        self.max_msgs = n;
        self
    }
    /// Sets [`Limits::max_bytes`] (0: unlimited).
    pub fn with_max_bytes(mut self, n: u64) -> Self {
        self.max_bytes = n;
        self
    }
    /// Sets [`Limits::max_age`] (zero: unlimited).
    pub fn with_max_age(mut self, age: Duration) -> Self {
        self.max_age = age;
        self
    }
    /// Sets [`Limits::max_msgs_per_subject`] (0: unlimited).
    pub fn with_max_msgs_per_subject(mut self, n: u64) -> Self {
        self.max_msgs_per_subject = n;
        self
    }
    /// Sets [`Limits::discard`].
    pub fn with_discard(mut self, discard: Discard) -> Self {
        self.discard = discard;
        self
    }
}

impl crate::LayerConfig {
    /// The layer a store's configuration asks for.
    pub fn of(cfg: &crate::Config) -> Self {
        crate::LayerConfig {
            encryption: cfg.encryption.clone(),
            compression: cfg.compression,
        }
    }
}

impl Config {
    /// Refuses a configuration asking for a layer other than `have`, the one the filesystem
    /// applies ([`crate::Fs::layer`]): a plain open with a key would write the store in the
    /// clear.
    pub(crate) fn check_layer(&self, have: Option<&crate::LayerConfig>) -> Result<(), String> {
        let want = crate::LayerConfig::of(self);
        match have {
            Some(have) if *have == want => Ok(()),
            Some(_) => {
                Err("the filesystem's encryption or compression differs from the config's".into())
            }
            None if want.is_plain() => Ok(()),
            None if cfg!(feature = "crypt") => {
                Err("encryption or compression is set: open with StoreBuilder::open_layered".into())
            }
            None => Err(
                "encryption or compression is set, but seqstore-core was built without \
                     its `crypt` feature"
                    .into(),
            ),
        }
    }
}
