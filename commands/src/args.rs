//! The command line of the store commands (clap derive), generic over the flags a binary adds
//! to every command (`X`: the CLI's `--guest`; [`NoExtra`] for the WASI command).

use clap::{Args, Subcommand, ValueEnum};
use seqstore_core::{Config, SyncPolicy};
use std::path::PathBuf;
use std::time::Duration;

/// The default store directory: the conventional preopen under WASI
/// (`wasmtime run --dir HOST_DIR::/data …`), the working directory natively.
pub const DEFAULT_DIR: &str = if cfg!(target_os = "wasi") {
    "/data"
} else {
    "."
};

/// No flags beyond the shared ones (the WASI command's `X`).
#[derive(Args, Clone, Debug, Default)]
pub struct NoExtra {}

/// Where a command runs and how it prints: the flags every store command takes.
#[derive(Args, Clone, Debug)]
pub struct Target<X: Args> {
    /// The store directory.
    #[arg(long, short, default_value = DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Print the result as JSON, one line per value (seqstore-guest always does).
    #[arg(long)]
    pub json: bool,
    /// Durability of the writes: always (fsync each), never, interval (every second) or
    /// interval=MS.
    #[arg(long, value_parser = parse_sync, default_value = "always")]
    pub sync: SyncPolicy,
    /// Block size in bytes (default: the store's).
    #[arg(long, value_name = "BYTES")]
    pub block_size: Option<u64>,
    /// Encrypt the store at rest (XChaCha20-Poly1305) under the key in FILE: 32 raw bytes or
    /// 64 hex digits. Every later command on the store needs the same key (another is
    /// refused at open: wrong key).
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Compress what the store writes (lz4; a block is compressed whole when it is sealed, in
    /// 16 KiB frames, so that a read decodes 16 KiB). Reading needs no flag
    /// (each frame says whether it is compressed), but a compressed store without a key must
    /// be opened with `--compress`.
    #[arg(long)]
    pub compress: bool,
    /// How long to wait for a store another process has open (one process owns a store
    /// from open to close; commands on one store run one after another): e.g. 500ms, 30s;
    /// 0 fails at once.
    #[arg(long, value_name = "DURATION", value_parser = parse_wait, default_value = "5s")]
    pub wait: Duration,
    #[command(flatten)]
    pub extra: X,
}

impl<X: Args> Target<X> {
    /// `base` with this command's `--sync` and `--block-size`.
    pub fn config(&self, base: Config) -> Config {
        let block_size = self.block_size.unwrap_or(base.block_size);
        base.with_sync(self.sync).with_block_size(block_size)
    }

    /// [`Target::config`] with the encryption of `--key-file` and the compression of
    /// `--compress`.
    pub fn layered_config(&self, base: Config) -> crate::Result<Config> {
        let layer = self.layer()?;
        Ok(self
            .config(base)
            .with_encryption(layer.encryption)
            .with_compression(layer.compression))
    }

    /// The encryption and compression layer the flags ask for.
    pub fn layer(&self) -> crate::Result<seqstore_core::LayerConfig> {
        layer_of(self.key_file.as_deref(), self.compress)
    }
}

/// The encryption and compression layer of a `--key-file` and a `--compress` flag (the store
/// commands' and `snapshot`/`restore`'s).
pub fn layer_of(
    key_file: Option<&std::path::Path>,
    compress: bool,
) -> crate::Result<seqstore_core::LayerConfig> {
    let encryption = match key_file {
        Some(p) => Some(seqstore_core::Encryption::new(
            seqstore_core::Cipher::XChaCha20Poly1305,
            read_key(p)?,
        )),
        None => None,
    };
    let compression = if compress {
        seqstore_core::Compression::Lz4
    } else {
        seqstore_core::Compression::None
    };
    Ok(seqstore_core::LayerConfig {
        encryption,
        compression,
    })
}

/// Reads a key file: 32 raw bytes, or 64 hex digits (whitespace around them ignored).
fn read_key(path: &std::path::Path) -> crate::Result<[u8; 32]> {
    let err = |why: String| crate::Error::Key {
        path: path.to_path_buf(),
        why,
    };
    let raw = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    if let Ok(k) = <[u8; 32]>::try_from(raw.as_slice()) {
        return Ok(k);
    }
    let text = std::str::from_utf8(&raw).unwrap_or("").trim();
    if text.len() != 64 || !text.is_ascii() {
        return Err(err("expected 32 bytes or 64 hex digits".into()));
    }
    let mut key = [0u8; 32];
    for (i, b) in key.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| err("not hex".into()))?;
    }
    Ok(key)
}

/// The store commands.
#[derive(Subcommand, Clone, Debug)]
pub enum StoreCmd<X: Args> {
    /// Append a message (payload from --data or standard input); prints its sequence.
    Append {
        #[command(flatten)]
        at: Target<X>,
        /// The subject (tokens separated by '.').
        #[arg(long)]
        subject: String,
        /// The payload; read from standard input when absent.
        #[arg(long)]
        data: Option<String>,
        /// Opaque header bytes.
        #[arg(long, default_value = "")]
        headers: String,
        /// Time to live: the message expires this long after it is stored (e.g. 10s, 500ms,
        /// 2m, 1h; units ns, us, ms, s, m, h).
        #[arg(long, value_parser = parse_duration)]
        ttl: Option<Duration>,
    },
    /// Mark sequences used without a message (NATS SkipMsgs): SEQ must be the next sequence;
    /// prints the new last sequence. Durable when it returns.
    Skip {
        #[command(flatten)]
        at: Target<X>,
        seq: u64,
        /// How many sequences from SEQ.
        #[arg(long, default_value_t = 1)]
        count: u64,
    },
    /// Print the message with sequence SEQ.
    Get {
        #[command(flatten)]
        at: Target<X>,
        seq: u64,
    },
    /// Print the newest message of a subject, or the newest matching a filter with `*`/`>`
    /// wildcards (as NATS's last_by_subj).
    Last {
        #[command(flatten)]
        at: Target<X>,
        #[arg(long)]
        subject: String,
    },
    /// Print the first message at or after --from matching a filter (`*`, `>` wildcards;
    /// --filter may be repeated: a message matching any of them).
    Next {
        #[command(flatten)]
        at: Target<X>,
        #[arg(long, default_value = ">")]
        filter: Vec<String>,
        #[arg(long, default_value_t = 0)]
        from: u64,
    },
    /// Print the last message at or before --from (default: the last sequence) matching a
    /// filter (repeatable: any of them).
    Prev {
        #[command(flatten)]
        at: Target<X>,
        #[arg(long, default_value = ">")]
        filter: Vec<String>,
        #[arg(long)]
        from: Option<u64>,
    },
    /// Print how many messages at or after --from match a filter (repeatable: any of them),
    /// and the last sequence the count is valid through (NATS's NumPending).
    Pending {
        #[command(flatten)]
        at: Target<X>,
        #[arg(long, default_value = ">")]
        filter: Vec<String>,
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Count only the last message of each subject (subjects whose last message is at or
        /// after --from).
        #[arg(long)]
        last_per_subject: bool,
    },
    /// Print the first sequence whose timestamp is at or after TS (ns since the epoch), or
    /// the last sequence + 1 when none is (NATS's GetSeqFromTime).
    TimeSeq {
        #[command(flatten)]
        at: Target<X>,
        ts: i64,
    },
    /// Print the message count of each subject matching --filter.
    Subjects {
        #[command(flatten)]
        at: Target<X>,
        #[arg(long, default_value = ">")]
        filter: String,
    },
    /// Print the stream state.
    State {
        #[command(flatten)]
        at: Target<X>,
    },
    /// Print every message.
    Dump {
        #[command(flatten)]
        at: Target<X>,
    },
    /// Delete a message (a tombstone); --erase also overwrites its bytes on disk.
    Delete {
        #[command(flatten)]
        at: Target<X>,
        seq: u64,
        #[arg(long)]
        erase: bool,
    },
    /// Delete a message and overwrite its bytes on disk (`delete --erase`).
    Erase {
        #[command(flatten)]
        at: Target<X>,
        seq: u64,
    },
    /// Purge the stream (or, with --filter/--keep/--up-to, some of it). The sequence survives.
    #[command(alias = "purge-ex")]
    Purge {
        #[command(flatten)]
        at: Target<X>,
        #[arg(long)]
        filter: Option<String>,
        #[arg(long, default_value_t = 0)]
        keep: u64,
        #[arg(long, default_value_t = 0)]
        up_to: u64,
    },
    /// Remove every message below SEQ.
    Compact {
        #[command(flatten)]
        at: Target<X>,
        seq: u64,
    },
    /// Remove every message above SEQ (lowers the last sequence).
    Truncate {
        #[command(flatten)]
        at: Target<X>,
        seq: u64,
    },
    /// Make every write durable now.
    Sync {
        #[command(flatten)]
        at: Target<X>,
    },
    /// Write index.db (the state the next open starts from without scanning the blocks).
    Checkpoint {
        #[command(flatten)]
        at: Target<X>,
    },
    /// Print what recovery found when it opened the store.
    Report {
        #[command(flatten)]
        at: Target<X>,
    },
    /// Re-read every record and checksum without changing anything; exit code 1 on damage.
    Verify {
        #[command(flatten)]
        at: Target<X>,
    },
    /// Durable consumers: add, next (deliver), ack, info, list, rm.
    Consumer {
        #[command(subcommand)]
        cmd: ConsumerCmd<X>,
    },
}

/// How a consumer's messages are acknowledged.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AckArg {
    Explicit,
    All,
    None,
}

impl From<AckArg> for seqstore_core::AckPolicy {
    fn from(a: AckArg) -> Self {
        match a {
            AckArg::Explicit => seqstore_core::AckPolicy::Explicit,
            AckArg::All => seqstore_core::AckPolicy::All,
            AckArg::None => seqstore_core::AckPolicy::None,
        }
    }
}

/// The consumer subcommands.
#[derive(Subcommand, Clone, Debug)]
pub enum ConsumerCmd<X: Args> {
    /// Create a durable consumer (adding one that exists with the same settings does nothing).
    Add {
        #[command(flatten)]
        at: Target<X>,
        /// Its name: 1-64 ASCII letters, digits, '-' or '_'.
        name: String,
        /// How its messages are acknowledged.
        #[arg(long, value_enum, default_value = "explicit")]
        ack: AckArg,
        /// Deliveries after which a message is no longer pending (0: unlimited).
        #[arg(long, default_value_t = 0)]
        max_deliver: u64,
    },
    /// Deliver the consumer's next messages (records each delivery durably; prints them);
    /// exit code 1 when there was none to deliver.
    Next {
        #[command(flatten)]
        at: Target<X>,
        name: String,
        /// At most this many.
        #[arg(long, default_value_t = 1)]
        count: u64,
    },
    /// Acknowledge stream sequence SEQ (delivered to the consumer and pending).
    Ack {
        #[command(flatten)]
        at: Target<X>,
        name: String,
        seq: u64,
    },
    /// Print a consumer's configuration and state.
    Info {
        #[command(flatten)]
        at: Target<X>,
        name: String,
    },
    /// List the consumers.
    List {
        #[command(flatten)]
        at: Target<X>,
    },
    /// Delete a consumer and its state.
    Rm {
        #[command(flatten)]
        at: Target<X>,
        name: String,
    },
}

impl<X: Args> StoreCmd<X> {
    /// The directory and output flags of the command.
    pub fn target(&self) -> &Target<X> {
        use StoreCmd::*;
        match self {
            Append { at, .. } | Skip { at, .. } | Get { at, .. } | Last { at, .. } => at,
            Next { at, .. } | Prev { at, .. } | Pending { at, .. } | TimeSeq { at, .. } => at,
            Subjects { at, .. } | State { at } | Dump { at } | Delete { at, .. } => at,
            Erase { at, .. } | Purge { at, .. } | Compact { at, .. } | Truncate { at, .. } => at,
            Sync { at } | Checkpoint { at } | Report { at } | Verify { at } => at,
            Consumer { cmd } => cmd.target(),
        }
    }

    /// Whether the command makes a store in a missing or empty directory (only `append`
    /// does; every other command refuses a directory that is not a store).
    pub fn creates(&self) -> bool {
        matches!(self, StoreCmd::Append { .. })
    }
}

impl<X: Args> ConsumerCmd<X> {
    /// The directory and output flags of the command.
    pub fn target(&self) -> &Target<X> {
        use ConsumerCmd::*;
        match self {
            Add { at, .. } | Next { at, .. } | Ack { at, .. } | Info { at, .. } => at,
            List { at } | Rm { at, .. } => at,
        }
    }
}

/// A `--sync` value: `always`, `never`, `interval` (every second) or `interval=MS` (MS > 0).
pub fn parse_sync(s: &str) -> Result<SyncPolicy, String> {
    match s {
        "always" => Ok(SyncPolicy::Always),
        "never" => Ok(SyncPolicy::Never),
        "interval" => Ok(SyncPolicy::Interval(Duration::from_secs(1))),
        _ => match s.strip_prefix("interval=") {
            Some(ms) => ms
                .parse::<u64>()
                .ok()
                .filter(|&ms| ms > 0)
                .map(|ms| SyncPolicy::Interval(Duration::from_millis(ms)))
                .ok_or_else(|| format!("bad interval {ms:?} (milliseconds > 0)")),
            None => Err(format!(
                "{s:?}: expected always, never, interval or interval=MS"
            )),
        },
    }
}

/// `--wait`: a [`parse_duration`], or `0` (do not wait).
pub fn parse_wait(s: &str) -> Result<Duration, String> {
    match s.trim() {
        "0" => Ok(Duration::ZERO),
        _ => parse_duration(s),
    }
}

/// A duration on the command line: a number and a unit (ns, us, ms, s, m, h), e.g. `10s`,
/// `500ms`. Refuses zero, a missing unit and overflow.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and a unit, e.g. 10s or 500ms"))?;
    let per: u64 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(format!("{s:?}: unit must be ns, us, ms, s, m or h")),
    };
    let ns = n
        .checked_mul(per)
        .ok_or_else(|| format!("{s:?}: too long"))?;
    if ns == 0 {
        return Err(format!("{s:?}: a ttl must be positive"));
    }
    Ok(Duration::from_nanos(ns))
}
