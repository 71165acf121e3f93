//! The strace capture on real traces checked into tests/traces/ (recorded with this crate's
//! `strace_args` on Linux, strace 6.1). A replay of each into an empty fault-fs must end with
//! exactly the tree the program left on the real disk.

use seqstore_fault_fs::{FaultFs, Journal, Model};
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

/// A program working in `/d`, no marks.
fn cfg_d() -> ParseConfig {
    ParseConfig {
        roots: vec!["/d".into()],
        marks: None,
        cwd: "/".into(),
    }
}

/// Replays every operation into an empty fault-fs.
fn replay(cap: &seqstore_trace::ops::Capture) -> (FaultFs, Journal<String>) {
    let fs = FaultFs::new(Model::Posix);
    let mut r = Replayer::new();
    let mut j = Journal::new();
    for (i, t) in cap.ops.iter().enumerate() {
        r.step(&fs, i, t, &mut j).unwrap();
    }
    (fs, j)
}

#[test]
fn the_syscalls_fixture_replays_to_the_tree_the_program_left() {
    let cap = parse(trace(), &cfg()).unwrap();
    assert!(cap.incomplete.is_empty(), "{:?}", cap.incomplete);
    let (fs, j) = replay(&cap);
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

/// A trace line with a path under /d (the fuzz configuration's root).
fn seeded_mutations(seed: u64) -> impl Iterator<Item = Vec<u8>> {
    // the fixture rewritten to the fuzz root, then bytes flipped, dropped and duplicated
    let base = trace().replace(&format!("{FIXTURE}/d"), "/d").into_bytes();
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..300).map(move |_| {
        let mut v = base.clone();
        for _ in 0..1 + next() % 8 {
            let i = (next() as usize) % v.len();
            match next() % 4 {
                0 => v[i] = (next() & 0x7f) as u8,
                1 => {
                    v.remove(i);
                }
                2 => v.insert(i, b"\"()<>,=-19x"[(next() % 11) as usize]),
                _ => v.truncate(i),
            }
        }
        v
    })
}

#[test]
fn mutated_traces_are_typed_errors_never_panics() {
    // the in-tree stand-in for the fuzz target (fuzz/fuzz_targets/strace_parse.rs): seeded
    for (n, m) in seeded_mutations(0x5eed_7ace).enumerate() {
        let r = std::panic::catch_unwind(|| seqstore_trace::fuzz::parse_and_replay(&m));
        assert!(r.is_ok(), "mutation {n} (seed 0x5eed7ace) panicked");
    }
}

#[test]
fn a_close_split_by_another_threads_open_of_the_same_number_frees_only_the_old_file() {
    // nats-server under load: one thread's close of 10 is still unfinished when another
    // thread's open is handed 10; the close's completion must not close the new file
    let text = "\
1 clone3({flags=CLONE_VM|CLONE_FILES|CLONE_THREAD, exit_signal=0}, 88) = 2
1 openat(AT_FDCWD</>, \"/d/a\", O_RDWR|O_CREAT, 0644) = 10</d/a>
1 close(10</d/a> <unfinished ...>
2 openat(AT_FDCWD</>, \"/d/b\", O_RDWR|O_CREAT, 0644) = 10</d/b>
1 <... close resumed>) = 0
2 fcntl(10</d/b>, F_GETFL) = 0x8002 (flags O_RDWR|O_LARGEFILE)
2 pwrite64(10</d/b>, \"x\", 1, 0) = 1
2 close_range(3, 4294967295, 0 <unfinished ...>
1 openat(AT_FDCWD</>, \"/d/c\", O_RDWR|O_CREAT, 0644) = 10</d/c>
2 <... close_range resumed>) = 0
1 pwrite64(10</d/c>, \"y\", 1, 0) = 1
";
    let cap = parse(text, &cfg_d()).unwrap();
    assert!(cap.incomplete.is_empty(), "{:?}", cap.incomplete);
    let dump = replay(&cap).0.dump();
    for f in ["a = \"\"", "b = \"x\"", "c = \"y\""] {
        assert!(dump.lines().any(|l| l == f), "{f} missing: {dump}");
    }
}

#[test]
fn unmodellable_calls_are_errors_naming_the_line() {
    use seqstore_trace::Error;
    let cfg = cfg_d();
    let open = "1 openat(AT_FDCWD</>, \"/d/f\", O_RDWR|O_CREAT, 0644) = 3</d/f>\n";
    let cases = [
        (
            "1 openat(AT_FDCWD</>, \"/d/f\", O_RDWR|O_DIRECT) = 3</d/f>",
            "openat",
        ),
        (
            "1 mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_SHARED, 3</d/f>, 0) = 0x7f00",
            "mmap",
        ),
        ("1 io_uring_setup(8, {flags=0}) = 3", "io_uring_setup"),
        ("1 symlink(\"x\", \"/d/l\") = 0", "symlink"),
        ("1 write(3</d/f>, \"ab\"..., 4) = 4", "write"),
        ("1 write(7</d/g>, \"ab\", 2) = 2", "write"),
        ("1 rename(\"/elsewhere\", \"/d/x\") = 0", "rename"),
    ];
    for (line, syscall) in cases {
        let text = format!("{open}{line}\n");
        match parse(&text, &cfg) {
            Err(Error::Unsupported {
                line: 2,
                syscall: s,
                ..
            }) => assert_eq!(s, syscall),
            other => panic!("{line}: {other:?}"),
        }
    }
    for bad in [
        "1 write(3, \"ab",
        "1 <... write resumed>) = 2",
        "1 write(3, \"a\", 1) = zz",
    ] {
        assert!(
            matches!(
                parse(&format!("{open}{bad}\n"), &cfg),
                Err(Error::Parse { line: 2, .. })
            ),
            "{bad}"
        );
    }
    // outside the directory nothing is an error
    assert!(parse(
        "1 mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_SHARED, 5</x>, 0) = 0x7f00\n",
        &cfg
    )
    .is_ok());
}

#[test]
fn o_sync_writes_are_durable_when_they_return() {
    let text = "1 openat(AT_FDCWD</>, \"/d/f\", O_WRONLY|O_CREAT|O_SYNC, 0644) = 3</d/f>\n\
                1 write(3</d/f>, \"abc\", 3) = 3\n\
                1 openat(AT_FDCWD</>, \"/d\", O_RDONLY|O_DIRECTORY) = 4</d>\n\
                1 fsync(4</d>) = 0\n";
    let fs = replay(&parse(text, &cfg_d()).unwrap()).0;
    assert_eq!(fs.crash().read_file("f").unwrap(), b"abc");
}
