//! Errors a new user meets, said once: each layer (the CLI's context, store-core's
//! `Error::Io`, host-fs's refusal) adds its own part to the message, and a confinement refusal
//! names what was refused (a symlink leading out of the store directory) instead of the
//! operation's raw errno. Natively (cap-std) and with `--guest` (WASI's filesystem in the
//! wasm sandbox), the same message.

mod common;

use common::{ok, seqstore};
use std::path::Path;

/// The one line `seqstore` printed on standard error, with the exit code 1 of a store error
/// (2 is a usage error: seqstore_commands' convention).
fn failure(dir: &Path, args: &[&str]) -> String {
    let out = seqstore(dir, args);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
    String::from_utf8(out.stderr).expect("utf-8")
}

/// The CLI's flags and its context's suffix, natively and in the guest.
const BACKENDS: [(&[&str], &str); 2] = [(&[], ""), (&["--guest"], " (guest)")];

#[test]
fn a_block_that_is_a_symlink_out_of_the_store_is_refused_by_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (store, outside) = (tmp.path().join("store"), tmp.path().join("outside.blk"));
    ok(&store, &["append", "--subject", "a", "--data", "x"]);
    std::fs::write(&outside, b"not a block").expect("write outside");
    std::fs::remove_file(store.join("msgs/1.blk")).expect("rm block");
    std::os::unix::fs::symlink(&outside, store.join("msgs/1.blk")).expect("symlink");
    for (flags, suffix) in BACKENDS {
        let args: Vec<&str> = ["state"].iter().chain(flags).copied().collect();
        assert_eq!(
            failure(&store, &args),
            format!(
                "seqstore: recovering the store in {}{suffix}: open \"msgs/1.blk\": refused: \
                 \"msgs/1.blk\" is a symlink leading outside the store directory\n",
                store.display()
            )
        );
    }
    assert_eq!(
        std::fs::read(&outside).expect("read outside"),
        b"not a block"
    );
}

#[test]
fn a_msgs_directory_that_is_a_symlink_out_of_the_store_is_refused_by_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (store, outside) = (tmp.path().join("store"), tmp.path().join("outside"));
    std::fs::create_dir(&store).expect("mkdir store");
    std::fs::create_dir(&outside).expect("mkdir outside");
    std::os::unix::fs::symlink(&outside, store.join("msgs")).expect("symlink");
    for (flags, suffix) in BACKENDS {
        let append = ["append", "--subject", "a", "--data", "x"];
        let args: Vec<&str> = append.iter().chain(flags).copied().collect();
        assert_eq!(
            failure(&store, &args),
            format!(
                "seqstore: recovering the store in {}{suffix}: create_dir \"msgs\": refused: \
                 \"msgs\" is a symlink leading outside the store directory\n",
                store.display()
            )
        );
    }
    let written: Vec<_> = std::fs::read_dir(&outside).expect("ls outside").collect();
    assert!(written.is_empty(), "wrote outside the store: {written:?}");
}

#[test]
fn a_missing_directory_is_named_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("missing");
    assert_eq!(
        failure(&missing, &["verify"]),
        format!(
            "seqstore: open root {:?}: No such file or directory (os error 2)\n",
            missing.display().to_string()
        )
    );
}
