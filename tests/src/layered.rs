//! The native store on an encrypted and compressed filesystem ([`seqstore_core::CryptFs`] over
//! fault-fs): the same workloads, crash images and checker, on the bytes the layer writes.

use crate::*;
use seqstore_core::{internal::SeededEntropy, LayerConfig};
use seqstore_core::{Cipher, Compression, CryptFs, Encryption};
use std::sync::atomic::{AtomicU64, Ordering};

/// The key of the matrix's encrypted stores.
pub const MATRIX_KEY: [u8; 32] = *b"seqstore crash matrix test key!!";

/// The native `Store` through XChaCha20-Poly1305 and lz4. Each open draws its nonce prefix
/// from a seeded source, a new seed each open (never one twice: that would reuse nonces), so a
/// run in one process replays the same bytes.
pub struct Layered {
    opens: AtomicU64,
    /// Every nonce of every open, when recording.
    nonces: Option<seqstore_core::internal::NonceLog>,
}

impl Layered {
    /// A backend whose first open uses seed 1.
    pub const fn new() -> Self {
        Layered {
            opens: AtomicU64::new(1),
            nonces: None,
        }
    }

    /// A backend that records the nonces of all its opens (the workload's, and every
    /// recovery of a crash image) in one log: [`Layered::nonces`].
    pub fn recording() -> Self {
        Layered {
            opens: AtomicU64::new(1),
            nonces: Some(Default::default()),
        }
    }

    /// The nonces recorded so far.
    pub fn nonces(&self) -> Vec<[u8; 24]> {
        self.nonces
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .unwrap_or_default()
    }
}

impl Default for Layered {
    fn default() -> Self {
        Self::new()
    }
}

/// `cfg` with the matrix's encryption and compression.
pub fn layered_config(cfg: Config) -> Config {
    cfg.with_encryption(Some(Encryption::new(Cipher::XChaCha20Poly1305, MATRIX_KEY)))
        .with_compression(Compression::Lz4)
}

impl Backend for Layered {
    fn name(&self) -> &'static str {
        "layered"
    }
    fn open(&self, fs: FaultFs, cfg: Config, clock: ManualClock) -> Result<Box<StreamOps>, Error> {
        let cfg = layered_config(cfg);
        let seed = self.opens.fetch_add(1, Ordering::Relaxed);
        let entropy = SeededEntropy::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let layer = LayerConfig::of(&cfg);
        let fs = match &self.nonces {
            Some(log) => CryptFs::record_nonces_into(fs, layer, &entropy, log.clone()),
            None => CryptFs::with_entropy(fs, layer, &entropy),
        }
        .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        Ok(Box::new(
            Store::builder(fs).config(cfg).clock(clock).open()?,
        ))
    }
}

/// The store in the wasm guest with the matrix's encryption and compression in its WIT
/// config: the guest runs the layer itself (its nonce prefixes from WASI's random).
#[cfg(feature = "guest")]
pub struct LayeredGuest;

#[cfg(feature = "guest")]
impl Backend for LayeredGuest {
    fn name(&self) -> &'static str {
        "layered-guest"
    }
    fn open(&self, fs: FaultFs, cfg: Config, clock: ManualClock) -> Result<Box<StreamOps>, Error> {
        Guest.open(fs, layered_config(cfg), clock)
    }
}
