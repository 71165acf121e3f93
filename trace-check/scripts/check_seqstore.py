#!/usr/bin/env python3
"""The seqstore checker for `seqstore trace`: recovers the store in $IMAGE_DIR with the CLI
($SEQSTORE_BIN, default `seqstore`) and checks it against the marks in $MARKS_FILE
(`acked N`: message N was acknowledged durable; `purging N`: a purge of everything up to N
started, so those messages may be gone, all or none; `purged N`: it finished). Violations, printed on stdout with exit 1:
- recovery fails on an image that holds anything;
- the last sequence is below a marked one (the next append would reuse a sequence);
- an acknowledged message that no purge removed is missing."""
import json
import os
import subprocess
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


# the store's lock file (`LOCK`, `LOCK.*`) is never data: an image holding only it holds no store
if not [n for n in os.listdir(image) if n != "LOCK" and not n.startswith("LOCK.")]:
    if promised:
        fail(f"the store is gone but sequence {promised} was promised")
    sys.exit(0)
st = subprocess.run([bin_, "state", "--dir", image, "--json"], capture_output=True, text=True)
if st.returncode != 0:
    fail(f"recovery failed: {st.stderr.strip()}")
state = json.loads(st.stdout)
where = f"recovered first={state['first_seq']} last={state['last_seq']}"
if state["last_seq"] < promised:
    fail(f"{where}; expected last >= {promised} (the next append would reuse sequence {state['last_seq'] + 1})")
dump = subprocess.run([bin_, "dump", "--dir", image, "--json"], capture_output=True, text=True)
if dump.returncode != 0:
    fail(f"{where}; dump failed: {dump.stderr.strip()}")
present = {json.loads(l)["seq"] for l in dump.stdout.splitlines() if l.strip()}
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
