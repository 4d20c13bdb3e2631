"""The storage protocols: a ``SessionLog`` holds one session's lines, a ``Store`` many sessions.

A :class:`SessionLog` is what a :class:`~sessiontree.Session` reads and appends through: it
scans the stored lines into envelopes once, hands back a line's bytes on demand, and appends
whole lines. Appends happen between :meth:`SessionLog.begin_append` (which takes the writer's
lock and reports lines another writer added meanwhile) and :meth:`SessionLog.end_append`.

A :class:`Store` is the session-level view (create, append, read, list, delete) that every
backend offers; stores only persist entries.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from .._scan import Problem, Record
from ..entries import AnyEntry, SessionHeader

__all__ = ["LoadResult", "SessionListing", "SessionLog", "Store"]


class LoadResult(msgspec.Struct):
    """What one scan of a log found."""

    header: dict[str, Any] | None
    header_line: int
    records: list[Record]
    problems: list[Problem]


class SessionListing(msgspec.Struct, frozen=True):
    """One session in a listing (pi's ``SessionInfo``), newest first by ``modified``."""

    path: str
    id: str
    cwd: str
    name: str | None
    parent_session: str | None
    created: str
    modified_ms: int
    """Epoch ms of the latest user or assistant message, else the header time, else the file's mtime."""
    message_count: int
    entry_count: int
    first_message: str


@runtime_checkable
class SessionLog(Protocol):
    """One session's append-only lines, as a :class:`~sessiontree.Session` uses them."""

    @property
    def location(self) -> str | None:
        """The file path, or ``None`` for logs that are not files."""

    def load(self) -> LoadResult:
        """Scan every stored line (header, envelopes, problems)."""

    def read(self, record: Record) -> bytes:
        """The stored bytes of one entry line, without its line ending."""

    def begin_append(self) -> LoadResult | None:
        """Take the writer's lock; return what other writers appended since the last scan."""

    def write(self, lines: Sequence[bytes], header_line: bytes | None) -> list[Record]:
        """Append whole lines (the header first when the log has none); return their records."""

    def end_append(self) -> None:
        """Release the writer's lock."""

    def close(self) -> None:
        """Release every resource; reads after this fail."""


@runtime_checkable
class Store(Protocol):
    """Many sessions, addressed by session id. Every backend passes the same conformance tests."""

    def create(self, header: SessionHeader) -> str:
        """Register a new session; returns its id. Nothing else is written until the first append."""

    def append(self, session_id: str, entries: Sequence[AnyEntry]) -> None:
        """Append entries, in order, to a session."""

    def read(self, session_id: str) -> Iterator[AnyEntry]:
        """Every entry of a session in stored order."""

    def list_sessions(self) -> list[SessionListing]:
        """Every session, newest first."""

    def delete(self, session_id: str) -> None:
        """Remove a session and its entries."""

    def close(self) -> None:
        """Release connections and files."""
