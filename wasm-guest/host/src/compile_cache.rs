//! An on-disk cache of compiled components, so that a process that runs the guest does not
//! compile it with Cranelift again (seconds, and many more in a debug build of the host).
//!
//! Off unless the embedder names a directory ([`crate::cache_compiled_components`]); the
//! `seqstore` command turns it on (see [`crate::default_compile_cache_dir`]). An entry is named
//! by a SHA-256 of the engine's compatibility hash (wasmtime's version and every setting that
//! changes the machine code) and of the component's bytes, so a different component or engine
//! never finds it. Wasmtime checks the header of every file it loads as well: a file from
//! another wasmtime is an error, which here means "compile instead". Entries are written to a
//! temporary name and renamed, so a reader never sees half of one. Any failure to read or
//! write the cache only costs a compile.
//!
//! Trust: loading compiled code runs it. The directory must be writable only by the user who
//! runs the guest, as wasmtime's own cache (`~/.cache/wasmtime`) must.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

static DIR: OnceLock<PathBuf> = OnceLock::new();

/// Sets the cache's directory; `false` if one was set already (the first one stays).
pub(crate) fn set_dir(dir: PathBuf) -> bool {
    DIR.set(dir).is_ok()
}

/// Feeds `Hash` output into SHA-256 (the engine's compatibility hash is only `impl Hash`).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn finish(&self) -> u64 {
        // unused: the digest is read with `finalize`
        0
    }
}

/// The file an entry for `wasm` compiled by `engine` lives in.
fn entry(dir: &Path, engine: &Engine, wasm: &[u8]) -> PathBuf {
    let mut h = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut h);
    h.write(&(wasm.len() as u64).to_le_bytes());
    h.write(wasm);
    let digest = h.0.finalize();
    let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{name}.cwasm"))
}

/// `wasm` compiled for `engine`: from the cache when it holds it, else compiled (and stored).
pub(crate) fn component(engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Component> {
    match DIR.get() {
        Some(dir) => component_in(dir, engine, wasm),
        None => Component::new(engine, wasm),
    }
}

/// [`component`] with the cache in `dir`. Unsafe because `Component::deserialize_file` is: it
/// loads native code, and reading back compiled code is the whole point of the cache.
#[allow(unsafe_code)]
fn component_in(dir: &Path, engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Component> {
    let path = entry(dir, engine, wasm);
    if path.is_file() {
        // SAFETY: the file was written by `store` below from `Component::serialize` of this
        // very component (its name is the digest of the component and of the engine's
        // settings) into a directory the embedder vouches for (module docs); wasmtime also
        // checks the header and refuses a file from an incompatible engine.
        if let Ok(c) = unsafe { Component::deserialize_file(engine, &path) } {
            return Ok(c);
        }
    }
    let c = Component::new(engine, wasm)?;
    store(dir, &path, &c);
    Ok(c)
}

/// Writes an entry through a temporary name; a failure leaves the cache as it was.
fn store(dir: &Path, path: &Path, c: &Component) {
    let Ok(bytes) = c.serialize() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, &bytes).is_ok() && std::fs::rename(&tmp, path).is_ok() {
        return;
    }
    let _ = std::fs::remove_file(&tmp);
}

/// `SEQSTORE_WASM_CACHE` if set (`off` for none), else `$XDG_CACHE_HOME/seqstore/wasm`, else
/// `$HOME/.cache/seqstore/wasm`; `None` when none of them is set.
pub(crate) fn default_dir() -> Option<PathBuf> {
    let var = |k| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(v) = var("SEQSTORE_WASM_CACHE") {
        return (v != "off").then(|| PathBuf::from(v));
    }
    var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("seqstore").join("wasm"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: the preamble alone (magic, version 0x0d, layer 1).
    const EMPTY: &[u8] = b"\0asm\x0d\x00\x01\x00";

    #[test]
    fn compiles_once_then_loads_and_recovers_from_a_bad_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        let engine = Engine::default();
        let path = entry(&dir, &engine, EMPTY);
        component_in(&dir, &engine, EMPTY).unwrap();
        let stored = std::fs::read(&path).expect("the compile stored an entry");
        // a load leaves the entry as it was
        component_in(&dir, &engine, EMPTY).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), stored);
        // a damaged entry is refused by wasmtime, compiled again and replaced
        std::fs::write(&path, b"not a compiled component").unwrap();
        component_in(&dir, &engine, EMPTY).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), stored);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary left"
        );
    }

    #[test]
    fn entries_are_per_component_and_per_engine_settings() {
        let dir = Path::new("/c");
        let plain = Engine::default();
        let mut cfg = wasmtime::Config::new();
        cfg.epoch_interruption(true);
        let epochs = Engine::new(&cfg).unwrap();
        let other = b"\0asm\x0d\x00\x01\x00\x00\x00";
        assert_ne!(entry(dir, &plain, EMPTY), entry(dir, &plain, other));
        assert_ne!(entry(dir, &plain, EMPTY), entry(dir, &epochs, EMPTY));
        assert_eq!(
            entry(dir, &plain, EMPTY),
            entry(dir, &Engine::default(), EMPTY)
        );
    }
}
