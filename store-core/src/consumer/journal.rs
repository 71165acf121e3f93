//! The consumer files: the journal and the checkpoint, their recovery, and the in-memory
//! table they rebuild. The fsyncs (and so the ablation switches) are the store's
//! (`store/consumers.rs`); this file reads, replays, writes and names.

// Parses bytes read from a disk: no index that a damaged file could put out of range.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use super::codec::{self, Entry, Op, Rec, JOURNAL_HEADER_LEN};
use super::state::{ConsumerConfig, ConsumerState};
use super::CONSUMERS_DIR;
use crate::error::{Error, Result};
use crate::fs::{Fs, FsFile, OpenOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The checkpoint.
pub const STATE_FILE: &str = "consumers/state";
/// The checkpoint being written.
pub const STATE_TMP: &str = "consumers/state.tmp";

/// The journal of generation `gen` (the checkpoint of that generation names it).
pub fn journal_path(gen: u64) -> String {
    format!("{CONSUMERS_DIR}/journal.{gen}")
}

fn parse_journal_name(name: &str) -> Option<u64> {
    let n = name.strip_prefix("journal.")?;
    (!n.is_empty() && n.len() <= 20 && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// The consumers of a store: the table, and the journal records go to.
pub(crate) struct Consumers<H> {
    pub(crate) all: BTreeMap<String, Entry>,
    /// The checkpoint's generation: the journal is `journal.<gen>`.
    pub(crate) gen: u64,
    /// The open journal (`None` until `consumers/` exists).
    pub(crate) journal: Option<Arc<H>>,
    /// Where the next record goes.
    pub(crate) len: u64,
    /// The journal has writes not yet fsynced.
    pub(crate) dirty: bool,
    /// The crc of the last record (of the header for none): the next record chains on it.
    pub(crate) prev_crc: u32,
    /// Stream sequences removed from the stream while some consumer had them pending (in
    /// memory only: open finds them again). A consumer sees each as acknowledged
    /// ([`ConsumerState::terminate`]); its next call records that (one ack record each)
    /// before its own record.
    pub(crate) gone: BTreeSet<u64>,
}

impl<H> Default for Consumers<H> {
    fn default() -> Self {
        Consumers {
            all: BTreeMap::new(),
            gen: 0,
            journal: None,
            len: 0,
            dirty: false,
            prev_crc: 0,
            gone: BTreeSet::new(),
        }
    }
}

/// What recovery of the consumer files did.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// The journal needs its name made durable (it was created by recovery).
    pub(crate) created_journal: bool,
    /// Bytes of torn tail cut from the journal.
    pub(crate) cut: u64,
    /// Names in `consumers/` that are none of the store's.
    pub(crate) ignored: Vec<String>,
}

fn io_at<T>(r: std::io::Result<T>, op: &'static str, path: &str) -> Result<T> {
    r.map_err(|e| Error::io(op, path, e))
}

fn read_all<H: FsFile>(f: &H, path: &str) -> Result<Vec<u8>> {
    let len = io_at(f.len(), "len", path)? as usize;
    let mut buf = vec![0; len];
    io_at(f.read_exact_at(&mut buf, 0), "read", path)?;
    Ok(buf)
}

/// The checkpoint's bytes.
fn read_checkpoint<F: Fs>(fs: &F) -> Result<Vec<u8>> {
    let f = io_at(
        fs.open(STATE_FILE, OpenOptions::read_only()),
        "open",
        STATE_FILE,
    )?;
    read_all(&f, STATE_FILE)
}

/// Applies one record to the table, as the live call did: the consumer is first clamped to
/// the stream the record saw, then the operation runs.
pub(crate) fn apply(all: &mut BTreeMap<String, Entry>, rec: &Rec) -> Result<()> {
    let not_found = || Error::ConsumerNotFound {
        name: rec.name.clone(),
    };
    match rec.op {
        Op::Add { ack, max_deliver } => {
            let cfg = ConsumerConfig {
                name: rec.name.clone(),
                ack_policy: ack,
                max_deliver,
            };
            let mut st = ConsumerState::default();
            st.clamp_to_stream(ack, rec.first, rec.last);
            all.insert(rec.name.clone(), (cfg, st));
            return Ok(());
        }
        Op::Delete => {
            return all.remove(&rec.name).map(|_| ()).ok_or_else(not_found);
        }
        _ => {}
    }
    let (cfg, st) = all.get_mut(&rec.name).ok_or_else(not_found)?;
    st.clamp_to_stream(cfg.ack_policy, rec.first, rec.last);
    match rec.op {
        Op::Config { max_deliver } => cfg.max_deliver = max_deliver,
        Op::Delivered { dseq, sseq, dc, ts } => st.update_delivered(cfg, dseq, sseq, dc, ts)?,
        Op::Ack { dseq, sseq } => st.update_acks(cfg, dseq, sseq)?,
        Op::Reset { start } => {
            *st = ConsumerState::starting_at(start);
            st.clamp_to_stream(cfg.ack_policy, rec.first, rec.last);
        }
        Op::Add { .. } | Op::Delete => unreachable!("handled above"),
    }
    Ok(())
}

impl<H: FsFile> Consumers<H> {
    /// Recovers the consumer files: the checkpoint (if any), then its generation's journal
    /// replayed over it up to the first record that is not whole and intact (cut off, no
    /// fsync: the next open cuts again). Files of other generations and a leftover
    /// `state.tmp` are removed (no fsync: they are ignored wherever they are).
    pub(crate) fn load<F: Fs<File = H>>(fs: &F) -> Result<(Self, Loaded)> {
        let mut c = Consumers::default();
        let mut done = Loaded::default();
        let root = io_at(fs.read_dir(""), "read_dir", "")?;
        if !root.iter().any(|e| e.name == CONSUMERS_DIR && e.is_dir) {
            return Ok((c, done));
        }
        let names = io_at(fs.read_dir(CONSUMERS_DIR), "read_dir", CONSUMERS_DIR)?;
        if names.iter().any(|e| e.name == "state") {
            let bytes = read_checkpoint(fs)?;
            // written whole before its rename: damage here is not a torn write
            let (gen, all) =
                codec::decode_state(&bytes).map_err(|r| Error::corrupt(STATE_FILE, 0, r))?;
            c.gen = gen;
            c.all = all;
        }
        let jpath = journal_path(c.gen);
        for e in &names {
            let stale = match parse_journal_name(&e.name) {
                Some(g) => g != c.gen,
                None => e.name == "state.tmp",
            };
            let path = format!("{CONSUMERS_DIR}/{}", e.name);
            if stale {
                io_at(fs.remove_file(&path), "remove_file", &path)?;
            } else if e.name != "state" && path != jpath {
                done.ignored.push(path);
            }
        }
        let exists = names.iter().any(|e| path_is(&jpath, &e.name));
        let f = io_at(
            fs.open(&jpath, OpenOptions::read_write_create()),
            "open",
            &jpath,
        )?;
        done.created_journal = !exists;
        c.replay(&f, &jpath, &mut done)?;
        // the process that wrote it may never have synced it: the next sync must (found by
        // the random explorer: `Open, ConsumerAdd, Reopen, Sync` under `Never`)
        c.dirty = true;
        c.journal = Some(Arc::new(f));
        Ok((c, done))
    }

    fn replay(&mut self, f: &H, path: &str, done: &mut Loaded) -> Result<()> {
        let buf = read_all(f, path)?;
        let header = buf.get(..JOURNAL_HEADER_LEN);
        let header_ok = header.and_then(codec::parse_journal_header) == Some(self.gen);
        if !header_ok {
            // created and never synced, or torn: no record after it was ever acknowledged
            // (a record's fsync covers the header before it)
            io_at(f.set_len(0), "set_len", path)?;
            io_at(
                f.write_all_at(&codec::journal_header(self.gen), 0),
                "write",
                path,
            )?;
            done.cut = buf.len() as u64;
            self.len = JOURNAL_HEADER_LEN as u64;
            self.prev_crc = crate::record::crc32(&codec::journal_header(self.gen));
            self.dirty = true;
            return Ok(());
        }
        let mut at = JOURNAL_HEADER_LEN;
        let mut prev = crate::record::crc32(header.unwrap_or_default());
        while let Some((rec, n, crc)) = buf.get(at..).and_then(|r| codec::decode_rec(r, prev)) {
            prev = crc;
            apply(&mut self.all, &rec).map_err(|e| {
                Error::corrupt(path, at as u64, format!("record does not replay: {e}"))
            })?;
            at += n;
        }
        if at < buf.len() {
            io_at(f.set_len(at as u64), "set_len", path)?;
            done.cut = (buf.len() - at) as u64;
        }
        self.len = at as u64;
        self.prev_crc = prev;
        Ok(())
    }
}

/// What [`check`] found in the consumer files.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Consumers the files hold (as open would recover them).
    pub(crate) consumers: usize,
    /// Damage: (file, offset, what).
    pub(crate) problems: Vec<(String, u64, String)>,
}

/// Reads the consumer files as [`Consumers::load`] would, without changing anything: the
/// checkpoint must decode, and the journal of its generation must be a valid header
/// followed by whole records that replay. A journal tail that open would cut is damage, as
/// a block's torn tail is (a crash before its fsync, or a lost write).
pub(crate) fn check<F: Fs>(fs: &F) -> Result<Checked> {
    let mut out = Checked::default();
    let root = io_at(fs.read_dir(""), "read_dir", "")?;
    if !root.iter().any(|e| e.name == CONSUMERS_DIR && e.is_dir) {
        return Ok(out);
    }
    let names = io_at(fs.read_dir(CONSUMERS_DIR), "read_dir", CONSUMERS_DIR)?;
    let (mut gen, mut all) = (0, BTreeMap::new());
    if names.iter().any(|e| e.name == "state") {
        match codec::decode_state(&read_checkpoint(fs)?) {
            Ok((g, a)) => (gen, all) = (g, a),
            Err(why) => {
                // open refuses the store: nothing after it can be judged
                out.problems.push((STATE_FILE.into(), 0, why));
                return Ok(out);
            }
        }
    }
    let jpath = journal_path(gen);
    if names.iter().any(|e| path_is(&jpath, &e.name)) {
        let f = io_at(fs.open(&jpath, OpenOptions::read_only()), "open", &jpath)?;
        check_journal(&read_all(&f, &jpath)?, gen, &jpath, &mut all, &mut out);
    }
    out.consumers = all.len();
    Ok(out)
}

/// [`check`]'s half for the journal's bytes `buf`: `replay`'s rules, read-only.
fn check_journal(
    buf: &[u8],
    gen: u64,
    path: &str,
    all: &mut BTreeMap<String, Entry>,
    out: &mut Checked,
) {
    let header = buf.get(..JOURNAL_HEADER_LEN);
    let header_ok = header.and_then(codec::parse_journal_header) == Some(gen);
    if !header_ok {
        if !buf.is_empty() {
            let what = format!(
                "journal header torn or wrong: {} bytes open cuts",
                buf.len()
            );
            out.problems.push((path.into(), 0, what));
        }
        return;
    }
    let mut at = JOURNAL_HEADER_LEN;
    let mut prev = crate::record::crc32(header.unwrap_or_default());
    while let Some((rec, n, crc)) = buf.get(at..).and_then(|r| codec::decode_rec(r, prev)) {
        if let Err(e) = apply(all, &rec) {
            let what = format!("record does not replay: {e}");
            out.problems.push((path.into(), at as u64, what));
            return;
        }
        prev = crc;
        at += n;
    }
    if at < buf.len() {
        let what = format!("torn tail: {} bytes open cuts", buf.len() - at);
        out.problems.push((path.into(), at as u64, what));
    }
}

fn path_is(path: &str, name: &str) -> bool {
    path.strip_prefix(CONSUMERS_DIR)
        .and_then(|p| p.strip_prefix('/'))
        == Some(name)
}
