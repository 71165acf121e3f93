//! Properties of the crash model over random operation sequences (proptest persists failing
//! cases in `model_props.proptest-regressions` and replays them first).

use crate::common::{op, Op, Side};
use proptest::prelude::*;
use seqstore_core::fs::{Fs, FsFile, OpenOptions};
use seqstore_fault_fs::{FaultFs, Model};

fn model() -> impl Strategy<Value = Model> {
    prop_oneof![Just(Model::Posix), Just(Model::Ordered)]
}

fn images(fs: &FaultFs) -> Vec<FaultFs> {
    let mut v = fs.crash_images(100_000);
    v.extend((0..16).map(|s| fs.crash_seeded(s)));
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Keeping every unsynced operation reproduces the live state exactly: replaying the logs
    /// in order never trips the skip rule when nothing was dropped.
    #[test]
    fn keeping_everything_reproduces_the_live_state(
        ops in prop::collection::vec(op(), 1..60),
        model in model(),
    ) {
        let mut s = Side::new(FaultFs::new(model));
        for op in &ops {
            s.apply(op);
        }
        let live = s.fs.dump();
        prop_assert!(s.fs.crash_images(100_000).iter().any(|i| i.dump() == live), "{}", live);
    }

    /// Under Ordered every image has exactly the live namespace.
    #[test]
    fn ordered_images_keep_the_whole_namespace(ops in prop::collection::vec(op(), 1..60)) {
        let mut s = Side::new(FaultFs::new(Model::Ordered));
        for op in &ops {
            s.apply(op);
        }
        let live = s.fs.list_tree();
        for img in images(&s.fs) {
            prop_assert_eq!(img.list_tree(), live.clone());
        }
    }

    /// Once every reachable file and directory is synced, every image is the live state.
    /// (`remove_dir_all` and renames onto directories are left out: they can leave changes
    /// waiting on a directory no path reaches any more, which no `sync_dir` can then reach.)
    #[test]
    fn after_syncing_everything_every_image_is_the_live_state(
        ops in prop::collection::vec(op(), 1..60),
        model in model(),
    ) {
        let mut s = Side::new(FaultFs::new(model));
        for op in &ops {
            match op {
                Op::RemoveDirAll(_) => continue,
                Op::Rename(_, to) if s.fs.read_dir(to).is_ok() => continue,
                _ => {}
            }
            s.apply(op);
        }
        for p in s.fs.list_tree() {
            match p.strip_suffix('/') {
                Some(dir) => s.fs.sync_dir(dir).unwrap(),
                None => s.fs.open(&p, OpenOptions::read_only()).unwrap().sync_all().unwrap(),
            }
        }
        s.fs.sync_dir("").unwrap();
        let live = s.fs.dump();
        for img in images(&s.fs) {
            prop_assert_eq!(img.dump(), live.clone());
        }
    }
}
