//! Restore of a snapshot (`export.rs`) into an empty directory.
//!
//! Every file is written into a staging directory, `restore.partial/`, inside the target, and
//! checked against the manifest; only then does one rename, `restore.partial → msgs`, put the
//! store in place. Why staging and not "write in place, remove on failure": the store's data is
//! exactly `msgs/` (index.db is not restored), so that rename is the single atomic commit
//! point. A crash before it leaves at most `restore.partial/` (a store opened there is empty
//! and lists it as ignored; a new `restore` removes it); after it, the whole store. An error
//! removes what restore wrote, so no half-restored store is ever left behind.

use super::export::{
    parse_version, subjects_digest, SnapshotInfo, CONSUMERS_ENTRY, HEADER_ENTRY, MANIFEST_ENTRY,
};
use super::layout::{block_path, parse_block_name, MSGS_DIR};
use super::{io_at, Store};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenOptions};
use crate::record;
use std::io::{self, Read};

/// The staging directory of a restore in progress (or interrupted by a crash).
pub const RESTORE_STAGE: &str = "restore.partial";
/// Where a restore leaves the consumers' state inside the staging directory (so `msgs/` after
/// the commit): the store's open moves it to `consumers/state`.
pub const RESTORED_CONSUMERS: &str = "consumers.state";
/// Bounds on what an archive may ask restore to write, so that a hostile one cannot make it
/// allocate or write without end: one block file, the header and manifest, the file count.
const MAX_BLOCK_FILE: u64 = 1 << 32;
const MAX_HEADER: u64 = 64;
const MAX_MANIFEST: u64 = 16 << 20;
const MAX_FILES: usize = 1 << 18;
/// The copy buffer.
const CHUNK: usize = 64 << 10;

fn bad(reason: impl Into<String>) -> Error {
    Error::BadSnapshot {
        reason: reason.into(),
    }
}

/// Restores the snapshot read from `input` into the root of `fs`, which must be empty (else
/// `Error::NotEmpty`; a lone `restore.partial/` left by an interrupted restore is removed
/// first). Writes and fsyncs every file and directory, checks each file's length and crc32
/// against the manifest, commits with one rename, then opens the store with `cfg` and checks
/// that its state and subjects equal the manifest's. A truncated, damaged or wrong-version
/// archive is `Error::BadSnapshot`; on any error restore removes what it wrote (except when
/// the final `Store::open` itself fails: the files are then all in place and checked, and the
/// error is the open's). Returns the open store and the manifest.
///
/// Restore holds the store's lock (the file `LOCK`) from before its first write to the
/// returned store's close: a directory another process has open is [`Error::Locked`].
///
/// The store is opened on the clock [`Store::open`] would take (the filesystem's wall clock,
/// else a logical counter); [`StoreBuilder::restore`](crate::StoreBuilder::restore) restores
/// with another.
pub fn restore<F: Fs>(fs: F, cfg: Config, input: impl Read) -> Result<(Store<F>, SnapshotInfo)> {
    Store::builder(fs).config(cfg).restore(input)
}

/// [`restore`], opening the restored store on `clock`.
pub(crate) fn restore_with_clock<F: Fs>(
    fs: F,
    cfg: Config,
    clock: Box<dyn crate::Clock>,
    input: impl Read,
) -> Result<(Store<F>, SnapshotInfo)> {
    cfg.validate()?;
    let lock = super::take_lock(&fs)?;
    check_empty(&fs)?;
    io_at(fs.create_dir(RESTORE_STAGE), "create_dir", RESTORE_STAGE)?;
    let staged = io_at(fs.sync_dir(""), "sync_dir", "")
        .and_then(|()| unpack(&fs, input))
        .and_then(|info| commit(&fs, info));
    let info = match staged {
        Ok(info) => info,
        Err(e) => {
            discard(&fs);
            return Err(e);
        }
    };
    let mut store = Store::open_locked(fs, cfg, clock, lock)?;
    let got = (
        store.state(),
        subjects_digest(&store.subjects_counted(">")?),
    );
    let consumers = store.consumers_snapshot();
    let want_consumers = info.files.iter().find(|f| f.0 == CONSUMERS_ENTRY);
    let consumers_ok = match (&consumers, want_consumers) {
        (None, None) => true,
        (Some(c), Some(w)) => (c.len() as u64, record::crc32(c)) == (w.1, w.2),
        _ => false,
    };
    if !consumers_ok {
        store.closed = true;
        discard(&store.fs);
        return Err(bad("restored consumers differ from the snapshot's"));
    }
    if got != (info.state, info.subjects) {
        // the files matched the manifest but the store they make does not (a config whose
        // limits removed messages at open, or a forged manifest): take it away again
        store.closed = true;
        discard(&store.fs);
        return Err(bad(format!(
            "restored store differs from the manifest: {:?} vs {:?}",
            got,
            (info.state, info.subjects)
        )));
    }
    Ok((store, info))
}

/// Refuses a target with anything in it but a leftover staging directory (which it removes).
fn check_empty<F: Fs>(fs: &F) -> Result<()> {
    let mut names = io_at(fs.read_dir(""), "read_dir", "")?;
    names.retain(|e| !super::is_lock_name(&e.name));
    match names.as_slice() {
        [] => Ok(()),
        [e] if e.name == RESTORE_STAGE && e.is_dir => {
            io_at(
                fs.remove_dir_all(RESTORE_STAGE),
                "remove_dir_all",
                RESTORE_STAGE,
            )?;
            io_at(fs.sync_dir(""), "sync_dir", "")
        }
        [e, ..] => Err(Error::NotEmpty {
            entry: e.name.clone(),
        }),
    }
}

/// Best effort after a failure: removes the staging directory and `msgs/` (the target was
/// empty, so everything there is restore's) and makes the removal durable.
fn discard<F: Fs>(fs: &F) {
    let _ = fs.remove_dir_all(RESTORE_STAGE);
    let _ = fs.remove_dir_all(MSGS_DIR);
    let _ = fs.remove_dir_all(crate::consumer::CONSUMERS_DIR);
    let _ = fs.sync_dir("");
}

/// Makes the staged files' names durable, then renames the staging directory into place and
/// makes that durable: the commit point.
fn commit<F: Fs>(fs: &F, info: SnapshotInfo) -> Result<SnapshotInfo> {
    io_at(fs.sync_dir(RESTORE_STAGE), "sync_dir", RESTORE_STAGE)?;
    io_at(fs.rename(RESTORE_STAGE, MSGS_DIR), "rename", RESTORE_STAGE)?;
    io_at(fs.sync_dir(""), "sync_dir", "")?;
    Ok(info)
}

/// Reads the archive: the header entry, the blocks (written into the staging directory), the
/// manifest, nothing after it. Returns the manifest once every file matched it.
fn unpack<F: Fs>(fs: &F, input: impl Read) -> Result<SnapshotInfo> {
    let mut ar = tar::Archive::new(input);
    let entries = ar
        .entries()
        .map_err(|e| bad(format!("unreadable archive: {e}")))?;
    let mut seen_header = false;
    let mut manifest: Option<SnapshotInfo> = None;
    let mut written: Vec<(String, u64, u32)> = Vec::new();
    let mut last_index = 0;
    for entry in entries {
        let mut e = entry.map_err(|e| bad(format!("unreadable archive entry: {e}")))?;
        if manifest.is_some() {
            return Err(bad("an entry follows the manifest"));
        }
        if e.header().entry_type() != tar::EntryType::Regular {
            return Err(bad("an archive entry is not a plain file"));
        }
        let path = String::from_utf8(e.path_bytes().into_owned())
            .map_err(|_| bad("an archive path is not UTF-8"))?;
        let size = e.size();
        if !seen_header {
            if path != HEADER_ENTRY {
                return Err(bad(format!(
                    "first entry is {path:.64?}, not a snapshot header"
                )));
            }
            let line = read_small(&mut e, size, MAX_HEADER)?;
            parse_version(line.trim_end_matches('\n')).map_err(bad)?;
            seen_header = true;
        } else if path == MANIFEST_ENTRY {
            let text = read_small(&mut e, size, MAX_MANIFEST)?;
            manifest = Some(SnapshotInfo::from_manifest(&text).map_err(bad)?);
        } else if path == CONSUMERS_ENTRY {
            // after every block, once; staged beside them, and moved to `consumers/state`
            // by the store's open (`finish_restored_consumers`)
            if written.iter().any(|f| f.0 == CONSUMERS_ENTRY) || size > MAX_BLOCK_FILE {
                return Err(bad("a second consumers entry, or one too large"));
            }
            let crc = write_file(
                fs,
                &format!("{RESTORE_STAGE}/{RESTORED_CONSUMERS}"),
                &mut e,
                size,
            )?;
            written.push((path, size, crc));
            last_index = u64::MAX;
        } else {
            let index = path
                .strip_prefix("msgs/")
                .and_then(parse_block_name)
                .filter(|&i| i > last_index)
                .ok_or_else(|| bad(format!("unexpected archive entry {path:.64?}")))?;
            if written.len() >= MAX_FILES || size > MAX_BLOCK_FILE {
                return Err(bad("archive exceeds restore's bounds"));
            }
            let crc = write_file(fs, &block_path(RESTORE_STAGE, index), &mut e, size)?;
            written.push((path, size, crc));
            last_index = index;
        }
    }
    if !seen_header {
        return Err(bad("empty archive: not a seqstore snapshot"));
    }
    let m = manifest.ok_or_else(|| bad("truncated archive: no manifest"))?;
    check_files(&m, &written)?;
    Ok(m)
}

/// The files written must be exactly the manifest's, in order, with its lengths and crcs.
fn check_files(m: &SnapshotInfo, written: &[(String, u64, u32)]) -> Result<()> {
    if m.files.len() != written.len() {
        return Err(bad(format!(
            "manifest lists {} files, the archive holds {}",
            m.files.len(),
            written.len()
        )));
    }
    for (want, got) in m.files.iter().zip(written) {
        if want != got {
            return Err(bad(format!(
                "{} does not match the manifest (length, crc32): {:?} vs {:?}",
                got.0,
                (got.1, got.2),
                (want.1, want.2)
            )));
        }
    }
    Ok(())
}

/// Reads a small entry (header, manifest) whole, refusing one above `max` or short.
fn read_small(e: &mut impl Read, size: u64, max: u64) -> Result<String> {
    if size > max {
        return Err(bad("archive entry too large"));
    }
    // the declared size is not trusted with an allocation: the buffer grows as bytes arrive
    let mut buf = Vec::with_capacity(size.min(CHUNK as u64) as usize);
    e.read_to_end(&mut buf)
        .map_err(|e| bad(format!("truncated archive: {e}")))?;
    if buf.len() as u64 != size {
        return Err(bad("truncated archive"));
    }
    String::from_utf8(buf).map_err(|_| bad("archive entry is not UTF-8"))
}

/// Copies `size` bytes of an entry into a new file at `path`, fsyncs it, and returns their
/// crc32. A short or failing read of the archive is `BadSnapshot`; the filesystem's errors are
/// `Io`.
fn write_file<F: Fs>(fs: &F, path: &str, e: &mut impl Read, size: u64) -> Result<u32> {
    let opts = OpenOptions::new().write(true).create_new(true);
    let f = io_at(fs.open(path, opts), "open", path)?;
    let mut buf = vec![0u8; CHUNK];
    let mut crc = crc32fast::Hasher::new();
    let mut off = 0u64;
    while off < size {
        let n = match e.read(&mut buf) {
            Ok(0) => return Err(bad(format!("truncated archive in {path}"))),
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(bad(format!("unreadable archive in {path}: {err}"))),
        };
        crc.update(&buf[..n]);
        io_at(f.write_all_at(&buf[..n], off), "write_all_at", path)?;
        off += n as u64;
    }
    io_at(f.sync_all(), "sync_all", path)?;
    Ok(crc.finalize())
}
