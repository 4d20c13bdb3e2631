"""Sync and async twins give the same results: the stores (SQLite in a thread, PostgreSQL on
psycopg's async pool, the same statements) and AsyncSession over every backend."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sessiontree import (
    AsyncSession,
    DuplicateId,
    InvalidEntry,
    Session,
    SessionHeader,
    SessionNotFound,
    UserMessage,
)
from sessiontree._time import iso_now, uuid7
from sessiontree.testing.conformance import sample_entries
from sessiontree.testing.digests import context_digest


async def store_scenario(store: Any, awaited: bool) -> dict[str, Any]:
    """Create, append, read, list and delete through a store, sync or async."""

    async def call(name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(store, name)(*args, **kwargs)
        return await result if awaited else result

    a = SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/a")
    b = SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/b")
    await call("create", a)
    await call("create", b)
    entries = sample_entries()
    await call("append", b.id, entries)
    more = sample_entries("more")
    more[0] = type(more[0])(id=more[0].id, parent_id=entries[-1].id,
                            timestamp=more[0].timestamp, message=more[0].message)
    await call("append", b.id, more)
    with pytest.raises(DuplicateId):
        await call("append", b.id, entries[:1])
    orphan = sample_entries("orphan")[1:]
    with pytest.raises(InvalidEntry):
        await call("append", b.id, orphan)
    read = list(await call("read", b.id))
    listing = [(x.id, x.cwd, x.entry_count, x.message_count, x.first_message)
               for x in await call("list_sessions", cwd="/b")]
    everything = [x.id for x in await call("list_sessions")]
    await call("delete", a.id)
    with pytest.raises(SessionNotFound):
        await call("delete", a.id)
    after = [x.id for x in await call("list_sessions")]
    return {"read": [(e.id, e.parent_id) for e in read], "listing": listing,
            "everything": sorted(everything), "after": after, "ids": (a.id, b.id),
            "first": read[0].message.content}  # type: ignore[union-attr]


def normalized(result: dict[str, Any]) -> dict[str, Any]:
    """The same scenario with new ids: compare shapes, not ids."""
    a, b = result["ids"]
    names = {a: "A", b: "B"}
    return {"entries": len(result["read"]), "chained": [p is None for _, p in result["read"]],
            "listing": [(names[i], *rest) for i, *rest in result["listing"]],
            "everything": sorted(names[i] for i in result["everything"]),
            "after": [names[i] for i in result["after"]], "first": result["first"]}


def test_async_sqlite_store_matches_the_sync_one(tmp_path: Path) -> None:
    from sessiontree import AsyncSqliteStore, SqliteStore

    with SqliteStore.open(tmp_path / "sync.db") as sync:
        expected = asyncio.run(store_scenario(sync, False))

    async def run() -> dict[str, Any]:
        async with AsyncSqliteStore.open(tmp_path / "async.db") as store:
            return await store_scenario(store, True)

    assert normalized(asyncio.run(run())) == normalized(expected)


def test_async_postgres_store_matches_the_sync_one(fresh_postgres_url: str) -> None:
    from sessiontree import AsyncPostgresStore, PostgresStore

    with PostgresStore.from_url(fresh_postgres_url) as sync:
        expected = asyncio.run(store_scenario(sync, False))
        kept = sync.session_ids()
        for session_id in kept:  # an empty store again for the async run
            sync.delete(session_id)

    async def run() -> dict[str, Any]:
        async with AsyncPostgresStore.from_url(fresh_postgres_url) as store:
            result = await store_scenario(store, True)
            session_id = result["ids"][1]
            # what the async store wrote, the sync one reads (and the other way round)
            with PostgresStore.from_url(fresh_postgres_url) as sync:
                assert [e.id for e in sync.read(session_id)] == [i for i, _ in result["read"]]
                assert kept and not set(kept) & set(sync.session_ids())
            return result

    assert normalized(asyncio.run(run())) == normalized(expected)


def test_async_postgres_follow_wakes_on_notify(fresh_postgres_url: str) -> None:
    from sessiontree import AsyncPostgresStore

    async def run() -> list[bytes]:
        async with AsyncPostgresStore.from_url(fresh_postgres_url) as store:
            header = SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/f")
            await store.create(header)
            entries = sample_entries()

            async def write() -> None:
                await asyncio.sleep(0.2)
                await store.append(header.id, entries)

            writer = asyncio.create_task(write())
            seen = [line async for line in store.follow(header.id, idle_timeout=2.0)]
            await writer
            return seen

    lines = asyncio.run(run())
    assert len(lines) == 2 and b"second" in lines[1]  # both appended lines, in order


def digest(context: Any) -> str:
    """Roles and texts (the timestamps of new messages differ from run to run)."""
    return context_digest(context.to_builtins()["messages"])


def test_async_session_matches_the_session(backend: Any) -> None:
    def scenario_sync(session: Session) -> tuple[Any, ...]:
        first = session.append_message(UserMessage.of("q1"))
        session.append_message(UserMessage.of("a1"))
        session.branch(first)
        session.append_message(UserMessage.of("q2"))
        session.set_label(first, "start")
        session.set_name("named")
        return (len(session), digest(session.build_context()), session.label(first),
                len(session.leaves()), session.branch_points() == [first], session.name)

    expected = scenario_sync(backend.create(cwd="/p"))

    async def scenario_async() -> tuple[Any, ...]:
        async with AsyncSession(backend.create(cwd="/p")) as session:
            first = await session.append_message(UserMessage.of("q1"))
            await session.append_message(UserMessage.of("a1"))
            await session.branch(first)
            await session.append_message(UserMessage.of("q2"))
            await session.set_label(first, "start")
            await session.set_name("named")
            return (len(session), digest(await session.build_context()),
                    await session.label(first), len(await session.leaves()),
                    await session.branch_points() == [first], session.name)

    assert asyncio.run(scenario_async()) == expected
