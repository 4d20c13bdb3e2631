"""Full-text search (issue 18 points 2 and 3): the same query gives the same hits on every
backend; the folder's index follows appends, rewrites and damage and is never trusted over the
files; the databases' indexes are written with the append, built for sessions stored before,
and rebuilt after a purge (real files, SQLite and PostgreSQL)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sessiontree import Session, SessionNotFound, UserMessage
from sessiontree._json import js_number
from sessiontree._search import InvalidQuery, parse_query
from sessiontree.cli import cli
from sessiontree.errors import InvalidLocation
from sessiontree.search import search_sessions
from sessiontree.stores import _redis_search
from sessiontree.stores._jsonl_search import _VERSION, index_path
from sessiontree.stores.jsonl import JsonlStore, default_session_dir
from sessiontree.stores.memory import MemoryStore
from sessiontree.stores.postgres import PostgresStore
from sessiontree.stores.redis import _RECENT_BYTES, RedisStore
from sessiontree.stores.sqlite import SqliteStore
from sessiontree.testing.generate import generate_folder
from sessiontree.transfer import copy_sessions

from .backends import beside_script, redis_store_url

PROJECT = "/home/dev/projects/tracker"


def _entry(entries: list[dict[str, Any]], kind: str, parent: str | None, **fields: Any) -> str:
    entry_id = f"e{len(entries):03d}"
    minute = len(entries)
    entries.append({"type": kind, "id": entry_id, "parentId": parent,
                    "timestamp": f"2026-03-01T10:{minute:02d}:00.000Z", **fields})
    return entry_id


def handmade(folder: Path) -> Path:
    """A branched session holding every kind of searchable text: messages, thinking, a tool
    call and its result, bash output, a branch summary, a compaction, a label; the first
    answer about the flaky test is on a branch that is no longer current."""
    entries: list[dict[str, Any]] = []

    def message(parent: str | None, role: str, content: Any, **more: Any) -> str:
        return _entry(entries, "message", parent, message={"role": role, "content": content,
                                                            "timestamp": 1772359200000, **more})

    root = message(None, "user", "Why does the flaky websocket test fail on CI?")
    old = message(root, "assistant", [{"type": "thinking", "thinking": "maybe a race in the "
                                       "reconnect timer"},
                                      {"type": "text", "text": "Try raising the heartbeat "
                                       "interval to 30 seconds."}])
    message(old, "user", "That did not help.")
    summary = _entry(entries, "branch_summary", root, fromId=old,
                     summary="Tried a longer heartbeat interval; the race stayed.")
    call = message(summary, "assistant", [{"type": "toolCall", "id": "c1", "name": "bash",
                                           "arguments": {"command": "pytest -k reconnect_timer "
                                                         "--count 50", "timeout": 100000.0,
                                                         "jitter": 1.5e-07}}])
    result = message(call, "toolResult", [{"type": "text", "text": "FAILED test_reconnect: "
                                           "ConnectionResetError after 12 runs"}],
                     toolCallId="c1", toolName="bash", isError=True)
    fixed = message(result, "assistant", "Fixed: the reconnect timer now awaits the close "
                    "handshake before retrying. Ünïcödé wörds stay searchable.")
    _entry(entries, "label", fixed, targetId=fixed, label="websocket fix")
    compacted = _entry(entries, "compaction", fixed, summary="The flaky websocket test was a "
                       "reconnect race; fixed by awaiting the close handshake.",
                       firstKeptEntryId=fixed, tokensBefore=5000)
    # combining marks (decomposed letters): a word ends at one, in every backend; a capital I
    # with a dot is a letter (its str.lower is "i" and a combining dot)
    message(compacted, "user", "Noted for the cafe\u0301 wiki: na\u0308ive a\u0307b checks. "
            "Took a TAX\u0130 to \u0130stanbul.")
    header = {"type": "session", "version": 3, "id": "0195a000-0000-7000-8000-00000000feed",
              "timestamp": "2026-03-01T09:59:00.000Z", "cwd": PROJECT}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "2026-03-01T09-59-00-000Z_0195a000-0000-7000-8000-00000000feed.jsonl"
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in [header, *entries])
    # numbers as JavaScript (1.5e-7) or a hand (1e5) writes them, not as Python does
    path.write_text(text.replace("100000.0", "1e5").replace("1.5e-07", "1.5e-7"), "utf-8")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A sessions root: the handmade session in its project folder, generated ones in another."""
    folder = tmp_path / "sessions"
    handmade(folder / default_session_dir(PROJECT, "").name)
    generate_folder(folder / default_session_dir("/srv/app", "").name, 6, seed=18,
                    min_entries=30, max_entries=200, cwds=("/srv/app",))
    return folder


QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("websocket", {}),
    ('"close handshake"', {}),
    ("heartbeat interval", {}),
    ("reconnect_timer", {}),  # a tool call's argument (two words, adjacent)
    ("1e5 7", {}),  # numbers as the file writes them (1e5, 1.5e-7), not as Python would
    ("connectionreseterror", {"role": "tool"}),
    ("websocket fix", {"role": "label"}),
    ("wörds ÜNÏCÖDÉ", {}),
    ("cafe wiki", {}),  # "cafe\u0301": a combining mark ends a word
    ("TAX\u0130", {}),  # a capital I with a dot: the word as written ("taxi" is another)
    ('"tax\u0130 to \u0130STANBUL"', {}),
    ('"ive a"', {}),
    ("error", {}),
    ("error", {"cwd": "/srv/app", "limit": 7}),
    ('"bad line" stack', {"role": "tool", "limit": 50}),
    ("test", {"since": _dt.datetime(2026, 3, 1, 10, 5, tzinfo=_dt.timezone.utc)}),
    ("nothing-like-this-anywhere", {}),
]


def _comparable(hits: list[Any]) -> list[dict[str, Any]]:
    rows = msgspec.to_builtins(hits)
    for row in rows:
        del row["session"]  # each backend's own address
    return rows


def test_every_backend_gives_the_same_hits(root: Path, tmp_path: Path, fresh_postgres_url: str,
                                           request: pytest.FixtureRequest) -> None:
    db = f"sqlite:///{tmp_path / 'search.db'}"
    assert copy_sessions(str(root), db).copied
    copy_sessions(db, fresh_postgres_url)
    redis_urls = {kind: redis_store_url(request, kind) for kind in ("redis", "redis-cluster")}
    for url in redis_urls.values():
        assert copy_sessions(db, url).copied
    memory = MemoryStore()
    with SqliteStore.open(tmp_path / "search.db") as source:
        for session_id in source.session_ids():
            header, lines = source.export_lines(session_id)
            memory.import_lines(header, list(lines))
    stores = {"jsonl": JsonlStore(root), "sqlite": SqliteStore.open(tmp_path / "search.db"),
              "postgres": PostgresStore.from_url(fresh_postgres_url), "memory": memory,
              **{kind: RedisStore.from_url(url) for kind, url in redis_urls.items()}}
    try:
        for query, options in QUERIES:
            results = {name: _comparable(store.search(query, **options))
                       for name, store in stores.items()}
            for name, found in results.items():
                assert found == results["jsonl"], (query, name)
            if query != "nothing-like-this-anywhere":
                assert results["jsonl"], query
    finally:
        for store in stores.values():
            store.close()


def test_a_word_with_a_capital_i_with_a_dot_is_found_as_written(root: Path) -> None:
    """``TAX\u0130`` (U+0130, whose ``str.lower`` is ``i`` and a combining dot, which ends a
    word) is the word ``tax\u0130`` in a query as in a text: found, marked whole, in any case;
    it is not the word ``taxi`` (nor ``taxi`` + a combining dot, the lowercase spelled out:
    ``taxi`` then a mark)."""
    from sessiontree._search import lowered, tokens

    assert tokens("TAX\u0130S \u0130stanbul") == ["tax\u0130s", "\u0130stanbul"]
    assert parse_query("TAX\u0130").words() == ["tax\u0130"]
    assert lowered("\u0391\u03a3\u0130 \u0391\u03a3") == "\u03b1\u03c3\u0130 \u03b1\u03c2"
    store = JsonlStore(root)
    for query in ("TAX\u0130", "tax\u0130", "\u0130STANBUL", '"tax\u0130 to \u0130stanbul"'):
        [hit] = store.search(query)
        assert hit.entry_id == "e009" and [hit.snippet[a:b] for a, b in hit.marks] in (
            [["TAX\u0130"], ["\u0130stanbul"], ["TAX\u0130 to \u0130stanbul"]]), query
    assert not store.search("taxi", cwd=PROJECT) and not store.search("stanbul", cwd=PROJECT)
    assert not store.search("TAXI\u0307", cwd=PROJECT)


def test_what_a_hit_says(root: Path) -> None:
    store = JsonlStore(root)
    summary, answer = store.search('"heartbeat interval"')  # the shorter text first
    assert (summary.entry_id, answer.entry_id) == ("e003", "e001")
    assert answer.role == "assistant" and answer.timestamp == "2026-03-01T10:01:00.000Z"
    assert answer.on_current_branch is False  # the abandoned answer
    assert summary.role == "summary" and summary.on_current_branch is True
    first = answer
    for hit in (answer, summary):
        assert [hit.snippet[a:b].lower() for a, b in hit.marks] == ["heartbeat interval"]
    assert first.cwd == PROJECT and first.session.endswith("_0195a000-0000-7000-8000-00000000feed.jsonl")
    (label,) = store.search("websocket", role="label")
    assert label.entry_id == "e007" and label.snippet == "websocket fix"
    (call,) = store.search("reconnect_timer count", role="assistant")
    assert call.entry_id == "e004"  # the tool call's arguments
    (thinking,) = store.search("race reconnect timer", role="assistant")
    assert thinking.entry_id == "e001"
    assert not store.search('"timer race"')  # a phrase is adjacent words, in order
    both = store.search("websocket reconnect", cwd=PROJECT)
    assert [hit.entry_id for hit in both] == ["e008"]  # every word, anywhere in the text
    ranked = store.search("reconnect", cwd=PROJECT)
    assert {hit.entry_id for hit in ranked} == {"e001", "e004", "e005", "e006", "e008"}
    keys = [(-hit.score, -_dt.datetime.fromisoformat(hit.timestamp or "").timestamp())
            for hit in ranked]
    assert keys == sorted(keys) and len({hit.score for hit in ranked}) > 1  # relevance, then time
    with pytest.raises(InvalidQuery):
        store.search('" " -- ')


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(2**40), max_value=2**44))
def test_entry_times_read_fast_as_the_library_reads_them(ms: int) -> None:
    from sessiontree._search import _ms
    from sessiontree._time import iso_to_ms

    moment = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=ms)
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + "Z"
    assert _ms(stamp) == (iso_to_ms(stamp) or 0)
    assert _ms(stamp.replace("T", " ")) == (iso_to_ms(stamp.replace("T", " ")) or 0)


def test_queries_parse_into_words_and_phrases() -> None:
    query = parse_query('Close "the Handshake" foo.bar close')
    assert query.terms == (("close",), ("the", "handshake"), ("foo", "bar"))
    assert query.words() == ["bar", "close", "foo", "handshake", "the"]


def _index_rows(root: Path) -> dict[str, list[int]]:
    with sqlite3.connect(index_path(root)) as conn:
        rows = conn.execute("SELECT f.path, e.id FROM entries e JOIN files f ON f.id = e.file "
                            "ORDER BY e.id").fetchall()
    found: dict[str, list[int]] = {}
    for path, entry in rows:
        found.setdefault(str(root / path), []).append(entry)
    return found


def test_the_folder_index_reads_only_what_was_appended(root: Path) -> None:
    store = JsonlStore(root)
    assert not store.search("pelican")
    cache = Path(index_path(root))
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.parent.stat().st_mode) == 0o700
    before = _index_rows(root)
    grown = sorted((root / "--srv-app--").glob("*.jsonl"))[2]
    with Session.open(grown) as session:
        session.append_message(UserMessage.of("a pelican on a bicycle"))
        appended = session.leaf_id
    (hit,) = store.search("pelican")
    assert hit.entry_id == appended and hit.on_current_branch
    after = _index_rows(root)
    assert after[str(grown)][:len(before[str(grown)])] == before[str(grown)]  # kept, not redone
    assert len(after[str(grown)]) == len(before[str(grown)]) + 1
    assert {path: rows for path, rows in after.items() if path != str(grown)} == \
        {path: rows for path, rows in before.items() if path != str(grown)}


def test_a_search_indexes_new_files_only_when_all_that_changed_fits(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More new bytes than a search can index are scanned, not indexed in part (an index it
    cannot complete would save the next searches little); appends to indexed files are
    indexed all the same, and a build indexes everything."""
    from sessiontree.stores import _jsonl_search

    store = JsonlStore(root)
    sizes = sorted(path.stat().st_size for path in root.rglob("*.jsonl"))
    monkeypatch.setattr(_jsonl_search, "INDEX_BYTES", sum(sizes) - 1)
    expected = _comparable(store.search("handshake"))
    assert len(expected) == 2 and not _index_rows(root)  # scanned: nothing indexed
    monkeypatch.setattr(_jsonl_search, "INDEX_BYTES", sum(sizes))
    assert _comparable(store.search("handshake")) == expected
    indexed = _index_rows(root)
    assert len(indexed) == len(sizes)
    grown = sorted((root / "--srv-app--").glob("*.jsonl"))[2]
    with Session.open(grown) as session:
        session.append_message(UserMessage.of("a handshake " + "and more words " * 50))
    (root / "--srv-app--" / "copy.jsonl").write_bytes(grown.read_bytes())  # a new file
    monkeypatch.setattr(_jsonl_search, "INDEX_BYTES", 0)
    found = _comparable(store.search("handshake"))
    assert len(found) == 4 and all(hit in found for hit in expected)
    after = _index_rows(root)
    assert str(root / "--srv-app--" / "copy.jsonl") not in after  # scanned
    assert len(after[str(grown)]) == len(indexed[str(grown)]) + 1  # its append indexed
    store.build_search_index()
    assert len(_index_rows(root)) == len(sizes) + 1


def test_a_build_ends_when_a_file_cannot_be_opened(root: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the build cannot open (another user's, mode 0600: simulated, the tests run as
    root) is left to the scan, the rest indexed, and the index not taken for complete."""
    expected = _comparable(JsonlStore(root).search("handshake"))
    source = sorted((root / "--srv-app--").glob("*.jsonl"))[2]
    locked = root / "--srv-app--" / "locked.jsonl"
    locked.write_bytes(source.read_bytes())
    with Session.open(locked) as session:
        session.append_message(UserMessage.of("a pelican on a bicycle"))
    real_open = os.open

    def refusing(path: Any, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(locked))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    asked = 0

    def stop() -> bool:  # (only a safeguard: the build must end by itself)
        nonlocal asked
        asked += 1
        return asked > 100

    JsonlStore(root).build_search_index(stop=stop)
    assert asked < 100
    assert set(_index_rows(root)) == {str(path) for path in root.rglob("*.jsonl")} - {str(locked)}
    assert _comparable(JsonlStore(root).search("handshake")) == expected
    assert JsonlStore(root).search("pelican") == []
    monkeypatch.setattr(os, "open", real_open)
    (hit,) = JsonlStore(root).search("pelican")  # the index did not claim to hold it
    assert hit.session == str(locked)


def test_a_rewritten_file_is_indexed_again(root: Path) -> None:
    """What a purge does to a file (a rewrite without the text) is seen at once: the text is
    no longer found."""
    store = JsonlStore(root)
    assert [hit.entry_id for hit in store.search("ConnectionResetError")] == ["e005"]
    (path,) = (root / default_session_dir(PROJECT, "").name).glob("*.jsonl")
    data = path.read_bytes().replace(b"ConnectionResetError", b"[redacted]")
    replaced = path.with_name(".rewrite.tmp")
    replaced.write_bytes(data)
    os.replace(replaced, path)
    assert store.search("ConnectionResetError") == []
    assert [hit.entry_id for hit in store.search("redacted")] == ["e005"]
    # a rewrite in place, keeping the size and the inode, is seen too (by its mtime)
    stamp = path.stat().st_mtime_ns
    with open(path, "r+b") as stream:
        stream.write(path.read_bytes().replace(b"[redacted]", b"[scrubbed]"))
    os.utime(path, ns=(stamp + 10**9, stamp + 10**9))
    assert store.search("redacted") == [] and len(store.search("scrubbed")) == 1


def test_the_index_is_never_trusted_over_the_files(root: Path) -> None:
    store = JsonlStore(root)
    expected = _comparable(store.search("websocket"))
    with sqlite3.connect(index_path(root)) as conn:  # an index claiming words no line holds
        conn.execute("UPDATE body SET text = text || ' phantom'")
    assert store.search("phantom") == []
    Path(index_path(root)).write_bytes(b"not a database at all" * 100)  # damaged
    assert _comparable(store.search("websocket")) == expected
    with sqlite3.connect(index_path(root)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _VERSION  # built again
        conn.execute("ALTER TABLE entries DROP COLUMN counts")  # as version 4 wrote it
        conn.execute("PRAGMA user_version = 4")
    assert _comparable(store.search("websocket")) == expected
    with sqlite3.connect(index_path(root)) as conn:  # built again, with the counts
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _VERSION
        assert conn.execute("SELECT count(*) FROM entries WHERE counts IS NOT NULL"
                            ).fetchone()[0]


def test_a_search_whose_rows_lost_their_files_rows_does_not_fail(root: Path) -> None:
    """Entries whose file's row is gone (another process rebuilding the index between a
    search's query of the entries and its query of their files) are left out, as a join
    leaves them: when every candidate's file row was gone the search raised ValueError (the
    fallback after ``zip`` was never taken: a zip object is always true)."""
    store = JsonlStore(root)
    assert store.search("websocket")
    with sqlite3.connect(index_path(root)) as conn:  # (the files' stamps still match: no
        conn.execute("DELETE FROM files")           # refresh puts them back first)
    assert store.search("websocket") == []


def test_a_folder_without_room_for_an_index_is_searched_all_the_same(root: Path) -> None:
    expected = _comparable(JsonlStore(root).search("handshake"))
    assert len(expected) == 2
    cache = Path(index_path(root)).parent
    for name in os.listdir(cache):
        os.unlink(cache / name)
    cache.rmdir()
    cache.write_bytes(b"")  # a file where the cache folder would go: no index can be kept
    assert _comparable(JsonlStore(root).search("handshake")) == expected
    assert cache.read_bytes() == b""


def _forget_search(conn: Any, driver: str) -> None:
    """Make the database what a store of schema version 3 was: no search tables (and no
    usage columns, which version 5 added)."""
    tables = ["sessiontree_search", "sessiontree_search_keys"] if driver == "sqlite" else \
        ["sessiontree_search"]
    for table in tables:
        conn.execute(f"DROP TABLE {table}")
    for column in ("input", "output", "cache_read", "cache_write", "cost"):
        conn.execute(f"ALTER TABLE sessiontree_sessions DROP COLUMN usage_{column}")
    conn.execute("DELETE FROM sessiontree_migrations WHERE v >= 4")


def test_the_migration_indexes_sessions_stored_before(root: Path, tmp_path: Path,
                                                      fresh_postgres_url: str) -> None:
    import psycopg

    db = tmp_path / "old.db"
    copy_sessions(str(root), f"sqlite:///{db}")
    copy_sessions(f"sqlite:///{db}", fresh_postgres_url)
    with sqlite3.connect(db) as conn:
        _forget_search(conn, "sqlite")
    schema = fresh_postgres_url.rpartition("schema=")[2]
    with psycopg.connect(fresh_postgres_url.rpartition("?")[0], autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        _forget_search(conn, "postgres")
    expected = _comparable(JsonlStore(root).search("websocket reconnect"))
    with SqliteStore.open(db) as store:
        assert store.schema_version() == len(store.dialect.migrations)
        assert _comparable(store.search("websocket reconnect")) == expected
    with PostgresStore.from_url(fresh_postgres_url) as store:
        assert _comparable(store.search("websocket reconnect")) == expected


def test_postgres_search_rows_have_planner_statistics_after_a_copy_or_a_migration(
        root: Path, tmp_path: Path, fresh_postgres_url: str) -> None:
    """Without them PostgreSQL plans a word most entries hold as a rare one (every match
    fetched and sorted); a server whose autovacuum is off would never gather them."""
    import psycopg

    schema = fresh_postgres_url.rpartition("schema=")[2]

    def columns_with_statistics() -> set[str]:
        with psycopg.connect(fresh_postgres_url.rpartition("?")[0], autocommit=True) as conn:
            return {row[0] for row in conn.execute(
                "SELECT attname FROM pg_stats WHERE schemaname = %s "
                "AND tablename = 'sessiontree_search'", (schema,))}

    from sessiontree.transfer import ANALYZE_AFTER

    generate_folder(tmp_path / "many", ANALYZE_AFTER, seed=7, min_entries=2, max_entries=3)
    copy_sessions(str(root), fresh_postgres_url)  # (a few sessions: not a bulk load)
    copy_sessions(str(tmp_path / "many"), fresh_postgres_url)
    assert {"words", "ms"} <= columns_with_statistics()
    with psycopg.connect(fresh_postgres_url.rpartition("?")[0], autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        _forget_search(conn, "postgres")
    assert not columns_with_statistics()
    with PostgresStore.from_url(fresh_postgres_url) as store:
        assert store.search("websocket reconnect")
    assert {"words", "ms"} <= columns_with_statistics()


def _search_as_version_5(conn: Any, driver: str) -> None:
    """Make the database's search tables what schema version 5 had (no sizes, no counts; in
    SQLite, row ids in the order of writing)."""
    from sessiontree.stores._sql_common import dialect

    tables = ["sessiontree_search", "sessiontree_search_keys"] if driver == "sqlite" else \
        ["sessiontree_search"]
    for table in tables:
        conn.execute(f"DROP TABLE {table}")
    for statement in dialect(driver).migrations[3]:  # version 4's
        conn.execute(statement.replace("%%", "%"))
    conn.execute("DELETE FROM sessiontree_migrations WHERE v >= 6")


def test_search_tables_of_version_5_are_built_again(root: Path, tmp_path: Path,
                                                    fresh_postgres_url: str) -> None:
    """A store whose search rows hold no sizes and counts gets them from its lines; opened
    read-only before that, its search says what to do."""
    import psycopg

    db = tmp_path / "v5.db"
    copy_sessions(str(root), f"sqlite:///{db}")
    copy_sessions(f"sqlite:///{db}", fresh_postgres_url)
    with sqlite3.connect(db) as conn:
        _search_as_version_5(conn, "sqlite")
    schema = fresh_postgres_url.rpartition("schema=")[2]
    with psycopg.connect(fresh_postgres_url.rpartition("?")[0], autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        _search_as_version_5(conn, "postgres")
    with SqliteStore.open(db, read_only=True) as store, pytest.raises(InvalidLocation):
        store.search("websocket")
    expected = _comparable(JsonlStore(root).search("error"))
    with SqliteStore.open(db) as store:
        assert store.schema_version() == len(store.dialect.migrations)
        assert _comparable(store.search("error")) == expected
    with PostgresStore.from_url(fresh_postgres_url) as store:
        assert _comparable(store.search("error")) == expected


def test_sqlite_search_rows_of_version_6_are_built_again(root: Path, tmp_path: Path) -> None:
    """Version 6 gave FTS5 the entries' text, which FTS5 splits its own way (a combining mark
    inside a word); the migration gives it the words every backend finds."""
    from sessiontree._search import document

    db = tmp_path / "v6.db"
    copy_sessions(str(root), f"sqlite:///{db}")
    with sqlite3.connect(db) as conn:  # the rows as version 6 wrote them
        conn.execute("DELETE FROM sessiontree_migrations WHERE v >= 7")
        rows = conn.execute("SELECT k.id, e.line FROM sessiontree_search_keys k JOIN "
                            "sessiontree_entries e USING (session_id, seq)").fetchall()
        conn.execute("DELETE FROM sessiontree_search")
        conn.executemany("INSERT INTO sessiontree_search (rowid, body) VALUES (?, ?)",
                         [(key, document(bytes(line)).text) for key, line in rows])
    with SqliteStore.open(db, read_only=True) as store:  # (found by FTS5's own words)
        assert store.schema_version() == 6 and not store.search("cafe wiki")
    expected = _comparable(JsonlStore(root).search("cafe wiki"))
    with SqliteStore.open(db) as store:
        assert store.schema_version() == len(store.dialect.migrations)
        assert expected and _comparable(store.search("cafe wiki")) == expected


def _words_before_8(text: str) -> list[str]:
    """An entry's words as the folder index before version 8 and the databases before schema
    version 8 held them: ``str.lower``'s, a capital I with a dot an ``i`` ending a word."""
    import re

    return sorted(set(re.findall(r"[^\W_]+", text.lower())))


def test_indexes_holding_the_words_of_before_a_capital_i_with_a_dot_are_built_again(
        root: Path, tmp_path: Path, fresh_postgres_url: str) -> None:
    """An index whose rows hold ``taxi`` for ``TAX\u0130`` (the folder's of version 7, a
    database's of schema version 7) would never hand that entry to a search for the word as
    written: the folder's is built again, a database's rows are built by its migration."""
    import psycopg

    from sessiontree._search import document

    expected = _comparable(JsonlStore(root).search("TAX\u0130"))
    assert expected
    with sqlite3.connect(index_path(root)) as conn:
        rows = conn.execute("SELECT e.id, e.offset, e.length, f.path FROM entries e JOIN files f "
                            "ON f.id = e.file").fetchall()
        for row_id, offset, length, path in rows:
            with open(root / path, "rb") as stream:
                stream.seek(offset)
                text = document(stream.read(length)).text
            conn.execute("UPDATE body SET text = ? WHERE rowid = ?",
                         (" ".join(_words_before_8(text)), row_id))
        conn.execute("PRAGMA user_version = 7")
    assert _comparable(JsonlStore(root).search("TAX\u0130")) == expected

    db = tmp_path / "v7.db"
    copy_sessions(str(root), f"sqlite:///{db}")
    copy_sessions(f"sqlite:///{db}", fresh_postgres_url)
    with sqlite3.connect(db) as conn:  # the rows as schema version 7 wrote them
        conn.execute("DELETE FROM sessiontree_migrations WHERE v >= 8")
        for key, line in conn.execute(
                "SELECT k.id, e.line FROM sessiontree_search_keys k JOIN sessiontree_entries e "
                "USING (session_id, seq)").fetchall():
            conn.execute("UPDATE sessiontree_search SET body = ? WHERE rowid = ?",
                         (" ".join(_words_before_8(document(bytes(line)).text)), key))
    schema = fresh_postgres_url.rpartition("schema=")[2]
    with psycopg.connect(fresh_postgres_url.rpartition("?")[0], autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("DELETE FROM sessiontree_migrations WHERE v >= 8")
        for session_id, seq, line in conn.execute(
                "SELECT s.session_id, s.seq, e.line FROM sessiontree_search s JOIN "
                "sessiontree_entries e USING (session_id, seq)").fetchall():
            conn.execute("UPDATE sessiontree_search SET words = %s WHERE session_id = %s AND "
                         "seq = %s", (_words_before_8(document(bytes(line)).text), session_id,
                                      seq))
    with SqliteStore.open(db, read_only=True) as store:  # (not migrated: the words of before)
        assert store.schema_version() == 7 and not store.search("TAX\u0130")
    with SqliteStore.open(db) as store:
        assert store.schema_version() == len(store.dialect.migrations) == 8
        assert _comparable(store.search("TAX\u0130")) == expected
    with PostgresStore.from_url(fresh_postgres_url) as store:
        assert store.schema_version() == 8
        assert _comparable(store.search("TAX\u0130")) == expected


def test_database_indexes_follow_appends_deletes_and_purges(tmp_path: Path,
                                                           fresh_postgres_url: str) -> None:
    for url in (f"sqlite:///{tmp_path / 'live.db'}", fresh_postgres_url):
        from sessiontree.stores.url import open_store

        with open_store(url) as store:
            session = Session.create(cwd="/w", store=store)
            session.append_message(UserMessage.of("the albatross migrates"))
            first = session.leaf_id
            session.append_message(UserMessage.of("second albatross sighting"))
            assert {h.entry_id for h in store.search("albatross")} == {session.leaf_id, first}
            # a purge rewrites the stored line, then rebuilds the session's search rows
            line = session.raw_line(first).replace(b"albatross", b"[purged]")
            mark = "?" if url.startswith("sqlite") else "%s"
            with store._transaction() as conn:
                conn.execute(f"UPDATE sessiontree_entries SET line = {mark} WHERE session_id = "
                             f"{mark} AND id = {mark}", (line, session.id, first))
            store.reindex_search(session.id)
            assert [h.entry_id for h in store.search("albatross")] == [session.leaf_id]
            session.close()
            store.delete(session.id)
            assert store.search("albatross") == []


def test_the_search_command(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    monkeypatch.setenv("SESSIONTREE_DIR", str(root))
    done = runner.invoke(cli, ["search", "close handshake", "--json"])
    assert done.exit_code == 0, done.output
    hits = json.loads(done.stdout)
    assert [hit["entry_id"] for hit in hits] == ["e008", "e006"]  # the shorter text first
    done = runner.invoke(cli, ["search", "heartbeat", str(root), "--role", "assistant"])
    assert done.exit_code == 0
    head, snippet = done.stdout.splitlines()
    assert head.startswith("2026-03-01 10:01   assistant") and head.endswith(" e001")
    assert "heartbeat" in snippet
    done = runner.invoke(cli, ["search", "heartbeat", str(root), "--since", "2026-03-02"])
    assert done.exit_code == 0 and done.stdout.startswith("no entry holds heartbeat")
    from sessiontree.stores import _jsonl_search

    monkeypatch.setattr(_jsonl_search, "INDEX_BUDGET", 0.0)  # a search indexes nothing
    other = root.parent / "other"
    handmade(other / "--p--")
    done = runner.invoke(cli, ["search", "handshake", str(other), "--json"])
    assert done.exit_code == 0 and len(json.loads(done.stdout)) == 2
    assert not any(_index_rows(other).values())  # found by a scan of the files
    done = runner.invoke(cli, ["search", "handshake", str(other), "--json", "--index"])
    assert done.exit_code == 0 and len(json.loads(done.stdout)) == 2
    assert [len(rows) for rows in _index_rows(other).values()] == [10]  # the whole index
    done = runner.invoke(cli, ["search", "--", "--", str(root)])
    assert done.exit_code == 1 and "nothing to search for" in done.stderr
    assert search_sessions(str(root), "handshake", cwd="/srv/app") == []


def _redis_word_sets(store: RedisStore, session_id: str) -> set[str]:
    """The words whose sets across sessions hold the session (every one of the store's)."""
    if store.cluster:
        nodes = [store._client.get_redis_connection(n) for n in store._client.get_primaries()]
    else:
        nodes = [store._client]
    found = set()
    for node in nodes:
        for key in node.scan_iter(match=f"{store.prefix}:w:*", count=1000):
            if node.sismember(key, session_id):
                found.add(key.decode().rpartition(":w:")[2])
    return found


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_redis_indexes_follow_appends_and_deletes(kind: str, request: pytest.FixtureRequest,
                                                  tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    url = redis_store_url(request, kind)
    with RedisStore.from_url(url) as store:
        sessions = [Session.create(cwd=f"/w{n}", store=store) for n in range(5)]
        for n, session in enumerate(sessions):  # sessions in several slots (on the cluster)
            session.append_message(UserMessage.of(f"the albatross migrates, number {n}"))
            session.append_message(UserMessage.of("nothing to see"))
        first = sessions[0]
        branch_point = first.leaf_id
        first.append_message(UserMessage.of("a second Albatross sighting"))
        first.branch(branch_point)
        first.append_message(UserMessage.of("on the current branch"))
        store._client.script_flush()  # the branch script is loaded again where it is missing
        hits = store.search("albatross")
        assert sorted(h.session_id for h in hits) == sorted([s.id for s in sessions] + [first.id])
        (old,) = [h for h in hits if "sighting" in h.snippet]
        assert old.on_current_branch is False and old.session == store.session_url(first.id)
        assert [h.session_id for h in store.search("albatross", cwd="/w3")] == [sessions[3].id]
        load = store._client.script_load

        def load_then_lost(text: str) -> str:  # flushed (a failover) before the retry reads it
            sha = load(text)
            store._client.script_flush()
            return sha

        monkeypatch.setattr(store._client, "script_load", load_then_lost)
        store._client.script_flush()
        assert [h.on_current_branch for h in store.search("sighting")] == [False]
        monkeypatch.undo()
        assert [h.session_id for h in store.search('"number 2"')] == [sessions[2].id]
        assert store.search('"albatross number"') == []  # words, not adjacent
        assert store.search("albatross", since=_dt.datetime(2100, 1, 1)) == []
        # the index: each word once per session, its entries' positions (and counts) in order
        post, docs = store.search_keys(first.id)
        assert store._client.hget(post, "albatross") is None  # short: all recent
        assert _redis_search.decode(store._client.hget(store._recent_key(first.id),
                                                       "albatross")) == {1: 1, 3: 1}
        assert store._client.strlen(docs) == 4 * _redis_search.DOC.size
        assert {"albatross", "sighting", "current"} <= _redis_word_sets(store, first.id)
        # through the address, and the command
        assert {h.session_id for h in search_sessions(url, "albatross", limit=100)} == \
            {s.id for s in sessions}
        done = CliRunner().invoke(cli, ["search", "sighting", url, "--json"])
        assert done.exit_code == 0, done.output
        assert [hit["session_id"] for hit in json.loads(done.stdout)] == [first.id]
        # a purge's rewrite takes the line's postings out of the index and puts the new ones
        # in; the session leaves the sets of the words it no longer holds
        target = sessions[4]
        entry = target.path_ids()[0]
        store.replace_line(target.id, entry, target.raw_line(entry).replace(b"albatross",
                                                                            b"petrel"))
        assert target.id not in {h.session_id for h in store.search("albatross")}
        assert [h.entry_id for h in store.search("petrel")] == [entry]
        words = _redis_word_sets(store, target.id)
        assert "petrel" in words and "albatross" not in words
        with pytest.raises(SessionNotFound):
            store.replace_line(target.id, "nope1234", b"{}")
        for session in sessions:
            session.close()
        store.delete(first.id)
        assert not any(store._client.exists(key) for key in store.session_keys(first.id))
        assert _redis_word_sets(store, first.id) == set()
        assert first.id not in {h.session_id for h in store.search("albatross")}


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_redis_search_stays_honest_when_a_writer_dies_between_its_writes(
        kind: str, request: pytest.FixtureRequest) -> None:
    """A writer that dies after the append script, before the writes to the words' sets (in
    other slots on a cluster), leaves its words unfound there, never a wrong hit;
    ``reindex_search`` puts them back. Sets naming sessions that no longer hold the word (a
    writer that died after a delete's script) cost a look, never a hit."""
    url = redis_store_url(request, kind)
    with RedisStore.from_url(url) as store:
        kept, died = (Session.create(cwd="/w", store=store) for _ in range(2))
        kept.append_message(UserMessage.of("the albatross migrates"))
        died.append_message(UserMessage.of("a lost albatross"))
        for word in ("a", "lost", "albatross"):  # as if its writer died after the script
            store._client.srem(store.word_key(word), died.id)
        assert [h.session_id for h in store.search("albatross")] == [kept.id]
        assert store.search("lost") == []
        store.reindex_search(died.id)
        assert {h.session_id for h in store.search("albatross")} == {kept.id, died.id}
        assert [h.session_id for h in store.search("lost")] == [died.id]
        gone = "0195a000-0000-7000-8000-0000000000aa"  # deleted, its sets left behind
        store._client.sadd(store.word_key("albatross"), gone)
        store._client.sadd(store.word_key("migrates"), died.id)  # a word it never held
        assert {h.session_id for h in store.search("albatross")} == {kept.id, died.id}
        assert [h.session_id for h in store.search("migrates")] == [kept.id]
        # a purge elsewhere takes the session out of a word's set; this store, which put it
        # there, puts it back when an append brings the word again
        entry = kept.leaf_id
        with RedisStore.from_url(url) as other:
            other.replace_line(kept.id, entry, kept.raw_line(entry).replace(b"migrates", b"rests"))
            assert other.search("migrates") == []
        kept.append_message(UserMessage.of("it migrates again"))
        assert [h.entry_id for h in store.search("migrates")] == [kept.leaf_id]
        kept.close()
        died.close()


def test_redis_one_server_updates_the_words_sets_in_the_scripts(
        request: pytest.FixtureRequest) -> None:
    """On one server a purge, a rebuild and a delete change the words' sets (and a delete the
    listing's) in their script: another writer's append or import right after the script is
    found, never taken out of the sets by writes its caller sends after."""
    url = redis_store_url(request, "redis")
    with RedisStore.from_url(url) as store, RedisStore.from_url(url) as other:
        session = Session.create(cwd="/w", store=store)
        entry = session.append_message(UserMessage.of("the albatross flies"))
        session.append_message(UserMessage.of("nothing here"))
        writer = Session(other.open_log(session.id))

        def again() -> None:
            writer.append_message(UserMessage.of("the albatross is back"))

        beside_script(store, "_replace_script", again)  # a purge, then an append bringing the word
        store.replace_line(session.id, entry,
                           session.raw_line(entry).replace(b"albatross", b"petrel"))
        assert [h.entry_id for h in store.search("albatross")] == [writer.leaf_id]
        # lines rewritten behind the index's back, rebuilt, then an append brings a word the
        # rebuild took out
        lines = store.keys(session.id)[1]
        store._client.lset(lines, 2, store._client.lindex(lines, 2).replace(b"albatross",
                                                                            b"heron"))
        beside_script(store, "_reindex_script", again)
        store.reindex_search(session.id)
        assert [h.entry_id for h in store.search("albatross")] == [writer.leaf_id]
        assert [h.session_id for h in store.search("heron")] == [session.id]
        # deleted, then imported again under the same id by another store
        header, stored = store.export_lines(session.id)
        kept = list(stored)
        beside_script(store, "_delete_script", lambda: other.import_lines(header, kept))
        store.delete(session.id)
        assert [h.entry_id for h in store.search("albatross")] == [writer.leaf_id]
        assert [row.id for row in store.list_sessions(cwd="/w")] == [session.id]
        assert {h.session_id for h in store.search("heron")} == {session.id}
        writer.close()
        session.close()


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_a_redis_search_with_cwd_visits_the_sessions_of_the_cwd_alone(
        kind: str, request: pytest.FixtureRequest) -> None:
    """With ``cwd`` a search reads the postings of the sessions listed in that cwd only, not of
    every session holding the words."""
    with RedisStore.from_url(redis_store_url(request, kind)) as store:
        sessions = [Session.create(cwd=f"/w{n % 3}", store=store) for n in range(9)]
        for session in sessions:
            session.append_message(UserMessage.of("the albatross flies"))
            session.close()
        visited: list[str] = []
        candidates = store._candidates

        def visit(page: Any, *args: Any, **kwargs: Any) -> Any:
            visited.extend(page)
            return candidates(page, *args, **kwargs)

        store._candidates = visit  # type: ignore[method-assign]
        wanted = sorted(s.id for s in sessions[1::3])
        assert sorted(h.session_id for h in store.search("albatross", cwd="/w1")) == wanted
        assert sorted(visited) == wanted
        assert store.search("albatross", cwd="/elsewhere") == []


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_redis_appends_add_to_a_words_recent_postings_not_to_all_of_them(
        kind: str, request: pytest.FixtureRequest) -> None:
    """An append adds each word's postings to its recent part (moved to the end of the word's
    postings once longer than ``_RECENT_BYTES``), so that it does not copy the postings of a
    long session's words each time; searches, purges and rebuilds read both parts."""
    session_id = "0195a000-0000-7000-8000-0000000000b1"
    header = json.dumps({"type": "session", "version": 3, "id": session_id, "cwd": "/w",
                         "timestamp": "2026-03-01T10:00:00.000Z"}).encode()
    lines = [json.dumps({"type": "message", "id": f"b{n:07d}",
                         "parentId": f"b{n - 1:07d}" if n else None,
                         "timestamp": "2026-03-01T10:00:00.000Z",
                         "message": {"role": "user", "content": f"albatross number {n}",
                                     "timestamp": 1772359200000}}).encode() for n in range(600)]
    with RedisStore.from_url(redis_store_url(request, kind)) as store:
        store.import_lines(header, lines)  # two scripts: 500 postings, then 100 more
        post, recent = store.search_keys(session_id)[0], store._recent_key(session_id)
        before = store._client.hget(post, "albatross")
        assert len(before) > _RECENT_BYTES and store._client.hget(recent, "albatross") is None
        with Session(store.open_log(session_id)) as session:
            session.append_message(UserMessage.of("the albatross again"))
            assert store._client.hget(post, "albatross") == before  # not copied
            assert _redis_search.decode(store._client.hget(recent, "albatross")) == {601: 1}
            for _ in range(50):
                session.append_message(UserMessage.of("albatross"))
            assert store._client.hget(post, "albatross") == before
            held = _redis_search.decode(store._client.hget(post, "albatross")
                                        + (store._client.hget(recent, "albatross") or b""))
            assert sorted(held) == list(range(1, len(session) + 1))
            assert len(store.search("albatross", limit=2000)) == len(session)
            leaf = session.leaf_id
            for entry in ("b0000000", leaf):  # one in post, one in recent
                store.replace_line(session_id, entry,
                                   session.raw_line(entry).replace(b"albatross", b"petrel"))
            assert sorted(h.entry_id for h in store.search("petrel")) == sorted(["b0000000",
                                                                                  leaf])
            assert len(store.search("albatross", limit=2000)) == len(session) - 2
            store.reindex_search(session_id)
            assert len(store.search("albatross", limit=2000)) == len(session) - 2
            assert store._client.hget(recent, "albatross") is None


def test_redis_cluster_search_allows_for_the_latest_time_it_did_not_send(
        request: pytest.FixtureRequest) -> None:
    """On a cluster an append within a second (entry time) of the latest time its store sent
    to ``searched`` does not send it again: a search with ``since`` between the two still
    visits the session."""
    url = redis_store_url(request, "redis-cluster")
    session_id = "0195a000-0000-7000-8000-00000000ca7e"
    header = {"type": "session", "version": 3, "id": session_id, "cwd": "/w",
              "timestamp": "2026-03-01T10:00:00.000Z"}

    def line(entry_id: str, parent: str | None, second: str, text: str) -> bytes:
        return json.dumps({"type": "message", "id": entry_id, "parentId": parent,
                           "timestamp": f"2026-03-01T10:00:{second}Z",
                           "message": {"role": "user", "content": text,
                                       "timestamp": 1772359200000}}).encode()

    with RedisStore.from_url(url) as store:
        store.import_lines(json.dumps(header).encode(), [line("k0000001", None, "00.000",
                                                              "kestrel one")])
        log = store.open_log(session_id)
        log.begin_append()
        log.write([line("k0000002", "k0000001", "00.500", "kestrel two")], None)
        log.end_append()
        sent = store._client.zscore(f"{store.prefix}:searched", session_id)
        assert sent == _dt.datetime(2026, 3, 1, 10, tzinfo=_dt.timezone.utc).timestamp() * 1000
        since = _dt.datetime(2026, 3, 1, 10, 0, 0, 400000, tzinfo=_dt.timezone.utc)
        assert [h.entry_id for h in store.search("kestrel", since=since)] == ["k0000002"]


def _redis_copy(request: pytest.FixtureRequest, kind: str,
                root: Path) -> tuple[str, dict[str, Any]]:
    """A Redis store holding a copy of ``root``'s sessions, and the hits the folder gives for
    the first four queries (what the store must give once migrated)."""
    url = redis_store_url(request, kind)
    assert copy_sessions(str(root), url).copied
    return url, {query: _comparable(JsonlStore(root).search(query, **options))
                 for query, options in QUERIES[:4]}


def _as_version_2_left_it(store: RedisStore, session_id: str) -> None:
    """Give a session the search index version 2 wrote: each word's postings in ``post``
    alone (no recent part), the session marked 2."""
    post = store.search_keys(session_id)[0]
    store._client.delete(post, store._recent_key(session_id))
    lines = store._client.lrange(store.keys(session_id)[1], 0, -1)
    store._client.hset(post, mapping=_redis_search.batch(lines, 1).postings)
    store._client.hset(store.keys(session_id)[0], "indexed", 2)


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_redis_sessions_stored_before_the_search_index_are_migrated(
        kind: str, request: pytest.FixtureRequest, root: Path) -> None:
    """A store whose sessions have the search index of an earlier version (1: a sorted-set
    member per word and entry, no postings, no sets across sessions; 2: each word's postings in
    one field, no recent part) refuses to search until ``migrate`` builds this version's for
    the sessions of version 1 and marks those of version 2 as this version, which then gives
    the hits of every backend."""
    url, expected = _redis_copy(request, kind, root)
    with RedisStore.from_url(url) as store:
        ids = store.session_ids()
        for n, session_id in enumerate(ids):  # as version 1 or 2 left them
            post, docs = store.search_keys(session_id)
            store._client.delete(post, store._recent_key(session_id))
            if n % 2:
                _as_version_2_left_it(store, session_id)
            else:
                store._client.delete(docs)
                store._client.hset(store.keys(session_id)[0], "indexed", 1)
                store._client.zadd(f"{store.prefix}:{{{session_id}}}:words",
                                   {"albatross 1": 0})
                for word in _redis_word_sets(store, session_id):  # (version 2 had them)
                    store._client.srem(store.word_key(word), session_id)
                store._client.zrem(f"{store.prefix}:searched", session_id)
        store._client.delete(f"{store.prefix}:search")
    with RedisStore.from_url(url) as store:
        with pytest.raises(InvalidLocation, match="migrate"):
            store.search("websocket")
        rebuilt = beside_script(store, "_reindex_script", lambda: None)
        assert store.migrate() == len(ids)
        assert len(rebuilt) == (len(ids) + 1) // 2  # version 1's (version 2's are marked)
        for query, options in QUERIES[:4]:
            assert _comparable(store.search(query, **options)) == expected[query], query
        assert not any(store._client.exists(f"{store.prefix}:{{{sid}}}:words") for sid in ids)


@pytest.mark.parametrize("kind", ["redis", "redis-cluster"])
def test_redis_search_index_version_2_is_version_3_without_a_rebuild(
        kind: str, request: pytest.FixtureRequest, root: Path) -> None:
    """A store of search index version 2 (each word's postings in ``post`` alone: version 3's
    with no recent part) searches as it is, its sessions' appends and replaced lines are
    indexed (the session is marked as version 3), and ``migrate`` marks the others with no
    rebuild, except a session whose records lack a line (an append that skipped it): that one
    is built again from its lines."""
    url, expected = _redis_copy(request, kind, root)
    with RedisStore.from_url(url) as store:
        ids = store.session_ids()
        for session_id in ids:
            _as_version_2_left_it(store, session_id)
        store._client.set(f"{store.prefix}:search", 2)
    with RedisStore.from_url(url) as store:
        for query, options in QUERIES[:4]:
            assert _comparable(store.search(query, **options)) == expected[query], query
        with Session(store.open_log(ids[0])) as session:
            entry = session.append_message(UserMessage.of("a wandering petrel"))
            assert [h.entry_id for h in store.search("petrel")] == [entry]
            store.replace_line(ids[0], entry, session.raw_line(entry).replace(b"petrel", b"skua"))
            assert [h.entry_id for h in store.search("skua")] == [entry]
            assert store.search("petrel") == []
        indexed = [store._client.hget(store.keys(sid)[0], "indexed") for sid in ids]
        assert indexed[0] == b"3" and set(indexed[1:]) == {b"2"}
        docs = store.search_keys(ids[-1])[1]  # as an append of 4fcba23 left it: no record
        store._client.set(docs, store._client.get(docs)[:-_redis_search.DOC.size])
        rebuilt = beside_script(store, "_reindex_script", lambda: None)
        assert store.migrate() == len(ids) - 1
        assert len(rebuilt) == 1
        assert {store._client.hget(store.keys(sid)[0], "indexed") for sid in ids} == {b"3"}
        assert store._client.get(f"{store.prefix}:search") == b"3"


def _tricky(folder: Path) -> None:
    """A session whose text differs from its bytes: escapes (``\\u0065`` for an ASCII
    letter, a control character, ``\\n``) next to words, a Kelvin sign (escaped and not) and
    a dotted capital I (their lowercase holds ASCII letters), words glued to JSON keys, an
    entry without a time, and a line that is not JSON."""
    texts = ["ERROR in the parser", "isError but not a word here", "tail\nerror after a newline",
             "\u001berror after a colour code", "\u212aelvin scale error, measured",
             "\u0130stanbul office",
             "errors, not the word", "Ünïcödé error wörds", "error spelled with an escape",
             "\u212aelvin, raw temperature", "sum:\n\u03a3 = 10", "sum:\n\u03a3 = 10, raw",
             "take a taxi", "TAX\u0130 one", "TAX\u0130 two", "TAX\u0130 three"]
    header = {"type": "session", "version": 3, "id": "0195a000-0000-7000-8000-0000000071c4",
              "timestamp": "2026-03-02T09:00:00.000Z", "cwd": "/tricky"}
    lines = [json.dumps(header)]
    parent = None
    for n, text in enumerate(texts):
        entry = {"type": "message", "id": f"t{n:07d}", "parentId": parent,
                 "timestamp": f"2026-03-02T09:{n:02d}:00.000Z",
                 "message": {"role": "user", "content": text, "timestamp": 1772442000000}}
        lines.append(json.dumps(entry, ensure_ascii=n % 2 == 0))
        parent = entry["id"]
    lines.append(lines[9].replace('"error', '"\\u0065rror'))  # the same id: a duplicate line
    lines.append(json.dumps({"type": "message", "id": "t0000099", "parentId": parent,  # no time
                             "message": {"role": "user", "content": "an error of 1970"}}))
    lines.append("{not json error")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "2026-03-02T09-00-00-000Z_0195a000-0000-7000-8000-0000000071c4.jsonl").write_text(
        "\n".join(lines) + "\n", "utf-8")


_SCAN_TEXT = list("aAbBkKiI1 -_<{\u212a\u0130\u00e9\n\x1b\\\u03a3\u03c3")


_NUMBERS = st.one_of(
    st.integers(-(10**25), 10**25).map(str), st.just("-0"), st.just("-0.0"),
    st.floats(allow_nan=False, allow_infinity=False).flatmap(  # as pi, Python, msgspec write it
        lambda x: st.sampled_from([js_number(x), repr(x), msgspec.json.encode(x).decode()])),
    st.builds("{}{}{}{}{}".format, st.sampled_from(["", "-"]), st.integers(0, 99),
              st.sampled_from(["", ".5", ".050"]), st.sampled_from(["e", "E"]),
              st.sampled_from(["5", "+5", "-7", "-07", "400"])))
"""JSON numbers as any writer may spell them: digits, fractions, exponents, signs, ``-0``."""


@st.composite
def _escaped_lines(draw: st.DrawFn) -> list[bytes]:
    """Entry lines whose text's characters are written raw or as escapes (``\\u0041``,
    ``\\u005f``, upper or lower hex digits), or as JSON may write them otherwise."""
    lines = []
    for n in range(draw(st.integers(min_value=1, max_value=4))):
        content = []
        for char in draw(st.text(st.sampled_from(_SCAN_TEXT), max_size=16)):
            if draw(st.booleans()):
                content.append(("\\u%04x" if draw(st.booleans()) else "\\u%04X") % ord(char))
            else:
                content.append(json.dumps(char, ensure_ascii=draw(st.booleans()))[1:-1])
        numbers = ",".join(draw(st.lists(_NUMBERS, max_size=3)))
        lines.append(('{"type":"message","id":"e%d","parentId":null,'
                      '"timestamp":"2026-03-01T10:00:00.000Z","message":{"role":"assistant",'
                      '"content":[{"type":"text","text":"%s"},{"type":"toolCall","id":"c",'
                      '"name":"n","arguments":{"a":[%s]}}]}}'
                      % (n, "".join(content), numbers)).encode())
    return lines


@settings(max_examples=1000, deadline=None)
@given(_escaped_lines(), st.lists(st.sampled_from(["ab", "k", "a1", "ka", "b", "bak", "\u03c3",
                                                  "b\u03c3", "ai", "i", "kib", "0", "5",
                                                  "07", "100000", "5e", "e5", "1e"]),
                                  min_size=1, max_size=2, unique=True))
@example([b'{"type":"message","id":"e0","parentId":null,"timestamp":"2026-03-01T10:00:00.000Z",'
          b'"message":{"role":"user","content":"\\u212aA"}}'], ["ka"])
@example([b'{"type":"message","id":"e0","parentId":null,"timestamp":"2026-03-01T10:00:00.000Z",'
          b'"message":{"role":"user","content":"sum:\\n\xce\xa3 = 10"}}'], ["\u03c3"])
@example([b'{"type":"message","id":"e0","parentId":null,"timestamp":"2026-03-01T10:00:00.000Z",'
          b'"message":{"role":"user","content":"A\xc4\xb0 b"}}'], ["b", "ai"])
@example([b'{"type":"message","id":"e0","parentId":null,"timestamp":"2026-03-01T10:00:00.000Z",'
          b'"message":{"role":"assistant","content":[{"type":"toolCall","id":"t","name":"n",'
          b'"arguments":{"seconds":1e5,"ratio":1.5e-7}}]}}'], ["100000", "07"])
def test_a_scan_of_bytes_keeps_every_line_whose_entry_holds_the_words(
        lines: list[bytes], words: list[str]) -> None:
    """The scan of bytes passes a line over only when its entry cannot hold every word, letters
    escaped or in any case, a Kelvin sign, numbers as any writer spells them; and the scan that
    first searches each chunk in one pass (Hyperscan) keeps the same lines."""
    from sessiontree._search import document, holds_words
    from sessiontree._search_scan import fast_lines, maybe_lines

    data = b"\n".join(lines) + b"\n"
    kept = maybe_lines(data, words)
    start = 0
    for line in lines:
        doc = document(line)
        if doc is not None and holds_words(doc.text, words):
            assert (start, start + len(line)) in kept, line
        start += len(line) + 1
    fast = fast_lines(words)
    assert fast is None or fast(data) == kept


def test_only_an_escape_that_spells_a_letter_or_digit_makes_a_read_scanned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast scan passes over a read holding neither the word nor an escape of a letter or
    digit, however many escapes of other characters it holds (``\\u003c`` ``<``, ``\\u005f``
    ``_``, ``\\u007b`` ``{``, ``\\u007f``: common in tool output); one of a letter (either hex
    case) or a digit is scanned."""
    from sessiontree import _search_scan

    scanned: list[bytes] = []
    real = _search_scan._ascii_lines
    monkeypatch.setattr(_search_scan, "_ascii_lines", lambda data, *args, **kwargs: (
        scanned.append(data), real(data, *args, **kwargs))[1])
    fast = _search_scan.fast_lines(["error"])
    assert fast is not None
    line = b'{"content":"a \\u003cb\\u003e \\u003d \\u005f \\u007b\\u007d \\u007f \\u0040 ' \
        b'\\u005b"}\n'
    assert fast(line) == [] and not scanned
    for spelled in (b"\\u0065", b"\\u0045", b"\\u004F", b"\\u0031", b"\\u005a", b"\\u007A"):
        scanned.clear()
        fast(line + spelled + b"\n")
        assert scanned, spelled


def test_the_characters_the_scan_of_bytes_allows_for_are_all_there() -> None:
    """Of every character, those whose lowercase for search holds an ASCII letter or digit are
    ASCII's and those of ``_OUTSIDE`` (each for its letter: not the capital I with a dot, kept
    whole), and only the capital sigma lowercases by its neighbours (``maybe_lines`` keeps a
    line holding one)."""
    import unicodedata

    from sessiontree._search import lowered
    from sessiontree._search_scan import _OUTSIDE

    outside, by_neighbours = {}, []
    for char in map(chr, range(0x80, 0x110000)):
        low = lowered(char)
        if low == char:
            continue
        ascii_letters = [c for c in low if c.isascii() and c.isalnum()]
        if ascii_letters:
            outside[ord(ascii_letters[0])] = char
        if lowered("A" + char)[1:] != low:
            by_neighbours.append(unicodedata.name(char))
    assert outside == _OUTSIDE
    assert by_neighbours == ["GREEK CAPITAL LETTER SIGMA"]


_STAMPS = st.one_of(
    st.integers(0, 9).map(lambda s: '"2026-03-01T10:00:0%d.000Z"' % s),  # as pi writes it
    st.integers(0, 9).map(lambda s: '"2026-03-01T11:00:0%d+01:00"' % s),  # another form
    st.sampled_from(["5", "null", '"soon"']))  # no valid time: 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), _STAMPS, st.sampled_from(
    ['"user","content":"an error"', '"assistant","content":[{"type":"text","text":"error"}]',
     '"user","content":"none"', '"user","content":"error_x"']), st.booleans()),
    min_size=1, max_size=40), st.integers(1, 4), st.integers(1, 3),
    st.sampled_from([None, "user"]), st.sampled_from([0, 1772359204000]))
def test_a_scan_keeps_the_most_recent_lines_that_hold_the_words(
        lines: list[tuple[str, str, str, bool]], candidates: int, kept: int, role: str | None,
        since: int) -> None:
    """Whatever the order of the lines' times and however the scan's lines are cut into
    chunks and judged in rounds (a few kept by their time before each), the scan finds the
    most recent lines whose entries hold every word, as judging each line would."""
    from sessiontree import _search_scan
    from sessiontree._search import document, holds_words

    data: dict[str, bytes] = {"a": b"", "b": b""}
    chunks: list[tuple[str, int, bytes]] = []
    for n, (session, stamp, message, cut) in enumerate(lines):
        line = ('{"type":"message","id":"e%d","parentId":null,"timestamp":%s,'
                '"message":{"role":%s}}\n' % (n, stamp, message)).encode()
        if cut or not chunks or chunks[-1][0] != session:
            chunks.append((session, len(data[session]), b""))
        chunks[-1] = chunks[-1][:2] + (chunks[-1][2] + line,)
        data[session] += line
    expected = []
    for session, text in data.items():
        place = 0
        for line in text.split(b"\n")[:-1]:
            doc = document(line)
            if doc is not None and holds_words(doc.text, ["error"]) and doc.ms >= since and \
                    role in (None, doc.role):
                expected.append(((-doc.ms, session, place), line))
            place += len(line) + 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_search_scan, "CANDIDATES", candidates)
        patch.setattr(_search_scan, "KEPT_PER_CANDIDATE", kept)
        recent = _search_scan.Recent(["error"], role=role, since=since, read=lambda session,
                                     place, length: data[session][place:place + length])
        for session, base, chunk in chunks:
            recent.scan(chunk, base, session, session, "")
        found = [(item.key, item.line) for item in recent.best()]
    assert found == sorted(expected)[:candidates]


def test_the_test_extras_install_the_fast_scan() -> None:
    """The scan that searches each chunk in one pass first is there where the test extras are
    (so the tests above run it): without it a scan is still exact, only slower."""
    from sessiontree._search_scan import fast_lines

    assert fast_lines(["error"]) is not None, "pip install -e '.[test]' (hyperscan)"
    assert fast_lines(["caf\u00e9"]) is None  # (words not all ASCII: every line judged)


@pytest.mark.parametrize("failing", ["compile", "scan"])
def test_a_search_whose_hyperscan_fails_scans_without_it(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    """Hyperscan failing to compile its databases or to scan (an unsupported CPU says
    HS_ARCH_ERROR) costs only time: a warning, and the hits of the index."""
    import shutil

    import hyperscan

    from sessiontree.stores import _jsonl_search

    _tricky(root / "--tricky--")
    indexed = JsonlStore(root)
    indexed.build_search_index()
    scanned_root = tmp_path / "scanned"
    shutil.copytree(root, scanned_root, ignore=shutil.ignore_patterns(".sessiontree-cache"))
    monkeypatch.setattr(_jsonl_search, "INDEX_BUDGET", 0.0)
    calls: list[str] = []

    class Failing(hyperscan.Database):
        def compile(self, *args: Any, **kwargs: Any) -> None:
            calls.append("compile")
            if failing == "compile":
                raise hyperscan.error("HS_ARCH_ERROR")
            super().compile(*args, **kwargs)

        def scan(self, *args: Any, **kwargs: Any) -> None:
            calls.append("scan")
            raise hyperscan.error("HS_ARCH_ERROR")

    monkeypatch.setattr(hyperscan, "Database", Failing)
    for query, options in [("error", {}), ("kelvin measured", {}), ("websocket", {})]:
        calls.clear()
        with pytest.warns(RuntimeWarning, match="Hyperscan failed"):
            hits = JsonlStore(scanned_root).search(query, **options)
        assert failing in calls
        assert hits and _comparable(hits) == _comparable(indexed.search(query, **options))
    assert not Path(index_path(scanned_root)).exists() or not _index_rows(scanned_root)


SCAN_QUERIES = [*QUERIES, ("kelvin", {}), ("kelvin measured", {}), ("kelvin temperature", {}),
                ("istanbul", {}), ("stanbul", {}), ("i", {}),
                ("error after", {}), ('"error after"', {"limit": 50}), ("iserror", {}),
                ("errors", {}), ("wörds error", {}), ("error", {"role": "user", "limit": 100}),
                ("\u03a3", {}), ("taxi", {})]


@pytest.mark.parametrize("gate", [True, False], ids=["hyperscan-gate", "pure-scan"])
def test_a_search_without_time_to_index_finds_what_the_index_finds(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate: bool) -> None:
    """The bytes a search has no time to index are scanned: the hits are those of the whole
    index, with few candidates (so the most recent ones must be the same) or many, and from
    an index built in part (a chunk of a file at a time); with each chunk first searched in
    one pass (the extra ``sessiontree[fast]``, installed with the test extras) and as a scan
    without it does."""
    import shutil

    from sessiontree import _search_scan
    from sessiontree.stores import _jsonl_search

    if not gate:  # as without the extra
        monkeypatch.setenv("SESSIONTREE_HYPERSCAN", "0")
        assert _search_scan.fast_lines(["error"]) is None
    _tricky(root / "--tricky--")
    indexed = JsonlStore(root)
    indexed.build_search_index()
    scanned_root = tmp_path / "scanned"
    shutil.copytree(root, scanned_root, ignore=shutil.ignore_patterns(".sessiontree-cache"))
    scanned = JsonlStore(scanned_root)
    for candidates, chunk in ((1000, 1 << 18), (3, 700)):  # (lines longer than 2 chunks)
        monkeypatch.setattr(_jsonl_search, "_SCAN_CHUNK", chunk)
        monkeypatch.setattr(_jsonl_search, "CANDIDATES", candidates)
        monkeypatch.setattr(_search_scan, "CANDIDATES", candidates)
        monkeypatch.setattr(_jsonl_search, "INDEX_BUDGET", 0.0)
        for query, options in SCAN_QUERIES:
            expected = _comparable(indexed.search(query, **options))
            assert _comparable(scanned.search(query, **options)) == expected, (query, options)
    assert not Path(index_path(scanned_root)).exists() or not _index_rows(scanned_root)
    # an index built a chunk at a time, a search after each chunk, gives the same hits
    monkeypatch.setattr(_jsonl_search, "_CHUNK", 1 << 14)
    ticks = iter(range(10**6))
    monkeypatch.setattr(_jsonl_search.time, "monotonic", lambda: next(ticks) * 0.25)
    monkeypatch.setattr(_jsonl_search, "INDEX_BUDGET", 1.0)
    for query, options in SCAN_QUERIES * 3:
        assert _comparable(scanned.search(query, **options)) == \
            _comparable(indexed.search(query, **options)), (query, options)
    scanned.build_search_index()
    assert sorted(map(len, _index_rows(scanned_root).values())) == \
        sorted(map(len, _index_rows(root).values()))


def test_a_scan_shared_with_helper_processes_finds_what_one_process_finds(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked for more processes, a search scans its files with helpers (each keeps its own
    most recent candidates), with the hits of one process; a helper that does not start or
    answers nonsense costs only time; asked for none, the library starts no helper."""
    from sessiontree import _helpers
    from sessiontree.stores import _jsonl_search

    _tricky(root / "--tricky--")
    monkeypatch.setattr(_jsonl_search, "INDEX_BUDGET", 0.0)
    monkeypatch.setattr(_jsonl_search, "INDEX_BYTES", 0)
    monkeypatch.setattr(_jsonl_search, "PARALLEL_SCAN_BYTES", 1)
    monkeypatch.setattr(_jsonl_search, "HELPER_START", 0)
    monkeypatch.delenv("SESSIONTREE_PROCESSES", raising=False)
    store = JsonlStore(root)
    started: list[object] = []
    real_start, real_answer = _helpers.start, _helpers.answer
    monkeypatch.setattr(_helpers, "start", lambda *args: started.append(args) or real_start(*args))
    expected = {(query, str(options)): _comparable(store.search(query, **options))
                for query, options in SCAN_QUERIES}
    assert not started

    monkeypatch.setattr(_helpers, "processes", lambda requested=None: 3)
    answers: list[bytes | None] = []
    monkeypatch.setattr(_helpers, "answer", lambda helper, **options: answers.append(
        real_answer(helper, **options)) or answers[-1])
    for query, options in SCAN_QUERIES:
        assert _comparable(store.search(query, **options)) == expected[query, str(options)]
    assert len(answers) == 2 * len(SCAN_QUERIES) and None not in answers
    # the helpers scan as without the extra sessiontree[fast] when told so: they inherit the
    # environment, which an isolated interpreter (python -I, as they run) still reads
    monkeypatch.setenv("SESSIONTREE_HYPERSCAN", "0")
    assert subprocess.run([sys.executable, "-I", "-c", "from sessiontree._search_scan import "
                           "fast_lines; assert fast_lines(['error']) is None"]).returncode == 0
    answers.clear()
    for query, options in SCAN_QUERIES:
        assert _comparable(store.search(query, **options)) == expected[query, str(options)]
    assert len(answers) == 2 * len(SCAN_QUERIES) and None not in answers
    monkeypatch.delenv("SESSIONTREE_HYPERSCAN")

    broken = iter([None, "nonsense"] * len(SCAN_QUERIES))
    monkeypatch.setattr(_helpers, "answer", lambda helper, **_: (_helpers.finish(helper), next(
        broken))[1] and b"\x93not found")
    for query, options in SCAN_QUERIES:
        assert _comparable(store.search(query, **options)) == expected[query, str(options)]


def test_a_scan_helpers_warning_reaches_the_search(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a scan's helper process warns (Hyperscan failed there, its share scanned without
    it) is a warning of the search that started it, which still gives the hits of one
    process; the helper's standard error went nowhere."""
    from sessiontree import _helpers
    from sessiontree.stores import _jsonl_search

    monkeypatch.setattr(_jsonl_search, "INDEX_BUDGET", 0.0)
    monkeypatch.setattr(_jsonl_search, "INDEX_BYTES", 0)
    monkeypatch.delenv("SESSIONTREE_PROCESSES", raising=False)
    expected = _comparable(JsonlStore(root).search("handshake"))
    monkeypatch.setattr(_jsonl_search, "PARALLEL_SCAN_BYTES", 1)
    monkeypatch.setattr(_jsonl_search, "HELPER_START", 0)
    monkeypatch.setattr(_helpers, "processes", lambda requested=None: 2)
    monkeypatch.setattr(_helpers, "_RUN", "import warnings; warnings.warn('Hyperscan failed "
                        "(test): scanning without it (exact, slower)', RuntimeWarning); " +
                        _helpers._RUN)
    with pytest.warns(RuntimeWarning, match=r"a helper process \(sessiontree\.stores\."
                      r"_jsonl_search:_scan_share\): .*Hyperscan failed \(test\)"):
        assert _comparable(JsonlStore(root).search("handshake")) == expected


def test_a_session_file_whose_name_is_not_utf8_is_searched_like_any_other(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``*.jsonl`` name that is not UTF-8 (``os.listdir`` gives its bytes as surrogates; the
    index keeps its bytes) gives the hits of the same file under another name, from a scan, a
    scan shared with a helper process, a search's index, a whole build's and
    ``sessiontree search DIR``, each naming the file as ``os.listdir`` does; they all raised
    UnicodeEncodeError."""
    import shutil

    from sessiontree import _helpers
    from sessiontree.stores import _jsonl_search

    project = root / default_session_dir(PROJECT, "").name
    odd_root = tmp_path / "odd"
    shutil.copytree(root, odd_root)
    [plain] = project.glob("*.jsonl")
    odd = os.path.join(odd_root / project.name, os.fsdecode(b"caf\xe9 \xff.jsonl"))
    os.rename(odd_root / project.name / plain.name, odd)
    expected = {(query, str(options)): _comparable(JsonlStore(root).search(query, **options))
                for query, options in QUERIES}
    assert any(expected.values())

    def same_hits(store: JsonlStore) -> None:
        named = set()
        for query, options in QUERIES:
            hits = store.search(query, **options)
            assert _comparable(hits) == expected[query, str(options)], (query, options)
            named |= {hit.session for hit in hits if hit.session_id.endswith("feed")}
        assert named == {odd}

    newest = max(path.stat().st_mtime_ns for path in odd_root.rglob("*.jsonl"))
    os.utime(odd, ns=(newest + 1, newest + 1))  # the helper's (the newest file is scanned here)
    os.utime(next(odd_root.glob("--srv-app--/*.jsonl")), ns=(newest + 2, newest + 2))
    monkeypatch.setattr(_jsonl_search, "INDEX_BUDGET", 0.0)  # scanned, with a helper too
    monkeypatch.setattr(_jsonl_search, "INDEX_BYTES", 0)
    monkeypatch.setattr(_jsonl_search, "PARALLEL_SCAN_BYTES", 1)
    monkeypatch.setattr(_jsonl_search, "HELPER_START", 0)
    for processes in (1, 2):
        monkeypatch.setattr(_helpers, "processes", lambda requested=None: processes)
        same_hits(JsonlStore(odd_root))
    monkeypatch.undo()
    same_hits(JsonlStore(odd_root))  # indexed by the search, then from the index
    same_hits(JsonlStore(odd_root))
    names = {os.fsdecode(row[0]) for row in sqlite3.connect(index_path(odd_root)).execute(
        "SELECT path FROM files")}
    assert os.path.relpath(odd, odd_root) in names
    shutil.rmtree(odd_root / ".sessiontree-cache")
    JsonlStore(odd_root).build_search_index()
    same_hits(JsonlStore(odd_root))
    done = CliRunner().invoke(cli, ["search", "handshake", str(odd_root), "--json"])
    assert done.exit_code == 0, done.output
    assert {hit["session"] for hit in json.loads(done.output)} == {odd}


def test_a_helpers_share_is_not_bounded_by_the_command_lines_size(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper's share of files larger than a command line may be (as ten thousand files per
    helper are) still reaches it: the helper scans it, with the candidates of one process."""
    from sessiontree import _helpers
    from sessiontree.stores import _jsonl_search

    files = [_jsonl_search.Pending(str(path), 0, None, None, path.stat().st_mtime_ns,
                                   path.stat().st_size) for path in sorted(root.rglob("*.jsonl"))]
    name = str(root / ("gone" * 50))
    limit = os.sysconf("SC_ARG_MAX")
    gone = [_jsonl_search.Pending(f"{name}{n}.jsonl", 0, None, None, 0, 1 << 20)  # (none there)
            for n in range(2 * limit // len(name) + 1)]
    query = parse_query("handshake")
    monkeypatch.delenv("SESSIONTREE_PROCESSES", raising=False)
    expected = _jsonl_search._scan(files, query, role=None, since=0, cwd=None)
    assert len(expected) == 2

    monkeypatch.setattr(_jsonl_search, "PARALLEL_SCAN_BYTES", 1)
    monkeypatch.setattr(_jsonl_search, "HELPER_START", 0)
    monkeypatch.setattr(_helpers, "processes", lambda requested=None: 2)
    shares = _jsonl_search._shares(files + gone, 2)
    assert len(_jsonl_search._task_encoder.encode(shares[1])) > limit
    answers: list[bytes | None] = []
    real_answer = _helpers.answer
    monkeypatch.setattr(_helpers, "answer", lambda helper, **options: answers.append(
        real_answer(helper, **options)) or answers[-1])
    assert _jsonl_search._scan(files + gone, query, role=None, since=0, cwd=None) == expected
    assert len(answers) == 1 and answers[0] is not None  # the helper started and answered


def test_a_search_while_another_process_holds_the_index_scans_instead(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index another process keeps locked is neither waited for without end nor taken for
    damaged: the search scans the files, and the index is kept."""
    from sessiontree.stores import _jsonl_search

    store = JsonlStore(root)
    expected = _comparable(store.search("handshake"))
    with Session.open(next((root / "--srv-app--").glob("*.jsonl"))) as session:
        session.append_message(UserMessage.of("a handshake on the way out"))
    monkeypatch.setattr(_jsonl_search, "_BUSY_TIMEOUT", 0.05)
    inode = os.stat(index_path(root)).st_ino
    holder = sqlite3.connect(index_path(root), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        found = _comparable(store.search("handshake"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert found[1:] == expected and "way out" in found[0]["snippet"]
    assert os.stat(index_path(root)).st_ino == inode  # kept, not deleted as damaged
    assert _comparable(store.search("handshake")) == found


def test_a_search_that_has_nothing_to_write_takes_no_write_lock(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While new files are left to the scan, and once everything is indexed, a search writes
    nothing to the index: another process's write neither stalls it nor sends it to a scan
    without the index; the files' digest is kept only when the index holds every file."""
    from sessiontree.stores import _jsonl_search

    def digests() -> list[bytes]:
        with sqlite3.connect(index_path(root)) as conn:
            return [row[0] for row in conn.execute("SELECT digest FROM state")]

    store = JsonlStore(root)
    monkeypatch.setattr(_jsonl_search, "INDEX_BYTES", 0)  # new files scanned, not indexed
    expected = _comparable(store.search("handshake"))
    assert len(expected) == 2 and not _index_rows(root) and digests() == []
    monkeypatch.setattr(_jsonl_search, "_BUSY_TIMEOUT", 0.05)
    opened: list[str] = []
    real_connect = _jsonl_search._connect
    monkeypatch.setattr(_jsonl_search, "_connect",
                        lambda path: opened.append(path) or real_connect(path))
    for build in (False, True):
        if build:
            store.build_search_index()
            assert len(_index_rows(root)) == len(list(root.rglob("*.jsonl")))
            assert len(digests()) == 1
        kept = digests()
        opened.clear()
        holder = sqlite3.connect(index_path(root), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process writing
        try:
            assert _comparable(store.search("handshake")) == expected
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert ":memory:" not in opened  # the index (kept from the last search), not a scan
        assert digests() == kept


def test_a_search_reuses_the_connection_to_the_index_while_it_is_that_file(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process's searches of a folder share one connection to its index (kept idle between
    them); an index replaced by another file (another process rebuilt it) is opened again,
    and one changed to another version is built again, as from a new process."""
    from sessiontree.stores import _jsonl_search

    store = JsonlStore(root)
    expected = _comparable(store.search("handshake"))
    assert expected
    opened: list[str] = []
    real_connect = _jsonl_search._connect
    monkeypatch.setattr(_jsonl_search, "_connect",
                        lambda path: opened.append(path) or real_connect(path))
    assert _comparable(store.search("handshake")) == expected and opened == []
    index = Path(index_path(root))
    copy = index.with_name("copy.db")
    copy.write_bytes(index.read_bytes())
    os.replace(copy, index)
    assert _comparable(store.search("handshake")) == expected and opened == [str(index)]
    assert _comparable(store.search("handshake")) == expected and opened == [str(index)]
    with sqlite3.connect(index) as conn:
        conn.execute("PRAGMA user_version = 5")
    assert _comparable(store.search("handshake")) == expected
    with sqlite3.connect(index) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _VERSION


def test_a_line_is_measured_again_when_its_file_is_not_as_indexed(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hit's relevance takes its entry's size from the index row only while the line's file
    is the file indexed (device, inode, size, mtime): one changed after the index was brought
    up to date (here an append that the refresh did not see) has its lines' sizes counted
    again, so rows that no longer hold them change nothing; while it is, the rows' sizes are
    what its scores take (rows set to 0 change them)."""
    from sessiontree.stores import _jsonl_search

    store = JsonlStore(root)
    expected = {query: _comparable(store.search(query)) for query in ("handshake", "error")}
    assert all(expected.values())
    with sqlite3.connect(index_path(root)) as conn:  # rows of other lines (their bounds
        conn.execute("UPDATE entries SET size = 0")  # still above: every line can rank)
    monkeypatch.setattr(_jsonl_search, "refresh", lambda conn, root, **options: [])
    # while the files are as indexed, the rows' sizes are what the scores take
    for query, hits in expected.items():
        scores = [hit["score"] for hit in _comparable(store.search(query))]
        assert scores != [hit["score"] for hit in hits], query
    for path in root.rglob("*.jsonl"):
        with open(path, "ab") as stream:
            stream.write(b"\n")
    for query, hits in expected.items():
        assert _comparable(store.search(query)) == hits, query


def test_a_hits_relevance_for_words_is_its_index_rows_while_its_file_is_as_indexed(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """For a query of words alone an index row's bound is the relevance itself, so while a
    line's file is the file indexed its hit takes the row's (counts raised in the rows raise
    the scores) and only its snippet's spans are looked for; a phrase's relevance is still
    the matcher's (the rows only bound it), and a file changed since it was indexed has its
    lines judged whole again."""
    from sessiontree.stores import _jsonl_search

    store = JsonlStore(root)
    queries = ("error", "heartbeat interval", '"close handshake"')
    expected = {query: _comparable(store.search(query, limit=500)) for query in queries}
    assert all(expected.values())
    with sqlite3.connect(index_path(root)) as conn:
        conn.execute("""UPDATE entries SET counts = '{"error":9999,"heartbeat":9999}'""")
    monkeypatch.setattr(_jsonl_search, "refresh", lambda conn, root, **options: [])
    for query in queries[:2]:
        hits = _comparable(store.search(query, limit=500))
        old = {hit["entry_id"]: hit for hit in expected[query]}
        assert sorted(old) == sorted(hit["entry_id"] for hit in hits), query
        for hit in hits:  # (the same snippets: only the scores come from the rows)
            assert hit["score"] > old[hit["entry_id"]]["score"]
            assert (hit["snippet"], hit["marks"]) == (old[hit["entry_id"]]["snippet"],
                                                      old[hit["entry_id"]]["marks"])
    assert _comparable(store.search(queries[2], limit=500)) == expected[queries[2]]
    for path in root.rglob("*.jsonl"):
        with open(path, "ab") as stream:
            stream.write(b"\n")
    for query, hits in expected.items():
        assert _comparable(store.search(query, limit=500)) == hits, query


def test_a_folder_index_rows_counts_are_read_as_json_reads_them(root: Path) -> None:
    """The folder's search reads each row's count of a word as text (its key's place in the
    JSON the index wrote), not by parsing the JSON: the same counts as ``json_extract`` for
    every row, for words held once, many times, not at all, and outside ASCII."""
    from sessiontree._search import fts_counts, fts_query
    from sessiontree.stores._jsonl_search import _QUERY, _counts

    JsonlStore(root).build_search_index()
    with sqlite3.connect(index_path(root)) as conn:
        assert conn.execute("SELECT count(*) FROM entries WHERE counts LIKE '%:1_%'"
                            ).fetchone()[0]  # (some word held ten times or more)
        for query in ("error", "the", "error the", "w\u00f6rds \u00fcn\u00efc\u00f6d\u00e9",
                      "reconnect timer"):
            words = parse_query(query).words()
            match = {"match": fts_query(words)["match"], "since": 0, "role": None,
                     "cwd": None}
            parsed = conn.execute(_QUERY.format(counts=fts_counts("e.counts", len(words))),
                                  {**fts_query(words), **match}).fetchall()
            sql, params = _counts(words)
            read = conn.execute(_QUERY.format(counts=sql), {**match, **params}).fetchall()
            assert parsed and read == parsed, query


def _one_message_session(path: Path, text: str, session_id: str) -> None:
    lines = [{"type": "session", "version": 3, "id": session_id, "cwd": "/w",
              "timestamp": "2026-03-01T10:00:00.000Z"},
             {"type": "message", "id": "m1", "parentId": None,
              "timestamp": "2026-03-01T10:00:00.000Z",
              "message": {"role": "user", "content": text, "timestamp": 1772359200000}}]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))


@pytest.mark.parametrize(("text", "query"), [("the \u017ftop sign, foo", "stop foo"),
                                             ("a\u19b0b foo", "a foo")])
def test_a_folder_index_finding_more_than_the_words_gives_no_hit(
        tmp_path: Path, text: str, query: str) -> None:
    """FTS5 finds words these words are not (it folds a long s to an s, splits a word at some
    letters): an entry it finds for a query of words is a hit only when the text holds every
    word, however exact its row's relevance (there was a hit here, on the index alone)."""
    _one_message_session(tmp_path / "s" / "p" / "a.jsonl", text,
                         "0195a000-0000-7000-8000-0000000000a1")
    store = JsonlStore(tmp_path / "s")
    store.build_search_index()
    assert store.search(query) == store.search(query) == []
    assert store.search(query.split()[-1])  # (the entry is indexed, and found by its word)


def test_two_files_of_one_session_id_keep_their_own_relevance(tmp_path: Path) -> None:
    """Two copies of a session that went on differently (one id, lines at the same places)
    each rank by their own row: a hit's relevance is the one its text gives."""
    from sessiontree._search import _Matcher

    texts = ["foo foo foo foo", "foo bar baz qux"]
    for name, text in zip("ab", texts):
        _one_message_session(tmp_path / "s" / "p" / f"{name}.jsonl", text,
                             "0195a000-0000-7000-8000-0000000000b1")
    store = JsonlStore(tmp_path / "s")
    store.build_search_index()
    expected = sorted(judged[0] for judged in map(_Matcher(parse_query("foo")).judge, texts)
                      if judged is not None)
    assert sorted(hit.score for hit in store.search("foo")) == expected


def test_the_index_serves_the_folder_reached_by_another_path(root: Path, tmp_path: Path) -> None:
    """The index names files relative to its folder: the same folder through a link is not
    indexed again (a different root string once made every file look gone and new)."""
    expected = _comparable(JsonlStore(root).search("handshake"))
    before = _index_rows(root)
    link = tmp_path / "link"
    link.symlink_to(root)
    hits = JsonlStore(link).search("handshake")
    assert _comparable(hits) == expected and hits[0].session.startswith(str(link))
    assert _index_rows(root) == before


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from(list("abAB _-.1\u0130K\u00e9\u0307\u212a\u03c3\u03a3\u03c2")), max_size=20),
       st.lists(st.sampled_from(["a", "ab", "b", "1", "\u00e9", "i", "k", "\u03c3", "\u03c2", "ab1"]),
                min_size=1, max_size=3))
def test_a_candidate_holds_every_word_among_its_words(text: str, words: list[str]) -> None:
    """The candidate test looks each word up where it is whole, without listing the text's
    words: the same answer as the words listed."""
    from sessiontree._search import holds_words, tokens

    assert holds_words(text, words) == (set(words) <= set(tokens(text)))


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from(list("abAB _-.1\u0130K\u00e9\u0307\u212a\u03c3\u03a3\u03c2")), max_size=30),
       st.lists(st.sampled_from(["a", "ab", "b", "1", "\u00e9", "i", "k", "\u03c3", "\u03c2", "ab1",
                                 '"a b"', '"ab a"', '"i k"']), min_size=1, max_size=3))
@example("\u0130A_A", ["a"])  # (one "a": "\u0130a" is a word, in the index as for the matcher)
@example("a a b", ["a"])  # (words held more than once: few of the texts drawn are candidates)
@example("ab a-AB.a ab", ['"ab a"', "b"])
@example("\u03c3 \u03c2 \u03a3a \u03a3", ["\u03c3"])
def test_an_entry_ranks_no_higher_than_its_index_row_bounds_it(text: str, terms: list[str]) -> None:
    """What a database or a folder's index keeps of an entry (its size, its words' counts)
    bounds the relevance the matcher gives it (so reading lines in the order of their bounds
    finds the best hits first), and is that relevance for a query of words alone (a capital I
    with a dot too: the index's words keep it a letter, as the matcher does)."""
    from sessiontree._search import _patterns, _spans, bounds, entry_terms, holds_words, score

    query = parse_query(" ".join(terms))
    if not holds_words(text, query.words()):  # not a candidate: no index row is read
        return
    size, counts = entry_terms(text)
    highest = bounds(query)([counts.get(word, 1) for word in query.words()], size)
    assert _folder_bound(text, query) == highest  # what the folder's index row gives
    spans = _spans(text, _patterns(query))
    if spans is not None:
        assert score(len(spans), len(text.split())) <= highest
        if all(len(term) == 1 for term in query.terms):
            assert score(len(spans), size) == highest


_ODD = list("aeAE _-.1\u0130K\u212a\u00e9\u00c9\u0307\u03a3\u2713\u00a0\u2028\u3000\x1c\x1f\t\n"
            "\ud800\U0001f600")


@settings(max_examples=1000, deadline=None)
@given(st.text(st.sampled_from(_ODD), max_size=40),
       st.lists(st.sampled_from(["a", "ae", "e", "1", "k", "ea1", "\u00e9", '"a e"']),
                min_size=1, max_size=3))
@example("a\u0130a A\u00e9a a\u2713 \u212aa ka", ["a"])
@example("K\u212a k", ["k"])
@example("e" + "a\u00a0" * 200 + " a", ["a"])  # (a snippet shows the spans before the 160th)
def test_the_matcher_finds_the_spans_and_relevance_of_letter_by_letter_matching(
        text: str, terms: list[str]) -> None:
    """A query of single ASCII words is matched in the text's UTF-8 bytes (no str.lower, no
    str.split of a long text): the same relevance and snippet as the text lowercased letter by
    letter, whatever the letters beside a word, the spaces and the surrogates."""
    from sessiontree._search import _Matcher, _patterns, _snippet, _spans, score

    query = parse_query(" ".join(terms))
    spans = _spans(text, _patterns(query))
    judged = _Matcher(query).judge(text)
    if spans is None:
        assert judged is None
        return
    assert judged is not None
    assert judged[0] == score(len(spans), len(text.split()))
    assert _snippet(text, judged[1]) == _snippet(text, spans)


_FILLERS = st.tuples(st.text(st.sampled_from(_ODD), max_size=12), st.integers(0, 700),
                     st.sampled_from([" ", "b", "\u00e9", ".", "a ", "\u212a"]))


@settings(max_examples=1000, deadline=None)
@given(st.lists(_FILLERS, max_size=8),
       st.lists(st.sampled_from(["a", "ae", "e", "1", "k", "ea1"]), min_size=1, max_size=3))
@example([("a", 1000, " "), ("a", 0, " ")], ["a"])  # (the first span at the prefix's end)
@example([("", 600, "b"), (" a", 40, " "), ("a", 0, " ")], ["a"])  # (a span past the first
@example([("", 637, "b"), (" ab a", 0, " ")], ["a"])  # prefix, a word cut by its end)
@example([("", 530, " "), ("", 200, "e"), (" ", 110, "e")], ["e" * 110])  # (a long word cut)
@example([("a", 900, " "), ("e", 0, " ")], ["a", "e", "1"])  # (a term missing: no snippet)
@example([("\u0130a \u0130", 700, "\u03a3"), ("a", 0, " ")], ["a"])  # (kept whole, sigmas)
def test_a_snippet_found_in_the_texts_start_is_the_whole_texts(
        pieces: list[tuple[str, int, str]], terms: list[str]) -> None:
    """When an index row gives a hit's relevance, its snippet's spans are looked for in a
    prefix of its text that grows until they are all in it: the same snippet as the whole
    text judged, wherever the spans are (at a prefix's end, after long fillers)."""
    from sessiontree._search import _Matcher, _snippet

    text = "".join(head + filler * count for head, count, filler in pieces)
    matcher = _Matcher(parse_query(" ".join(terms)))
    judged, shown = matcher.judge(text), matcher.shown(text)
    assert (shown is None) == (judged is None)  # (every term looked for: the index's
    if judged is not None and shown is not None:  # words are not all of these words)
        assert _snippet(text, shown) == _snippet(text, judged[1])


@settings(max_examples=1000, deadline=None)
@given(st.text(st.sampled_from([*_ODD, *"\u03c3\u00df\u2014:'\u0345"]), max_size=40))
@example("\u0391\u03a3.\u0391")  # (a final sigma by the whole text: "\u0391\u03a3" alone ends in one)
@example("a\u212a-\u00e9\u2713b 9 B\u00c9b \u00e9")  # (a word of a chunk is an ASCII chunk's too)
def test_an_index_counts_the_words_the_matcher_sees(text: str) -> None:
    """What every index keeps of an entry (its size, each word's count) is counted in chunks of
    its UTF-8 bytes split at ASCII punctuation and spaces: the same as the whole text's words,
    whatever letters are beside them (sigmas, letters that lowercase to ASCII or to two,
    surrogates)."""
    from collections import Counter

    from sessiontree._search import entry_terms, tokens

    size, counts = entry_terms(text)
    assert (size, counts) == (len(text.split()), dict(Counter(tokens(text))))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.sampled_from(list("ab c\u00e9")), max_size=12), max_size=6),
       st.integers(min_value=1, max_value=20000))
def test_a_redis_batch_holds_each_entrys_word_counts_at_its_place(texts: list[str],
                                                                   first: int) -> None:
    """The postings an append adds (each entry's word counts, one varint or two per entry and
    word, at places past 63 too) are what a search decodes, and what a rewrite encodes."""
    from sessiontree.stores import _redis_search as rs

    lines = [json.dumps({"type": "message", "id": f"e{n}", "parentId": None,
                         "timestamp": "2026-03-01T10:00:00.000Z",
                         "message": {"role": "user", "content": text}}).encode()
             for n, text in enumerate(texts)]
    expected: dict[str, dict[int, int]] = {}
    for place, line in enumerate(lines, start=first):
        for word, count in rs.terms(line)[1].items():
            expected.setdefault(word, {})[place] = count
    found = rs.batch(lines, first).postings
    assert found == {word: rs.encode(postings) for word, postings in expected.items()}
    assert {word: rs.decode(value) for word, value in found.items()} == expected


def _folder_bound(text: str, query: Any) -> float:
    """The bound a folder's index row gives an entry holding ``text`` (indexed as a search
    indexes it, read back by the search's own query: FTS5 must find it)."""
    import tempfile

    from sessiontree._search import bounds, fts_counts, fts_query, row_counts
    from sessiontree.stores._jsonl_search import _QUERY, build

    with tempfile.TemporaryDirectory() as folder:
        header = {"type": "session", "version": 3, "id": "s", "cwd": "/x",
                  "timestamp": "2026-03-01T09:59:00.000Z"}
        entry = {"type": "message", "id": "e", "parentId": None,
                 "timestamp": "2026-03-01T10:00:00.000Z",
                 "message": {"role": "user", "content": text, "timestamp": 1772359200000}}
        Path(folder, "2026-03-01T09-59-00-000Z_s.jsonl").write_text(
            f"{json.dumps(header)}\n{json.dumps(entry)}\n", "utf-8")
        build(folder)
        words = query.words()
        with sqlite3.connect(index_path(folder)) as conn:
            ((*_, size, counts),) = conn.execute(
                _QUERY.format(counts=fts_counts("e.counts", len(words))),
                {**fts_query(words), "since": 0, "role": None, "cwd": None}).fetchall()
        conn.close()
    return bounds(query)(row_counts(counts), size)


def _crowded(folder: Path) -> None:
    """Three sessions whose 1,500 entries all hold "albatross" (more than an index hands over
    for ranking), seven entries to a time, the last two at the same times (so the most
    recent thousand end amid entries of one time, in both)."""
    folder.mkdir(parents=True, exist_ok=True)
    for number, hour in enumerate((12, 11, 11)):
        session_id = f"0195a000-0000-7000-8000-00000000c0{number:02d}"
        header = {"type": "session", "version": 3, "id": session_id, "cwd": "/crowd",
                  "timestamp": f"2026-03-03T{hour:02d}:00:00.000Z"}
        lines, parent = [json.dumps(header)], None
        for n in range(500):
            words = ["albatross"] * (1 + (n * 7 + number) % 4) + ["filler"] * ((n * 13) % 9)
            if n % 5 == 0:
                words += ["albatross", "migrates"]
            if n % 3 == 0:  # the words again, not as the phrase: its bound is not its relevance
                words += ["migrates", "filler", "albatross"]
            entry = {"type": "message", "id": f"c{number}{n:06d}", "parentId": parent,
                     "timestamp": f"2026-03-03T{hour:02d}:{n // 7 // 60:02d}:{n // 7 % 60:02d}.000Z",
                     "message": {"role": ("user", "assistant")[n % 2],
                                 "content": " ".join(words), "timestamp": 1772528400000}}
            lines.append(json.dumps(entry))
            parent = entry["id"] if n % 50 else None  # a new root now and then: off-branch hits
        (folder / f"2026-03-03T{hour:02d}-00-00-000Z_{session_id}.jsonl").write_text(
            "\n".join(lines) + "\n", "utf-8")


def test_databases_rank_in_the_database_as_the_matcher_ranks(tmp_path: Path,
                                                               fresh_postgres_url: str,
                                                               request: pytest.FixtureRequest
                                                               ) -> None:
    """With more candidates than an index hands over, ties of time at the edge of the most
    recent ones, phrases (whose counts only bound the
    relevance) and filters, the databases (which read only the lines that can rank) give the
    hits of the stores that read every candidate."""
    folder = tmp_path / "crowd"
    _crowded(folder / "--crowd--")
    db = f"sqlite:///{tmp_path / 'crowd.db'}"
    assert copy_sessions(str(folder), db).copied
    assert copy_sessions(str(folder), fresh_postgres_url).copied
    memory = MemoryStore()
    for path in sorted(folder.rglob("*.jsonl")):
        header, *lines = path.read_bytes().splitlines()
        memory.import_lines(header, lines)
    redis_urls = {kind: redis_store_url(request, kind) for kind in ("redis", "redis-cluster")}
    for url in redis_urls.values():
        assert copy_sessions(db, url).copied
    stores = {"jsonl": JsonlStore(folder), "memory": memory,
              "sqlite": SqliteStore.open(tmp_path / "crowd.db"),
              "postgres": PostgresStore.from_url(fresh_postgres_url),
              **{kind: RedisStore.from_url(url) for kind, url in redis_urls.items()}}
    queries: list[tuple[str, dict[str, Any]]] = [
        ("albatross", {}), ("albatross", {"limit": 300}), ('"albatross migrates"', {}),
        ('albatross "migrates"', {"limit": 40}), ("albatross filler", {"role": "assistant"}),
        ("albatross", {"since": _dt.datetime(2026, 3, 3, 11, 0, 30, tzinfo=_dt.timezone.utc)})]
    try:
        for query, options in queries:
            expected = _comparable(stores["jsonl"].search(query, **options))
            assert len(expected) == options.get("limit", 20)
            assert any(not hit["on_current_branch"] for hit in expected) or "limit" not in options
            for name, store in stores.items():
                assert _comparable(store.search(query, **options)) == expected, (query, name)
    finally:
        for store in stores.values():
            store.close()
