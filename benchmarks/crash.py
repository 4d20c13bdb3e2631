"""The full crash run: at least 200 SIGKILLs per backend while appending, and kills during every
rewrite (schema migration, file migration, repair, copy) and while three copies race into one
store; then the attacks on files (sessiontree.testing.attacks: pi appending without a lock while
files are migrated and repaired, a full disk on a real tmpfs, a folder of hostile files), as
many rounds each as rewrite kills; prints the kills, the rounds and any failure.

    .venv/bin/python benchmarks/crash.py [--backends jsonl,sqlite,postgres] [--kills 200]
                                         [--rewrite-kills 50] [--postgres DSN]

The test suite runs the same harness with a few kills (tests/test_crash.py). Exit status 1
when a check failed.
"""

from __future__ import annotations

import os
import sys

from sessiontree.testing.crash import main

if __name__ == "__main__":
    defaults = ["--backends", "jsonl,sqlite,postgres" if os.environ.get(
        "SESSIONTREE_TEST_POSTGRES") else "jsonl,sqlite", "--kills", "200", "--rewrite-kills", "50"]
    sys.exit(main([*defaults, *sys.argv[1:]]))
