//! The strace capture on real traces checked into tests/traces/ (recorded with this crate's
//! `strace_args` on Linux, strace 6.1). A replay of each into an empty fault-fs must end with
//! exactly the tree the program left on the real disk.

use fault_fs::{FaultFs, Journal, Model};
use seqstore_trace::ops::{Op, WriteAt};
use seqstore_trace::replay::Replayer;
use seqstore_trace::strace::{parse, ParseConfig};

const FIXTURE: &str = "/tmp/seqstore-trace-fixture";

fn cfg() -> ParseConfig {
    ParseConfig {
        roots: vec![format!("{FIXTURE}/d")],
        marks: Some(format!("{FIXTURE}/marks")),
        cwd: FIXTURE.into(),
    }
}

fn trace() -> &'static str {
    include_str!("traces/syscalls.strace")
}

#[test]
fn the_syscalls_fixture_replays_to_the_tree_the_program_left() {
    let cap = parse(trace(), &cfg()).unwrap();
    assert!(cap.incomplete.is_empty(), "{:?}", cap.incomplete);
    let fs = FaultFs::new(Model::Posix);
    let mut r = Replayer::new();
    let mut j = Journal::new();
    for (i, t) in cap.ops.iter().enumerate() {
        r.step(&fs, i, t, &mut j).unwrap();
    }
    assert_eq!(fs.dump(), include_str!("traces/syscalls.dump"));
    let marks: Vec<&str> = include_str!("traces/syscalls.marks").lines().collect();
    assert_eq!(j.events(), marks);
    // the final sync() made everything durable
    assert_eq!(fs.crash().dump(), fs.dump());
}

#[test]
fn the_fixture_covers_threads_resumed_calls_dup_append_and_rename_while_open() {
    let text = trace();
    let cap = parse(text, &cfg()).unwrap();
    // split calls on the checked directory, joined at their completion line
    let resumed: Vec<_> = cap
        .ops
        .iter()
        .filter(|t| text.lines().nth(t.line - 1).unwrap().contains("resumed>"))
        .collect();
    assert!(resumed.len() > 10, "only {} resumed ops", resumed.len());
    assert!(resumed.iter().any(|t| matches!(t.op, Op::Write { .. })));
    // several threads and a forked process
    let pids: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.contains("fixture/d"))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert!(pids.len() >= 3, "{pids:?}");
    // O_APPEND through dup'd descriptors and a pwrite on an O_APPEND description
    let appends = cap
        .ops
        .iter()
        .filter(|t| {
            matches!(
                t.op,
                Op::Write {
                    at: WriteAt::Append,
                    ..
                }
            )
        })
        .count();
    assert!(appends >= 5, "{appends}");
    // the write after the rename goes through the description opened as r.tmp
    let after = cap
        .ops
        .iter()
        .find(|t| matches!(&t.op, Op::Write { data, .. } if data == b"after rename"))
        .unwrap();
    assert!(
        after.text.contains("r>") || after.text.contains("r.tmp"),
        "{after}"
    );
    assert!(matches!(
        after.op,
        Op::Write {
            at: WriteAt::Offset(14),
            ..
        }
    ));
}

#[test]
fn every_prefix_of_the_fixture_parses_or_fails_with_a_typed_error() {
    // a trace cut anywhere (a workload killed mid-run) never panics the parser
    let text = trace();
    for cut in (0..text.len()).step_by(997) {
        if !text.is_char_boundary(cut) {
            continue;
        }
        let _ = parse(&text[..cut], &cfg());
    }
}
