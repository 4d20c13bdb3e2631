"""Scanning a large session file with helper processes, one part of the file each.

Most of a large file's open is msgspec reading every line's JSON (about 1.4 GB/s here), one
core's work; a machine with another core free can read half the file meanwhile. A file of at
least :data:`PARALLEL_BYTES` is cut at line starts into parts; each part after the first is
scanned by a helper process (:mod:`sessiontree._helpers`), which writes its columns (:class:`~sessiontree._columns.Columns`) to its standard output as MessagePack, while
the session's process scans the first part; then it merges the parts in file order.

Invariants:
* The result is the scan of the whole file by one process: the same records, line numbers,
  problems and scanner state (``tests/test_scan.py`` compares them).
* A helper that cannot start, fails, or answers something unreadable costs nothing but time:
  its part is scanned by the session's process. So is every part when the first part holds
  no session header (then the header rules of a whole scan apply).
* Nothing is split when :func:`sessiontree._helpers.processes` says one process
  (``SESSIONTREE_PROCESSES=1``, one CPU, no interpreter to start).
"""

from __future__ import annotations

import os
from array import array
from typing import IO, TYPE_CHECKING, Any, Literal

import msgspec

from . import _helpers
from ._columns import _ODD_ROLE, Columns
from ._scan import Problem, Scanner

if TYPE_CHECKING:
    import subprocess

__all__ = ["PARALLEL_BYTES", "scan_file"]

PARALLEL_BYTES = 96 << 20
"""Files at least this large are scanned in parts (smaller ones scan faster than a helper
process starts and answers)."""
HEAD_START = 20 << 20
"""About what the session's process scans while a helper starts (Python and msgspec load in
about 60 ms here): with one helper, the session's process scans half the file plus half this,
so that both finish together (measured on files of 157 MB and 1.6 GB)."""


class _Part(msgspec.Struct, array_like=True):
    """A helper's answer: the columns and the scanner state after its part."""

    ids: list[str]
    stamps: bytes
    odd_stamps: dict[int, str | None]
    parents: bytes
    unresolved: dict[int, str]
    lines: bytes
    offsets: bytes
    lengths: bytes
    types: tuple[str, bytes]
    roles: tuple[str, bytes]
    type_table: list[str]
    role_table: list[Any]
    rare: dict[int, tuple[str | None, str | None, str | None, str | None]]
    duplicates: int
    forward: bool
    problems: list[Problem]
    lineno: int
    tail: Literal["clean", "unterminated", "torn"]
    tail_offset: int
    ends_with_newline: bool
    last_offset: int


_ODD = {"~sessiontree.odd_role": True}
"""How the role marker of :mod:`sessiontree._columns` travels (it is an object of this process)."""


def _encode(scanner: Scanner, columns: Columns) -> bytes:
    return msgspec.msgpack.encode(_Part(
        ids=columns.ids, stamps=bytes(columns.stamps), odd_stamps=columns.odd_stamps,
        parents=columns.parents.tobytes(),
        unresolved=columns.unresolved, lines=columns.lines.tobytes(),
        offsets=columns.offsets.tobytes(), lengths=columns.lengths.tobytes(),
        types=(columns.types.typecode, columns.types.tobytes()),
        roles=(columns.roles.typecode, columns.roles.tobytes()),
        type_table=columns._types.by_code,
        role_table=[_ODD if role is _ODD_ROLE else role for role in columns._roles.by_code],
        rare=columns.rare, duplicates=columns.duplicates, forward=columns.forward,
        problems=scanner.problems, lineno=scanner.lineno, tail=scanner.tail,
        tail_offset=scanner.tail_offset, ends_with_newline=scanner.ends_with_newline,
        last_offset=scanner.last_offset))


def _decode(data: bytes) -> tuple[_Part, Columns]:
    part = msgspec.msgpack.decode(data, type=_Part)
    columns = Columns()
    columns.ids = part.ids
    columns.stamps = bytearray(part.stamps)
    columns.odd_stamps = part.odd_stamps
    for name, code, raw in (("parents", "i", part.parents), ("lines", "I", part.lines),
                            ("offsets", "q", part.offsets), ("lengths", "I", part.lengths),
                            ("types", *part.types), ("roles", *part.roles)):
        column = array(code)
        column.frombytes(raw)
        setattr(columns, name, column)
    columns.unresolved = part.unresolved
    for value in part.type_table:
        columns._types[value]  # noqa: B018 (gives it its code, in order)
    for value in part.role_table:
        columns._roles[_ODD_ROLE if value == _ODD else value]  # noqa: B018
    if list(columns._types.by_code) != part.type_table or \
            len(columns._roles.by_code) != len(part.role_table):
        raise ValueError("the helper's code tables differ from a fresh one's")
    columns.rare = part.rare
    columns.duplicates = part.duplicates
    columns.forward = part.forward
    if not (len(columns.parents) == len(columns.lines) == len(columns.offsets) ==
            len(columns.lengths) == len(columns.types) == len(columns.roles) ==
            len(columns.stamps) // 24 == len(columns.ids)):
        raise ValueError("the helper's columns differ in length")
    return part, columns


def _cuts(fd: int, size: int, parts: int) -> list[int]:
    """Line starts near the part boundaries (fewer when a line spans a boundary)."""
    cuts: list[int] = []
    first = min(0.75, 0.5 + HEAD_START / 2 / size) if parts == 2 else 1 / parts
    targets = [int(size * (first + (1 - first) * i / (parts - 1))) for i in range(parts - 1)]
    for target in targets:
        at = max(target, cuts[-1] if cuts else 1)
        while at < size:
            window = os.pread(fd, 1 << 16, at - 1)
            newline = window.find(b"\n")
            if newline >= 0:
                cut = at + newline  # the byte after the newline at at - 1 + newline
                if cut < size and (not cuts or cut > cuts[-1]):
                    cuts.append(cut)
                break
            if not window:
                break
            at += len(window)
    return cuts


def _helper(path: str, start: str, stop: str) -> None:
    """A helper process: scan ``path`` from ``start`` to ``stop`` (-1: its end), answer on
    standard output."""
    columns = Columns()
    scanner = Scanner(path, columns)
    scanner.start_after_header({}, 0)
    with open(path, "rb", buffering=0) as stream:
        scanner.scan(stream, int(start), stop=None if int(stop) < 0 else int(stop))
    _helpers.reply(_encode(scanner, columns))


def _answer(helper: subprocess.Popen[bytes] | None) -> tuple[_Part, Columns] | None:
    data = _helpers.answer(helper)
    if data is None:
        return None
    try:
        return _decode(data)
    except (msgspec.DecodeError, ValueError, TypeError):
        return None


def _merge(scanner: Scanner, columns: Columns, part: _Part, part_columns: Columns) -> None:
    base = scanner.lineno
    columns.merge(part_columns, base)
    scanner.problems.extend(Problem(p.line + base, p.kind, p.reason, p.entry_id, p.sidecar)
                            for p in part.problems)
    scanner.lineno = base + part.lineno
    scanner.tail = part.tail
    if part.tail != "clean":  # (the offset means something only then)
        scanner.tail_offset = part.tail_offset
    scanner.ends_with_newline = part.ends_with_newline
    if part.last_offset >= 0:
        scanner.last_offset = part.last_offset


def scan_file(stream: IO[bytes], scanner: Scanner, columns: Columns) -> None:
    """Scan a whole file into ``columns`` (the scanner's sink), large files in parts."""
    fd = stream.fileno()
    size = os.fstat(fd).st_size
    processes = _helpers.processes() if size >= PARALLEL_BYTES else 1
    cuts = _cuts(fd, size, processes) if processes > 1 else []
    if not cuts:
        scanner.scan(stream)
        return
    path = scanner.path or ""
    bounds = list(zip(cuts, [*cuts[1:], None]))
    helpers = [_helpers.start("sessiontree._split_scan:_helper", path, str(start),
                             str(stop if stop is not None else -1)) for start, stop in bounds]
    try:
        scanner.scan(stream, 0, stop=cuts[0])
        for helper, (start, stop) in zip(helpers, bounds):
            answer = _answer(helper) if scanner.header is not None else None
            if answer is None:
                scanner.scan(stream, start, stop=stop)
            else:
                _merge(scanner, columns, *answer)
    finally:
        for helper in helpers:
            _helpers.finish(helper)
