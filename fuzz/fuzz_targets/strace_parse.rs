#![no_main]
//! Fuzz target `strace_parse`: the body is `seqstore_trace::fuzz::parse_and_replay` (any bytes
//! as an strace trace: parsed and replayed into fault-fs, or a typed error, never a panic).

#[global_allocator]
static ALLOC: seqstore_fuzz::CappedAlloc = seqstore_fuzz::CappedAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    seqstore_trace::fuzz::parse_and_replay(data);
});
