#!/usr/bin/env python3
"""The SQLite checker for `seqstore trace`: opens $IMAGE_DIR/db.sqlite (WAL recovery runs),
checks `PRAGMA integrity_check` and that every row marked `committed N` is there. A
violation (stdout, exit 1) otherwise; an absent database is fine if nothing was committed."""
import os
import sqlite3
import sys

image = os.environ["IMAGE_DIR"]
committed = []
with open(os.environ["MARKS_FILE"]) as f:
    for line in f:
        kind, _, n = line.strip().partition(" ")
        if kind == "committed":
            committed.append(int(n))
path = os.path.join(image, "db.sqlite")
if not os.path.exists(path):
    if committed:
        print(f"the database is gone after {len(committed)} commits")
        sys.exit(1)
    sys.exit(0)
try:
    db = sqlite3.connect(path)
    ok = db.execute("PRAGMA integrity_check").fetchone()[0]
    if ok != "ok":
        print(f"integrity_check: {ok}")
        sys.exit(1)
    have = set()
    if db.execute("SELECT count(*) FROM sqlite_master WHERE name='t'").fetchone()[0]:
        have = {r[0] for r in db.execute("SELECT id FROM t")}
except sqlite3.Error as e:
    print(f"sqlite error: {e}")
    sys.exit(1)
missing = [n for n in committed if n not in have]
if missing:
    print(f"committed rows missing: {missing} (have {sorted(have)})")
    sys.exit(1)
