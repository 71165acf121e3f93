//! The test binaries, run a few at a time, longest first.

use crate::json::Json;
use seqstore_test_setup::LOG_VAR;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

/// One test binary as cargo built it.
pub struct TestBin {
    exe: PathBuf,
    /// its package's directory: cargo runs a test binary there
    dir: PathBuf,
    /// as cargo names it ("tests/raft.rs", "unittests src/lib.rs"), after the package's
    /// directory under the workspace: the key of its duration in `durations`
    key: String,
}

impl TestBin {
    /// The test binary a `compiler-artifact` message of cargo's names, if it is one.
    pub fn of_artifact(m: &Json, root: &Path) -> Option<TestBin> {
        (m.get("reason")?.str()? == "compiler-artifact").then_some(())?;
        (m.get("profile")?.get("test")? == &Json::Bool(true)).then_some(())?;
        let exe = PathBuf::from(m.get("executable")?.str()?);
        let dir = Path::new(m.get("manifest_path")?.str()?)
            .parent()?
            .to_path_buf();
        let target = m.get("target")?;
        let src = Path::new(target.get("src_path")?.str()?);
        let src = src.strip_prefix(&dir).unwrap_or(src).display().to_string();
        let is_test = matches!(target.get("kind")?, Json::Arr(k) if k.first()?.str()? == "test");
        let what = if is_test {
            src
        } else {
            format!("unittests {src}")
        };
        let package = dir.strip_prefix(root).unwrap_or(&dir).display().to_string();
        let key = format!("{package}: {what}");
        Some(TestBin { exe, dir, key })
    }
}

/// The binaries that took longest on two cores, started first when there is no last run to go
/// by (a clean checkout): the run's length is that of its longest binary at best.
const SLOW_FIRST: [&str; 6] = [
    "tests: tests/main.rs",
    "trace-check: tests/subjects.rs",
    "cli: tests/trace_control.rs",
    "raft: tests/main.rs",
    "wasi-trace: tests/main.rs",
    "cli: tests/one_surface.rs",
];

/// Runs `bins`, `jobs` at a time, each with `test_args`, longest first by `history` (the
/// seconds each took when it last ran whole): the keys of those that failed. A run without
/// test arguments updates `history` for its binaries; one with them (a filter, `--ignored`)
/// does not measure a binary's usual length, and leaves it as it was.
pub fn run(
    mut bins: Vec<TestBin>,
    jobs: usize,
    test_args: &[String],
    log: &Path,
    history: &Path,
) -> Vec<String> {
    let mut last = read_history(history);
    let guess = |b: &TestBin| match last.get(&b.key) {
        Some(secs) => *secs,
        None => SLOW_FIRST
            .iter()
            .position(|k| *k == b.key)
            .map_or(0.0, |i| 1e6 - i as f64),
    };
    if jobs > 1 {
        bins.sort_by(|a, b| guess(b).total_cmp(&guess(a)));
    }
    bins.reverse();
    let queue = Mutex::new(bins);
    let done = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                let Some(bin) = next else { break };
                let result = run_one(&bin, test_args, log);
                done.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((bin.key, result));
            });
        }
    });
    let done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    if test_args.is_empty() {
        last.extend(done.iter().map(|(key, (secs, _))| (key.clone(), *secs)));
        let text: String = last
            .iter()
            .map(|(key, secs)| format!("{secs:.1}\t{key}\n"))
            .collect();
        let _ = std::fs::write(history, text);
    }
    done.into_iter()
        .filter(|(_, (_, ok))| !ok)
        .map(|(key, _)| key)
        .collect()
}

/// The seconds each binary took when it last ran whole.
fn read_history(path: &Path) -> BTreeMap<String, f64> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (secs, key) = l.split_once('\t')?;
            Some((key.to_string(), secs.parse().ok()?))
        })
        .collect()
}

/// Runs one binary in its package's directory, its stdout and stderr in one pipe, and prints
/// what it wrote once it ends: its seconds, and whether it passed.
fn run_one(bin: &TestBin, test_args: &[String], log: &Path) -> (f64, bool) {
    let shown = bin
        .exe
        .strip_prefix(std::env::current_dir().unwrap_or_default())
        .unwrap_or(&bin.exe)
        .display()
        .to_string();
    println!("     Started {} ({shown})", bin.key);
    let started = Instant::now();
    let mut output = Vec::new();
    let status = (|| {
        let (mut reader, writer) = std::io::pipe()?;
        let mut child = Command::new(&bin.exe)
            .args(test_args)
            .current_dir(&bin.dir)
            .env("CARGO_MANIFEST_DIR", &bin.dir)
            .env(LOG_VAR, log)
            .stdout(writer.try_clone()?)
            .stderr(writer)
            .spawn()?;
        reader.read_to_end(&mut output)?;
        child.wait()
    })();
    let secs = started.elapsed().as_secs_f64();
    let ok = matches!(&status, Ok(s) if s.success());
    let verdict = match &status {
        Ok(_) if ok => "ok".to_string(),
        Ok(s) => format!("FAILED ({s})"),
        Err(e) => format!("FAILED: could not run it: {e}"),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "     Running {} ({shown}): {verdict} in {secs:.1}s",
        bin.key
    );
    let _ = out.write_all(&output);
    let _ = out.flush();
    (secs, ok)
}
