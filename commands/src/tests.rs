//! The definitions parse what both binaries take, and the output is the JSON they print.

use crate::*;
use clap::{Parser, Subcommand};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: StoreCmd<NoExtra>,
}

fn parse(line: &str) -> Result<StoreCmd<NoExtra>, clap::Error> {
    Cli::try_parse_from(std::iter::once("t").chain(line.split_whitespace())).map(|c| c.cmd)
}

#[test]
fn the_definitions_are_consistent() {
    <StoreCmd<NoExtra> as Subcommand>::augment_subcommands(clap::Command::new("t")).debug_assert();
}

#[test]
fn dir_goes_after_the_command_and_defaults_per_target() {
    let c = parse("append --dir /data --subject s --data x").unwrap();
    assert_eq!(c.target().dir, std::path::Path::new("/data"));
    assert!(c.creates());
    let c = parse("state").unwrap();
    assert_eq!(c.target().dir, std::path::Path::new(DEFAULT_DIR));
    assert!(!c.creates());
    let err = parse("--dir /data append --subject s --data x").unwrap_err();
    assert_eq!(err.exit_code(), i32::from(EXIT_USAGE));
}

#[test]
fn sync_takes_both_spellings() {
    use seqstore_core::SyncPolicy;
    use std::time::Duration;
    assert_eq!(
        parse_sync("interval").unwrap(),
        SyncPolicy::Interval(Duration::from_secs(1))
    );
    assert_eq!(
        parse_sync("interval=50").unwrap(),
        SyncPolicy::Interval(Duration::from_millis(50))
    );
    for bad in ["interval=0", "interval=x", "sometimes", ""] {
        assert!(parse_sync(bad).is_err(), "{bad:?}");
    }
    let c = parse("append --subject a --data x --sync never").unwrap();
    assert_eq!(c.target().sync, SyncPolicy::Never);
}

#[test]
fn bad_command_lines_are_usage_errors() {
    for bad in [
        "",
        "get",
        "get -1",
        "get x",
        "append --data x",
        "state extra",
        "state --sync sometimes",
        "state --bogus",
        "frobnicate",
    ] {
        let e = parse(bad)
            .err()
            .unwrap_or_else(|| panic!("{bad:?} accepted"));
        assert_eq!(e.exit_code(), i32::from(EXIT_USAGE), "{bad:?}");
    }
}

#[test]
fn json_escapes_and_hex() {
    let m = seqstore_core::StoredMsg {
        seq: 1,
        ts: 2,
        subject: "a".into(),
        headers: vec![0xff, 0x01],
        payload: b"q\"\\\n\x01".to_vec(),
    };
    assert_eq!(
        Output::Msg((&m).into()).json_lines(),
        [r#"{"seq":1,"ts":2,"subject":"a","headers":{"hex":"ff01"},"payload":"q\"\\\n\u0001"}"#]
    );
}

#[test]
fn runs_on_a_native_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("s");
    let at = format!("--dir {}", d.display());
    let run = |line: &str| {
        let cmd = parse(&format!("{line} {at}")).unwrap();
        execute(&cmd, seqstore_core::Config::default(), "test")
    };
    assert!(matches!(run("state"), Err(Error::NoStore { .. })));
    assert_eq!(
        run("append --subject a --data x").unwrap().json_lines(),
        [r#"{"seq":1}"#]
    );
    assert!(run("get 1").unwrap().json_lines()[0].contains(r#""payload":"x""#));
    assert_eq!(run("purge").unwrap().json_lines(), [r#"{"purged":1}"#]);
    let e = run("get 1").unwrap_err();
    assert_eq!(report(&e), "no message with sequence 1");
    let e = run("last --subject a").unwrap_err();
    assert_eq!(report(&e), "no message with subject \"a\"");
    assert_eq!(run("verify").unwrap().exit_code(), EXIT_OK);
}
