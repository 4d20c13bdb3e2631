"""A new session file that is not written until it holds a conversation: pi 1.5.2's rule for a
fork (``createBranchedSession``: "write now if the branched path already has a conversation,
otherwise let ``_persist()`` create the file later").

Invariants:
* Until a line is a user or assistant ``message`` entry (pi's ``_hasConversation``), the lines
  (the header first) are kept in memory and nothing is written: closing the session then
  leaves no file, as closing pi does.
* The append that brings the first such message writes every line kept and its own, with one
  ``write()``, to a file it creates; the records handed out before stay valid (their byte
  offsets are the file's). A file already at that path is never written to.
* A write that fails leaves no file and the lines still kept, so a retry starts over.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from .. import _json
from .._scan import FileRecord, Record
from ..errors import InvalidEntry
from .base import LoadResult
from .jsonl import JsonlFile
from .memory import MemoryLog

__all__ = ["PendingFile", "has_conversation"]


def has_conversation(line: bytes) -> bool:
    """Whether an entry line is a user or assistant message (what makes pi write the file)."""
    entry = _json.loads(line)
    message = entry.get("message") if isinstance(entry, dict) else None
    return entry.get("type") == "message" and isinstance(message, dict) and \
        message.get("role") in ("user", "assistant")


class PendingFile(JsonlFile):
    """A :class:`JsonlFile` whose lines stay in memory until one holds a conversation."""

    def __init__(self, path: str | os.PathLike[str], lines: Sequence[bytes], *,
                 durable: bool = False, lock_timeout: float = 0.0) -> None:
        """Args:
            path: the file to write once there is a conversation.
            lines: the header line, then entry lines none of which is a user or assistant
                message.
        """
        super().__init__(path, durable=durable, lock_timeout=lock_timeout)
        self._pending: MemoryLog | None = MemoryLog(lines)

    @property
    def written(self) -> bool:
        """Whether the file has been written (a conversation came)."""
        return self._pending is None

    @property
    def lines(self) -> list[bytes]:
        """The lines kept in memory, the header first (none once written)."""
        return self._pending.lines if self._pending is not None else []

    def load(self) -> LoadResult:
        return self._pending.load() if self._pending is not None else super().load()

    def read(self, record: Record) -> bytes:
        return self._pending.read(record) if self._pending is not None else super().read(record)

    def read_many(self, records: Sequence[Record]) -> list[bytes]:
        return self._pending.read_many(records) if self._pending is not None \
            else super().read_many(records)

    def refresh(self) -> LoadResult | None:
        return None if self._pending is not None else super().refresh()

    def follow(self, *, poll: float, stop: Callable[[], bool]) -> Iterator[bytes]:
        return self._pending.follow(poll=poll, stop=stop) if self._pending is not None \
            else super().follow(poll=poll, stop=stop)

    def begin_append(self) -> LoadResult | None:
        return None if self._pending is not None else super().begin_append()

    def write(self, lines: Sequence[bytes], header_line: bytes | None,
              envelopes: Sequence[FileRecord | None] | None = None) -> Sequence[FileRecord]:
        """Keep the lines, or write every line kept with them once one is a conversation.

        Raises:
            InvalidEntry: a file is already at the path (nothing was written).
            WriteFailed: the file system refused the write (nothing was kept on disk).
        """
        pending = self._pending
        if pending is None:
            return super().write(lines, header_line, envelopes)
        if not any(map(has_conversation, lines)):
            return pending.write(lines, header_line, envelopes)
        if _holds_bytes(self.path):
            raise InvalidEntry("a file is already where this new session goes; nothing was "
                               "written", path=self.path)
        header, kept = (pending.lines[0], pending.lines[1:]) if pending.lines else (header_line, [])
        self._pending = None
        try:
            super().begin_append()  # creates the file, takes the writer's lock
            known = None if envelopes is None else [*(None for _ in kept), *envelopes]
            return super().write([*kept, *lines], header, known)[len(kept):]
        except BaseException:
            self.close()
            self._pending = pending  # (a failed write removed the file it created)
            raise


def _holds_bytes(path: str) -> bool:
    """Whether something other than nothing or an empty file is at ``path`` (an empty file is
    where a failed first write left off: it is written as a new session's file is)."""
    try:
        return os.lstat(path).st_size > 0 or not os.path.isfile(path)
    except FileNotFoundError:
        return False
