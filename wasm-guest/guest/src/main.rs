//! `seqstore-guest`: the store as a WASI command, on host-fs over WASI's own filesystem.
//!
//! Runs under any WASI (preview 2) runtime, e.g. the stock wasmtime CLI, on a preopened
//! directory:
//!
//! ```text
//! wasmtime run --dir ./mystream::/data seqstore-guest.wasm append --subject orders.eu --data hello
//! wasmtime run --dir ./mystream::/data seqstore-guest.wasm get 1
//! wasmtime run --dir ./mystream::/data seqstore-guest.wasm state
//! ```
//!
//! Each run opens the store (recovering), does one operation, prints its result as one line of
//! JSON on stdout, and closes the store (a read-only command just drops it). Errors go to
//! stderr; the exit code is 1 for a store error and 2 for a usage error. Natively the same
//! binary runs on cap-std (`--dir` defaults to `.` there instead of `/data`).

#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use store_core::{Config, Store, StoredMsg, SyncPolicy};

const USAGE: &str = "\
usage: seqstore-guest [--dir DIR] [--sync always|never|interval=MS] [--block-size BYTES] COMMAND
commands:
  append --subject S [--headers H] --data D   append; prints {\"seq\":N}
  get SEQ                                     the message with sequence SEQ
  last SUBJECT                                the newest message on SUBJECT
  next FILTER [FROM_SEQ]                      the first message matching FILTER at/after FROM_SEQ
  subjects [FILTER]                           message counts per subject (default filter >)
  state                                       the stream's counters
  delete SEQ | erase SEQ                      remove one message (erase also zeroes it)
  purge                                       remove every message (the sequence is kept)
  purge-ex FILTER [--up-to SEQ] [--keep N]    remove matching messages
  compact SEQ                                 remove every message below SEQ
  truncate SEQ                                remove every message above SEQ
  sync | checkpoint                           make durable / write index.db
  report                                      what recovery found at open
DIR defaults to /data under WASI (preopen it: wasmtime run --dir HOST_DIR::/data ...).";

/// The default store directory: the conventional preopen under WASI, the working directory
/// natively.
const DEFAULT_DIR: &str = if cfg!(target_os = "wasi") {
    "/data"
} else {
    "."
};

/// One parsed operation.
#[derive(Debug, PartialEq, Eq)]
enum Cmd {
    Append {
        subject: String,
        headers: String,
        data: String,
    },
    Get(u64),
    Last(String),
    Next(String, u64),
    Subjects(String),
    State,
    Delete(u64),
    Erase(u64),
    Purge,
    PurgeEx {
        filter: String,
        up_to: u64,
        keep: u64,
    },
    Compact(u64),
    Truncate(u64),
    Sync,
    Checkpoint,
    Report,
}

impl Cmd {
    /// Whether the command changes the store (and so closes it, writing `index.db`).
    fn writes(&self) -> bool {
        !matches!(
            self,
            Cmd::Get(_)
                | Cmd::Last(_)
                | Cmd::Next(..)
                | Cmd::Subjects(_)
                | Cmd::State
                | Cmd::Report
        )
    }
}

/// The command line: where, how, and what.
#[derive(Debug, PartialEq, Eq)]
struct Args {
    dir: String,
    sync: SyncPolicy,
    block_size: Option<u64>,
    cmd: Cmd,
}

fn num(what: &str, s: Option<String>) -> Result<u64, String> {
    let s = s.ok_or_else(|| format!("missing {what}"))?;
    s.parse()
        .map_err(|_| format!("{what} must be a non-negative integer, got {s:?}"))
}

fn parse_sync(s: &str) -> Result<SyncPolicy, String> {
    match s {
        "always" => Ok(SyncPolicy::Always),
        "never" => Ok(SyncPolicy::Never),
        _ => match s.strip_prefix("interval=") {
            Some(ms) => ms
                .parse::<u64>()
                .ok()
                .filter(|&ms| ms > 0)
                .map(|ms| SyncPolicy::Interval(Duration::from_millis(ms)))
                .ok_or_else(|| format!("bad interval {ms:?} (milliseconds > 0)")),
            None => Err(format!("bad --sync {s:?} (always, never, or interval=MS)")),
        },
    }
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut it = args.into_iter().peekable();
    let mut dir = DEFAULT_DIR.to_string();
    let mut sync = SyncPolicy::Always;
    let mut block_size = None;
    // Global options come before the command.
    let name = loop {
        let a = it.next().ok_or("missing command")?;
        match a.as_str() {
            "--dir" => dir = it.next().ok_or("--dir needs a value")?,
            "--sync" => sync = parse_sync(&it.next().ok_or("--sync needs a value")?)?,
            "--block-size" => block_size = Some(num("--block-size", it.next())?),
            "-h" | "--help" | "help" => return Err(String::new()),
            _ if a.starts_with("--") => return Err(format!("unknown option {a}")),
            _ => break a,
        }
    };
    let cmd = match name.as_str() {
        "append" => {
            let (mut subject, mut headers, mut data) = (None, String::new(), None);
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--subject" => subject = Some(it.next().ok_or("--subject needs a value")?),
                    "--headers" => headers = it.next().ok_or("--headers needs a value")?,
                    "--data" => data = Some(it.next().ok_or("--data needs a value")?),
                    _ => return Err(format!("append: unexpected {a:?}")),
                }
            }
            Cmd::Append {
                subject: subject.ok_or("append needs --subject")?,
                headers,
                data: data.ok_or("append needs --data")?,
            }
        }
        "get" => Cmd::Get(num("SEQ", it.next())?),
        "last" => Cmd::Last(it.next().ok_or("last needs a SUBJECT")?),
        "next" => {
            let filter = it.next().ok_or("next needs a FILTER")?;
            let from = match it.next() {
                Some(s) => num("FROM_SEQ", Some(s))?,
                None => 1,
            };
            Cmd::Next(filter, from)
        }
        "subjects" => Cmd::Subjects(it.next().unwrap_or_else(|| ">".to_string())),
        "state" => Cmd::State,
        "delete" => Cmd::Delete(num("SEQ", it.next())?),
        "erase" => Cmd::Erase(num("SEQ", it.next())?),
        "purge" => Cmd::Purge,
        "purge-ex" => {
            let filter = it.next().ok_or("purge-ex needs a FILTER")?;
            let (mut up_to, mut keep) = (0, 0);
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--up-to" => up_to = num("--up-to", it.next())?,
                    "--keep" => keep = num("--keep", it.next())?,
                    _ => return Err(format!("purge-ex: unexpected {a:?}")),
                }
            }
            Cmd::PurgeEx {
                filter,
                up_to,
                keep,
            }
        }
        "compact" => Cmd::Compact(num("SEQ", it.next())?),
        "truncate" => Cmd::Truncate(num("SEQ", it.next())?),
        "sync" => Cmd::Sync,
        "checkpoint" => Cmd::Checkpoint,
        "report" => Cmd::Report,
        other => return Err(format!("unknown command {other:?}")),
    };
    if let Some(extra) = it.next() {
        return Err(format!("{name}: unexpected {extra:?}"));
    }
    Ok(Args {
        dir,
        sync,
        block_size,
        cmd,
    })
}

/// `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Bytes as a JSON field: `"name":"text"` if they are UTF-8, else `"name_hex":"..."`.
fn json_bytes(name: &str, b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => format!("\"{name}\":{}", json_str(s)),
        Err(_) => {
            let mut hex = String::with_capacity(b.len() * 2);
            for x in b {
                let _ = write!(hex, "{x:02x}");
            }
            format!("\"{name}_hex\":\"{hex}\"")
        }
    }
}

fn json_msg(m: &StoredMsg) -> String {
    format!(
        "{{\"seq\":{},\"ts\":{},\"subject\":{},{},{}}}",
        m.seq,
        m.ts,
        json_str(&m.subject),
        json_bytes("headers", &m.headers),
        json_bytes("payload", &m.payload)
    )
}

fn json_opt(m: Option<StoredMsg>) -> String {
    m.as_ref().map_or_else(|| "null".to_string(), json_msg)
}

/// Runs one command on the store; returns the JSON line to print.
fn run<F: store_core::Fs>(store: &mut Store<F>, cmd: &Cmd) -> store_core::Result<String> {
    Ok(match cmd {
        Cmd::Append {
            subject,
            headers,
            data,
        } => {
            let seq = store.append(subject, headers.as_bytes(), data.as_bytes())?;
            format!("{{\"seq\":{seq}}}")
        }
        Cmd::Get(seq) => json_msg(&store.get(*seq)?),
        Cmd::Last(subject) => json_opt(store.last_for_subject(subject)?),
        Cmd::Next(filter, from) => json_opt(store.next_matching(filter, *from)?),
        Cmd::Subjects(filter) => {
            let fields: Vec<String> = store
                .subjects_state(filter)?
                .iter()
                .map(|(s, n)| format!("{}:{n}", json_str(s)))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Cmd::State => {
            let s = store.state();
            format!(
                "{{\"msgs\":{},\"bytes\":{},\"first_seq\":{},\"first_ts\":{},\"last_seq\":{},\
                 \"last_ts\":{},\"num_deleted\":{},\"num_subjects\":{}}}",
                s.msgs,
                s.bytes,
                s.first_seq,
                s.first_ts,
                s.last_seq,
                s.last_ts,
                s.num_deleted,
                s.num_subjects
            )
        }
        Cmd::Delete(seq) => {
            store.delete(*seq)?;
            format!("{{\"deleted\":{seq}}}")
        }
        Cmd::Erase(seq) => {
            store.erase(*seq)?;
            format!("{{\"erased\":{seq}}}")
        }
        Cmd::Purge => format!("{{\"purged\":{}}}", store.purge()?),
        Cmd::PurgeEx {
            filter,
            up_to,
            keep,
        } => format!("{{\"purged\":{}}}", store.purge_ex(filter, *up_to, *keep)?),
        Cmd::Compact(seq) => format!("{{\"removed\":{}}}", store.compact(*seq)?),
        Cmd::Truncate(seq) => format!("{{\"removed\":{}}}", store.truncate(*seq)?),
        Cmd::Sync => {
            store.sync()?;
            "{\"synced\":true}".to_string()
        }
        Cmd::Checkpoint => {
            store.checkpoint()?;
            "{\"checkpoint\":true}".to_string()
        }
        Cmd::Report => {
            let r = store.recovery_report();
            format!(
                "{{\"used_index\":{},\"index_rejected\":{},\"purge_completed\":{},\
                 \"purge_rolled_back\":{},\"cuts\":{},\"skipped\":{},\"lost\":{},\
                 \"lost_data\":{}}}",
                r.used_index,
                r.index_rejected
                    .as_deref()
                    .map_or_else(|| "null".to_string(), json_str),
                r.purge_completed,
                r.purge_rolled_back,
                r.cuts.len(),
                r.skipped.len(),
                r.lost.len(),
                r.lost_data()
            )
        }
    })
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("seqstore-guest: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let fs = match host_fs::HostFs::open(&args.dir) {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!(
                "seqstore-guest: cannot open store directory {:?}: {e}",
                args.dir
            );
            return ExitCode::from(1);
        }
    };
    let defaults = Config::default();
    let cfg = Config {
        sync: args.sync,
        block_size: args.block_size.unwrap_or(defaults.block_size),
        ..defaults
    };
    let result =
        Store::open_with_clock(fs, cfg, Box::new(host_fs::SystemClock)).and_then(|mut store| {
            let out = run(&mut store, &args.cmd)?;
            if args.cmd.writes() {
                store.close()?;
            }
            Ok(out)
        });
    match result {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("seqstore-guest: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Args, String> {
        parse_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn parses_commands() {
        let a = p("--dir /x --sync never append --subject a.b --data hi").unwrap();
        assert_eq!(a.dir, "/x");
        assert_eq!(a.sync, SyncPolicy::Never);
        assert_eq!(
            a.cmd,
            Cmd::Append {
                subject: "a.b".into(),
                headers: String::new(),
                data: "hi".into()
            }
        );
        assert_eq!(p("get 7").unwrap().cmd, Cmd::Get(7));
        assert_eq!(p("next a.> ").unwrap().cmd, Cmd::Next("a.>".into(), 1));
        assert_eq!(p("subjects").unwrap().cmd, Cmd::Subjects(">".into()));
        assert_eq!(
            p("purge-ex a.* --keep 2 --up-to 9").unwrap().cmd,
            Cmd::PurgeEx {
                filter: "a.*".into(),
                up_to: 9,
                keep: 2
            }
        );
        assert_eq!(
            p("--sync interval=50 state").unwrap().sync,
            SyncPolicy::Interval(Duration::from_millis(50))
        );
    }

    #[test]
    fn refuses_bad_input() {
        for bad in [
            "",
            "get",
            "get -1",
            "get x",
            "append --data x",
            "state extra",
            "--sync sometimes state",
            "--sync interval=0 state",
            "--bogus state",
            "frobnicate",
        ] {
            assert!(p(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn json_escapes() {
        assert_eq!(json_str("a\"b\\\n\u{1}"), "\"a\\\"b\\\\\\n\\u0001\"");
        assert_eq!(json_bytes("p", b"hi"), "\"p\":\"hi\"");
        assert_eq!(json_bytes("p", &[0xff, 0x01]), "\"p_hex\":\"ff01\"");
    }

    #[test]
    fn runs_natively() {
        let dir = tempfile::tempdir().unwrap();
        let fs = host_fs::HostFs::open(dir.path()).unwrap();
        let mut s = Store::open(fs, Config::default()).unwrap();
        let cmd = |s: &str| p(s).unwrap().cmd;
        assert_eq!(
            run(&mut s, &cmd("append --subject a --data x")).unwrap(),
            "{\"seq\":1}"
        );
        assert!(run(&mut s, &cmd("get 1"))
            .unwrap()
            .contains("\"payload\":\"x\""));
        assert_eq!(run(&mut s, &cmd("purge")).unwrap(), "{\"purged\":1}");
        assert!(run(&mut s, &cmd("get 1")).is_err());
        s.close().unwrap();
    }
}
