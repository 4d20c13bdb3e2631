"""Every Store backend passes the same tests (DESIGN.md: one conformance suite, memory is the
reference): ``sessiontree.testing.conformance`` over memory, JSONL, SQLite, PostgreSQL, Redis
and Redis Cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiontree import JsonlStore, MemoryStore
from sessiontree.testing.conformance import *  # noqa: F403 (collects the conformance tests)

from .backends import BACKENDS, redis_store_url


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    kind = request.param
    backend: Any
    if kind == "memory":
        backend = MemoryStore.open()
    elif kind == "jsonl":
        backend = JsonlStore.open(tmp_path / "sessions")
    elif kind == "sqlite":
        from sessiontree.stores.sqlite import SqliteStore

        backend = SqliteStore.open(tmp_path / "sessions.db")
    elif kind.startswith("redis"):
        from sessiontree.stores.redis import RedisStore

        backend = RedisStore.from_url(redis_store_url(request, kind))
    else:
        from sessiontree.stores.postgres import PostgresStore

        backend = PostgresStore.open(request.getfixturevalue("fresh_postgres_url"))
    yield backend
    backend.close()


def test_async_stores_are_made_with_open_too(tmp_path: Path, postgres_url: str) -> None:
    """Issue 20 point 8: one constructor name, ``open``, on every store."""
    import asyncio

    from sessiontree import SessionHeader
    from sessiontree.stores.postgres import AsyncPostgresStore
    from sessiontree.stores.sqlite import AsyncSqliteStore

    async def both() -> list[int]:
        counts = []
        async with AsyncSqliteStore.open(tmp_path / "a.db") as lite, \
                AsyncPostgresStore.open(postgres_url) as pg:
            for store in (lite, pg):
                await store.create(SessionHeader(id="6f1d2c1e-2b7a-4f57-9a57-3e0c4b8f5a11",
                                                 timestamp="2026-01-01T00:00:00.000Z", cwd="/x"))
                counts.append(len(await store.read("6f1d2c1e-2b7a-4f57-9a57-3e0c4b8f5a11")))
                await store.delete("6f1d2c1e-2b7a-4f57-9a57-3e0c4b8f5a11")
        connected = await AsyncPostgresStore.from_url(postgres_url).open()  # as it always was
        await connected.aclose()
        return counts

    assert asyncio.run(both()) == [0, 0]
