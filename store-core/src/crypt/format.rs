//! The bytes of a layered file: the file header, the frame header, and sealing a frame (an
//! AEAD, or a crc32 when the layer compresses without encrypting). ARCHITECTURE.md, "Layered
//! files", draws the layout.

// Parses bytes read from a disk: no index that a damaged file could put out of range (the
// headers are read as arrays, whose constant indices the compiler checks).
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use super::{Cipher, Compression, Fault};
use aes_gcm::aes::cipher::BlockCipherEncrypt;
use aes_gcm::aes::Aes256;
use aes_gcm::Aes256Gcm;
use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use std::sync::{Arc, Mutex};

/// `magic[8] version[1] cipher[1] zero[6] nonce[24] tag[16]`.
pub(super) const FILE_HDR: usize = 56;
use crate::layer::FILE_MAGIC;
pub(super) const VERSION: u8 = 1;
/// `magic[4] kind[1] flags[1] zero[2] logical[8] stored[4] plain[4] synced[8] nonce[24]`.
pub(super) const FRAME_HDR: usize = 56;
pub(super) const FRAME_MAGIC: [u8; 4] = *b"SQFR";
pub(super) const TAG: usize = 16;
pub(super) const NONCE: usize = 24;
/// Most plaintext bytes one frame carries: a read decrypts at most this much more than it
/// asked for.
pub(super) const FRAME_MAX: usize = 16 << 10;
/// A frame's bytes beyond its stored body.
pub(super) const FRAME_OVERHEAD: usize = FRAME_HDR + TAG;

pub(super) const KIND_DATA: u8 = 0;
pub(super) const KIND_LEN: u8 = 1;
pub(super) const FLAG_LZ4: u8 = 1;

/// The header of one frame, authenticated as associated data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FrameHdr {
    pub kind: u8,
    pub flags: u8,
    /// Data: the logical offset of the first byte. Length: the new logical length.
    pub logical: u64,
    /// Bytes of the body as stored (compressed or not).
    pub stored: u32,
    /// Logical bytes the body stands for.
    pub plain: u32,
    /// The physical length of the file that had been synced when this frame was written.
    pub synced: u64,
    pub nonce: [u8; NONCE],
}

impl FrameHdr {
    pub fn encode(&self) -> [u8; FRAME_HDR] {
        let mut b = [0u8; FRAME_HDR];
        b[..4].copy_from_slice(&FRAME_MAGIC);
        b[4] = self.kind;
        b[5] = self.flags;
        b[8..16].copy_from_slice(&self.logical.to_le_bytes());
        b[16..20].copy_from_slice(&self.stored.to_le_bytes());
        b[20..24].copy_from_slice(&self.plain.to_le_bytes());
        b[24..32].copy_from_slice(&self.synced.to_le_bytes());
        b[32..56].copy_from_slice(&self.nonce);
        b
    }

    /// A header that could have been written by this layer at physical offset `at`, or `None`.
    pub fn decode(b: &[u8], at: u64) -> Option<FrameHdr> {
        let b = b.first_chunk::<FRAME_HDR>()?;
        if b[..4] != FRAME_MAGIC || b[6..8] != [0, 0] {
            return None;
        }
        // (constant ranges of the header array: the conversions cannot fail)
        let u32_at = |r: &[u8]| u32::from_le_bytes(r.try_into().unwrap_or_default());
        let u64_at = |r: &[u8]| u64::from_le_bytes(r.try_into().unwrap_or_default());
        let h = FrameHdr {
            kind: b[4],
            flags: b[5],
            logical: u64_at(&b[8..16]),
            stored: u32_at(&b[16..20]),
            plain: u32_at(&b[20..24]),
            synced: u64_at(&b[24..32]),
            nonce: b[32..56].try_into().unwrap_or_default(),
        };
        let (stored, plain) = (h.stored as usize, h.plain as usize);
        let shape = match (h.kind, h.flags) {
            (KIND_DATA, 0) => stored == plain && plain > 0 && plain <= FRAME_MAX,
            (KIND_DATA, FLAG_LZ4) => stored > 0 && stored < plain && plain <= FRAME_MAX,
            (KIND_LEN, 0) => stored == 0 && plain == 0,
            _ => false,
        };
        // a sync that the frame reports happened before it was written, so it covers at most
        // the bytes before the frame; and no logical range may pass u64::MAX
        let fits = h.logical.checked_add(h.plain as u64).is_some();
        (shape && fits && h.synced <= at).then_some(h)
    }

    pub fn total(&self) -> usize {
        FRAME_OVERHEAD + self.stored as usize
    }
}

/// Associated data of a frame: its header, the file's header nonce and the frame's physical
/// offset, so that a frame copied into another file, or replayed elsewhere in its own (an old
/// version of a range after the frame that superseded it), does not authenticate.
pub(super) fn frame_aad(
    hdr: &[u8; FRAME_HDR],
    file_nonce: &[u8; NONCE],
    at: u64,
) -> [u8; FRAME_HDR + NONCE + 8] {
    let mut a = [0u8; FRAME_HDR + NONCE + 8];
    a[..FRAME_HDR].copy_from_slice(hdr);
    a[FRAME_HDR..FRAME_HDR + NONCE].copy_from_slice(file_nonce);
    a[FRAME_HDR + NONCE..].copy_from_slice(&at.to_le_bytes());
    a
}

/// What seals frames: the AEAD under the embedder's key, or (compression only) a crc32 that
/// tells a torn frame from a whole one.
pub(super) enum Sealer {
    Crc,
    XChaCha(Box<XChaCha20Poly1305>),
    Aes(Box<AesSealer>),
}

/// AES-256-GCM has a 96-bit nonce: too short to draw at random for every frame. Each
/// instance's 16-byte nonce prefix instead names a subkey, `AES_k(id || 1) || AES_k(id || 2)`
/// with `id` its first 15 bytes (the 16th is zero), and the frame's 64-bit counter (unique
/// under that prefix) followed by four zero bytes is the GCM nonce under that subkey.
pub(super) struct AesSealer {
    master: Aes256,
    /// Subkeys by prefix: this instance's, and those of the frames read lately.
    subkeys: Mutex<Vec<([u8; 16], Arc<Aes256Gcm>)>>,
}

impl AesSealer {
    fn subkey(&self, nonce: &[u8; NONCE]) -> Arc<Aes256Gcm> {
        let prefix: [u8; 16] = nonce[..16].try_into().unwrap_or_default();
        let mut keys = self.subkeys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, k)) = keys.iter().find(|(p, _)| *p == prefix) {
            return k.clone();
        }
        let mut key = [0u8; 32];
        for (i, half) in key.chunks_mut(16).enumerate() {
            let mut block = prefix;
            block[15] = i as u8 + 1;
            let mut b = block.into();
            self.master.encrypt_block(&mut b);
            half.copy_from_slice(&b);
        }
        let k = Arc::new(Aes256Gcm::new(&key.into()));
        if keys.len() == 8 {
            keys.remove(0);
        }
        keys.push((prefix, k.clone()));
        k
    }
}

/// The GCM nonce of a frame nonce: its counter, then zeros.
fn gcm_nonce(nonce: &[u8; NONCE]) -> aes_gcm::Nonce<aes_gcm::aead::consts::U12> {
    let mut n = [0u8; 12];
    n[..8].copy_from_slice(&nonce[16..]);
    n.into()
}

impl Sealer {
    pub fn new(cipher: Option<(Cipher, &[u8; 32])>) -> Sealer {
        match cipher {
            None => Sealer::Crc,
            Some((Cipher::XChaCha20Poly1305, key)) => {
                Sealer::XChaCha(Box::new(XChaCha20Poly1305::new(key.into())))
            }
            Some((Cipher::Aes256Gcm, key)) => Sealer::Aes(Box::new(AesSealer {
                master: Aes256::new(key.into()),
                subkeys: Mutex::new(Vec::new()),
            })),
        }
    }

    /// Whether the 16th byte of a nonce prefix must be zero (AES-256-GCM's subkey names).
    pub fn short_prefix(&self) -> bool {
        matches!(self, Sealer::Aes(_))
    }

    /// The cipher byte of the file header.
    pub fn id(&self) -> u8 {
        match self {
            Sealer::Crc => 0,
            Sealer::XChaCha(_) => 1,
            Sealer::Aes(_) => 2,
        }
    }

    /// Encrypts `body` in place and returns its tag.
    pub fn seal(
        &self,
        nonce: &[u8; NONCE],
        aad: &[u8],
        body: &mut [u8],
    ) -> std::io::Result<[u8; TAG]> {
        match self {
            Sealer::Crc => Ok(crc_tag(aad, body)),
            Sealer::XChaCha(c) => c
                .encrypt_inout_detached(&XNonce::from(*nonce), aad, body.into())
                .map(|t| t.into())
                .map_err(|_| std::io::Error::other("encryption failed")),
            Sealer::Aes(a) => a
                .subkey(nonce)
                .encrypt_inout_detached(&gcm_nonce(nonce), aad, body.into())
                .map(|t| t.into())
                .map_err(|_| std::io::Error::other("encryption failed")),
        }
    }

    /// Checks `tag` and decrypts `body` in place; false if it does not authenticate (then
    /// `body` holds nothing meaningful).
    pub fn open(&self, nonce: &[u8; NONCE], aad: &[u8], body: &mut [u8], tag: &[u8]) -> bool {
        match self {
            Sealer::Crc => crc_tag(aad, body)[..] == *tag,
            Sealer::XChaCha(c) => Tag::try_from(tag).is_ok_and(|t| {
                c.decrypt_inout_detached(&XNonce::from(*nonce), aad, body.into(), &t)
                    .is_ok()
            }),
            Sealer::Aes(a) => Tag::try_from(tag).is_ok_and(|t| {
                a.subkey(nonce)
                    .decrypt_inout_detached(&gcm_nonce(nonce), aad, body.into(), &t)
                    .is_ok()
            }),
        }
    }
}

fn crc_tag(aad: &[u8], body: &[u8]) -> [u8; TAG] {
    let mut h = crc32fast::Hasher::new();
    h.update(aad);
    h.update(body);
    let mut t = [0u8; TAG];
    t[..4].copy_from_slice(&h.finalize().to_le_bytes());
    t
}

/// A new file header: its nonce is the file's identity and seals the key check.
pub(super) fn file_header(sealer: &Sealer, nonce: &[u8; NONCE]) -> std::io::Result<[u8; FILE_HDR]> {
    let mut b = [0u8; FILE_HDR];
    b[..8].copy_from_slice(&FILE_MAGIC);
    b[8] = VERSION;
    b[9] = sealer.id();
    b[16..40].copy_from_slice(nonce);
    let tag = sealer.seal(nonce, &b[..40], &mut [])?;
    b[40..56].copy_from_slice(&tag);
    Ok(b)
}

/// What the first bytes of a file say.
pub(super) enum HeaderCheck {
    /// A header that never became durable (all zeros, or shorter than a header): the file has
    /// no durable content.
    Blank,
    /// A good header with this file nonce.
    Valid([u8; NONCE]),
}

/// Checks a file header against the layer: the key check fails for another key.
pub(super) fn check_header(sealer: &Sealer, b: &[u8]) -> Result<HeaderCheck, Fault> {
    if b.iter().all(|&x| x == 0) {
        return Ok(HeaderCheck::Blank);
    }
    let Some(b) = b.first_chunk::<FILE_HDR>() else {
        return Ok(HeaderCheck::Blank);
    };
    if b[..8] != FILE_MAGIC {
        return Err(Fault::NotLayered);
    }
    if b[8] != VERSION || b[10..16].iter().any(|&x| x != 0) {
        return Err(Fault::Tampered {
            offset: 8,
            reason: format!("unknown layered file version {}", b[8]),
        });
    }
    if b[9] != sealer.id() {
        let name = |id| match id {
            0 => "no cipher",
            1 => "XChaCha20-Poly1305",
            2 => "AES-256-GCM",
            _ => "an unknown cipher",
        };
        return Err(Fault::WrongKey(format!(
            "the file was written with {}, the store is opened with {}",
            name(b[9]),
            name(sealer.id())
        )));
    }
    let nonce: [u8; NONCE] = b[16..40].try_into().unwrap_or_default();
    if !sealer.open(&nonce, &b[..40], &mut [], &b[40..56]) {
        return Err(match sealer {
            Sealer::Crc => Fault::Tampered {
                offset: 0,
                reason: "file header checksum mismatch".into(),
            },
            _ => Fault::WrongKey("the key check of the file header fails".into()),
        });
    }
    Ok(HeaderCheck::Valid(nonce))
}

/// Compresses `plain` into `out` (appended) if that makes it smaller; returns the flags.
pub(super) fn compress(compression: Compression, plain: &[u8], out: &mut Vec<u8>) -> u8 {
    if compression == Compression::Lz4 && plain.len() >= 64 {
        let at = out.len();
        out.resize(
            at + lz4_flex::block::get_maximum_output_size(plain.len()),
            0,
        );
        let packed = out
            .get_mut(at..)
            .and_then(|dst| lz4_flex::block::compress_into(plain, dst).ok());
        if let Some(n) = packed {
            if n < plain.len() {
                out.truncate(at + n);
                return FLAG_LZ4;
            }
        }
        out.truncate(at);
    }
    out.extend_from_slice(plain);
    0
}

/// The plaintext of an authenticated body.
pub(super) fn decompress(h: &FrameHdr, body: Vec<u8>) -> Option<Vec<u8>> {
    if h.flags & FLAG_LZ4 == 0 {
        return Some(body);
    }
    let mut out = vec![0u8; h.plain as usize];
    match lz4_flex::block::decompress_into(&body, &mut out) {
        Ok(n) if n == out.len() => Some(out),
        _ => None,
    }
}
