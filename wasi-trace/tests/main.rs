//! Crash-checking WASI programs: the served filesystem against wasmtime-wasi, the subjects' verdicts.
//! Each module is one file of this directory, as its own binary was before; one binary
//! per crate links the dependencies once.

mod calls;
mod common;
mod preview1;
mod programs;
mod seqstore_guest;
mod sqlite;
