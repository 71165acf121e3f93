//! Small programs with known crash safety, and their checkers: the subjects of
//! seqstore-wasi-trace's tests. The same source builds for `wasm32-wasip2` (checked with the
//! served filesystem) and natively (checked from its strace), so both routes can be compared.
//!
//! Writers work in `$SUBJECT_DIR` (default `/data` under WASI, `.` natively) and write each
//! promise as a line to `$SEQSTORE_TRACE_MARKS` once it is made:
//! - `replace MODE ROUNDS`: replaces `value` atomically ROUNDS times (write `value.tmp`,
//!   fsync it, rename it over `value`, fsync the directory). MODE `good` does all of it,
//!   `no-dir-sync` skips the directory fsync, `no-sync` every fsync. Promise: `value N`.
//! - `log MODE RECORDS`: appends checksummed lines to `log` (O_APPEND); MODE `sync` fsyncs
//!   the directory once the file exists and `sync_data`s each record, `no-sync` never.
//!   Promise: `rec N`.
//!
//! - `ops SEED N`: N seeded random calls (create, append, write at an offset, set_len,
//!   rename, remove, mkdir, rmdir, hard link, fsyncs, reads, listings, metadata) on a few
//!   names, each printed with its result: the served filesystem's differential test.
//!
//! - `redb ROWS`: a redb database `db.redb`, one write transaction per row committed with
//!   redb's default (immediate) durability. Promise: `row N`.
//!
//! Checkers read the image at `$IMAGE_DIR` and the promises from `$MARKS` (one per line, the
//! in-process checker) or the file `$MARKS_FILE` (the shell checker); exit 0 when every
//! promise is kept, else print why and exit 1: `check-replace`, `check-log`, `check-redb`, and
//! `check-seqstore` (a seqstore stream whose promises are `acked SEQ`: the stream's last
//! sequence is never below an acknowledged one; a `LOCK.wasi` marker the crash left is
//! removed first, the documented recovery when no process holds the store).
#![forbid(unsafe_code)]

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

fn dir() -> PathBuf {
    std::env::var_os("SUBJECT_DIR").map_or_else(
        || {
            PathBuf::from(if cfg!(target_os = "wasi") {
                "/data"
            } else {
                "."
            })
        },
        PathBuf::from,
    )
}

fn mark(m: &str) -> std::io::Result<()> {
    let Some(p) = std::env::var_os("SEQSTORE_TRACE_MARKS") else {
        return Ok(());
    };
    let mut f = OpenOptions::new().create(true).append(true).open(p)?;
    f.write_all(format!("{m}\n").as_bytes())
}

/// The content of version `v` of `value`: long enough to tear, and self-describing.
fn value_of(v: u64) -> Vec<u8> {
    let mut s = format!("version {v} ");
    while s.len() < 600 {
        s.push_str(&format!("{v:08} "));
    }
    s.push('\n');
    s.into_bytes()
}

fn replace(mode: &str, rounds: u64) -> std::io::Result<()> {
    let d = dir();
    for v in 1..=rounds {
        let tmp = d.join("value.tmp");
        let mut f = File::create(&tmp)?;
        f.write_all(&value_of(v))?;
        if mode != "no-sync" {
            f.sync_all()?;
        }
        drop(f);
        fs::rename(&tmp, d.join("value"))?;
        if mode == "good" {
            File::open(&d)?.sync_all()?;
        }
        mark(&format!("value {v}"))?;
    }
    Ok(())
}

fn checksum(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn record(i: u64) -> String {
    let body = format!("rec {i}");
    format!("{body} {:08x}\n", checksum(&body))
}

fn log(mode: &str, records: u64) -> std::io::Result<()> {
    let d = dir();
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(d.join("log"))?;
    if mode == "sync" {
        File::open(&d)?.sync_all()?;
    }
    for i in 1..=records {
        f.write_all(record(i).as_bytes())?;
        if mode == "sync" {
            f.sync_data()?;
        }
        mark(&format!("rec {i}"))?;
    }
    Ok(())
}

/// The promises made before the crash.
fn marks() -> Vec<String> {
    let text = match (std::env::var("MARKS"), std::env::var_os("MARKS_FILE")) {
        (Ok(m), _) => m,
        (Err(_), Some(p)) => fs::read_to_string(p).unwrap_or_default(),
        _ => String::new(),
    };
    text.lines().map(str::to_string).collect()
}

/// The highest `N` of the marks `PREFIX N`.
fn promised(prefix: &str) -> u64 {
    marks()
        .iter()
        .filter_map(|m| m.strip_prefix(prefix)?.trim().parse().ok())
        .max()
        .unwrap_or(0)
}

fn image() -> PathBuf {
    std::env::var_os("IMAGE_DIR").map_or_else(dir, PathBuf::from)
}

fn check_replace() -> Result<(), String> {
    let k = promised("value ");
    let bytes = match fs::read(image().join("value")) {
        Ok(b) => b,
        Err(_) if k == 0 => return Ok(()),
        Err(e) => {
            return Err(format!(
                "value unreadable ({e}) after version {k} was promised"
            ))
        }
    };
    let v: u64 = String::from_utf8_lossy(&bytes)
        .strip_prefix("version ")
        .and_then(|r| r.split(' ').next()?.parse().ok())
        .ok_or_else(|| format!("value is torn or empty ({} bytes)", bytes.len()))?;
    if bytes != value_of(v) {
        return Err(format!(
            "value of version {v} is torn ({} bytes)",
            bytes.len()
        ));
    }
    if v < k {
        return Err(format!("value is version {v}, older than the promised {k}"));
    }
    Ok(())
}

fn check_log() -> Result<(), String> {
    let k = promised("rec ");
    let text = match fs::read(image().join("log")) {
        Ok(b) => b,
        Err(_) if k == 0 => return Ok(()),
        Err(e) => {
            return Err(format!(
                "log unreadable ({e}) after record {k} was promised"
            ))
        }
    };
    let mut complete = 0;
    for line in text.split_inclusive(|&b| b == b'\n') {
        if line.last() != Some(&b'\n') {
            break; // a torn tail: a record never promised
        }
        let want = record(complete + 1);
        if line != want.as_bytes() {
            return Err(format!(
                "record {} is corrupt: {:?}",
                complete + 1,
                String::from_utf8_lossy(line)
            ));
        }
        complete += 1;
    }
    if complete < k {
        return Err(format!("log holds {complete} records, {k} were promised"));
    }
    Ok(())
}

#[cfg(feature = "seqstore")]
fn check_seqstore() -> Result<(), String> {
    let k = promised("acked ");
    // WASI has no file locks: the store's lock there is a marker file, which a power cut
    // leaves behind. No process survived the crash, so the documented recovery applies:
    // remove the marker.
    let marker = image().join("LOCK.wasi");
    if marker.exists() {
        fs::remove_file(&marker)
            .map_err(|e| format!("removing the stale {}: {e}", marker.display()))?;
    }
    let fs =
        seqstore_fs::HostFs::open(image()).map_err(|e| format!("cannot open the image: {e}"))?;
    let store = seqstore_core::Store::builder(fs)
        .open()
        .map_err(|e| format!("the store does not open: {e}"))?;
    let st = store.state();
    if st.last_seq < k {
        return Err(format!(
            "last sequence {} below the acknowledged {k}",
            st.last_seq
        ));
    }
    Ok(())
}

/// splitmix64: the random operations' generator (no dependencies, same on every target).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.below(of.len() as u64) as usize]
    }
}

const FILES: &[&str] = &["f0", "f1", "f2", "d0/f0", "d0/f1", "d0/e/f0", "d1/f0"];
const DIRS: &[&str] = &["d0", "d1", "d0/e"];

/// One random filesystem call; what it did, as a line (results and error kinds included).
fn random_op(rng: &mut Rng, d: &std::path::Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let f = rng.pick(FILES);
    let p = d.join(f);
    let len = rng.below(3000) as usize;
    let bytes: Vec<u8> = (0..len).map(|i| (i as u64 ^ rng.0) as u8).collect();
    let off = rng.below(4000);
    // creates and appends twice as likely as the rest, so that the names fill up
    let res: std::io::Result<String> = match rng.below(17) % 15 {
        0 => File::create(&p)
            .and_then(|mut h| h.write_all(&bytes))
            .map(|()| format!("create {f} {len}")),
        1 => OpenOptions::new()
            .append(true)
            .create(true)
            .open(&p)
            .and_then(|mut h| h.write_all(&bytes))
            .map(|()| format!("append {f} {len}")),
        2 => OpenOptions::new()
            .write(true)
            .open(&p)
            .and_then(|mut h| {
                h.seek(SeekFrom::Start(off))?;
                h.write_all(&bytes)
            })
            .map(|()| format!("pwrite {f} {len} at {off}")),
        3 => OpenOptions::new()
            .write(true)
            .open(&p)
            .and_then(|h| h.set_len(off))
            .map(|()| format!("set_len {f} {off}")),
        4 => {
            let g = rng.pick(FILES);
            fs::rename(&p, d.join(g)).map(|()| format!("rename {f} {g}"))
        }
        5 => fs::remove_file(&p).map(|()| format!("remove_file {f}")),
        6 => {
            let x = rng.pick(DIRS);
            fs::create_dir(d.join(x)).map(|()| format!("create_dir {x}"))
        }
        7 => {
            let x = rng.pick(DIRS);
            fs::remove_dir(d.join(x)).map(|()| format!("remove_dir {x}"))
        }
        8 => {
            let g = rng.pick(FILES);
            fs::hard_link(&p, d.join(g)).map(|()| format!("hard_link {f} {g}"))
        }
        9 => OpenOptions::new()
            .write(true)
            .open(&p)
            .and_then(|h| h.sync_all())
            .map(|()| format!("sync_all {f}")),
        10 => OpenOptions::new()
            .write(true)
            .open(&p)
            .and_then(|h| h.sync_data())
            .map(|()| format!("sync_data {f}")),
        11 => {
            let x = rng.pick(DIRS);
            File::open(d.join(x))
                .and_then(|h| h.sync_all())
                .map(|()| format!("dir sync {x}"))
        }
        12 => File::open(&p)
            .and_then(|mut h| {
                let mut b = Vec::new();
                h.read_to_end(&mut b)?;
                Ok(b)
            })
            .map(|b| {
                format!(
                    "read {f} {} {:08x}",
                    b.len(),
                    checksum(&String::from_utf8_lossy(&b))
                )
            }),
        13 => {
            let x = rng.pick(DIRS);
            fs::read_dir(d.join(x)).and_then(|it| {
                let mut names: Vec<String> = it
                    .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect::<Result<_, _>>()?;
                names.sort();
                Ok(format!("read_dir {x} {names:?}"))
            })
        }
        _ => fs::metadata(&p).map(|m| format!("metadata {f} dir={} len={}", m.is_dir(), m.len())),
    };
    match res {
        Ok(s) => s,
        Err(e) => format!("error {:?}", e.kind()),
    }
}

#[cfg(feature = "redb")]
mod redb_subject {
    use super::{dir, image, mark, promised};
    use redb::{ReadableDatabase as _, ReadableTable as _};

    const ROWS: redb::TableDefinition<u64, &str> = redb::TableDefinition::new("rows");

    pub(super) fn row_value(i: u64) -> String {
        format!("row {i} {}", "r".repeat(100))
    }

    /// `redb ROWS`: one write transaction per row, committed with redb's default (immediate)
    /// durability; `row N` is promised once its commit returns.
    pub(super) fn redb_rows(rows: u64) -> Result<(), String> {
        let db = redb::Database::create(dir().join("db.redb")).map_err(|e| e.to_string())?;
        for i in 1..=rows {
            let tx = db.begin_write().map_err(|e| e.to_string())?;
            {
                let mut t = tx.open_table(ROWS).map_err(|e| e.to_string())?;
                t.insert(i, row_value(i).as_str())
                    .map_err(|e| e.to_string())?;
            }
            tx.commit().map_err(|e| e.to_string())?;
            mark(&format!("row {i}")).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Every promised row is in the database, which opens.
    pub(super) fn check_redb() -> Result<(), String> {
        let k = promised("row ");
        let path = image().join("db.redb");
        if !path.exists() {
            return if k == 0 {
                Ok(())
            } else {
                Err(format!("db.redb is missing, {k} rows were promised"))
            };
        }
        let db = redb::Database::create(&path)
            .map_err(|e| format!("the database does not open: {e}"))?;
        let tx = db.begin_read().map_err(|e| e.to_string())?;
        let t = match tx.open_table(ROWS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) if k == 0 => return Ok(()),
            Err(e) => return Err(format!("table rows: {e}")),
        };
        for i in 1..=k {
            match t.get(i).map_err(|e| e.to_string())? {
                Some(v) if v.value() == row_value(i) => {}
                Some(v) => return Err(format!("row {i} is wrong: {:?}", v.value())),
                None => return Err(format!("row {i} is missing, {k} were promised")),
            }
        }
        Ok(())
    }
}

/// `ops SEED N`: N random filesystem calls, each printed with its result.
fn random_ops(seed: u64, n: u64) -> std::io::Result<()> {
    let mut rng = Rng(seed);
    let d = dir();
    // most directories exist from the start (removing and recreating them is a call too)
    for x in DIRS.iter().take(2 + rng.below(2) as usize) {
        fs::create_dir(d.join(x))?;
    }
    for i in 0..n {
        println!("{i} {}", random_op(&mut rng, &d));
    }
    Ok(())
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: wasi-subjects replace|log MODE N | check-replace | check-log | check-seqstore"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    let res = match (
        args.first().map(String::as_str),
        args.get(1).map(String::as_str),
        n(2),
    ) {
        (Some("replace"), Some(m @ ("good" | "no-dir-sync" | "no-sync")), Some(r)) => {
            replace(m, r).map_err(|e| e.to_string())
        }
        (Some("log"), Some(m @ ("sync" | "no-sync")), Some(r)) => {
            log(m, r).map_err(|e| e.to_string())
        }
        (Some("ops"), Some(seed), Some(n)) => match seed.parse() {
            Ok(seed) => random_ops(seed, n).map_err(|e| e.to_string()),
            Err(_) => return usage(),
        },
        #[cfg(feature = "redb")]
        (Some("redb"), Some(r), _) => match r.parse() {
            Ok(r) => redb_subject::redb_rows(r),
            Err(_) => return usage(),
        },
        #[cfg(feature = "redb")]
        (Some("check-redb"), ..) => redb_subject::check_redb(),
        (Some("check-replace"), ..) => check_replace(),
        (Some("check-log"), ..) => check_log(),
        #[cfg(feature = "seqstore")]
        (Some("check-seqstore"), ..) => check_seqstore(),
        _ => return usage(),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            println!("{why}");
            ExitCode::FAILURE
        }
    }
}
