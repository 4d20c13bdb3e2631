"""Every Store backend passes the same tests (DESIGN.md: one conformance suite, memory is the
reference): ``sessiontree.testing.conformance`` over memory, JSONL, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiontree import JsonlStore, MemoryStore
from sessiontree.testing.conformance import *  # noqa: F403 (collects the conformance tests)

from .backends import BACKENDS


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    kind = request.param
    backend: Any
    if kind == "memory":
        backend = MemoryStore()
    elif kind == "jsonl":
        backend = JsonlStore(tmp_path / "sessions")
    elif kind == "sqlite":
        from sessiontree.stores.sqlite import SqliteStore

        backend = SqliteStore.open(tmp_path / "sessions.db")
    else:
        from sessiontree.stores.postgres import PostgresStore

        backend = PostgresStore.from_url(request.getfixturevalue("fresh_postgres_url"))
    yield backend
    backend.close()
