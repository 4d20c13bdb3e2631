"""What a session listing counts (pi's ``buildSessionInfo``), one message at a time.

Shared by :meth:`Session.listing` (which feeds every stored message) and the database stores
(which feed each appended message and keep the result in their sessions table, so a listing
never scans entries). Invariants: ``messages`` counts every ``message`` entry; ``modified`` is
the latest user or assistant message time (the message's numeric ``timestamp``, else the
entry's); ``first`` is the text of the first user message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from . import _json
from ._time import iso_to_ms

__all__ = ["ListingStats", "message_of", "message_text"]


class _MessageOf(msgspec.Struct):
    type: Any = None
    message: Any = None


_message_of = msgspec.json.Decoder(_MessageOf)


def message_of(line: bytes) -> dict[str, Any] | None:
    """The ``message`` object of a ``message`` entry line, ``None`` for any other line."""
    try:
        found = _message_of.decode(line)
        kind, message = found.type, found.message
    except (msgspec.DecodeError, UnicodeDecodeError):
        value = _json.loads(line)
        kind = value.get("type") if isinstance(value, dict) else None
        message = value.get("message") if isinstance(value, dict) else None
    return message if kind == "message" and isinstance(message, dict) else None


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message's content: a string, or its text blocks joined by spaces."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b["text"] for b in content if isinstance(b, dict)
                        and b.get("type") == "text" and isinstance(b.get("text"), str))
    return ""


class ListingStats:
    """Message count, first user text and latest activity of one session."""

    __slots__ = ("first", "messages", "modified")

    def __init__(self, messages: int = 0, first: str = "", modified: int | None = None) -> None:
        self.messages = messages
        self.first = first
        self.modified = modified

    def add(self, entry_timestamp: str | None, message: Mapping[str, Any]) -> None:
        """Count one ``message`` entry (its ``timestamp`` field and its ``message`` object)."""
        self.messages += 1
        role = message.get("role")
        if role not in ("user", "assistant"):
            return
        stamp = message.get("timestamp")
        when = stamp if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) \
            else iso_to_ms(entry_timestamp)
        if when is not None:
            self.modified = int(when) if self.modified is None else max(self.modified, int(when))
        if role == "user" and not self.first:
            self.first = message_text(message)
