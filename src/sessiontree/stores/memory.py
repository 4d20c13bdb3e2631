"""Sessions held in memory: the reference backend, and what ``Session.in_memory()`` uses."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from .. import _json
from .._columns import Columns
from .._scan import FileRecord, Record, Scanner
from .._treelog import TreeLog, current_branch
from ..entries import AnyEntry, SessionHeader
from ..errors import DuplicateId, SessionNotFound
from .base import LoadResult, SessionListing, check_session_id

if TYPE_CHECKING:
    from .._search import SearchHit

__all__ = ["MemoryLog", "MemoryStore"]


class MemoryLog:
    """One session's lines in a list (a JSONL file's lines without their endings); a record's
    ``line`` number is its position in the list, counting from 1."""

    def __init__(self, lines: Sequence[bytes] = ()) -> None:
        self.lines: list[bytes] = list(lines)
        self._scanner = Scanner(None)
        self._size = 0

    @property
    def location(self) -> None:
        return None

    def load(self) -> LoadResult:
        records = Columns()
        scanner = self._scanner = Scanner(None, records)
        offset = 0
        for line in self.lines:
            scanner.feed(memoryview(line), offset, True)
            offset += len(line) + 1
        scanner.finish()
        self._size = offset
        scanner.records = []  # the session's index keeps them
        return LoadResult(scanner.header, scanner.header_line, records, scanner.problems)

    def read(self, record: Record) -> bytes:
        return self.lines[record.line - 1].removesuffix(b"\r")

    def read_many(self, records: Sequence[Record]) -> list[bytes]:
        return [self.read(r) for r in records]

    def begin_append(self) -> None:
        return None

    def write(self, lines: Sequence[bytes], header_line: bytes | None,
              envelopes: Sequence[FileRecord | None] | None = None) -> Sequence[FileRecord]:
        scanner = self._scanner
        head = [header_line] if scanner.header is None and header_line is not None else []
        records = scanner.appended(lines, envelopes, self._size, header_line)
        for line in (*head, *lines):
            self.lines.append(line)
            self._size += len(line) + 1
        return records

    def end_append(self) -> None:
        return None

    def follow(self, *, poll: float, stop: Callable[[], bool]) -> Iterator[bytes]:
        """Lines appended after the last one scanned (by another session over this log)."""
        position = len(self.lines)
        while True:
            if len(self.lines) > position:
                fresh, position = self.lines[position:], len(self.lines)
                yield from fresh
            elif stop():
                return
            else:
                time.sleep(poll)

    def close(self) -> None:
        return None

    def text(self) -> bytes:
        """The log as a JSONL file would hold it."""
        return b"".join(line + b"\n" for line in self.lines)


class MemoryStore:
    """Sessions in a dict, keyed by session id: the reference :class:`Store`."""

    def __init__(self) -> None:
        self._logs: dict[str, MemoryLog] = {}

    @classmethod
    def open(cls) -> MemoryStore:
        """A new, empty store, as every store's ``open``."""
        return cls()

    def log(self, session_id: str) -> MemoryLog:
        try:
            return self._logs[session_id]
        except KeyError:
            raise SessionNotFound(f"no session {session_id} in this store") from None

    def create(self, header: SessionHeader) -> str:
        self._logs[check_session_id(header.id)] = MemoryLog([_json.dumps(header)])
        return header.id

    def open_log(self, session_id: str) -> MemoryLog:
        """The log of a stored session (the same object every time)."""
        return self.log(check_session_id(session_id))

    def new_log(self, header: SessionHeader) -> MemoryLog:
        """An empty log kept under the header's id (the header is written at the first append)."""
        log = self._logs[check_session_id(header.id)] = MemoryLog()
        return log

    def session_ids(self) -> list[str]:
        """The ids of every session, sorted."""
        return sorted(self._logs)

    def export_lines(self, session_id: str) -> tuple[bytes, Iterator[bytes]]:
        """The header line and entry lines, as stored."""
        lines = self.open_log(session_id).lines
        return lines[0], iter(lines[1:])

    def import_lines(self, header_line: bytes, lines: Sequence[bytes]) -> str:
        """Keep a whole session's lines; returns its id."""
        header = _json.loads(header_line)
        session_id = check_session_id(header.get("id") if isinstance(header, dict) else None)
        if session_id in self._logs:
            raise DuplicateId(f"session {session_id} is already in this store")
        self._logs[session_id] = MemoryLog([header_line, *lines])
        return session_id

    @property
    def url(self) -> str:
        return "memory:"

    def session_url(self, session_id: str) -> str:
        return f"memory:{session_id}"

    def append(self, session_id: str,
               entries: Sequence[AnyEntry | Mapping[str, Any]]) -> None:
        TreeLog(self.log(session_id)).extend(entries)

    def read(self, session_id: str) -> Iterator[AnyEntry]:
        yield from TreeLog(self.log(session_id), warn=False).entries()

    def list_sessions(self) -> list[SessionListing]:
        listings = []
        for session_id, log in self._logs.items():
            listings.append(TreeLog(log, warn=False).listing(path=f"memory:{session_id}"))
        listings.sort(key=lambda item: item.modified_ms, reverse=True)
        return listings

    def delete(self, session_id: str) -> None:
        self.log(session_id)
        del self._logs[session_id]

    def search(self, query: str, *, cwd: str | None = None, role: str | None = None,
               since: datetime | date | None = None, limit: int = 20) -> list[SearchHit]:
        """Entries holding every word and "phrase" of ``query`` (every line read: no index),
        as the other stores find them (:mod:`sessiontree._search`)."""
        from .._search import (Candidate, document, holds_words, parse_query, rank,
                               recent_first, since_ms)

        parsed = parse_query(query)
        after = since_ms(since)
        wanted = parsed.words()
        found: list[Candidate] = []
        times: list[int] = []
        for session_id, log in self._logs.items():
            header = _json.loads(log.lines[0]) if log.lines else None
            session_cwd = header.get("cwd") if isinstance(header, dict) else None
            if cwd is not None and session_cwd != cwd:
                continue
            for place, line in enumerate(log.lines[1:], start=1):
                doc = document(line)
                if doc is None or doc.ms < after or (role is not None and doc.role != role) \
                        or not holds_words(doc.text, wanted):
                    continue
                found.append(Candidate(session_id, self.session_url(session_id),
                                       session_cwd if isinstance(session_cwd, str) else "",
                                       place, line))
                times.append(doc.ms)
        return rank(recent_first(found, times), parsed, role=role, since=after, limit=limit,
                    branch=lambda hit: current_branch(TreeLog(self.log(hit.session_id),
                                                              warn=False)))

    def close(self) -> None:
        self._logs.clear()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
