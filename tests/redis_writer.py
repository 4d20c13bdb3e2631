"""A writer process for the Redis Cluster tests: appends entries with known ids to one session,
one at a time, retrying each until it is stored, and records every acknowledged id (one line
each, flushed) and every error it met, until the stop file appears.

Usage: python redis_writer.py URL SESSION_ID NAME OUT_DIR [durable]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sessiontree.errors import (
    ConcurrentModification,
    InvalidEntry,
    SessionLockedError,
    StoreUnavailable,
)
from sessiontree.stores.redis import RedisStore


def main() -> None:
    url, session_id, name, out = sys.argv[1:5]
    durable = sys.argv[5:] == ["durable"]
    folder = Path(out)
    stop = folder / "stop"
    errors: dict[str, int] = {}
    acked = (folder / f"{name}.acked").open("a", buffering=1)
    store = None
    parent: str | None = None
    i = 0
    while not stop.exists():
        entry_id = f"{name}-{i:05d}"
        entry = {"type": "message", "id": entry_id, "parentId": parent,
                 "timestamp": "2025-01-01T00:00:00.000Z",
                 "message": {"role": "user", "content": f"{name} {i}", "timestamp": 1}}
        tried = False
        while True:
            try:
                if store is None:
                    store = RedisStore.from_url(url, durable=durable, timeout=2.0,
                                                lock_timeout=10.0)
                store.append(session_id, [entry])
                acked.write(entry_id + "\n")
                break
            except (StoreUnavailable, SessionLockedError, ConcurrentModification) as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                tried = True
                time.sleep(0.05)
            except InvalidEntry:  # a failed try had stored it: there, not acknowledged
                if not tried:
                    raise
                break
        parent = entry_id
        i += 1
    (folder / f"{name}.errors").write_text(
        "".join(f"{kind} {count}\n" for kind, count in sorted(errors.items())))


if __name__ == "__main__":
    main()
