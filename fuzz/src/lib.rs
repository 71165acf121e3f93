//! Support for the fuzz targets: an allocator that refuses any single allocation above a
//! bound, so that a hostile length field (say 4 GiB) that reached an allocation aborts the run
//! (libFuzzer reports the abort as a crash) instead of passing unnoticed or exhausting memory.
//! libFuzzer's own `-malloc_limit_mb` needs a sanitizer's malloc hooks, which `--sanitizer none`
//! builds do not have.

use std::alloc::{GlobalAlloc, Layout, System};

/// The largest single allocation a target may make: far above anything the store needs for the
/// small inputs the targets build (≤ 64 KiB files), far below a length field taken on trust.
pub const MAX_ALLOC: usize = 64 << 20;

/// `System`, refusing allocations above [`MAX_ALLOC`] (the refusal aborts through
/// `handle_alloc_error`, printing "memory allocation of N bytes failed").
pub struct CappedAlloc;

// Unsafe because GlobalAlloc is an unsafe trait: a capped allocator has no safe way to exist.
// SAFETY: forwards to `System`; a refused request returns null, which GlobalAlloc allows.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CappedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOC {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOC {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > MAX_ALLOC {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
