"""Session token and cost totals as pi 1.5.2 counts them (assistant messages, tool results with
usage, ``usage`` entries of any kind, compaction and branch summary usage; every branch), checked
against pi 1.5.2's own ``getUsageCostBreakdown``, and shown the same by ``list_sessions``,
``Session.listing()``, ``ls --json``, ``ops --json`` and browse's status line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from sessiontree import Session, list_sessions
from sessiontree.cli import cli
from sessiontree.cli.tui import BrowseApp
from sessiontree.testing.pi import run_node_script
from sessiontree.usage import UsageTotals, session_usage

from .test_browse import settle
from .test_listing import PROBE, pi15  # noqa: F401 - the fixture
from .test_pi_interop import Pi


def usage(tokens: int, cost: float) -> dict[str, Any]:
    return {"input": tokens, "output": tokens // 2, "cacheRead": tokens * 3, "cacheWrite": 7,
            "totalTokens": tokens * 4 + tokens // 2 + 7,
            "cost": {"input": cost / 2, "output": cost / 4, "cacheRead": cost / 8, "cacheWrite": cost / 8,
                     "total": cost}}


def every_kind(path: Path) -> Path:
    """A session with each kind of counted usage, on two branches, and usage-looking fields
    that do not count."""
    entries: list[dict[str, Any]] = []

    def add(entry_type: str, parent: str | None, **fields: Any) -> str:
        entry_id = f"e{len(entries):07d}"
        entries.append({"type": entry_type, "id": entry_id, "parentId": parent,
                        "timestamp": f"2026-11-01T00:00:{len(entries):02d}.000Z", **fields})
        return entry_id

    def assistant(parent: str, tokens: int, cost: float) -> str:
        return add("message", parent, message={
            "role": "assistant", "content": [{"type": "text", "text": "ok"}], "api": "x", "provider": "p",
            "model": "m", "usage": usage(tokens, cost), "stopReason": "stop", "timestamp": 1})

    root = add("message", None, message={"role": "user", "content": "hi", "timestamp": 1,
                                          "usage": usage(1000, 9.0)})  # a user's usage: not counted
    first = assistant(root, 120, 0.0123)
    warm = add("usage", first, kind="cache_warm", provider="p", model="m", usage=usage(50_000, 0.015))
    odd = add("usage", warm, kind="a-kind-pi-does-not-know", provider="p", model="n",
              usage=usage(33, 0.0001))
    tool = add("message", odd, message={"role": "toolResult", "toolCallId": "t", "toolName": "sub",
                                         "content": [{"type": "text", "text": "done"}], "isError": False,
                                         "timestamp": 1, "usage": usage(400, 0.2)})
    plain = add("message", tool, message={"role": "toolResult", "toolCallId": "u", "toolName": "ls",
                                           "content": [], "isError": False, "timestamp": 1})
    compaction = add("compaction", plain, summary="s", firstKeptEntryId=tool, tokensBefore=10,
                     usage=usage(900, 0.03))
    assistant(compaction, 70, 0.007)
    add("custom", compaction, customType="x", data={"usage": usage(10**6, 99.0)}, usage=usage(5, 5.0))
    side = add("branch_summary", first, fromId=first, summary="other way", usage=usage(250, 0.0025))
    assistant(side, 11, 1e-7)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in [
        {"type": "session", "version": 3, "id": "totals", "timestamp": "2026-11-01T00:00:00.000Z",
         "cwd": "/w"}, *entries]), "utf-8")
    return path


def as_pi_would(totals: UsageTotals) -> dict[str, Any]:
    return {"tokens": totals.tokens, "cost": totals.cost}


def test_totals_equal_pi_1_5s(tmp_path: Path, pi15: Pi, fresh_postgres_url: str) -> None:
    from sessiontree.transfer import copy_sessions

    path = every_kind(tmp_path / "folder" / "2026-11-01T00-00-00-000Z_totals.jsonl")
    breakdown = run_node_script(PROBE, str(pi15.modules), "usage", str(path))
    assert {row["key"] for row in breakdown} == {"p/m", "p/n", "Tools/summaries"}
    with Session.open(path) as session:
        totals = session_usage(session)
    assert totals.tokens == sum(row["tokens"] for row in breakdown)
    assert totals.cost == pytest.approx(sum(row["cost"] for row in breakdown), rel=1e-12)
    assert totals.footer() == f"\u219152k \u219326k R155k W56 ${totals.cost:.3f}"
    # the same totals in every store
    for url in (f"sqlite:///{tmp_path / 'store.db'}", fresh_postgres_url):
        copy_sessions(str(path), url)
        with Session.open(f"{url}#totals") as stored:
            assert session_usage(stored) == totals
    # in the listing of the folder and of the file, and in ls --json and ops --json
    (row,) = list_sessions(path.parent, index=False)
    assert row.usage == totals == list_sessions(path.parent)[0].usage == list_sessions(path.parent)[0].usage
    with Session.open(path) as session:
        assert session.listing().usage == totals
    listed = json.loads(CliRunner().invoke(cli, ["ls", str(path.parent), "--json"]).output)
    assert listed[0]["usage"] == {"input": totals.input, "output": totals.output,
                                  "cache_read": totals.cache_read, "cache_write": totals.cache_write,
                                  "cost": totals.cost}
    ops = json.loads(CliRunner().invoke(cli, ["ops", str(path), "--json"]).output)
    assert ops["sessionUsage"]["tokens"] == totals.tokens and ops["sessionUsage"]["cost"] == totals.cost


def test_browse_shows_the_session_totals(tmp_path: Path) -> None:
    path = every_kind(tmp_path / "s.jsonl")
    with Session.open(path) as session:
        footer = session_usage(session).footer()

    async def main() -> str:
        app = BrowseApp(str(path))
        async with app.run_test(size=(160, 30)) as pilot:
            await settle(app, pilot)
            return str(app.query_one("#status").render())

    status = asyncio.run(main())
    assert status.endswith(f" · {footer}") and "$0.267" in status
    assert "\u2191" in footer and "\u2193" in footer


# -- the stores' listings: the same totals as the folder's (issue 16 point 5) ----------------

STORE_BACKENDS = ["sqlite", "postgres", "redis", "redis-cluster"]


def odd_values(folder: Path) -> None:
    """A session whose totals no BIGINT column holds (a store lists them all the same), and
    one whose cost is beyond the doubles (Infinity in pi; ``null`` in JSON, as JSON.stringify
    writes it)."""
    folder.mkdir(parents=True, exist_ok=True)
    for session_id, usages in (
            ("odd-totals", [{"input": 2**70, "output": "12", "cacheRead": 1.9,
                             "cost": {"total": "1"}}, usage(3, 0.5)]),
            ("inf-cost", [usage(0, 0.5), {"input": 0, "cost": {"total": 10**400}},
                          usage(0, 0.25)])):
        header = {"type": "session", "version": 3, "id": session_id,
                  "timestamp": "2026-11-02T00:00:00.000Z", "cwd": "/w"}
        entries: list[dict[str, Any]] = [
            {"type": "message", "id": "a", "parentId": None,
             "timestamp": "2026-11-02T00:00:01.000Z",
             "message": {"role": "user", "content": "hi", "timestamp": 1}}]
        for n, counted in enumerate(usages):
            entries.append({"type": "usage", "id": f"u{n}", "parentId": entries[-1]["id"],
                            "timestamp": f"2026-11-02T00:00:0{n + 2}.000Z", "kind": "x",
                            "provider": "p", "model": "m", "usage": counted})
        (folder / f"2026-11-02T00-00-00-000Z_{session_id}.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in [header, *entries]), "utf-8")


def store_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    if kind == "postgres":
        return str(request.getfixturevalue("fresh_postgres_url"))
    from .backends import redis_store_url

    return redis_store_url(request, kind)


def listed(location: str) -> list[dict[str, Any]]:
    """``ls LOCATION --json``'s rows, each without its path (a file's or a URL's), by id."""
    result = CliRunner().invoke(cli, ["ls", location, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    return sorted(({k: v for k, v in row.items() if k != "path"} for row in rows),
                  key=lambda row: row["id"])


def as_rows(listings: list[Any]) -> list[dict[str, Any]]:
    """Listing rows as ``ls --json`` writes them (an infinite cost is ``null``), by id."""
    from sessiontree import _json

    return sorted(({k: v for k, v in row.items() if k != "path"}
                   for row in json.loads(_json.dumps(listings))), key=lambda row: row["id"])


@pytest.mark.parametrize("kind", STORE_BACKENDS)
def test_store_listings_carry_the_folders_totals(kind: str, request: pytest.FixtureRequest,
                                                 tmp_path: Path) -> None:
    from sessiontree import SessionHeader
    from sessiontree.redact import purge, redact
    from sessiontree.stores.url import open_store
    from sessiontree.transfer import copy_sessions

    folder = tmp_path / "folder"
    every_kind(folder / "2026-11-01T00-00-00-000Z_totals.jsonl")
    odd_values(folder)
    expected = listed(str(folder))
    assert [row["id"] for row in expected] == ["inf-cost", "odd-totals", "totals"]
    assert [row["usage"]["input"] for row in expected] == [0, 2**70 + 3, 51_784]
    assert expected[0]["usage"]["cost"] is None and expected[1]["usage"]["cost"] == 0.5
    (folder_totals,) = [row.usage for row in list_sessions(folder) if row.id == "totals"]
    url = store_url(kind, request, tmp_path)
    copy_sessions(str(folder), url)  # whole sessions at once
    assert listed(url) == expected
    with open_store(url) as store:
        assert as_rows(store.list_sessions()) == expected
        if kind in ("sqlite", "postgres"):  # kept in the row, or (beyond BIGINT) counted
            with store._reading() as conn:
                kept = dict(conn.execute("SELECT session_id, usage_input FROM "
                                         "sessiontree_sessions").fetchall())
            assert kept == {"totals": 51_784, "odd-totals": None, "inf-cost": 0}
        else:  # in the session's hash, or (beyond 64 bits) counted
            assert kept_in_redis(store, "totals") == b"51784"
            assert kept_in_redis(store, "odd-totals") is None
            assert kept_in_redis(store, "inf-cost") == b"0"
        if kind == "postgres":
            assert as_rows(asyncio.run(async_listing(url))) == expected
        with Session.open(f"{url}#totals") as stored:
            assert stored.listing().usage == folder_totals
        # entry by entry, as appends come
        lines = (folder / "2026-11-01T00-00-00-000Z_totals.jsonl").read_text().splitlines()
        store.create(SessionHeader(id="appended", timestamp="2026-11-03T00:00:00.000Z", cwd="/w"))
        for line in lines[1:]:
            store.append("appended", [json.loads(line)])
        (row,) = [r for r in store.list_sessions() if r.id == "appended"]
        assert row.usage == folder_totals
    # a purge rewrites an assistant message's line in place: counted again, its usage kept
    with Session.open(f"{url}#appended") as session:
        assert session.leaf_id == "e0000010" and "e0000001" in session.path_ids("e0000010")
        redact(session, "e0000001", None)
    purge(f"{url}#appended", "e0000001")
    with open_store(url) as store:
        with Session(store.open_log("appended")) as session:
            assert b'"text":"ok"' not in session.raw_line("e0000001")
        (row,) = [r for r in store.list_sessions() if r.id == "appended"]
        assert row.usage == folder_totals


def kept_in_redis(store: Any, session_id: str) -> bytes | None:
    """The input token total a Redis session's hash keeps."""
    return store._client.hget(store.keys(session_id)[0], "usage_input")  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_redis_sessions_stored_before_the_totals_get_them(kind: str, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    """A session whose hash has no totals (as earlier versions stored it) is counted from its
    lines when listed; a writable store keeps what it counted, and appends add to it."""
    from sessiontree.stores.redis import RedisStore
    from sessiontree.transfer import copy_sessions

    folder = tmp_path / "folder"
    every_kind(folder / "2026-11-01T00-00-00-000Z_totals.jsonl")
    odd_values(folder)
    expected = listed(str(folder))
    url = store_url(kind, request, tmp_path)
    copy_sessions(str(folder), url)
    with RedisStore.from_url(url) as store:
        fields = ("usage_input", "usage_output", "usage_cache_read", "usage_cache_write",
                  "usage_cost")
        store._client.hdel(store.keys("totals")[0], *fields)
        with RedisStore.from_url(url, read_only=True) as reader:
            assert as_rows(reader.list_sessions()) == expected
        assert kept_in_redis(store, "totals") is None  # a reader writes nothing
        assert listed(url) == expected  # ls opens it read-only
        assert kept_in_redis(store, "totals") is None
        assert as_rows(store.list_sessions()) == expected
        assert kept_in_redis(store, "totals") == b"51784"  # kept from now on
        with Session.open(f"{url}#totals") as session:
            session.append_usage("warm", "p", "m", usage(10, 0.25))
        (row,) = [r for r in store.list_sessions() if r.id == "totals"]
        assert row.usage is not None and row.usage.input == 51_794
        with Session.open(f"{url}#totals") as session:
            assert row.usage == session_usage(session) == session.listing().usage
        assert kept_in_redis(store, "totals") == b"51794"


async def async_listing(url: str) -> list[Any]:
    """``AsyncPostgresStore.list_sessions`` of a store opened read-only."""
    from sessiontree.stores.postgres import AsyncPostgresStore

    async with AsyncPostgresStore.open(url, read_only=True) as store:
        return await store.list_sessions()


def _old_schema(conn: Any, driver: str, source: str) -> None:
    """Make an empty database (or schema) what a store of schema version 4 made: its DDL (the
    migrations that shipped, never edited since), its version rows, and the sessions and
    entries of ``source`` (the table prefix of a store holding them) in its columns."""
    from sessiontree.stores._sql_common import USAGE_VERSION, dialect

    conn.execute("CREATE TABLE sessiontree_migrations (v INTEGER PRIMARY KEY)")
    for version, script in enumerate(dialect(driver).migrations[:USAGE_VERSION - 1], start=1):
        for statement in script:
            conn.execute(statement)
        conn.execute(f"INSERT INTO sessiontree_migrations (v) VALUES ({version})")
    for table in ("sessiontree_sessions", "sessiontree_entries"):
        columns = ", ".join(row[0] for row in conn.execute(
            f"SELECT * FROM {table} LIMIT 0").description)
        conn.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {source}{table}")


@pytest.mark.parametrize("driver", ["sqlite", "postgres"])
def test_a_database_of_the_old_schema_lists_the_totals(driver: str, tmp_path: Path,
                                                      request: pytest.FixtureRequest) -> None:
    """Read-only, it is not migrated: the totals are counted from the lines; opened for
    writing, the migration adds the columns and counts every session stored before."""
    from sessiontree.stores.url import open_store
    from sessiontree.transfer import copy_sessions

    folder = tmp_path / "folder"
    every_kind(folder / "2026-11-01T00-00-00-000Z_totals.jsonl")
    odd_values(folder)
    expected = listed(str(folder))
    if driver == "sqlite":
        import sqlite3

        copy_sessions(str(folder), f"sqlite:///{tmp_path / 'new.db'}")
        url = f"sqlite:///{tmp_path / 'old.db'}"
        with sqlite3.connect(tmp_path / "old.db") as conn:
            conn.execute(f"ATTACH DATABASE '{tmp_path / 'new.db'}' AS new")
            _old_schema(conn, driver, "new.")
    else:
        import psycopg

        from .backends import postgres_dsn

        new = str(request.getfixturevalue("fresh_postgres_url"))
        copy_sessions(str(folder), new)
        old_schema = new.rpartition("schema=")[2] + "_old"
        url = new.rpartition("schema=")[0] + f"schema={old_schema}"
        request.addfinalizer(lambda: psycopg.connect(postgres_dsn(), autocommit=True).execute(
            f'DROP SCHEMA IF EXISTS "{old_schema}" CASCADE').connection.close())
        with psycopg.connect(postgres_dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{old_schema}"')
            conn.execute(f'SET search_path TO "{old_schema}"')
            _old_schema(conn, driver, f'"{new.rpartition("schema=")[2]}".')
    with open_store(url, read_only=True) as store:
        assert store.schema_version() == 4
        assert as_rows(store.list_sessions()) == expected
        with Session.open(f"{url}#totals") as stored:
            assert stored.listing().usage is not None
            assert msgspec.to_builtins(stored.listing().usage) == expected[2]["usage"]
    assert listed(url) == expected  # ls opens it read-only
    if driver == "postgres":
        assert as_rows(asyncio.run(async_listing(url))) == expected
    with open_store(url) as store:  # migrated
        assert store.schema_version() == len(store.dialect.migrations)
        with store._reading() as conn:
            kept = dict(conn.execute("SELECT session_id, usage_input FROM "
                                     "sessiontree_sessions").fetchall())
        assert kept == {"totals": 51_784, "odd-totals": None, "inf-cost": 0}
        assert as_rows(store.list_sessions()) == expected
    assert listed(url) == expected
