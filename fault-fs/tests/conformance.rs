//! fault-fs behaves like a real filesystem as long as nothing crashes.
store_core::fs_conformance_tests!(|| ((), fault_fs::FaultFs::new(fault_fs::Model::Posix)));

mod ordered {
    store_core::fs_conformance_tests!(|| ((), fault_fs::FaultFs::new(fault_fs::Model::Ordered)));
}
