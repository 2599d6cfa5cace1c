#!/usr/bin/env python3
# What one SQLite commit costs on a disk, with the store's settings (WAL,
# synchronous=NORMAL): N transactions of one row each (BEGIN IMMEDIATE,
# INSERT, COMMIT) into a table with an index, in a scratch file in DIR.
# The floor under each durable point of a run (docs/store.md).
#   bench/pipeline/sqlite_commit.py [DIR] [N]
import os
import sqlite3
import sys
import tempfile
import time

folder = sys.argv[1] if len(sys.argv) > 1 else "."
n = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
with tempfile.TemporaryDirectory(dir=folder) as scratch:
    db = sqlite3.connect(os.path.join(scratch, "commit.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, body TEXT)")
    db.execute("CREATE INDEX t_name ON t (name)")
    start = time.perf_counter()
    for i in range(n):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t (name, body) VALUES (?, ?)", (str(i), "x" * 200))
        db.execute("COMMIT")
    took = time.perf_counter() - start
    db.close()
print(f"{n} one-row commits in {folder}: {took * 1e6 / n:.1f} us each")
