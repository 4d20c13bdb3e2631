"""What a session listing shows, as pi 1.5.2's ``buildSessionInfo`` computes it: one rule set
for every store (a folder of JSONL files, ``Session.listing()``, the database stores' sessions
table, which keeps the counts as entries are appended so that a listing never reads them).

The rules (pi 1.5.2; format-spec.md section 13, "Listing"), over the lines that parse to a value
JavaScript holds true (``null``, ``false``, ``0`` and ``""`` lines are skipped), in order:

* ``message_count``: every ``message`` entry.
* activity: over the ``message`` entries whose message has a string ``role`` that is ``user``
  or ``assistant`` and a ``content`` key, the latest of the message's numeric ``timestamp``,
  else ``new Date(entry.timestamp)`` (an ISO time; a number is epoch ms, ``null`` is 0 and a
  boolean 0 or 1, as JavaScript converts them; pi 0.73.1 read ISO strings only); it is the
  row's ``modified`` when above 0, else the header's time, else the file's modification time
  (``modified_from`` says which). A number JavaScript's ``Date`` cannot hold (beyond 8.64e15
  ms either way, which JSON's ``1e300`` is) counts as no time: pi's ``modified`` would be an
  Invalid Date, which no store can keep or sort by.
* ``first_message``: the text of the first such ``user`` message whose text is not empty (a
  string content as it is, else its ``text`` blocks' texts joined by a space, each converted
  as JavaScript's ``Array.join`` converts it).
* the header: ``id`` and ``parentSession`` as they are, whatever their type (a file whose
  header id is not a string is listed, though it opens nowhere); ``created`` as ``new Date()``
  reads the ``timestamp`` (ISO texts only).
* ``name``: the latest ``session_info``'s ``name``, trimmed as JavaScript trims; ``None`` when
  that is empty, ``null`` or missing.
* a file pi cannot summarize is not listed (``ListingStats.unlistable``): pi's
  ``buildSessionInfo`` throws, and drops the file, on a ``message`` entry without a message
  object, a ``session_info`` whose ``name`` is neither a string nor ``null``, and a user or
  assistant message whose ``content`` is neither a string nor an array, or holds a ``null``
  block. The database stores list such a session all the same (they have no file to drop).

Invariant: :class:`ListingStats` takes lines in any number of calls and ends in the same state
(a database adds each appended line; a folder listing adds a whole file at once).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from . import _json
from ._time import iso_to_ms, ms_to_iso
from ._tree import js_trim
from .usage import RawUsage, UsageTotals, raw_usage

if TYPE_CHECKING:
    from .stores.base import SessionListing

__all__ = ["ListingLine", "ListingStats", "ListingWarning", "cost_steps", "cwd_matches",
           "js_date_ms", "listed_usage", "listing_line", "listing_row", "message_text",
           "node_mtime_ms", "pi_order", "resolve_path", "row_of_lines"]


class ListingWarning(UserWarning):
    """A ``*.jsonl`` name in a listed folder that is not a regular file (a FIFO, a device):
    left out of the listing, never opened (it would hang or never end)."""


class ListingMessage(msgspec.Struct):
    """What a listing reads of a message (its content kept as raw JSON)."""

    role: Any = UNSET
    content: msgspec.Raw = msgspec.Raw(b"")
    timestamp: Any = UNSET
    usage: RawUsage | None = None


class ListingLine(msgspec.Struct):
    """What a listing reads of one line (a header's fields included)."""

    type: Any = UNSET
    id: str | UnsetType = UNSET
    timestamp: Any = UNSET
    name: Any = UNSET
    message: ListingMessage | None = None
    cwd: Any = UNSET
    parentSession: Any = UNSET  # noqa: N815 - the on-disk name
    usage: RawUsage | None = None


line_decoder = msgspec.json.Decoder(ListingLine)
_get_id = attrgetter("id")
_get_type = attrgetter("type")


def listing_line(line: bytes | memoryview) -> ListingLine | None:
    """One line as a listing reads it; ``None`` for a line that pi skips (it does not parse,
    or it parses to ``null``, ``false``, ``0`` or ``""``)."""
    try:
        return line_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    try:
        value = _json.loads(line)  # lone surrogates, invalid UTF-8: what JSON.parse accepts
    except ValueError:  # (NestedTooDeep too: a listing skips what it cannot decode)
        return None
    if not value and (value is None or isinstance(value, (bool, int, float, str))):
        return None  # pi's `if (!entry) continue`
    if not isinstance(value, dict):
        return ListingLine()
    message = value.get("message")
    entry_id = value.get("id")
    return ListingLine(
        type=value.get("type", UNSET), id=entry_id if isinstance(entry_id, str) else UNSET,
        timestamp=value.get("timestamp", UNSET), name=value.get("name", UNSET),
        cwd=value.get("cwd", UNSET), parentSession=value.get("parentSession", UNSET),
        usage=raw_usage(value.get("usage")),
        message=None if message is None else ListingMessage() if not isinstance(message, dict)
        else ListingMessage(
            role=message.get("role", UNSET), timestamp=message.get("timestamp", UNSET),
            usage=raw_usage(message.get("usage")),
            content=msgspec.Raw(_json.dumps(message["content"])) if "content" in message
            else msgspec.Raw(b"")))


def _js_string(value: Any) -> str:
    """``String(value)`` for a JSON value, as ``Array.prototype.join`` converts an element."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _json.js_number(float(value)) if isinstance(value, float) or abs(value) >= 2**53 \
            else str(value)
    if isinstance(value, list):
        return ",".join(map(_js_string, value))
    return "[object Object]"


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message's content as pi's listing takes it: a string, or the ``text`` of
    its text blocks joined by spaces (a missing or ``null`` text is empty, any other value
    converted as JavaScript converts it)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_js_string(b.get("text")) for b in content
                        if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _text(content: msgspec.Raw) -> str:
    return message_text({"content": _json.loads(content)})


def _content_breaks_pi(content: msgspec.Raw) -> bool:
    """Whether pi's ``extractTextContent`` throws on this content: neither a string nor an
    array, or an array holding ``null`` (read without decoding in the common cases)."""
    view = memoryview(content)
    first = view[0] if len(view) else 0
    if first == 0x22:  # "
        return False
    if first != 0x5B:  # [
        return True
    return _NULL.search(view) is not None and _NULL_ELEMENT.search(view) is not None and \
        None in _json.loads(content)


_NULL = re.compile(rb"null")
_NULL_ELEMENT = re.compile(rb"[\[,]\s*null\s*[,\]]")
"""A ``null`` that may be an array element (a match inside a nested array only costs a
decode)."""

_DATE_LIMIT = 8.64e15
"""The largest epoch-ms time a JavaScript ``Date`` holds (either way from 1970)."""


def js_date_ms(value: Any) -> float | None:
    """``new Date(value).getTime()`` of a JSON value; ``None`` for an Invalid Date."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return float(int(value)) if -_DATE_LIMIT <= value <= _DATE_LIMIT else None
    return iso_to_ms(value)  # a string (other values: Invalid Date)


class ListingStats:
    """Message count, first user text, latest activity and name of one session, and whether
    pi could summarize it at all."""

    __slots__ = ("activity", "first", "messages", "name", "unlistable", "usage")

    def __init__(self, messages: int = 0, first: str = "", activity: float | None = None,
                 name: str | None = None) -> None:
        self.messages = messages
        self.first = first
        self.activity = activity
        self.name = name
        self.usage: UsageTotals | None = UsageTotals()
        """The session's token and cost totals (:mod:`sessiontree.usage`), ``None`` where they
        are not counted (a database row that does not keep them)."""
        self.unlistable = False
        """pi's ``buildSessionInfo`` throws on this session's lines: its listing drops the file."""

    def add(self, lines: Iterable[ListingLine]) -> None:
        """Count these lines (in stored order; the header is not counted)."""
        messages, first, name, activity = self.messages, self.first, self.name, self.activity
        unlistable, usage = self.unlistable, self.usage
        for line in lines:  # one loop, no call per line: a folder listing reads every line
            kind = line.type
            if kind == "message":
                messages += 1
                message = line.message
                if message is None:
                    unlistable = True  # typeof undefined.role throws
                    continue
                role = message.role
                if usage is not None and (role == "assistant" or role == "toolResult"):
                    usage.add(message.usage)
                if not message.content:
                    continue
                if role != "user" and role != "assistant":
                    continue
                stamp = message.timestamp
                if type(stamp) is int or type(stamp) is float:
                    when: float | None = stamp if -_DATE_LIMIT <= stamp <= _DATE_LIMIT else None
                else:
                    when = js_date_ms(line.timestamp) if line.timestamp is not UNSET else None
                if when is not None and (activity is None or when > activity):
                    activity = when
                if _content_breaks_pi(message.content):
                    unlistable = True
                elif not first and role == "user":
                    first = _text(message.content)
            elif kind == "usage" or kind == "compaction" or kind == "branch_summary":
                if usage is not None:
                    usage.add(line.usage)
            elif kind == "session_info":
                value = line.name
                if isinstance(value, str):
                    name = js_trim(value) or None
                elif value is None or value is UNSET:
                    name = None
                else:
                    unlistable = True  # name.trim is not a function
        self.messages, self.first, self.name, self.activity = messages, first, name, activity
        self.unlistable = unlistable

    def modified(self, created: object, mtime_ms: float | None
                 ) -> tuple[int, Literal["message", "created", "file"]]:
        """The row's ``modified`` time in epoch ms and where it comes from."""
        if self.activity is not None and self.activity > 0:
            return int(self.activity), "message"
        header_ms = iso_to_ms(created) if isinstance(created, str) else None
        if header_ms is not None:
            return header_ms, "created"
        return math.floor((mtime_ms or 0) + 0.5), "file"  # node's stats.mtime rounds


def listed_usage(lines: Iterable[bytes], stats: ListingStats | None = None) -> UsageTotals:
    """The totals of stored entry lines as a listing counts them (added to ``stats`` when
    given): what a store that keeps no totals for a session, or counts them again, uses."""
    stats = stats if stats is not None else ListingStats()
    stats.add(filter(None, map(listing_line, lines)))
    assert stats.usage is not None
    return stats.usage


def cost_steps(lines: Iterable[ListingLine]) -> list[float]:
    """The cost each line adds to the totals, in order, leaving out the lines that add none:
    a store that adds them one by one to a stored total gets the very double a listing of all
    the lines gets (floating-point sums depend on their order)."""
    steps = []
    for line in lines:
        if line.usage is None and (line.message is None or line.message.usage is None):
            continue  # nothing to count (most lines)
        one = ListingStats()
        one.add((line,))
        assert one.usage is not None
        if one.usage.cost:
            steps.append(one.usage.cost)
    return steps


def row_of_lines(header: ListingLine, entries: list[ListingLine], path: str,
                 mtime_ms: float | None, stats: ListingStats | None = None, *,
                 header_id: Any = UNSET) -> SessionListing:
    """The row of a session from its header line and the lines after it that parse (``stats``:
    those lines already counted; ``header_id``: the header's id when it is not a string, which
    a listing line does not keep); the entry count is the number of distinct string ids (a
    duplicate header is not an entry)."""
    if stats is None:
        stats = ListingStats()
        stats.add(entries)
    if "session" in map(_get_type, entries):  # pi's duplicate header quirk: not entries
        entries = [line for line in entries if line.type != "session"]
    ids = set(map(_get_id, entries))
    ids.discard(UNSET)
    fields = {"id": header.id if header_id is UNSET else header_id, "cwd": header.cwd,
              "timestamp": header.timestamp,
              "parentSession": header.parentSession}
    return listing_row(fields, stats, path, mtime_ms, len(ids))


def listing_row(header: Mapping[str, Any], stats: ListingStats, path: str,
                mtime_ms: float | None, entry_count: int) -> SessionListing:
    """A listing row from a session's header fields (as stored: ``id``, ``cwd``,
    ``timestamp``, ``parentSession``; a missing one absent or ``UNSET``) and its counted lines.

    As pi 1.5.2's row: ``id`` and ``parentSession`` are taken as they are, whatever their type;
    a ``timestamp`` that is not a string is converted as ``new Date()`` converts it (a number
    is epoch ms, ``null`` 0, a boolean 0 or 1; anything else, or a missing one, no time: ``""``).
    """
    from .stores.base import SessionListing

    stamp = header.get("timestamp", UNSET)
    modified, source = stats.modified(stamp, mtime_ms)
    cwd, parent, session_id = header.get("cwd"), header.get("parentSession"), header.get("id")
    return SessionListing(
        path=path, id=None if session_id is UNSET else session_id,
        cwd=cwd if isinstance(cwd, str) else "", name=stats.name,
        parent_session=None if parent is UNSET else parent,
        created=stamp if isinstance(stamp, str) else _created(stamp), modified_ms=modified,
        message_count=stats.messages, entry_count=entry_count,
        first_message=stats.first or "(no messages)", modified_from=source, usage=stats.usage,
    )


def _created(stamp: Any) -> str:
    """A header time that is not a string, as ``new Date(stamp).toISOString()``; ``""`` for an
    Invalid Date (and for the years JavaScript writes in its extended form). A list or object
    is read from its text, as ``Date`` reads it: an ISO time only, as for a string."""
    if isinstance(stamp, (list, dict)):
        text = _js_string(stamp)
        return text if iso_to_ms(text) is not None else ""
    ms = js_date_ms(stamp) if stamp is not UNSET else None
    return (ms_to_iso(int(ms)) or "") if ms is not None else ""


def node_mtime_ms(st: os.stat_result) -> float:
    """A file's ``mtimeMs`` as node computes it (pi's listing reads files' times in node)."""
    ns = st.st_mtime_ns
    return ns // 10**9 * 1e3 + ns % 10**9 / 1e6


# -- the order of rows and the cwd filter --------------------------------------------------------

_ICU_ASCII = (" _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpPqQrR"
              "sStTuUvVwWxXyYzZ")
"""Printable ASCII in the order of ICU's root collation (``localeCompare`` in node, measured):
punctuation and symbols, digits, then letters, a letter's lower case first."""
_PRIMARY = {c: i for i, c in enumerate(dict.fromkeys(_ICU_ASCII.lower()))}


def _collation_key(text: str) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """A sort key comparing as ``a.localeCompare(b)`` does under ICU's root collation: every
    character's base first (letters without case or accent), then the accents, then the case.
    Exact for ASCII; other characters are decomposed (NFD) into a base, compared after every
    ASCII character by code point, and its combining marks."""
    import unicodedata

    primary: list[int] = []
    accents: list[tuple[int, ...]] = []
    case: list[int] = []
    for char in unicodedata.normalize("NFD", text):
        if unicodedata.combining(char) and accents:
            accents[-1] += (ord(char),)
            continue
        lower = char.lower() if len(char.lower()) == 1 else char
        weight = _PRIMARY.get(lower)
        primary.append(weight if weight is not None else 0x100 + ord(lower))
        accents.append(())
        case.append(int(char != lower))
    return tuple(primary), tuple(accents), tuple(case)


def pi_order(rows: list[SessionListing]) -> list[SessionListing]:
    """Rows in pi 1.5.2's order: newest ``modified`` first, rows of one time by file name in
    descending ``localeCompare`` order (pi reads the files in that order, then sorts stably;
    pi 0.73.1 left such rows in the folder's order)."""
    ordered = sorted(rows, key=lambda row: row.path)  # names equal to the collation: as node lists
    times = [row.modified_ms for row in ordered]
    if len(set(times)) < len(times):  # ties: by name, the costly key only then
        ordered.sort(key=lambda row: _collation_key(os.path.basename(row.path)), reverse=True)
    ordered.sort(key=attrgetter("modified_ms"), reverse=True)
    return ordered


def resolve_path(path: str) -> str:
    """pi's ``resolvePath``: ``~`` and ``~/`` expanded, a ``file://`` URL made a path, then
    made absolute against the working directory and normalized as node's ``path.resolve``."""
    if path == "~" or path.startswith("~/"):
        path = os.path.join(os.path.expanduser("~"), path[2:])
    elif path.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        path = unquote(urlsplit(path).path)
    resolved = os.path.normpath(os.path.join(os.getcwd(), path))
    return "/" + resolved.lstrip("/") if resolved.startswith("//") else resolved


def cwd_matches(session_cwd: str, resolved_cwd: str) -> bool:
    """pi 1.5.2's ``sessionCwdMatches``: a non-empty header cwd naming ``resolved_cwd`` (an
    already resolved path) once resolved."""
    return session_cwd != "" and resolve_path(session_cwd) == resolved_cwd
