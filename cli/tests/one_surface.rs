//! One command surface: random valid command sequences, each run through `seqstore --json`,
//! through the natively built `seqstore-guest`, and through `seqstore-guest.wasm` under
//! wasmtime (in-process, `--dir /data` on a preopen), each on its own directory. Every
//! command's stdout must be byte-identical across the three (timestamps aside: each process
//! reads its own clock), and so must the exit code (under WASI preview 2 a failure is 1, so
//! the wasm run's code is the native one capped at 1).
//!
//! Every run prints its seed (fixed unless `SEQSTORE_SEED=N` gives another, which replays it);
//! `SEQSTORE_SURFACE_CMDS=K` sets the sequence's length (30 commands in a default run, 60 under
//! `SEQSTORE_TEST_SIZE=full`).

#[path = "common/surface.rs"]
mod surface;

use seqstore_fault_fs::Rng;
use std::path::{Path, PathBuf};
use std::process::Command;
use surface::{command, without_clock};

/// One command's result as the comparison sees it.
#[derive(Debug, PartialEq, Eq)]
struct Ran {
    code: i32,
    stdout: String,
}

/// The natively built `seqstore-guest` beside this package's `seqstore`, built (or brought up
/// to date) by cargo first: it is another package's binary, which cargo only builds for its
/// own tests.
fn native_guest() -> PathBuf {
    let seqstore = Path::new(env!("CARGO_BIN_EXE_seqstore"));
    let profile_dir = seqstore.parent().expect("target/<profile>");
    let target_dir = profile_dir.parent().expect("target");
    let status = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "--package",
            "seqstore-guest",
            "--bin",
            "seqstore-guest",
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .status()
        .expect("run cargo build -p seqstore-guest");
    assert!(status.success(), "cargo build -p seqstore-guest failed");
    let bin = profile_dir.join(format!("seqstore-guest{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.is_file(), "{} was not built", bin.display());
    bin
}

fn process(bin: &Path, args: &[String], dir: &Path, json: bool) -> Ran {
    let (mut c, rest) = surface::process(bin, args);
    c.arg("--dir").arg(dir).args(rest);
    if json {
        c.arg("--json");
    }
    let out = c.output().expect("run");
    let code = out.status.code().expect("an exit code");
    if code != 0 {
        assert!(!out.stderr.is_empty(), "{bin:?} {args:?} failed silently");
    }
    Ran {
        code,
        stdout: String::from_utf8(out.stdout).expect("utf-8"),
    }
}

fn wasm(args: &[String], dir: &Path) -> Ran {
    // the compiled command from the `seqstore` runs' cache, as a user's second process gets it
    if let Some(cache) = seqstore_wasm::default_compile_cache_dir() {
        seqstore_wasm::cache_compiled_components(cache);
    }
    let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
    argv.extend(["--dir", seqstore_wasm::GUEST_DIR]);
    let out = seqstore_wasm::run_guest_command(dir, &argv, &seqstore_wasm::GuestOptions::default())
        .expect("the guest command runs");
    if out.code != 0 {
        assert!(!out.stderr.is_empty(), "wasm {args:?} failed silently");
    }
    Ran {
        code: out.code,
        stdout: String::from_utf8(out.stdout).expect("utf-8"),
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

#[test]
fn random_command_sequences_print_the_same_in_both_binaries() {
    // fixed, as CI's seeds are: the size check below fails for some seeds
    let seed = env_u64("SEQSTORE_SEED").unwrap_or(20261207);
    let cmds = env_u64("SEQSTORE_SURFACE_CMDS").unwrap_or(seqstore_test_setup::sized(30, 60));
    println!("one surface: seed {seed} (replay: SEQSTORE_SEED={seed}), {cmds} commands");
    let guest = native_guest();
    let seqstore = Path::new(env!("CARGO_BIN_EXE_seqstore"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let dirs = ["seqstore", "guest", "wasm"].map(|d| tmp.path().join(d));
    std::fs::create_dir(&dirs[2]).expect("the preopen exists");
    let mut rng = Rng::new(seed);
    let (mut appended, mut ok, mut failed) = (0u64, 0, 0);
    for i in 0..cmds {
        let args = command(&mut rng, appended);
        let want = process(seqstore, &args, &dirs[0], true);
        let got = process(&guest, &args, &dirs[1], false);
        let why = format!("SEQSTORE_SEED={seed}, command {i}: {args:?}");
        assert_eq!(
            (got.code, without_clock(&got.stdout)),
            (want.code, without_clock(&want.stdout)),
            "seqstore-guest vs seqstore --json: {why}"
        );
        let w = wasm(&args, &dirs[2]);
        assert_eq!(
            (w.code, without_clock(&w.stdout)),
            (want.code.min(1), without_clock(&want.stdout)),
            "seqstore-guest.wasm vs seqstore --json: {why}"
        );
        if want.code == 0 {
            ok += 1;
            if args[0] == "append" {
                appended += 1;
            }
        } else {
            failed += 1;
        }
    }
    println!("{ok} succeeded, {failed} failed alike");
    // a sequence where nothing (or everything) failed compared too little
    assert!(ok > cmds / 3, "only {ok} of {cmds} commands succeeded");
}

#[test]
fn dir_after_the_command_works_natively() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path().join("s");
    let out = Command::new(native_guest())
        .args(["append", "--dir"])
        .arg(&d)
        .args(["--subject", "s", "--data", "x"])
        .output()
        .expect("run seqstore-guest");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(out.stdout, b"{\"seq\":1}\n");
    let out = Command::new(env!("CARGO_BIN_EXE_seqstore"))
        .args(["append", "--dir"])
        .arg(&d)
        .args(["--subject", "s", "--data", "y", "--json"])
        .output()
        .expect("run seqstore");
    assert_eq!(out.stdout, b"{\"seq\":2}\n", "{out:?}");
}

#[test]
fn timestamps_are_the_only_thing_redacted() {
    assert_eq!(
        without_clock(r#"{"seq":1,"ts":123,"x":"ts\":9"} {"first_ts":-5,"last_ts":7}"#),
        r#"{"seq":1,"ts":0,"x":"ts\":9"} {"first_ts":0,"last_ts":0}"#
    );
}
