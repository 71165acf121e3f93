//! The random command lines of the surface tests (`one_surface.rs`, `server_surface.rs`): valid
//! commands a user could type, and the redaction of the clock from their output.

use seqstore_fault_fs::Rng;
use std::path::Path;
use std::process::Command;

/// The stdout with every timestamp's digits replaced by 0 (`"ts":…`, `"first_ts":…`,
/// `"last_ts":…`), and nothing else changed.
pub fn without_clock(s: &str) -> String {
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
pub fn command(rng: &mut Rng, appended: u64) -> Vec<String> {
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

/// `bin` with the command of `args` (a consumer command's subcommand first, then the flags),
/// and the flags it has still to take.
pub fn process<'a>(bin: &Path, args: &'a [String]) -> (Command, &'a [String]) {
    let (cmd, rest) = args.split_first().expect("a command");
    let mut c = Command::new(bin);
    c.arg(cmd);
    if cmd == "consumer" {
        c.arg(&rest[0]);
        return (c, &rest[1..]);
    }
    (c, rest)
}
