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
//! Checkers read the image at `$IMAGE_DIR` and the promises from `$MARKS` (one per line, the
//! in-process checker) or the file `$MARKS_FILE` (the shell checker); exit 0 when every
//! promise is kept, else print why and exit 1: `check-replace`, `check-log`, and
//! `check-seqstore` (a seqstore stream whose promises are `acked SEQ`: the stream's last
//! sequence is never below an acknowledged one; a `LOCK.wasi` marker the crash left is
//! removed first, the documented recovery when no process holds the store).

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
        (Some("check-replace"), ..) => check_replace(),
        (Some("check-log"), ..) => check_log(),
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
