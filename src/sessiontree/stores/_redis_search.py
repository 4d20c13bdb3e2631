"""The Redis store's search index, as bytes: what an append writes for its entries and what a
search reads back (no Redis call here: :mod:`sessiontree.stores.redis` sends and reads them).

Per session, in its slot (``P:{ID}:...``):

* ``post``, a hash: each word the session holds to its postings, the entries holding it in
  append order, each one varint ``position * 2 + (count > 1)`` then, when flagged, the varint
  count (how often the entry holds the word: what bounds its relevance,
  :func:`sessiontree._search.bounds`), so the session's words cost one field each, not one
  per entry.
* ``recent``, a hash: each word's postings that follow those in ``post`` (a word's postings
  are its ``post`` value then its ``recent`` one, either missing). An append adds its words'
  postings at the end of their ``recent`` value, and moves that value to the end of ``post``
  once it is longer than the store's bound, so an append copies a bounded part of each word's
  postings, not all of them (what made an append's cost grow with its session).
* ``docs``, a string: per position a :data:`DOC` record (the entry's time, role and size, as
  :func:`sessiontree._search.entry_terms` counts it; zero for an entry without text), read by
  ``GETRANGE`` for the candidates alone.

Across sessions (other slots): ``P:w:<word>``, a set of the ids of the sessions holding the
word, and ``P:searched``, a sorted set of session ids by the time of their latest entry with
text (an upper bound for any of their candidates' times, so a search walks sessions from the
most recent and stops when no session left can give a candidate recent enough).

Invariants:
* Postings are in position order and a position is in a word's postings at most once.
* The records and postings are derived from the line by :func:`sessiontree._search.document`
  alone, so a search judging the line again finds what the index says it holds.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

from .._search import ROLES, document, entry_terms

__all__ = ["DOC", "ROLE_CODE", "Batch", "batch", "decode", "encode", "records", "terms"]

DOC = struct.Struct(">qBI")
"""A position's record in ``docs``: its time (epoch ms), role (1 + its index in
:data:`~sessiontree._search.ROLES`; 0: no text) and size."""
ROLE_CODE = {role: code for code, role in enumerate(ROLES, start=1)}


class Batch(NamedTuple):
    """The search index's share of lines appended together."""

    postings: dict[str, bytes]
    """Each word of the lines to its new postings (to add at the end of its value)."""
    docs: bytes
    """The lines' records, in order (to add at the end of ``docs``)."""
    latest: int | None
    """The latest time of a line with text (``None``: none has text)."""


def terms(line: bytes) -> tuple[bytes, dict[str, int]]:
    """An entry line's record and how often it holds each of its words (none without text)."""
    doc = document(line)
    if doc is None:
        return bytes(DOC.size), {}
    size, counts = entry_terms(doc.text)
    return DOC.pack(doc.ms, ROLE_CODE[doc.role], min(size, 2**32 - 1)), counts


def batch(lines: Sequence[bytes], first: int) -> Batch:
    """The index entries of ``lines``, stored from position ``first`` (from 1) on."""
    postings: dict[str, bytearray] = {}
    docs = bytearray()
    latest: int | None = None
    for position, line in enumerate(lines, start=first):
        record, counts = terms(line)
        docs += record
        if not counts:
            continue
        ms = DOC.unpack(record)[0]
        latest = ms if latest is None else max(latest, ms)
        once, more = _varint_bytes(position * 2), _varint_bytes(position * 2 + 1)  # (_posting's)
        for word, count in counts.items():
            out = postings.get(word)
            if out is None:
                out = postings[word] = bytearray()
            if count == 1:
                out += once
            else:
                out += more
                out += _varint_bytes(count)
    return Batch({word: bytes(value) for word, value in postings.items()}, bytes(docs), latest)


def _posting(out: bytearray, position: int, count: int) -> None:
    _varint(out, position * 2 + (count > 1))
    if count > 1:
        _varint(out, count)


def _varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    _varint(out, value)
    return bytes(out)


def _varints(data: bytes) -> Iterator[int]:
    value = shift = 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
        else:
            yield value
            value = shift = 0


def decode(data: bytes | None) -> dict[int, int]:
    """A word's postings: position to count (empty for ``None``: the session lacks it)."""
    found: dict[int, int] = {}
    if data:
        numbers = _varints(data)
        for number in numbers:
            found[number >> 1] = next(numbers) if number & 1 else 1
    return found


def encode(postings: Mapping[int, int]) -> bytes:
    """Postings (position to count) as a word's value, in position order."""
    out = bytearray()
    for position in sorted(postings):
        _posting(out, position, postings[position])
    return bytes(out)


def records(docs: bytes) -> list[tuple[int, int, int]]:
    """The records in a range of ``docs``: (time, role code, size) each (see :data:`DOC`)."""
    return list(DOC.iter_unpack(docs[:len(docs) - len(docs) % DOC.size]))
