"""One pass over a session log's lines: the header, one envelope per entry, and the load report.

Invariants (format-spec.md section 18.1):
* Every physical line is counted (1-based), blank ones included; blank lines are skipped silently.
* The header is the first line that parses. Anything else before it that does not parse is
  reported as ``corrupt``; a header that is not ``{"type":"session","id":<str>}``, or a file in
  which no line parses, raises :class:`~sessiontree.errors.CorruptHeader`.
* Entry payloads are not decoded here: only the envelope (type, id, parentId, timestamp and the
  few fields labels, names and roles need) and the byte range of the line.
* An unterminated last line that does not parse is ``torn``; any other bad line is ``corrupt``.

Speed: the file is read into one buffer of ``CHUNK_SIZE`` bytes and the whole lines of each
read are decoded in place (a memoryview, no copy) by one call straight into :class:`Record`
objects, when each line is one object (:func:`_objects`); the records of a chunk are handed on
together (to columns that keep their fields, see :mod:`sessiontree._columns`). A chunk with a
line msgspec rejects (blank, corrupt, lone surrogates, odd field types) is decoded line by line,
and only such a line takes the careful path, which decides what it is and reports it.
"""

from __future__ import annotations

import gc
import io
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from operator import add, attrgetter, sub
from typing import IO, Any, Literal, Protocol

import msgspec

from . import _json
from .errors import CorruptHeader, CorruptLine

__all__ = [
    "FileRecord",
    "Problem",
    "ProblemKind",
    "Readable",
    "Record",
    "RecordSink",
    "ScanState",
    "Scanner",
    "envelope",
    "iter_blocks",
    "iter_lines",
    "message_envelope",
    "read_at",
    "read_ranges",
]

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


class _Role(msgspec.Struct, gc=False, frozen=True,
            rename={"has_content": "~sessiontree.has_content"}):
    role: Any = None
    has_content: bool = False
    """The message's top-level ``content`` is there and not ``null`` (known only for the
    lines a store's records were decoded from: :meth:`Scanner.entry_records`; ``False``: not
    known), so that a context need not look into the message for it."""


_NO_MESSAGE = _Role()
"""The ``message`` of a record whose line has none (its role is ``None``, as for ``null``)."""


class _MessageHead(_Role, gc=False, frozen=True):
    """A message's role and its ``content`` as stored (absent: empty), as a store's records are
    decoded; the record then keeps a shared :class:`_Role` holder."""

    content: msgspec.Raw = msgspec.Raw(b"")


_ENVELOPE_KEYS = {"parent_id": "parentId", "custom_type": "customType", "target_id": "targetId",
                  "line": "~sessiontree.line", "cached": "~sessiontree.cached"}


class Record(msgspec.Struct, gc=False, rename=_ENVELOPE_KEYS):
    """The envelope of one entry: enough to index it, without its payload.

    Decoded straight from the line (unknown keys skipped). ``line`` is the entry's 1-based line
    number in the session's JSONL form (the header is line 1); it is set by whoever reads the
    log and never read from JSON. A database log's records are plain :class:`Record` objects
    (their ``line`` is the append order); file logs add byte positions (:class:`FileRecord`).
    ``cached`` holds the entry's decoded forms while a session's bounded cache keeps them
    (:mod:`sessiontree._cache`).
    """

    type: str
    id: str
    parent_id: str | None = None
    timestamp: str | None = None
    message: _Role | None = _NO_MESSAGE
    custom_type: str | None = None
    target_id: str | None = None
    label: str | None = None
    name: str | None = None
    line: int = 0
    cached: Any = None

    @property
    def role(self) -> str | None:
        """The message role of a ``message`` entry."""
        role = self.message.role if self.message is not None else None
        return role if isinstance(role, str) else None

    @property
    def has_content(self) -> bool:
        """Whether the message is known to have a non-null top-level ``content`` (``False``:
        not known; see ``_Role.has_content``)."""
        message = self.message
        return message is not None and message.has_content


class FileRecord(Record, gc=False, rename={**_ENVELOPE_KEYS, "offset": "~sessiontree.offset",
                                            "length": "~sessiontree.length"}):
    """A :class:`Record` of a log kept as bytes: where its line starts and how long it is
    (without the line ending)."""

    offset: int = 0
    length: int = 0


class _StoredRecord(FileRecord, gc=False, rename={**_ENVELOPE_KEYS,
                                                  "offset": "~sessiontree.offset",
                                                  "length": "~sessiontree.length"}):
    """A :class:`FileRecord` as a store's lines are decoded (:meth:`Scanner.entry_records`):
    the message's ``content`` is looked at in the same pass."""

    message: _MessageHead | None = _NO_MESSAGE  # type: ignore[assignment]


_KINDS = {kind: kind for kind in (
    "message", "thinking_level_change", "model_change", "compaction", "branch_summary",
    "custom", "custom_message", "label", "session_info")}
"""The entry types pi writes, one string object each."""
_ROLES = {role: _Role(role) for role in (
    "user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary",
    "compactionSummary")}
"""One role holder per message role pi writes."""
_ROLES_WITH_CONTENT = {role: _Role(role, True) for role in _ROLES}
"""The holders of the messages a store's records know to have ``content``."""
_NULL = msgspec.Raw(b"null")


def message_envelope(entry_id: str, parent_id: str | None, timestamp: str,
                     role: str) -> FileRecord:
    """The record a ``message`` entry's line decodes to, made from its fields (its position
    is set where it is written: :meth:`Scanner.appended`); for a line that holds no other
    envelope field (the lines :func:`sessiontree._codec.message_line` composes)."""
    return FileRecord("message", entry_id, parent_id, timestamp, _ROLES.get(role) or _Role(role))


_record_decoder = msgspec.json.Decoder(FileRecord)
_get_type = attrgetter("type")
_envelope_decoder = msgspec.json.Decoder(Record)
_stored_decoder = msgspec.json.Decoder(_StoredRecord)
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"
CHUNK_SIZE = 256 << 10
"""How much a scan reads at a time: one buffer of this size is read into again and again (a
quarter of a core's L2 cache here: the bytes are still in it when each line is found and
decoded; 1 MiB chunks took 0.8 MiB more memory and no less time)."""


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic objects."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _objects(buf: bytearray, starts: list[int], hi: int) -> list[FileRecord] | None:
    """The records of the lines that start at ``starts`` in ``buf`` (the last one's ``\\n``
    at ``hi - 1``), decoded by one call over them all; ``None`` unless each line is exactly
    one record.

    ``decode_lines`` reads values separated by any JSON whitespace, so it alone cannot tell a
    line from a value: here every line must start with ``{`` and end with ``}`` (no ``\\r``:
    the caller sends those regions elsewhere), and there must be one value a line. Then no
    value spans two lines (a value still open after a ``}`` cannot go on with ``{``, and a
    JSON string holds no raw newline), so each line is one value and the answers are those of
    decoding each line alone.
    """
    count = len(starts)
    item = buf.__getitem__
    if bytes(map(item, starts)).count(0x7B) != count:
        return None
    # the last byte of line i - 1 is at starts[i] - 2 (before its \n)
    if bytes(map(item, map(sub, starts[1:], repeat(2)))).count(0x7D) != count - 1 or \
            buf[hi - 2] != 0x7D:
        return None
    try:
        records: list[FileRecord] = _record_decoder.decode_lines(memoryview(buf)[starts[0]:hi])
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    return records if len(records) == count else None


def iter_blocks(stream: IO[bytes], start: int = 0,
                chunk_size: int = CHUNK_SIZE) -> Iterator[tuple[bytes, int]]:
    """Yield ``(block, offset)``: runs of whole lines, each block ending with ``\\n``, except a
    last block holding an unterminated final line. Memory stays bounded by the chunk size and
    the longest line."""
    stream.seek(start)
    pending = b""
    base = start
    while True:
        chunk = stream.read(chunk_size)
        if not chunk:
            break
        data = pending + chunk if pending else chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            yield data[:cut], base
            base += cut
        pending = data[cut:]
    if pending:
        yield pending, base


def iter_lines(stream: IO[bytes], start: int = 0,
               chunk_size: int = CHUNK_SIZE) -> Iterator[tuple[memoryview, int, bool]]:
    """Yield ``(line, offset, terminated)`` for every physical line from ``start`` on."""
    for block, base in iter_blocks(stream, start, chunk_size):
        yield from _split(block, base)


def _split(block: bytes, base: int) -> Iterator[tuple[memoryview, int, bool]]:
    view = memoryview(block)
    pos, find = 0, block.find
    while True:
        nl = find(b"\n", pos)
        if nl < 0:
            break
        yield view[pos:nl], base + pos, True
        pos = nl + 1
    if pos < len(block):
        yield view[pos:], base + pos, False


def _is_blank(line: memoryview) -> bool:
    return not line or (line[0] != 0x7B and not bytes(line).strip(_WHITESPACE))


class ColumnSink(Protocol):
    """Records kept by column (:class:`~sessiontree._columns.Columns`)."""

    def append(self, record: FileRecord, /) -> None: ...
    def extend(self, records: list[FileRecord], /) -> None: ...
    def add_scanned(self, records: list[FileRecord], lines: Sequence[int], offsets: list[int],
                    lengths: list[int]) -> None: ...


RecordSink = list[FileRecord] | ColumnSink
"""Where a scanner puts the records it makes."""

Readable = io.RawIOBase | io.BufferedIOBase
"""What a scanner reads from (``readinto``): a file opened unbuffered, or a ``BytesIO``."""


class ScanState(msgspec.Struct, array_like=True):
    """Where a :class:`Scanner` stands after the bytes it read (not its records): enough to
    go on scanning from ``end`` in another process or another time."""

    header: dict[str, Any] | None
    header_line: int
    lineno: int
    problems: list[Problem]
    tail: Literal["clean", "unterminated", "torn"]
    tail_offset: int
    ends_with_newline: bool
    last_offset: int
    end: int


class Scanner:
    """Feed it a log's bytes in order; it builds the header, the records and the problems."""

    def __init__(self, path: str | None, records: RecordSink | None = None) -> None:
        """Args:
            path: the file, for error messages.
            records: where the entries' records go (a list by default; a session's index
                uses :class:`~sessiontree._columns.Columns`).
        """
        self.path = path
        self.lineno = 0
        self.header: dict[str, Any] | None = None
        self.header_line = 0
        self.records: RecordSink = [] if records is None else records
        self.last_offset = -1  # where the last line kept as a record starts
        self.problems: list[Problem] = []
        self.tail: Literal["clean", "unterminated", "torn"] = "clean"
        self.tail_offset = 0  # where the unterminated or torn last line starts
        self.ends_with_newline = True
        self.end = 0  # the byte after the last one scan() read
        self._first_nonblank = 0
        self._pre_header: list[tuple[int, str]] = []

    def start_after_header(self, header: dict[str, Any], header_line: int) -> None:
        """Continue a log whose header was read (or written) already."""
        self.header = header
        self.header_line = header_line

    def mark(self) -> tuple[int, dict[str, Any] | None, int, int]:
        """What an append changes (line count, header, problems), for :meth:`back_to`."""
        return self.lineno, self.header, self.header_line, len(self.problems)

    def back_to(self, mark: tuple[int, dict[str, Any] | None, int, int]) -> None:
        """Undo an append that failed: stand where :meth:`mark` said."""
        self.lineno, self.header, self.header_line, problems = mark
        del self.problems[problems:]

    def state(self) -> ScanState:
        return ScanState(self.header, self.header_line, self.lineno, self.problems, self.tail,
                         self.tail_offset, self.ends_with_newline, self.last_offset, self.end)

    def resume(self, state: ScanState) -> None:
        """Stand where ``state`` says (its problems become this scanner's)."""
        self.header, self.header_line, self.lineno = state.header, state.header_line, state.lineno
        self.problems = state.problems
        self.tail, self.tail_offset = state.tail, state.tail_offset
        self.ends_with_newline, self.last_offset, self.end = (state.ends_with_newline,
                                                              state.last_offset, state.end)

    # -- whole blocks --------------------------------------------------------------------------

    def scan(self, stream: Readable, start: int = 0, chunk_size: int = CHUNK_SIZE,
             stop: int | None = None) -> None:
        """Scan ``stream`` from byte ``start`` (a line start) to its end, or to byte ``stop``
        (the start of a line).

        Lines are decoded straight out of one buffer (through memoryviews) that each read
        fills again: the file's bytes are copied once (by the read), no chunk is allocated per
        read, and the memory held is the buffer's (grown only for a line longer than it). The
        line a read cuts is moved to the buffer's start and finished by the next read.
        """
        stream.seek(start)
        base = start  # file offset of buf[0]
        buf = bytearray(chunk_size)  # one buffer, read into again and again
        view = memoryview(buf)
        have = 0  # buf[:have]: the start of a line not read to its end yet
        with no_gc():
            while stop is None or base + have < stop:
                if have == len(buf):  # a line longer than the buffer
                    buf = bytearray(2 * len(buf))
                    buf[:have] = view
                    view = memoryview(buf)
                want = len(buf) if stop is None else min(len(buf), stop - base)
                size = stream.readinto(view[have:want])
                if not size:
                    break
                end = have + size
                hi = buf.rfind(b"\n", have, end) + 1
                if not hi:
                    have = end
                    continue
                self._region(buf, hi, base)
                have = end - hi
                buf[:have] = view[hi:end] if have <= hi else bytes(view[hi:end])
                base += hi
            if have:
                self.feed(view[:have], base, False)
            base += have
        self.end = base

    def _region(self, buf: bytearray, hi: int, buf_base: int) -> None:
        """Scan the whole lines in ``buf[:hi]``; ``buf[i]`` is at file offset ``buf_base + i``."""
        view = memoryview(buf)
        find = buf.find
        pos = 0
        while self.header is None and pos < hi:
            nl = find(b"\n", pos, hi)
            self.feed(view[pos:nl], buf_base + pos, True)
            pos = nl + 1
        if pos >= hi:
            return
        if buf.find(b"\r", pos, hi) >= 0:  # CRLF line endings: the careful loop handles them
            self._lines(buf, pos, hi, buf_base)
            return
        starts: list[int] = []
        start = starts.append
        at = pos
        while at < hi:
            start(at)
            at = find(b"\n", at, hi) + 1
        records = _objects(buf, starts, hi)
        if records is None:  # some line is not one object alone: decoded one by one
            self._each(buf, pos, hi, buf_base)
        else:
            self._keep_run(records, starts, hi, buf_base)
        self.tail = "clean"
        self.ends_with_newline = True

    def _each(self, buf: bytearray, pos: int, hi: int, buf_base: int) -> None:
        """:meth:`_region`'s lines decoded one at a time, for a region some of whose lines
        the envelope decoder rejects (blank, corrupt, nested too deep or unusual): those take
        the careful path (:meth:`feed`)."""
        view, find = memoryview(buf), buf.find
        decode = _record_decoder.decode
        records: list[FileRecord] = []
        starts: list[int] = []
        keep, start = records.append, starts.append
        while pos < hi:
            nl = find(b"\n", pos, hi)
            try:
                keep(decode(view[pos:nl]))
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                self._keep_run(records, starts, pos, buf_base)
                self.feed(view[pos:nl], buf_base + pos, True)
                records, starts = [], []
                keep, start = records.append, starts.append
                pos = nl + 1
                continue
            start(pos)
            pos = nl + 1
        self._keep_run(records, starts, hi, buf_base)

    def _keep_run(self, records: list[FileRecord], starts: list[int], stop: int,
                  buf_base: int) -> None:
        """Keep the records of consecutive lines starting at ``starts`` (positions in the
        buffer at file offset ``buf_base``), the last line ending before ``stop``."""
        if not records:
            return
        first = self.lineno + 1
        self.lineno += len(records)
        lengths = list(map(sub, starts[1:], starts))
        lengths.append(stop - starts[-1])
        lengths = list(map(sub, lengths, repeat(1)))  # without the line ending
        offsets = list(map(add, starts, repeat(buf_base)))
        if "session" in map(_get_type, records):  # pi's duplicate header quirk: ignored
            kept = [i for i, r in enumerate(records) if r.type != "session"]
            records = [records[i] for i in kept]
            offsets = [offsets[i] for i in kept]
            lengths = [lengths[i] for i in kept]
            lines: Sequence[int] = [first + i for i in kept]
        else:
            lines = range(first, first + len(records))
        if not records:
            return
        self.last_offset = offsets[-1]
        sink = self.records
        if isinstance(sink, list):
            for record, line, offset, length in zip(records, lines, offsets, lengths):
                record.line, record.offset, record.length = line, offset, length
            sink.extend(records)
        else:
            sink.add_scanned(records, lines, offsets, lengths)

    def _lines(self, buf: bytearray, pos: int, hi: int, buf_base: int) -> None:
        """:meth:`_region` line by line, for regions with unusual lines."""
        view, find = memoryview(buf), buf.find
        decode = _record_decoder.decode
        batch: list[FileRecord] = []
        keep = batch.append
        lineno = self.lineno
        while pos < hi:
            nl = find(b"\n", pos, hi)
            lineno += 1
            end = nl - 1 if nl > pos and buf[nl - 1] == 0x0D else nl
            try:
                record = decode(view[pos:end])
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                # blank, corrupt, too deep or unusual: the careful path decides and reports
                self._keep(batch)
                batch = []
                keep = batch.append
                self.lineno = lineno - 1
                self.feed(view[pos:nl], buf_base + pos, True)
                lineno = self.lineno
                pos = nl + 1
                continue
            if record.type != "session":  # pi's duplicate header quirk: ignored, not reported
                record.line = lineno
                record.offset = buf_base + pos
                record.length = end - pos
                keep(record)
            pos = nl + 1
        self._keep(batch)
        self.lineno = lineno
        self.tail = "clean"
        self.ends_with_newline = True

    def _keep(self, batch: list[FileRecord]) -> None:
        if batch:
            self.records.extend(batch)
            self.last_offset = batch[-1].offset

    # -- single lines --------------------------------------------------------------------------

    def feed(self, line: memoryview, offset: int, terminated: bool) -> None:
        """Scan one physical line (without its ``\\n``) at byte ``offset``."""
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
        record = self._entry(line, offset, terminated)
        if record is not None:
            self.records.append(record)
            self.last_offset = offset

    def entry_record(self, line: bytes, offset: int) -> FileRecord:
        """The record of one entry line this library is appending at ``offset``."""
        self.lineno += 1
        record = self._entry(line, offset, True)
        if record is None:
            raise ValueError(f"not an entry line: {line[:80]!r}")
        return record

    def appended(self, lines: Sequence[bytes], envelopes: Sequence[FileRecord | None] | None,
                 offset: int, header_line: bytes | None = None) -> Sequence[FileRecord]:
        """The records of entry lines this library is appending, the first at byte ``offset``
        and each followed by one line ending: the envelope its writer made placed (what
        :meth:`entry_record` would decode; see ``SessionLog.write``), or the line decoded
        where it has none. A log without a header yet gets ``header_line`` first, at
        ``offset``. A line refused leaves the scanner as it was (so does the caller's log:
        it writes nothing).

        Raises:
            ValueError: a line that is not an entry, or no header for a log that has none.
        """
        if envelopes is not None and self.header is not None and None not in envelopes:
            # the usual append: records its writer made, placed (nothing here can fail)
            placed: Sequence[FileRecord] = envelopes  # type: ignore[assignment]
            lineno = self.lineno
            for line, record in zip(lines, placed):
                lineno += 1
                record.line, record.offset, record.length = lineno, offset, len(line)
                offset += len(line) + 1
            self.lineno = lineno
            return placed
        before = self.mark()
        try:
            if self.header is None:
                if header_line is None:
                    raise ValueError("the log has no header and none was given")
                self.lineno += 1
                self.start_after_header(_json.loads(header_line), self.lineno)
                offset += len(header_line) + 1
            if envelopes is None:
                envelopes = [None] * len(lines)
            records: list[FileRecord] = []
            for line, envelope in zip(lines, envelopes):
                if envelope is None:
                    records.append(self.entry_record(line, offset))
                else:
                    self.lineno += 1
                    envelope.line, envelope.offset, envelope.length = \
                        self.lineno, offset, len(line)
                    records.append(envelope)
                offset += len(line) + 1
        except BaseException:
            self.back_to(before)
            raise
        return records

    def entry_records(self, lines: Sequence[bytes], first: int) -> list[FileRecord]:
        """The records of consecutive entry lines a store holds (``first``: the first one's line
        number), decoded in one loop; a line the envelope decoder rejects goes the careful way
        (:meth:`entry_record`). A message's record says whether it has ``content``
        (:attr:`Record.has_content`): a context reads the message as stored without looking."""
        decode = _stored_decoder.decode
        records: list[FileRecord] = []
        keep = records.append
        for number, line in enumerate(lines, first):
            try:
                record: FileRecord = decode(line)
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                record = self.entry_record(line, 0)
            else:
                if record.type == "session":
                    record = self.entry_record(line, 0)  # refused: not an entry line
                else:
                    head: Any = record.message
                    if type(head) is _MessageHead:  # a shared holder, the content not kept
                        role, content = head.role, head.content
                        has = bool(content) and content != _NULL
                        shared = (_ROLES_WITH_CONTENT if has else _ROLES).get(role) \
                            if type(role) is str else None
                        record.message = shared or _Role(role, has)
            record.line = number
            record.length = len(line)
            keep(record)
        return records

    def _entry(self, line: memoryview | bytes, offset: int, terminated: bool) -> FileRecord | None:
        try:
            record = _record_decoder.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            slow = self._entry_slow(memoryview(line), terminated)
            if slow is None:
                return None
            record = slow
        kind = record.type
        if kind == "session":
            return None  # pi's duplicate header quirk: ignored, not reported
        # shared type strings and role holders: a quarter less memory
        record.type = _KINDS.get(kind, kind)
        message = record.message
        if message is not None and type(message.role) is str:
            record.message = _ROLES.get(message.role, message)
        record.line = self.lineno
        record.offset = offset
        record.length = len(line)
        return record

    def _entry_slow(self, line: memoryview, terminated: bool) -> FileRecord | None:
        """Lines the envelope decoder rejects: lone surrogates, odd field types, or not JSON."""
        try:
            value = _json.loads(line)
        except _json.NestedTooDeep as exc:
            raise self._too_deep(exc) from None
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
        if not isinstance(value.get("id"), str):
            if value["type"] == "session":
                return None
            self._problem("corrupt", f"{value['type']} entry without a string id")
            return None
        parent = value.get("parentId")
        if parent is not None and not isinstance(parent, str):
            self._problem("orphan", f"parentId {_json.dumps(parent).decode()} is not an id",
                          value["id"])
            parent = None
        message = value.get("message")

        def text(key: str) -> str | None:
            found = value.get(key)
            return found if isinstance(found, str) else None

        return FileRecord(
            type=value["type"], id=value["id"], parent_id=parent, timestamp=text("timestamp"),
            message=_Role(message.get("role")) if isinstance(message, dict) else None,
            custom_type=text("customType"), target_id=text("targetId"), label=text("label"),
            name=text("name"),
        )

    def _feed_before_header(self, line: memoryview, terminated: bool) -> None:
        if not self._first_nonblank:
            self._first_nonblank = self.lineno
        try:
            value = _json.loads(line)
        except _json.NestedTooDeep as exc:
            raise self._too_deep(exc) from None
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

    def _too_deep(self, exc: ValueError) -> CorruptLine:
        """A line pi reads (JSON.parse does not recurse) that this library cannot: the whole
        file is refused rather than read without it."""
        return CorruptLine(f"{exc}; pi reads it, sessiontree cannot, so nothing of this file "
                           "was read", kind="corrupt", path=self.path, lineno=self.lineno)

    def _problem(self, kind: ProblemKind, reason: str, entry_id: str | None = None) -> None:
        self.problems.append(Problem(self.lineno, kind, reason, entry_id))


def envelope(line: bytes) -> Record | None:
    """The envelope of one entry line, or ``None`` for a line that is not an entry (not JSON,
    no string ``type`` and ``id``, or a duplicate header)."""
    try:
        record = _envelope_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        scanner = Scanner(None)
        scanner.header = {}
        slow = scanner._entry_slow(memoryview(line), True)
        if slow is None:
            return None
        record = Record(**{f: getattr(slow, f) for f in Record.__struct_fields__})
    return None if record.type == "session" else record


def _preview(line: memoryview, limit: int = 60) -> str:
    text = bytes(line[:limit]).decode("utf-8", "replace")
    return text + ("..." if len(line) > limit else "")


GAP = 64 << 10
SPAN = 4 << 20


def read_ranges(fd: int, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """The bytes of many ``(offset, length)`` ranges, in the order given. Ranges less than
    ``GAP`` bytes apart are read with one ``pread`` of at most ``SPAN`` bytes (or one line)."""
    out = [b""] * len(ranges)
    order = sorted(range(len(ranges)), key=ranges.__getitem__)
    i, count = 0, len(order)
    while i < count:
        start, length = ranges[order[i]]
        end = start + length
        j = i + 1
        while j < count:
            offset, length = ranges[order[j]]
            if offset - end > GAP or offset + length - start > SPAN:
                break
            end = max(end, offset + length)
            j += 1
        block = read_at(fd, start, end - start)
        for k in order[i:j]:
            offset, length = ranges[k]
            out[k] = block[offset - start:offset - start + length]
        i = j
    return out


def read_at(fd: int, offset: int, length: int) -> bytes:
    """The bytes of one line, read without moving any file position."""
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise OSError(f"short read at offset {offset}: the file changed underneath")
    return data
