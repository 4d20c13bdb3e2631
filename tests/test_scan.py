"""The scanner gives the same records and problems whatever the chunk boundaries."""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import pytest
from msgspec.structs import astuple

from sessiontree import _helpers, _split_scan
from sessiontree._columns import Columns
from sessiontree._scan import FileRecord, Record, Scanner
from sessiontree._tree import TreeIndex
from sessiontree.errors import CorruptHeader

from .conftest import CONFORMANCE

FILES = sorted(p for p in CONFORMANCE.glob("*.jsonl") if p.stat().st_size < 200_000)


def scan(data: bytes, chunk_size: int) -> tuple[object, ...]:
    scanner = Scanner("x")
    try:
        scanner.scan(io.BytesIO(data), chunk_size=chunk_size)
        scanner.finish()
    except CorruptHeader as exc:
        return ("bad_header", exc.lineno)
    records = [(r.id, r.parent_id, r.type, r.line, r.offset, r.length, r.role) for r in scanner.records]
    problems = [(p.line, p.kind) for p in scanner.problems]
    for r in scanner.records:  # offsets and lengths point at exactly the entry's bytes
        assert data[r.offset:r.offset + r.length].strip().startswith(b"{")
        assert not data[r.offset:r.offset + r.length].endswith((b"\r", b"\n"))
    return (scanner.header, records, problems, scanner.tail, scanner.ends_with_newline)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_chunk_boundaries_do_not_matter(path: object) -> None:
    data = CONFORMANCE.joinpath(str(path)).read_bytes()
    reference = scan(data, 1 << 20)
    for size in (1, 2, 3, 7, 64, 1000):
        assert scan(data, size) == reference, size


def _fields(record: object) -> tuple[object, ...]:
    return tuple(getattr(record, f) for f in ("type", "id", "parent_id", "timestamp", "role",
                                               "line", "offset", "length"))


ODD = (b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}\n'
       b'{"type":"message","id":"a","parentId":null,"timestamp":"t1","message":{"role":"user"}}\n'
       b'\n'
       b'{"type":"label","id":"b","parentId":"a","timestamp":"t2","targetId":"a","label":"x"}\n'
       b'{"type":"session","id":"dup-header"}\n'
       b'{"type":"message","id":"c","parentId":"later","timestamp":"t3","message":{"role":7}}\n'
       b'not json\n'
       b'{"type":"message","id":"m1","parentId":"a","timestamp":"t8","message":{"role":["x"]}}\n'
       b'{"type":"message","id":"m2","parentId":"m1","timestamp":"t9","message":null}\n'
       b'{"type":"message","id":"m3","parentId":"m2","timestamp":"t9","message":{"content":[]}}\n'
       b'{"type":"session_info","id":"d","parentId":"c","timestamp":"t4"}\n'
       b'{"type":"custom","id":"later","parentId":"a","customType":"k","timestamp":"t5"}\n'
       b'{"type":"message","id":"a","parentId":null,"timestamp":"t6","message":{"role":"x1"}}\r\n'
       b'{"type":"message","id":"e","parentId":"a","timestamp":"t7"')


@pytest.mark.parametrize("path", [*FILES, None], ids=[*(p.stem for p in FILES), "odd"])
def test_columns_give_the_scanned_records(path: object) -> None:
    """Records kept by column and made again on demand equal the records the scanner made."""
    data = ODD if path is None else CONFORMANCE.joinpath(str(path)).read_bytes()
    for size in (7, 1 << 20):
        listed = Scanner("x")
        columns = Columns()
        by_column = Scanner("x", columns)
        for scanner in (listed, by_column):
            try:
                scanner.scan(io.BytesIO(data), chunk_size=size)
            except CorruptHeader:
                return
        assert isinstance(listed.records, list)
        assert [_fields(r) for r in columns] == [_fields(r) for r in listed.records]
        assert [r.type for r in columns] == [r.type for r in listed.records]
        for made, scanned in zip(columns, listed.records):
            if made.type != "message":
                assert (made.custom_type, made.target_id, made.label, made.name) == \
                    (scanned.custom_type, scanned.target_id, scanned.label, scanned.name)
        assert not len(columns) or columns[len(columns) - 1] is columns[-1]  # one object a row
        assert by_column.problems == listed.problems
        assert by_column.last_offset == listed.last_offset


MERGED: list[int] = []


def _scanned_whole(data: bytes, folder: Path, processes: int,
                   monkeypatch: pytest.MonkeyPatch) -> tuple[object, ...]:
    path = folder / f"split-{processes}.jsonl"
    path.write_bytes(data)
    monkeypatch.setattr(_split_scan, "PARALLEL_BYTES", 1)
    monkeypatch.setattr(_split_scan, "HEAD_START", 0)  # equal parts, even of a small file
    monkeypatch.setattr(_helpers, "processes", lambda requested=None: processes)
    merge = _split_scan.__dict__.get("_real_merge", _split_scan._merge)
    monkeypatch.setattr(_split_scan, "_real_merge", merge, raising=False)
    monkeypatch.setattr(_split_scan, "_merge", lambda *a: (MERGED.append(1), merge(*a))[1])
    columns = Columns()
    scanner = Scanner(str(path), columns)
    with open(path, "rb", buffering=0) as stream:
        try:
            _split_scan.scan_file(stream, scanner, columns)
            scanner.finish()
        except CorruptHeader as exc:
            return ("bad_header", exc.lineno)
    problems = list(scanner.problems)
    index = TreeIndex(columns, problems)
    return ([_fields(r) for r in columns], sorted(problems, key=lambda p: (p.line, p.kind)),
            [_fields(r) for r in index.records()], index.labels, index.name,
            scanner.header, scanner.lineno, scanner.tail,
            scanner.tail_offset if scanner.tail != "clean" else None,
            scanner.ends_with_newline, scanner.last_offset)


SPLIT_CASES = [*FILES, None, "doubled"]


@pytest.mark.parametrize("case", SPLIT_CASES, ids=[*(p.stem for p in FILES), "odd", "doubled"])
def test_a_file_scanned_in_parts_by_helper_processes_is_the_whole_scan(
        case: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Helpers scanning parts of a file (ids duplicated across parts, parents in other parts,
    corrupt lines, a torn tail) give what one process scanning it all gives."""
    if case == "doubled":  # every entry twice, far apart: duplicates across parts
        body = b"".join(CONFORMANCE.joinpath(str(p)).read_bytes().split(b"\n", 1)[1]
                        for p in FILES[:6])
        data = ODD.split(b"\n", 1)[0] + b"\n" + body + body + ODD.split(b"\n", 1)[1]
    else:
        data = ODD if case is None else CONFORMANCE.joinpath(str(case)).read_bytes()
    whole = _scanned_whole(data, tmp_path, 1, monkeypatch)
    for processes in (2, 4):
        MERGED.clear()
        assert _scanned_whole(data, tmp_path, processes, monkeypatch) == whole, processes
        if whole[0] != "bad_header" and data.count(b"\n") >= 2 * processes:
            assert MERGED  # helpers answered (fewer parts than processes when lines are long)


def test_a_helper_that_fails_costs_only_time(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper that dies (or answers garbage) has its part scanned by the session's process;
    one that dies says so (a warning)."""
    data = ODD * 3
    whole = _scanned_whole(data, tmp_path, 1, monkeypatch)
    for code in ("import sys; sys.exit(3)", "import sys; sys.stdout.write('garbage')"):
        monkeypatch.setattr(_helpers, "_RUN", code)
        MERGED.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert _scanned_whole(data, tmp_path, 3, monkeypatch) == whole, code
        assert not MERGED
        assert {str(warning.message) for warning in caught} == (
            {"a helper process (sessiontree._split_scan:_helper) failed (exit status 3; its "
             "work is done here)"} if "exit" in code else set())


def test_a_session_starts_scan_helpers_only_when_asked(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Session.open scans in one process unless ``processes`` (or SESSIONTREE_PROCESSES) asks
    for more; a helper here only leaves a mark (and fails, so its part is scanned here)."""
    from sessiontree import Session

    path = tmp_path / "s.jsonl"
    path.write_bytes(ODD.rsplit(b"\n", 1)[0] + b"\n" +
                     b"".join(CONFORMANCE.joinpath(str(p)).read_bytes().split(b"\n", 1)[1]
                              for p in FILES[:3]))
    marks = tmp_path / "marks"
    monkeypatch.setattr(_split_scan, "PARALLEL_BYTES", 1)
    monkeypatch.setattr(_helpers, "_busy", lambda: 0)  # as on an idle machine
    monkeypatch.setattr(_helpers, "_RUN", f"open({str(marks)!r}, 'a').write('x')")
    monkeypatch.delenv("SESSIONTREE_PROCESSES", raising=False)

    def opened(**options: object) -> tuple[bool, list[str]]:
        marks.unlink(missing_ok=True)
        with Session.open(path, warn=False, index=False, **options) as session:  # type: ignore[arg-type]
            return marks.exists(), session.ids()

    alone, ids = opened()
    assert not alone
    free = len(os.sched_getaffinity(0)) >= 2
    assert opened(processes=2) == (free, ids)
    monkeypatch.setenv("SESSIONTREE_PROCESSES", "2")
    assert opened() == (free, ids)
    assert opened(processes=1) == (False, ids)  # the argument wins


def test_entry_records_decode_a_stores_lines_as_entry_record_does() -> None:
    """The one-loop decoder gives what the careful one does, lines it rejects included (a lone
    surrogate, a parentId that is not a string), and refuses a header line as that one does."""
    lines = [
        b'{"type":"message","id":"a1","parentId":null,"timestamp":"t",'
        b'"message":{"role":"user","content":"hi"}}',
        b'{"type":"label","id":"a2","parentId":"a1","targetId":"a1","label":"\\ud800"}',
        b'{"type":"custom","id":"a3","parentId":7,"customType":"x"}',
    ]
    careful = Scanner(None)
    expected = [careful.entry_record(line, 0) for line in lines]
    for number, record in enumerate(expected, 5):
        record.line = number
    found = Scanner(None).entry_records(lines, 5)

    def fields(record: Record) -> tuple[object, ...]:  # the message as its role
        return (*astuple(record)[:4], record.role, *astuple(record)[5:])

    assert list(map(fields, found)) == list(map(fields, expected))
    assert [r.has_content for r in found] == [True, False, False]  # "hi" is content
    with pytest.raises(ValueError, match="not an entry line"):
        Scanner(None).entry_records([lines[0], b'{"type":"session","id":"s"}'], 2)


@pytest.mark.parametrize(("message", "has"), [
    (b'{"role":"user","content":[{"type":"text","text":"a"}]}', True),
    (b'{"role":"assistant","content":"x"}', True),
    (b'{"role":"user","content":null}', False),
    (b'{"role":"user"}', False),
    (b'{"role":"user","content":"x","content":null}', False),  # the last key wins, as in pi
    (b'{"role":"toolResult","content":null,"content":[]}', True),
    (b'{"role":"user","details":{"content":null},"content":[]}', True),
    (b'{"role":"odd","content":[]}', True),
    (b'null', False),
])
def test_a_stores_records_say_whether_the_message_has_content(message: bytes, has: bool) -> None:
    """What a context reads without looking into the message: its top-level content is there
    and not null (JSON's last duplicate key wins); the role is the careful decoder's."""
    line = b'{"type":"message","id":"m1","parentId":null,"message":' + message + b"}"
    (record,) = Scanner(None).entry_records([line], 2)
    assert record.has_content is has
    assert record.role == Scanner(None).entry_record(line, 0).role
    assert Scanner(None).entry_record(line, 0).has_content is False  # files: not known


@pytest.mark.parametrize("where", ["file", "memory", "pending"])
def test_an_appended_messages_record_is_what_decoding_its_line_gives(tmp_path: Path,
                                                                     where: str) -> None:
    """An append places the record it made of its message line (no decode): the same fields,
    role holder and position as the careful decoder gives for those bytes at that place."""
    from sessiontree import AssistantMessage, Session, UnknownMessage, UserMessage
    from sessiontree.stores.pending import PendingFile

    messages = [UserMessage.of("hi"), AssistantMessage.of("there"),
                {"role": "user", "content": "as a dict"}, {"role": "robot", "beep": 1},
                UnknownMessage(data={"role": "odd", "x": [1.0]})]
    if where == "file":
        session = Session.create(tmp_path)
    elif where == "memory":
        session = Session.in_memory()
    else:  # the pending file of a fork: kept in memory until the first conversation
        from sessiontree._json import dumps
        header = dumps({"type": "session", "version": 3, "id": "s1", "timestamp": "t",
                        "cwd": "/"})
        session = Session(PendingFile(tmp_path / "fork.jsonl", [header]))
        session.append_message({"role": "robot", "beep": 0})  # kept, nothing written yet
    with session:
        for message in messages:
            entry_id = session.append_message(message)
            placed = session._index.get(entry_id)
            assert isinstance(placed, FileRecord)
            decoded = Scanner(None).entry_record(session.raw_line(entry_id), placed.offset)
            decoded.line = placed.line
            assert astuple(placed) == astuple(decoded)
            if placed.role in ("user", "assistant"):
                assert placed.message is decoded.message  # the shared role holder
        path = session.file
    if path is not None:  # what a new scan of the file finds at those places
        with Session.open(path) as again:
            assert [astuple(again._index.get(i)) for i in again.ids()][-5:] == \
                [astuple(session._index.get(i)) for i in again.ids()][-5:]


_HEADER = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}\n'
_LAST = b'{"type":"custom","id":"z","parentId":null,"customType":"k"}\n'


@pytest.mark.parametrize(("lines", "problems"), [
    ([b'{"type":"custom","id":"a","parentId":null} {"type":"custom","id":"b","parentId":"a"}',
      b""], [(2, "corrupt")]),
    ([b'{"type":"custom","id":"a","parentId":null,"x":',
      b'{"y":1}} {"type":"custom","id":"b","parentId":null}'], [(2, "corrupt"), (3, "corrupt")]),
    ([b'{"type":"custom","id":"a","parentId":null} {"type":"custom","id":"b","parentId":"a"}'],
     [(2, "corrupt")]),
], ids=["two-objects-on-a-line-and-a-blank-line", "an-object-over-two-lines",
        "two-objects-on-a-line"])
def test_lines_that_are_not_one_object_each_are_not_read_as_entries(
        lines: list[bytes], problems: list[tuple[int, str]]) -> None:
    """Lines are decoded together only when each holds one object: these lines hold as many
    JSON values as they are lines, but not one each, so they are read one by one."""
    header, records, found, _, _ = scan(_HEADER + b"\n".join(lines) + b"\n" + _LAST, 1 << 20)
    assert [record[0] for record in records] == ["z"]
    assert found == problems
