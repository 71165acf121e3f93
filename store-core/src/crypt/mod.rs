//! Encryption at rest and compression: [`CryptFs`], an [`Fs`] over another `Fs` through which
//! every byte the store writes passes (blocks, `index.db`, consumer files, the purge
//! directories), so the store's logic does not change.
//!
//! A layered file is a header (magic, version, cipher, the file's nonce, a key check) followed
//! by append-only *frames*: each `write_all_at` appends frames of at most 16 KiB of plaintext
//! (lz4-compressed when that is smaller), each sealed with XChaCha20-Poly1305 under a fresh
//! nonce, its header (logical offset, lengths, the synced physical length) authenticated with
//! it; `set_len` appends a length frame. Physical bytes are never overwritten, so a torn write
//! can only damage bytes that were never synced. ARCHITECTURE.md ("Encryption at rest") has the
//! layout, the nonce argument and what the layer does not hide (names, sizes, timing).
//!
//! Open a store through it with [`crate::Store::open_layered`] and
//! [`crate::Config::encryption`] / [`crate::Config::compression`]; a plain [`crate::Store::open`]
//! with either set is refused, so a store is never written in the clear by mistake.

mod either;
mod file;
mod format;
#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod tests;

use crate::fs::{DirEntry, Fs, OpenOptions};
pub use either::CryptFile;
use either::Either;
use format::{Sealer, NONCE};
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The AEAD of an encrypted store. `#[non_exhaustive]`: more may come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Cipher {
    /// XChaCha20-Poly1305 (RustCrypto `chacha20poly1305`): a 192-bit nonce, so nonces can be
    /// drawn at random without a birthday bound to worry about.
    #[default]
    XChaCha20Poly1305,
    /// AES-256-GCM (RustCrypto `aes-gcm`, AES-NI and CLMUL where the CPU has them): faster
    /// on x86. Its 96-bit nonce is made safe by a subkey per layer instance (ARCHITECTURE.md).
    Aes256Gcm,
}

/// Encryption at rest: the cipher and the embedder's 256-bit key. Its `Debug` does not print
/// the key.
#[derive(Clone)]
pub struct Encryption {
    /// The AEAD.
    pub cipher: Cipher,
    key: [u8; 32],
}

impl Encryption {
    /// Encryption with `cipher` under `key` (32 bytes from the embedder: a KMS, a key file;
    /// never derive it from a guessable password without a KDF).
    pub fn new(cipher: Cipher, key: [u8; 32]) -> Self {
        Encryption { cipher, key }
    }

    /// The key, for an embedder that hands the configuration on (the wasm host to its guest).
    pub fn key(&self) -> &[u8; 32] {
        &self.key
    }
}

impl fmt::Debug for Encryption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Encryption")
            .field("cipher", &self.cipher)
            .field("key", &"<redacted>")
            .finish()
    }
}

impl PartialEq for Encryption {
    fn eq(&self, o: &Self) -> bool {
        // no early exit on the first differing byte
        let diff = self
            .key
            .iter()
            .zip(&o.key)
            .fold(0u8, |d, (a, b)| d | (a ^ b));
        self.cipher == o.cipher && diff == 0
    }
}
impl Eq for Encryption {}

/// Compression of what the layer writes. `#[non_exhaustive]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// None (the default).
    #[default]
    None,
    /// lz4 (`lz4_flex`) per frame of up to 16 KiB, kept only where it makes the frame smaller;
    /// the store rewrites a block written in smaller pieces whole when it is sealed, so that
    /// its frames are whole 16 KiB ones (ARCHITECTURE.md, "Sealing a block through the layer").
    Lz4,
}

/// Where the layer's randomness comes from: the nonce prefix of each [`CryptFs`] instance.
pub trait Entropy: Send + Sync {
    /// Fills `buf` with unpredictable bytes.
    fn fill(&self, buf: &mut [u8]) -> io::Result<()>;
}

/// The operating system's randomness (`getrandom`; on wasm32-wasip2, WASI's `random`).
#[derive(Clone, Copy, Debug, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&self, buf: &mut [u8]) -> io::Result<()> {
        getrandom::fill(buf).map_err(|e| io::Error::other(format!("getrandom: {e}")))
    }
}

/// A deterministic source for tests that must replay exactly (splitmix64 over a seed). **Never
/// use one seed twice under one key**: two instances drawing the same prefix would reuse nonces.
/// A test switch: only with the `ablation` feature (the crash tests'), never in a user's build.
#[cfg(any(test, feature = "ablation"))]
#[derive(Debug)]
pub struct SeededEntropy(Mutex<u64>);

#[cfg(any(test, feature = "ablation"))]
impl SeededEntropy {
    /// A source seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SeededEntropy(Mutex::new(seed))
    }
}

#[cfg(any(test, feature = "ablation"))]
impl Entropy for SeededEntropy {
    fn fill(&self, buf: &mut [u8]) -> io::Result<()> {
        let mut x = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for chunk in buf.chunks_mut(8) {
            *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = *x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
        Ok(())
    }
}

/// What a layer does: compared by [`crate::Store::open`] with the [`crate::Config`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LayerConfig {
    /// Encryption, if any.
    pub encryption: Option<Encryption>,
    /// Compression.
    pub compression: Compression,
}

impl LayerConfig {
    /// The layer a store's configuration asks for.
    pub fn of(cfg: &crate::Config) -> Self {
        LayerConfig {
            encryption: cfg.encryption.clone(),
            compression: cfg.compression,
        }
    }

    /// Whether it changes nothing (no encryption, no compression).
    pub fn is_plain(&self) -> bool {
        self.encryption.is_none() && self.compression == Compression::None
    }
}

/// Where [`CryptFs::record_nonces_into`] records nonces.
#[doc(hidden)]
pub type NonceLog = Arc<Mutex<Vec<[u8; 24]>>>;

/// What every file of one layer instance shares: the sealer and the nonce sequence.
pub(crate) struct Shared {
    sealer: Sealer,
    compression: Compression,
    /// Drawn once per instance from the entropy source.
    prefix: [u8; 16],
    counter: AtomicU64,
    /// Every nonce used, when a test asked ([`CryptFs::record_nonces`]).
    log: Option<NonceLog>,
}

impl Shared {
    /// A nonce never used before under this key: the instance's random prefix, then a counter.
    pub(crate) fn next_nonce(&self) -> io::Result<[u8; NONCE]> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        if n == u64::MAX {
            return Err(io::Error::other(
                "nonce counter exhausted: reopen the store",
            ));
        }
        let mut nonce = [0u8; NONCE];
        nonce[..16].copy_from_slice(&self.prefix);
        nonce[16..].copy_from_slice(&n.to_le_bytes());
        if let Some(log) = &self.log {
            log.lock().unwrap_or_else(|p| p.into_inner()).push(nonce);
        }
        Ok(nonce)
    }
}

/// The encrypting and compressing [`Fs`] over `F`. Cloning shares the instance (its nonce
/// sequence); each new instance draws a new nonce prefix. With neither encryption nor
/// compression it passes every call through unchanged (the files are plain store files).
pub struct CryptFs<F> {
    inner: F,
    cfg: LayerConfig,
    shared: Arc<Shared>,
}

impl<F: Clone> Clone for CryptFs<F> {
    fn clone(&self) -> Self {
        CryptFs {
            inner: self.inner.clone(),
            cfg: self.cfg.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<F: Fs> CryptFs<F> {
    /// The layer `cfg` over `inner`, its nonce prefix from the operating system.
    pub fn new(inner: F, cfg: LayerConfig) -> io::Result<Self> {
        Self::with_entropy(inner, cfg, &OsEntropy)
    }

    /// The layer with its nonce prefix from `entropy` (tests that replay exactly).
    pub fn with_entropy(inner: F, cfg: LayerConfig, entropy: &dyn Entropy) -> io::Result<Self> {
        Self::build(inner, cfg, entropy, None)
    }

    /// As [`CryptFs::with_entropy`], recording every nonce the instance uses (for tests:
    /// [`CryptFs::nonces_used`]).
    #[doc(hidden)]
    #[cfg(any(test, feature = "ablation"))]
    pub fn record_nonces(inner: F, cfg: LayerConfig, entropy: &dyn Entropy) -> io::Result<Self> {
        Self::build(inner, cfg, entropy, Some(NonceLog::default()))
    }

    /// As [`CryptFs::record_nonces`], into a log that many instances share (a test that
    /// checks every nonce of a run with crashes and reopens).
    #[doc(hidden)]
    #[cfg(any(test, feature = "ablation"))]
    pub fn record_nonces_into(
        inner: F,
        cfg: LayerConfig,
        entropy: &dyn Entropy,
        log: NonceLog,
    ) -> io::Result<Self> {
        Self::build(inner, cfg, entropy, Some(log))
    }

    fn build(
        inner: F,
        cfg: LayerConfig,
        entropy: &dyn Entropy,
        log: Option<NonceLog>,
    ) -> io::Result<Self> {
        let mut prefix = [0u8; 16];
        entropy.fill(&mut prefix)?;
        let sealer = Sealer::new(cfg.encryption.as_ref().map(|e| (e.cipher, &e.key)));
        if sealer.short_prefix() {
            prefix[15] = 0;
        }
        let shared = Arc::new(Shared {
            sealer,
            compression: cfg.compression,
            prefix,
            counter: AtomicU64::new(0),
            log,
        });
        Ok(CryptFs { inner, cfg, shared })
    }

    /// The nonces used so far, if recorded.
    #[doc(hidden)]
    pub fn nonces_used(&self) -> Vec<[u8; 24]> {
        self.shared
            .log
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .unwrap_or_default()
    }

    /// The filesystem below.
    pub fn inner(&self) -> &F {
        &self.inner
    }
}

impl<F: Fs> Fs for CryptFs<F> {
    type File = CryptFile<F::File>;

    fn open(&self, path: &str, opts: OpenOptions) -> io::Result<Self::File> {
        opts.validate()?;
        // the layer reads what it finds even through a handle opened write-only
        if self.cfg.is_plain() {
            return Ok(CryptFile(Either::Plain(self.inner.open(path, opts)?)));
        }
        let file = self.inner.open(path, opts.read(true))?;
        let framed = file::Framed::open(file, self.shared.clone(), opts.write)?;
        Ok(CryptFile(Either::Framed(framed)))
    }
    fn create_dir(&self, path: &str) -> io::Result<()> {
        self.inner.create_dir(path)
    }
    fn read_dir(&self, path: &str) -> io::Result<Vec<DirEntry>> {
        self.inner.read_dir(path)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &str) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &str) -> io::Result<()> {
        self.inner.remove_dir_all(path)
    }
    fn sync_dir(&self, path: &str) -> io::Result<()> {
        self.inner.sync_dir(path)
    }
    // the lock is the directory's, not data: the layer passes it through untouched
    fn lock(&self, name: &str) -> Result<crate::fs::FsLock, crate::fs::LockError> {
        self.inner.lock(name)
    }
    fn layer(&self) -> Option<&LayerConfig> {
        Some(&self.cfg)
    }

    fn wall_clock(&self) -> Option<Box<dyn crate::Clock>> {
        self.inner.wall_clock()
    }
}

/// What the layer found wrong, carried inside an `io::Error` (kind `InvalidData`) up to
/// [`crate::Error`], which turns it into [`crate::Error::WrongKey`] or
/// [`crate::Error::Corrupt`].
#[derive(Debug)]
pub(crate) enum Fault {
    /// The file was written under another key or cipher.
    WrongKey(String),
    /// The file does not start with a layer header (a plain store opened with a key?).
    NotLayered,
    /// A frame that does not authenticate where a later frame says the file was synced, or a
    /// header that cannot be this layer's.
    Tampered { offset: u64, reason: String },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::WrongKey(r) => write!(f, "wrong key: {r}"),
            Fault::NotLayered => f.write_str("not an encrypted or compressed seqstore file"),
            Fault::Tampered { offset, reason } => write!(f, "at offset {offset}: {reason}"),
        }
    }
}

impl std::error::Error for Fault {}

impl Fault {
    pub(crate) fn into_io(self) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, self)
    }
}

/// The layer's fault inside `e`, if it carries one.
pub(crate) fn fault_of(e: &io::Error) -> Option<&Fault> {
    e.get_ref()?.downcast_ref::<Fault>()
}

/// Refuses a configuration asking for a layer that `fs` does not apply (a plain
/// `Store::open` with a key: the store would be written in the clear), or a layer other than
/// the configured one.
pub(crate) fn check_layer<F: Fs>(fs: &F, cfg: &crate::Config) -> Result<(), String> {
    let want = LayerConfig::of(cfg);
    match fs.layer() {
        Some(have) if *have == want => Ok(()),
        Some(_) => {
            Err("the filesystem's encryption or compression differs from the config's".into())
        }
        None if want.is_plain() => Ok(()),
        None => Err("encryption or compression is set: open with Store::open_layered".into()),
    }
}

/// Whether `bytes` begin with the header of a file written through the layer (what a plain
/// open finds where it expects a block).
pub(crate) fn is_layered_header(bytes: &[u8]) -> bool {
    bytes.starts_with(&format::FILE_MAGIC)
}

impl<F: Fs> crate::Store<CryptFs<F>> {
    /// Opens (or creates) the store at the root of `fs` through the encryption and
    /// compression layer `cfg` asks for ([`crate::Config::encryption`],
    /// [`crate::Config::compression`]), with a logical clock as [`crate::Store::open`].
    pub fn open_layered(fs: F, cfg: crate::Config) -> crate::Result<Self> {
        let fs = CryptFs::new(fs, LayerConfig::of(&cfg))
            .map_err(|e| crate::Error::io("entropy", "", e))?;
        crate::Store::open(fs, cfg)
    }

    /// [`crate::Store::open_layered`] taking time from `clock`.
    pub fn open_layered_with_clock(
        fs: F,
        cfg: crate::Config,
        clock: Box<dyn crate::Clock>,
    ) -> crate::Result<Self> {
        let fs = CryptFs::new(fs, LayerConfig::of(&cfg))
            .map_err(|e| crate::Error::io("entropy", "", e))?;
        crate::Store::open_with_clock(fs, cfg, clock)
    }
}
