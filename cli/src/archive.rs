//! `seqstore snapshot --dir DIR` and `seqstore restore --dir DIR`: a consistent snapshot of a
//! store as a tar stream, and its restore into an empty directory (both native only).
//!
//! The snapshot holds the store's logical files, as NATS's does: a snapshot of an encrypted
//! store is in the clear (keep it as the data it is), and `restore --key-file` encrypts what
//! it writes under the key given then.

use anyhow::{bail, Context, Result};
use seqstore_commands::{is_locked, retry_locked};
use seqstore_core::{Config, Error, SnapshotInfo, Store};
use seqstore_core::{CryptFs, LayerConfig};
use seqstore_fs::{HostFs, SystemClock};
use std::fs::File;
use std::io::{BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

/// The encryption and compression of the store read (`snapshot`) or written (`restore`).
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct LayerArgs {
    /// The store's key (a file of 32 raw bytes or 64 hex digits): `snapshot` reads an
    /// encrypted store with it, `restore` encrypts the restored store under it.
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// The store is (`snapshot`) or is to be (`restore`) compressed.
    #[arg(long)]
    compress: bool,
    /// How long to wait for a store another process has open (0: fail at once).
    #[arg(long, value_name = "DURATION", value_parser = seqstore_commands::parse_wait, default_value = "5s")]
    wait: std::time::Duration,
}

impl LayerArgs {
    /// The default config with this layer.
    fn config(&self) -> Result<Config> {
        let layer = seqstore_commands::layer_of(self.key_file.as_deref(), self.compress)?;
        Ok(Config::default()
            .with_encryption(layer.encryption)
            .with_compression(layer.compression))
    }
}

/// Writes a snapshot of the store in `dir` to `out` (a new file) or to standard output.
pub(crate) fn snapshot(dir: &Path, out: Option<&Path>, layer: &LayerArgs) -> Result<()> {
    if !dir.join(seqstore_core::internal::MSGS_DIR).is_dir() {
        bail!("no store at {} (no msgs/)", dir.display());
    }
    let cfg = layer.config()?;
    let open = || {
        let fs = HostFs::open(dir).map_err(|e| Error::Io {
            op: "open root",
            path: dir.display().to_string(),
            source: e,
        })?;
        Store::builder(fs)
            .config(cfg.clone())
            .clock(SystemClock)
            .open_layered()
    };
    let mut s = retry_locked(layer.wait, is_locked, open)
        .map_err(|(e, _)| e)
        .with_context(|| format!("recovering the store in {}", dir.display()))?;
    let info = match out {
        Some(path) => to_file(&mut s, path)?,
        None => {
            let stdout = std::io::stdout();
            if stdout.is_terminal() {
                bail!(
                    "refusing to write a tar stream to a terminal: redirect it or use --out FILE"
                );
            }
            let mut w = BufWriter::new(stdout.lock());
            let info = s.snapshot_to(&mut w).context("writing the snapshot")?;
            w.flush().context("writing the snapshot")?;
            info
        }
    };
    s.close()?;
    eprintln!(
        "seqstore: snapshot of {}: {}",
        dir.display(),
        summary(&info)
    );
    Ok(())
}

/// The snapshot into a new file, fsynced; a failed one is removed, not left half-written.
fn to_file<F: seqstore_core::Fs>(s: &mut Store<F>, path: &Path) -> Result<SnapshotInfo> {
    let f = File::options()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let mut w = BufWriter::new(f);
    let r = s
        .snapshot_to(&mut w)
        .map_err(anyhow::Error::from)
        .and_then(|info| {
            let f = w.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()?;
            Ok(info)
        });
    if r.is_err() {
        let _ = std::fs::remove_file(path);
    }
    r.with_context(|| format!("writing the snapshot to {}", path.display()))
}

/// Restores a snapshot from `from` (or standard input) into `dir`, created if missing; it must
/// be empty.
pub(crate) fn restore(dir: &Path, from: Option<&PathBuf>, layer: &LayerArgs) -> Result<()> {
    let cfg = layer.config()?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let input: Box<dyn Read> = match from {
        Some(p) => Box::new(File::open(p).with_context(|| format!("opening {}", p.display()))?),
        None => Box::new(std::io::stdin().lock()),
    };
    let mut input = BufReader::new(input);
    // restore takes the lock before it reads anything, so a refused try consumed no input
    let attempt = || -> seqstore_core::Result<_> {
        let io = |e| Error::Io {
            op: "open root",
            path: dir.display().to_string(),
            source: e,
        };
        let fs = CryptFs::new(HostFs::open(dir).map_err(io)?, LayerConfig::of(&cfg)).map_err(io)?;
        seqstore_core::restore(fs, cfg.clone(), &mut input)
    };
    let (s, info) = retry_locked(layer.wait, is_locked, attempt)
        .map_err(|(e, _)| e)
        .with_context(|| format!("restoring into {}", dir.display()))?;
    s.close()?;
    println!("restored {}", summary(&info));
    Ok(())
}

fn summary(info: &SnapshotInfo) -> String {
    let st = &info.state;
    format!(
        "{} messages, sequences {}..{}, {} subjects, {} block files",
        st.msgs,
        st.first_seq,
        st.last_seq,
        st.num_subjects,
        info.files.len()
    )
}
