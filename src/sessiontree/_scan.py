"""One pass over a session log's lines: the header, one envelope per entry, and the load report.

Invariants (FORMAT.md section 18.1):
* Every physical line is counted (1-based), blank ones included; blank lines are skipped silently.
* The header is the first line that parses. Anything else before it that does not parse is
  reported as ``corrupt``; a header that is not ``{"type":"session","id":<str>}``, or a file in
  which no line parses, raises :class:`~sessiontree.errors.CorruptHeader`.
* Entry payloads are not decoded here: only the envelope (type, id, parentId, timestamp and the
  few fields labels, names and roles need) and the byte range of the line.
* An unterminated last line that does not parse is ``torn``; any other bad line is ``corrupt``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import IO, Any, Literal

import msgspec

from . import _json
from .errors import CorruptHeader

__all__ = ["Problem", "ProblemKind", "Record", "Scanner", "iter_lines"]

ProblemKind = Literal["corrupt", "torn", "cycle", "duplicate_id", "orphan", "bad_header"]


class Problem(msgspec.Struct, frozen=True):
    """One entry of a load report: what is wrong with which line, and what was done about it."""

    line: int
    kind: ProblemKind
    reason: str
    entry_id: str | None = None
    sidecar: str | None = None
    """For a ``torn`` line that was repaired before an append: where its bytes were saved."""

    def describe(self, path: str | None = None) -> str:
        """One human-readable line, e.g. ``a.jsonl line 7: corrupt: <reason>``."""
        where = f"{path} line {self.line}" if path else f"line {self.line}"
        text = f"{where}: {self.kind}: {self.reason}"
        if self.sidecar:
            text += f" (saved to {self.sidecar})"
        return text


class Record:
    """The envelope of one entry line: enough to index it, without its payload."""

    __slots__ = (
        "id", "parent_id", "type", "timestamp", "line", "offset", "length", "role", "custom_type",
        "extra", "raw",
    )

    def __init__(
        self,
        id: str,
        parent_id: str | None,
        type: str,
        timestamp: str | None,
        line: int,
        offset: int,
        length: int,
        role: str | None = None,
        custom_type: str | None = None,
        extra: Any = None,
        raw: bytes | None = None,
    ) -> None:
        self.id = id
        self.parent_id = parent_id
        self.type = type
        self.timestamp = timestamp
        self.line = line
        self.offset = offset
        self.length = length
        self.role = role
        self.custom_type = custom_type
        self.extra = extra  # label: (targetId, label or None); session_info: name or None
        self.raw = raw  # the line's bytes, for logs that keep them in memory

    def __repr__(self) -> str:
        return f"Record(id={self.id!r}, parent_id={self.parent_id!r}, type={self.type!r}, line={self.line})"


class _Role(msgspec.Struct):
    role: Any = None


class _Envelope(msgspec.Struct, rename="camel"):
    type: str
    id: str
    parent_id: str | None = None
    timestamp: str | None = None
    message: _Role | None = None
    custom_type: str | None = None
    target_id: str | None = None
    label: str | None = None
    name: str | None = None


_envelope_decoder = msgspec.json.Decoder(_Envelope)
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"


def iter_lines(
    stream: IO[bytes], start: int = 0, chunk_size: int = 8 << 20
) -> Iterator[tuple[memoryview, int, bool]]:
    """Yield ``(line, offset, terminated)`` for every physical line from ``start`` on.

    The file is read in chunks, so memory stays bounded by the chunk and the longest line.
    """
    stream.seek(start)
    pending = b""
    base = start
    while True:
        chunk = stream.read(chunk_size)
        if not chunk:
            break
        data = pending + chunk if pending else chunk
        view = memoryview(data)
        pos = 0
        find = data.find
        while True:
            nl = find(b"\n", pos)
            if nl < 0:
                break
            yield view[pos:nl], base + pos, True
            pos = nl + 1
        pending = data[pos:]
        base += pos
    if pending:
        yield memoryview(pending), base, False


def _is_blank(line: memoryview) -> bool:
    return not line or (line[0] != 0x7B and not bytes(line).strip(_WHITESPACE))


class Scanner:
    """Feed it every physical line in order; it builds the header, the records and the problems."""

    def __init__(self, path: str | None, *, keep_raw: bool = False, first_line: int = 1) -> None:
        self.path = path
        self.keep_raw = keep_raw
        self.lineno = first_line - 1
        self.header: dict[str, Any] | None = None
        self.header_line = 0
        self.records: list[Record] = []
        self.problems: list[Problem] = []
        self.tail: Literal["clean", "unterminated", "torn"] = "clean"
        self.tail_offset = 0  # where the unterminated or torn last line starts
        self.ends_with_newline = True
        self._first_nonblank = 0
        self._pre_header: list[tuple[int, str]] = []

    def start_after_header(self, header: dict[str, Any], header_line: int) -> None:
        """Continue a scan whose header was read before (appended bytes of a known file)."""
        self.header = header
        self.header_line = header_line

    def feed(self, line: memoryview, offset: int, terminated: bool) -> None:
        self.lineno += 1
        self.ends_with_newline = terminated
        if offset == 0 and line[:3] == _BOM:
            line = line[3:]
            offset = 3
        if _is_blank(line):
            return
        length = len(line)
        if line[length - 1] == 0x0D:  # CRLF: the \r is JSON whitespace, never part of a kept line
            length -= 1
            line = line[:length]
        self.tail = "clean" if terminated else "unterminated"
        self.tail_offset = offset
        if self.header is None:
            self._feed_before_header(line, terminated)
            return
        record = self._entry(line, offset, length, terminated)
        if record is not None:
            self.records.append(record)

    def entry_record(self, line: bytes, offset: int) -> Record | None:
        """The record of one complete entry line written at ``offset`` (an append)."""
        self.lineno += 1
        return self._entry(memoryview(line), offset, len(line), True)

    def _entry(self, line: memoryview, offset: int, length: int, terminated: bool) -> Record | None:
        try:
            env = _envelope_decoder.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return self._entry_slow(line, offset, length, terminated)
        if env.type == "session":
            return None  # pi's duplicate header quirk: ignored, not reported
        role = env.message.role if env.message is not None else None
        return self._record(env.type, env.id, env.parent_id, env.timestamp, offset, length, role,
                            env.custom_type, self._extra(env.type, env.target_id, env.label, env.name),
                            line)

    @staticmethod
    def _extra(type_: str, target_id: Any, label: Any, name: Any) -> Any:
        if type_ == "label":
            return (target_id if isinstance(target_id, str) else None,
                    label if isinstance(label, str) and label else None)
        if type_ == "session_info":
            return name.strip() if isinstance(name, str) else None
        return None

    def _record(self, type_: str, id_: str, parent: str | None, timestamp: str | None, offset: int,
                length: int, role: Any, custom_type: str | None, extra: Any,
                line: memoryview) -> Record:
        return Record(
            id_, parent, type_, timestamp, self.lineno, offset, length,
            role if isinstance(role, str) else None, custom_type, extra,
            bytes(line) if self.keep_raw else None,
        )

    def _entry_slow(self, line: memoryview, offset: int, length: int,
                    terminated: bool) -> Record | None:
        """Lines the envelope decoder rejects: lone surrogates, odd field types, or not JSON at all."""
        try:
            value = _json.loads(line)
        except ValueError as exc:
            if terminated:
                self._problem("corrupt", f"not valid JSON: {exc}")
            else:
                self.tail = "torn"
                self._problem("torn", f"unterminated last line does not parse: {exc}")
            return None
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            self._problem("corrupt", f"not an entry object with a string type: {_preview(line)}")
            return None
        if value["type"] == "session":
            return None
        if not isinstance(value.get("id"), str):
            self._problem("corrupt", f"{value['type']} entry without a string id")
            return None
        parent = value.get("parentId")
        if parent is not None and not isinstance(parent, str):
            self._problem("orphan", f"parentId {_json.dumps(parent).decode()} is not an id",
                          value["id"])
            parent = None
        timestamp = value.get("timestamp")
        message = value.get("message")
        role = message.get("role") if isinstance(message, dict) else None
        custom_type = value.get("customType")
        return self._record(value["type"], value["id"], parent,
                  timestamp if isinstance(timestamp, str) else None, offset, length, role,
                  custom_type if isinstance(custom_type, str) else None,
                  self._extra(value["type"], value.get("targetId"), value.get("label"),
                              value.get("name")),
                  line)

    def _feed_before_header(self, line: memoryview, terminated: bool) -> None:
        if not self._first_nonblank:
            self._first_nonblank = self.lineno
        try:
            value = _json.loads(line)
        except ValueError as exc:
            self._pre_header.append((self.lineno, f"not valid JSON: {exc}"))
            if not terminated:
                self.tail = "torn"
            return
        if not (isinstance(value, dict) and value.get("type") == "session"
                and isinstance(value.get("id"), str)):
            raise CorruptHeader(
                "the first line that parses is not a session header "
                '({"type":"session","id":...}); the file was left untouched',
                path=self.path, lineno=self._first_nonblank,
            )
        self.header = value
        self.header_line = self.lineno
        for lineno, reason in self._pre_header:
            self.problems.append(Problem(lineno, "corrupt", reason))
        self._pre_header.clear()

    def finish(self) -> None:
        """Call after the last line: a file with content but no header is an error."""
        if self.header is None and self._first_nonblank:
            raise CorruptHeader(
                "no line parses as a session header; the file was left untouched",
                path=self.path, lineno=self._first_nonblank,
            )

    def _problem(self, kind: ProblemKind, reason: str, entry_id: str | None = None) -> None:
        self.problems.append(Problem(self.lineno, kind, reason, entry_id))


def _preview(line: memoryview, limit: int = 60) -> str:
    text = bytes(line[:limit]).decode("utf-8", "replace")
    return text + ("..." if len(line) > limit else "")


def read_at(fd: int, offset: int, length: int) -> bytes:
    """The bytes of one line, read without moving any file position."""
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise OSError(f"short read at offset {offset}: the file changed underneath")
    return data
