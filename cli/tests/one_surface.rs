//! One command surface: random valid command sequences, each run through `seqstore --json`,
//! through the natively built `seqstore-guest`, and through `seqstore-guest.wasm` under
//! wasmtime (in-process, `--dir /data` on a preopen), each on its own directory. Every
//! command's stdout must be byte-identical across the three (timestamps aside: each process
//! reads its own clock), and so must the exit code (under WASI preview 2 a failure is 1, so
//! the wasm run's code is the native one capped at 1).
//!
//! Every run prints its seed; `SEQSTORE_SEED=N` replays it, `SEQSTORE_SURFACE_CMDS=K` makes
//! the sequence longer.

use seqstore_fault_fs::Rng;
use std::path::{Path, PathBuf};
use std::process::Command;

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
    let (cmd, rest) = args.split_first().expect("a command");
    let mut c = Command::new(bin);
    c.arg(cmd);
    // consumer commands: the subcommand first, then the flags
    let rest = if cmd == "consumer" {
        c.arg(&rest[0]);
        &rest[1..]
    } else {
        rest
    };
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

/// The stdout with every timestamp's digits replaced by 0 (`"ts":…`, `"first_ts":…`,
/// `"last_ts":…`), and nothing else changed.
fn without_clock(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("ts\":") {
        let (head, tail) = rest.split_at(i + 4);
        out.push_str(head);
        let digits = tail
            .find(|c: char| !(c.is_ascii_digit() || c == '-'))
            .unwrap_or(tail.len());
        if digits > 0 {
            out.push('0');
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

const SUBJECTS: [&str; 6] = ["a", "a.b", "a.c", "b.x.y", "orders.eu", "orders.us"];
const FILTERS: [&str; 7] = [">", "a", "a.*", "a.>", "b.*.y", "orders.*", "*"];
const DATA: [&str; 8] = [
    "hello",
    "",
    "quote \" and \\ backslash",
    "tab\tnewline\nend",
    "unicode é ✓",
    "{\"json\":1}",
    "x",
    "a longer payload that spans a few more bytes than the others",
];
const CONSUMERS: [&str; 2] = ["work", "audit"];

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

/// One valid command line (without `--dir`): a command, flags and values a user could type.
/// `appended` bounds the sequences it names (some may be gone: the failures must agree too).
fn command(rng: &mut Rng, appended: u64) -> Vec<String> {
    let seq = |rng: &mut Rng| s(rng.below(appended + 3));
    let filter = |rng: &mut Rng| s(rng.pick(&FILTERS));
    let mut v: Vec<String> = match rng.below(24) {
        0..=5 => {
            let mut v = vec![
                s("append"),
                s("--subject"),
                s(rng.pick(&SUBJECTS)),
                s("--data"),
                s(rng.pick(&DATA)),
            ];
            if rng.chance(30) {
                v.extend([s("--headers"), s(rng.pick(&DATA))]);
            }
            if rng.chance(20) {
                v.extend([
                    s("--sync"),
                    s(rng.pick(&["never", "interval", "interval=5"])),
                ]);
            }
            if rng.chance(10) {
                v.extend([s("--ttl"), s("1h")]);
            }
            v
        }
        6 => vec![s("get"), seq(rng)],
        7 => vec![s("last"), s("--subject"), s(rng.pick(&SUBJECTS))],
        8 => vec![s("next"), s("--filter"), filter(rng), s("--from"), seq(rng)],
        9 => {
            let mut v = vec![s("prev"), s("--filter"), filter(rng)];
            if rng.chance(50) {
                v.extend([s("--from"), seq(rng)]);
            }
            v
        }
        10 => {
            let mut v = vec![
                s("pending"),
                s("--filter"),
                filter(rng),
                s("--from"),
                seq(rng),
            ];
            if rng.chance(50) {
                v.push(s("--last-per-subject"));
            }
            v
        }
        11 => vec![s("subjects"), s("--filter"), filter(rng)],
        12 => vec![s(rng.pick(&["state", "dump", "report", "verify"]))],
        13 => vec![s("delete"), seq(rng)],
        14 => vec![s(rng.pick(&["erase", "delete --erase"])), seq(rng)],
        15 => match rng.below(3) {
            0 => vec![s("purge")],
            1 => vec![s("purge-ex"), s("--filter"), filter(rng)],
            _ => vec![
                s("purge"),
                s("--filter"),
                filter(rng),
                s("--keep"),
                s(rng.below(3)),
                s("--up-to"),
                seq(rng),
            ],
        },
        16 => vec![s("compact"), seq(rng)],
        17 => vec![s("truncate"), seq(rng)],
        18 => vec![s(rng.pick(&["sync", "checkpoint"]))],
        19 => vec![
            s("skip"),
            s(appended + rng.below(2)),
            s("--count"),
            s(1 + rng.below(3)),
        ],
        20 => vec![s("time-seq"), s(rng.pick(&[0, i64::MAX]))],
        21 => {
            let mut v = vec![s("consumer"), s("add"), s(rng.pick(&CONSUMERS))];
            if rng.chance(30) {
                v.extend([s("--ack"), s(rng.pick(&["all", "none", "explicit"]))]);
            }
            v
        }
        22 => vec![
            s("consumer"),
            s("next"),
            s(rng.pick(&CONSUMERS)),
            s("--count"),
            s(1 + rng.below(3)),
        ],
        _ => match rng.below(4) {
            0 => vec![s("consumer"), s("ack"), s(rng.pick(&CONSUMERS)), seq(rng)],
            1 => vec![s("consumer"), s("info"), s(rng.pick(&CONSUMERS))],
            2 => vec![s("consumer"), s("list")],
            _ => vec![s("consumer"), s("rm"), s(rng.pick(&CONSUMERS))],
        },
    };
    // "delete --erase" is two words
    if v[0].contains(' ') {
        let first: Vec<String> = v.remove(0).split(' ').map(s).collect();
        v.splice(0..0, first);
    }
    v
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

#[test]
fn random_command_sequences_print_the_same_in_both_binaries() {
    let seed = env_u64("SEQSTORE_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let cmds = env_u64("SEQSTORE_SURFACE_CMDS").unwrap_or(60);
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
