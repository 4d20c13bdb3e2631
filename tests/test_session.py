"""The Session API on real files: creation, appends, errors, locking and freshness."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from sessiontree import (
    AssistantMessage,
    ConcurrentModification,
    CorruptLine,
    Custom,
    EntryNotFound,
    InvalidEntry,
    InvalidLocation,
    Label,
    LoadWarning,
    MessageEntry,
    Session,
    SessionLocked,
    SessionLockedError,
    SessionNotFound,
    UnknownEntry,
    UnsupportedVersion,
    UserMessage,
    default_session_dir,
    list_sessions,
)
from sessiontree._json import loads

from .backends import Backend, redis_store_url, reopen, stored, stored_lines
from .conftest import CONFORMANCE


def lines(path: str | Path) -> list[dict[str, object]]:
    return [loads(line) for line in Path(path).read_bytes().splitlines() if line.strip()]


def test_create_writes_nothing_until_the_first_append(tmp_path: Path) -> None:
    session = Session.create(tmp_path, cwd="/home/u/proj")
    assert session.file is not None
    assert not os.path.exists(session.file)
    assert session.leaf_id is None and len(session) == 0
    first = session.append_message(UserMessage.of("hi"))
    header, entry = lines(session.file)
    assert header == {"type": "session", "version": 3, "id": session.id,
                      "timestamp": session.header.timestamp, "cwd": "/home/u/proj"}
    assert entry["id"] == first and entry["parentId"] is None
    assert Path(session.file).name == (
        session.header.timestamp.replace(":", "-").replace(".", "-") + f"_{session.id}.jsonl")
    session.close()


def test_create_refuses_a_store_url_as_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    """A store URL given as ``directory`` or ``root`` is refused, saying to pass it as
    ``store=``; it made a folder named ``sqlite:`` (in the current one) at the first append."""
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 's.db'}"
    with pytest.raises(InvalidLocation, match="pass it as store="):
        Session.create(url, cwd="/w")
    with pytest.raises(InvalidLocation, match="pass it as store="):
        Session.create(root=url, cwd="/w")
    assert list(tmp_path.iterdir()) == []
    with Session.create(cwd="/w", store=url) as session:
        session.append_message(UserMessage.of("stored"))
    assert (tmp_path / "s.db").exists() and not (tmp_path / "sqlite:").exists()


def test_create_uses_pis_folder_layout(tmp_path: Path) -> None:
    session = Session.create(cwd="/home/u/my:proj", root=tmp_path)
    assert Path(session.file or "").parent == tmp_path / "--home-u-my-proj--"
    assert default_session_dir("C:\\work\\x", tmp_path) == tmp_path / "--C--work-x--"


def test_appends_chain_and_advance_the_leaf(backend: Backend) -> None:
    with backend.create() as session:
        a = session.append_message(UserMessage.of("q1"))
        b = session.append_message(AssistantMessage.of("a1", provider="p", model="m"))
        assert session.leaf_id == b
        assert session.path_ids() == [a, b]
        assert len(a) == 8 and int(a, 16) >= 0
        entry = session.entry(b)
        assert isinstance(entry, MessageEntry) and entry.parent_id == a
        assert entry.timestamp.endswith("Z") and len(entry.timestamp) == 24


WHOLE_TREE_READS: dict[str, Callable[[Session], object]] = {
    "ids": Session.ids, "leaves": Session.leaves, "tree": Session.tree,
    "entries": lambda s: list(s.entries()), "labels": Session.labels,
    "branch_points": Session.branch_points, "optree": Session.optree,
    "problems": lambda s: s.problems,
}
"""What loads a session's whole tree (issue 23 point 1: done before the first append, each
made a database session's appends raise after committing, each a new root)."""


@pytest.mark.parametrize("read", WHOLE_TREE_READS)
def test_reading_a_new_session_whole_then_appending_chains(backend: Backend, read: str) -> None:
    with backend.create() as session:
        WHOLE_TREE_READS[read](session)
        made = [session.append_message(UserMessage.of(f"q{i}")) for i in range(3)]
        assert session.ids() == made and session.leaves() == made[-1:]
        assert session.path_ids() == made
    with backend.reopen(session) as again:
        assert again.ids() == made and again.path_ids() == made
        assert [node.entry.id for node in again.tree()] == made[:1]


def test_branch_and_reset_leaf_make_branches_and_roots(backend: Backend) -> None:
    with backend.create() as session:
        a = session.append_message(UserMessage.of("q1"))
        b = session.append_message(AssistantMessage.of("a1"))
        session.branch(a)
        c = session.append_message(AssistantMessage.of("a1'"))
        assert session.children_ids(a) == [b, c]
        assert session.leaves() == [b, c] and session.branch_points() == [a]
        session.reset_leaf()
        d = session.append_message(UserMessage.of("new root"))
        assert [r.id for r in session.tree()] == [a, d]
        with pytest.raises(EntryNotFound) as info:
            session.branch("nope")
        assert info.value.entry_id == "nope" and "nope" in str(info.value)
        assert session.leaf_id == d


def test_reopen_puts_the_leaf_on_the_last_line(backend: Backend) -> None:
    session = backend.create()
    a = session.append_message(UserMessage.of("q1"))
    b = session.append_message(AssistantMessage.of("a1"))
    session.branch(a)
    session.close()
    with reopen(session) as reopened:
        assert reopened.leaf_id == b


def test_checkout_persists_the_leaf_in_a_marker(backend: Backend) -> None:
    session = backend.create()
    a = session.append_message(UserMessage.of("q1"))
    session.append_message(AssistantMessage.of("a1"))
    marker = session.checkout(a)
    assert marker is not None
    session.close()
    with reopen(session) as reopened:
        entry = reopened.entry(reopened.leaf_id or "")
        assert isinstance(entry, Custom) and entry.custom_type == "sessiontree.checkout"
        assert entry.data == {"targetId": a} and entry.parent_id == a
        assert reopened.build_context().to_builtins() == reopened.build_context(a).to_builtins()
        assert reopened.checkout(reopened.leaf_id) is None  # already the last line: no marker


def test_labels_and_names(backend: Backend) -> None:
    with backend.create() as session:
        a = session.append_message(UserMessage.of("q1"))
        before = stored(session)
        with pytest.raises(EntryNotFound):
            session.set_label("missing", "x")
        assert stored(session) == before
        session.set_label(a, "start")
        assert session.label(a) == "start"
        label_entry = session.entry(session.leaf_id or "")
        assert isinstance(label_entry, Label) and label_entry.target_id == a
        session.set_label(a, None)
        assert session.label(a) is None
        assert "label" not in loads(stored_lines(session)[-1])
        session.set_name("  My session  ")
        assert session.name == "My session"
        with reopen(session) as again:
            assert again.name == "My session" and again.label(a) is None
        session.set_label(a, "again")
        with reopen(session) as again:
            assert again.label(a) == "again" and again.labels()[a][0] == "again"
        session.set_name("")
        assert session.name is None


def test_append_message_accepts_on_disk_dicts(backend: Backend) -> None:
    with backend.create() as session:
        mid = session.append_message({"role": "user", "content": "plain", "extra": [1.0, 0.000009]})
        written = loads(stored_lines(session)[-1])["message"]
        assert written["role"] == "user" and written["extra"] == [1, 0.000009]
        assert isinstance(written["timestamp"], int)
        assert b'"extra":[1,0.000009]' in session.raw_line(mid)
        for bad in ({"content": "no role"}, {"role": "branchSummary", "summary": "x"}):
            with pytest.raises(InvalidEntry):
                session.append_message(bad)
        assert session.leaf_id == mid


class _Opaque:
    """An object of no JSON type."""


@pytest.mark.parametrize(("value", "where", "what"), [
    ({"tags": {1, 2}}, ".tags", "a set"),
    (b"raw", "", "a bytes"),
    ({"k": [1, _Opaque()]}, ".k[1]", "a _Opaque"),
    ({(1, 2): 3}, "", "a key of type tuple"),
    ({"n": {1.0: "x"}}, ".n", "a key of type float"),  # msgspec writes "1.0", JavaScript "1"
    ({"r": msgspec.Raw(b"nope")}, ".r", "a Raw that is not JSON"),
    (msgspec.Raw(b'{"a":\n1}'), "", "a Raw with a line break"),
])
def test_appends_refuse_values_json_cannot_hold(backend: Backend, value: object, where: str,
                                                what: str) -> None:
    """A set, bytes or any other object in extension state is refused, typed and named, with
    nothing written (msgspec would write a set as a list and bytes as base64 text)."""
    with backend.create() as session:
        leaf = session.append_custom("ext", {"k": 1})
        before = stored(session)
        appends: list[tuple[Callable[[], object], str]] = [
            (lambda: session.append_custom("ext", value), "data"),
            (lambda: session.append_custom_message("ext", "hi", details=value), "details"),
            (lambda: session.append_entry({"type": "ext_kind", "data": value}), "data"),
            (lambda: session.append_compaction("s", leaf, 10, details=value), "details"),
            (lambda: session.branch_with_summary(leaf, "s", details=value), "details"),
        ]
        for append, field in appends:
            with pytest.raises(InvalidEntry) as refused:
                append()
            assert f"{field}{where} " in str(refused.value) and what in str(refused.value)
        assert stored(session) == before and session.leaf_id == leaf
        with pytest.raises(InvalidEntry, match=r"custom entry: data\.k is a _Opaque"):
            session.extend([{"type": "custom", "id": "fresh", "parentId": leaf,
                             "timestamp": "t", "data": {"k": _Opaque()}}])
        assert stored(session) == before


def test_values_nested_too_deep_to_write_are_refused(backend: Backend) -> None:
    """Data nested a thousand deep is JSON, but too deep to encode: refused, typed, with
    nothing written (it raised a bare RecursionError)."""
    deep: object = 1
    for _ in range(5000):
        deep = [deep]
    with backend.create() as session:
        leaf = session.append_custom("ext", {"k": 1})
        before = stored(session)
        with pytest.raises(InvalidEntry, match="nested too deep"):
            session.append_custom("ext", deep)
        assert stored(session) == before and session.leaf_id == leaf


def test_append_compaction_checks_the_first_kept_entry(backend: Backend) -> None:
    with backend.create() as session:
        a = session.append_message(UserMessage.of("q1"))
        session.append_message(AssistantMessage.of("a1"))
        with pytest.raises(EntryNotFound):
            session.append_compaction("s", "elsewhere", 10)
        session.append_compaction("## Goal\nq1", a, 1234)
        context = session.build_context()
        assert [m.role for m in context.messages] == ["compactionSummary", "user", "assistant"]


def test_extend_keeps_ids_and_refuses_bad_entries(backend: Backend) -> None:
    source = Session.in_memory()
    a = source.append_message(UserMessage.of("q"))
    source.append_custom("ext", {"k": 1})
    with backend.create() as target:
        assert target.extend(source.entries()) == source.ids()
        before = stored(target)
        with pytest.raises(InvalidEntry):  # DuplicateId from a database
            target.extend([{"type": "custom", "id": a, "parentId": None, "timestamp": "t"}])
        with pytest.raises(InvalidEntry):
            target.extend([{"type": "custom", "id": "fresh", "parentId": "ghost", "timestamp": "t"}])
        assert stored(target) == before and target.leaf_id == source.leaf_id
        with reopen(target) as again:
            assert again.ids() == source.ids()


def test_a_second_header_is_refused_before_anything_is_written(backend: Backend) -> None:
    """An entry of type ``session`` is refused, typed, on a new session and on one with lines:
    it once reached the log, which refused it after taking the header as written, so the
    next append wrote a file without one (and, on a file with lines, every later record's
    line number was one too high)."""
    header = {"type": "session", "id": "x", "parentId": None, "timestamp": "t"}
    with backend.create() as session:
        with pytest.raises(InvalidEntry, match="type session"):
            session.extend([header])
        first = session.append_message(UserMessage(content="hello", timestamp=1))
        with pytest.raises(InvalidEntry, match="type session"):
            session.extend([header])
        last = session.append_custom("ext", {"k": 1})
        with reopen(session) as again:
            assert again.ids() == [first, last]
            assert [again.raw_line(i) for i in again.ids()] == [session.raw_line(first),
                                                               session.raw_line(last)]


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_a_log_refusing_a_line_keeps_its_count(kind: str, tmp_path: Path) -> None:
    """A line a file or memory log cannot read as an entry leaves it as it was (its header
    still to write, its line count): the restore once happened only on a full disk."""
    session = (Session.create(tmp_path, cwd="/w") if kind == "jsonl"
               else Session.in_memory(cwd="/w"))
    log = session._log
    header = session._serialized_header()
    for _ in range(2):
        log.begin_append()
        try:
            with pytest.raises(ValueError, match="not an entry line"):
                log.write([b'{"type":"session","id":"y"}'], header)
        finally:
            log.end_append()
        session.append_message(UserMessage.of("q"))
    first, second = session.ids()
    assert session._index.get(second).line == 3
    with reopen(session) as again:
        assert again.ids() == [first, second]
        assert again._index.get(second).line == 3


def test_open_errors_are_typed_and_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound) as missing:
        Session.open(tmp_path / "nope.jsonl")
    assert "nope.jsonl" in str(missing.value)

    future = tmp_path / "future.jsonl"
    future.write_text('{"type":"session","version":4,"id":"x","timestamp":"t","cwd":"/"}\n')
    with pytest.raises(UnsupportedVersion) as newer:
        Session.open(future)
    assert "future.jsonl" in str(newer.value) and "upgrade" in str(newer.value)

    old = tmp_path / "old.jsonl"
    shutil.copyfile(CONFORMANCE / "v2-hook-message.jsonl", old)
    before = old.read_bytes()
    with pytest.raises(UnsupportedVersion, match="sessiontree migrate"):
        Session.open(old, migrate=False)
    with pytest.raises(UnsupportedVersion, match="sessiontree migrate"):
        Session.open(old, read_only=True)  # read-only: no migration, no backup written
    assert old.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "future.jsonl", "old.jsonl"]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres", "redis", "redis-cluster"])
def test_open_read_only_reads_and_refuses_every_write(kind: str, tmp_path: Path,
                                                     request: pytest.FixtureRequest) -> None:
    from sessiontree import ReadOnlyStore

    url = request.getfixturevalue("postgres_url") if kind == "postgres" else None
    redis = redis_store_url(request, kind) if kind.startswith("redis") else None
    backend = Backend(kind, tmp_path, url, redis)
    try:
        with backend.create() as session:
            first = session.append_message(UserMessage.of("kept"))
            location = session.url
        assert location is not None
        before = stored(reopen(session))
        with Session.open(location, read_only=True) as reader:
            assert reader.entry(first).type == "message" and len(reader) == 1
            for write in (lambda: reader.append_message(UserMessage.of("no")),
                          lambda: reader.set_label(first, "no"),
                          lambda: reader.checkout(None)):
                with pytest.raises(ReadOnlyStore):
                    write()
        assert stored(reopen(session)) == before
    finally:
        backend.close()


def test_strict_open_raises_with_path_line_and_kind(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    shutil.copyfile(CONFORMANCE / "corrupt-middle-line.jsonl", path)
    with pytest.raises(CorruptLine) as info:
        Session.open(path, strict=True)
    assert (info.value.lineno, info.value.kind, info.value.path) == (5, "corrupt", str(path))
    assert f"{path} line 5" in str(info.value)


def test_load_warning_summarizes_the_problems(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    shutil.copyfile(CONFORMANCE / "non-entry-lines.jsonl", path)
    with pytest.warns(LoadWarning) as record:
        session = Session.open(path)
    assert len(record) == 1
    assert "6 problem(s)" in str(record[0].message) and "and 3 more" in str(record[0].message)
    assert [p.line for p in session.problems] == [4, 5, 6, 7, 8, 9]
    session.close()


def test_unknown_types_and_roles_are_kept(backend: Backend) -> None:
    with backend.load(CONFORMANCE / "unknown-type-and-fields.jsonl") as session:
        kinds = {type(e).__name__ for e in session.entries()}
        assert "UnknownEntry" in kinds
        unknown = next(e for e in session.entries() if isinstance(e, UnknownEntry))
        assert unknown.data["type"] == unknown.type and unknown.data["id"] == unknown.id


def test_a_second_writer_sees_the_first_writers_entries(tmp_path: Path) -> None:
    first = Session.create(tmp_path)
    a = first.append_message(UserMessage.of("from first"))
    second = Session.open(first.file or "")
    b = first.append_message(AssistantMessage.of("first again"))
    with pytest.raises(SessionLockedError, match="another process is writing"):
        second.append_message(AssistantMessage.of("too early"))  # first holds the lock
    first.close()  # ... until it closes
    c = second.append_message(AssistantMessage.of("from second"))
    assert b in second and c not in (a, b)
    assert second.entry(c).parent_id == a  # the second writer's own leaf did not move
    assert set(second.ids()) == {a, b, c}
    second.close()
    with Session.open(first.file or "") as merged:
        assert merged.children_ids(a) == [b, c]


def test_a_writer_refuses_a_file_that_shrank_or_was_replaced(tmp_path: Path) -> None:
    session = Session.create(tmp_path)
    session.append_message(UserMessage.of("q1"))
    path = Path(session.file or "")
    data = path.read_bytes()
    path.write_bytes(data[:-20])
    with pytest.raises(ConcurrentModification, match="shrank"):
        session.append_message(UserMessage.of("q2"))
    assert path.read_bytes() == data[:-20]
    session.close()

    session = Session.open(tmp_path / path.name, warn=False)
    replacement = tmp_path / "other.jsonl"
    replacement.write_bytes(data)
    os.replace(replacement, path)
    with pytest.raises(ConcurrentModification, match="replaced"):
        session.append_message(UserMessage.of("q3"))
    assert path.read_bytes() == data
    session.close()


def test_a_held_lock_times_out_with_a_clear_error(tmp_path: Path) -> None:
    session = Session.create(tmp_path)
    session.append_message(UserMessage.of("q1"))
    path = session.file or ""
    session.close()  # a writer keeps the lock until it closes
    size = os.path.getsize(path)
    other = Session.open(path, lock_timeout=0.05)
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(SessionLocked, match="lock"):
            other.append_message(UserMessage.of("blocked"))
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert os.path.getsize(path) == size
    other.append_message(UserMessage.of("now"))  # the lock is free again
    other.close()


def test_durable_appends_are_written(tmp_path: Path) -> None:
    session = Session.create(tmp_path, durable=True)
    entry_id = session.append_message(UserMessage.of("kept"))
    session.close()
    with Session.open(session.file or "") as reopened:
        assert reopened.leaf_id == entry_id


def test_duplicate_header_lines_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    header = '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}'
    message = ('{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":'
               '"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}')
    path.write_text("\n".join([header, header, message]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Session.open(path, strict=True) as session:
            assert session.ids() == ["aaaaaaaa"] and session.problems == []


def test_in_memory_sessions_never_touch_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    session = Session.in_memory()
    a = session.append_message(UserMessage.of("q"))
    session.set_label(a, "x")
    assert session.file is None and list(tmp_path.iterdir()) == []
    assert session.label(a) == "x" and session.path_ids() == [a, session.leaf_id]


def test_listing_is_newest_first_with_pis_fields(tmp_path: Path) -> None:
    older = Session.create(tmp_path)
    older.append_message(UserMessage(content=[], timestamp=1_000))
    older.append_message(UserMessage(content="first question", timestamp=2_000))
    older.set_name("older one")
    newer = Session.create(tmp_path)
    newer.append_message(UserMessage(content="newer question", timestamp=5_000))
    newer.append_message(AssistantMessage(content=[], timestamp=6_000))
    (tmp_path / "not-a-session.jsonl").write_text("garbage\n")
    listing = list_sessions(tmp_path)
    assert [item.id for item in listing] == [newer.id, older.id]
    assert listing[0].modified_ms == 6_000 and listing[0].message_count == 2
    assert listing[1].first_message == "first question" and listing[1].name == "older one"
    assert listing[1].entry_count == 3
    with pytest.raises(SessionNotFound):
        list_sessions(tmp_path / "missing")


def test_a_pi_file_keeps_its_bytes_when_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "ex1.jsonl"
    shutil.copyfile(CONFORMANCE / "ex1-linear-tool-label-name.jsonl", path)
    before = path.read_bytes()
    with Session.open(path) as session:
        new = session.append_message(UserMessage.of("more"))
        fork_copy = b"".join(session.raw_line(i) + b"\n" for i in session.ids() if i != new)
    after = path.read_bytes()
    assert after.startswith(before)
    assert fork_copy == b"".join(before.splitlines(keepends=True)[1:])
    assert json.loads(after.splitlines()[-1])["parentId"] == "df059638"


def test_to_json_is_text_and_to_json_bytes_its_utf8(tmp_path: Path) -> None:
    with Session.create(tmp_path) as session:
        session.append_message(UserMessage.of("héllo 😀 \u2028"))
        session.append_message(AssistantMessage.of("ok"))
        context = session.build_context()
    text = context.to_json()
    assert isinstance(text, str) and json.loads(text) == context.to_builtins()
    assert context.to_json_bytes() == text.encode("utf-8")
    assert "😀" in text  # written as JSON.stringify writes it, not as an escape


def test_where_create_writes_and_how_to_keep_tests_out_of_pis_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from sessiontree.cli import cli

    home, agent, own = tmp_path / "home", tmp_path / "agent", tmp_path / "own"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    monkeypatch.delenv("SESSIONTREE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    folder = "--" + str(tmp_path).lstrip("/").replace("/", "-") + "--"

    def created() -> Path:
        with Session.create() as session:
            session.append_message(UserMessage.of("hi"))
            return Path(session.file or "")

    # no setting: pi's own folder under the home directory
    assert created().parent == home / ".pi" / "agent" / "sessions" / folder
    # pi's setting moves it, as it moves pi's
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    assert created().parent == agent / "sessions" / folder
    # sessiontree's own setting wins: nothing more reaches pi's folders
    monkeypatch.setenv("SESSIONTREE_DIR", str(own))
    mine = created()
    assert mine.parent == own / folder
    assert len(list(agent.rglob("*.jsonl"))) == 1 and len(list(home.rglob("*.jsonl"))) == 1
    # an explicit folder beats every setting
    with Session.create(tmp_path / "explicit") as session:
        session.append_message(UserMessage.of("here"))
        assert Path(session.file or "").parent == tmp_path / "explicit"
    # `sessiontree ls` with no folder looks where Session.create() writes
    outcome = CliRunner().invoke(cli, ["ls", "--json"], catch_exceptions=False)
    assert [row["path"] for row in json.loads(outcome.stdout)] == [str(mine)]
