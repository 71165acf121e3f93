//! Fuzz target `restore_archive`: `seqstore_core::restore` of arbitrary bytes on
//! fault-fs. The seed corpus holds real snapshots, so mutations reach past the tar framing
//! into the manifest and the blocks.

use seqstore_core::{restore, Config, Error, Store};
use seqstore_fault_fs::{FaultFs, Model};

/// Restore never panics; a refused archive is `BadSnapshot` and leaves the target empty; an
/// accepted one opens (again) to the manifest's state, with every message readable.
pub fn fuzz_restore_archive(data: &[u8]) {
    let fs = FaultFs::new(Model::Posix);
    let cfg = Config::default().with_block_size(1024);
    match restore(fs.clone(), cfg.clone(), data) {
        Ok((store, info)) => {
            store.close().expect("close the restored store");
            let mut s = Store::open(fs, cfg).expect("reopen the restored store");
            assert_eq!(
                s.state(),
                info.state,
                "reopened state differs from the manifest"
            );
            let st = s.state();
            if st.msgs > 0 {
                let mut live = 0;
                for seq in st.first_seq..=st.last_seq {
                    match s.get(seq) {
                        Ok(_) => live += 1,
                        Err(Error::NotFound { .. }) => {}
                        Err(e) => panic!("get {seq} of a restored store: {e}"),
                    }
                }
                assert_eq!(live, st.msgs, "readable messages");
            }
        }
        Err(Error::BadSnapshot { .. }) => {
            let left = fs.list_tree();
            assert!(left.is_empty(), "a refused restore left {left:?}");
        }
        Err(e) => panic!("restore: not a BadSnapshot: {e}"),
    }
}
