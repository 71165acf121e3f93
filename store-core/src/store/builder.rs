//! `Store::builder`: one way to open a store, whatever its clock and layer.

#[cfg(feature = "crypt")]
use crate::crypt::{CryptFs, LayerConfig};
use crate::{Clock, Config, Fs, Result, Store};

/// Opens a store: `Store::builder(fs).config(cfg).open()`. Made by [`Store::builder`].
///
/// The clock is the filesystem's wall clock when it has one ([`Fs::wall_clock`]: a real
/// directory's, `seqstore_fs::SystemClock`), else a logical counter (an in-memory or simulated
/// filesystem: time then moves only as the store counts it); [`StoreBuilder::clock`] sets
/// another. The configuration is `Config::default()` unless [`StoreBuilder::config`] sets one.
#[must_use = "a builder does nothing until `open`, `open_layered` or `restore`"]
pub struct StoreBuilder<F: Fs> {
    fs: F,
    cfg: Config,
    clock: Option<Box<dyn Clock>>,
}

impl<F: Fs> Store<F> {
    /// A builder for a store at the root of `fs`; see [`StoreBuilder`].
    pub fn builder(fs: F) -> StoreBuilder<F> {
        StoreBuilder {
            fs,
            cfg: Config::default(),
            clock: None,
        }
    }
}

impl<F: Fs> StoreBuilder<F> {
    /// The store's configuration (default: `Config::default()`).
    pub fn config(mut self, cfg: Config) -> Self {
        self.cfg = cfg;
        self
    }

    /// The clock that stamps messages (default: the filesystem's wall clock, else a logical
    /// counter).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Some(Box::new(clock));
        self
    }

    fn take_clock(clock: Option<Box<dyn Clock>>, fs: &impl Fs) -> Box<dyn Clock> {
        clock
            .or_else(|| fs.wall_clock())
            .unwrap_or_else(|| Box::new(super::LogicalClock::default()))
    }

    /// Opens (or creates) the store (recovery and the lock: [`Store::open`]). A configuration with
    /// encryption or compression is refused ([`crate::Error::InvalidConfig`]) unless `fs` applies
    /// that layer: use `StoreBuilder::open_layered` (the `crypt` feature).
    pub fn open(self) -> Result<Store<F>> {
        let clock = Self::take_clock(self.clock, &self.fs);
        Store::open_with_clock(self.fs, self.cfg, clock)
    }

    /// Restores the snapshot read from `input` into the empty root of `fs` and opens it with
    /// this builder's configuration and clock (what [`crate::restore`] does and checks).
    pub fn restore(self, input: impl std::io::Read) -> Result<(Store<F>, crate::SnapshotInfo)> {
        let clock = Self::take_clock(self.clock, &self.fs);
        super::import::restore_with_clock(self.fs, self.cfg, clock, input)
    }

    /// Opens (or creates) the store through the encryption and compression layer its
    /// configuration asks for ([`CryptFs`] over `fs`), as [`StoreBuilder::open`].
    /// A store written with another key is [`crate::Error::WrongKey`].
    #[cfg(feature = "crypt")]
    pub fn open_layered(self) -> Result<Store<CryptFs<F>>> {
        let clock = Self::take_clock(self.clock, &self.fs);
        let fs = CryptFs::new(self.fs, LayerConfig::of(&self.cfg))
            .map_err(|e| crate::Error::io("entropy", "", e))?;
        Store::open_with_clock(fs, self.cfg, clock)
    }
}

#[cfg(test)]
mod tests {
    use crate::memfs::MemFs;
    use crate::{Cipher, Config, Encryption, Error, ManualClock, Store, SyncPolicy};

    #[test]
    fn the_clock_is_the_given_one_else_the_filesystems_else_a_counter() {
        let fs = MemFs::new();
        // MemFs has no wall clock: a logical counter, 1, 2, ...
        let mut s = Store::builder(fs.clone()).open().unwrap();
        let seq = s.append("a", b"", b"x").unwrap();
        let first = s.get(seq).unwrap().ts;
        assert!(first > 0 && first < 1_000, "{first}");
        s.close().unwrap();
        let clock = ManualClock::new(5_000_000_000);
        let mut s = Store::builder(fs)
            .config(Config::default().with_sync(SyncPolicy::Never))
            .clock(clock.clone())
            .open()
            .unwrap();
        let seq = s.append("a", b"", b"y").unwrap();
        assert_eq!(s.get(seq).unwrap().ts, 5_000_000_000);
        assert_eq!(s.config().sync, SyncPolicy::Never);
        s.close().unwrap();
    }

    #[cfg(not(feature = "crypt"))]
    #[test]
    fn without_the_crypt_feature_a_layered_config_and_a_layered_store_are_named() {
        use crate::fs::{Fs, FsFile, OpenOptions};
        let fs = MemFs::new();
        let key = Encryption::new(Cipher::XChaCha20Poly1305, [7; 32]);
        let cfg = Config::default().with_encryption(Some(key));
        let r = Store::builder(fs.clone()).config(cfg).open();
        assert!(
            matches!(&r, Err(Error::InvalidConfig(m)) if m.contains("`crypt` feature")),
            "{r:?}"
        );
        // a block that begins with the layer's header (a store an encrypting build wrote),
        // with no index.db to open from: named, not "bad magic"
        let mut s = Store::builder(fs.clone()).open().unwrap();
        s.append("a", b"", b"x").unwrap();
        s.close().unwrap();
        fs.remove_file(crate::store::INDEX_FILE).unwrap();
        let f = fs
            .open(
                &crate::store::block_path(crate::store::MSGS_DIR, 1),
                OpenOptions::new().write(true),
            )
            .unwrap();
        f.write_all_at(&crate::layer::FILE_MAGIC, 0).unwrap();
        let r = Store::builder(fs).open();
        assert!(
            matches!(&r, Err(Error::WrongKey { reason, .. }) if reason.contains("`crypt` feature")),
            "{r:?}"
        );
    }

    #[cfg(feature = "crypt")]
    #[test]
    fn a_layered_config_needs_open_layered_and_its_key() {
        let fs = MemFs::new();
        let key = |b| Some(Encryption::new(Cipher::XChaCha20Poly1305, [b; 32]));
        let cfg = Config::default().with_encryption(key(7));
        let plain = Store::builder(fs.clone()).config(cfg.clone()).open();
        assert!(matches!(plain, Err(Error::InvalidConfig(_))), "{plain:?}");
        let mut s = Store::builder(fs.clone())
            .config(cfg.clone())
            .open_layered()
            .unwrap();
        s.append("a", b"", b"secret").unwrap();
        s.close().unwrap();
        let wrong = Store::builder(fs.clone())
            .config(Config::default().with_encryption(key(8)))
            .open_layered();
        assert!(matches!(wrong, Err(Error::WrongKey { .. })), "{wrong:?}");
        let mut s = Store::builder(fs).config(cfg).open_layered().unwrap();
        assert_eq!(s.get(1).unwrap().payload, b"secret");
        s.close().unwrap();
    }
}
