//! fault-fs behaves like a real filesystem as long as nothing crashes.
seqstore_core::fs_conformance_tests!(|| (
    (),
    seqstore_fault_fs::FaultFs::new(seqstore_fault_fs::Model::Posix)
));

mod ordered {
    seqstore_core::fs_conformance_tests!(|| (
        (),
        seqstore_fault_fs::FaultFs::new(seqstore_fault_fs::Model::Ordered)
    ));
}
