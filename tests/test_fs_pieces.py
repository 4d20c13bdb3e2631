"""A rewrite given its data in pieces (a packed envelope index is about thirty) writes them with
few system calls, and the file holds exactly their bytes in order, or, on a disk that fills
midway, nothing at all."""

from __future__ import annotations

import errno
import os
from array import array
from pathlib import Path

import pytest

from sessiontree import _fs
from sessiontree.errors import WriteFailed
from sessiontree.testing.fulldisk import DiskUnavailable, fill, small_disk


def pieces(scale: int) -> list[bytes | memoryview]:
    """More pieces than one ``writev`` takes, some empty, some views of arrays of 4-byte
    items (written as their bytes)."""
    out: list[bytes | memoryview] = [b"", b"head"]
    for i in range(3 * _fs._BATCH):
        out.append(bytes([i % 251]) * (i * scale))
        if i % 5 == 0:
            out.append(memoryview(array("I", range(i * scale // 4 + 1))).cast("B"))
            out.append(b"")
    return out


def test_pieces_are_written_whole_and_in_order(tmp_path: Path) -> None:
    data = pieces(97)
    target = tmp_path / "index"
    _fs.atomic_write(str(target), data, durable=False)
    assert target.read_bytes() == b"".join(bytes(piece) for piece in data)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]  # no temporary file left


def test_pieces_on_a_disk_that_fills_midway_leave_nothing(tmp_path: Path) -> None:
    """The first ``writev`` writes part of the pieces, the next one fails: the typed error,
    no file and no temporary file; once space is back the same call writes them all."""
    data = pieces(400)
    size = sum(len(bytes(piece)) for piece in data)
    try:
        with small_disk(tmp_path / "disk", 2 << 20) as disk:
            filler = fill(disk, leave=size // 3)
            target = disk / "index"
            with pytest.raises(WriteFailed) as failed:
                _fs.atomic_write(str(target), data, durable=False)
            assert failed.value.errno == errno.ENOSPC
            assert sorted(os.listdir(disk)) == ["filler"]
            filler.unlink()
            _fs.atomic_write(str(target), data, durable=False)
            assert target.read_bytes() == b"".join(bytes(piece) for piece in data)
    except DiskUnavailable as exc:
        pytest.skip(str(exc))
