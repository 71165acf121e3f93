//! The explorer finds a planted missing-fsync bug, names its line, is deterministic, shrinks.

use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fault_fs::{
    explore, replay_image, shrink, CrashCtx, ExploreConfig, FaultFs, Journal, Model,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Lines of the toy workload's operations, captured as they run (`line!()` on the same line
/// as the call), so the assertions do not hard-code line numbers.
static WRITE_LINE: AtomicU32 = AtomicU32::new(0);
static RENAME_LINE: AtomicU32 = AtomicU32::new(0);

#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// Atomically replace `cfg` with version `v` (with or without the fsyncs).
    Replace { v: u8, synced: bool },
    /// Unrelated durable work.
    Pad(u8),
}

fn content(v: u8) -> Vec<u8> {
    format!("config version {v}\n").into_bytes()
}

fn s(e: std::io::Error) -> String {
    e.to_string()
}

/// The toy workload: write a temp file, rename it over the target; the safe variant syncs the
/// temp file's data before the rename and the directory after it. Notes the acknowledged version.
fn run_step(fs: &FaultFs, step: &Step, j: &mut Journal<u8>) -> Result<(), String> {
    match *step {
        Step::Replace { v, synced } => {
            let f = fs
                .open("cfg.tmp", OpenOptions::read_write_create().truncate(true))
                .map_err(s)?;
            let (r, l) = (f.write_all_at(&content(v), 0), line!());
            WRITE_LINE.store(l, Ordering::Relaxed);
            r.map_err(s)?;
            if synced {
                f.sync_data().map_err(s)?;
            }
            drop(f);
            let (r, l) = (fs.rename("cfg.tmp", "cfg"), line!());
            RENAME_LINE.store(l, Ordering::Relaxed);
            r.map_err(s)?;
            if synced {
                fs.sync_dir("").map_err(s)?;
            }
            j.note(fs, v);
        }
        Step::Pad(i) => {
            let f = fs
                .open(&format!("pad{i}"), OpenOptions::read_write_create())
                .map_err(s)?;
            f.write_all_at(&[i; 10], 0).map_err(s)?;
            f.sync_all().map_err(s)?;
            fs.sync_dir("").map_err(s)?;
        }
    }
    Ok(())
}

/// Recovery must find the last acknowledged version or a newer one, never an older or broken one.
fn check(img: &FaultFs, cx: &CrashCtx<'_, u8>) -> Result<(), String> {
    let Some(&acked) = cx.events.last() else {
        return Ok(()); // nothing promised yet
    };
    let got = img
        .read_file("cfg")
        .map_err(|e| format!("acked v{acked} but cfg unreadable: {e}"))?;
    let ok = (acked..=u8::MAX).any(|v| got == content(v));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "acked v{acked} but cfg holds {:?}",
            String::from_utf8_lossy(&got)
        ))
    }
}

fn unsafe_steps() -> Vec<Step> {
    vec![
        Step::Replace { v: 1, synced: true },
        Step::Replace {
            v: 2,
            synced: false,
        },
    ]
}

#[test]
fn planted_missing_fsync_is_found_with_its_call_site() {
    for model in Model::ALL {
        let cfg = ExploreConfig::new(model);
        let r = explore(&cfg, &unsafe_steps(), run_step, check);
        println!("{r}");
        assert!(r.workload_error.is_none());
        assert!(r.violation_count > 0, "{model}: bug not found");
        let rename_site = format!("{}:{}", file!(), RENAME_LINE.load(Ordering::Relaxed));
        let write_site = format!("{}:{}", file!(), WRITE_LINE.load(Ordering::Relaxed));
        // the first violation is the crash right after the unsynced rename was acknowledged
        let v = &r.violations[0];
        assert_eq!(v.call_site, rename_site, "{model}: {v}");
        assert!(v.op.starts_with("rename cfg.tmp -> cfg"), "{}", v.op);
        assert_eq!(v.model, model);
        // and the blame names the write that was never synced
        assert!(
            v.blame.iter().any(|b| b.call_site == write_site),
            "{model}: {v}"
        );
        if model == Model::Ordered {
            // under Ordered the rename is durable at once: the lost write alone is to blame
            assert_eq!(v.blame.len(), 1, "{v}");
            assert!(v.message.contains("holds \"\""), "{}", v.message);
        }
        assert!(r.images_per_s > 0.0);
    }
}

#[test]
fn the_synced_variant_is_clean_under_both_models() {
    let steps = vec![
        Step::Replace { v: 1, synced: true },
        Step::Replace { v: 2, synced: true },
        Step::Replace { v: 3, synced: true },
    ];
    for model in Model::ALL {
        let r = explore(&ExploreConfig::new(model), &steps, run_step, check);
        assert!(r.is_clean(), "{r}");
        assert!(r.crash_points > 10 && r.images > r.crash_points, "{r}");
    }
}

#[test]
fn same_seed_same_report() {
    for model in Model::ALL {
        let mut cfg = ExploreConfig::new(model);
        cfg.seed = 0xfeed;
        cfg.random_images_per_point = 16;
        let a = explore(&cfg, &unsafe_steps(), run_step, check);
        let b = explore(&cfg, &unsafe_steps(), run_step, check);
        assert_eq!(format!("{:?}", a.violations), format!("{:?}", b.violations));
        assert_eq!((a.crash_points, a.images), (b.crash_points, b.images));
    }
}

#[test]
fn shrinking_drops_the_padding() {
    let mut steps = vec![Step::Pad(0), Step::Replace { v: 1, synced: true }];
    steps.extend((1..5).map(Step::Pad));
    steps.push(Step::Replace {
        v: 2,
        synced: false,
    });
    steps.extend((5..9).map(Step::Pad));
    for model in Model::ALL {
        let cfg = ExploreConfig::new(model);
        let min = shrink(&cfg, &steps, run_step, check);
        assert_eq!(
            min,
            vec![Step::Replace {
                v: 2,
                synced: false
            }],
            "{model}"
        );
    }
    // a clean workload is returned unchanged
    let clean = vec![Step::Pad(1), Step::Replace { v: 1, synced: true }];
    assert_eq!(
        shrink(&ExploreConfig::new(Model::Posix), &clean, run_step, check),
        clean
    );
}

#[test]
fn a_violation_replays_from_its_numbers() {
    let cfg = ExploreConfig::new(Model::Posix);
    let r = explore(&cfg, &unsafe_steps(), run_step, check);
    for v in &r.violations {
        let rep = replay_image(&cfg, &unsafe_steps(), run_step, v.crash_point, v.image).unwrap();
        assert_eq!(rep.image_desc, v.image_desc);
        let cx = CrashCtx {
            crash_point: v.crash_point,
            events: &rep.events,
            model: cfg.model(),
            seed: cfg.seed,
            image: v.image,
            op: rep.trace.last(),
            trace: &rep.trace,
        };
        assert_eq!(check(&rep.image, &cx), Err(v.message.clone()));
    }
    assert!(replay_image::<_, u8, _>(&cfg, &unsafe_steps(), run_step, 10_000, 0).is_err());
}

#[test]
fn a_panicking_checker_is_a_violation_not_an_abort() {
    let cfg = ExploreConfig::new(Model::Posix);
    let r = explore(
        &cfg,
        &unsafe_steps(),
        run_step,
        |img: &FaultFs, cx: &CrashCtx<'_, u8>| {
            if cx.crash_point > 3 {
                let _ = img.read_file("cfg").unwrap();
            }
            Ok(())
        },
    );
    assert!(r.violation_count > 0);
    let v = &r.violations[0];
    assert!(v.message.starts_with("panic at "), "{}", v.message);
    assert!(v.message.contains("explorer.rs"), "{}", v.message);
}

#[test]
fn progress_is_reported_per_crash_point() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut cfg = ExploreConfig::new(Model::Ordered);
    let sink = seen.clone();
    cfg.progress = Some(Arc::new(move |p| {
        sink.lock().unwrap().push(p.crash_points_done)
    }));
    let r = explore(&cfg, &unsafe_steps(), run_step, check);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), r.crash_points);
    assert_eq!(*seen, (1..=r.crash_points).collect::<Vec<_>>());
}

#[test]
fn a_failing_workload_is_reported_and_its_prefix_still_checked() {
    let cfg = ExploreConfig::new(Model::Posix);
    let r = explore(
        &cfg,
        &[1u8, 2, 3],
        |fs: &FaultFs, &i: &u8, _: &mut Journal<()>| {
            if i == 3 {
                panic!("store bug");
            }
            fs.create_dir(&format!("d{i}")).map_err(s)
        },
        |_: &FaultFs, _: &CrashCtx<'_, ()>| Ok(()),
    );
    assert!(r.workload_error.as_deref().unwrap().contains("store bug"));
    assert_eq!(r.crash_points, 3);
    assert!(!r.is_clean());
}

/// `explore_from` runs the workload on a copy of an existing filesystem: crash point 0 is that
/// filesystem itself, the start is left untouched, and what the workload then does unsafely is
/// found (here by a checker that knows the start held v1: it must never get worse than that).
#[test]
fn explore_from_starts_on_an_existing_image() {
    for model in Model::ALL {
        let live = FaultFs::new(model);
        let mut j = Journal::new();
        run_step(&live, &Step::Replace { v: 1, synced: true }, &mut j).unwrap();
        let start = live.crash();
        let (hash, ops) = (start.image_hash(), start.op_count());
        let at_zero = Mutex::new(Vec::new());
        let check_from = |img: &FaultFs, cx: &CrashCtx<'_, u8>| {
            if cx.crash_point == 0 {
                at_zero.lock().unwrap().push(img.image_hash());
            }
            let got = img.read_file("cfg").map_err(|e| e.to_string())?;
            if got == content(1) || got == content(2) {
                Ok(())
            } else {
                Err(format!("cfg holds {:?}", String::from_utf8_lossy(&got)))
            }
        };
        let cfg = ExploreConfig::new(model);
        let steps = [Step::Replace {
            v: 2,
            synced: false,
        }];
        let r = seqstore_fault_fs::explore_from(&cfg, &start, &steps, run_step, check_from);
        println!("{r}");
        assert!(r.workload_error.is_none(), "{r}");
        assert!(
            r.violation_count > 0,
            "{model}: the unsynced replace is not found"
        );
        assert_eq!(
            *at_zero.lock().unwrap(),
            vec![hash],
            "{model}: point 0 is the start"
        );
        assert_eq!((start.image_hash(), start.op_count()), (hash, ops));
        // a violation replays from its numbers on the same start
        let v = &r.violations[0];
        let rep = seqstore_fault_fs::replay_image_from(
            &cfg,
            &start,
            &steps,
            run_step,
            v.crash_point,
            v.image,
        )
        .unwrap();
        assert_eq!(rep.image_desc, v.image_desc);
        let cx = CrashCtx {
            crash_point: v.crash_point,
            events: &rep.events,
            model,
            seed: cfg.seed,
            image: v.image,
            op: rep.trace.last(),
            trace: &rep.trace,
        };
        assert_eq!(check_from(&rep.image, &cx), Err(v.message.clone()));
        // the synced variant from the same start is clean
        let safe = [Step::Replace { v: 2, synced: true }];
        let r = seqstore_fault_fs::explore_from(&cfg, &start, &safe, run_step, check_from);
        assert!(r.is_clean(), "{r}");
    }
    // a start recorded under another model is refused, not crashed by the wrong rules
    let start = FaultFs::new(Model::Posix);
    let cfg = ExploreConfig::new(Model::Ordered);
    let r = seqstore_fault_fs::explore_from(&cfg, &start, &[Step::Pad(1)], run_step, check);
    assert!(r.workload_error.is_some(), "{r}");
    assert_eq!(
        seqstore_fault_fs::replay_image_from::<_, u8, _>(
            &cfg,
            &start,
            &[Step::Pad(1)],
            run_step,
            0,
            0
        )
        .err(),
        Some(seqstore_fault_fs::Error::StartSettingsDiffer)
    );
}
