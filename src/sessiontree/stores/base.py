"""The storage protocols: a ``SessionLog`` holds one session's lines, a ``Store`` many sessions.

A :class:`SessionLog` is what a :class:`~sessiontree.Session` reads and appends through: it
hands out envelopes (:class:`~sessiontree._scan.Record`), a line's exact bytes on demand, and
appends whole lines. Appends happen between :meth:`SessionLog.begin_append` (which takes the
writer's lock and reports lines another writer added meanwhile) and :meth:`SessionLog.end_append`.
A file log's records carry byte positions (:class:`~sessiontree._scan.FileRecord`); a log that
is not a file (memory, a database) locates a line by its ``line`` number only.

A log that answers tree queries itself (a database) is an :class:`IndexedLog`: a session over
it loads nothing on open and asks for paths and entries as it needs them.

A :class:`Store` is the session-level view (create, append, read, list, delete, close) that
every backend offers; stores only persist entries. Optional abilities are sub-protocols with a
``TypeGuard`` helper (:func:`has_logs`), never stubs that raise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeGuard, Union, runtime_checkable

import msgspec

from .._scan import FileRecord, Problem, Record, envelope
from ..entries import AnyEntry, SessionHeader
from ..errors import InvalidEntry, InvalidLocation
from ..usage import UsageTotals

if TYPE_CHECKING:
    from .._search import SearchHit  # search is loaded when a store searches

__all__ = [
    "FollowableLog",
    "HeaderValue",
    "IndexedLog",
    "LineStore",
    "LoadResult",
    "LogBehind",
    "LogHead",
    "LogStore",
    "RefreshableLog",
    "SearchableStore",
    "SessionListing",
    "SessionLog",
    "Store",
    "check_new_session_id",
    "check_replacement",
    "check_session_id",
    "has_lines",
    "has_logs",
    "is_indexed",
    "is_refreshable",
]


class LoadResult(msgspec.Struct):
    """What one scan of a log found."""

    header: dict[str, Any] | None
    header_line: int
    records: Sequence[Record]
    problems: list[Problem]


HeaderValue = Union[str, int, float, bool, list[Any], dict[str, Any], None]
"""A header field as stored: any JSON value (``None`` also when the field is missing)."""


class SessionListing(msgspec.Struct, frozen=True):
    """One session in a listing (pi's ``SessionInfo``), newest first by ``modified``."""

    path: str
    id: HeaderValue
    """The header's ``id``: a string for every session that opens. pi 1.5.2 also lists a file
    whose header ``id`` is not a string (which neither pi nor sessiontree can open), with that
    value: so do we (``None`` when it has none)."""
    cwd: str
    name: str | None
    parent_session: HeaderValue
    """The header's ``parentSession`` as stored (a path for the forks pi and sessiontree write;
    pi lists any other value as it is); ``None`` when missing."""
    created: str
    modified_ms: int
    """Epoch ms of the latest user or assistant message, else the header time, else the file's mtime."""
    message_count: int
    entry_count: int
    first_message: str
    modified_from: Literal["message", "created", "file"] = "message"
    """Where ``modified_ms`` comes from: the latest message, the header (the session has no
    user or assistant message), or the file's modification time (no header time either)."""
    usage: UsageTotals | None = None
    """The session's token and cost totals as pi 1.5.2 counts them (:mod:`sessiontree.usage`);
    every built-in store gives them (``None``: a store of another kind that does not)."""


@runtime_checkable
class SessionLog(Protocol):
    """One session's append-only lines, as a :class:`~sessiontree.Session` uses them."""

    @property
    def location(self) -> str | None:
        """The file path, or ``None`` for logs that are not files."""

    def load(self) -> LoadResult:
        """Every stored envelope in stored order (with the header and the problems found)."""

    def read(self, record: Record) -> bytes:
        """The stored bytes of one entry line (a record this log handed out), without its
        line ending."""

    def begin_append(self) -> LoadResult | None:
        """Take the writer's lock; return what other writers appended since the last scan."""

    def write(self, lines: Sequence[bytes], header_line: bytes | None,
              envelopes: Sequence[FileRecord | None] | None = None) -> Sequence[Record]:
        """Append whole lines (the header first when the log has none); return their records.
        A log that takes no lock raises :class:`LogBehind` when others appended first.

        ``envelopes`` (one item a line, or ``None``) are the records of lines the writer
        composed, without a position (what decoding the line gives:
        :func:`~sessiontree._scan.message_envelope`), ``None`` for a line to decode: a log
        that makes each record from its line (a file, memory) only places them; a database,
        which decodes what it stores anyway, may ignore them."""

    def end_append(self) -> None:
        """Release the writer's lock."""

    def close(self) -> None:
        """Release every resource; reads after this fail."""


class LogBehind(Exception):
    """:meth:`SessionLog.write` of a log that appends without a lock (Redis: a compare and
    append) refused the lines because other writers appended since the log last looked.
    Nothing was written; the log has read their lines, and the next
    :meth:`SessionLog.begin_append` hands them over, so the caller plans again."""


class LogHead(msgspec.Struct):
    """What an :class:`IndexedLog` tells a session on open, without reading entries."""

    header: dict[str, Any] | None
    """The stored header, ``None`` for a session not stored yet."""
    entry_count: int
    last: Record | None
    """The last entry in append order (the leaf on open)."""
    name: str | None


@runtime_checkable
class IndexedLog(SessionLog, Protocol):
    """A log that answers tree queries itself, so that opening loads no entry (databases)."""

    @property
    def url(self) -> str:
        """The session's address, e.g. ``sqlite:///x.db#<id>``."""

    def head(self) -> LogHead:
        """The header, the entry count, the last entry and the name."""

    def record(self, entry_id: str) -> Record | None:
        """One envelope by id, ``None`` if there is no such entry."""

    def path(self, leaf_id: str) -> Sequence[Record]:
        """The root-to-``leaf_id`` envelopes, root first; ``[]`` for an unknown id (may be read
        lazily, in chunks)."""

    def label(self, entry_id: str) -> tuple[str, str | None] | None:
        """The entry's current label and the timestamp of the label entry that set it."""

    def listing(self) -> SessionListing:
        """This session's listing row, as stored (never by scanning entries)."""


@runtime_checkable
class FollowableLog(Protocol):
    """A log that can stream lines other writers append (every built-in log)."""

    def follow(self, *, poll: float, stop: Callable[[], bool]) -> Iterator[bytes]:
        """Whole entry lines appended after the last one this log has seen, as they land,
        until ``stop()`` is true when nothing new came; ``poll`` seconds between looks where
        the backend cannot wait for a notification."""


@runtime_checkable
class RefreshableLog(Protocol):
    """A log that reads what other writers appended without taking the writer's lock (files
    and databases), so that a reader sees every handle's and process's writes."""

    def refresh(self) -> LoadResult | None:
        """The whole lines other writers appended since this log last looked (a line still
        being written waits for the next look); ``None`` when nothing came."""


def is_refreshable(log: SessionLog) -> TypeGuard[RefreshableLog]:
    """Whether ``log`` can read others' appends without the writer's lock (see
    :class:`RefreshableLog`)."""
    return isinstance(log, RefreshableLog)


def is_indexed(log: SessionLog) -> TypeGuard[IndexedLog]:
    """Whether ``log`` answers tree queries itself (see :class:`IndexedLog`)."""
    return isinstance(log, IndexedLog)


@runtime_checkable
class Store(Protocol):
    """Many sessions, addressed by session id. Every backend passes the same conformance tests."""

    def create(self, header: SessionHeader) -> str:
        """Register a new session; returns its id. Nothing else is written until the first append."""

    def append(self, session_id: str,
               entries: Sequence[AnyEntry | Mapping[str, Any]]) -> None:
        """Append entries, in order, to a session: typed entries or on-disk dicts (written as
        given, unknown fields included), ids and parents kept."""

    def read(self, session_id: str) -> Iterator[AnyEntry]:
        """Every entry of a session in stored order."""

    def list_sessions(self) -> list[SessionListing]:
        """Every session, newest first."""

    def delete(self, session_id: str) -> None:
        """Remove a session and its entries."""

    def close(self) -> None:
        """Release connections and files."""

    def __enter__(self) -> Any:
        """The store itself (``with SqliteStore.open(path) as store:``)."""

    def __exit__(self, *exc: object) -> None:
        """:meth:`close`."""


@runtime_checkable
class LogStore(Protocol):
    """A store whose sessions open as :class:`~sessiontree.Session` objects (every built-in one)."""

    def open_log(self, session_id: str) -> SessionLog:
        """The log of a stored session.

        Raises:
            SessionNotFound: no such session.
        """

    def new_log(self, header: SessionHeader) -> SessionLog:
        """The log for a new session; nothing is stored until its first append."""


def has_logs(store: Store) -> TypeGuard[LogStore]:
    """Whether sessions of ``store`` can be opened as :class:`~sessiontree.Session` objects."""
    return isinstance(store, LogStore)


@runtime_checkable
class LineStore(Protocol):
    """A store that reads and writes whole sessions as their exact lines (every built-in one):
    what copies between stores and imports use."""

    def session_ids(self) -> list[str]:
        """The ids of every stored session."""

    def session_url(self, session_id: str) -> str:
        """Where a stored session is, for people (a file path, or ``<store URL>#<id>``)."""

    def export_lines(self, session_id: str) -> tuple[bytes, Iterator[bytes]]:
        """The header line and the entry lines of a session, exact bytes, in stored order."""

    def import_lines(self, header_line: bytes, lines: Sequence[bytes]) -> str:
        """Store a whole new session at once (all of it or nothing); returns its id.

        Raises:
            DuplicateId: the session exists already.
        """


@runtime_checkable
class SearchableStore(Protocol):
    """A store that finds entries by the words they hold (every built-in one; see
    :mod:`sessiontree._search` for what matches and how hits rank)."""

    def search(self, query: str, *, cwd: str | None = None, role: str | None = None,
               since: datetime | date | None = None, limit: int = 20) -> list[SearchHit]:
        """Entries of every session, on every branch, holding every word and "phrase" of
        ``query``, best first."""


def has_lines(store: Store) -> TypeGuard[LineStore]:
    """Whether ``store`` reads and writes whole sessions as lines (see :class:`LineStore`)."""
    return isinstance(store, LineStore)


# Compiled (and cached by re) on first use, not with Session.
_SESSION_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_NEW_SESSION_ID = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9])?"


def check_new_session_id(session_id: object) -> str:
    """A session id chosen for a new session, as pi 1.5.2's ``assertValidSessionId`` accepts
    it: letters, digits, ``.``, ``_`` and ``-``, starting and ending with a letter or digit
    (and, as every id here, at most 128).

    Raises:
        InvalidLocation: anything else (a ``/`` would name a file outside the folder).
    """
    if not isinstance(session_id, str) or not re.fullmatch(_NEW_SESSION_ID, session_id):
        raise InvalidLocation(f"not a valid session id: {session_id!r} (letters, digits, '.', "
                              "'_' and '-', at most 128, starting and ending with a letter or "
                              "digit)")
    return session_id


def check_session_id(session_id: object) -> str:
    """A session id safe as a file name part and a key: 1-128 of ``A-Z a-z 0-9 . _ -``, not
    starting with a dot, dash or underscore.

    Raises:
        InvalidLocation: anything else.
    """
    if not isinstance(session_id, str) or not re.fullmatch(_SESSION_ID, session_id):
        raise InvalidLocation(f"not a valid session id: {session_id!r} (letters, digits, '.', '_' "
                              "and '-', at most 128, starting with a letter or digit)")
    return session_id


def check_replacement(entry_id: str, old: bytes, new: bytes, where: str) -> Record:
    """The envelope of ``new``, the line replacing entry ``entry_id``'s line ``old`` (a purge,
    a repair): it must keep what the tree and its indexes hold of the entry (id, parent, type,
    message role: depths and the path's model source), so that only the line and the fields
    read from it (a label, a name, a time) change.

    Raises:
        InvalidEntry: ``new`` is not an entry line, or changes one of those.
    """
    before, after = envelope(old), envelope(new)
    if after is None:
        raise InvalidEntry(f"the line replacing entry {entry_id}'s is not an entry; nothing "
                           "was written", path=where, entry_id=entry_id)
    kept = ("id", "parent_id", "type", "role")
    changed = [name for name in kept if before is None or getattr(before, name) != getattr(
        after, name)]
    if changed:
        raise InvalidEntry(f"the line replacing entry {entry_id}'s changes its "
                           f"{', '.join(changed)}; nothing was written", path=where,
                           entry_id=entry_id)
    return after
