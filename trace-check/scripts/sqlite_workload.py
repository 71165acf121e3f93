#!/usr/bin/env python3
"""The SQLite control for `seqstore trace`: WAL mode, 8 rows committed one transaction each,
each commit a mark `committed N`. Usage: sqlite_workload.py DIR full|off (synchronous=FULL
or OFF). locking_mode=EXCLUSIVE is set before WAL so that SQLite keeps its wal-index in heap
memory instead of a shared mmap of the -shm file (which a syscall trace cannot see)."""
import os
import sqlite3
import sys

d, mode = sys.argv[1], sys.argv[2]
marks = os.open(os.environ["SEQSTORE_TRACE_MARKS"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
db = sqlite3.connect(os.path.join(d, "db.sqlite"), isolation_level=None)
db.execute("PRAGMA locking_mode=EXCLUSIVE")
db.execute("PRAGMA journal_mode=WAL")
db.execute(f"PRAGMA synchronous={'FULL' if mode == 'full' else 'OFF'}")
db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
for i in range(1, 9):
    db.execute("BEGIN")
    db.execute("INSERT INTO t VALUES (?, ?)", (i, "row %d" % i))
    db.execute("COMMIT")
    os.write(marks, b"committed %d\n" % i)
db.close()
