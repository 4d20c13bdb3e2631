"""What a session listing shows, as pi's ``buildSessionInfo`` computes it: one rule set for
every store (a folder of JSONL files, ``Session.listing()``, the database stores' sessions
table, which keeps the counts as entries are appended so that a listing never reads them).

The rules (pi 0.73.1; format-spec.md section 13, "Listing"), over the lines that parse, in order:

* ``message_count``: every ``message`` entry.
* activity: over the ``message`` entries whose message has a string ``role`` that is ``user``
  or ``assistant`` and a ``content`` key, the latest of the message's numeric ``timestamp``,
  else the entry's ``timestamp`` (an ISO time); it is the row's ``modified`` when above 0,
  else the header's time, else the file's modification time (``modified_from`` says which).
  A number JavaScript's ``Date`` cannot hold (beyond 8.64e15 ms either way, which JSON's
  ``1e300`` is) counts as no time: pi's ``modified`` would be an Invalid Date, which no store
  can keep or sort by.
* ``first_message``: the text of the first such ``user`` message whose text is not empty (a
  string content as it is, else its ``text`` blocks joined by a space).
* ``name``: the latest ``session_info``'s ``name``, trimmed as JavaScript trims; ``None`` when
  that is empty or not a string.

Invariant: :class:`ListingStats` takes lines in any number of calls and ends in the same state
(a database adds each appended line; a folder listing adds a whole file at once).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from . import _json
from ._time import iso_to_ms
from ._tree import js_trim

if TYPE_CHECKING:
    from .stores.base import SessionListing

__all__ = ["ListingLine", "ListingStats", "listing_line", "listing_row", "message_text",
           "row_of_lines"]


class ListingMessage(msgspec.Struct):
    """What a listing reads of a message (its content kept as raw JSON)."""

    role: Any = UNSET
    content: msgspec.Raw = msgspec.Raw(b"")
    timestamp: Any = UNSET


class ListingLine(msgspec.Struct):
    """What a listing reads of one line (a header's fields included)."""

    type: Any = UNSET
    id: str | UnsetType = UNSET
    timestamp: Any = UNSET
    name: Any = UNSET
    message: ListingMessage | None = None
    cwd: Any = UNSET
    parentSession: Any = UNSET  # noqa: N815 - the on-disk name


line_decoder = msgspec.json.Decoder(ListingLine)
_get_id = attrgetter("id")
_get_type = attrgetter("type")


def listing_line(line: bytes | memoryview) -> ListingLine | None:
    """One line as a listing reads it; ``None`` for a line that does not parse (pi skips it)."""
    try:
        return line_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass
    try:
        value = _json.loads(line)  # lone surrogates, invalid UTF-8: what JSON.parse accepts
    except ValueError:
        return None
    if not isinstance(value, dict):
        return ListingLine()
    message = value.get("message")
    entry_id = value.get("id")
    return ListingLine(
        type=value.get("type", UNSET), id=entry_id if isinstance(entry_id, str) else UNSET,
        timestamp=value.get("timestamp", UNSET), name=value.get("name", UNSET),
        cwd=value.get("cwd", UNSET), parentSession=value.get("parentSession", UNSET),
        message=ListingMessage(
            role=message.get("role", UNSET), timestamp=message.get("timestamp", UNSET),
            content=msgspec.Raw(_json.dumps(message["content"])) if "content" in message
            else msgspec.Raw(b"")) if isinstance(message, dict) else None)


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message's content: a string, or its text blocks joined by spaces."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b["text"] for b in content if isinstance(b, dict)
                        and b.get("type") == "text" and isinstance(b.get("text"), str))
    return ""


def _text(content: msgspec.Raw) -> str:
    return message_text({"content": _json.loads(content)})


_DATE_LIMIT = 8.64e15
"""The largest epoch-ms time a JavaScript ``Date`` holds (either way from 1970)."""


class ListingStats:
    """Message count, first user text, latest activity and name of one session."""

    __slots__ = ("activity", "first", "messages", "name")

    def __init__(self, messages: int = 0, first: str = "", activity: float | None = None,
                 name: str | None = None) -> None:
        self.messages = messages
        self.first = first
        self.activity = activity
        self.name = name

    def add(self, lines: Iterable[ListingLine]) -> None:
        """Count these lines (in stored order; the header is not counted)."""
        messages, first, name, activity = self.messages, self.first, self.name, self.activity
        for line in lines:  # one loop, no call per line: a folder listing reads every line
            kind = line.type
            if kind == "message":
                messages += 1
                message = line.message
                if message is None or not message.content:
                    continue
                role = message.role
                if role != "user" and role != "assistant":
                    continue
                stamp = message.timestamp
                if type(stamp) is int or type(stamp) is float:
                    when: float | None = stamp if -_DATE_LIMIT <= stamp <= _DATE_LIMIT else None
                else:
                    when = iso_to_ms(line.timestamp)
                if when is not None and (activity is None or when > activity):
                    activity = when
                if not first and role == "user":
                    first = _text(message.content)
            elif kind == "session_info":
                name = (js_trim(line.name) or None) if isinstance(line.name, str) else None
        self.messages, self.first, self.name, self.activity = messages, first, name, activity

    def modified(self, created: object, mtime_ms: float | None
                 ) -> tuple[int, Literal["message", "created", "file"]]:
        """The row's ``modified`` time in epoch ms and where it comes from."""
        if self.activity is not None and self.activity > 0:
            return int(self.activity), "message"
        header_ms = iso_to_ms(created) if isinstance(created, str) else None
        if header_ms is not None:
            return header_ms, "created"
        return int(mtime_ms or 0), "file"


def row_of_lines(header: ListingLine, entries: list[ListingLine], path: str,
                 mtime_ms: float | None) -> SessionListing:
    """The row of a session from its header line and the lines after it that parse; the
    entry count is the number of distinct string ids (a duplicate header is not an entry)."""
    stats = ListingStats()
    stats.add(entries)
    if "session" in map(_get_type, entries):  # pi's duplicate header quirk: not entries
        entries = [line for line in entries if line.type != "session"]
    ids = set(map(_get_id, entries))
    ids.discard(UNSET)
    fields = {"id": header.id, "cwd": header.cwd, "timestamp": header.timestamp,
              "parentSession": header.parentSession}
    return listing_row(fields, stats, path, mtime_ms, len(ids))


def listing_row(header: Mapping[str, Any], stats: ListingStats, path: str,
                mtime_ms: float | None, entry_count: int) -> SessionListing:
    """A listing row from a session's header fields (as stored: ``id``, ``cwd``,
    ``timestamp``, ``parentSession``) and its counted lines."""
    from .stores.base import SessionListing

    modified, source = stats.modified(header.get("timestamp"), mtime_ms)
    cwd, parent, stamp = header.get("cwd"), header.get("parentSession"), header.get("timestamp")
    return SessionListing(
        path=path, id=str(header.get("id")), cwd=cwd if isinstance(cwd, str) else "",
        name=stats.name, parent_session=parent if isinstance(parent, str) and parent else None,
        created=stamp if isinstance(stamp, str) else "", modified_ms=modified,
        message_count=stats.messages, entry_count=entry_count,
        first_message=stats.first or "(no messages)", modified_from=source,
    )
