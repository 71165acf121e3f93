//! The peer check: does a chunk file that raft-log rolls to survive a power cut under the
//! posix model? `rollcheck DIR` drives raft-log with 4 records per chunk (so it rolls), one
//! `flush(sync)` per append, and writes `ACK n` to stderr after each flush callback returns.
//! Run it under `strace -f -y -e trace=openat,write,pwrite64,writev,pwritev,pwritev2,fsync,fdatasync,mkdirat,rename,renameat,
//! renameat2,unlink,unlinkat,mkdir -o TRACE`, then `tracecheck TRACE DIR` replays the file
//! system calls on fault-fs (posix model) and, at every `ACK`, checks the pessimistic crash
//! image (nothing unsynced survives): every file written before the ACK must exist there with
//! at least the bytes it had. `tracecheck TRACE DIR --drop-dir-fsync` replays the same trace
//! with the directory fsyncs removed: the negative control, which must report a loss.

use crate::RlTypes;
use raft_log::api::raft_log_writer::RaftLogWriter;
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fault_fs::{FaultFile, FaultFs, Model};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

/// Drives seqstore-raft's log through a few block rolls the same way (1 KiB blocks).
pub fn rollcheck_seqstore(dir: &str) -> anyhow::Result<()> {
    let fs = seqstore_fs::HostFs::create(dir)?;
    let cfg = seqstore_raft::LogConfig::default().with_block_size(1024);
    let mut log = seqstore_raft::LogCore::open(fs, cfg)?;
    for i in 0..14u64 {
        log.append_buffered([crate::entry(i)])?;
        log.sync()?;
        std::io::stderr().write_all(format!("ACK {i}\n").as_bytes())?;
    }
    Ok(())
}

/// Drives raft-log through a few chunk rolls.
pub fn rollcheck(dir: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut cfg = raft_log::Config::new(dir);
    cfg.wal.chunk_max_records = Some(4);
    let mut log = raft_log::RaftLog::<RlTypes>::open(Arc::new(cfg))?;
    for i in 1..=14u64 {
        log.append([((1, i), vec![b'x'; 128])])?;
        let (tx, rx) = sync_channel(1);
        log.flush(true, Some(tx))?;
        rx.recv()??;
        // one write(2) per marker, so that the trace has it whole
        std::io::stderr().write_all(format!("ACK {i}\n").as_bytes())?;
    }
    Ok(())
}

/// `fn(args...) = ret` of one strace line (pid prefix and `<path>` annotations kept).
fn parse(line: &str) -> Option<(&str, &str, i64)> {
    let line = line.trim_start_matches(|c: char| c.is_ascii_digit() || c == ' ');
    let open = line.find('(')?;
    let eq = line.rfind(" = ")?;
    let close = line[..eq].trim_end().strip_suffix(')')?.len();
    let ret: String = line[eq + 3..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    Some((&line[..open], &line[open + 1..close], ret.parse().ok()?))
}

/// The path a call acts on: for the calls that take a path (`openat`, `mkdirat`, `unlinkat`,
/// ...) the first quoted string, joined to the directory fd's `<...>` annotation (strace -y)
/// when it is relative; for the others the annotation of the fd argument.
fn path_arg(call: &str, args: &str) -> Option<String> {
    let annotation = |s: &str| {
        let (a, b) = (s.find('<')?, s.find('>')?);
        (a < b).then(|| s[a + 1..b].to_string())
    };
    let by_name = matches!(call, "openat" | "unlink" | "unlinkat" | "mkdir" | "mkdirat");
    if !by_name {
        return annotation(args);
    }
    let a = args.find('"')?;
    let b = args[a + 1..].find('"')? + a + 1;
    let name = &args[a + 1..b];
    if name.starts_with('/') {
        return Some(name.to_string());
    }
    let base = annotation(&args[..a])?;
    Some(match name {
        "." => base,
        _ => format!("{base}/{name}"),
    })
}

struct Replay {
    fs: FaultFs,
    dir: String,
    files: BTreeMap<String, FaultFile>,
    /// Directories known (relative; "" is the root).
    dirs: std::collections::BTreeSet<String>,
    drop_dir_fsync: bool,
    problems: Vec<String>,
}

impl Replay {
    fn rel(&self, p: &str) -> Option<String> {
        p.strip_prefix(&self.dir)
            .map(|r| r.trim_start_matches('/').to_string())
    }

    fn file(&mut self, name: &str) -> anyhow::Result<&FaultFile> {
        if !self.files.contains_key(name) {
            let f = self.fs.open(name, OpenOptions::read_write_create())?;
            self.files.insert(name.to_string(), f);
        }
        Ok(&self.files[name])
    }

    fn apply(&mut self, call: &str, args: &str, ret: i64) -> anyhow::Result<()> {
        if ret < 0 {
            return Ok(());
        }
        if call == "write" && args.starts_with("2<") && args.contains("ACK") {
            return self.check_ack(args);
        }
        let Some(rel) = path_arg(call, args).and_then(|p| self.rel(&p)) else {
            return Ok(());
        };
        let is_dir = self.dirs.contains(&rel);
        match call {
            "mkdir" | "mkdirat" if !rel.is_empty() => {
                self.fs.create_dir(&rel)?;
                self.dirs.insert(rel);
            }
            "openat" if args.contains("O_CREAT") => _ = self.file(&rel)?,
            "write" | "pwrite64" | "writev" | "pwritev" | "pwritev2" if !rel.is_empty() => {
                let f = self.file(&rel)?;
                f.write_all_at(&vec![b'r'; ret as usize], f.len()?)?;
            }
            "fsync" | "fdatasync" if is_dir && self.drop_dir_fsync => {}
            "fsync" | "fdatasync" if is_dir => self.fs.sync_dir(&rel)?,
            "fsync" | "fdatasync" => self.file(&rel)?.sync_data()?,
            "unlink" | "unlinkat" => {
                self.files.remove(&rel);
                self.fs.remove_file(&rel)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// At an acknowledged flush: every file written so far must survive a crash, whole.
    fn check_ack(&mut self, args: &str) -> anyhow::Result<()> {
        let img = self.fs.crash();
        for (name, f) in &self.files {
            let want = f.len()?;
            let got = img.open(name, OpenOptions::read_only()).map(|f| f.len());
            match got {
                Ok(Ok(n)) if n >= want => {}
                Ok(Ok(n)) => self
                    .problems
                    .push(format!("{args}: {name} has {n} of {want} bytes")),
                _ => self
                    .problems
                    .push(format!("{args}: {name} ({want} bytes) vanished")),
            }
        }
        Ok(())
    }
}

/// `-f` splits a call over two lines when threads overlap (`fsync(7</d> <unfinished ...>`,
/// later `<... fsync resumed>) = 0`): the call is taken whole where it completed. `None` for
/// the first half.
fn rejoin(line: &str, split: &mut BTreeMap<String, String>) -> Option<String> {
    let pid = line.split_whitespace().next().unwrap_or("").to_string();
    if let Some(head) = line.strip_suffix(" <unfinished ...>") {
        split.insert(pid, head.to_string());
        return None;
    }
    if let Some(i) = line.find(" resumed>") {
        let head = split.remove(&pid)?;
        return Some(format!("{head}{}", &line[i + " resumed>".len()..]));
    }
    Some(line.to_string())
}

/// Replays a trace; prints what an acknowledged flush would lose, returns the count.
pub fn tracecheck(trace: &str, dir: &str, drop_dir_fsync: bool) -> anyhow::Result<usize> {
    let mut r = Replay {
        fs: FaultFs::new(Model::Posix),
        dir: dir.trim_end_matches('/').to_string(),
        files: BTreeMap::new(),
        dirs: [String::new()].into(),
        drop_dir_fsync,
        problems: Vec::new(),
    };
    let text = std::fs::read_to_string(trace)?;
    let (mut calls, mut dir_syncs) = (0, 0);
    let mut split: BTreeMap<String, String> = BTreeMap::new();
    for raw in text.lines() {
        let Some(line) = rejoin(raw, &mut split) else {
            continue;
        };
        if let Some((call, args, ret)) = parse(&line) {
            calls += 1;
            let rel = path_arg(call, args).and_then(|p| r.rel(&p));
            if matches!(call, "fsync" | "fdatasync") && rel.is_some_and(|p| r.dirs.contains(&p)) {
                dir_syncs += 1;
            }
            r.apply(call, args, ret)?;
        }
    }
    println!(
        "{calls} traced calls, {dir_syncs} directory fsyncs, {} files",
        r.files.len()
    );
    for p in &r.problems {
        println!("LOSS {p}");
    }
    Ok(r.problems.len())
}
