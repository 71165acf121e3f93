//! A WASI preview-1 program (the subjects built for `wasm32-wasip1`: a core module) runs
//! through wasmtime's preview-1 adapter, made a component by `Program::new`. The finding about
//! the platform: preview 1 cannot fsync a directory (the adapter answers EBADF), so an atomic
//! replace done right fails outright, and the one that skips the directory fsync loses its
//! rename under `posix`, as its preview-2 build does.

use crate::common::{program, subjects_wasm_p1};
use seqstore_fault_fs::{FaultFs, Model};
use seqstore_trace::session::{check_capture, CheckConfig};
use seqstore_wasi_trace::{Program, Recorder, RunConfig, WasmChecker};

#[test]
fn a_preview1_module_is_adapted_and_cannot_fsync_a_directory() {
    let Some(p1) = subjects_wasm_p1("a_preview1_module_is_adapted_and_cannot_fsync_a_directory")
    else {
        return;
    };
    let bytes = std::fs::read(p1).unwrap();
    assert_eq!(
        &bytes[4..8],
        &[1, 0, 0, 0],
        "a core module, not a component"
    );
    let p1 = Program::new(&bytes).expect("the adapter makes it a component");

    let rec = Recorder::new(FaultFs::new(Model::Posix));
    let out = rec
        .run(&p1, &RunConfig::with_args(&["replace", "good", "2"]))
        .unwrap();
    let err = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.code, 0, "a directory fsync succeeded under preview 1");
    assert!(err.contains("Bad file descriptor"), "{err}");

    let checker = WasmChecker::new(program().clone(), RunConfig::with_args(&["check-replace"]));
    for (model, clean) in [(Model::Posix, false), (Model::Ordered, true)] {
        let rec = Recorder::new(FaultFs::new(model));
        let out = rec
            .run(&p1, &RunConfig::with_args(&["replace", "no-dir-sync", "3"]))
            .unwrap();
        assert_eq!(out.code, 0, "{}", String::from_utf8_lossy(&out.stderr));
        let r = check_capture(
            rec.start(),
            &rec.capture(),
            &checker,
            &CheckConfig::new(model),
        )
        .unwrap();
        eprintln!(
            "preview 1, replace without the directory fsync, {model}: {} crash points, {} violations",
            r.crash_points, r.violations
        );
        assert_eq!(r.violations == 0, clean, "preview 1 under {model}");
    }
}
