"""Scanned envelopes as bytes: a :class:`~sessiontree._columns.Columns` and the scanner's
state (:class:`~sessiontree._scan.ScanState`) in one block, read back without making an object
per entry. A helper process answers with one (:mod:`sessiontree._split_scan`); a session file's
persisted index is one (:mod:`sessiontree._envindex`).

Layout: ``MAGIC``, then ``<HII``: format version, meta length, CRC-32 of the meta; the meta
(MessagePack :class:`_Meta`: the small fields, the caller's ``extra`` bytes, and where each
column lies); then each column's raw bytes (machine byte order, 8-byte aligned), each with its
own CRC-32 in the meta.

Invariants:
* Reading is all or nothing: a block that is short, of another format version or byte order,
  whose meta or any column fails its CRC, or whose columns disagree in length raises
  :class:`Unreadable`; nothing half-read is handed out.
* What is read back gives the same records as the columns that were packed (ids, parents as
  scanned, problems, codes, rare fields, odd timestamps).
* Ids are stored as :class:`~sessiontree._columns.PackedIds` and stay packed until used; a
  session file's index also keeps a hash table of them
  (:class:`~sessiontree._columns.IdTable`), so that an id's row is found without making every
  id; a helper's answer, merged whole, does not.
"""

from __future__ import annotations

import os
import struct
import sys
import zlib
from array import array
from collections.abc import Callable
from typing import Any

import msgspec

from ._columns import _ODD_ROLE, Columns, IdTable, PackedIds, table_size
from ._scan import ScanState

__all__ = ["FORMAT_VERSION", "Block", "Unreadable", "pack"]

MAGIC = b"sessiontree-envelopes\n"
FORMAT_VERSION = 3
"""Bumped whenever the layout or the meaning of a field changes: an older block is unreadable
(2: the ids' order and its fences; 3: a hash table of the ids in their place)."""
_FIXED = struct.Struct("<HII")
_ODD = {"~sessiontree.odd_role": True}
"""How the role marker of :mod:`sessiontree._columns` is stored (an object of this process)."""
_ARRAYS = ("parents", "lines", "offsets", "lengths", "types", "roles")


class Unreadable(ValueError):
    """The block cannot be read back (see the module docstring); the caller starts over."""


class _Meta(msgspec.Struct, array_like=True):
    byteorder: str
    count: int
    id_width: int
    type_table: list[str]
    role_table: list[Any]
    codes: dict[str, str]
    """Each array column's typecode."""
    itemsizes: dict[str, int]
    rare: dict[int, tuple[str | None, str | None, str | None, str | None]]
    odd_stamps: dict[int, str | None]
    unresolved: dict[int, str]
    duplicates: int
    forward: bool
    state: ScanState
    extra: bytes
    sections: dict[str, tuple[int, int, int]]
    """Column name -> (offset from the block's start, length, CRC-32)."""


_meta_decoder = msgspec.msgpack.Decoder(_Meta)


def pack(columns: Columns, state: ScanState, extra: bytes = b"", *,
         table: bool = True) -> list[bytes | memoryview]:
    """The block of ``columns`` (of a file log: located records) and ``state``, in pieces to
    write one after the other (views of the columns, but the ids and, with ``table``, their
    hash table: one step a row, or a copy with the rows added since for columns read back).

    Raises:
        msgspec.EncodeError, UnicodeEncodeError, OverflowError: a value MessagePack cannot hold
            (a lone surrogate, an integer past 64 bits): such a log is not packed.
    """
    ids = columns.packed_ids()
    raw: dict[str, bytes | bytearray | array[int]] = {"ids": ids.blob}
    if ids.ends is not None:
        raw["ends"] = ids.ends
    if table:
        raw["heads"], raw["links"] = columns.id_table(ids)
    raw["stamps"] = columns.stamps
    for name in _ARRAYS:
        raw[name] = getattr(columns, name)
    # the meta's size depends on the offsets it holds: place the columns after a first guess,
    # then again after the real size until it stops moving
    meta = _Meta(
        byteorder=sys.byteorder, count=len(columns), id_width=ids.width,
        type_table=list(columns.type_codes), role_table=[
            _ODD if role is _ODD_ROLE else role for role in columns.role_codes],
        codes={name: getattr(columns, name).typecode for name in _ARRAYS} | (
            {"ends": "q"} if ids.ends is not None else {}) | (
            {"heads": "I", "links": "I"} if table else {}),
        itemsizes={code: array(code).itemsize for code in "iIqB"},
        rare=columns.rare, odd_stamps=columns.odd_stamps, unresolved=columns.unresolved,
        duplicates=columns.duplicates, forward=columns.forward, state=state, extra=extra,
        sections={name: (0, len(memoryview(data).cast("B")), 0) for name, data in raw.items()})
    crcs = {name: zlib.crc32(data) for name, data in raw.items()}
    while True:
        encoded = msgspec.msgpack.encode(meta)
        offset = _aligned(len(MAGIC) + _FIXED.size + len(encoded))
        sections = {}
        for name, data in raw.items():
            length = len(memoryview(data).cast("B"))
            sections[name] = (offset, length, crcs[name])
            offset = _aligned(offset + length)
        if sections == meta.sections:
            break
        meta.sections = sections
    parts: list[bytes | memoryview] = [MAGIC, _FIXED.pack(FORMAT_VERSION, len(encoded), zlib.crc32(encoded)), encoded]
    at = len(MAGIC) + _FIXED.size + len(encoded)
    for name, data in raw.items():
        start = sections[name][0]
        parts.append(b"\0" * (start - at))
        parts.append(memoryview(data).cast("B"))
        at = start + sections[name][1]
    return parts


def _aligned(offset: int) -> int:
    return (offset + 7) & ~7


class Block:
    """A packed block being read: its meta at once (:meth:`open`), its columns when asked."""

    def __init__(self, meta: _Meta, size: int, fill: Callable[[Any, int], None]) -> None:
        self.meta = meta
        self._size = size
        self._fill = fill

    @property
    def extra(self) -> bytes:
        return self.meta.extra

    @property
    def state(self) -> ScanState:
        return self.meta.state

    @classmethod
    def of_bytes(cls, data: bytes) -> Block:
        """A block held in memory (a helper's answer)."""
        view = memoryview(data)

        def pread(offset: int, length: int) -> bytes:
            return bytes(view[offset:offset + length])

        def fill(target: Any, offset: int) -> None:
            out = memoryview(target).cast("B")
            out[:] = view[offset:offset + len(out)]

        return cls(cls._meta(pread, len(view)), len(view), fill)

    @classmethod
    def of_file(cls, fd: int) -> Block:
        """A block in a file (read with ``pread``, each column straight into its array)."""

        def pread(offset: int, length: int) -> bytes:
            return os.pread(fd, length, offset)

        def fill(target: Any, offset: int) -> None:
            out = memoryview(target).cast("B")
            done = os.preadv(fd, [out], offset) if hasattr(os, "preadv") else \
                _copy(out, os.pread(fd, len(out), offset))
            if done != len(out):
                raise Unreadable("the block is shorter than its meta says")

        size = os.fstat(fd).st_size
        return cls(cls._meta(pread, size), size, fill)

    @staticmethod
    def _meta(pread: Callable[[int, int], bytes], size: int) -> _Meta:
        head = pread(0, len(MAGIC) + _FIXED.size)
        if len(head) != len(MAGIC) + _FIXED.size or not head.startswith(MAGIC):
            raise Unreadable("not a packed block")
        version, length, crc = _FIXED.unpack_from(head, len(MAGIC))
        if version != FORMAT_VERSION:
            raise Unreadable(f"format version {version}, not {FORMAT_VERSION}")
        if len(head) + length > size:
            raise Unreadable("the block is shorter than its meta")
        encoded = pread(len(head), length)
        if len(encoded) != length or zlib.crc32(encoded) != crc:
            raise Unreadable("the meta is torn or damaged")
        try:
            meta = _meta_decoder.decode(encoded)
        except msgspec.DecodeError as exc:
            raise Unreadable(f"the meta does not decode: {exc}") from None
        if meta.byteorder != sys.byteorder or any(
                array(code).itemsize != size for code, size in meta.itemsizes.items()):
            raise Unreadable("written on a machine of another byte order or word size")
        return meta

    def columns(self) -> Columns:
        """The columns, each read and checked against its CRC."""
        meta = self.meta
        count = meta.count
        # the columns rows are added to first: the ids' bytes, freed once decoded, raise
        # malloc's threshold for mapping a block of its own, and an array allocated after that
        # is copied whole when it first grows (16 MiB more at the peak of a grown 1m reopen)
        stamps = self._section("stamps", count * 24)
        arrays = {name: self._array(name, count) for name in _ARRAYS}
        table = None
        if "heads" in meta.codes:
            table = IdTable(self._array("heads", table_size(count)), self._array("links", count))
        columns = Columns(packed=(self._ids(count, meta.id_width), table))
        for name, column in arrays.items():
            setattr(columns, name, column)
        columns.stamps = stamps
        try:
            columns.set_codes(meta.type_table, [_ODD_ROLE if value == _ODD else value
                                                for value in meta.role_table])
        except (ValueError, TypeError) as exc:  # (TypeError: a role that is no dict key)
            raise Unreadable(str(exc)) from None
        columns.rare = meta.rare
        columns.odd_stamps = meta.odd_stamps
        columns.unresolved = meta.unresolved
        columns.duplicates = meta.duplicates
        columns.forward = meta.forward
        return columns

    def _ids(self, count: int, width: int) -> PackedIds:
        """The ``count`` ids (packed by :meth:`PackedIds.of`; of the UTF-8 form, when
        ``width`` is 0, with their ends)."""
        if width:
            return PackedIds(self._section("ids", count * (width + 1)), count, width)
        ends = self._array("ends", count)
        return PackedIds(self._section("ids", ends[-1] if count else 0), count, 0, ends)

    def _array(self, name: str, count: int) -> array[int]:
        code = self.meta.codes.get(name)
        found = self.meta.sections.get(name)
        if code is None or code not in "iIqB" or found is None or \
                found[0] + count * array(code).itemsize > self._size:
            raise Unreadable(f"column {name} is missing or longer than the block")
        column = array(code, [0]) * count
        self._read(name, column)
        return column

    def _section(self, name: str, length: int) -> bytearray:
        found = self.meta.sections.get(name)
        if found is None or found[0] + length > self._size:
            raise Unreadable(f"column {name} is missing or longer than the block")
        data = bytearray(length)
        self._read(name, data)
        return data

    def _read(self, name: str, target: Any) -> None:
        found = self.meta.sections.get(name)
        size = len(memoryview(target).cast("B"))
        if found is None or found[1] != size:
            raise Unreadable(f"column {name} is missing or of the wrong length")
        offset, _, crc = found
        if offset + size > self._size:
            raise Unreadable(f"the block ends before column {name}")
        if size:
            self._fill(target, offset)
        if zlib.crc32(target) != crc:
            raise Unreadable(f"column {name} is damaged")


def _copy(out: memoryview, data: bytes) -> int:
    out[:len(data)] = data
    return len(data)
