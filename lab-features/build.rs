//! Empty: cargo resolves `[build-dependencies]` (the host's features) only for a package with a
//! build script.
fn main() {}
