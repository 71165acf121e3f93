//! seqstore's command line is the `seqstore` binary (`main.rs`). This empty library exists
//! only so that the package can name itself as a dev-dependency with the crash lab's feature
//! (`seqstore = { path = ".", features = ["ablation"] }` in Cargo.toml): cargo takes a
//! dependency only on a package with a library, and that is how `cargo test` builds the binary
//! the tests run with `demo`, `crashcheck` and `--ablation`, while `cargo build` does not.
#![forbid(unsafe_code)]
