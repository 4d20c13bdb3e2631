"""Scanning a large session file with helper processes, one part of the file each.

Most of a large file's open is msgspec reading every line's JSON (about 1.4 GB/s here), one
core's work; a machine with another core free can read half the file meanwhile. A file of at
least :data:`PARALLEL_BYTES` is cut at line starts into parts; each part after the first is
scanned by a helper process (:mod:`sessiontree._helpers`), which writes its columns
(:class:`~sessiontree._columns.Columns`) to its standard output, packed
(:mod:`sessiontree._packed`), while the session's process scans the first part; then it merges
the parts in file order.

Invariants:
* The result is the scan of the whole file by one process: the same records, line numbers,
  problems and scanner state (``tests/test_scan.py`` compares them).
* A helper that cannot start, fails, or answers something unreadable costs nothing but time:
  its part is scanned by the session's process. So is every part when the first part holds
  no session header (then the header rules of a whole scan apply).
* Nothing is split when :func:`sessiontree._helpers.processes` says one process (the
  default: helpers start only when the caller asks; one CPU free; no interpreter to start).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from . import _helpers
from ._columns import Columns
from ._scan import Problem, Readable, Scanner, ScanState

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
    from ._packed import pack

    columns = Columns()
    scanner = Scanner(path, columns)
    scanner.start_after_header({}, 0)
    with open(path, "rb", buffering=0) as stream:
        scanner.scan(stream, int(start), stop=None if int(stop) < 0 else int(stop))
    _helpers.reply(*pack(columns, scanner.state(), table=False))  # (merged whole)


def _answer(helper: subprocess.Popen[bytes] | None) -> tuple[ScanState, Columns] | None:
    from ._packed import Block, Unreadable  # (only where helpers run)

    data = _helpers.answer(helper)
    if data is None:
        return None
    try:
        block = Block.of_bytes(data)
        return block.state, block.columns()
    except Unreadable:
        return None


def _merge(scanner: Scanner, columns: Columns, part: ScanState, part_columns: Columns) -> None:
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
    scanner.end = part.end


def scan_file(stream: Readable, scanner: Scanner, columns: Columns,
              processes: int | None = None) -> None:
    """Scan a whole file into ``columns`` (the scanner's sink), large files in parts when
    ``processes`` allows (see :func:`sessiontree._helpers.processes`)."""
    fd = stream.fileno()
    size = os.fstat(fd).st_size
    processes = _helpers.processes(processes) if size >= PARALLEL_BYTES else 1
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
        _helpers.finish(*helpers)
