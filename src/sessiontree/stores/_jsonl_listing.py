"""Listing a folder of JSONL sessions as pi's ``SessionManager.list`` does, fast, with a cache.

Invariants (FORMAT.md section 13, "Listing"):
* A row is what pi's ``buildSessionInfo`` computes from the file (pi's rules exactly, which
  :class:`sessiontree._listing.ListingStats` follows for stores that keep rows as they append): name = the latest
  ``session_info`` (trimmed), message count = every ``message`` line, first message = the first
  user message with text, modified = the latest user or assistant message time (else the
  header's time, else the file's mtime). Lines that do not parse are skipped as pi skips them;
  a file whose first parsed line is not a session header is not listed.
* Each file is read once and decoded in one call when it is clean (every line parses); only
  then, or for a file with odd lines, line by line. Message contents are not decoded, except
  the user messages read until the first one with text.
* The index (``.sessiontree-index`` in the folder, 0600, replaced atomically) is a cache, never
  a source: a row is reused only while its file has the same size, mtime and inode; an index
  that is missing, stale, of another version or corrupt is rebuilt silently, and a folder that
  cannot be written is listed without one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from .. import _fs, _json
from .._listing import message_text
from .._time import iso_to_ms
from .._tree import js_trim
from .base import SessionListing

__all__ = ["INDEX_NAME", "list_folder", "most_recent_session", "read_listing", "summarize"]

INDEX_NAME = ".sessiontree-index"
_INDEX_VERSION = 1


class _Message(msgspec.Struct):
    role: Any = UNSET
    content: msgspec.Raw = msgspec.Raw(b"")
    timestamp: Any = UNSET


class _Line(msgspec.Struct):
    """What a listing needs of one line (content kept as raw JSON)."""

    type: Any = UNSET
    id: Any = UNSET
    timestamp: Any = UNSET
    name: Any = UNSET
    message: _Message | None = None


class _Header(msgspec.Struct):
    type: Any = UNSET
    id: Any = UNSET
    timestamp: Any = UNSET
    cwd: Any = UNSET
    parentSession: Any = UNSET  # noqa: N815 - the on-disk name


_line_decoder = msgspec.json.Decoder(_Line)
_lines_decoder = msgspec.json.Decoder(list[_Line])
_header_decoder = msgspec.json.Decoder(_Header)


class _Summary:
    """pi's ``buildSessionInfo`` over decoded lines."""

    __slots__ = ("entry_count", "first", "messages", "modified", "name")

    def __init__(self, lines: Iterable[_Line]) -> None:
        lines = lines if isinstance(lines, list) else list(lines)
        self.entry_count = len({x.id for x in lines if type(x.id) is str and x.type != "session"})
        messages, first, name, modified = 0, "", None, None
        for line in lines:  # one loop, no call per line: listing a folder reads every line
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
                    when: float | None = stamp
                else:
                    when = iso_to_ms(line.timestamp)
                if when is not None and (modified is None or when > modified):
                    modified = when
                if not first and role == "user":
                    first = _text(message.content)
            elif kind == "session_info":
                name = (js_trim(line.name) or None) if isinstance(line.name, str) else None
        self.messages, self.first, self.name, self.modified = messages, first, name, modified


def _text(content: msgspec.Raw) -> str:
    """pi's ``extractTextContent``: a string as is, else its text blocks joined by a space."""
    return message_text({"content": _json.loads(content)})


def summarize(header: dict[str, Any], lines: Iterable[bytes | memoryview], path: str,
              mtime_ms: float, entry_count: int | None = None) -> SessionListing:
    """A listing row from a header and the entry lines after it (lines that do not parse are
    skipped, as pi skips them).

    Args:
        header: the session header (decoded).
        lines: the lines after the header, without line endings; blank ones are skipped.
        path: the ``path`` of the row.
        mtime_ms: the file's modification time, used when no other time is known.
        entry_count: the row's entry count (default: distinct entry ids among the lines).
    """
    summary = _Summary(item for item in map(_parse, lines) if item is not None)
    return _row(header, summary, path, mtime_ms, entry_count)


def _parse(line: bytes | memoryview) -> _Line | None:
    try:
        return _line_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass
    try:
        value = _json.loads(line)  # lone surrogates, invalid UTF-8: what JSON.parse accepts
    except ValueError:
        return None  # pi skips it
    if not isinstance(value, dict):
        return _Line()
    message = value.get("message")
    return _Line(type=value.get("type"), id=value.get("id"), timestamp=value.get("timestamp"),
                 name=value.get("name"), message=_Message(
                     role=message.get("role", UNSET), timestamp=message.get("timestamp", UNSET),
                     content=msgspec.Raw(_json.dumps(message["content"]))
                     if "content" in message else msgspec.Raw(b"")
                 ) if isinstance(message, dict) else None)


def _row(header: dict[str, Any], summary: _Summary, path: str, mtime_ms: float,
         entry_count: int | None) -> SessionListing:
    modified = summary.modified if summary.modified is not None and summary.modified > 0 else None
    source: Literal["message", "created", "file"] = "message"
    if modified is None:
        modified, source = iso_to_ms(header.get("timestamp")), "created"
    if modified is None:
        modified, source = mtime_ms, "file"
    cwd, parent, stamp = header.get("cwd"), header.get("parentSession"), header.get("timestamp")
    return SessionListing(
        path=path, id=str(header.get("id")), cwd=cwd if isinstance(cwd, str) else "",
        name=summary.name, parent_session=parent if isinstance(parent, str) and parent else None,
        created=stamp if isinstance(stamp, str) else "", modified_ms=int(modified),
        message_count=summary.messages,
        entry_count=summary.entry_count if entry_count is None else entry_count,
        first_message=summary.first or "(no messages)", modified_from=source,
    )


def read_listing(path: str | os.PathLike[str], st: os.stat_result | None = None
                 ) -> SessionListing | None:
    """Summarize one session file as pi's ``buildSessionInfo`` does; ``None`` when it has no
    session header or cannot be read."""
    location = os.path.abspath(path)
    try:
        fd = os.open(location, os.O_RDONLY)
        try:
            if st is None:
                st = os.fstat(fd)
            data = _read_all(fd, st.st_size)
        finally:
            os.close(fd)
    except OSError:
        return None
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    header: dict[str, Any] | None = None
    while start < len(data) and header is None:  # the first line that parses
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        line = data[start:end]
        start = end + 1
        if line.strip():
            try:
                value = _json.loads(line)
            except ValueError:
                continue
            if not isinstance(value, dict) or value.get("type") != "session" or \
                    not isinstance(value.get("id"), str):
                return None
            header = value
    if header is None:
        return None
    end = len(data)
    while end > start and data[end - 1] in b" \t\r\n":
        end -= 1
    decoded: list[_Line] = []
    if end > start:
        try:  # a clean file: every line in one decoder call (newlines become commas)
            decoded = _lines_decoder.decode(b"[" + data[start:end].replace(b"\n", b",") + b"]")
        except (msgspec.DecodeError, UnicodeDecodeError):
            decoded = [item for item in map(_parse, data[start:].split(b"\n")) if item is not None]
    return _row(header, _Summary(decoded), location, st.st_mtime_ns / 1e6, None)


def _read_all(fd: int, size: int) -> bytes:
    """The whole file (it may have grown since ``size`` was seen)."""
    parts = [os.read(fd, size + 1)]
    while len(parts[-1]) > 0 and sum(map(len, parts)) > size:
        more = os.read(fd, 1 << 20)
        if not more:
            break
        parts.append(more)
    return parts[0] if len(parts) == 1 else b"".join(parts)


# -- the folder and its index ------------------------------------------------------------------


class _Cached(msgspec.Struct, array_like=True):
    size: int
    mtime_ns: int
    inode: int
    row: SessionListing | None


class _Index(msgspec.Struct):
    version: int
    files: dict[str, _Cached]


_index_decoder = msgspec.msgpack.Decoder(_Index)
_index_encoder = msgspec.msgpack.Encoder()


def _load_index(folder: str) -> dict[str, _Cached]:
    try:
        with open(os.path.join(folder, INDEX_NAME), "rb") as stream:
            index = _index_decoder.decode(stream.read())
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return {}  # none yet, or corrupt: rebuilt below
    return index.files if index.version == _INDEX_VERSION else {}


def list_folder(folder: str | os.PathLike[str], *, cwd: str | None = None,
                index: bool = True) -> list[SessionListing]:
    """Every ``*.jsonl`` session in ``folder``, newest first (files without a header skipped).

    Args:
        folder: the folder (not searched recursively).
        cwd: only sessions whose header names this working directory.
        index: reuse and refresh the folder's index (rows of unchanged files are not read again).
    """
    location = os.path.abspath(folder)
    cached = _load_index(location) if index else {}
    fresh: dict[str, _Cached] = {}
    rows: list[SessionListing] = []
    with os.scandir(location) as entries:
        names = [e.name for e in entries if e.name.endswith(".jsonl")]
    changed = False
    for name in names:
        path = os.path.join(location, name)
        try:
            st = os.stat(path)
        except OSError:
            changed = True
            continue
        hit = cached.get(name)
        if hit is not None and hit.size == st.st_size and hit.mtime_ns == st.st_mtime_ns and \
                hit.inode == st.st_ino:
            row = hit.row
        else:
            row = read_listing(path, st)
            hit = _Cached(st.st_size, st.st_mtime_ns, st.st_ino, row)
            changed = True
        fresh[name] = hit
        if row is not None and (cwd is None or row.cwd == cwd):
            rows.append(row)
    if index and (changed or len(fresh) != len(cached)):
        _save_index(location, fresh)
    rows.sort(key=lambda row: row.modified_ms, reverse=True)
    return rows


def _save_index(folder: str, files: dict[str, _Cached]) -> None:
    try:
        _fs.atomic_write(os.path.join(folder, INDEX_NAME),
                         _index_encoder.encode(_Index(_INDEX_VERSION, files)), mode=0o600,
                         durable=False)
    except OSError:
        pass  # a folder we may not write to is listed without an index


def most_recent_session(folder: str | os.PathLike[str]) -> str | None:
    """pi's ``findMostRecentSession``: among the ``*.jsonl`` files whose first line, read from
    the first 512 bytes only, is a session header, the one modified last (to the millisecond,
    the first by name on a tie); ``None`` if none."""
    location = os.path.abspath(folder)
    best: tuple[int, str] | None = None
    try:
        with os.scandir(location) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".jsonl"))
    except OSError:
        return None
    for name in names:
        path = os.path.join(location, name)
        try:
            with open(path, "rb") as stream:
                head = stream.read(512)
                mtime = os.fstat(stream.fileno()).st_mtime_ns // 1_000_000
            first = head.decode("utf-8", "replace").split("\n", 1)[0]
            header = _header_decoder.decode(first.encode())
        except (OSError, msgspec.DecodeError, UnicodeEncodeError):
            continue
        if header.type == "session" and isinstance(header.id, str) and \
                (best is None or mtime > best[0]):
            best = (mtime, path)
    return best[1] if best is not None else None
