//! store-core's `Fs` conformance suite on a fresh temporary directory per case.
//!
//! Also builds for wasm32-wasip2, where `std::env::temp_dir` panics: there the scratch
//! directories go below `/tmp`, which the runner must preopen.

/// A fresh temporary directory.
fn scratch() -> tempfile::TempDir {
    if cfg!(target_os = "wasi") {
        tempfile::tempdir_in("/tmp").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

mod conformance {
    seqstore_core::fs_conformance_tests!(|| {
        let d = super::scratch();
        let fs = seqstore_fs::HostFs::open(d.path()).unwrap();
        (d, fs)
    });
}
