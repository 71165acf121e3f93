//! Crash-testing your own code with fault-fs: a small write-ahead log written against the
//! `Fs` trait, crashed at every operation boundary, with the fsync it forgot found and blamed.
//!
//! The log appends `[len u32][checksum u32][bytes]` records to one file and acknowledges a
//! record once `sync_data` returns. Recovery reads records until the first one that is torn or
//! fails its checksum. That looks durable, and on most ext4 machines it usually is; but
//! `sync_data` makes a file's *data* durable, never its *name*: the directory that holds the
//! new file must be synced too. fault-fs's `Posix` model keeps exactly what POSIX promises, so
//! the explorer finds the crash that loses the whole log, and blames the `open` that created
//! it. With the directory fsync the same exploration is clean.

use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fault_fs::{explore, ExploreConfig, FaultFs, Journal, Model, Report};
use std::io;

const LOG: &str = "wal";

/// Appends one record, creating the log on first use; acknowledged when this returns `Ok`.
fn append<F: Fs>(fs: &F, record: &[u8], sync_dir: bool) -> io::Result<()> {
    let f = match fs.open(
        LOG,
        OpenOptions::new().read(true).write(true).create_new(true),
    ) {
        Ok(created) => {
            if sync_dir {
                fs.sync_dir("")?; // the new name is durable only once its directory is synced
            }
            created
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs.open(LOG, OpenOptions::new().read(true).write(true))?
        }
        Err(e) => return Err(e),
    };
    let end = f.len()?;
    let mut frame = (record.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&checksum(record).to_le_bytes());
    frame.extend_from_slice(record);
    f.write_all_at(&frame, end)?;
    f.sync_data()
}

/// Every whole record, in order; stops at a torn or damaged one (an unacknowledged tail).
fn recover<F: Fs>(fs: &F) -> io::Result<Vec<Vec<u8>>> {
    let f = match fs.open(LOG, OpenOptions::read_only()) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let (len, mut at, mut out) = (f.len()?, 0u64, Vec::new());
    while at + 8 <= len {
        let mut head = [0u8; 8];
        f.read_exact_at(&mut head, at)?;
        let n = u32::from_le_bytes(head[..4].try_into().unwrap()) as u64;
        if at + 8 + n > len {
            break;
        }
        let mut rec = vec![0u8; n as usize];
        f.read_exact_at(&mut rec, at + 8)?;
        if checksum(&rec).to_le_bytes() != head[4..] {
            break;
        }
        out.push(rec);
        at += 8 + n;
    }
    Ok(out)
}

/// FNV-1a: enough to tell a whole record from a torn one in an example.
fn checksum(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5, |h, &x| {
        (h ^ x as u32).wrapping_mul(0x0100_0193)
    })
}

/// Appends every record, then checks every crash image: each acknowledged record survives.
fn crash_test(sync_dir: bool) -> Report {
    let records: Vec<Vec<u8>> = (1..=4)
        .map(|i| format!("record {i}").into_bytes())
        .collect();
    explore(
        &ExploreConfig::new(Model::Posix),
        &records,
        |fs: &FaultFs, rec: &Vec<u8>, acked: &mut Journal<Vec<u8>>| {
            append(fs, rec, sync_dir).map_err(|e| e.to_string())?;
            acked.note(fs, rec.clone());
            Ok(())
        },
        |image: &FaultFs, crash| {
            let got = recover(image).map_err(|e| format!("recovery failed: {e}"))?;
            match crash.events.iter().find(|r| !got.contains(r)) {
                Some(lost) => Err(format!(
                    "acknowledged {:?} is lost ({} of {} records recovered)",
                    String::from_utf8_lossy(lost),
                    got.len(),
                    crash.events.len()
                )),
                None => Ok(()),
            }
        },
    )
}

fn main() {
    let buggy = crash_test(false);
    println!("without the directory fsync: {buggy}");
    let first = buggy
        .violations
        .first()
        .expect("fault-fs finds the lost log");
    println!("first violation: {first}");
    // the blame names the create of the log: the operation whose loss loses everything
    assert!(first.blame.iter().any(|b| b.op.contains(LOG)), "{first}");

    let fixed = crash_test(true);
    println!("with it: {fixed}");
    assert!(fixed.is_clean(), "{fixed}");
}

#[test]
fn runs() {
    main();
}
