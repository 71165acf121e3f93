//! The parser against generated threaded traces: several threads share one descriptor table
//! (Linux's: the lowest free number, freed as `close` starts, taken as `openat` returns) and
//! open, write and close files in `/d`, scheduled at random; a call another thread's event
//! falls inside is printed split, as `strace -f` prints it. Parsing and replaying the trace
//! must end with the files the simulated kernel holds. Each trace comes from a seed
//! (`SEQSTORE_SEED=S` replays one); a failure is shrunk to the fewest calls that still fail
//! and printed as a trace.

use seqstore_fault_fs::{FaultFs, Journal, Model, Rng};
use seqstore_trace::replay::Replayer;
use seqstore_trace::strace::{parse, ParseConfig};
use std::collections::BTreeMap;

/// One call of a thread's script.
#[derive(Clone, Copy, Debug)]
enum Call {
    Open(u8),
    Write(u8),
    Close,
}

/// Per thread: sessions of open, a few writes, close, on files a..e.
fn scripts(rng: &mut Rng) -> Vec<Vec<Call>> {
    let threads = 2 + rng.below(3);
    (0..threads)
        .map(|_| {
            let mut s = Vec::new();
            for _ in 0..1 + rng.below(4) {
                s.push(Call::Open(b'a' + rng.below(5) as u8));
                for _ in 0..rng.below(3) {
                    s.push(Call::Write(b'A' + rng.below(26) as u8));
                }
                s.push(Call::Close);
            }
            s
        })
        .collect()
}

/// What one thread holds open: its descriptor and the file.
#[derive(Default)]
struct Thread {
    next: usize,
    fd: Option<(i64, u8)>,
    /// Entered, not yet returned: the call's index and the line it entered on.
    in_call: Option<(usize, usize)>,
}

/// The simulated kernel's end state and the strace output of one schedule.
struct Run {
    trace: String,
    files: BTreeMap<u8, Vec<u8>>,
}

fn pid(t: usize) -> usize {
    101 + t
}

fn head(call: Call, fd: Option<(i64, u8)>) -> String {
    match (call, fd) {
        (Call::Open(f), _) => format!(
            "openat(AT_FDCWD</>, \"/d/{}\", O_RDWR|O_CREAT, 0644",
            f as char
        ),
        (Call::Write(b), Some((fd, f))) => {
            format!("write({fd}</d/{}>, \"{}\", 1", f as char, b as char)
        }
        (Call::Close, Some((fd, f))) => format!("close({fd}</d/{}>", f as char),
        _ => unreachable!("a write or close with nothing open"),
    }
}

/// Runs the scripts under the schedule drawn from `seed` and prints what strace would.
fn simulate(scripts: &[Vec<Call>], seed: u64) -> Run {
    let mut rng = Rng::new(seed);
    let mut threads: Vec<Thread> = scripts.iter().map(|_| Thread::default()).collect();
    let mut table: BTreeMap<i64, u8> = BTreeMap::new();
    let mut files: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
    let mut pos: BTreeMap<i64, usize> = BTreeMap::new();
    // events: (thread, entry head, completion tail); a call is split when another event
    // comes between its entry and its completion
    let mut events: Vec<(usize, Option<String>, Option<String>)> = Vec::new();
    let mut open_heads: BTreeMap<usize, usize> = BTreeMap::new();
    let mut out = String::from("101 clone3({flags=CLONE_VM|CLONE_FILES|CLONE_THREAD}, 88) = 102\n");
    for t in 2..scripts.len() {
        out += &format!(
            "101 clone3({{flags=CLONE_VM|CLONE_FILES|CLONE_THREAD}}, 88) = {}\n",
            pid(t)
        );
    }
    loop {
        let live: Vec<usize> = (0..threads.len())
            .filter(|&t| threads[t].in_call.is_some() || threads[t].next < scripts[t].len())
            .collect();
        if live.is_empty() {
            break;
        }
        let t = live[rng.below(live.len() as u64) as usize];
        let th = &mut threads[t];
        match th.in_call {
            None => {
                let call = scripts[t][th.next];
                let h = head(call, th.fd);
                if let (Call::Close, Some((fd, _))) = (call, th.fd) {
                    table.remove(&fd); // freed as the call starts
                }
                th.in_call = Some((th.next, events.len()));
                th.next += 1;
                open_heads.insert(t, events.len());
                events.push((t, Some(h), None));
            }
            Some((i, _)) => {
                let tail = match scripts[t][i] {
                    Call::Open(f) => {
                        let fd = (3..).find(|n| !table.contains_key(n)).unwrap();
                        table.insert(fd, f);
                        pos.insert(fd, 0);
                        files.entry(f).or_default();
                        th.fd = Some((fd, f));
                        format!(") = {fd}</d/{}>", f as char)
                    }
                    Call::Write(b) => {
                        let (fd, f) = th.fd.unwrap();
                        let p = pos[&fd];
                        let data = files.get_mut(&f).unwrap();
                        if p < data.len() {
                            data[p] = b;
                        } else {
                            data.push(b);
                        }
                        pos.insert(fd, p + 1);
                        ") = 1".to_string()
                    }
                    Call::Close => {
                        th.fd = None;
                        ") = 0".to_string()
                    }
                };
                th.in_call = None;
                let e = open_heads.remove(&t).unwrap();
                if e + 1 == events.len() {
                    events[e].2 = Some(tail); // nothing came between: one line
                } else {
                    events.push((t, None, Some(tail)));
                }
            }
        }
    }
    // render: a head with its tail is one line; else `<unfinished ...>` and `<... resumed>`
    let mut name_of: BTreeMap<usize, &str> = BTreeMap::new();
    for (t, h, tail) in &events {
        let p = pid(*t);
        match (h, tail) {
            (Some(h), Some(tail)) => out += &format!("{p} {h}{tail}\n"),
            (Some(h), None) => {
                name_of.insert(*t, h.split('(').next().unwrap());
                out += &format!("{p} {h} <unfinished ...>\n");
            }
            (None, Some(tail)) => {
                let name = name_of.remove(t).unwrap();
                out += &format!("{p} <... {name} resumed>{tail}\n");
            }
            (None, None) => unreachable!(),
        }
    }
    Run { trace: out, files }
}

/// Parses and replays `run.trace`; the tree must be the simulated kernel's files.
fn check(run: &Run) -> Result<(), String> {
    let cfg = ParseConfig {
        roots: vec!["/d".into()],
        marks: None,
        cwd: "/".into(),
    };
    let cap = parse(&run.trace, &cfg).map_err(|e| format!("parse: {e}"))?;
    let fs = FaultFs::new(Model::Posix);
    let mut r = Replayer::new();
    let mut j = Journal::new();
    for (i, t) in cap.ops.iter().enumerate() {
        r.step(&fs, i, t, &mut j)
            .map_err(|e| format!("replay: {e}"))?;
    }
    let want: String = run
        .files
        .iter()
        .map(|(f, d)| format!("{} = {:?}\n", *f as char, String::from_utf8_lossy(d)))
        .collect();
    let got = fs.dump();
    if got != want {
        return Err(format!("replayed tree:\n{got}expected:\n{want}"));
    }
    Ok(())
}

/// Drops whole open..close sessions and single writes while the same schedule seed still fails.
fn shrink(mut s: Vec<Vec<Call>>, seed: u64) -> (Vec<Vec<Call>>, Run, String) {
    loop {
        let mut smaller = None;
        'find: for t in 0..s.len() {
            let starts: Vec<usize> = (0..s[t].len())
                .filter(|&i| matches!(s[t][i], Call::Open(_)))
                .collect();
            let writes = (0..s[t].len()).filter(|&i| matches!(s[t][i], Call::Write(_)));
            let cuts = starts.iter().map(|&a| {
                let b = (a..s[t].len()).find(|&i| matches!(s[t][i], Call::Close));
                (a, b.unwrap())
            });
            for (a, b) in cuts.chain(writes.map(|i| (i, i))).collect::<Vec<_>>() {
                let mut c = s.clone();
                c[t].drain(a..=b);
                if check(&simulate(&c, seed)).is_err() {
                    smaller = Some(c);
                    break 'find;
                }
            }
        }
        match smaller {
            Some(c) => s = c,
            None => {
                let run = simulate(&s, seed);
                let err = check(&run).unwrap_err();
                return (s, run, err);
            }
        }
    }
}

/// Trace `seed`'s scripts and the seed of its schedule.
fn drawn(seed: u64) -> (Vec<Vec<Call>>, u64) {
    let mut rng = Rng::new(seed);
    let s = scripts(&mut rng);
    (s, rng.next_u64())
}

#[test]
fn generated_threaded_traces_replay_to_the_kernels_files() {
    let base: u64 = std::env::var("SEQSTORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261203);
    let count = if std::env::var("SEQSTORE_SEED").is_ok() {
        1
    } else {
        2000
    };
    println!("SEQSTORE_SEED={base}: {count} traces");
    let mut split = 0;
    for seed in base..base + count {
        let (s, schedule) = drawn(seed);
        let run = simulate(&s, schedule);
        split += run.trace.matches("resumed>").count();
        if check(&run).is_err() {
            let (_, small, err) = shrink(s, schedule);
            panic!(
                "trace from SEQSTORE_SEED={seed} (shrunk) parses to the wrong files: {err}\n{}",
                small.trace
            );
        }
    }
    // the generator exercises what it is for: calls split by other threads' events
    assert!(
        split > count as usize,
        "only {split} split calls in {count} traces"
    );
}
