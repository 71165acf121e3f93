//! Snapshot of a live store as a tar stream, and the manifest that lets a restore
//! check it. Restore is in `import.rs`.
//!
//! The archive, in this order (every entry a plain file, mode 0644, mtime 0):
//! 1. `seqstore-snapshot`: one line, `seqstore-snapshot v1`, so that a restore refuses a
//!    snapshot of another format version before it writes anything;
//! 2. `msgs/N.blk` for every block of the store, in index order, each exactly the bytes
//!    `[0, len)` the store holds for it at the snapshot point;
//! 3. `consumers/state` (when the store has consumers): every consumer's
//!    configuration and state at the snapshot point, in line with the stream, in the consumer
//!    checkpoint's layout (generation 1; `consumer/codec.rs`);
//! 4. `manifest`: the format version, the stream's state and a digest of its subjects at the
//!    snapshot point, every file's length and crc32, and a crc32 of the manifest itself. It is
//!    last because its checksums are computed while the blocks stream (one read of each).
//!
//! `index.db` is not included: it is an accelerator, and the restored store rebuilds its state
//! from the blocks at its first open (which is what restore then checks against the manifest).
//!
//! (`Store::snapshot_to`: `snapshot` is the private method that builds `index.db`.)
//!
//! Consistency: the snapshot is taken under `&mut self` (with `SharedStore`, inside `with`), so
//! nothing can change the blocks while they stream; see store-core/SNAPSHOTS.md.

use super::layout::{block_path, MSGS_DIR};
use super::types::StreamState;
use super::Store;
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile};
use crate::record;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::sync::Arc;

/// The name of the archive's first entry, and the line it holds.
pub(crate) const HEADER_ENTRY: &str = "seqstore-snapshot";
/// The name of the archive's last entry.
pub(crate) const MANIFEST_ENTRY: &str = "manifest";
/// The archive format this code writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;

/// What a snapshot holds (and what a restore found and checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The format version (`SNAPSHOT_VERSION`).
    pub version: u32,
    /// The stream's state at the snapshot point.
    pub state: StreamState,
    /// How many subjects `subjects_state(">")` listed, and a crc32 over its `name\0count\n`
    /// lines in name order: the restored store must list the same.
    pub subjects: (u64, u32),
    /// Every file: path inside the store, length, crc32 (IEEE).
    pub files: Vec<(String, u64, u32)>,
}

/// The subjects digest of [`SnapshotInfo::subjects`].
pub(crate) fn subjects_digest(subjects: &BTreeMap<String, u64>) -> (u64, u32) {
    let mut h = crc32fast::Hasher::new();
    for (name, n) in subjects {
        h.update(name.as_bytes());
        h.update(format!("\0{n}\n").as_bytes());
    }
    (subjects.len() as u64, h.finalize())
}

impl SnapshotInfo {
    /// The manifest's text: `key value…` lines, then `end <crc32 of the lines before>`.
    pub(crate) fn to_manifest(&self) -> String {
        let s = &self.state;
        let mut m = format!(
            "seqstore-snapshot v{}\nstate {} {} {} {} {} {} {} {}\nsubjects {} {:08x}\n",
            self.version,
            s.msgs,
            s.bytes,
            s.first_seq,
            s.first_ts,
            s.last_seq,
            s.last_ts,
            s.num_deleted,
            s.num_subjects,
            self.subjects.0,
            self.subjects.1
        );
        for (path, len, crc) in &self.files {
            m.push_str(&format!("file {path} {len} {crc:08x}\n"));
        }
        let crc = record::crc32(m.as_bytes());
        m.push_str(&format!("end {crc:08x}\n"));
        m
    }

    /// Parses a manifest; `Err` names what is wrong with it.
    pub(crate) fn from_manifest(text: &str) -> std::result::Result<Self, String> {
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or("manifest has no end line")?;
        let (body, end) = text.split_at(body_end);
        let want = end
            .strip_prefix("end ")
            .and_then(|c| c.strip_suffix('\n'))
            .and_then(|c| u32::from_str_radix(c, 16).ok())
            .ok_or("manifest's end line is malformed")?;
        if record::crc32(body.as_bytes()) != want {
            return Err("manifest checksum mismatch".into());
        }
        let mut lines = body.lines();
        let version = parse_version(lines.next().unwrap_or(""))?;
        let state = parse_state(lines.next().unwrap_or(""))?;
        let subjects = parse_subjects(lines.next().unwrap_or(""))?;
        let mut files = Vec::new();
        for line in lines {
            files.push(parse_file(line)?);
        }
        Ok(SnapshotInfo {
            version,
            state,
            subjects,
            files,
        })
    }
}

/// `seqstore-snapshot vN` → N, refusing any version but ours.
pub(crate) fn parse_version(line: &str) -> std::result::Result<u32, String> {
    let v = line
        .strip_prefix("seqstore-snapshot v")
        .and_then(|v| v.parse::<u32>().ok())
        .ok_or_else(|| format!("not a seqstore snapshot header: {:.40?}", line))?;
    if v != SNAPSHOT_VERSION {
        return Err(format!(
            "snapshot format version {v}, this build reads {SNAPSHOT_VERSION}"
        ));
    }
    Ok(v)
}

fn fields<'a>(line: &'a str, key: &str, n: usize) -> std::result::Result<Vec<&'a str>, String> {
    let v: Vec<&str> = line.split(' ').collect();
    if v.len() != n + 1 || v[0] != key {
        return Err(format!("manifest: malformed {key} line"));
    }
    Ok(v[1..].to_vec())
}

fn num<T: std::str::FromStr>(s: &str) -> std::result::Result<T, String> {
    s.parse()
        .map_err(|_| format!("manifest: bad number {s:.24?}"))
}

fn parse_state(line: &str) -> std::result::Result<StreamState, String> {
    let f = fields(line, "state", 8)?;
    Ok(StreamState {
        msgs: num(f[0])?,
        bytes: num(f[1])?,
        first_seq: num(f[2])?,
        first_ts: num(f[3])?,
        last_seq: num(f[4])?,
        last_ts: num(f[5])?,
        num_deleted: num(f[6])?,
        num_subjects: num(f[7])?,
    })
}

fn parse_subjects(line: &str) -> std::result::Result<(u64, u32), String> {
    let f = fields(line, "subjects", 2)?;
    let crc = u32::from_str_radix(f[1], 16).map_err(|_| "manifest: bad subjects crc")?;
    Ok((num(f[0])?, crc))
}

fn parse_file(line: &str) -> std::result::Result<(String, u64, u32), String> {
    let f = fields(line, "file", 3)?;
    let crc = u32::from_str_radix(f[2], 16).map_err(|_| "manifest: bad file crc")?;
    Ok((f[0].to_string(), num(f[1])?, crc))
}

/// Reads `[0, end)` of a block file as a `Read`, computing its crc32 on the way. A file
/// shorter than `end` is an error (the tar entry's size is fixed in its header already).
struct BlockReader<'a, H> {
    file: &'a H,
    off: u64,
    end: u64,
    crc: crc32fast::Hasher,
}

impl<H: FsFile> Read for BlockReader<'_, H> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.end - self.off).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.off)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "block file shorter than the store's length for it",
            ));
        }
        self.crc.update(&buf[..n]);
        self.off += n as u64;
        Ok(n)
    }
}

/// A tar header for a plain file of `len` bytes (path and checksum are set by `append_data`).
pub(crate) fn file_header(len: u64) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(len);
    h.set_mode(0o644);
    h.set_mtime(0);
    h
}

fn out_err(e: io::Error) -> Error {
    Error::io("snapshot.write", "<snapshot output>", e)
}

/// The snapshot point, fixed under the store's lock: the state, the subjects digest, and every
/// block's name, file handle and length. Streaming it needs no store: `SharedStore` releases
/// its lock meanwhile (see its `snapshot_to` for why that is safe).
pub(crate) struct ExportPlan<H> {
    state: StreamState,
    subjects: (u64, u32),
    blocks: Vec<(String, Arc<H>, u64)>,
    /// The consumers' checkpoint bytes, when the store has consumers.
    consumers: Option<Vec<u8>>,
}

/// The archive entry of the consumers' state.
pub(crate) const CONSUMERS_ENTRY: &str = "consumers/state";

impl<F: Fs> Store<F> {
    /// Writes a consistent snapshot of the store to `out` as a tar stream (layout above):
    /// syncs (so the snapshot holds only durable, acknowledged data and the write buffer is
    /// out), fixes the point (state, subjects, the block list and each block's length), then
    /// streams the blocks and the manifest. The store is usable again as soon as it returns;
    /// nothing changes it meanwhile because it holds `&mut self` (`SharedStore::snapshot_to`
    /// lets appends go on while it streams). An error writing `out` leaves the store as it
    /// was (not poisoned): only the snapshot is unusable.
    pub fn snapshot_to<W: Write>(&mut self, out: W) -> Result<SnapshotInfo> {
        let plan = self.export_plan()?;
        write_export(&plan, out)
    }

    /// Syncs and fixes the snapshot point.
    pub(crate) fn export_plan(&mut self) -> Result<ExportPlan<F::File>> {
        self.check_writable()?;
        self.sync()?;
        let state = self.state();
        let subjects = subjects_digest(&self.subjects_counted(">")?);
        let mut blocks = Vec::with_capacity(self.blocks.len());
        for pos in 0..self.blocks.len() {
            // every handle held until the snapshot is written: a block removed meanwhile
            // (compact, limits) stays readable through it
            let file = self.open_block(pos)?;
            let b = &self.blocks[pos];
            blocks.push((block_path(MSGS_DIR, b.number), file, b.span.len));
        }
        Ok(ExportPlan {
            state,
            subjects,
            blocks,
            consumers: self.consumers_snapshot(),
        })
    }

    /// Every consumer in line with the stream now, as a generation-1 checkpoint (`None`
    /// without consumers). What a restore must find again.
    pub(crate) fn consumers_snapshot(&self) -> Option<Vec<u8>> {
        self.consumers.journal.as_ref()?;
        let mut all = self.consumers.all.clone();
        for (cfg, st) in all.values_mut() {
            *st = self.consumer_in_line(cfg, st);
        }
        Some(crate::consumer::codec::encode_state(1, &all))
    }
}

/// Streams a fixed snapshot point: the header entry, each block's `[0, len)`, the manifest.
pub(crate) fn write_export<H: FsFile, W: Write>(
    plan: &ExportPlan<H>,
    out: W,
) -> Result<SnapshotInfo> {
    let mut tar = tar::Builder::new(out);
    let line = format!("{HEADER_ENTRY} v{SNAPSHOT_VERSION}\n");
    tar.append_data(
        &mut file_header(line.len() as u64),
        HEADER_ENTRY,
        line.as_bytes(),
    )
    .map_err(out_err)?;
    let mut files = Vec::with_capacity(plan.blocks.len());
    for (name, file, len) in &plan.blocks {
        let mut r = BlockReader {
            file: &**file,
            off: 0,
            end: *len,
            crc: crc32fast::Hasher::new(),
        };
        // a failure here may be the block's read or `out`'s write: name the block
        tar.append_data(&mut file_header(*len), name, &mut r)
            .map_err(|e| Error::io("snapshot.copy", name, e))?;
        files.push((name.clone(), *len, r.crc.finalize()));
    }
    if let Some(c) = &plan.consumers {
        tar.append_data(&mut file_header(c.len() as u64), CONSUMERS_ENTRY, &c[..])
            .map_err(out_err)?;
        files.push((
            CONSUMERS_ENTRY.to_string(),
            c.len() as u64,
            record::crc32(c),
        ));
    }
    let info = SnapshotInfo {
        version: SNAPSHOT_VERSION,
        state: plan.state,
        subjects: plan.subjects,
        files,
    };
    let m = info.to_manifest();
    tar.append_data(
        &mut file_header(m.len() as u64),
        MANIFEST_ENTRY,
        m.as_bytes(),
    )
    .map_err(out_err)?;
    tar.into_inner()
        .and_then(|mut w| w.flush())
        .map_err(out_err)?;
    Ok(info)
}
