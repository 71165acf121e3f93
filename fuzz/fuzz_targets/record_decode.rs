#![no_main]
//! Fuzz target `record_decode`: the body is `seqstore_crash_matrix::robust::fuzz_record_decode` (see tests/src/lib.rs).

#[global_allocator]
static ALLOC: seqstore_fuzz::CappedAlloc = seqstore_fuzz::CappedAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    seqstore_crash_matrix::robust::fuzz_record_decode(data);
});
