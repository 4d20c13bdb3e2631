"""Envelopes stored by column: a compact, append-only sequence of entry records.

A session of a million entries cannot afford one object per entry with its integers (about 450
bytes each). :class:`Columns` keeps each envelope field in its own column instead: ids in a
list, timestamps as 24 ASCII bytes each in one ``bytearray`` (pi's form
``2026-01-15T09:00:01.000Z``; any other value in a dict by row), parents (as row numbers),
line numbers, byte offsets, lengths, type and role codes in ``array``s, and the rare fields
(custom type, label target, label, name) in a dict by row; about 190 bytes an entry. A
:class:`~sessiontree._scan.Record` is made from the columns when a row is first asked for, and
the same object is handed out from then on (the decoded-line cache hangs on it).

Invariants:
* Rows are in the order they were added (file order for a scanned log); a row never changes
  once added, except its parent, which the tree index may redirect (duplicate ids).
* :meth:`Columns.row_of` gives each id's last row (a later duplicate wins); ``parents[row]``
  is the row of the parent named when the row was added if that id was known then (or
  ``-1``); ``unresolved`` holds the parent ids not known when their row was added, by row.
* Columns read back from their packed form (:mod:`sessiontree._packed`) keep the ids of those
  rows packed (:class:`PackedIds`) with a hash table of them (:class:`IdTable`), and only the
  ids of rows added since in a list and a dict: an id's last row is found by one probe of the
  table, so reopening a large session, reading lines another program appended and appending
  make no object per entry (``ids`` is made when asked for). Once the rows added outnumber a
  sixteenth of the packed ones, every id is made (a probe each would cost more than making
  them).
* ``rare`` holds a row of every ``label`` and ``session_info`` entry (whose replay the tree
  index needs), and of any other entry but a ``message`` with one of those fields set.
* ``record(row)`` returns one object per row, equal in every field to the record that was
  added (a located :class:`~sessiontree._scan.FileRecord` for a file or memory log), except
  that a ``message`` entry's custom type, label target, label and name are not kept (nothing
  reads them: they mean something for custom, label and session_info entries only), a role
  that cannot be a dict key (a list, an object) is kept as ``None``, and a message without
  a role is kept as no message (``Record.role`` says ``None`` of all three anyway).
"""

from __future__ import annotations

import sys
import uuid
import zlib
from array import array
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from itertools import chain, compress, repeat
from operator import add, and_, attrgetter, ge, is_not, ne
from typing import Any, NamedTuple, cast, overload

from ._scan import _KINDS, _ROLES, FileRecord, Record, _Role
from ._time import draw_ids

__all__ = ["Columns", "IdTable", "PackedIds"]

_get_id = attrgetter("id")
_get_parent = attrgetter("parent_id")
_get_timestamp = attrgetter("timestamp")
_get_type = attrgetter("type")
_get_message = attrgetter("message")
_get_role = attrgetter("message.role")
_get_line = attrgetter("line")
_get_offset = attrgetter("offset")
_get_length = attrgetter("length")
_get_rare = attrgetter("custom_type", "target_id", "label", "name")
_NO_RARE = (None, None, None, None)
_STAMP = 24
_NO_STAMP = b" " * _STAMP
_MESSAGE = 0
"""The type code of ``message`` in every instance (the first of the codes they all begin with)."""
_SEARCHED = 16
"""Packed ids stay packed while the rows added since number at most one in this many of them."""
_ODD_ROLE = object()
"""The role code of a message whose ``role`` is not a string (its record's role is ``None``)."""


def _role_key(message: _Role | None) -> Any:
    """What the role column keeps of a record's message: its role, ``None`` for none, or
    one marker for a role that cannot be a key."""
    if message is None:
        return None
    try:
        hash(message.role)
    except TypeError:
        return _ODD_ROLE
    return message.role


def _extend(column: array[int], values: Iterable[int]) -> None:
    """``column.extend(values)`` in a fraction of its time (``extend`` parses and appends each
    value on its own; ``fromlist`` and ``frombytes`` size the array once)."""
    if column.typecode == "B":
        column.frombytes(bytes(values))
    else:
        column.fromlist(values if isinstance(values, list) else list(values))


class _Codes(dict[Any, int]):
    """Value -> small integer; a value seen for the first time gets the next code."""

    def __init__(self, values: Iterable[Any]) -> None:
        super().__init__()
        self.by_code: list[Any] = []
        for value in values:
            self[value]  # noqa: B018 (assigns the code)

    def __missing__(self, value: Any) -> int:
        code = self[value] = len(self.by_code)
        self.by_code.append(value)
        return code


class PackedIds:
    """The ids of many rows in one block of bytes, read one at a time without making the rest.

    Either every id has ``width`` ASCII characters and is followed by ``\\n`` (pi's ids: one
    ``split`` makes them all), or (``width`` 0) the ids are UTF-8 back to back, row ``r`` ending
    at byte ``ends[r]``. The block stays bytes: decoding it whole held the bytes read back and
    their text at once (9 MB more at the peak of a warm reopen of a million entries).
    """

    __slots__ = ("at", "blob", "count", "ends", "holds", "width")

    at: Callable[[int], str]
    """The id of a row (a function of the form's own)."""
    holds: Callable[[int, bytes], bool]
    """Whether a row's id is the one whose UTF-8 is given (read in place, no id made)."""

    def __init__(self, blob: bytes | bytearray, count: int, width: int,
                 ends: array[int] | None = None) -> None:
        self.count = count
        self.width = width
        self.ends = ends
        self.blob = blob
        step = width + 1

        def fixed(row: int) -> str:
            start = row * step
            return blob[start:start + width].decode("ascii")

        def fixed_holds(row: int, encoded: bytes) -> bool:
            return len(encoded) == width and blob.startswith(encoded, row * step)

        def utf8(row: int) -> str:
            assert ends is not None
            start = ends[row - 1] if row else 0
            return blob[start:ends[row]].decode("utf-8", "surrogatepass")

        def utf8_holds(row: int, encoded: bytes) -> bool:
            assert ends is not None
            start = ends[row - 1] if row else 0
            return ends[row] - start == len(encoded) and blob.startswith(encoded, start)

        self.at, self.holds = (fixed, fixed_holds) if width else (utf8, utf8_holds)

    @classmethod
    def of(cls, ids: list[str]) -> PackedIds:
        """Pack a list of ids (the fixed-width form when it fits)."""
        joined = "\n".join(ids)
        count, width = len(ids), len(ids[0]) if ids else 0
        # every id of one width and none holding a newline: the newlines are exactly every
        # width + 1 characters
        if width and len(joined) == count * (width + 1) - 1 and joined.isascii() and \
                joined.count("\n") == count - 1 and joined[width::width + 1] == "\n" * (count - 1):
            return cls((joined + "\n").encode("ascii"), count, width)
        return cls._utf8(ids)

    @classmethod
    def _utf8(cls, ids: list[str], base: int = 0) -> PackedIds:
        """Ids packed back to back as UTF-8, their ends counted from ``base``."""
        encoded = [entry_id.encode("utf-8", "surrogatepass") for entry_id in ids]
        ends = array("q")
        total = base
        for piece in encoded:
            total += len(piece)
            ends.append(total)
        return cls(b"".join(encoded), len(ids), 0, ends)

    def extended(self, ids: list[str]) -> PackedIds:
        """These ids with ``ids`` after them: this block with theirs joined on, in its form
        (the fixed width, when they all fit it, or else UTF-8 back to back)."""
        if not ids:
            return self
        if self.width:
            more = PackedIds.of(ids)
            if more.width != self.width:  # (ids of another form: every id packed again)
                return PackedIds.of(self.all() + ids)
            return PackedIds(self.blob + more.blob, self.count + more.count, self.width)
        ends = cast("array[int]", self.ends)
        more = PackedIds._utf8(ids, ends[-1] if self.count else 0)
        return PackedIds(self.blob + more.blob, self.count + more.count, 0,
                         ends + cast("array[int]", more.ends))

    def slots(self, mask: int, start: int = 0) -> Iterable[int]:
        """Each id's slot in a table of ``mask + 1`` heads (its UTF-8's CRC-32, the same in
        every process, unlike ``hash``), from row ``start`` on. Ids of one width up to 16 are
        hashed all at once: a CRC-32 is the XOR of one table entry per byte (and a constant),
        so each byte position's entries are looked up for every id by one ``bytes.translate``
        and XORed as one integer, a byte of the slot at a time (about a fourth of the time of
        a CRC-32 call per id)."""
        count, width, blob = self.count - start, self.width, self.blob
        if count <= 0:
            return ()
        step = width + 1
        if not width or width > 16:
            if width:
                firsts: Iterable[int] = range(start * step, self.count * step, step)
                lasts: Iterable[int] = range(start * step + width, self.count * step, step)
            else:
                ends = cast("array[int]", self.ends)
                firsts = chain((ends[start - 1] if start else 0,), ends[start:-1])
                lasts = ends[start:]
            pieces = cast("Iterable[bytes]", map(blob.__getitem__, map(slice, firsts, lasts)))
            crcs = map(zlib.crc32, pieces)
            return map(and_, crcs, repeat(mask))
        tail = blob[start * step:] if start else blob
        out = bytearray(4 * count)
        for at, tables in enumerate(_crc_tables(width, mask)):
            acc = 0
            for position, table in enumerate(tables):
                acc ^= int.from_bytes(tail[position::step].translate(table), "little")
            out[at::4] = acc.to_bytes(count, "little")
        slots = array("I", out[:0])
        slots.frombytes(out)
        if sys.byteorder != "little":
            slots.byteswap()
        return slots

    def all(self) -> list[str]:
        if not self.count:
            return []
        if self.width:
            return str(memoryview(self.blob)[:-1], "ascii").split("\n")
        return [self.at(row) for row in range(self.count)]


class IdTable(NamedTuple):
    """A hash table of the packed rows' ids, chained (:meth:`Columns.id_table`): ``heads[h]``
    is the last row whose id hashes to ``h`` (:meth:`PackedIds.slots`), ``links[row]`` the row before
    ``row`` with the same hash, ``NO_ROW`` for none. A chain runs from later rows to earlier
    ones, so a duplicate id's last row is found first."""

    heads: array[int]
    links: array[int]


NO_ROW = 0xFFFFFFFF
"""The end of a chain (above every row a table holds)."""
_DRAWS = range(100)
"""How many ids :meth:`Columns.new_id` draws before it takes a UUID (as ``new_entry_id``)."""


def table_size(count: int) -> int:
    """How many heads a table of ``count`` rows has: a power of two, at least half of them
    (two rows a head at most: a chain is about 1.5 long; 6 to 8 bytes a row in all)."""
    return 1 << max(4, (count // 2 - 1).bit_length())


@lru_cache(maxsize=8)
def _crc_tables(width: int, mask: int) -> list[list[bytes]]:
    """For ids of ``width`` bytes: by byte of the slot, by byte position in the id, what that
    byte adds to the slot for each value (``bytes.translate`` tables). CRC-32 is affine: the
    CRC of a string is the XOR of the CRCs of the strings holding one of its bytes and zeros
    elsewhere, each XORed with the CRC of all zeros, and that CRC once more (folded into the
    first position's table here). What a byte adds is linear in its value, so each position
    takes eight CRC-32 calls (one a bit) and XORs, not 256 calls: the tables are made in every
    process that writes an index, and 256 calls a position took 2 ms, a sixth of a cold open of
    1,000 entries."""
    zeros = zlib.crc32(bytes(width))
    by_position = []
    for position in range(width):
        adds = [0]
        for bit in range(8):  # adds[value] for the values below 2 ** (bit + 1)
            one = zlib.crc32(bytes(position) + bytes((1 << bit,)) + bytes(width - position - 1)) \
                ^ zeros
            adds += [add ^ one for add in adds]
        column = array("I", [add ^ zeros for add in adds] if position == 0 else adds)
        if sys.byteorder != "little":
            column.byteswap()
        by_position.append(column.tobytes())  # byte k of the value at 4 * value + k
    tables = []
    for shift in range(0, mask.bit_length(), 8):
        kept = bytes(value & (mask >> shift) for value in range(256))
        tables.append([column[shift // 8::4].translate(kept) for column in by_position])
    return tables


def _chain(table: IdTable, slots: Iterable[int]) -> None:
    """Add rows whose ids are in ``slots`` to ``table``, numbered from its ``len(links)`` on:
    one step per row, with no sort (a sort of a million ids took a second at a cold open)."""
    heads, links = table
    link = links.append
    for row, slot in enumerate(slots, len(links)):
        link(heads[slot])
        heads[slot] = row


class Columns(Sequence[Record]):
    """Envelopes of one log by column (see the module docstring)."""

    def __init__(self, located: bool | None = True,
                 packed: tuple[PackedIds, IdTable | None] | None = None) -> None:
        """Args:
            located: rows are :class:`FileRecord` (with byte offset and length); ``False``:
                plain :class:`Record` (a database log's); ``None``: as the first row added is
                (what an empty log's records are cannot be told from none of them).
            packed: the ids of the rows already in the columns (read back from their packed
                form) and their hash table (``None``: made when first searched).
        """
        self.located = located
        self._packed: PackedIds | None = packed[0] if packed is not None else None
        self._table = packed[1] if packed is not None else None
        self._first = packed[0].count if packed is not None else 0
        """The first row whose id is in ``_ids`` (those before it are packed)."""
        self._ids: list[str] = []
        self._made: list[str] | None = None
        """The packed ids as strings, once :attr:`ids` was asked for."""
        self._rows: dict[str, int] = {}
        """Each id of ``_ids`` -> its last row."""
        self._absent: set[str] = set()
        """Ids searched for and not packed (an append's new id is searched twice)."""
        self._unused: list[str] = []
        """Ids drawn ahead that no packed row holds (:meth:`new_id` takes them)."""
        self.parents = array("i")
        self.unresolved: dict[int, str] = {}
        self.stamps = bytearray()
        self.odd_stamps: dict[int, str | None] = {}
        """The timestamps that are not 24 ASCII characters, by row (their bytes are blanks)."""
        self.lines = array("I")
        self.offsets = array("q")
        self.lengths = array("I")
        self.types = array("B")
        self.roles = array("B")
        self.rare: dict[int, tuple[str | None, str | None, str | None, str | None]] = {}
        self.made: dict[int, Record] = {}
        self.duplicates = 0
        """How many rows were added under an id already in use."""
        self.forward = False
        """Whether some row's parent was resolved to a row not before it."""
        self._types = _Codes(_KINDS)
        self._roles = _Codes([None, *_ROLES])
        self._holders: list[_Role | None] = []  # by role code: the records' message
        self._replayed = (self._types["label"], self._types["session_info"])

    @classmethod
    def of(cls, records: Iterable[Record]) -> Columns:
        """Columns holding these records (each kept as the object of its row)."""
        listed = list(records)
        columns = cls(located=all(isinstance(r, FileRecord) for r in listed) if listed else None)
        columns.add_batch(listed, keep=True)
        return columns

    # -- adding ------------------------------------------------------------------------------

    def append(self, record: Record) -> None:
        """Add one record; it becomes the object of its row."""
        row = len(self.types)
        entry_id = record.id
        if self._first and (len(self._ids) + 1) * _SEARCHED > self._first:
            self._unpack()
        rows = self._rows
        self._ids.append(entry_id)
        if entry_id in rows or self._packed_row(entry_id) >= 0:
            self.duplicates += 1
        rows[entry_id] = row
        parent_id = record.parent_id
        if parent_id is None:
            parent = -1
        else:
            parent = rows.get(parent_id, -1)
            if parent < 0 and self._first:
                parent = self._packed_row(parent_id)
            if parent < 0:
                self.unresolved[row] = parent_id
            elif parent >= row:
                self.forward = True
        self.parents.append(parent)
        stamp = record.timestamp
        if type(stamp) is str and len(stamp) == _STAMP and stamp.isascii():
            self.stamps += stamp.encode("ascii")
        else:
            self._add_stamp(row, stamp)
        self.lines.append(record.line)
        if self.located is None:
            self.located = isinstance(record, FileRecord)
        if self.located:  # (a FileRecord: no cast() call, an append's hottest path)
            self.offsets.append(record.offset)  # type: ignore[attr-defined]
            self.lengths.append(record.length)  # type: ignore[attr-defined]
        kind = self._types[record.type]
        message = record.message
        try:
            role = self._roles[message.role if message is not None else None]
        except TypeError:  # a list or an object as role
            role = self._roles[_ODD_ROLE]
        if kind > 255 or role > 255:
            self._widen()
        self.types.append(kind)
        self.roles.append(role)
        if kind != _MESSAGE:
            rare = _get_rare(record)
            if rare != _NO_RARE or kind in self._replayed:
                self.rare[row] = rare
        self.made[row] = record

    def extend(self, records: list[FileRecord]) -> None:
        """Add a scanner's records (see :meth:`add_batch`)."""
        self.add_batch(records)

    def add_scanned(self, records: list[FileRecord], lines: Sequence[int], offsets: list[int],
                    lengths: list[int]) -> None:
        """Add a scanner's records with their line numbers and byte ranges (their own
        ``line``, ``offset`` and ``length`` are not read)."""
        self.add_batch(records, lines=lines, offsets=offsets, lengths=lengths)

    def add_batch(self, batch: Sequence[Record], keep: bool = False, *,
                  lines: Iterable[int] | None = None, offsets: Iterable[int] | None = None,
                  lengths: Iterable[int] | None = None) -> None:
        """Add records in order; ``keep``: each record becomes the object of its row (else
        the objects are dropped and made again from the columns when asked for); ``lines``,
        ``offsets`` and ``lengths``: the records' own, when not set on them."""
        count = len(batch)
        if not count:
            return
        if self.located is None:
            self.located = isinstance(batch[0], FileRecord)
        start = len(self.types)
        self._add_ids(list(map(_get_id, batch)), start)
        parent_ids = list(map(_get_parent, batch))
        parents = list(map(self._rows.get, parent_ids, repeat(-1)))
        if -1 in parents:
            for i in compress(range(count), map(is_not, parent_ids, repeat(None))):
                if parents[i] < 0:
                    parents[i] = self._packed_row(parent_ids[i])
                    if parents[i] < 0:
                        self.unresolved[start + i] = parent_ids[i]
        self.parents.extend(parents)
        if not self.forward and any(map(ge, parents, range(start, start + count))):
            self.forward = True
        self._add_stamps(start, list(map(_get_timestamp, batch)))
        _extend(self.lines, map(_get_line, batch) if lines is None else lines)
        if self.located:
            _extend(self.offsets, map(_get_offset, batch) if offsets is None else offsets)
            _extend(self.lengths, map(_get_length, batch) if lengths is None else lengths)
        types, roles = self._types, self._roles
        kinds = list(map(types.__getitem__, map(_get_type, batch)))
        try:  # the usual case: a string role, or none (the records' shared empty message)
            holders = list(map(roles.__getitem__, map(_get_role, batch)))
        except (AttributeError, TypeError):  # a null message, or a list or object as role
            holders = [roles[_role_key(m)] for m in map(_get_message, batch)]
        if len(types.by_code) > 256 or len(roles.by_code) > 256:
            self._widen()
        _extend(self.types, kinds)
        _extend(self.roles, holders)
        message = types["message"]
        replayed = self._replayed
        for i in compress(range(count), map(ne, kinds, repeat(message))):
            rare = _get_rare(batch[i])
            if rare != _NO_RARE or kinds[i] in replayed:
                self.rare[start + i] = rare
        if keep:
            self.made.update(zip(range(start, start + count), batch))

    def merge(self, part: Columns, line_base: int) -> None:
        """Add the rows of ``part``, the columns of the lines that follow this one's (scanned
        apart: its rows, codes and line numbers count from its own start)."""
        count = len(part)
        if not count:
            return
        start = len(self)
        self._add_ids(part.ids, start)
        self.parents.extend([p + start if p >= 0 else -1 for p in part.parents])
        for row, parent_id in part.unresolved.items():
            parent = self.row_of(parent_id)
            if parent is None:
                self.unresolved[start + row] = parent_id
            else:  # in a part before this one, or (after a duplicate) in this one
                self.parents[start + row] = parent
                if parent >= start + row:
                    self.forward = True
        self.forward = self.forward or part.forward
        self.stamps += part.stamps
        self.odd_stamps.update({start + row: stamp for row, stamp in part.odd_stamps.items()})
        self.lines.extend(map(add, part.lines, repeat(line_base)))
        self.offsets.extend(part.offsets)
        self.lengths.extend(part.lengths)
        types = list(map(self._types.__getitem__, part._types.by_code))
        roles = list(map(self._roles.__getitem__, part._roles.by_code))
        if len(self._types.by_code) > 256 or len(self._roles.by_code) > 256:
            self._widen()
        self.types.extend(map(types.__getitem__, part.types))
        self.roles.extend(map(roles.__getitem__, part.roles))
        self.rare.update({start + row: rare for row, rare in part.rare.items()})

    def set_codes(self, types: list[str], roles: list[Any]) -> None:
        """Take the type and role codes of packed columns (code = position in each list), in
        place of the codes a fresh instance starts with (which they must begin with)."""
        fresh_types, fresh_roles = self._types.by_code[:], self._roles.by_code[:]
        self._types, self._roles = _Codes(types), _Codes(roles)
        if self._types.by_code != types or len(self._roles.by_code) != len(roles) or \
                types[:len(fresh_types)] != fresh_types or \
                roles[:len(fresh_roles)] != fresh_roles:
            raise ValueError("the codes do not begin with a fresh instance's")
        self._replayed = (self._types["label"], self._types["session_info"])
        self._holders = []

    def _widen(self) -> None:
        """More than 255 distinct types or roles (an odd log): codes of four bytes."""
        if self.types.typecode == "B":
            self.types = array("I", self.types)
            self.roles = array("I", self.roles)

    # -- ids ---------------------------------------------------------------------------------

    def _add_ids(self, ids: list[str], start: int) -> None:
        """Take the ids of the rows from ``start`` on, counting those already in use."""
        count = len(ids)
        if self._first and (len(self._ids) + count) * _SEARCHED > self._first:
            self._unpack()
        rows = self._rows
        # (the ids new to the list that a packed row has are duplicates too)
        packed = [entry_id for entry_id in set(ids).difference(rows, self._absent)
                  if self._packed_row(entry_id) >= 0] if self._first else ()
        self._ids += ids
        before = len(rows)
        rows.update(zip(ids, range(start, start + count)))
        self.duplicates += count - (len(rows) - before) + len(packed)

    def _unpack(self) -> None:
        """Make every id and the dict of them; the packed ids are dropped."""
        ids = self._ids = self.ids
        self._rows = dict(zip(ids, range(len(ids))))
        self._packed = self._table = self._made = None
        self._absent = set()
        self._first = 0

    def new_id(self, pending: Container[str]) -> str:
        """A new entry id (pi's form, :func:`~sessiontree._time.new_entry_id`) that no row
        holds and ``pending`` does not: one of the ids drawn 256 at a time and checked against
        the packed rows together (their slots computed at once, :meth:`PackedIds.slots`; a
        third of the cost of a search each). The packed rows never change, so only the rows
        added since and ``pending`` are asked at each draw."""
        unused, rows = self._unused, self._rows
        for _ in _DRAWS:
            if not unused:
                unused += self._not_packed(draw_ids())
                continue
            candidate = unused.pop()
            if candidate not in rows and candidate not in pending:
                return candidate
        return str(uuid.uuid4())

    def _not_packed(self, ids: list[str]) -> list[str]:
        """Those of ``ids`` (one width) no packed row holds; they are remembered as absent."""
        if not self._first:
            return ids
        heads, links = self._table or self._packed_table()
        slots = PackedIds.of(ids).slots(len(heads) - 1)
        chained, first = self._chained, self._first
        # (most heads hold a chain: walked from its first row, the one in the head)
        kept = [entry_id for entry_id, row in zip(ids, map(heads.__getitem__, slots))
                if row >= first or chained(entry_id.encode(), row, links) < 0]
        self._absent.update(kept)
        return kept

    def _packed_row(self, entry_id: str) -> int:
        """The last packed row of ``entry_id`` (``-1``: none)."""
        if not self._first or entry_id in self._absent:
            return -1
        heads, links = self._table or self._packed_table()
        encoded = entry_id.encode("utf-8", "surrogatepass")
        row = self._chained(encoded, heads[zlib.crc32(encoded) & (len(heads) - 1)], links)
        if row < 0:
            self._absent.add(entry_id)
        return row

    def _chained(self, encoded: bytes, row: int, links: array[int]) -> int:
        """The packed row whose id's UTF-8 is ``encoded`` (``-1``: none) on the chain from the
        head ``row``: one walk, which runs to ever earlier rows (so it ends whatever the table
        holds). Ids of one width (pi's) are compared in the block itself, without a call a
        row (:attr:`PackedIds.holds` does it for the others)."""
        packed: PackedIds = self._packed  # type: ignore[assignment]
        bound, width = self._first, packed.width
        if width:
            if len(encoded) != width:
                return -1
            starts, step = packed.blob.startswith, width + 1
            while row < bound:
                if starts(encoded, row * step):
                    return row
                bound, row = row, links[row]
            return -1
        holds = packed.holds
        while row < bound:
            if holds(row, encoded):
                return row
            bound, row = row, links[row]
        return -1

    def _packed_table(self) -> IdTable:
        """The hash table of the packed rows, made from their ids when it was not packed with
        them (a helper's columns, which are only merged)."""
        size = table_size(self._first)
        table = self._table = IdTable(array("I", [NO_ROW]) * size, array("I"))
        _chain(table, self._packed.slots(size - 1))  # type: ignore[union-attr]
        return table

    def packed_ids(self) -> PackedIds:
        """Every row's id packed: the ids read back packed, with those of the rows added
        since joined on (no string is made for a packed id unless the added ids' width differs,
        when every id is packed again: :meth:`PackedIds.extended`)."""
        packed = self._packed
        return PackedIds.of(self._ids) if packed is None else packed.extended(self._ids)

    @property
    def ids(self) -> list[str]:
        """Each row's id (the packed ids made into strings when first asked for)."""
        packed = self._packed
        if packed is None:
            return self._ids
        if self._made is None:
            self._made = packed.all()
        return self._made + self._ids

    def id_at(self, row: int) -> str:
        """The id of ``row`` (without making every id)."""
        first = self._first
        if row >= first:
            return self._ids[row - first]
        return self._packed.at(row)  # type: ignore[union-attr]

    def row_of(self, entry_id: str) -> int | None:
        """The last row of ``entry_id``, or ``None``."""
        found = self._rows.get(entry_id)
        if found is None:
            found = self._packed_row(entry_id)
            return found if found >= 0 else None
        return found

    def id_table(self, every: PackedIds) -> IdTable:
        """The hash table of every row's id (what :meth:`row_of` probes for the rows read back
        from the packed form), given ``every`` id packed: the packed rows' table with the rows
        added since chained on (a copy), or a new one when there is none yet or it would
        hold over two rows a head."""
        size, table = table_size(len(self)), self._table
        if table is None or len(table.heads) != size:
            table = IdTable(array("I", [NO_ROW]) * size, array("I"))
        else:
            table = IdTable(array("I", table.heads), array("I", table.links))
        _chain(table, every.slots(size - 1, len(table.links)))
        return table

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.types)

    @overload
    def __getitem__(self, index: int) -> Record: ...
    @overload
    def __getitem__(self, index: slice) -> list[Record]: ...
    def __getitem__(self, index: int | slice) -> Record | list[Record]:
        if isinstance(index, slice):
            return [self.record(row) for row in range(len(self))[index]]
        return self.record(range(len(self))[index])

    def __iter__(self) -> Iterator[Record]:
        return map(self.record, range(len(self)))

    def _add_stamps(self, start: int, stamps: list[str | None]) -> None:
        texts = cast("list[str]", stamps)
        try:  # the usual case: all of pi's form (a None raises TypeError)
            joined = "".join(texts)
            if min(map(len, texts)) == max(map(len, texts)) == _STAMP and joined.isascii():
                self.stamps += joined.encode("ascii")
                return
        except TypeError:
            pass
        for row, stamp in enumerate(stamps, start):
            self._add_stamp(row, stamp)

    def _add_stamp(self, row: int, stamp: str | None) -> None:
        if isinstance(stamp, str) and len(stamp) == _STAMP and stamp.isascii():
            self.stamps += stamp.encode("ascii")
        else:
            self.stamps += _NO_STAMP
            self.odd_stamps[row] = stamp

    def timestamp(self, row: int) -> str | None:
        """The row's ``timestamp``."""
        odd = self.odd_stamps
        if odd and row in odd:
            return odd[row]
        at = row * _STAMP
        return self.stamps[at:at + _STAMP].decode("ascii")

    @property
    def type_codes(self) -> Mapping[str, int]:
        """Each entry type seen -> its code in ``types``."""
        return self._types

    @property
    def role_codes(self) -> Mapping[Any, int]:
        """Each message role seen -> its code in ``roles`` (``None``: no message)."""
        return self._roles

    def type_of(self, row: int) -> str:
        return self._types.by_code[self.types[row]]  # type: ignore[no-any-return]

    def role_of(self, row: int) -> str | None:
        role = self._roles.by_code[self.roles[row]]
        return role if type(role) is str else None

    def parent_id(self, row: int) -> str | None:
        """The parent id stored on the row's line."""
        parent = self.parents[row]
        return self.id_at(parent) if parent >= 0 else self.unresolved.get(row)

    def record(self, row: int) -> Record:
        """The record of ``row``, made from the columns the first time."""
        found = self.made.get(row)
        return found if found is not None else self._make(row)

    def _role_holders(self) -> list[_Role | None]:
        """The records' ``message`` by role code."""
        holders = self._holders
        if len(holders) < len(self._roles.by_code):
            holders += [None if role is None else _ROLES.get(role) or
                        _Role(role if role is not _ODD_ROLE else None)
                        for role in self._roles.by_code[len(holders):]]
        return holders

    def _make(self, row: int) -> Record:
        code = self.roles[row]
        holders = self._holders if code < len(self._holders) else self._role_holders()
        parent = self.parents[row]
        odd = self.odd_stamps
        if odd and row in odd:
            stamp = odd[row]
        else:
            at = row * _STAMP
            stamp = self.stamps[at:at + _STAMP].decode("ascii")
        rare = self.rare.get(row, _NO_RARE) if self.rare else _NO_RARE
        kind = self._types.by_code[self.types[row]]
        id_at = self.id_at
        entry_id = id_at(row)
        parent_id = id_at(parent) if parent >= 0 else self.unresolved.get(row)
        made: Record
        if self.located:
            made = FileRecord(kind, entry_id, parent_id, stamp, holders[code], *rare,
                              self.lines[row], None, self.offsets[row], self.lengths[row])
        else:
            made = Record(kind, entry_id, parent_id, stamp, holders[code], *rare, self.lines[row])
        self.made[row] = made
        return made

    def records(self, rows: Iterable[int]) -> list[Record]:
        return list(map(self.record, rows))

