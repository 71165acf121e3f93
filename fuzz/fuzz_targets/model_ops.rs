#![no_main]
//! Fuzz target `model_ops`: the body is `seqstore_crash_matrix::robust::fuzz_model_ops` (see tests/src/lib.rs).

#[global_allocator]
static ALLOC: seqstore_fuzz::CappedAlloc = seqstore_fuzz::CappedAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    seqstore_crash_matrix::robust::fuzz_model_ops(data);
});
