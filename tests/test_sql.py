"""What the database stores promise beyond the conformance suite: versioned idempotent
migrations, paths from any schema version, statements keyed by session (single-shard on
Citus), processes appending to one session, and appends that cannot land where asked."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiontree import Custom, Session, UserMessage
from sessiontree.errors import ConcurrentModification
from sessiontree.stores._sql_common import dialect
from sessiontree.testing.generate import generate_session
from sessiontree.transfer import copy_sessions


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    return str(request.getfixturevalue("fresh_postgres_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[Any]:
    from sessiontree.stores.url import open_store

    with open_store(store_url) as opened:
        yield opened


def test_migrations_are_versioned_and_idempotent(store: Any) -> None:
    versions = len(store.dialect.migrations)
    assert versions >= 2 and store.schema_version() == versions
    assert store.setup() == versions  # again: nothing to apply, nothing breaks
    with store._reading() as conn:
        rows = conn.execute("SELECT v FROM sessiontree_migrations ORDER BY v").fetchall()
    assert [r[0] for r in rows] == list(range(1, versions + 1))


def test_paths_of_rows_without_depths_are_read_whole(store: Any, tmp_path: Path) -> None:
    made = generate_session(tmp_path / "g.jsonl", 1500, seed=4, branch_every=100,
                            compact_every=400)
    copy_sessions(made.path, store.url)
    with Session.open(made.path) as source:
        leaves = source.leaves()
        expected = {leaf: (source.path_ids(leaf), source.build_context(leaf).to_json())
                    for leaf in leaves}
    with Session(store.open_log(made.session_id)) as stored:
        for leaf, (path, context) in expected.items():  # chunked reads from the depths
            assert stored.path_ids(leaf) == path
            assert stored.build_context(leaf).to_json() == context
    with store._transaction() as conn:  # as rows stored before schema version 2 are
        conn.execute("UPDATE sessiontree_entries SET depth = NULL, last_compaction = NULL, "
                     "last_thinking = NULL, last_model = NULL")
    with Session(store.open_log(made.session_id)) as stored:
        for leaf, (path, context) in expected.items():
            assert stored.path_ids(leaf) == path
            assert stored.build_context(leaf).to_json() == context


def test_every_statement_is_parameterized_and_keyed_by_session() -> None:
    fan_out = {"list", "list_cwd", "older_than", "ids", "create_migrations", "version",
               "insert_version", "notify",
               "search", "search_word", "search_lines", "backfill"}  # across sessions: every shard's rows joined by session_id
    for driver in ("sqlite", "postgres"):
        statements = dialect(driver).statements
        for name, sql in statements.items():
            assert not re.search(r"'[^']*'", sql.replace("'label'", "").replace(
                "'sessiontree'", "")), f"{name}: a literal value in SQL"
            if name in fan_out:
                continue
            placeholder = ":sid" if driver == "sqlite" else "%(sid)s"
            for table_use in re.finditer(r"sessiontree_(entries|sessions) (\w+)?", sql):
                alias = table_use.group(2)
                assert placeholder in sql, f"{driver} {name}: not keyed by session_id"
                if alias and alias.upper() not in ("WHERE", "SET", "ON", "VALUES", "ORDER"):
                    assert f"{alias}.session_id = {placeholder}" in sql, \
                        f"{driver} {name}: {alias} is not keyed by session_id"


_WRITER = """
import sys
import time
from sessiontree import Session, UserMessage
session = Session.open(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
for i in range(int(sys.argv[2])):
    session.append_message(UserMessage.of(f"{sys.argv[3]} {i}"))
session.close()
"""


def test_processes_appending_to_one_session_serialize(store: Any, store_url: str) -> None:
    session = Session.create(cwd="/w", store=store)
    root = session.append_message(UserMessage.of("root"))
    url = f"{store_url}#{session.id}"
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, url, "25", f"w{n}"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for n in range(4)]
    for child in writers:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in writers:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    for child in writers:
        child.communicate(timeout=60)  # closes the pipes
    assert [child.returncode for child in writers] == [0, 0, 0, 0]
    with Session(store.open_log(session.id)) as merged:
        assert len(merged) == 1 + 4 * 25 and len(set(merged.ids())) == len(merged)
        texts = {entry.id: entry.message.content[0].text  # type: ignore[union-attr]
                 for entry in merged.entries()}
        for n in range(4):  # each writer's entries form its own chain: under the leaf it saw
            mine = [i for i in merged.ids() if texts[i].startswith(f"w{n} ")]
            assert [texts[i] for i in mine] == [f"w{n} {i}" for i in range(25)]
            assert merged.entry(mine[0]).parent_id == root
            assert all(merged.entry(b).parent_id == a for a, b in zip(mine, mine[1:]))


def test_an_append_to_a_deleted_or_recreated_session_raises(store: Any) -> None:
    session = Session.create(cwd="/w", store=store)
    session.append_message(UserMessage.of("one"))
    other = Session(store.open_log(session.id))
    store.delete(session.id)
    with pytest.raises(ConcurrentModification, match="deleted"):
        other.append_message(UserMessage.of("lost?"))
    time.sleep(0.01)  # a new header time: how a re-created session is told apart
    again = Session.create(cwd="/w", store=store, session_id=session.id)
    again.append_message(UserMessage.of("a new session, the same id"))
    with pytest.raises(ConcurrentModification, match="created again"):
        session.append_message(UserMessage.of("lost?"))
    with Session(store.open_log(session.id)) as stored:
        assert len(stored) == 1


def test_lone_surrogates_are_stored_and_ids_with_one_refused(store: Any) -> None:
    from sessiontree import InvalidEntry

    with Session.create(cwd="/p\ud800", store=store) as session:
        first = session.append_message(UserMessage.of("half a pair: \ud83d"))
        session.set_label(first, "lab\udc00el")
        session.set_name("name \ud800")
        line = session.raw_line(first)
        before = list(store.export_lines(session.id)[1])
        with pytest.raises(InvalidEntry, match="lone surrogate"):
            session.extend([{"type": "custom", "id": "x\ud800", "parentId": None,
                             "timestamp": "t"}])
        assert list(store.export_lines(session.id)[1]) == before  # nothing written
    (listing,) = store.list_sessions()
    # UTF-8 columns hold U+FFFD where JSON held a lone surrogate, as JavaScript encodes it
    assert (listing.first_message, listing.name, listing.cwd) == (
        "half a pair: \ufffd", "name \ufffd", "/p\ufffd")
    with Session(store.open_log(session.id)) as again:
        assert again.raw_line(first) == line and b"\\ud83d" in line  # the line's own bytes
        assert again.label(first) == "lab\ufffdel"
        assert again.entry(first).message.content[0].text == "half a pair: \ud83d"  # type: ignore[union-attr]


NUL = "\x00"


def nul_session_file(folder: Path) -> tuple[Path, str]:
    """A valid pi session with a NUL (``\\u0000``) in its cwd, first message, label, name,
    custom type and a label's target; the path and the first entry's id."""
    with Session.create(folder, cwd=f"/p{NUL}q") as made:
        first = made.append_message(UserMessage.of(f"first{NUL}message"))
        made.append_custom(f"ext{NUL}", {"k": NUL})
        made.set_label(first, f"lab{NUL}el")
        made.extend([{"type": "label", "id": "f00dfeed", "parentId": made.leaf_id,
                      "timestamp": "2026-01-01T00:00:00.000Z", "targetId": f"gone{NUL}",
                      "label": "x"}])
        made.set_name(f"na{NUL}me")
        return Path(made.file or ""), first


def test_nul_characters_are_stored_and_the_lines_keep_their_bytes(store: Any,
                                                                   tmp_path: Path) -> None:
    """Issue 23 point 10: PostgreSQL text cannot hold NUL; a pi file holding one is copied all
    the same (its columns hold U+FFFD there, as for a lone surrogate), SQLite keeps it."""
    path, first = nul_session_file(tmp_path / "files")
    data = path.read_bytes()
    assert b"\\u0000" in data
    result = copy_sessions(str(path), store.url)
    (session_id,) = result.copied
    header, lines = store.export_lines(session_id)
    assert b"".join(line + b"\n" for line in [header, *lines]) == data  # byte for byte
    held = "\ufffd" if store.dialect.driver == "postgres" else NUL
    (listing,) = store.list_sessions()
    assert (listing.cwd, listing.first_message, listing.name) == (
        f"/p{held}q", f"first{held}message", f"na{held}me")
    assert [s.id for s in store.list_sessions(cwd=f"/p{NUL}q")] == [session_id]
    with Session(store.open_log(session_id)) as stored:
        assert stored.label(first) == f"lab{held}el" and stored.name == f"na{held}me"
        (custom,) = [e for e in stored.entries() if isinstance(e, Custom)]
        assert custom.custom_type == f"ext{NUL}"  # decoded from the line's own bytes
        assert stored.entry(first).message.content[0].text == f"first{NUL}message"  # type: ignore[union-attr]
        assert stored.labels()[first][0] == f"lab{held}el"
    with Session.open(str(path)) as source:
        assert source.label(first) == f"lab{NUL}el"  # the file itself is untouched


def test_a_session_with_nul_answers_alike_before_and_after_a_reopen(store: Any) -> None:
    from sessiontree import EntryNotFound, InvalidEntry

    held = "\ufffd" if store.dialect.driver == "postgres" else NUL
    with Session.create(cwd=f"/w{NUL}", store=store) as session:
        first = session.append_message(UserMessage.of(f"q{NUL}"))
        session.set_label(first, f"l{NUL}")
        session.append_custom(f"c{NUL}")
        session.set_name(f"n{NUL}")
        answers = (session.label(first), session.name, session.labels(), session.ids())
        assert answers[:2] == (f"l{held}", f"n{held}")
        odd_id = {"type": "custom", "id": f"x{NUL}y", "parentId": session.leaf_id,
                  "timestamp": "2026-01-01T00:00:00.000Z", "customType": "t"}
        if store.dialect.driver == "postgres":
            before = list(store.export_lines(session.id)[1])
            with pytest.raises(InvalidEntry, match="NUL") as refused:
                session.extend([odd_id])
            assert refused.value.entry_id == f"x{NUL}y"
            assert list(store.export_lines(session.id)[1]) == before  # nothing written
            with pytest.raises(EntryNotFound):
                session.entry(f"x{NUL}y")
            assert session.label(f"x{NUL}y") is None and session.path_ids(first) == [first]
        else:
            session.extend([odd_id])
            assert session.entry(f"x{NUL}y").id == f"x{NUL}y"
    with Session(store.open_log(session.id)) as again:
        assert (again.label(first), again.name, again.labels()) == answers[:3]
        assert again.ids()[:len(answers[3])] == answers[3]


def _collide_once(monkeypatch: pytest.MonkeyPatch, stored_id: str) -> list[str]:
    """The next entry id drawn is ``stored_id`` (an id the database holds), the ones after it
    drawn as usual; the list collects every id drawn (a database's index draws every append's
    ids: ``LazyIndex.new_id``)."""
    from sessiontree import _index

    draw, drawn = _index.new_entry_id, []

    def once(taken: object) -> str:
        drawn.append(stored_id if not drawn else draw(taken))
        return drawn[-1]

    monkeypatch.setattr(_index, "new_entry_id", once)
    return drawn


def _session_with_two_branches(store: Any) -> tuple[str, str, str]:
    """A stored session ``root -> aside`` and ``root -> leaf``; its id, aside's id, the leaf's
    id (a session opened again at the leaf knows only the leaf's branch: aside's id is one the
    database alone checks)."""
    with Session.create(cwd="/w", store=store) as session:
        root = session.append_message(UserMessage.of("root"))
        aside = session.append_message(UserMessage.of("aside"))
        session.branch(root)
        leaf = session.append_message(UserMessage.of("leaf"))
        return session.id, aside, leaf


def test_an_id_the_database_holds_is_drawn_again_and_the_append_lands(
        store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    session_id, aside, leaf = _session_with_two_branches(store)
    with Session(store.open_log(session_id)) as session:
        drawn = _collide_once(monkeypatch, aside)
        added = session.append_message(UserMessage.of("after a collision"))
        assert drawn[0] == aside and added == drawn[1] != aside  # refused, drawn again
    with Session(store.open_log(session_id)) as stored:
        assert len(stored) == 4 and stored.entry(added).parent_id == leaf
        assert stored.entry(aside).message.content[0].text == "aside"  # type: ignore[union-attr]


def test_the_async_postgres_store_draws_an_id_again_too(
        fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from sessiontree import AsyncPostgresStore, AsyncSession, PostgresStore

    with PostgresStore.from_url(fresh_postgres_url) as sync:
        session_id, aside, leaf = _session_with_two_branches(sync)

    async def run() -> str:
        async with AsyncPostgresStore.from_url(fresh_postgres_url) as store:
            session = await AsyncSession.open(session_id, store=store)
            try:
                return await session.append_message(UserMessage.of("after a collision"))
            finally:
                await session.aclose()

    drawn = _collide_once(monkeypatch, aside)
    added = asyncio.run(run())
    assert drawn[0] == aside and added == drawn[1] != aside
    with PostgresStore.from_url(fresh_postgres_url) as sync, \
            Session(sync.open_log(session_id)) as stored:
        assert len(stored) == 4 and stored.entry(added).parent_id == leaf


def _stored(store_url: str) -> list[Any]:
    """Every row of the store's migrations, sessions and entries tables, read by the driver
    itself, and an SQLite store's files' bytes (what an open must leave as it was)."""
    from sessiontree.stores.url import parse_location

    queries = ["SELECT v FROM sessiontree_migrations ORDER BY v",
               "SELECT session_id, header, entry_count FROM sessiontree_sessions",
               "SELECT session_id, seq, line FROM sessiontree_entries ORDER BY session_id, seq"]
    if store_url.startswith("sqlite:"):
        import sqlite3
        from contextlib import closing

        path = Path(parse_location(store_url).store)
        files = {found.name: found.read_bytes() for found in path.parent.glob(f"{path.name}*")}
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            return [files, *(conn.execute(q).fetchall() for q in queries)]
    import psycopg

    base, _, schema = store_url.rpartition("?schema=")
    with psycopg.connect(base, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{schema}"')
        return [pg.execute(q).fetchall() for q in queries]


def test_a_store_of_a_newer_schema_is_refused_and_left_as_it_was(store: Any,
                                                                 store_url: str) -> None:
    """A schema version past this code's last migration (a later sessiontree wrote it): every
    open (writable, read-only, PostgreSQL's async one) raises UnsupportedVersion naming the
    store and both versions, and writes nothing; an open went ahead before."""
    import asyncio

    from sessiontree import UnsupportedVersion
    from sessiontree.stores.url import open_store

    Session.create(cwd="/w", store=store).append_message(UserMessage.of("kept as it is"))
    known = len(store.dialect.migrations)
    with store._transaction() as conn:  # as a later sessiontree would leave it
        conn.execute(f"INSERT INTO sessiontree_migrations (v) VALUES ({known + 1})")
    store.close()
    if store_url.startswith("sqlite:"):  # (not WAL: a writable open would make it so)
        import sqlite3
        from contextlib import closing

        with closing(sqlite3.connect(store.path)) as conn:
            conn.execute("PRAGMA journal_mode = DELETE")
    before = _stored(store_url)
    said = f"{store.url}: schema version {known + 1}, newer than this sessiontree knows ({known})"
    for read_only in (False, True):
        with pytest.raises(UnsupportedVersion, match=re.escape(said)):
            open_store(store_url, read_only=read_only)
    if store_url.startswith("postgres"):
        from sessiontree import AsyncPostgresStore

        async def opened(read_only: bool) -> None:
            async with AsyncPostgresStore.from_url(store_url, read_only=read_only):
                pass

        for read_only in (False, True):
            with pytest.raises(UnsupportedVersion, match=re.escape(said)):
                asyncio.run(opened(read_only))
    assert _stored(store_url) == before
