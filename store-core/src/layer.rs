//! What the encryption and compression layer is configured to do, and what it reports when a
//! file does not pass it: plain data types, apart from the layer itself (`crypt`), so that the
//! filesystem trait (`Fs::layer`), the configuration and the error type name them without
//! depending on the cipher code, nor it on them in a circle.

use std::fmt;
use std::io;

/// The AEAD of an encrypted store. `#[non_exhaustive]`: more may come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Cipher {
    /// XChaCha20-Poly1305 (RustCrypto `chacha20poly1305`): a 192-bit nonce, so nonces can be
    /// drawn at random without a birthday bound to worry about.
    #[default]
    XChaCha20Poly1305,
    /// AES-256-GCM (RustCrypto `aes-gcm`, AES-NI and CLMUL where the CPU has them): faster
    /// on x86. Its 96-bit nonce is made safe by a subkey per layer instance
    /// (store-core/CRYPT.md, "Nonces").
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
    /// its frames are whole 16 KiB ones (store-core/CRYPT.md, "Sealing a block through the layer").
    Lz4,
}

/// What a layer does: compared by [`crate::Store::open`] with the [`crate::Config`]
/// ([`LayerConfig::of`]).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LayerConfig {
    /// Encryption, if any.
    pub encryption: Option<Encryption>,
    /// Compression.
    pub compression: Compression,
}

impl LayerConfig {
    /// Whether it changes nothing (no encryption, no compression).
    pub fn is_plain(&self) -> bool {
        self.encryption.is_none() && self.compression == Compression::None
    }
}

/// What the layer found wrong, carried inside an `io::Error` (kind `InvalidData`) up to
/// [`crate::Error`], which turns it into [`crate::Error::WrongKey`] or
/// [`crate::Error::Corrupt`].
#[derive(Debug)]
#[cfg_attr(not(feature = "crypt"), allow(dead_code))] // only the layer makes them
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
    #[cfg_attr(not(feature = "crypt"), allow(dead_code))]
    pub(crate) fn into_io(self) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, self)
    }
}

/// The layer's fault inside `e`, if it carries one.
pub(crate) fn fault_of(e: &io::Error) -> Option<&Fault> {
    e.get_ref()?.downcast_ref::<Fault>()
}

/// The first bytes of every file the layer writes (`crypt`'s file header).
pub(crate) const FILE_MAGIC: [u8; 8] = *b"SQSTCRYP";

/// Whether `bytes` begin with the header of a file written through the layer (what a plain
/// open finds where it expects a block).
pub(crate) fn is_layered_header(bytes: &[u8]) -> bool {
    bytes.starts_with(&FILE_MAGIC)
}
