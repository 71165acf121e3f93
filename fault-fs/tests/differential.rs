//! Differential test: random operation sequences give the same results on fault-fs (no
//! crash) and on host-fs over a temporary directory: equal `Ok` values, equal error kinds, and
//! equal trees at the end. proptest persists failing cases under `*.proptest-regressions` next
//! to this file and prints the minimal failing sequence; rerunning replays the persisted seed.

use crate::common::{op, Side};
use proptest::prelude::*;
use seqstore_fault_fs::{FaultFs, Model};

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fault_fs_matches_host_fs(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let mut host = Side::new(seqstore_fs::HostFs::open(dir.path()).unwrap());
        let mut fault = Side::new(FaultFs::new(Model::Posix));
        for (i, op) in ops.iter().enumerate() {
            let h = host.apply(op);
            let f = fault.apply(op);
            prop_assert_eq!(&h, &f, "op #{} {:?}", i, op);
        }
        prop_assert_eq!(host.tree(), fault.tree());
    }
}
