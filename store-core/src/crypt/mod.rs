//! Encryption at rest and compression: [`CryptFs`], an [`Fs`] over another `Fs` through which
//! every byte the store writes passes (blocks, `index.db`, consumer files, the purge
//! directories), so the store's logic does not change.
//!
//! A layered file is a header (magic, version, cipher, the file's nonce, a key check) followed
//! by append-only *frames*: each `write_all_at` appends frames of at most 16 KiB of plaintext
//! (lz4-compressed when that is smaller), each sealed with XChaCha20-Poly1305 under a fresh
//! nonce, its header (logical offset, lengths, the synced physical length) authenticated with
//! it; `set_len` appends a length frame. Physical bytes are never overwritten, so a torn write
//! can only damage bytes that were never synced. store-core/CRYPT.md has the
//! nonce argument and what the layer does not hide (names, sizes, timing); ARCHITECTURE.md
//! ("Layered files") the layout.
//!
//! Open a store through it with [`crate::StoreBuilder::open_layered`] and
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
#[cfg(test)]
use crate::layer::Encryption;
pub(crate) use crate::layer::Fault;
pub(crate) use crate::layer::{Cipher, Compression, LayerConfig};
pub use either::CryptFile;
use either::Either;
use format::{Sealer, NONCE};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
            let z = crate::splitmix64(&mut x);
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
        Ok(())
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
    /// Every nonce used, when a test asked (`CryptFs::record_nonces`).
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
        let sealer = Sealer::new(cfg.encryption.as_ref().map(|e| (e.cipher, e.key())));
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

    fn parallel_reads(&self) -> bool {
        self.inner.parallel_reads()
    }
}
