//! seqstore's examples, each a program in this folder:
//!
//! | example | what it shows |
//! |---|---|
//! | `embed` | a store on a real directory with the wall clock, shared by threads (`SharedStore`) |
//! | `consumers` | a durable consumer: deliver, ack, and the ack floor after a reopen |
//! | `encrypted` | an encrypted store, and what opening it without its key says |
//! | `sandbox` | the same store run inside the wasm sandbox (`GuestStore`) |
//! | `wal_crash_test` | crash-testing your own code: a small write-ahead log on the `Fs` trait, explored by fault-fs, its missing fsync found and blamed |
//!
//! Run one with `cargo run -p seqstore-examples --example NAME`; `cargo test --workspace`
//! runs them all.
#![forbid(unsafe_code)]
