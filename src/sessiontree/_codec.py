"""Entry lines and the values they stand for: a stored line as a typed entry, a typed entry as
its on-disk object, a new entry object in pi's key order, a header object as a typed header.

Invariants:
* Nothing here does I/O or knows where lines are kept, so the stores, the session and the
  operations share one reading and one writing of a line.
* A line whose type this library does not know decodes to an ``UnknownEntry`` holding every
  field; written back, it gives the same object.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET

from . import _json
from .entries import AnyEntry, Entry, SessionHeader, UnknownEntry, entry_from_builtins
from .errors import InvalidEntry

__all__ = ["decode_line", "entries_decoder", "entry_builtins", "entry_line", "held", "message_line",
           "ordered_entry", "typed_header"]

_PAYLOAD_FIRST = frozenset({"custom", "custom_message"})

_V = TypeVar("_V")


@functools.cache
def _entry_decoder() -> msgspec.json.Decoder[Entry]:
    """Built on first use: compiling the union's decoder would slow down ``import sessiontree``."""
    return msgspec.json.Decoder(Entry)


@functools.cache
def entries_decoder() -> msgspec.json.Decoder[list[Entry]]:
    """Many stored lines joined into one JSON array, in one call."""
    return msgspec.json.Decoder(list[Entry])


def decode_line(raw: bytes) -> AnyEntry:
    """A stored entry line as a typed entry (unknown types kept as :class:`UnknownEntry`)."""
    try:
        return _entry_decoder().decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return entry_from_builtins(_json.loads(raw))


def entry_builtins(entry: AnyEntry) -> dict[str, Any]:
    """A typed entry as its on-disk object (an unknown one as it was read)."""
    if isinstance(entry, UnknownEntry):
        return dict(entry.data)
    data = msgspec.to_builtins(entry)
    assert isinstance(data, dict)
    return data


def held(value: _V, where: str, what: str) -> _V:
    """``value`` when JSON holds it as given (``where`` names it in ``what``, the entry).

    Raises:
        InvalidEntry: it holds a set, bytes or another object no JSON value reads back as
            (:func:`~sessiontree._json.unfit` names which, and where).
    """
    problem = _json.unfit(value, where)
    if problem is not None:
        raise InvalidEntry(f"{what}: {problem}; nothing was written")
    return value


def entry_line(entry: Any) -> bytes:
    """An entry's line (a typed entry or an on-disk dict), as ``JSON.stringify`` writes it.

    Raises:
        InvalidEntry: a value msgspec cannot encode (in a field typed ``Any``), named; values
            nested too deep to encode (about a thousand levels).
    """
    try:
        return _json.dumps(entry)
    except (TypeError, RecursionError) as error:
        kind = entry.get("type") if isinstance(entry, Mapping) else type(entry).__name__
        problem = ("nested too deep to write (arrays or objects about a thousand levels "
                   "inside each other)" if isinstance(error, RecursionError) else
                   _json.unfit(entry, "") or error)
        raise InvalidEntry(f"{kind} entry: {problem}; nothing was written") from None


def ordered_entry(kind: str, entry_id: str, parent_id: str | None, timestamp: str,
                  payload: Mapping[str, Any]) -> dict[str, Any]:
    """An entry object in pi's key order for its type (format-spec.md section 4)."""
    body = {k: v for k, v in payload.items() if k not in ("type", "id", "parentId", "timestamp")}
    envelope = {"id": entry_id, "parentId": parent_id, "timestamp": timestamp}
    if kind in _PAYLOAD_FIRST:
        return {"type": kind, **body, **envelope}
    return {"type": kind, **envelope, **body}


_MESSAGE_LINE = b'{"type":"message","id":%b,"parentId":%b,"timestamp":%b,"message":%b}'
_encode = msgspec.json.Encoder().encode


def message_line(entry_id: str, parent_id: str | None, timestamp: str, message: bytes) -> bytes:
    """A ``message`` entry's line in pi's key order, from its message's JSON: what
    ``JSON.stringify`` writes for the whole entry, without encoding the message again."""
    try:  # (msgspec writes strings and null as JavaScript does)
        return _MESSAGE_LINE % (_encode(entry_id), _encode(parent_id), _encode(timestamp), message)
    except UnicodeEncodeError:  # a lone surrogate
        string = _json.string
        return _MESSAGE_LINE % (string(entry_id), b"null" if parent_id is None else
                                string(parent_id), string(timestamp), message)


def typed_header(data: dict[str, Any]) -> SessionHeader:
    """A header line's object as a typed header (fields of the wrong type left empty)."""
    def text(key: str) -> str:
        value = data.get(key)
        return value if isinstance(value, str) else ""

    version = data.get("version")
    parent = data.get("parentSession")
    return SessionHeader(
        version=version if isinstance(version, int) else UNSET,
        id=text("id"), timestamp=text("timestamp"), cwd=text("cwd"),
        parent_session=parent if isinstance(parent, str) else UNSET,
    )
