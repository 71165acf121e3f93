//! Output into a pipe that closes early (`seqstore … | head -1`) ends the command quietly: no
//! panic message on stderr.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn a_closed_pipe_ends_the_command_without_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_seqstore"))
        .args(["crashcheck", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn seqstore");
    // read nothing and close: its first write (the JSON, after the run) finds no reader
    drop(child.stdout.take());
    let mut stderr = String::new();
    for line in BufReader::new(child.stderr.take().expect("stderr")).lines() {
        stderr.push_str(&line.expect("stderr line"));
        stderr.push('\n');
    }
    let status = child.wait().expect("wait");
    assert!(!stderr.contains("panicked"), "{status:?}\n{stderr}");
    assert!(
        !status.success(),
        "a write to a closed pipe cannot succeed: {status:?}"
    );
}
