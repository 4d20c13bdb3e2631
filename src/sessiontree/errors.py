"""Every error sessiontree raises, under one root.

    SessionTreeError
    ├── CorruptHeader          the first parsed line is not a session header (file left untouched)
    ├── CorruptLine            a bad line, raised when opening with strict=True
    ├── UnsupportedVersion     a header version, or a database store's schema version, newer
    │                          than this library knows
    ├── EntryNotFound          an id that is not in the session
    │   └── AmbiguousEntry     an id prefix or label that names several entries
    ├── SessionNotFound        a session file or stored session that does not exist
    ├── SessionLockedError     another process is writing the session (alias SessionLocked)
    ├── ConcurrentModification the file shrank or was replaced under a writer, or the stored
    │                          session changed so that an append cannot land where asked
    ├── InvalidEntry           an entry or argument that cannot be written
    │   ├── InvalidMessage     a message whose fields have the wrong shape (names the field)
    │   └── DuplicateId        an entry id the stored session already has
    ├── InvalidLocation        a store URL, session id or file name that cannot be used
    ├── CopyRefused            a session a copy would not reproduce byte for byte
    ├── CopyIncomplete         a whole-store copy that left sessions out (each named, with why)
    ├── ReadOnlyStore          a write to a store opened read-only
    ├── StoreUnavailable       the database could not be reached or the connection was lost
    ├── WriteFailed            the file system refused a write (a full disk, a missing folder);
    │                          also an OSError
    ├── BlockingCallInLoop     a blocking call on a session whose store's I/O runs in the event
    │                          loop, made from that loop's own thread
    ├── MalformedSource        an imported file (another tool's format) that cannot be read
    └── MissingExtra           an optional dependency is not installed

Each error carries the fields that locate it (``path``, ``lineno``, ``entry_id``) and a
message that names them, so a user can find the line without reading a traceback.
"""

from __future__ import annotations

import os

__all__ = [
    "AmbiguousEntry",
    "BlockingCallInLoop",
    "ConcurrentModification",
    "CopyIncomplete",
    "CopyRefused",
    "CorruptHeader",
    "CorruptLine",
    "DuplicateId",
    "EntryNotFound",
    "InvalidEntry",
    "InvalidMessage",
    "InvalidLocation",
    "MalformedSource",
    "MissingExtra",
    "ReadOnlyStore",
    "SessionLocked",
    "SessionLockedError",
    "SessionNotFound",
    "SessionTreeError",
    "StoreUnavailable",
    "UnsupportedVersion",
    "WriteFailed",
]


class SessionTreeError(Exception):
    """Root of every sessiontree error.

    Attributes:
        path: the session file concerned, when there is one.
        lineno: the 1-based physical line number, when the error is about a line.
        entry_id: the entry concerned, when the error is about an entry.
        reason: the bare reason, without the location prefix.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | os.PathLike[str] | None = None,
        lineno: int | None = None,
        entry_id: str | None = None,
    ) -> None:
        self.reason = reason
        self.path = os.fspath(path) if path is not None else None
        self.lineno = lineno
        self.entry_id = entry_id
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.lineno is not None:
            where.append(f"line {self.lineno}")
        prefix = " ".join(where)
        text = f"{prefix}: {self.reason}" if prefix else self.reason
        if self.entry_id is not None and self.entry_id not in self.reason:
            text += f" (entry {self.entry_id})"
        return text


class CorruptHeader(SessionTreeError):
    """The file's first parsed line is not a valid session header; the file was not touched."""


class CorruptLine(SessionTreeError):
    """A line that is not a valid entry, raised by ``strict=True`` opens.

    Attributes:
        kind: the problem kind (``corrupt``, ``torn``, ``duplicate_id``, ``orphan``, ``cycle``).
    """

    def __init__(
        self,
        reason: str,
        *,
        kind: str,
        path: str | os.PathLike[str] | None = None,
        lineno: int | None = None,
        entry_id: str | None = None,
    ) -> None:
        self.kind = kind
        super().__init__(reason, path=path, lineno=lineno, entry_id=entry_id)


class UnsupportedVersion(SessionTreeError):
    """The header's version is newer than ``CURRENT_VERSION``, or an SQLite or PostgreSQL
    store's schema version is newer than this library's migrations (the store does not open,
    nothing is written); upgrade sessiontree to read it."""


class EntryNotFound(SessionTreeError, KeyError):
    """An entry id that the session does not contain."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self._format()


class AmbiguousEntry(EntryNotFound):
    """An id prefix or a label that names more than one entry.

    Attributes:
        candidates: the ids it matches, in file order.
    """

    def __init__(self, reason: str, *, candidates: list[str],
                 path: str | os.PathLike[str] | None = None) -> None:
        self.candidates = candidates
        super().__init__(reason, path=path)


class SessionNotFound(SessionTreeError):
    """A session file or stored session that does not exist."""


class SessionLockedError(SessionTreeError):
    """Another process is writing this session (it holds the writer's lock) and did not let
    go within the timeout."""


SessionLocked = SessionLockedError
"""The earlier name of :class:`SessionLockedError`."""


class ConcurrentModification(SessionTreeError):
    """The session changed under this writer so that the append cannot land where it was asked
    to (the file shrank or was replaced; the stored session was deleted or re-created); nothing
    was written. Open the session again to see what it holds now."""


class InvalidEntry(SessionTreeError, ValueError):
    """An entry or argument that cannot be written as given."""


class InvalidMessage(InvalidEntry):
    """A message that does not fit its role's shape; nothing was written.

    Attributes:
        field: the offending field as a JSON path below the message (``content[0].text``,
            ``toolCallId``), or ``None`` when the whole message is wrong.
    """

    def __init__(self, reason: str, *, field: str | None = None,
                 path: str | os.PathLike[str] | None = None) -> None:
        self.field = field
        super().__init__(reason, path=path)

class DuplicateId(InvalidEntry):
    """An entry id the stored session already has (a database refuses it); nothing was written."""


class InvalidLocation(SessionTreeError, ValueError):
    """A store URL, session id or file name that cannot be used (nothing was opened or written)."""


class CopyRefused(SessionTreeError):
    """A session that a copy would not reproduce exactly (bad lines, an old format version);
    nothing was copied. The message says which command fixes it."""


class CopyIncomplete(SessionTreeError):
    """A copy of a whole store that could not copy some of its sessions; every other one was
    copied. ``result`` says what was copied, what was there already, and each file or session
    left out with the reason (:class:`~sessiontree.transfer.CopyResult`)."""

    def __init__(self, reason: str, *, result: object, path: str | os.PathLike[str] | None = None
                 ) -> None:
        super().__init__(reason, path=path)
        self.result = result


class ReadOnlyStore(SessionTreeError):
    """A write (append, create, delete, migration) to a store opened read-only, or one the
    database refused (a read-only server, a role without the privilege)."""


class StoreUnavailable(SessionTreeError):
    """The database could not be reached, or the connection was lost during a call.

    The call that raised wrote nothing it did not report (a transaction that did not commit
    is rolled back by the server); retrying once the server is back is safe.
    """


class WriteFailed(SessionTreeError, OSError):
    """The file system refused a write (a full disk or quota, a file size limit, a missing or
    read-only folder): nothing of it was kept, the file is as it was (a new file is not left
    behind), so the same call can be retried once the cause is gone.

    Attributes:
        errno: the system's error number (``errno.ENOSPC`` for a full disk).
        path: the file that was being written.
    """

    @classmethod
    def of(cls, exc: OSError, path: str | os.PathLike[str]) -> WriteFailed:
        """The error for ``exc``, raised while writing ``path``."""
        reason = exc.strerror or str(exc)
        if isinstance(exc, FileNotFoundError):
            reason = f"its folder {os.path.dirname(os.path.abspath(path))} does not exist"
        error = cls(f"could not write: {reason}; nothing was kept", path=path)
        error.errno = exc.errno
        error.strerror = exc.strerror
        error.filename = os.fspath(path)
        return error

    def __str__(self) -> str:  # OSError's would print the errno instead of the message
        return self._format()


class BlockingCallInLoop(SessionTreeError, RuntimeError):
    """A blocking call (a ``Session`` method) on a session of an
    :class:`~sessiontree.stores.postgres.AsyncPostgresStore`, made from the thread of the event
    loop that store's I/O runs in: it would wait for itself. Await the
    :class:`~sessiontree.AsyncSession` method instead, or run the call with
    ``asyncio.to_thread``; nothing was read or written."""


class MalformedSource(SessionTreeError, ValueError):
    """A file being imported from another tool is malformed or truncated; nothing was written.

    Attributes:
        format: the source format (``claude-code``, ``chatgpt``, ``open-webui``, ``responses``).
        column: the 1-based column of a syntax error, when known.
        position: where in the document the problem is, as a JSON path (``$[2].mapping.a1``),
            when the JSON parses but does not have the format's shape.
    """

    def __init__(self, reason: str, *, format: str, path: str | os.PathLike[str] | None = None,
                 lineno: int | None = None, column: int | None = None,
                 position: str | None = None) -> None:
        self.format = format
        self.column = column
        self.position = position
        super().__init__(reason, path=path, lineno=lineno)

    def _format(self) -> str:
        where = " ".join(part for part in (self.path, f"line {self.lineno}" if self.lineno else "")
                         if part)
        if self.column is not None:
            where += f", column {self.column}"
        if self.position is not None:
            where += f" at {self.position}"
        return f"{where.strip()}: {self.reason}" if where.strip() else self.reason


class MissingExtra(SessionTreeError, ImportError):
    """A feature needs an optional dependency: the message gives the pip command."""
