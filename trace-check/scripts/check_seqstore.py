#!/usr/bin/env python3
"""The seqstore checker for `seqstore trace`: recovers the store in $IMAGE_DIR with the CLI
($SEQSTORE_BIN, default `seqstore`) and checks it against the marks in $MARKS_FILE
(`acked N`: message N was acknowledged durable; `purging N`: a purge of everything up to N
started, so those messages may be gone, all or none; `purged N`: it finished). Violations, printed on stdout with exit 1:
- recovery fails on an image that holds anything;
- the last sequence is below a marked one (the next append would reuse a sequence);
- an acknowledged message that no purge removed is missing.

It runs once per crash image, so it imports only `os` and `sys` (json and subprocess would
double Python's start-up) and reads the CLI's plain output: `state` prints `NAME  VALUE`
lines, `dump` one message a line, its sequence first and tab-separated."""
import os
import sys

bin_ = os.environ.get("SEQSTORE_BIN", "seqstore")
image = os.environ["IMAGE_DIR"]
acked, purging, purged = [], [], []
with open(os.environ["MARKS_FILE"]) as f:
    for line in f:
        kind, _, n = line.strip().partition(" ")
        {"acked": acked, "purging": purging, "purged": purged}[kind].append(int(n))
promised = max(acked + purged, default=0)


def fail(msg):
    print(msg)
    sys.exit(1)


def run(*args):
    """(exit code, stdout, stderr) of `seqstore ARGS --dir IMAGE`."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.posix_spawnp(
        bin_,
        [bin_, *args, "--dir", image],
        os.environ,
        file_actions=[
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
            (os.POSIX_SPAWN_CLOSE, out_r),
            (os.POSIX_SPAWN_CLOSE, err_r),
        ],
    )
    os.close(out_w)
    os.close(err_w)
    streams = []
    for fd in (out_r, err_r):
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        os.close(fd)
        streams.append(b"".join(chunks).decode(errors="replace"))
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), streams[0], streams[1]


# the store's lock file (`LOCK`, `LOCK.*`) is never data: an image holding only it holds no store
if not [n for n in os.listdir(image) if n != "LOCK" and not n.startswith("LOCK.")]:
    if promised:
        fail(f"the store is gone but sequence {promised} was promised")
    sys.exit(0)
code, out, err = run("state")
if code != 0:
    fail(f"recovery failed: {err.strip()}")
state = {}
for line in out.splitlines():
    name, _, value = line.rpartition(" ")
    state[name.strip()] = int(value)
first, last = state["first seq"], state["last seq"]
where = f"recovered first={first} last={last}"
if last < promised:
    fail(f"{where}; expected last >= {promised} (the next append would reuse sequence {last + 1})")
code, out, err = run("dump")
if code != 0:
    fail(f"{where}; dump failed: {err.strip()}")
present = {int(l.partition("\t")[0]) for l in out.splitlines() if l.strip()}
done = max(purged, default=0)
floor = max(purging + purged, default=0)
for seq in acked:
    if seq > floor and seq not in present:
        fail(f"{where}; acknowledged message {seq} is missing")
# a purge in flight: the old state or the new one, never a mix
old = [s for s in acked if done < s <= floor]
kept = [s for s in old if s in present]
if kept and len(kept) < len(old):
    fail(f"{where}; {len(kept)} of {len(old)} messages of the purge in flight survived")
sys.exit(0)
