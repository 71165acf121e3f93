//! Sample stores and the `recover_dir` target: arbitrary directory contents built in fault-fs,
//! recovered and checked.

use super::*;

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
        let cfg = Config::default().with_block_size(1024);
        let clock = ManualClock::new(1_000_000_000);
        let mut s = Store::builder(fs.clone())
            .config(cfg)
            .clock(clock)
            .open()
            .expect("open");
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
    mkdirs(fs, seqstore_core::fs::parent_of(path));
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
    mkdirs(fs, seqstore_core::fs::parent_of(path));
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
    match seqstore_core::verify(&v) {
        Ok(r) => out.verify_clean = r.is_clean(),
        Err(e) => expect_typed("verify", &e, &v),
    }
    assert_eq!(v.image_hash(), before, "verify changed the directory");
    for mode in [RecoveryMode::Strict, RecoveryMode::TolerateCorruptTail] {
        let img = copy_of(fs);
        let cfg = Config::default().with_recovery(mode);
        let clock = || Box::new(ManualClock::new(5_000_000_000));
        let res = Store::builder(img.clone())
            .config(cfg.clone())
            .clock(clock())
            .open();
        let (ok, err) = match res {
            Ok(mut s) => match check_store(&mut s) {
                Ok(state) => {
                    drop(s);
                    // recovery is idempotent: the repaired directory opens to the same state
                    match Store::builder(img.clone())
                        .config(cfg)
                        .clock(clock())
                        .open()
                    {
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
