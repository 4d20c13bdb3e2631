"""The scanner gives the same records and problems whatever the chunk boundaries."""

from __future__ import annotations

import io

import pytest

from sessiontree._scan import Scanner
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
