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

from sessiontree import Session, UserMessage
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
               "insert_version", "notify"}
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
