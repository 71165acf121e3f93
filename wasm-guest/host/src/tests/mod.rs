//! The host crate's tests: equivalence with the native store, portability of the files,
//! the sandbox's limits, crash recovery on fault-fs, and the WASI command. They live inside
//! the crate (not in `tests/`) so they can load the test-hooks component, and so that the
//! components are compiled once for all of them (one test process).

mod cli;
mod common;
mod crash;
mod equivalence;
mod lock;
mod portability;
mod sandbox;
mod surface;

/// A `GuestStore` can move to another thread (a server hands stores to workers).
#[test]
fn guest_store_is_send() {
    fn send<T: Send>() {}
    send::<crate::GuestStore>();
    send::<crate::Error>();
}
