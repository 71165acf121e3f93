//! Replay, exploration, the checker protocol and the report on a real trace
//! (tests/traces/commit.strace: `a` committed with fsyncs, `b` without).

use seqstore_fault_fs::{FaultFs, FaultFsConfig, Model};
use seqstore_trace::check::{Checker, CommandChecker, Verdict};
use seqstore_trace::ops::Capture;
use seqstore_trace::session::{check_capture, replay_capture_image, CheckConfig};
use seqstore_trace::strace::{parse, ParseConfig};
use seqstore_trace::Error;
use std::path::Path;

const FIXTURE: &str = "/tmp/seqstore-trace-fixture";

fn capture() -> Capture {
    let cfg = ParseConfig {
        roots: vec![format!("{FIXTURE}/d")],
        marks: Some(format!("{FIXTURE}/marks")),
        cwd: FIXTURE.into(),
    };
    parse(include_str!("traces/commit.strace"), &cfg).unwrap()
}

/// Every `committed NAME CONTENT` mark must be in the image.
struct Committed;

impl Checker for Committed {
    fn check(&self, image: &Path, marks: &Path, _k: usize) -> Result<Verdict, Error> {
        for m in std::fs::read_to_string(marks).unwrap().lines() {
            let mut w = m.split(' ').skip(1);
            let (name, content) = (w.next().unwrap(), w.next().unwrap());
            let got = std::fs::read(image.join(name)).unwrap_or_default();
            if got != content.as_bytes() {
                return Ok(Verdict::Violation(format!(
                    "{name} holds {:?}",
                    String::from_utf8_lossy(&got)
                )));
            }
        }
        Ok(Verdict::Consistent)
    }
}

/// The checked directory was empty before the program ran.
fn start(model: Model) -> FaultFs {
    FaultFs::with_config(FaultFsConfig::new(model)).unwrap()
}

#[test]
fn the_unsynced_commit_is_caught_and_blamed_on_its_line_in_both_models() {
    let cap = capture();
    let trace: Vec<&str> = include_str!("traces/commit.strace").lines().collect();
    for model in Model::ALL {
        let r = check_capture(&start(model), &cap, &Committed, &CheckConfig::new(model)).unwrap();
        assert!(r.violations > 0, "{model}: {r:?}");
        assert!(r.distinct_images <= r.images && r.checker_runs >= r.distinct_images.min(1));
        let f = r.first.as_ref().unwrap();
        assert!(f.message.starts_with("b holds"), "{model}: {}", f.message);
        assert_eq!(f.marks, ["committed a alpha", "committed b beta"]);
        assert!(!f.blame.is_empty(), "{model}: {f:?}");
        // the blamed call is b's write (ordered: its data is lost) or its rename (posix: the
        // name is lost); it names the trace line, whose text is the call
        let b = &f.blame[0];
        let line: usize = b
            .strip_prefix("line ")
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(trace[line - 1].contains("b.tmp"), "{model}: {b}");
        if model == Model::Ordered {
            assert!(b.contains("write("), "{b}");
        }
    }
}

/// Says every image is consistent, counting its calls.
struct Passes(std::sync::atomic::AtomicUsize);

impl Checker for Passes {
    fn check(&self, _image: &Path, _marks: &Path, _k: usize) -> Result<Verdict, Error> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Verdict::Consistent)
    }
}

#[test]
fn a_clean_report_counts_what_a_failing_one_counts() {
    // When every image passes, the first exploration's counts are the report (no second
    // exploration): they must be the counts the second one gives a capture with violations,
    // and the checker runs once per distinct pair, no more.
    let cap = capture();
    for model in Model::ALL {
        let cfg = CheckConfig::new(model);
        let failing = check_capture(&start(model), &cap, &Committed, &cfg).unwrap();
        let passes = Passes(Default::default());
        let clean = check_capture(&start(model), &cap, &passes, &cfg).unwrap();
        assert!(failing.violations > 0 && clean.violations == 0, "{model}");
        assert_eq!(
            (
                clean.ops,
                clean.crash_points,
                clean.images,
                clean.distinct_images
            ),
            (
                failing.ops,
                failing.crash_points,
                failing.images,
                failing.distinct_images
            ),
            "{model}"
        );
        assert_eq!(clean.first, None);
        assert!(clean.by_last_mark.is_empty());
        let runs = passes.0.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(clean.checker_runs, runs, "{model}");
        assert!(
            runs <= failing.checker_runs,
            "{model}: blame re-checks are extra"
        );
    }
}

/// The capture cut after its first mark: only the synced commit and its mark (no violation).
fn synced_commit_only() -> Capture {
    let mut cap = capture();
    let first_mark = cap
        .ops
        .iter()
        .position(|t| matches!(t.op, seqstore_trace::ops::Op::Mark(_)))
        .unwrap();
    cap.ops.truncate(first_mark + 1);
    cap
}

#[test]
fn the_synced_commit_alone_is_clean() {
    let cap = synced_commit_only();
    for model in Model::ALL {
        let r = check_capture(&start(model), &cap, &Committed, &CheckConfig::new(model)).unwrap();
        assert_eq!(r.violations, 0, "{model}: {:?}", r.first);
        assert!(r.images > 3);
    }
}

#[test]
fn the_same_seed_gives_the_same_report_and_replay_rebuilds_the_image() {
    let cap = capture();
    let cfg = CheckConfig::new(Model::Posix);
    let a = check_capture(&start(Model::Posix), &cap, &Committed, &cfg).unwrap();
    let b = check_capture(&start(Model::Posix), &cap, &Committed, &cfg).unwrap();
    assert_eq!(
        (a.crash_points, a.images, a.distinct_images, a.violations),
        (b.crash_points, b.images, b.distinct_images, b.violations)
    );
    assert_eq!(a.first, b.first);
    let f = a.first.unwrap();
    let img =
        replay_capture_image(&start(Model::Posix), &cap, &cfg, f.crash_point, f.image).unwrap();
    assert_eq!(img.image_desc, f.image_desc);
    assert_eq!(img.marks, f.marks);
    let d = tempfile::tempdir().unwrap();
    seqstore_trace::check::materialize(&img.image, d.path()).unwrap();
    let m = tempfile::tempdir().unwrap();
    let marks = m.path().join("marks");
    std::fs::write(
        &marks,
        img.marks
            .iter()
            .map(|m| format!("{m}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let v = Committed.check(d.path(), &marks, f.crash_point);
    assert!(matches!(v, Ok(Verdict::Violation(_))), "{v:?}");
}

#[test]
fn stopping_at_the_first_violation_finds_the_same_one_with_fewer_checks() {
    let cap = capture();
    let mut saved = 0;
    for model in Model::ALL {
        let full =
            check_capture(&start(model), &cap, &Committed, &CheckConfig::new(model)).unwrap();
        assert!(
            full.violations > 0 && !full.stopped_at_first,
            "{model}: {full:?}"
        );
        for jobs in [1, 3] {
            let mut cfg = CheckConfig::new(model);
            cfg.stop_at_first = true;
            cfg.jobs = jobs;
            let r = check_capture(&start(model), &cap, &Committed, &cfg).unwrap();
            // the same first violation, blame and replay included, from fewer checker runs
            assert_eq!(r.first, full.first, "{model}, {jobs} jobs");
            assert!(r.stopped_at_first && r.violations == 1, "{model}: {r:?}");
            assert!(
                r.checker_runs <= full.checker_runs,
                "{model}: {r:?} vs {full:?}"
            );
            assert!(r.crash_points <= full.crash_points);
            saved += full.checker_runs - r.checker_runs;
        }
    }
    // a violation before the last image leaves checks undone in at least one model
    assert!(
        saved > 0,
        "stopping at the first violation saved no checker run"
    );
    // a clean capture is checked whole either way
    let clean = synced_commit_only();
    let mut cfg = CheckConfig::new(Model::Posix);
    let all = check_capture(&start(Model::Posix), &clean, &Committed, &cfg).unwrap();
    cfg.stop_at_first = true;
    let r = check_capture(&start(Model::Posix), &clean, &Committed, &cfg).unwrap();
    assert_eq!((r.violations, r.stopped_at_first), (0, false));
    assert_eq!(
        (r.crash_points, r.images, r.checker_runs),
        (all.crash_points, all.images, all.checker_runs)
    );
}

#[test]
fn a_shell_checker_gets_the_image_and_marks_and_its_stdout_is_the_violation() {
    let cap = capture();
    // the protocol: IMAGE_DIR, MARKS_FILE, CRASH_POINT; exit 0 = consistent
    let cmd = r#"test -n "$CRASH_POINT" || exit 3
        if grep -q 'committed b' "$MARKS_FILE" && [ "$(cat "$IMAGE_DIR/b" 2>/dev/null)" != beta ]; then
            echo "b lost at $CRASH_POINT"; exit 1; fi
        exit 0"#;
    let r = check_capture(
        &start(Model::Ordered),
        &cap,
        &CommandChecker::new(cmd),
        &CheckConfig::new(Model::Ordered),
    )
    .unwrap();
    assert!(r.violations > 0);
    assert!(r.first.unwrap().message.starts_with("b lost at "));
    // a checker that cannot run is an error, not a verdict
    let e = check_capture(
        &start(Model::Ordered),
        &cap,
        &CommandChecker::new("no-such-checker-xyz"),
        &CheckConfig::new(Model::Ordered),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Checker(_)), "{e}");
}
