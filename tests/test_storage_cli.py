"""Store URLs in the command and the API; copy (byte for byte through every backend), delete,
prune and tail (``sessiontree`` commands run through click's runner, real files and databases)."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessiontree import Session, SessionHeader, UserMessage
from sessiontree._json import dumps, loads
from sessiontree.cli import cli
from sessiontree.errors import (CopyIncomplete, CopyRefused, CorruptHeader, InvalidLocation,
                               ReadOnlyStore, SessionNotFound)
from sessiontree.stores.jsonl import default_session_dir, list_sessions
from sessiontree.stores.sqlite import SqliteStore
from sessiontree.stores.url import open_store, parse_location
from sessiontree.testing.generate import generate_folder
from sessiontree.transfer import CopyResult, copy_sessions


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"  # an absolute path after three slashes: four in all


def test_urls_parse_as_sqlalchemy_does() -> None:
    assert parse_location("sqlite:///rel.db#abc") == ("sqlite", "rel.db", "abc", "rwc")
    assert parse_location("sqlite:////abs/x.db") == ("sqlite", "/abs/x.db", None, "rwc")
    assert parse_location("sqlite:////abs/x.db?mode=ro#abc") == ("sqlite", "/abs/x.db", "abc",
                                                                 "ro")
    assert parse_location("postgresql://u@h/db?schema=s#id-1") == (
        "postgres", "postgresql://u@h/db?schema=s", "id-1", "rwc")
    assert parse_location("plain/file.jsonl") == ("jsonl", "plain/file.jsonl", None, "rwc")
    for bad in ("sqlite://x.db", "sqlite:///x.db#../../etc", "postgresql://h/db#a/b",
                "sqlite:///x.db?mode=memory", "sqlite:///x.db?cache=shared"):
        with pytest.raises(InvalidLocation):
            parse_location(bad)


def test_sqlite_url_modes_open_the_file_named_and_create_only_with_rwc(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    for mode in ("ro", "rw"):  # a missing file: named in the error, nothing created
        with pytest.raises(SessionNotFound, match="no such database file") as missing:
            open_store(f"{sqlite_url(db)}?mode={mode}")
        assert str(db) in str(missing.value)
        assert os.listdir(tmp_path) == []
    with open_store(f"{sqlite_url(db)}?mode=rwc") as store:
        session = Session.create(cwd="/w", store=store)
        kept = session.append_message(UserMessage.of("kept"))
    with Session.open(f"{sqlite_url(db)}?mode=rw#{session.id}") as writer:
        writer.append_message(UserMessage.of("an existing file, written"))
    with Session.open(f"{sqlite_url(db)}?mode=ro#{session.id}") as reader:
        assert len(reader) == 2 and reader.entry(kept).parent_id is None
        with pytest.raises(ReadOnlyStore):
            reader.append_message(UserMessage.of("refused"))
    code, _, err = run("delete", "--yes", f"{sqlite_url(db)}?mode=ro#{session.id}")
    assert code != 0 and "read-only" in err
    assert sorted(p.name for p in tmp_path.iterdir() if "?" in p.name) == []
    with open_store(sqlite_url(db), read_only=True) as store:
        assert store.session_ids() == [session.id]


def test_a_read_only_sqlite_url_is_reported_as_such(tmp_path: Path) -> None:
    """A store opened by ``?mode=ro``: its repr says read-only, a session's repr names its
    address (not "memory"), a write is refused naming the store's address, and ``ls`` lists
    the sessions' addresses."""
    db = tmp_path / "x.db"
    with open_store(sqlite_url(db)) as store:
        session = Session.create(cwd="/w", store=store)
        session.append_message(UserMessage.of("kept"))
        assert repr(store) == f"<SqliteStore {sqlite_url(db)}>"
    with open_store(f"{sqlite_url(db)}?mode=ro") as store:
        assert repr(store) == f"<SqliteStore {sqlite_url(db)} read-only>"
    with Session.open(f"{sqlite_url(db)}?mode=ro#{session.id}") as reader:
        assert repr(reader).startswith(f"<Session {session.id} {sqlite_url(db)}#{session.id} ")
        with pytest.raises(ReadOnlyStore) as refused:
            reader.append_message(UserMessage.of("refused"))
        assert str(refused.value).startswith(f"{sqlite_url(db)}: the store was opened read-only")
    code, out, _ = run("ls", f"{sqlite_url(db)}?mode=ro")
    assert code == 0 and f"{sqlite_url(db)}#{session.id}" in out


def test_jsonl_sqlite_postgres_jsonl_gives_back_the_same_files(tmp_path: Path,
                                                              postgres_url: str) -> None:
    made = generate_folder(tmp_path / "pi", 6, seed=5, min_entries=20, max_entries=400)
    db = sqlite_url(tmp_path / "copy.db")
    code, out, err = run("copy", str(tmp_path / "pi"), db)
    assert code == 0, err
    assert "copied 6 session(s)" in out
    assert run("copy", db, postgres_url)[0] == 0
    back = tmp_path / "back"
    assert run("copy", postgres_url, str(back))[0] == 0
    for session in made:  # in pi's layout: the folder of the session's cwd
        original = Path(session.path)
        returned = back / default_session_dir(session.cwd, "").name / original.name
        assert returned.read_bytes() == original.read_bytes()
        assert stat.S_IMODE(returned.stat().st_mode) == 0o600
        assert stat.S_IMODE(returned.parent.stat().st_mode) == 0o700
    # again: everything is there with the same bytes, so nothing is copied
    code, out, _ = run("copy", str(tmp_path / "pi"), db)
    assert code == 0 and "copied 0 session(s)" in out and "6 already there" in out


def test_one_session_by_url_and_the_commands_that_read_it(tmp_path: Path) -> None:
    (made,) = generate_folder(tmp_path / "pi", 1, seed=9, min_entries=300, max_entries=300)
    db = sqlite_url(tmp_path / "one.db")
    result = copy_sessions(made.path, db)
    assert result.copied == [made.session_id]
    url = f"{db}#{made.session_id}"
    for command in (["tree", "--json"], ["context", "--json"]):
        code, ours, err = run(*command, url)
        assert code == 0, err
        code, theirs, _ = run(*command, made.path)
        assert ours == theirs
    code, out, _ = run("ls", "--json", db)
    (listing,) = loads(out)
    code, out, _ = run("ls", "--json", str(tmp_path / "pi"))
    (from_file,) = loads(out)
    assert listing["path"] == url
    for key in ("id", "cwd", "name", "created", "modified_ms", "message_count", "entry_count",
                "first_message"):
        assert listing[key] == from_file[key], key
    code, _, err = run("tree", f"{db}#no-such-session")
    assert code == 1 and "no session no-such-session" in err
    code, _, err = run("tree", db)
    assert code == 2 and "#SESSION_ID" in err


def test_copy_refuses_what_it_would_not_reproduce(tmp_path: Path) -> None:
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b'{"type":"session","version":3,"id":"t1","timestamp":"2025-01-01T00:00:00'
                     b'.000Z","cwd":"/"}\n{"type":"message","id":"a","parentId":null,"timestamp"'
                     b':"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"x"}}\n{"typ')
    with pytest.raises(CopyRefused, match="repair"):
        copy_sessions(str(torn), sqlite_url(tmp_path / "x.db"))
    with SqliteStore.open(tmp_path / "x.db") as store:
        assert store.session_ids() == []


def test_copies_at_once_into_one_store_skip_what_another_stored(
        tmp_path: Path, backend_kind: str, request: pytest.FixtureRequest) -> None:
    """Issue 23 point 12: a copy stored a session another copy stored meanwhile, then exited 1
    with DuplicateId and no summary."""
    from sessiontree.testing.crash import race_copies

    made = generate_folder(tmp_path / "pi", 24, seed=9, min_entries=5, max_entries=40)
    target = {"jsonl": str(tmp_path / "dst"), "sqlite": sqlite_url(tmp_path / "dst.db")}.get(
        backend_kind) or str(request.getfixturevalue("fresh_postgres_url"))
    ended = race_copies(str(tmp_path / "pi"), target, 3)
    assert [copier.status for copier in ended] == [0, 0, 0], [c.stderr for c in ended]
    assert all(copier.copied is not None and copier.copied + (copier.skipped or 0) == 24
               for copier in ended)
    assert sum(copier.copied or 0 for copier in ended) == 24  # each session stored once
    back = tmp_path / "back"
    copy_sessions(target, str(back))
    project = "." if backend_kind == "jsonl" else default_session_dir(made[0].cwd, "").name
    for session in made:
        assert (back / project / Path(session.path).name).read_bytes() == \
            Path(session.path).read_bytes()


def test_a_copy_onto_other_content_copies_the_rest_and_says_what_it_did(tmp_path: Path) -> None:
    made = generate_folder(tmp_path / "pi", 3, seed=2, min_entries=5, max_entries=20)
    db = sqlite_url(tmp_path / "d.db")
    copy_sessions(made[0].path, db)
    with SqliteStore.open(tmp_path / "d.db") as store:  # the same id, other content
        with Session.create(cwd="/elsewhere", store=store,
                            session_id=made[1].session_id) as other:
            other.append_message(UserMessage.of("not the source's"))
        theirs = store.export_lines(other.id)[0]
    code, out, err = run("copy", str(tmp_path / "pi"), db)
    assert code == 1 and out == ""
    named, summary = err.splitlines()
    assert named.startswith(f"not copied: {made[1].path}: ") and "other content" in named
    assert summary == f"copied 1 session(s) to {db}; 1 already there; 1 not copied"
    with SqliteStore.open(tmp_path / "d.db") as store:
        assert sorted(store.session_ids()) == sorted(m.session_id for m in made)
        assert store.export_lines(made[1].session_id)[0] == theirs  # left as it was
        header, lines = store.export_lines(made[2].session_id)  # the one after it: copied
        assert b"".join(x + b"\n" for x in (header, *lines)) == Path(made[2].path).read_bytes()


def test_delete_and_prune(tmp_path: Path) -> None:
    generate_folder(tmp_path / "pi", 4, seed=3, min_entries=20, max_entries=40)
    db = sqlite_url(tmp_path / "p.db")
    copy_sessions(str(tmp_path / "pi"), db)
    with SqliteStore.open(tmp_path / "p.db") as store:
        listings = store.list_sessions()
    ages = [(time.time() * 1000 - item.modified_ms) / 86_400_000 for item in listings]
    cutoff = sorted(ages)[1] + 0.001  # the two newest are younger than this
    code, out, _ = run("prune", db, "--older-than", str(cutoff), "--dry-run", "--json")
    would = [row["id"] for row in loads(out)["deleted"]]
    assert code == 0 and len(would) == 2
    with SqliteStore.open(tmp_path / "p.db") as store:
        assert len(store.session_ids()) == 4  # a dry run deletes nothing
    code, out, _ = run("prune", db, "--older-than", str(cutoff))
    assert code == 0 and "deleted 2 session(s)" in out
    with SqliteStore.open(tmp_path / "p.db") as store:
        left = store.session_ids()
        assert len(left) == 2 and not set(would) & set(left)
    code, out, _ = run("delete", "--yes", f"{db}#{left[0]}")
    assert code == 0
    code, _, err = run("delete", "--yes", f"{db}#{left[0]}")
    assert code == 1 and "no session" in err
    files = sorted((tmp_path / "pi").glob("*.jsonl"))
    assert run("prune", str(tmp_path / "pi"), "--older-than", "0")[0] == 0
    assert not any(f.exists() for f in files)


def test_read_only_stores_refuse_every_write(tmp_path: Path) -> None:
    with SqliteStore.open(tmp_path / "r.db") as store:
        session = Session.create(cwd="/w", store=store)
        session.append_message(UserMessage.of("kept"))
    with SqliteStore.open(tmp_path / "r.db", read_only=True) as store:
        (session_id,) = store.session_ids()
        reader = Session(store.open_log(session_id))
        assert len(reader) == 1
        with pytest.raises(ReadOnlyStore):
            reader.append_message(UserMessage.of("refused"))
        with pytest.raises(ReadOnlyStore):
            store.delete(session_id)
        with pytest.raises(ReadOnlyStore):
            store.create(reader.header)
    with pytest.raises(SessionNotFound):
        SqliteStore.open(tmp_path / "missing.db", read_only=True)
    from sessiontree import JsonlStore

    folder = tmp_path / "files"
    generate_folder(folder, 1, seed=2, min_entries=20, max_entries=20)
    with JsonlStore(folder, read_only=True) as files:
        (session_id,) = files.session_ids()
        with pytest.raises(ReadOnlyStore):
            files.delete(session_id)
        with Session(files.open_log(session_id)) as reader, pytest.raises(ReadOnlyStore):
            reader.append_message(UserMessage.of("refused"))


def test_tail_follows_appends_from_another_writer(tmp_path: Path, backend_kind: str,
                                                  postgres_or_none: str | None) -> None:
    if backend_kind == "jsonl":
        writer = Session.create(tmp_path, cwd="/w")
        writer.append_message(UserMessage.of("first"))
        location = str(writer.file)
    else:
        store_url = sqlite_url(tmp_path / "t.db") if backend_kind == "sqlite" else postgres_or_none
        assert store_url is not None
        writer = Session.create(cwd="/w", store=store_url)
        writer.append_message(UserMessage.of("first"))
        location = f"{store_url}#{writer.id}"
    reader = Session.open(location)
    seen: list[str] = []

    def follow() -> None:
        for entry in reader.follow(idle_timeout=3.0, poll=0.02):
            seen.append(entry.id)
            if len(seen) == 3:
                return

    thread = threading.Thread(target=follow)
    thread.start()
    time.sleep(0.2)
    written = [writer.append_message(UserMessage.of(f"m{i}")) for i in range(3)]
    thread.join(10)
    assert seen == written
    reader.close()
    code, out, _ = run("tail", "--no-follow", "-n", "2", "--json", location)
    assert code == 0 and [loads(x)["id"] for x in out.splitlines()] == written[-2:]
    code, out, _ = run("tail", "--timeout", "0.3", "-n", "1", location)
    assert code == 0 and out.startswith(written[-1])
    writer.close()


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def backend_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def postgres_or_none(request: pytest.FixtureRequest, backend_kind: str) -> str | None:
    return request.getfixturevalue("postgres_url") if backend_kind == "postgres" else None


def test_files_are_private(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "new" / "deeper", cwd="/w")
    session.append_message(UserMessage.of("x"))
    assert session.file is not None
    assert stat.S_IMODE(os.stat(session.file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "new" / "deeper").st_mode) == 0o700
    out = session.export_branch(session.leaf_id or "", tmp_path / "exported.jsonl")
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    with SqliteStore.open(tmp_path / "db" / "s.db") as store:
        Session.create(cwd="/w", store=store).append_message(UserMessage.of("x"))
        for name in ("s.db", "s.db-wal", "s.db-shm"):  # the WAL files exist while it is open
            assert stat.S_IMODE(os.stat(tmp_path / "db" / name).st_mode) == 0o600, name
    assert stat.S_IMODE(os.stat(tmp_path / "db").st_mode) == 0o700


def test_postgres_connection_loss_is_typed_and_a_retry_works(postgres_url: str) -> None:
    import uuid

    import psycopg

    from sessiontree.errors import StoreUnavailable
    from sessiontree.stores.postgres import PostgresStore

    from .backends import postgres_dsn

    app = f"sessiontree_loss_{uuid.uuid4().hex[:8]}"
    with PostgresStore.from_url(f"{postgres_url}&application_name={app}") as store:
        session = Session.create(cwd="/w", store=store)
        first = session.append_message(UserMessage.of("before the loss"))
        with psycopg.connect(postgres_dsn(), autocommit=True) as admin:
            killed = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                   "WHERE application_name = %s", (app,)).fetchone()
        assert killed is not None and killed[0] >= 1
        with pytest.raises(StoreUnavailable, match="retry"):
            session.append_message(UserMessage.of("during the loss"))
        second = session.append_message(UserMessage.of("after the loss"))  # the retry works
        with Session(store.open_log(session.id)) as again:
            assert again.ids() == [first, second]
            assert again.build_context().messages[-1].content[0].text == "after the loss"  # type: ignore[union-attr]


def test_ls_of_a_database_by_cwd(tmp_path: Path) -> None:
    db = sqlite_url(tmp_path / "cwd.db")
    for cwd in ("/a", "/b", "/a"):
        with Session.create(cwd=cwd, store=db) as session:
            session.append_message(UserMessage.of(f"in {cwd}"))
    code, out, _ = run("ls", "--json", "--cwd", "/a", db)
    rows = loads(out)
    assert code == 0 and [row["cwd"] for row in rows] == ["/a", "/a"]
    assert all(row["modified_from"] == "message" for row in rows)
    code, out, _ = run("ls", "--json", db)
    assert sorted(row["cwd"] for row in loads(out)) == ["/a", "/a", "/b"]


def test_a_header_cannot_name_a_file_outside_the_folder(tmp_path: Path) -> None:
    from sessiontree import JsonlStore

    outside = tmp_path / "outside"
    for stamp in (f"{outside}/evil", "..\\\\x", "a/../../b"):
        header = (b'{"type":"session","version":3,"id":"s1","timestamp":"' + stamp.encode()
                  + b'","cwd":"/"}')
        with JsonlStore(tmp_path / "store") as store, pytest.raises(InvalidLocation):
            store.import_lines(header, [])
    assert not outside.exists() and not list(tmp_path.rglob("*s1.jsonl"))


def test_a_read_only_postgres_store_refuses_writes_twice_over(fresh_postgres_url: str) -> None:
    from sessiontree.stores.postgres import PostgresStore

    with PostgresStore.from_url(fresh_postgres_url) as store:
        session = Session.create(cwd="/w", store=store)
        session.append_message(UserMessage.of("kept"))
    with PostgresStore.from_url(fresh_postgres_url, read_only=True) as store:
        reader = Session(store.open_log(session.id))
        assert len(reader) == 1
        with pytest.raises(ReadOnlyStore):
            reader.append_message(UserMessage.of("refused"))
        with pytest.raises(ReadOnlyStore):
            store.delete(session.id)
        with pytest.raises(ReadOnlyStore, match="refused a write"):  # the server says no too
            with store._transaction() as conn:
                conn.execute("DELETE FROM sessiontree_entries")
    with PostgresStore.from_url(fresh_postgres_url) as store:
        assert [len(list(store.read(i))) for i in store.session_ids()] == [1]


def _session_file(folder: Path, stamp: str, header_id: str, name_id: str, message_time: str) -> Path:
    """A session file named ``<stamp>_<name_id>.jsonl`` with one user message at ``message_time``."""
    from sessiontree._json import dumps

    folder.mkdir(exist_ok=True)
    path = folder / f"{stamp}_{name_id}.jsonl"
    header = {"type": "session", "version": 3, "id": header_id,
              "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}
    entry = {"type": "message", "id": "a1b2c3d4", "parentId": None, "timestamp": message_time,
             "message": {"role": "user", "content": "hi"}}
    path.write_bytes(dumps(header) + b"\n" + dumps(entry) + b"\n")
    return path


def test_prune_deletes_the_old_file_not_another_with_its_id(tmp_path: Path) -> None:
    folder = tmp_path / "pi"
    session_id = "0196e1a8-0000-7000-8000-000000000001"
    old = _session_file(folder, "2026-01-01T00-00-00-000Z", session_id, session_id,
                        "2020-01-01T00:00:00.000Z")
    recent_time = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    recent = _session_file(folder, "2099-01-01T00-00-00-000Z", session_id, session_id,
                           recent_time)
    renamed = _session_file(folder, "2020-01-01T00-00-00-000Z", "header-id", "name-id",
                            "2020-01-01T00:00:00.000Z")
    code, out, err = run("prune", str(folder), "--older-than", "30")
    assert (code, err) == (0, "")
    assert str(old) in out and str(renamed) in out and str(recent) not in out
    assert "deleted 2 session(s)" in out
    assert recent.exists() and not old.exists() and not renamed.exists()


def test_delete_removes_only_sessions(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    looks_like_one = tmp_path / "data.jsonl"
    looks_like_one.write_text('{"type":"row","id":"1"}\n')
    for path in (notes, looks_like_one):
        code, out, err = run("delete", "--yes", str(path))
        assert code == 1 and "not a session" in err and str(path) in err
        assert path.exists()
    session = _session_file(tmp_path, "2026-01-01T00-00-00-000Z", "s-1", "s-1",
                            "2026-01-01T00:00:00.000Z")
    assert run("delete", "--yes", str(session))[0] == 0 and not session.exists()


def test_a_store_refuses_to_delete_by_an_id_two_files_carry(tmp_path: Path) -> None:
    from sessiontree import JsonlStore

    first = _session_file(tmp_path, "2026-01-01T00-00-00-000Z", "s-1", "s-1",
                          "2026-01-01T00:00:00.000Z")
    second = _session_file(tmp_path, "2026-02-01T00-00-00-000Z", "s-1", "s-1",
                           "2026-02-01T00:00:00.000Z")
    with JsonlStore(tmp_path) as store, pytest.raises(InvalidLocation, match="2 files"):
        store.delete("s-1")
    assert first.exists() and second.exists()


def pi_root(root: Path) -> dict[str, Path]:
    """A sessions root as pi leaves it: two project folders of generated sessions, a session
    file not named ``<time>_<id>.jsonl`` (``fork -o``), and two files no copy can take whole
    (a ``.jsonl`` that is no session, a session with a torn last line). The sessions by id."""
    projects = ("/home/dev/projects/acme-api", "/srv/web")
    sessions: dict[str, Path] = {}
    for number, cwd in enumerate(projects):
        folder = root / default_session_dir(cwd, "").name
        for made in generate_folder(folder, 3, seed=40 + number, min_entries=5, max_entries=60,
                                    cwds=(cwd,)):
            sessions[made.session_id] = Path(made.path)
    renamed = next(iter(sessions.values()))
    forked = renamed.with_name("forked.jsonl")
    forked.write_bytes(renamed.read_bytes().replace(b'"id":"', b'"id":"x', 1))
    sessions[loads(forked.read_bytes().split(b"\n", 1)[0])["id"]] = forked
    (root / "--srv-web--" / "notes.jsonl").write_bytes(b'{"not":"a session"}\n')
    torn = root / "--srv-web--" / "2026-01-01T00-00-00-000Z_torn-one.jsonl"
    torn.write_bytes(b'{"type":"session","version":3,"id":"torn-one","timestamp":"2026-01-01T00:'
                     b'00:00.000Z","cwd":"/srv/web"}\n{"type":"message","id":"a","parentId":null,'
                     b'"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":'
                     b'"x"}}\n{"typ')
    return sessions


def test_the_sessions_root_is_one_store(tmp_path: Path, fresh_postgres_url: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 18 point 1: ``ls ROOT`` said "no sessions" and ``copy ROOT URL`` copied none;
    files not named ``<time>_<id>.jsonl`` were skipped without a word."""
    root = tmp_path / "sessions"
    sessions = pi_root(root)
    torn = str(root / "--srv-web--" / "2026-01-01T00-00-00-000Z_torn-one.jsonl")
    listed = {row.id for row in list_sessions(root, all=True)}
    assert listed == set(sessions) | {"torn-one"}  # what pi's listAll lists
    assert list_sessions(root) == []  # no session of its own
    for args in (["ls", "--json", str(root)], ["ls", "--json", "--all", str(root)]):
        code, out, err = run(*args)
        assert code == 0, err
        assert {row["id"] for row in loads(out)} == listed
    monkeypatch.setenv("SESSIONTREE_DIR", str(root))
    assert {row["id"] for row in loads(run("ls", "--all", "--json")[1])} == listed

    db = sqlite_url(tmp_path / "all.db")
    code, out, err = run("copy", str(root), db)
    assert code == 1 and out == ""
    torn_line, notes = sorted(err.splitlines()[:-1])  # each named once, with the reason
    assert notes == f"not copied: {root / '--srv-web--' / 'notes.jsonl'}: not a session " \
                    "file: its first line is not a session header (pi does not list it either)"
    assert torn_line.startswith(f"not copied: {torn}: ") and "repair" in torn_line
    assert err.splitlines()[-1] == f"copied {len(sessions)} session(s) to {db}; 2 not copied"
    with pytest.raises(CopyIncomplete) as raised:  # again: the rest is there already
        copy_sessions(str(root), db)
    again = raised.value.result
    assert isinstance(again, CopyResult)
    assert again.copied == [] and sorted(again.skipped) == sorted(sessions)
    assert {f.source for f in again.failed} == {str(root / "--srv-web--" / "notes.jsonl"), torn}

    assert run("copy", db, fresh_postgres_url)[0] == 0
    back = tmp_path / "back"
    code, out, err = run("copy", fresh_postgres_url, str(back))
    assert code == 0 and f"copied {len(sessions)} session(s)" in out, err
    written = {path.relative_to(back) for path in back.rglob("*.jsonl")}
    assert len(written) == len(sessions)
    for session_id, original in sessions.items():
        header = loads(original.read_bytes().split(b"\n", 1)[0])
        (returned,) = (back / p for p in written if p.name.endswith(f"_{session_id}.jsonl"))
        assert returned.parent.name == original.parent.name  # the project's folder
        assert returned.name == f"{header['timestamp'].replace(':', '-').replace('.', '-')}_" \
                                f"{session_id}.jsonl"  # pi's name, forked.jsonl's too
        assert returned.read_bytes() == original.read_bytes()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_prune_goes_by_the_latest_activity_not_an_old_copied_message(
        tmp_path: Path, kind: str) -> None:
    """Issue 20 point 6: a session whose only messages are old but which got a cherry-picked
    copy a minute ago is not pruned; the copy's entry carries the time it was appended."""
    old = {"type": "message", "timestamp": "2020-01-01T00:00:00.000Z",
           "message": {"role": "user", "content": "from 2020", "timestamp": 1577836800000}}
    target = str(tmp_path / "s") if kind == "jsonl" else sqlite_url(tmp_path / "p.db")
    with open_store(target) as store:
        edited = Session.create(cwd="/w", store=store)
        copied = edited.cherry_pick(edited.append_entry(old))
        stale = SessionHeader(id="6f1d2c1e-2b7a-4f57-9a57-3e0c4b8f5a12",
                              timestamp="2020-01-01T00:00:00.000Z", cwd="/w")
        store.create(stale)  # as written in 2020: the line keeps its time
        store.append(stale.id, [{**old, "id": "0000aaaa", "parentId": None}])
        assert edited.entry(copied).timestamp[:4] == time.strftime("%Y", time.gmtime())
        assert edited.listing().modified_ms == 1577836800000  # what ls shows, as pi counts it
        ids = {edited.id: "edited", stale.id: "stale"}
        edited.close()
    code, out, _ = run("prune", target, "--older-than", "30", "--json")
    assert code == 0 and [ids[row["id"]] for row in loads(out)["deleted"]] == ["stale"]
    with open_store(target) as store:
        assert [ids[item.id] for item in store.list_sessions()] == ["edited"]


def test_commands_name_an_entry_alike_and_give_no_api_advice(tmp_path: Path) -> None:
    """Issue 20 point 7: ``tail`` and ``tree`` call a session_info entry the same; ``ls`` of a
    database with no sessions says so without advice meant for the API."""
    session = Session.create(tmp_path, cwd="/w")
    session.append_message(UserMessage.of("hello"))
    named = session.set_name("A name")
    session.close()
    _, tailed, _ = run("tail", "--no-follow", "-n", "1", str(session.file))
    _, drawn, _ = run("tree", str(session.file))
    (tree_line,) = [line for line in drawn.splitlines() if named in line]
    assert tailed.split()[:2] == [named, "name"] and tree_line.split()[2] == "name"
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).execute("CREATE TABLE other (x)").connection.close()
    code, _, err = run("ls", sqlite_url(empty))
    assert code == 1 and "no sessions here" in err and "read_only" not in err


def test_repair_says_why_it_refuses_a_url(tmp_path: Path) -> None:
    """Issue 20 point 3: repair rewrites files; given a URL it says why it is file-only, and
    its --help says it too."""
    url = f"{sqlite_url(tmp_path / 's.db')}#6f1d2c1e-2b7a-4f57-9a57-3e0c4b8f5a14"
    code, _, err = run("repair", url)
    assert code == 2 and f"repair works on session files, not on {url}: a database " in err
    assert "no such session file" not in err
    _, shown, _ = run("repair", "--help")
    assert "Files only: a database" in " ".join(shown.split())


@contextmanager
def _connected(driver: str, url: str) -> Iterator[Any]:
    """A connection of the driver's own to a store's database (its schema), committed after."""
    if driver == "sqlite":
        with closing(sqlite3.connect(parse_location(url).store)) as conn, conn:
            yield conn
    else:
        import psycopg

        base, _, schema = url.rpartition("?schema=")
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            yield conn


@pytest.mark.parametrize("driver", ["sqlite", "postgres"])
def test_migrate_runs_the_schema_migrations_a_store_lacks(driver: str, tmp_path: Path,
                                                          request: pytest.FixtureRequest) -> None:
    """``migrate URL`` runs the migrations the first writable open would run (7 and 8
    build every search row again: minutes on a large store, while other processes wait), and
    says so; a current store is left as it is. A newer store, a read-only URL, a session's URL
    and a missing SQLite file are refused, nothing migrated or created."""
    url = sqlite_url(tmp_path / "s.db") if driver == "sqlite" else \
        str(request.getfixturevalue("fresh_postgres_url"))
    with open_store(url) as store:
        session = Session.create(cwd="/w", store=store)
        session.append_message(UserMessage.of("an albatross migrates south"))
    with _connected(driver, url) as conn:  # as schema version 6 left it
        conn.execute("DELETE FROM sessiontree_migrations WHERE v >= 7")
        if driver == "sqlite":  # (the rows migration 7 builds again)
            conn.execute("DELETE FROM sessiontree_search")
            conn.execute("DELETE FROM sessiontree_search_keys")
    refused = [(f"{url}#{session.id}", 2, "the schema is the whole store's")]
    if driver == "sqlite":
        refused.append((f"{url}?mode=ro", 1, f"{url}?mode=ro: a migration writes"))
    for given, exit_code, said in refused:
        code, _, err = run("migrate", given)
        assert code == exit_code and said in err
    with open_store(url, read_only=True) as store:
        assert store.schema_version() == 6
        assert len(store.search("albatross")) == (driver == "postgres")
    code, out, err = run("migrate", url)
    assert code == 0 and "migrating the schema from version 6 to 8" in err
    assert out.endswith(": schema migrated from version 6 to 8\n")
    with open_store(url, read_only=True) as store:
        assert store.schema_version() == 8 and len(store.search("albatross")) == 1
    code, out, _ = run("migrate", url)
    assert code == 0 and out.endswith(": schema version 8, the current one; nothing to do\n")
    with _connected(driver, url) as conn:  # as a later sessiontree would leave it
        conn.execute("INSERT INTO sessiontree_migrations (v) VALUES (9)")
    code, out, err = run("migrate", url)
    assert code == 1 and not out
    assert ": schema version 9, newer than this sessiontree knows (8)" in err
    if driver == "sqlite":
        missing = tmp_path / "missing.db"
        code, _, err = run("migrate", sqlite_url(missing))
        assert code == 1 and "no such database file" in err and not missing.exists()


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_a_copy_by_several_processes_is_the_copy_of_one(
        tmp_path: Path, kind: str, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole store copied by helper processes, each a share of the sessions: the result (what
    was copied, found there, or named with the reason, in the source's order) is one
    process's, and every session comes back out byte for byte."""
    from sessiontree import _helpers
    from sessiontree.transfer import PARALLEL_SESSIONS, _unframed

    from .backends import redis_store_url

    root = tmp_path / "sessions"
    sessions = pi_root(root)
    for made in generate_folder(root / "--work--", PARALLEL_SESSIONS, seed=7, min_entries=5,
                                max_entries=40, cwds=("/work",)):
        sessions[made.session_id] = Path(made.path)
    monkeypatch.setattr(_helpers, "_busy", lambda: 0)  # as on an idle machine
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})  # of three CPUs
    assert _helpers.processes(3) == 3
    share = sorted(str(path) for path in (root / "--work--").glob("*.jsonl"))[:2]
    answer = _helpers.answer(_helpers.start("sessiontree.transfer:_copy_share", str(root),
                                            sqlite_url(tmp_path / "share.db"), *share))
    assert answer is not None and b"copied" in answer  # a helper copies (not this process)
    with SqliteStore.open(tmp_path / "share.db") as store:
        assert sorted(store.session_ids()) == sorted(
            loads(Path(path).read_bytes().split(b"\n", 1)[0])["id"] for path in share)
    target = {"sqlite": sqlite_url(tmp_path / "par.db"),
              "redis": redis_store_url(request, "redis") if kind == "redis" else ""}.get(kind) \
        or str(request.getfixturevalue("fresh_postgres_url"))
    answered: list[bytes | None] = []
    answer = _helpers.answer
    monkeypatch.setattr(_helpers, "answer", lambda helper, **options: answered.append(
        answer(helper, **options)) or answered[-1])
    results = []
    for destination, processes in ((sqlite_url(tmp_path / "one.db"), 1), (target, 3)):
        with pytest.raises(CopyIncomplete) as raised:
            copy_sessions(str(root), destination, processes=processes)
        assert isinstance(raised.value.result, CopyResult)
        results.append(raised.value.result)
    one, several = results
    # SQLite takes one writer at a time: a copy into it is one process (its processes would
    # wait on each other's write lock, and one that waited 30 s would fail)
    assert (one.processes, several.processes) == (1, 1 if kind == "sqlite" else 3)
    # each helper answered every session of its share (a helper that failed would have its
    # share copied by the caller, with the same result)
    shares = [] if kind == "sqlite" else [len(range(n, len(sessions) + 2, 3)) for n in (1, 2)]
    assert [len(_unframed(data or b"")) for data in answered] == shares  # (+2: files no copy
    # takes)
    assert several.copied == one.copied and sorted(one.copied) == sorted(sessions)
    assert several.failed == one.failed and len(one.failed) == 2 and one.skipped == []
    back = tmp_path / "back"
    assert sorted(copy_sessions(target, str(back)).copied) == sorted(sessions)
    for session_id, path in sessions.items():
        [returned] = back.rglob(f"*_{session_id}.jsonl")
        assert returned.read_bytes() == path.read_bytes(), session_id
    # again, by the command: everything there, the two named, exit status 1
    code, out, err = run("copy", "--processes", "3", str(root), target)
    assert code == 1 and out == ""
    assert err.splitlines()[-1] == f"copied 0 session(s) to {target}; {len(sessions)} already " \
                                   "there; 2 not copied"
    assert err.splitlines()[:-1] == [f"not copied: {failure.source}: {failure.reason}"
                                     for failure in one.failed]


def _copy_target(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> str:
    from .backends import redis_store_url

    if kind == "sqlite":
        return sqlite_url(tmp_path / "to.db")
    if kind == "redis":
        return redis_store_url(request, "redis")
    return str(request.getfixturevalue("fresh_postgres_url"))


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_a_copy_run_again_completes_a_session_cut_short_and_nothing_else(
        tmp_path: Path, kind: str, request: pytest.FixtureRequest) -> None:
    """A Redis session with the source's header and its first lines only (an import whose
    process was killed between two scripts) is completed when the copy runs again; in SQLite
    and PostgreSQL (whose imports are never cut) it is a real session, left as it is and named,
    as is one with other lines everywhere."""
    from sessiontree.stores.jsonl import read_exact_lines

    made = generate_folder(tmp_path / "from", 3, seed=11, min_entries=30, max_entries=60)
    target = _copy_target(request, tmp_path, kind)
    read = [(header, list(lines)) for header, lines in map(read_exact_lines,
                                                           (one.path for one in made))]
    (cut_header, cut), (other_header, other), _ = read
    with open_store(target) as store:
        store.import_lines(cut_header, cut[:20])
        store.import_lines(other_header, other[1:20])  # not a prefix: other content
    with pytest.raises(CopyIncomplete) as raised:
        copy_sessions(str(tmp_path / "from"), target)
    result = raised.value.result
    completed = kind == "redis"
    assert sorted(result.copied) == sorted([made[0].session_id, made[2].session_id]
                                           if completed else [made[2].session_id])
    assert sorted(failure.source for failure in result.failed) == sorted(
        [made[1].path] if completed else [made[0].path, made[1].path])
    assert all("other content" in failure.reason for failure in result.failed)
    with open_store(target, read_only=True) as store:
        for one, (header, lines) in zip(made, read):
            there, body = store.export_lines(one.session_id)
            expected = other[1:20] if one is made[1] else \
                cut[:20] if one is made[0] and not completed else lines
            assert (there, list(body)) == (header, expected), one.session_id


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_a_copy_never_loses_what_an_agent_appends_to_a_prefix_after_the_copy_read_it(
        tmp_path: Path, kind: str, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A session at the destination with the source's first lines, to which a live agent
    appends right after the copy read it, keeps the agent's line: the copy deletes nothing
    (in Redis its completion checks the session still holds what it read) and names the
    session as already there with other content."""
    from sessiontree.errors import DuplicateId
    from sessiontree.stores.jsonl import read_exact_lines

    [made] = generate_folder(tmp_path / "from", 1, seed=11, min_entries=30, max_entries=40)
    header, body = read_exact_lines(made.path)
    lines = list(body)
    target = _copy_target(request, tmp_path, kind)
    with open_store(target) as store:
        store.import_lines(header, lines[:20])
        kind_of_store = type(store)
    agent = {"type": "message", "id": "a1b2c3d4", "parentId": loads(lines[19])["id"],
             "timestamp": "2030-01-01T00:00:00.000Z",
             "message": {"role": "user", "content": "LIVE AGENT LINE", "timestamp": 1}}
    export = kind_of_store.export_lines

    def read_then_agent_appends(store: Any, session_id: str) -> Any:
        there, held = export(store, session_id)
        read = list(held)
        with open_store(target) as live:
            live.append(session_id, [agent])
        return there, iter(read)

    monkeypatch.setattr(kind_of_store, "export_lines", read_then_agent_appends)
    with pytest.raises(DuplicateId, match="other content"):
        copy_sessions(made.path, target)
    monkeypatch.undo()
    with open_store(target, read_only=True) as store:
        there, stored = store.export_lines(made.session_id)
        stored_lines = list(stored)
    assert stored_lines[:20] == lines[:20]
    assert len(stored_lines) == 21 and b"LIVE AGENT LINE" in stored_lines[20]


@pytest.mark.parametrize("stop", ["finish", "ctrl-c", "terminated again"])
def test_a_copy_helper_asked_to_stop_deletes_the_part_it_stored(
        tmp_path: Path, request: pytest.FixtureRequest, stop: str) -> None:
    """A helper ended by its caller (the caller interrupted: Ctrl-C, an error) cleans up first:
    its Redis import of several scripts, cut short, deletes what it stored, so no session is left
    with part of its lines (which a kill leaves); neither a terminal's Ctrl-C, which reaches the
    helper too (``ctrl-c``: SIGINT, then the caller's SIGTERM, both waiting while it was
    stopped), nor a second SIGTERM arriving during the clean-up interrupts that clean-up."""
    import signal
    import time

    from sessiontree import _helpers
    from sessiontree.stores.jsonl import read_exact_lines

    from .backends import redis_store_url

    target = redis_store_url(request, "redis")
    [made] = generate_folder(tmp_path / "from", 1, seed=5, min_entries=6000, max_entries=6000)
    header, lines = read_exact_lines(made.path)
    whole = (header, list(lines))
    helper = _helpers.start("sessiontree.transfer:_copy_share", str(tmp_path / "from"), target,
                            made.path)
    assert helper is not None

    def held() -> int:
        return len(list(store.export_lines(made.session_id)[1])) \
            if made.session_id in store.session_ids() else 0

    with open_store(target, read_only=True) as store:
        while held() <= 500:  # the second script has run (a stop in the first, whose lines
            assert helper.poll() is None, "the helper ended first"  # it cannot tell its own
            time.sleep(0.01)  # from another writer's, is left to the copy run again)
        os.kill(helper.pid, signal.SIGSTOP)  # (however busy the machine: caught half-way)
        assert held() < len(whole[1])
        if stop == "ctrl-c":  # (SIGINT handled first: it begins the clean-up, SIGTERM next)
            os.kill(helper.pid, signal.SIGINT)
            os.kill(helper.pid, signal.SIGTERM)
        os.kill(helper.pid, signal.SIGCONT)
        while stop == "terminated again" and helper.poll() is None:
            os.kill(helper.pid, signal.SIGTERM)
            time.sleep(0.001)
        _helpers.finish(helper)
        assert helper.returncode != 0  # stopped before it was done
        if made.session_id in store.session_ids():
            there, body = store.export_lines(made.session_id)
            assert (there, list(body)) == whole, "part of the session left"


def test_a_parallel_copy_counts_what_a_helper_stored_as_copied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each session of a helper's share has the outcome one process gives it: a file named in
    bytes that are not UTF-8, which the helper names in its answer, is one failure among the
    sessions it copied (they were answered 'already there' when its answer could not be sent
    and its share was copied again by the caller)."""
    from sessiontree import _helpers
    from sessiontree.transfer import PARALLEL_SESSIONS

    folder = tmp_path / "sessions" / "--work--"
    generate_folder(folder, PARALLEL_SESSIONS + 1, seed=3, min_entries=5, max_entries=30,
                    cwds=("/work",))
    bad = os.path.join(os.fsencode(folder), b"\xff.jsonl")  # sorted last: the helper's share
    with open(bad, "wb") as stream:
        stream.write(b"not a session\n")
    monkeypatch.setattr(_helpers, "_busy", lambda: 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # as on two free CPUs
    answered: list[bytes | None] = []
    answer = _helpers.answer
    monkeypatch.setattr(_helpers, "answer", lambda helper, **options: answered.append(
        answer(helper, **options)) or answered[-1])
    results = []
    for name, processes in (("one", 1), ("two", 2)):  # (folders: SQLite is one process)
        with pytest.raises(CopyIncomplete) as raised:
            copy_sessions(str(tmp_path / "sessions"), str(tmp_path / name),
                          processes=processes)
        results.append(raised.value.result)
    one, two = results
    assert len(answered) == 1 and answered[0]
    assert answered[0].count(b"copied") == PARALLEL_SESSIONS // 2
    assert two.copied == one.copied and len(one.copied) == PARALLEL_SESSIONS + 1
    assert two.skipped == one.skipped == []
    assert two.failed == one.failed and [f.source for f in one.failed] == [os.fsdecode(bad)]


@pytest.mark.parametrize("driver", ["sqlite", "postgres"])
def test_a_copy_into_a_newer_schema_stops_once_naming_the_destination(
        driver: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A destination this sessiontree cannot write (a later one's schema) is opened once, before
    any session is dealt out, and its error names it: not one failure (and one open) a session,
    each reason without the store."""
    from sessiontree import transfer
    from sessiontree.errors import UnsupportedVersion

    generate_folder(tmp_path / "from", transfer.PARALLEL_SESSIONS, seed=2, min_entries=3,
                    max_entries=10)
    target = _copy_target(request, tmp_path, driver)
    open_store(target).close()
    with _connected(driver, target) as conn:  # as a later sessiontree would leave it
        conn.execute("INSERT INTO sessiontree_migrations (v) VALUES (9)")
    opened: list[str] = []
    monkeypatch.setattr(transfer, "open_store", lambda url, **options: opened.append(url) or
                        open_store(url, **options))
    with pytest.raises(UnsupportedVersion) as raised:
        copy_sessions(str(tmp_path / "from"), target, processes=2)
    assert str(raised.value).startswith(target) and "newer than this sessiontree" in str(
        raised.value)
    assert opened == [target]
    code, out, err = run("copy", "--processes", "2", str(tmp_path / "from"), target)
    assert code == 1 and out == "" and target in err and "not copied" not in err


def test_a_copy_names_why_a_file_could_not_be_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder's file that cannot be read (here: removed after the folder was listed) is named
    with the system's reason, not as 'not a session file'."""
    from sessiontree.stores import _jsonl_listing

    made = generate_folder(tmp_path / "from", 2, seed=4, min_entries=3, max_entries=8)
    gone = str(tmp_path / "from" / "2025-01-01T00-00-00-000Z_gone.jsonl")
    listed = _jsonl_listing.session_files
    monkeypatch.setattr(_jsonl_listing, "session_files", lambda root: [*listed(root), gone])
    with pytest.raises(CopyIncomplete) as raised:
        copy_sessions(str(tmp_path / "from"), sqlite_url(tmp_path / "to.db"))
    result = raised.value.result
    assert sorted(result.copied) == sorted(one.session_id for one in made)
    assert [(f.source, f.reason) for f in result.failed] == [
        (gone, f"{os.strerror(errno.ENOENT)}: {gone}")]


def test_a_redis_completion_refuses_a_session_whose_last_line_is_another(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The completion's script checks the session's last line, not only how many it holds:
    one with as many lines, its last another, is left as it is."""
    from sessiontree.stores.jsonl import read_exact_lines

    [made] = generate_folder(tmp_path / "from", 1, seed=11, min_entries=30, max_entries=40)
    header, body = read_exact_lines(made.path)
    lines = list(body)
    other_last = lines[19].replace(b'"timestamp"', b'"timestamp" ', 1)
    assert other_last != lines[19]
    with open_store(_copy_target(request, tmp_path, "redis")) as store:
        store.import_lines(header, lines[:20])
        assert not store.complete_import(header, [*lines[:19], other_last, *lines[20:]], 20)
        assert list(store.export_lines(made.session_id)[1]) == lines[:20]
        assert store.complete_import(header, lines, 20)
        assert list(store.export_lines(made.session_id)[1]) == lines


@pytest.mark.parametrize("driver", ["sqlite", "postgres"])
def test_a_copy_helper_meeting_a_newer_schema_answers_no_session(
        driver: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A helper opens its database destination before its first session: one it cannot write
    (a later sessiontree's schema, here since before it started) ends it with no session
    answered, not each of its sessions answered failed without the store's name."""
    from sessiontree import _helpers
    from sessiontree.transfer import _unframed

    made = generate_folder(tmp_path / "from", 3, seed=2, min_entries=3, max_entries=10)
    target = _copy_target(request, tmp_path, driver)
    open_store(target).close()
    with _connected(driver, target) as conn:  # as a later sessiontree would leave it
        conn.execute("INSERT INTO sessiontree_migrations (v) VALUES (9)")
    helper = _helpers.start("sessiontree.transfer:_copy_share", str(tmp_path / "from"), target,
                            *(one.path for one in made))
    assert helper is not None
    with pytest.warns(RuntimeWarning, match=r"(?s)_copy_share\) failed \(exit status 1; .*"
                      r"UnsupportedVersion: .*schema version 9, newer than this sessiontree"):
        answer = _helpers.answer(helper, partial=True)  # (its error said: the caller's)
    assert answer is not None and _unframed(answer) == []
    assert helper.returncode != 0


def test_a_copy_names_the_destination_file_it_could_not_write(tmp_path: Path) -> None:
    """A session the destination refuses (its project folder's name taken by a file) is named
    with the system's reason and the destination's path, not the reason alone beside the
    source file; the other folder's sessions are copied."""
    kept = generate_folder(tmp_path / "from" / "--b--", 2, seed=4, min_entries=3, max_entries=8,
                           cwds=("/b",))
    refused = generate_folder(tmp_path / "from" / "--a--", 2, seed=5, min_entries=3,
                              max_entries=8, cwds=("/a",))
    (tmp_path / "to").mkdir()
    (tmp_path / "to" / "--a--").write_text("a file, not a folder\n")
    with pytest.raises(CopyIncomplete) as raised:
        copy_sessions(str(tmp_path / "from"), str(tmp_path / "to"))
    result = raised.value.result
    assert sorted(result.copied) == sorted(one.session_id for one in kept)
    assert sorted(f.source for f in result.failed) == sorted(one.path for one in refused)
    for failure in result.failed:
        assert str(tmp_path / "to" / "--a--") in failure.reason, failure.reason


def test_a_copy_into_a_full_file_system_stops_at_once(tmp_path: Path) -> None:
    """A full destination (a 64 KiB tmpfs) stops the copy with the system's error: no later
    session could be written either (it was one failure a session, the same each time)."""
    from sessiontree.testing.fulldisk import DiskUnavailable, small_disk

    generate_folder(tmp_path / "from", 40, seed=6, min_entries=40, max_entries=60)
    try:
        with small_disk(tmp_path / "full", 64 << 10) as full:
            with pytest.raises(OSError) as raised:
                copy_sessions(str(tmp_path / "from"), str(full))
    except DiskUnavailable as exc:
        pytest.skip(str(exc))
    assert raised.value.errno == errno.ENOSPC
    assert not isinstance(raised.value, CopyIncomplete)


def test_a_folder_copy_opens_each_session_file_once(tmp_path: Path) -> None:
    """A folder's file is read once: its listing check and its import are of the same bytes
    (the copy opened each file four times: the listing, the header, the scan, the raw bytes)."""
    import sys

    made = generate_folder(tmp_path / "from", 3, seed=8, min_entries=5, max_entries=30)
    source = str(tmp_path / "from")
    opened: list[str] = []
    counting = [True]

    def count(event: str, args: tuple[Any, ...]) -> None:
        if counting[0] and event == "open" and isinstance(args[0], str) and \
                args[0].startswith(source) and args[0].endswith(".jsonl"):
            opened.append(args[0])

    sys.addaudithook(count)  # (a hook cannot be removed: it stops counting below)
    try:
        result = copy_sessions(source, sqlite_url(tmp_path / "to.db"))
    finally:
        counting[0] = False
    assert sorted(result.copied) == sorted(one.session_id for one in made)
    assert sorted(opened) == sorted(one.path for one in made)


def test_a_copy_names_a_file_with_a_line_it_would_not_keep(tmp_path: Path) -> None:
    """A second session header line (pi ignores it, so it is no entry) was left out of the
    copy silently, so the file did not come back byte for byte; now the file is named. An empty
    file copied alone is refused as no session (it was a ValueError)."""
    made = generate_folder(tmp_path / "from", 2, seed=3, min_entries=3, max_entries=8)
    doubled = Path(made[0].path)
    header = doubled.read_bytes().split(b"\n")[0]
    with open(doubled, "ab") as stream:
        stream.write(header + b"\n")
    with pytest.raises(CopyIncomplete) as raised:
        copy_sessions(str(tmp_path / "from"), sqlite_url(tmp_path / "to.db"))
    result = raised.value.result
    assert result.copied == [made[1].session_id]
    [failure] = result.failed
    assert failure.source == str(doubled) and "second session header" in failure.reason
    assert f"line {doubled.read_bytes().count(bytes([10]))} is no entry" in failure.reason
    blank = Path(made[1].path)
    lines = blank.read_bytes().split(b"\n")
    blank.write_bytes(b"\n".join([*lines[:2], b"", *lines[2:]]))
    with pytest.raises(CopyRefused, match="line 3: the file has .* blank lines"):
        copy_sessions(str(blank), sqlite_url(tmp_path / "blank.db"))
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(CorruptHeader, match="no line is a session header"):
        copy_sessions(str(empty), sqlite_url(tmp_path / "to.db"))


def test_a_line_nested_too_deep_leaves_its_file_out_not_the_rest(tmp_path: Path) -> None:
    """A line pi reads but sessiontree cannot (JSON nested about a thousand levels deep) left
    the whole folder copy stopped at its file, the sessions after it neither copied nor named;
    now that file is named with its line and the rest are copied."""
    made = generate_folder(tmp_path / "from", 2, seed=3, min_entries=3, max_entries=8)
    deep = Path(made[0].path)
    last = json.loads(deep.read_bytes().split(b"\n")[-2])
    with open(deep, "ab") as stream:
        stream.write(b'{"type":"custom","customType":"x","id":"deep1","parentId":"%s",'
                     b'"timestamp":"2026-03-01T10:00:00.000Z","data":%s}\n'
                     % (last["id"].encode(), b"[" * 5000 + b"]" * 5000))
    lines = deep.read_bytes().count(b"\n")
    with pytest.raises(CopyIncomplete) as raised:
        copy_sessions(str(tmp_path / "from"), sqlite_url(tmp_path / "to.db"))
    result = raised.value.result
    assert result.copied == [made[1].session_id]
    [failure] = result.failed
    assert failure.source == str(deep) and failure.reason.startswith(f"line {lines}: ")
    assert "nested too deep" in failure.reason


def test_a_file_appended_to_while_it_is_read_is_read_again_or_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy reads a session file between two ``fstat`` calls that must agree: a file another
    writer appends to while it is read is read again (the copy holds every line, none cut),
    and one appended to during each of its reads is named, nothing of it copied. (The appends
    are real writes, made from inside each read so that they fall between its two calls.)"""
    from sessiontree import _fs
    from sessiontree.stores.jsonl import session_bytes

    made = generate_folder(tmp_path / "from", 1, seed=5, min_entries=3, max_entries=6)
    path = Path(made[0].path)
    last = json.loads(path.read_bytes().split(b"\n")[-2])
    read = _fs._pread_all
    appends: list[int] = []

    def appending(fd: int, start: int, length: int) -> bytes:
        data = read(fd, start, length)
        if len(appends) < appends_left[0]:
            appends.append(1)
            with open(path, "ab") as stream:
                stream.write(b'{"type":"label","id":"l%d","parentId":"%s","timestamp":'
                             b'"2026-03-01T10:00:00.000Z","targetId":"%s","label":"x"}\n'
                             % (len(appends), last["id"].encode(), last["id"].encode()))
        return data

    monkeypatch.setattr(_fs, "_pread_all", appending)
    appends_left = [1]
    data, status = session_bytes(path)
    assert len(appends) == 1 and data == path.read_bytes() and status.st_size == len(data)
    appends_left[0] = 1 + _fs.UNCHANGED_TRIES
    with pytest.raises(CopyRefused, match="changed while it was read"):
        copy_sessions(str(path), sqlite_url(tmp_path / "to.db"))
    assert len(appends) == 1 + _fs.UNCHANGED_TRIES
    with SqliteStore.open(tmp_path / "to.db") as store:
        assert store.session_ids() == []


def test_a_file_replaced_while_it_is_copied_is_read_as_one_version(tmp_path: Path) -> None:
    """A file replaced again and again (by rename, as repair, migrate and editors do) while a
    copy reads it gives one version's header and lines, never one's header with the other's
    lines (two opens, one for the scan and one for the bytes, could see two files: 51 mixes in
    277 reads)."""
    import subprocess
    import sys

    from sessiontree.stores.jsonl import read_exact_lines

    [one] = generate_folder(tmp_path / "a", 1, seed=1, min_entries=300, max_entries=300,
                            cwds=("/one",))
    [two] = generate_folder(tmp_path / "b", 1, seed=2, min_entries=300, max_entries=300,
                            cwds=("/two",))
    first = Path(one.path).read_bytes()
    other_header = loads(Path(two.path).read_bytes().split(b"\n")[0])
    other_header["id"] = one.session_id  # the same session, other content
    second = dumps(other_header) + b"\n" + Path(two.path).read_bytes().split(b"\n", 1)[1]
    (tmp_path / "1").write_bytes(first)
    (tmp_path / "2").write_bytes(second)
    path = tmp_path / "s.jsonl"
    path.write_bytes(first)
    swapper = subprocess.Popen([sys.executable, "-c", (
        "import itertools, os, sys\n"
        "folder, target = sys.argv[1:]\n"
        "for i in itertools.count():\n"
        "    os.link(os.path.join(folder, '12'[i % 2]), os.path.join(folder, 't'))\n"
        "    os.replace(os.path.join(folder, 't'), target)\n"), str(tmp_path), str(path)])
    versions: set[bytes] = set()  # (both must be read: the swapper may start late)
    reads = 0
    try:
        while reads < 150 or len(versions) < 2:
            header, lines = read_exact_lines(path)
            assert b"\n".join([header, *lines]) + b"\n" in (first, second)
            versions.add(header)
            reads += 1
            assert reads < 20_000, "the file was never replaced while it was read"
    finally:
        swapper.kill()
        swapper.wait()
