//! One workload at a time, for a profiler (`perf record -e cpu-clock --call-graph dwarf`, or
//! `valgrind --tool=callgrind`): `profile MODE [N]`, in a tempdir under $TMPDIR, or in
//! `PROFILE_DIR` to reuse a stream so that only the measured phase is profiled.
//! Modes: `nosync N` (N appends, SyncPolicy::Never), `every N` (sync every 1000), `write N` /
//! `write-closed N` (build a stream in PROFILE_DIR, dropped / closed), `rebuild` (5 opens
//! without index.db), `index` (200 opens from index.db: per-open CPU and wall), `index-alt`
//! (opens alternating PROFILE_DIR and PROFILE_DIR2), `gets` (3M random gets), `purge N`
//! (purge of an N-message stream: wall and on-CPU time), `group N` (N SharedStore writers
//! under SyncPolicy::Always for 3 s).

use std::hint::black_box;
use std::time::Instant;

use seqstore_core::{Config, Store, SyncPolicy};
use seqstore_fs::{HostFs, SystemClock};

fn open(p: &std::path::Path, sync: SyncPolicy) -> Store<HostFs> {
    let mut cfg = Config::default().with_sync(sync);
    // PROFILE_CACHE=bytes: Config::block_cache (default: the store's default)
    if let Some(c) = std::env::var("PROFILE_CACHE")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.block_cache = c;
    }
    Store::builder(HostFs::create(p).unwrap())
        .config(cfg)
        .clock(SystemClock)
        .open()
        .unwrap()
}

/// ns this thread spent on a CPU (/proc/thread-self/schedstat).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// (CPU seconds, context switches) of the whole process so far, every thread counted,
/// ended ones too (`getrusage(RUSAGE_SELF)`). Unsafe because the call is libc's: rustix (in
/// the lockfile) has no getrusage, and /proc/self/stat counts CPU time only in clock ticks.
#[allow(unsafe_code)]
fn process_usage() -> (f64, u64) {
    // SAFETY: rusage is plain integers, for which all zeros is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage for the call to fill.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return (0.0, 0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        secs(u.ru_utime) + secs(u.ru_stime),
        (u.ru_nvcsw + u.ru_nivcsw) as u64,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map(String::as_str).unwrap_or("nosync");
    let n: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    // PROFILE_DIR: an existing stream (written by `write`) to reuse, so only the measured
    // phase is profiled
    let keep = std::env::var_os("PROFILE_DIR").map(std::path::PathBuf::from);
    let p = keep.as_deref().unwrap_or(dir.path());
    let payload = vec![7u8; 128];
    let subjects: Vec<String> = (0..64).map(|i| format!("orders.eu.{i:06}")).collect();
    let write = |n: u64| {
        let mut s = open(p, SyncPolicy::Never);
        for i in 0..n {
            s.append(&subjects[(i % 64) as usize], b"", &payload)
                .unwrap();
        }
        s
    };
    let t = Instant::now();
    match what {
        "nosync" => {
            drop(write(n));
        }
        "every" => {
            let mut s = open(p, SyncPolicy::Never);
            for i in 0..n {
                s.append(&subjects[(i % 64) as usize], b"", &payload)
                    .unwrap();
                if (i + 1) % 1000 == 0 {
                    s.sync().unwrap();
                }
            }
        }
        "group" => {
            // n writer threads on a SharedStore under SyncPolicy::Always for 3 s
            let store = seqstore_core::SharedStore::new(open(p, SyncPolicy::Always));
            store.append(&subjects[0], b"", &payload).unwrap();
            let dur = std::time::Duration::from_secs(3);
            let (cpu0, cs0) = process_usage();
            let t = Instant::now();
            let total: u64 = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..n)
                    .map(|k| {
                        let st = store.clone();
                        let (subjects, payload) = (&subjects, &payload);
                        sc.spawn(move || {
                            let mut c = 0u64;
                            while t.elapsed() < dur {
                                st.append(&subjects[((k + c) % 64) as usize], b"", payload)
                                    .unwrap();
                                c += 1;
                            }
                            c
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum()
            });
            let wall = t.elapsed().as_secs_f64();
            let (cpu1, cs1) = process_usage();
            eprintln!(
                "{n} writers: {:.0} appends/s; per append {:.2} µs CPU, {:.2} context switches; {:.2} CPUs busy",
                total as f64 / wall,
                (cpu1 - cpu0) * 1e6 / total as f64,
                (cs1 - cs0) as f64 / total as f64,
                (cpu1 - cpu0) / wall
            );
        }
        "write" => {
            drop(write(n));
        }
        "write-closed" => {
            write(n).close().unwrap();
        }
        "rebuild" => {
            if keep.is_none() {
                drop(write(n));
            }
            let t = Instant::now();
            for _ in 0..5 {
                drop(open(p, SyncPolicy::Never));
            }
            eprintln!("5 opens: {:?}", t.elapsed());
        }
        "index" => {
            if keep.is_none() {
                write(n).close().unwrap();
            }
            let t = Instant::now();
            let mut cpus = Vec::new();
            let mut walls = Vec::new();
            for _ in 0..200 {
                let c = cpu_ns();
                let w = Instant::now();
                drop(open(p, SyncPolicy::Never));
                walls.push(w.elapsed().as_secs_f64() * 1e3);
                cpus.push((cpu_ns() - c) as f64 / 1e6);
            }
            cpus.sort_by(f64::total_cmp);
            walls.sort_by(f64::total_cmp);
            eprintln!(
                "200 opens: {:?}; per open cpu ms p10/p50/p90 {:.3}/{:.3}/{:.3}, wall {:.3}/{:.3}/{:.3}",
                t.elapsed(), cpus[20], cpus[100], cpus[180], walls[20], walls[100], walls[180]
            );
        }
        "index-alt" => {
            // opens alternating between PROFILE_DIR and PROFILE_DIR2 (both closed streams)
            let p2 =
                std::path::PathBuf::from(std::env::var_os("PROFILE_DIR2").expect("PROFILE_DIR2"));
            let (mut c1, mut c2) = (Vec::new(), Vec::new());
            for _ in 0..50 {
                for (q, v) in [(p, &mut c1), (p2.as_path(), &mut c2)] {
                    let c = cpu_ns();
                    drop(open(q, SyncPolicy::Never));
                    v.push((cpu_ns() - c) as f64 / 1e6);
                }
            }
            c1.sort_by(f64::total_cmp);
            c2.sort_by(f64::total_cmp);
            eprintln!("cpu ms median: dir1 {:.3}, dir2 {:.3}", c1[25], c2[25]);
        }
        "gets" => {
            if keep.is_none() {
                write(n).close().unwrap();
            }
            let mut s = open(p, SyncPolicy::Never);
            let mut x = 88172645463325252u64;
            let t = Instant::now();
            for _ in 0..3_000_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                black_box(s.get(x % n + 1).unwrap());
            }
            eprintln!("3M gets: {:?}", t.elapsed());
        }
        "purge" => {
            write(n).close().unwrap();
            let mut s = open(p, SyncPolicy::Never);
            for seq in (1..=n).step_by(200) {
                black_box(s.get(seq).unwrap());
            }
            let c = cpu_ns();
            let t = Instant::now();
            s.purge().unwrap();
            eprintln!(
                "purge: {:?} wall, {:.3} ms on cpu",
                t.elapsed(),
                (cpu_ns() - c) as f64 / 1e6
            );
        }
        _ => panic!("what?"),
    }
    eprintln!("{what} {n}: {:?}", t.elapsed());
}
