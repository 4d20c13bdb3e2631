"""The envelope index of a session file: an open that reads it gives exactly what a full scan
gives, whatever happened to the file or to the index since it was written."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from unittest import mock
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import Session, UserMessage, _columns, _envindex, _packed
from sessiontree.errors import SessionTreeError
from sessiontree.stores.jsonl import JsonlFile
from sessiontree.testing import context_digest, tree_digest

from .conftest import REPO

# -- random session files --------------------------------------------------------------------------

IDS = st.sampled_from(["a1", "b2", "c3", "d4", "e5", "f6", "g7", "h8", "é9", "x\ny"])
STAMPS = st.sampled_from(["2026-01-15T09:00:01.000Z", "2026-01-15T09:00:02.000Z",
                          "2026-01-15T09:00:00.500+01:00", None, 7])
ROLES = st.sampled_from(["user", "assistant", "toolResult", "custom", 7, None, ["x"]])


@st.composite
def entry_line(draw: st.DrawFn) -> bytes:
    from sessiontree._json import dumps

    kind = draw(st.sampled_from(["message", "message", "message", "label", "session_info",
                                 "custom", "compaction", "model_change", "branch_summary"]))
    entry: dict[str, Any] = {"type": kind, "id": draw(IDS),
                             "parentId": draw(st.one_of(st.none(), IDS, st.just("missing"))),
                             "timestamp": draw(STAMPS)}
    if kind == "message":
        role = draw(ROLES)
        entry["message"] = {"role": role, "content": [{"type": "text", "text": draw(IDS)}],
                            "timestamp": 1}
        if role == "assistant":
            entry["message"].update(provider="p", model="m", stopReason="stop")
    elif kind == "label":
        entry.update(targetId=draw(IDS), label=draw(st.sampled_from(["", "done", "é"])))
    elif kind == "session_info":
        entry["name"] = draw(st.sampled_from([" named ", "", "x"]))
    elif kind == "custom":
        entry.update(customType="k", data={"n": 1})
    elif kind == "compaction":
        entry.update(summary="s", firstKeptEntryId=draw(IDS), tokensBefore=10)
    elif kind == "model_change":
        entry.update(provider="p", modelId="m")
    else:
        entry.update(fromId=draw(IDS), summary="b")
    return dumps(entry)


NOISE = st.sampled_from([b"", b"   ", b"not json", b'{"type":"session","id":"again"}',
                         b'{"type":"message"}', b"[1,2]"])
HEADER = (b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-15T09:00:00.000Z",'
          b'"cwd":"/w"}')


@st.composite
def session_bytes(draw: st.DrawFn) -> bytes:
    lines = [draw(NOISE)] if draw(st.booleans()) and draw(st.booleans()) else []
    lines.append(HEADER)
    for _ in range(draw(st.integers(0, 25))):
        lines.append(draw(NOISE) if draw(st.integers(0, 9)) == 0 else draw(entry_line()))
    ending = b"\r\n" if draw(st.integers(0, 7)) == 0 else b"\n"
    data = ending.join(lines) + ending
    if draw(st.integers(0, 5)) == 0:  # an unterminated last line, whole or torn
        data += draw(entry_line())[:draw(st.sampled_from([None, 9]))]
    return data


DAMAGE = st.sampled_from(["none", "append", "append_much", "append_garbage", "append_torn",
                          "truncate",
                          "rewrite_same_size", "rewrite_in_place", "rewrite_new_file",
                          "torn_index",
                          "flip_index_byte", "wrong_version", "other_file_index", "our_append"])


SEARCHED = st.sampled_from([_columns._SEARCHED, 0])
"""Rows added to packed ones past one in this many make the ids whole; 0: never (the random
files are small: so that rows added to them are searched in the ids' table too)."""

# -- comparing an index-backed open with a full scan -------------------------------------------------

def state(path: Path, index: bool) -> tuple[object, ...]:
    """Everything an open establishes (and the scanner state later appends start from)."""
    try:
        session = Session.open(path, index=index, warn=False, migrate=False)
    except Exception as exc:  # noqa: BLE001 (the same error is expected of both)
        return (type(exc).__name__, str(exc))
    with session:
        records = [(r.type, r.id, r.parent_id, r.timestamp, r.role, r.custom_type, r.target_id,
                    r.label, r.name, r.line, r.offset, r.length)  # type: ignore[attr-defined]
                   for r in session._index.records()]
        scanner = session._log._scanner  # type: ignore[attr-defined]
        leaf = session.leaf_id
        return (session._header_data, [(p.line, p.kind, p.reason, p.entry_id) for p in session.problems],
                records, session.ids(), session.labels(), session.name, leaf, len(session),
                tree_digest(session.tree()),
                context_digest(session.build_context().to_builtins()["messages"]),
                sorted(session._index.cycle_roots),  # type: ignore[attr-defined]
                session._index._columns.duplicates,  # type: ignore[attr-defined]
                session._index._columns.forward,  # type: ignore[attr-defined]
                scanner.state().lineno, scanner.tail, scanner.end, scanner.ends_with_newline,
                scanner.last_offset, scanner.tail_offset if scanner.tail != "clean" else None)


def index_file(path: Path) -> Path:
    return Path(_envindex.index_path(os.stat(path)))


LONG = (b'{"type":"message","id":"a1","parentId":"c3","timestamp":"2026-01-15T09:00:03.000Z",'
        b'"message":{"role":"user","content":[{"type":"text","text":"' + b"x" * (300 << 10) +
        b'"}],"timestamp":1}}')
"""A line longer than the scan after which the index is written again (its id and parent are
among the random files' ids)."""


def damage(kind: str, path: Path, data: bytes, extra: list[bytes], cut: int,
           other: Path) -> str:
    """Do ``kind`` to the file or its index; returns what was done."""
    idx = index_file(path)
    if kind in ("append", "append_much"):  # (lines whose ids and parents the index has, too)
        with open(path, "ab") as f:
            f.write(b"\n".join(extra + [LONG] * (kind == "append_much")) + b"\n")
    elif kind == "append_garbage":
        with open(path, "ab") as f:
            f.write(b"garbage {\n" + extra[0] + b"\n")
    elif kind == "append_torn":
        with open(path, "ab") as f:
            f.write(extra[0][:max(1, len(extra[0]) // 2)])
    elif kind == "truncate":
        os.truncate(path, cut % max(1, len(data)))
    elif kind == "rewrite_same_size":  # in place, as an editor that keeps the file: mtime moves
        before = os.stat(path)
        with open(path, "r+b") as f:
            f.seek(cut % max(1, len(data)))
            f.write(b"Z")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    elif kind == "rewrite_in_place":  # truncated and written again, longer: same inode
        at = cut % max(1, len(data))
        with open(path, "wb") as f:
            f.write(data[:at] + extra[0] + b"\n" + data[at:])
    elif kind == "rewrite_new_file":
        scratch = path.with_suffix(".tmp")
        scratch.write_bytes(data[:cut % max(1, len(data))] + extra[0] + b"\n")
        os.replace(scratch, path)
    elif kind == "torn_index":
        raw = idx.read_bytes()
        idx.write_bytes(raw[:cut % len(raw)])
    elif kind == "flip_index_byte":
        raw = bytearray(idx.read_bytes())
        raw[cut % len(raw)] ^= 0x41
        idx.write_bytes(bytes(raw))
    elif kind == "wrong_version":
        raw = bytearray(idx.read_bytes())
        raw[len(_packed.MAGIC)] += 1
        idx.write_bytes(bytes(raw))
    elif kind == "other_file_index":  # an index left by another file under this one's key
        try:
            Session.open(other, index=True, warn=False, migrate=False).close()
        except SessionTreeError:
            return "none"  # not a session that opens: no index
        idx.write_bytes(index_file(other).read_bytes())
    elif kind == "our_append":
        with Session.open(path, index=True, warn=False, migrate=False) as session:
            session.append_message(UserMessage.of("appended by us"))
    return kind


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(data=session_bytes(), kind=DAMAGE, extra=st.lists(entry_line(), min_size=1, max_size=4),
       cut=st.integers(0, 10_000), other=session_bytes(), searched=SEARCHED)
def test_an_index_backed_open_equals_a_full_scan(tmp_path_factory: pytest.TempPathFactory,
                                                 data: bytes, kind: str, extra: list[bytes],
                                                 cut: int, other: bytes, searched: int) -> None:
    with mock.patch.object(_columns, "_SEARCHED", searched):
        index_backed_open_equals_a_full_scan(tmp_path_factory, data, kind, extra, cut, other)


def test_a_duplicate_appended_later_moves_a_parent_forward_as_a_full_scan_does(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Found by the property above: ``b2``'s child ``a1`` hangs on the ``b2`` another program
    appended after it; the index-backed open must say a parent lies ahead (what decides the
    cycle check of later reopens), as the full scan does."""
    def line(entry_id: str, parent: str | None) -> bytes:
        return (f'{{"type":"message","id":"{entry_id}","parentId":'
                f'{json.dumps(parent)},'
                f'"timestamp":"2026-01-15T09:00:01.000Z","message":{{"role":"user",'
                f'"content":[{{"type":"text","text":"a1"}}],"timestamp":1}}}}').encode()

    data = (b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-15T09:00:00.000Z",'
            b'"cwd":"/w"}\r\n' + line("b2", None) + b"\r\n" + line("a1", "b2") + b"\r\n" +
            b'{"type":"session_info","id":"a1","parentId":null,'
            b'"timestamp":"2026-01-15T09:00:01.000Z","name":" named "}\r\n')
    index_backed_open_equals_a_full_scan(tmp_path_factory, data, "append",
                                         [line("a1", None), line("b2", None)], 0, data)


def index_backed_open_equals_a_full_scan(tmp_path_factory: pytest.TempPathFactory, data: bytes,
                                         kind: str, extra: list[bytes], cut: int,
                                         other: bytes) -> None:
    folder = tmp_path_factory.mktemp("envindex")
    path, other_path = folder / "s.jsonl", folder / "other.jsonl"
    path.write_bytes(data)
    other_path.write_bytes(other)
    first = state(path, index=True)  # writes the index (when the file has a header)
    assert first == state(path, index=False)
    if not index_file(path).exists():
        assert isinstance(first[0], str)  # no header: an error, nothing to index
        return
    indexed_end = os.stat(path).st_size
    clean = data.endswith(b"\n")
    kind = damage(kind, path, data, extra, cut, other_path)
    log = JsonlFile(path, index=True)  # the first open after the damage
    try:
        Session(log, warn=False).close()
    except SessionTreeError:
        assert kind in ("truncate", "rewrite_new_file", "rewrite_same_size",
                        "rewrite_in_place")
    whole = state(path, index=False)
    assert state(path, index=True) == whole, kind
    if kind == "none" or (kind in ("append", "append_much", "append_garbage", "append_torn",
                                   "our_append") and clean):
        assert log.indexed_bytes == indexed_end, kind  # read from the index, not scanned
    elif kind in ("torn_index", "wrong_version", "other_file_index", "rewrite_same_size",
                  "rewrite_in_place") or (
            kind == "truncate" and os.stat(path).st_size < indexed_end):
        assert log.indexed_bytes == 0, kind  # not trusted: scanned again
    assert state(path, index=True) == whole, kind  # and from the index that open wrote
    if kind == "append_much" and clean:  # written again: the rows read back, and those added
        reopened = JsonlFile(path, index=True)
        Session(reopened, warn=False).close()
        assert reopened.indexed_bytes == os.stat(path).st_size


# -- the ids' table: rows read back find ids as the columns they were packed from -------------------

FIXED_IDS = ["a1", "b2", "c3", "d4", "e5"]  # (packed in the fixed-width form)
ODD_IDS = ["a1", "b2", "é9", "x\ny", "longer-id", ""]  # (packed as UTF-8)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), tabled=st.booleans(), one_by_one=st.booleans(), searched=SEARCHED)
def test_columns_read_back_find_ids_as_the_columns_they_were_packed_from(
        data: st.DataObject, tabled: bool, one_by_one: bool, searched: int) -> None:
    """Rows packed (with their hash table, or without: a helper's answer) and read back, then
    more rows added (one by one as another writer's lines, or as a scanned batch): every id's
    row, each row's parent, the duplicates and the table are those of columns that were never
    packed, given the same rows the same way; and so again after packing those. The random
    files are small: their tables have few heads, so ids share chains."""
    from sessiontree._columns import Columns, PackedIds
    from sessiontree._packed import Block, pack
    from sessiontree._scan import FileRecord, ScanState

    pool = data.draw(st.sampled_from([FIXED_IDS, ODD_IDS]))
    ids = st.sampled_from(pool)
    records = [FileRecord("message", entry_id, parent, line=line, offset=line, length=1)
               for line, (entry_id, parent) in enumerate(data.draw(st.lists(st.tuples(
                   ids, st.one_of(st.none(), ids, st.just("missing"))), max_size=30)))]
    cut = data.draw(st.integers(0, len(records)))
    state = ScanState(None, 0, 0, [], "clean", 0, True, 0, 0)

    def read_back(columns: Columns, with_table: bool) -> Columns:
        return Block.of_bytes(b"".join(pack(columns, state, table=with_table))).columns()

    whole, packed = Columns(), Columns()
    whole.add_batch(records[:cut])
    packed.add_batch(records[:cut])
    back = read_back(packed, tabled)
    with mock.patch.object(_columns, "_SEARCHED", searched):
        for columns in (whole, back):
            if one_by_one:
                for record in records[cut:]:
                    columns.append(record)
            else:
                columns.add_batch(records[cut:])
    for columns in (back, read_back(back, True)):
        assert [columns.row_of(entry_id) for entry_id in [*pool, "missing"]] == \
            [whole.row_of(entry_id) for entry_id in [*pool, "missing"]]
        assert columns.ids == whole.ids
        assert [columns.id_at(row) for row in range(len(records))] == whole.ids
        assert (list(columns.parents), columns.unresolved, columns.duplicates, columns.forward) == \
            (list(whole.parents), whole.unresolved, whole.duplicates, whole.forward)
        every = PackedIds.of(whole.ids)
        assert tuple(map(list, columns.id_table(every))) == \
            tuple(map(list, whole.id_table(every))) == tuple(map(list, chained(whole.ids)))


@settings(max_examples=200, deadline=None)
@given(width=st.integers(0, 20), count=st.integers(0, 40), bits=st.integers(4, 26),
       data=st.data())
def test_the_ids_slots_are_their_crc(width: int, count: int, bits: int,
                                     data: st.DataObject) -> None:
    """The slots computed for many ids of one width at once (XORed tables) are each id's
    CRC-32 in the table, as a lookup computes it, whatever its characters and from any row."""
    import zlib

    from sessiontree._columns import PackedIds

    text = st.text(max_size=width, min_size=width) if data.draw(st.booleans()) else \
        st.text(st.characters(max_codepoint=127), min_size=width, max_size=width)
    ids = data.draw(st.lists(text, min_size=count, max_size=count))
    start, mask = data.draw(st.integers(0, count)), (1 << bits) - 1
    assert list(PackedIds.of(ids).slots(mask, start)) == [
        zlib.crc32(entry_id.encode("utf-8", "surrogatepass")) & mask for entry_id in ids[start:]]


def chained(ids: list[str]) -> tuple[list[int], list[int]]:
    """The hash table of ``ids`` made the plain way: each row links to the last row before it
    whose id has the same CRC-32 in the table's heads."""
    import zlib

    size = _columns.table_size(len(ids))
    heads, links = [_columns.NO_ROW] * size, []
    for row, entry_id in enumerate(ids):
        slot = zlib.crc32(entry_id.encode("utf-8", "surrogatepass")) % size
        links.append(heads[slot])
        heads[slot] = row
    return heads, links


def test_a_grown_reopen_and_its_first_append_make_no_whole_id_column(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines another program appended and the first append of a session opened from its index
    find their parents and a new id's collisions in the ids' hash table: the packed ids are never
    made into one string each (a million of them took 2.4 s and 143 MiB). (A line reusing an
    id still does: the tree index looks for duplicates among every id then.)"""
    from sessiontree._columns import PackedIds

    path = big_session(tmp_path)
    Session.open(path).close()  # writes the index
    lines = path.read_bytes().splitlines(keepends=True)
    with open(path, "ab") as f:  # children of the last and of an early entry, an orphan
        f.write(lines[-1].replace(b'"id":"', b'"id":"z'))
        f.write(lines[5].replace(b'"id":"', b'"id":"y'))
        f.write(lines[6].replace(b'"id":"', b'"id":"x').replace(b'"parentId":"', b'"parentId":"n'))
    early = json.loads(lines[5])

    def whole(self: PackedIds) -> list[str]:
        raise AssertionError("every id was made")

    monkeypatch.setattr(PackedIds, "all", whole)
    log = JsonlFile(path)
    with Session(log, warn=False) as session:
        assert log.indexed_bytes > 0
        assert [p.kind for p in session.problems] == ["orphan"] and len(session) == 403
        assert session.path_ids("y" + early["id"])[-2:] == [early["parentId"], "y" + early["id"]]
        session.build_context()
        leaf = session.leaf_id
        new = session.append_message(UserMessage.of("after the reopen"))
        assert session.path_ids(new)[-2:] == [leaf, new] and len(session) == 404
    monkeypatch.undo()
    assert state(path, True) == state(path, False)


def test_an_appends_id_is_in_use_nowhere_in_the_session(tmp_path: Path) -> None:
    """An append's id comes from ids drawn ahead and checked against the packed rows together
    (their slots computed at once): one a packed row holds is never kept, and one a row added
    since or an append still waiting to join the columns holds is passed over."""
    path = big_session(tmp_path)
    Session.open(path).close()  # writes the index
    with Session.open(path) as session:
        columns = session._index._indexed  # type: ignore[attr-defined]
        held = session.ids()[::10]
        fresh = [f"{n:08x}" for n in range(40)]
        assert not set(fresh) & set(session.ids())
        assert columns._not_packed([*held, *fresh]) == fresh
        waiting = session.append_message(UserMessage.of("waits to join the columns"))
        columns._unused += ["feedbeef", waiting]
        assert session._index.new_id() == "feedbeef"  # type: ignore[attr-defined]
        session.build_context()  # the append joins the columns (a row added since packing)
        columns._unused += ["feedbee0", waiting]
        assert session._index.new_id() == "feedbee0"  # type: ignore[attr-defined]


def test_every_reader_sees_the_entries_appended_since_it_last_read(tmp_path: Path) -> None:
    """Appends wait to join the columns until something reads them (in one batch): each reader,
    called right after appends to a session opened from its index, answers as a session that
    read the whole file does."""
    path = big_session(tmp_path)
    Session.open(path).close()  # writes the index
    readers: dict[str, Any] = {
        "ids": lambda s: s.ids(), "len": len, "leaves": lambda s: s.leaves(),
        "branch_points": lambda s: s.branch_points(), "labels": lambda s: s.labels(),
        "name": lambda s: s.name, "tree": lambda s: tree_digest(s.tree()),
        "path": lambda s: s.path_ids(s.ids()[-1]),
        "children": lambda s: s.children_ids(s.ids()[-3]),
        "entries": lambda s: [e.id for e in s.entries()],
        "context": lambda s: context_digest(s.build_context(s.ids()[-1]).to_builtins()["messages"]),
        "last line": lambda s: s.raw_line(s.ids()[-1]),
    }
    with Session.open(path) as session:
        early = session.ids()[7]
        session.tree()  # children indexed, then kept up to date
        for turn, (name, read) in enumerate(readers.items()):
            first = session.append_message(UserMessage.of(f"turn {turn}"))
            session.set_label(early, f"label {turn}")
            session.set_name(f"name {turn}")
            session.branch(first)
            session.append_message(UserMessage.of(f"second child of turn {turn}"))
            assert first in session and session.last_id == session.leaf_id
            with Session.open(path, index=False) as whole:
                assert read(session) == read(whole), name
    assert state(path, True) == state(path, False)


# -- what the index is and where it lives ------------------------------------------------------------

def big_session(folder: Path, entries: int = 400) -> Path:
    """A new session file of about 300 KiB (over the size from which files are indexed by
    default)."""
    with Session.create(directory=folder) as session:
        for i in range(entries):
            session.append_message(UserMessage.of(f"message {i} " + "x" * 700))
        assert session.file is not None
        return Path(session.file)


def test_unchanged_and_grown_files_are_read_from_the_index(tmp_path: Path) -> None:
    path = big_session(tmp_path)
    size = path.stat().st_size
    assert size >= _envindex.MIN_BYTES
    log = JsonlFile(path)
    Session(log).close()
    assert log.indexed_bytes == 0  # the first open scans and writes the index
    reopened = JsonlFile(path)
    Session(reopened).close()
    assert reopened.indexed_bytes == size
    with open(path, "ab") as f:  # another program appends
        f.write(path.read_bytes().splitlines(keepends=True)[-1].replace(b'"id":"', b'"id":"z'))
    grown = JsonlFile(path)
    with Session(grown) as session:
        assert grown.indexed_bytes == size  # only the new line was scanned
        assert state(path, True) == state(path, False)
        assert len(session) == 401


def test_a_change_in_place_that_keeps_the_size_is_seen(tmp_path: Path) -> None:
    """Far from both ends of the file (where the digests look), as an editor saving in place
    would: the modification time says the file changed without growing."""
    path = big_session(tmp_path)
    Session.open(path).close()
    data = bytearray(path.read_bytes())
    middle = data.index(b"message 200 ")
    data[middle:middle + 11] = b"changed 200"
    before = path.stat()
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    log = JsonlFile(path)
    with Session(log) as session:
        assert log.indexed_bytes == 0
        assert b"changed 200" in session.raw_line(session.ids()[200])
    assert state(path, True) == state(path, False)


def test_where_the_index_lives_and_its_permissions(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("SESSIONTREE_CACHE_DIR", str(cache))
    sessions = tmp_path / "sessions"
    path = big_session(sessions)
    Session.open(path).close()
    assert [p.name for p in sessions.iterdir()] == [path.name]  # nothing pi would list
    found = index_file(path)
    assert found.parent == cache / "index" and found.exists()
    assert stat.S_IMODE(found.stat().st_mode) == 0o600
    assert stat.S_IMODE(found.parent.stat().st_mode) == 0o700
    assert [p.name for p in found.parent.iterdir() if "tmp-" in p.name] == []
    monkeypatch.delenv("SESSIONTREE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _envindex.cache_dir() == str(tmp_path / "xdg" / "sessiontree")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _envindex.cache_dir() == str(tmp_path / "home" / ".cache" / "sessiontree")


def test_the_index_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = big_session(tmp_path)
    small = tmp_path / "small.jsonl"
    small.write_bytes(HEADER + b"\n")
    Session.open(small).close()
    assert not index_file(small).exists()  # small files are scanned
    Session.open(path, index=False).close()
    assert not index_file(path).exists()
    monkeypatch.setenv("SESSIONTREE_INDEX", "0")
    Session.open(path).close()
    assert not index_file(path).exists()
    Session.open(path, index=True).close()  # the argument wins
    assert index_file(path).exists()
    log = JsonlFile(path)
    Session(log).close()
    assert log.indexed_bytes == 0


def test_index_files_of_removed_sessions_are_pruned(tmp_path: Path) -> None:
    gone, kept = big_session(tmp_path / "a"), big_session(tmp_path / "b")
    Session.open(gone).close()
    stale = index_file(gone)
    gone.unlink()
    (stale.parent / ".pruned").unlink(missing_ok=True)
    Session.open(kept).close()  # writes an index: the daily pruning runs
    assert not stale.exists()
    assert index_file(kept).exists()


_OPEN = """
import sys
from sessiontree import Session
from sessiontree.testing import context_digest, tree_digest
with Session.open(sys.argv[1], index=True, warn=False) as s:
    print(len(s), tree_digest(s.tree()), context_digest(s.build_context().to_builtins()["messages"]))
"""


def test_concurrent_opens_and_an_appender_agree_with_a_full_scan(tmp_path: Path) -> None:
    """Processes opening one file at once (each may write the index) while another process
    appends: every open equals a full scan of the bytes it saw, and the index left behind is
    whole."""
    path = big_session(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    appender = subprocess.Popen([sys.executable, "-c", (
        "import sys\nfrom sessiontree import Session, UserMessage\n"
        "with Session.open(sys.argv[1], index=False) as s:\n"
        "    for i in range(200): s.append_message(UserMessage.of(f'late {i}'))\n"), str(path)],
        env=env)
    readers = [subprocess.Popen([sys.executable, "-c", _OPEN, str(path)], env=env,
                                stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [reader.communicate()[0].split() for reader in readers]
    assert appender.wait() == 0
    for count, tree, context in outputs:
        assert 400 <= int(count) <= 600
    assert [p.name for p in index_file(path).parent.iterdir() if "tmp-" in p.name] == []
    assert state(path, True) == state(path, False)
    with Session.open(path, index=True) as session:
        assert len(session) == 600
