//! Fuzz target bodies and the helpers the robustness tests share.
//!
//! The bodies of the fuzz targets live here so that two harnesses share them: cargo-fuzz (the
//! separate `fuzz/` workspace calls `crash_matrix::robust::fuzz_*`) and plain `cargo test`
//! (`tests/tests/robustness_corpus.rs` runs them on every file of `fuzz/corpus/<target>/`).

use super::{check_image, config, payload, payload_id, Event, Native, Runner, Step};
use fault_fs::{ExploreConfig, FaultFs, Journal, Model};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use store_core::index::{Snapshot, INDEX_MAGIC, INDEX_VERSION};
use store_core::record::{
    self, decode, encode, encoded_len, Decoded, Kind, HARD_MAX_RECORD, REC_OVERHEAD,
};
use store_core::{
    Ablation, Config, Error, Fs, FsFile, ManualClock, OpenOptions, RecoveryMode, Store,
    StreamState, SyncPolicy,
};

/// A fuzz target body.
pub type Target = fn(&[u8]);

/// The fuzz targets, by the name of their `fuzz/fuzz_targets/<name>.rs` and corpus folder.
pub const TARGETS: &[(&str, Target)] = &[
    ("record_decode", fuzz_record_decode),
    ("index_decode", fuzz_index_decode),
    ("recover_dir", fuzz_recover_dir),
    ("model_ops", fuzz_model_ops),
];

/// A cursor over fuzz input that yields zeros once it is exhausted (so every input is a
/// valid program).
#[derive(Debug)]
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// Reads `data` from the start.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }
    /// Whether every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    /// One byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    /// Two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    /// Four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// Eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }
    /// A length-prefixed (u16) run of at most `max` bytes.
    pub fn bytes(&mut self, max: usize) -> &'a [u8] {
        let n = (self.u16() as usize) % (max + 1);
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos = start + n;
        &self.data[start..end]
    }
    /// `k % n` for a byte `k` (0 when `n == 0`).
    pub fn pick(&mut self, n: usize) -> usize {
        let k = self.u8() as usize;
        if n == 0 {
            0
        } else {
            k % n
        }
    }
}

// ------------------------------------------------------------------ record_decode

/// `record::decode` on arbitrary bytes: never panics, and whatever it accepts is exactly
/// what `encode` writes (so every accepted record round-trips bit for bit); every length it
/// reports stays inside the buffer and under the 64 MiB bound. Also walks the bytes as a
/// block body, as recovery does, and checks a block header on them.
pub fn fuzz_record_decode(data: &[u8]) {
    check_decode(data);
    for cut in [1usize, 4, 35, 36] {
        if data.len() > cut {
            check_decode(&data[..data.len() - cut]);
        }
    }
    let h = &data[..data.len().min(record::BLOCK_HEADER_LEN as usize)];
    match record::check_block_header("f", h, 1) {
        Ok(_) => {}
        Err(Error::Corrupt { file, offset, .. }) => {
            assert_eq!(file, "f");
            assert!(offset < record::BLOCK_HEADER_LEN, "header offset {offset}");
        }
        Err(e) => panic!("block header check: unexpected error {e:?}"),
    }
    // walk it as a block body: every step moves forward, so this ends
    let mut pos = 0;
    while pos < data.len() {
        match decode(&data[pos..]) {
            Decoded::Record(r) => pos += r.len,
            Decoded::Bad {
                framed: Some(l), ..
            } => pos += l,
            _ => break,
        }
    }
}

fn check_decode(b: &[u8]) {
    match decode(b) {
        Decoded::Record(r) => {
            assert!(
                (REC_OVERHEAD..=HARD_MAX_RECORD).contains(&r.len) && r.len <= b.len(),
                "record length {} out of bounds (buffer {})",
                r.len,
                b.len()
            );
            let subj_len = u16::from_le_bytes([b[6], b[7]]) as usize;
            assert_eq!(
                encoded_len(subj_len, r.headers.len(), r.payload.len()),
                r.len
            );
            if r.kind != Kind::Msg {
                assert!(r.len == REC_OVERHEAD && r.flags == 0, "marker with a body");
            }
            if r.subject.len() == subj_len {
                let mut v = Vec::new();
                let crc = encode(
                    &mut v,
                    r.kind,
                    r.flags,
                    r.seq,
                    r.ts,
                    r.subject.as_bytes(),
                    r.headers,
                    r.payload,
                );
                assert_eq!(crc, r.crc, "crc differs on re-encode");
                assert!(v == b[..r.len], "accepted record does not round-trip");
            } else {
                // only an erased record may have its (zeroed) subject replaced
                assert!(r.flags & record::FLAG_ERASED != 0 && r.subject.is_empty());
            }
        }
        Decoded::Short(n) => {
            assert!(
                n > b.len() && (REC_OVERHEAD..=HARD_MAX_RECORD).contains(&n),
                "Short({n}) for {} bytes",
                b.len()
            );
        }
        Decoded::End => {
            assert!(b.len() < 4 || b[..4] == [0; 4], "End on a non-zero length");
        }
        Decoded::Bad { framed, .. } => {
            if let Some(l) = framed {
                assert!(
                    (REC_OVERHEAD..=b.len()).contains(&l),
                    "framed length {l} out of the buffer ({})",
                    b.len()
                );
            }
        }
    }
}

// ------------------------------------------------------------------ index_decode

/// `Snapshot::decode` on arbitrary bytes, raw and wrapped in a valid magic, version and
/// crc (so the fuzzer reaches the body parser): `Ok` only for what `encode` writes (exact
/// round trip), else a `Corrupt` naming index.db at an offset inside the input. Counts are
/// bounded by the bytes left, so no input allocates more than it holds.
pub fn fuzz_index_decode(data: &[u8]) {
    check_index(data);
    check_index(&wrap_index(data));
}

/// `SQIX`, version 1, `body`, crc32: an index.db that passes the magic, version and crc
/// checks whatever `body` holds.
pub fn wrap_index(body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(body.len() + 12);
    v.extend_from_slice(&INDEX_MAGIC);
    v.extend_from_slice(&INDEX_VERSION.to_le_bytes());
    v.extend_from_slice(body);
    let crc = crc32(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v
}

/// Recomputes the trailing crc32 of an index.db image in place.
pub fn fix_index_crc(v: &mut [u8]) {
    if v.len() >= 4 {
        let n = v.len();
        let crc = crc32(&v[..n - 4]);
        v[n - 4..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// crc32 (IEEE) through the record encoder's own implementation, so this crate needs no
/// crc dependency of its own: a tombstone record's last 4 bytes are the crc of its first 32.
pub fn crc32(bytes: &[u8]) -> u32 {
    // crc32 of arbitrary bytes via the public API is not available; compute it directly
    // (bitwise, the IEEE reflected polynomial; inputs here are small)
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn check_index(b: &[u8]) {
    match Snapshot::decode("index.db", b) {
        Ok(s) => assert!(s.encode() == b, "accepted index.db does not round-trip"),
        Err(Error::Corrupt { file, offset, .. }) => {
            assert_eq!(file, "index.db");
            assert!(offset <= b.len() as u64, "offset {offset} past {}", b.len());
        }
        Err(e) => panic!("index decode: unexpected error {e:?}"),
    }
}

// ------------------------------------------------------------------ sample stores

/// A real store's files: `msgs/1.blk`.. (every record kind), `index.db` from `close()`,
/// and the block a purge of it would write into `purge.new/`.
#[derive(Debug)]
pub struct Template {
    /// `(path, contents)` of every file, sorted by path.
    pub files: Vec<(String, Vec<u8>)>,
    /// Path and contents of a purge's new block (header for the next index, floor(last)).
    pub purge_block: (String, Vec<u8>),
    /// The store's state when it was closed.
    pub state: StreamState,
}

/// The template store (built once): block size 1 KiB, 30 appends on three subjects,
/// a compact, deletes, an erase and a truncate, then `close()`.
pub fn template() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let fs = FaultFs::new(Model::Posix);
        let cfg = Config {
            block_size: 1024,
            ..Config::default()
        };
        let clock = ManualClock::new(1_000_000_000);
        let mut s = Store::open_with_clock(fs.clone(), cfg, Box::new(clock)).expect("open");
        for i in 0..30u64 {
            let subj = ["a.1", "a.2", "b"][i as usize % 3];
            s.append(subj, b"h", &payload(i, 50)).expect("append");
        }
        s.compact(3).expect("compact");
        s.delete(7).expect("delete");
        s.delete(12).expect("delete");
        s.erase(15).expect("erase");
        s.truncate(28).expect("truncate");
        s.append("b", b"", &payload(30, 50)).expect("append");
        let state = s.state();
        s.close().expect("close");
        let files = file_list(&fs);
        let next = files
            .iter()
            .filter_map(|(p, _)| p.strip_prefix("msgs/")?.strip_suffix(".blk")?.parse().ok())
            .max()
            .unwrap_or(0u64)
            + 1;
        let mut block = record::block_header(next).to_vec();
        encode(
            &mut block,
            Kind::Floor,
            0,
            state.last_seq,
            state.last_ts,
            b"",
            b"",
            b"",
        );
        Template {
            files,
            purge_block: (format!("purge.new/{next}.blk"), block),
            state,
        }
    })
}

/// Every file of `fs` (live), sorted by path.
pub fn file_list(fs: &FaultFs) -> Vec<(String, Vec<u8>)> {
    fs.list_tree()
        .into_iter()
        .filter(|p| !p.ends_with('/'))
        .filter_map(|p| fs.read_file(&p).ok().map(|b| (p, b)))
        .collect()
}

/// Offsets, lengths and sequences of the valid records of a block image (after its header).
pub fn records_of(block: &[u8]) -> Vec<(usize, usize, u64, Kind)> {
    let mut out = Vec::new();
    let mut pos = record::BLOCK_HEADER_LEN as usize;
    while pos < block.len() {
        match decode(&block[pos..]) {
            Decoded::Record(r) => {
                out.push((pos, r.len, r.seq, r.kind));
                pos += r.len;
            }
            _ => break,
        }
    }
    out
}

/// Creates `path`'s missing parent directories, then the file with `bytes` (errors are
/// ignored: hostile layouts may make a path impossible, e.g. a parent that is a file).
pub fn put(fs: &FaultFs, path: &str, bytes: &[u8]) {
    mkdirs(fs, store_core::fs::parent_of(path));
    let opts = OpenOptions::new().write(true).create(true).truncate(true);
    if let Ok(f) = fs.open(path, opts) {
        let _ = f.write_all_at(bytes, 0);
    }
}

/// `create_dir` of `path` and of each missing ancestor (errors ignored).
pub fn mkdirs(fs: &FaultFs, path: &str) {
    let mut cur = String::new();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        if !cur.is_empty() {
            cur.push('/');
        }
        cur.push_str(c);
        let _ = fs.create_dir(&cur);
    }
}

/// Syncs every file and directory of `fs`, so that `fs.crash()` is an exact copy of the
/// live tree (used to run several independent recoveries on one layout).
pub fn settle(fs: &FaultFs) {
    let mut dirs = vec![String::new()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = fs.read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = if d.is_empty() {
                e.name.clone()
            } else {
                format!("{d}/{}", e.name)
            };
            if e.is_dir {
                dirs.push(p);
            } else if let Ok(f) = fs.open(&p, OpenOptions::read_only()) {
                let _ = f.sync_data();
            }
        }
        let _ = fs.sync_dir(&d);
    }
}

/// An independent copy of a settled filesystem.
pub fn copy_of(fs: &FaultFs) -> FaultFs {
    let c = fs.crash();
    debug_assert_eq!(c.image_hash(), fs.image_hash(), "settle() first");
    c
}

// ------------------------------------------------------------------ recover_dir

const PATHS: &[&str] = &[
    "msgs/1.blk",
    "msgs/2.blk",
    "msgs/3.blk",
    "msgs/4.blk",
    "msgs/5.blk",
    "msgs/9.blk",
    "index.db",
    "index.db.tmp",
    "purge.new/5.blk",
    "purge.new/6.blk",
    "purge.old/1.blk",
    "purge.old/2.blk",
    "msgs/01.blk",
    "msgs/0.blk",
    "msgs/x.txt",
    "msgs/9999999999999999999.blk",
    "msgs/18446744073709551616.blk",
    "stray",
    "purge.new/x",
    "msgs",
];
const DIRS: &[&str] = &[
    "msgs",
    "purge.new",
    "purge.old",
    "msgs/7.blk",
    "index.db",
    "msgs/sub",
    "purge.new/5.blk",
    "lost+found",
];
pub(crate) const SUBJECTS: &[&str] = &["a.1", "a.2", "b.1", "c"];

/// Builds a store directory from fuzz input (see [`fuzz_recover_dir`]) and settles it.
pub fn build_dir(data: &[u8]) -> FaultFs {
    let t = template();
    let mut inp = Input::new(data);
    let fs = FaultFs::new(Model::Posix);
    match inp.u8() % 4 {
        0 => {}
        1 => t.files.iter().for_each(|(p, b)| put(&fs, p, b)),
        2 => t
            .files
            .iter()
            .filter(|(p, _)| p.starts_with("msgs/"))
            .for_each(|(p, b)| put(&fs, p, b)),
        _ => mkdirs(&fs, "msgs"),
    }
    let file = |inp: &mut Input<'_>| &t.files[inp.pick(t.files.len())];
    for _ in 0..32 {
        if inp.is_empty() {
            break;
        }
        match inp.u8() % 14 {
            // a template file where it belongs
            0 => {
                let (p, b) = file(&mut inp);
                put(&fs, p, b);
            }
            // a template file under another name
            1 => {
                let (_, b) = file(&mut inp);
                put(&fs, PATHS[inp.pick(PATHS.len())], b);
            }
            // truncated
            2 => {
                let (p, b) = file(&mut inp);
                let n = inp.u16() as usize % (b.len() + 1);
                put(&fs, p, &b[..n]);
            }
            // bit flips
            3 => {
                let (p, b) = file(&mut inp);
                let mut b = b.clone();
                for _ in 0..=inp.u8() % 8 {
                    let bit = inp.u16() as usize % (b.len() * 8).max(1);
                    if let Some(x) = b.get_mut(bit / 8) {
                        *x ^= 1 << (bit % 8);
                    }
                }
                put(&fs, p, &b);
            }
            // a 32-bit field overwritten (lengths: 0, huge, off by one, ...)
            4 => {
                let (p, b) = file(&mut inp);
                let mut b = b.clone();
                let at = inp.u16() as usize % b.len().max(1);
                let v = match inp.u8() % 4 {
                    0 => u32::MAX,
                    1 => 0,
                    2 => (HARD_MAX_RECORD + 1) as u32,
                    _ => inp.u32(),
                };
                for (i, x) in v.to_le_bytes().iter().enumerate() {
                    if let Some(y) = b.get_mut(at + i) {
                        *y = *x;
                    }
                }
                put(&fs, p, &b);
            }
            // arbitrary bytes
            5 => {
                let p = PATHS[inp.pick(PATHS.len())];
                let b = inp.bytes(2048).to_vec();
                put(&fs, p, &b);
            }
            6 => mkdirs(&fs, DIRS[inp.pick(DIRS.len())]),
            7 => {
                if inp.u8().is_multiple_of(2) {
                    let _ = fs.remove_file(PATHS[inp.pick(PATHS.len())]);
                } else {
                    let _ = fs.remove_dir_all(DIRS[inp.pick(DIRS.len())]);
                }
            }
            // a half-done purge
            8 => {
                let (p, b) = &t.purge_block;
                let mode = inp.u8();
                let n = if mode & 4 != 0 {
                    inp.u16() as usize % (b.len() + 1)
                } else {
                    b.len()
                };
                put(&fs, p, &b[..n]);
                if mode & 1 != 0 {
                    let _ = fs.rename("msgs", "purge.old");
                }
                if mode & 2 != 0 {
                    let _ = fs.rename("purge.new", "msgs");
                }
            }
            // zeros after the end
            9 => {
                let p = PATHS[inp.pick(PATHS.len())];
                let grow = inp.u16() as u64;
                if let Ok(f) = fs.open(p, OpenOptions::new().read(true).write(true)) {
                    if let Ok(len) = f.len() {
                        let _ = f.set_len((len + grow).min(64 << 10));
                    }
                }
            }
            // a real record copied to the end of a file
            10 => {
                let (_, b) = file(&mut inp);
                let recs = records_of(b);
                if recs.is_empty() {
                    continue;
                }
                let (off, len, _, _) = recs[inp.pick(recs.len())];
                append_to(&fs, PATHS[inp.pick(PATHS.len())], &b[off..off + len]);
            }
            // a forged record with a valid crc: any kind, sequence, subject
            11 => {
                let kind = [Kind::Msg, Kind::Tombstone, Kind::Floor, Kind::Truncate][inp.pick(4)];
                let seq = match inp.u8() % 4 {
                    0 => inp.u8() as u64,
                    1 => u64::MAX - inp.u8() as u64,
                    2 => (u64::MAX >> 1) - inp.u8() as u64 + 1,
                    _ => inp.u64(),
                };
                let mut rec = Vec::new();
                let body: &[u8] = if kind == Kind::Msg { b"forged" } else { b"" };
                let subj = if kind == Kind::Msg {
                    SUBJECTS[inp.pick(SUBJECTS.len())].as_bytes()
                } else {
                    b""
                };
                encode(&mut rec, kind, 0, seq, inp.u64() as i64, subj, b"", body);
                append_to(&fs, PATHS[inp.pick(PATHS.len())], &rec);
            }
            // the template index.db with a field changed and its crc fixed
            12 => {
                let Some((_, idx)) = t.files.iter().find(|(p, _)| p == "index.db") else {
                    continue;
                };
                let mut b = idx.clone();
                for _ in 0..=inp.u8() % 3 {
                    let at = 8 + inp.u16() as usize % b.len().saturating_sub(12).max(1);
                    let v = inp.u64().to_le_bytes();
                    let w = 1 + inp.pick(8);
                    for (i, x) in v.iter().take(w).enumerate() {
                        if at + i + 4 < b.len() {
                            b[at + i] = *x;
                        }
                    }
                }
                fix_index_crc(&mut b);
                put(&fs, "index.db", &b);
            }
            // an index.db body from the input, wrapped in a valid header and crc
            _ => {
                let b = wrap_index(inp.bytes(1024));
                put(&fs, "index.db", &b);
            }
        }
    }
    settle(&fs);
    fs
}

fn append_to(fs: &FaultFs, path: &str, bytes: &[u8]) {
    mkdirs(fs, store_core::fs::parent_of(path));
    if let Ok(f) = fs.open(path, OpenOptions::read_write_create()) {
        if let Ok(len) = f.len() {
            let _ = f.write_all_at(bytes, len);
        }
    }
}

/// What a recovery of one directory came to (for the figures of the robustness tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryOutcome {
    /// `Store::open` with `TolerateCorruptTail` returned Ok.
    pub tolerant_ok: bool,
    /// ... or this typed error (its `Display`).
    pub tolerant_err: Option<String>,
    /// `Store::open` with `Strict` returned Ok.
    pub strict_ok: bool,
    /// ... or this typed error.
    pub strict_err: Option<String>,
    /// `verify` returned Ok and reported no damage.
    pub verify_clean: bool,
}

/// The `recover_dir` target: a store directory built from the input (real blocks from
/// [`template`], truncated, bit-flipped, with fields overwritten, forged records with valid
/// checksums, arbitrary files and directories under known and unknown names, a half-done
/// purge, an index.db with valid crc but forged contents), then [`check_recovery`].
pub fn fuzz_recover_dir(data: &[u8]) {
    let fs = build_dir(data);
    check_recovery(&fs);
}

/// Recovery of an arbitrary (settled) directory, each on an independent copy: `verify` never
/// panics and changes nothing; `Store::open` in both recovery modes returns `Ok` or a typed
/// `Corrupt`/`Io` error (a `Corrupt` names a file that exists, at an offset inside it); a
/// store that opens is consistent ([`check_store`]), and opening it again gives the same
/// state (recovery is idempotent). Panics on any violation.
pub fn check_recovery(fs: &FaultFs) -> RecoveryOutcome {
    let mut out = RecoveryOutcome::default();
    let before = fs.image_hash();
    let v = copy_of(fs);
    match store_core::verify(&v) {
        Ok(r) => out.verify_clean = r.is_clean(),
        Err(e) => expect_typed("verify", &e, &v),
    }
    assert_eq!(v.image_hash(), before, "verify changed the directory");
    for mode in [RecoveryMode::Strict, RecoveryMode::TolerateCorruptTail] {
        let img = copy_of(fs);
        let cfg = Config {
            recovery: mode,
            ..Config::default()
        };
        let clock = || Box::new(ManualClock::new(5_000_000_000));
        let res = Store::open_with_clock(img.clone(), cfg.clone(), clock());
        let (ok, err) = match res {
            Ok(mut s) => match check_store(&mut s) {
                Ok(state) => {
                    drop(s);
                    // recovery is idempotent: the repaired directory opens to the same state
                    match Store::open_with_clock(img.clone(), cfg, clock()) {
                        Ok(again) => assert_eq!(
                            again.state(),
                            state,
                            "{mode:?}: reopening gives another state"
                        ),
                        Err(e) => panic!("{mode:?}: second open failed: {e}"),
                    }
                    (true, None)
                }
                Err(e) => {
                    expect_typed("a read after open", &e, &img);
                    (true, Some(e.to_string()))
                }
            },
            Err(e) => {
                expect_typed("open", &e, &img);
                (false, Some(e.to_string()))
            }
        };
        match mode {
            RecoveryMode::Strict => (out.strict_ok, out.strict_err) = (ok, err),
            _ => (out.tolerant_ok, out.tolerant_err) = (ok, err),
        }
    }
    out
}

/// Asserts `e` is one of the errors recovery may return on a hostile directory: `Corrupt`
/// naming a path that exists in `fs` at an offset inside it, or `Io` from the filesystem.
pub fn expect_typed(what: &str, e: &Error, fs: &FaultFs) {
    match e {
        Error::Corrupt { file, offset, .. } => {
            let tree = fs.list_tree();
            let len = match fs.read_file(file) {
                Ok(b) => b.len() as u64,
                Err(_) if tree.contains(&format!("{file}/")) => 0,
                Err(_) => panic!("{what}: {e} names {file:?}, which does not exist: {tree:?}"),
            };
            assert!(
                *offset <= len,
                "{what}: {e}: offset past the end ({len} bytes)"
            );
        }
        Error::Io { source, .. } => assert!(
            !source.to_string().contains("internal invariant"),
            "{what}: {e}"
        ),
        other => panic!("{what}: unexpected error {other:?}"),
    }
}

/// Checks an opened store against itself: every sequence in `first..=last` reads back as
/// itself or `NotFound`, the count matches `msgs`, a filter walk and the subject counts
/// agree, and the next append gets `last + 1`; returns the state after that append. A typed
/// `Corrupt`/`Io` read error (damage found lazily, e.g. a block an index.db vouched for) is
/// returned; anything else panics.
pub fn check_store<F: Fs>(s: &mut Store<F>) -> Result<StreamState, Error> {
    let st = s.state();
    assert!(
        st.last_seq <= u64::MAX >> 1,
        "last_seq {} beyond 2^63-1",
        st.last_seq
    );
    if st.last_seq == 0 {
        assert_eq!((st.first_seq, st.msgs), (0, 0), "{st:?}");
    } else {
        assert!(
            st.first_seq >= 1 && st.first_seq <= st.last_seq + 1,
            "{st:?}"
        );
    }
    let mut present = 0;
    let hi = st.last_seq.min(st.first_seq.saturating_add(20_000));
    for seq in st.first_seq.max(1)..=hi {
        match s.get(seq) {
            Ok(m) => {
                assert_eq!(m.seq, seq);
                present += 1;
            }
            Err(Error::NotFound { .. }) => {}
            Err(e @ (Error::Corrupt { .. } | Error::Io { .. })) => return Err(e),
            Err(e) => panic!("get({seq}): unexpected {e:?}"),
        }
    }
    if st.last_seq < st.first_seq.saturating_add(20_000) {
        assert_eq!(present, st.msgs, "state {st:?} but {present} readable");
        let per: u64 = s
            .subjects_state(">")
            .unwrap_or_else(|e| panic!("subjects_state: {e}"))
            .values()
            .sum();
        assert_eq!(per, st.msgs, "subject counts disagree with {st:?}");
        let (mut walked, mut from) = (0, 0);
        loop {
            match s.next_matching(">", from) {
                Ok(Some(m)) => {
                    assert!(m.seq >= from && m.seq >= st.first_seq && m.seq <= st.last_seq);
                    walked += 1;
                    from = m.seq + 1;
                }
                Ok(None) => break,
                Err(e @ (Error::Corrupt { .. } | Error::Io { .. })) => return Err(e),
                Err(e) => panic!("next_matching: unexpected {e:?}"),
            }
        }
        assert_eq!(
            walked, st.msgs,
            "a filter walk finds {walked}, state {st:?}"
        );
    }
    if st.last_seq < u64::MAX >> 1 {
        match s.append("check.next", b"", b"after recovery") {
            Ok(seq) => {
                assert_eq!(seq, st.last_seq + 1, "next append after {st:?}");
                let m = s.get(seq).unwrap_or_else(|e| panic!("get({seq}): {e}"));
                assert_eq!(m.payload, b"after recovery");
            }
            Err(e @ (Error::Corrupt { .. } | Error::Io { .. })) => return Err(e),
            Err(e) => panic!("append after recovery: unexpected {e:?}"),
        }
    }
    Ok(s.state())
}

// ------------------------------------------------------------------ model_ops

pub(crate) const FILTERS: &[&str] = &[">", "a.*", "a.1", "b.>", "*.1", "c", "a.>"];

/// One raw operation of the model target; arguments are resolved against the model's
/// state when it runs (a delete picks one of the live messages, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FuzzOp {
    /// `Step::Open`.
    Open,
    /// Append on subject `SUBJECTS[s]` a payload of `12 + 4 * size` bytes.
    Append(u8, u8),
    /// `sync()`.
    Sync,
    /// Delete the k-th live message.
    Delete(u8),
    /// Erase the k-th live message.
    Erase(u8),
    /// `purge()`.
    Purge,
    /// `purge_ex(FILTERS[f], up_to, keep)`.
    PurgeEx(u8, u8, u8),
    /// Compact at a sequence in `first+1 ..= last+3`.
    Compact(u8),
    /// Truncate at a sequence in `first-1 .. last`.
    Truncate(u8),
    /// Advance the clock by k * 100 µs and `tick()`.
    Tick(u8),
    /// Drop the store (no close) and open it again.
    Reopen,
}

/// A model-target program: configuration, operations, and where to crash.
#[derive(Clone, Debug)]
pub struct ModelPlan {
    /// Sync policy.
    pub sync: SyncPolicy,
    /// Block size.
    pub block_size: u64,
    /// Crash model.
    pub model: Model,
    /// Crash point selector (taken modulo the number of operations + 1).
    pub crash: u16,
    /// Image selector at that point.
    pub image: u8,
    /// Exploration seed (random images).
    pub seed: u64,
    /// The operations (the first is `Open`).
    pub ops: Vec<FuzzOp>,
}

impl ModelPlan {
    /// Decodes a plan: 6 header bytes, then one operation per 1-4 bytes (at most 48).
    pub fn parse(data: &[u8]) -> ModelPlan {
        let mut inp = Input::new(data);
        let sync = match inp.u8() % 3 {
            0 => SyncPolicy::Always,
            1 => SyncPolicy::Interval(std::time::Duration::from_millis(1)),
            _ => SyncPolicy::Never,
        };
        let block_size = [1024, 2048, 4096, 1 << 20][inp.pick(4)];
        let model = if inp.u8().is_multiple_of(2) {
            Model::Posix
        } else {
            Model::Ordered
        };
        let crash = inp.u16();
        let image = inp.u8();
        let seed = crash as u64 ^ ((image as u64) << 16);
        let mut ops = vec![FuzzOp::Open];
        while !inp.is_empty() && ops.len() < 48 {
            ops.push(match inp.u8() % 16 {
                0..=4 => FuzzOp::Append(inp.u8(), inp.u8()),
                5 => FuzzOp::Sync,
                6 | 7 => FuzzOp::Delete(inp.u8()),
                8 => FuzzOp::Erase(inp.u8()),
                9 => FuzzOp::Purge,
                10 => FuzzOp::PurgeEx(inp.u8(), inp.u8(), inp.u8()),
                11 => FuzzOp::Compact(inp.u8()),
                12 => FuzzOp::Truncate(inp.u8()),
                13 => FuzzOp::Tick(inp.u8()),
                14 => FuzzOp::Reopen,
                _ => FuzzOp::Append(inp.u8(), 0),
            });
        }
        ModelPlan {
            sync,
            block_size,
            model,
            crash,
            image,
            seed,
            ops,
        }
    }

    /// The store configuration.
    pub fn config(&self) -> Config {
        config(self.block_size, self.sync, Ablation::Full)
    }
}

/// The reference model: what is stored, by sequence (subject index, payload id).
#[derive(Clone, Debug, Default)]
pub(crate) struct RefModel {
    pub(crate) live: BTreeMap<u64, (usize, u64)>,
    pub(crate) last: u64,
    next_id: u64,
}

impl RefModel {
    pub(crate) fn first(&self) -> u64 {
        self.live.keys().next().copied().unwrap_or(self.last + 1)
    }

    /// Resolves a raw operation into a workload step (`None`: nothing to do).
    fn resolve(&self, op: &FuzzOp) -> Option<Step> {
        let nth = |k: u8| -> Option<u64> {
            let n = self.live.len();
            (n > 0).then(|| *self.live.keys().nth(k as usize % n).expect("in range"))
        };
        Some(match *op {
            FuzzOp::Open => Step::Open,
            FuzzOp::Reopen => Step::Reopen,
            FuzzOp::Append(s, size) => {
                Step::Append(SUBJECTS[s as usize % SUBJECTS.len()], 12 + 4 * size as u16)
            }
            FuzzOp::Sync => Step::Sync,
            FuzzOp::Delete(k) => Step::Delete(nth(k)?),
            FuzzOp::Erase(k) => Step::Erase(nth(k)?),
            FuzzOp::Purge => Step::Purge,
            FuzzOp::PurgeEx(f, up, keep) => Step::PurgeEx(
                FILTERS[f as usize % FILTERS.len()],
                if up.is_multiple_of(2) {
                    0
                } else {
                    up as u64 % (self.last + 2)
                },
                keep as u64 % 3,
            ),
            // from just below `first` (nothing left to remove in memory: the compact must
            // still make that durable) to past the end
            FuzzOp::Compact(k) => {
                let lo = self.first().saturating_sub(2).max(1);
                Step::Compact(lo + k as u64 % (self.last + 4 - lo))
            }
            // from `first - 1` to past the end (at or above last nothing is cut, and last
            // is still promised); never a refused one (below first - 1)
            FuzzOp::Truncate(k) => {
                let lo = self.first() - 1;
                Step::Truncate(lo + k as u64 % (self.last + 2 - lo))
            }
            FuzzOp::Tick(k) => Step::Tick(k as u64 * 100_000),
        })
    }

    pub(crate) fn apply(&mut self, step: &Step) {
        match *step {
            Step::Open => self.next_id = 0,
            Step::Append(subj, _) => {
                self.last += 1;
                let s = SUBJECTS.iter().position(|x| *x == subj).expect("subject");
                self.live.insert(self.last, (s, self.next_id));
                self.next_id += 1;
            }
            Step::Delete(seq) | Step::Erase(seq) => {
                self.live.remove(&seq);
            }
            Step::Purge => self.live.clear(),
            Step::PurgeEx(filter, up_to, keep) => {
                if filter == ">" && up_to == 0 && keep == 0 {
                    self.live.clear();
                    return;
                }
                let cands: Vec<(u64, usize)> = self
                    .live
                    .iter()
                    .filter(|(&q, &(s, _))| {
                        store_core::subject::matches(filter, SUBJECTS[s])
                            && (up_to == 0 || q < up_to)
                    })
                    .map(|(&q, &(s, _))| (q, s))
                    .collect();
                let mut per: BTreeMap<usize, u64> = BTreeMap::new();
                for &(_, s) in &cands {
                    *per.entry(s).or_default() += 1;
                }
                let mut seen: BTreeMap<usize, u64> = BTreeMap::new();
                for (q, s) in cands {
                    let n = seen.entry(s).or_default();
                    *n += 1;
                    if *n + keep <= per[&s] {
                        self.live.remove(&q);
                    }
                }
            }
            Step::Compact(seq) => {
                let f = seq - 1;
                if f < self.first() && f <= self.last {
                    return;
                }
                self.live.retain(|&q, _| q > f);
                self.last = self.last.max(f);
            }
            Step::Truncate(seq) => {
                if seq < self.last {
                    self.live.retain(|&q, _| q <= seq);
                    self.last = seq;
                }
            }
            Step::TrimOnOpen(n) => {
                while self.live.len() as u64 > n.max(1) {
                    self.live.pop_first();
                }
            }
            Step::Sync | Step::Reopen | Step::Tick(_) | Step::Checkpoint | Step::Close => {}
        }
    }

    /// Compares the store with the model: counters, every sequence, subjects.
    fn compare(&self, s: &mut dyn super::StreamOps) -> Result<(), String> {
        let st = s.state().map_err(|e| format!("state: {e}"))?;
        let want_first = if self.last == 0 { 0 } else { self.first() };
        if (st.msgs, st.first_seq, st.last_seq) != (self.live.len() as u64, want_first, self.last) {
            return Err(format!(
                "store (msgs, first, last) = ({}, {}, {}), model ({}, {want_first}, {})",
                st.msgs,
                st.first_seq,
                st.last_seq,
                self.live.len(),
                self.last
            ));
        }
        let subjects: BTreeSet<usize> = self.live.values().map(|v| v.0).collect();
        if st.num_subjects != subjects.len() as u64 {
            return Err(format!(
                "store has {} subjects, model {}",
                st.num_subjects,
                subjects.len()
            ));
        }
        for seq in 1..=self.last {
            match (s.get(seq), self.live.get(&seq)) {
                (Ok(m), Some(&(subj, id))) => {
                    if m.subject != SUBJECTS[subj] || payload_id(&m.payload) != Some(id) {
                        return Err(format!(
                            "get({seq}) = {} id {:?}, model {} id {id}",
                            m.subject,
                            payload_id(&m.payload),
                            SUBJECTS[subj]
                        ));
                    }
                }
                (Err(Error::NotFound { .. }), None) => {}
                (got, want) => {
                    return Err(format!(
                        "get({seq}) = {:?}, model {want:?}",
                        got.map(|m| m.seq)
                    ))
                }
            }
        }
        Ok(())
    }
}

/// Runs a plan's operations on a live filesystem for the explorer, checking the store
/// against the reference model after every step. The first mismatch (or panic) is kept in
/// `finding`; the explorer only sees an error that ends the workload.
fn run_plan(
    plan: &ModelPlan,
    crash_point: usize,
    image: usize,
    finding: &mut Option<String>,
) -> Result<fault_fs::Replay<Event>, fault_fs::Error> {
    let cfg = plan.config();
    let mut ecfg = ExploreConfig::new(plan.model);
    ecfg.seed = plan.seed;
    ecfg.max_images_per_point = 24;
    ecfg.random_images_per_point = 4;
    ecfg.quiet_panics = false;
    let mut runner = Runner::new(&Native, cfg);
    let mut model = RefModel::default();
    let run_step = |fs: &FaultFs, op: &FuzzOp, j: &mut Journal<Event>| {
        if finding.is_some() {
            return Err("stopped".to_string());
        }
        let Some(step) = model.resolve(op) else {
            return Ok(());
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runner.step(fs, &step, j)?;
            model.apply(&step);
            let s = runner.ops().ok_or("no store")?;
            model.compare(s)
        }));
        let r = match r {
            Ok(r) => r,
            Err(p) => Err(format!("panic: {}", panic_text(&*p))),
        };
        if let Err(e) = &r {
            *finding = Some(format!("{step:?}: {e}"));
        }
        r
    };
    fault_fs::replay_image(&ecfg, &plan.ops, run_step, crash_point, image)
}

/// The text of a panic payload.
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic)".into())
}

/// The `model_ops` target: a random operation sequence (appends, syncs, deletes, erases,
/// purges, purge_ex, compact, truncate, ticks, reopens) under a random sync policy, block
/// size and crash model. Every step is checked against a reference model of the stream;
/// then the power is cut at a chosen operation boundary (inside any operation) and at the
/// end, and a crash image the model allows there is recovered and checked with
/// [`check_image`] against the journal of what was acknowledged. Panics with the plan on
/// any mismatch.
pub fn fuzz_model_ops(data: &[u8]) {
    let plan = ModelPlan::parse(data);
    let mut finding = None;
    let ops = match run_plan(&plan, usize::MAX, 0, &mut finding) {
        Err(fault_fs::Error::NoSuchCrashPoint { ops, .. }) => ops,
        other => panic!("unexpected replay result {other:?}"),
    };
    if let Some(f) = finding {
        panic!("functional mismatch: {f}\nplan: {plan:?}");
    }
    let cfg = plan.config();
    for point in [plan.crash as usize % (ops + 1), ops] {
        let mut image = plan.image as usize;
        let rep = loop {
            let mut finding = None;
            match run_plan(&plan, point, image, &mut finding) {
                Ok(r) => break r,
                Err(fault_fs::Error::NoSuchImage { images, .. }) if images > 0 => image %= images,
                Err(e) => panic!("replay: {e}\nplan: {plan:?}"),
            }
        };
        if let Err(e) = check_image(&Native, &cfg, &rep.image, &rep.events) {
            panic!(
                "crash after op {point} of {ops}, image {image} ({}): {e}\nlast op: {:?}\nplan: {plan:?}",
                rep.image_desc,
                rep.trace.last().map(|t| t.to_string())
            );
        }
    }
}
