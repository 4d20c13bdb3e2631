"""``TreeLog``: a session's log read into its tree, the part of a session the stores share.

A store appends and reads a session through it (ids and parents checked, lines written once,
entries decoded on demand), and :class:`~sessiontree.session.Session` is one with the facade's
API on top. It knows logs, lines and the tree index; it knows nothing of contexts, hooks or
operations.

Invariants:
* Entries are indexed by envelope only; a payload is decoded when asked for, so loading costs
  one pass over the log and reading an entry costs one line.
* A line once written is never re-serialized: copies reuse its bytes.
* On load the leaf is the last entry in file order (pi's rule).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import msgspec

from . import _json
from ._cache import DEFAULT_CACHE_BYTES, Decoded, DecodedCache
from ._codec import (
    decode_line,
    entries_decoder,
    entry_builtins,
    entry_line,
    held,
    message_line,
    ordered_entry,
    typed_header,
)
from ._index import EntryIndex, LazyIndex
from ._scan import FileRecord, Problem, Record, message_envelope
from ._time import Either, iso_now, uuid7
from ._tree import TreeIndex
from .entries import AnyEntry, Custom, SessionHeader
from .errors import CorruptLine, DuplicateId, EntryNotFound, InvalidEntry
from .stores.base import (
    LoadResult,
    LogBehind,
    SessionListing,
    SessionLog,
    is_indexed,
    is_refreshable,
)

__all__ = ["EntryMaker", "LoadWarning", "TreeLog", "current_branch", "entry_maker"]

T = TypeVar("T", bound="TreeLog")


class LoadWarning(UserWarning):
    """Opening a session found bad lines; they are listed in ``Session.problems``."""


class _MessageOnly(msgspec.Struct):
    message: msgspec.Raw = msgspec.Raw(b"")


_message_only_decoder = msgspec.json.Decoder(_MessageOnly)


class TreeLog:
    """A session's log with its tree index and its cache of decoded lines.

    Use it as a context manager (or call :meth:`close`) to release the log.
    """

    _init_frames: ClassVar[int] = 0
    """Frames between the caller and :meth:`__init__` (a subclass's own ``__init__``), so that a
    load warning points at the caller."""

    def __init__(self, log: SessionLog, *, header: SessionHeader | None = None,
                 strict: bool = False, warn: bool = True,
                 cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        """Read an already-migrated log (a database's only as far as asked for)."""
        self._log = log
        self._refresh = log.refresh if is_refreshable(log) else None
        self._cache = DecodedCache(cache_bytes)
        self._index: EntryIndex
        problems: list[Problem] = []
        if is_indexed(log):  # a database: nothing is loaded until asked for
            head = log.head()
            self._header_data = head.header
            self._index = LazyIndex(log, head)
        else:
            result = log.load()
            self._header_data = result.header
            problems = list(result.problems)
            self._index = TreeIndex(result.records, problems)
            problems.sort(key=lambda p: (p.line, p.kind))
        self._header = header if self._header_data is None else typed_header(self._header_data)
        self._problems = problems
        last = self._index.last()
        self._leaf: str | None = last.id if last is not None else None
        if problems:
            first = problems[0]
            if strict:
                log.close()
                raise CorruptLine(f"{first.kind}: {first.reason}", kind=first.kind,
                                  path=log.location, lineno=first.line, entry_id=first.entry_id)
            if warn:
                shown = "; ".join(p.describe() for p in problems[:3])
                more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
                warnings.warn(LoadWarning(
                    f"{log.location or 'session'}: {len(problems)} problem(s): {shown}{more}"
                ), stacklevel=3 + self._init_frames)

    def close(self) -> None:
        """Release the log. It cannot be read or appended to afterwards."""
        self._cache.clear()
        self._log.close()

    def _paths_changed(self) -> None:
        """Another writer's entries changed the tree: forget what was derived from paths."""

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def header(self) -> SessionHeader:
        """The session header (what the first line holds, or will hold once written)."""
        if self._header is None:
            self._header = SessionHeader(id=uuid7(), timestamp=iso_now(), cwd=os.getcwd())
        return self._header

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def cwd(self) -> str:
        return self.header.cwd

    @property
    def file(self) -> str | None:
        """The session file's path (it may not exist yet), or ``None`` in memory."""
        return self._log.location

    @property
    def url(self) -> str | None:
        """Where the session lives: its file's path, a database address such as
        ``sqlite:///x.db#<id>``, or ``None`` in memory."""
        url: str | None = getattr(self._log, "url", None)  # a store's log has an address
        return url if url is not None else self._log.location

    @property
    def log(self) -> SessionLog:
        """The log the session reads and appends through (a file, memory, or a store's log), for
        what is asked of where the session lives: its store, whether it is read-only. Append
        through the session, never the log, or the session's tree no longer matches it."""
        return self._log

    @property
    def stored_header(self) -> dict[str, Any] | None:
        """The header line as stored, keys this version does not know kept (:attr:`header`
        is its typed form); ``None`` before the first write."""
        return self._header_data

    @property
    def problems(self) -> list[Problem]:
        """The load report: every skipped, repaired or re-rooted line, sorted by line.

        (A database session checks its entries as they are written; what its tree reports,
        orphans copied from a file for instance, is known once the whole tree is loaded.)
        """
        if isinstance(self._index, LazyIndex):
            self._index.full()
            return self._problems + self._index.problems
        return list(self._problems)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._index

    @property
    def leaf_id(self) -> str | None:
        """Where the next append goes; ``None`` before the first entry (a new root)."""
        return self._leaf

    @property
    def last_id(self) -> str | None:
        """The last entry in stored order, the leaf pi takes on reload; ``None`` when empty."""
        last = self._index.last()
        return last.id if last is not None else None

    def role(self, entry_id: str) -> str | None:
        """The message role of a ``message`` entry, from its envelope (the payload is not
        decoded); ``None`` for an entry of another type.

        Raises:
            EntryNotFound: no such entry.
        """
        return self._record(entry_id).role

    @property
    def name(self) -> str | None:
        """The session name: the latest ``session_info`` on any branch, trimmed; None if cleared."""
        return self._index.name

    def _record(self, entry_id: str) -> Record:
        record = self._index.get(entry_id)
        if record is None:
            raise EntryNotFound(f"no entry {entry_id!r} in this session", path=self.url,
                                entry_id=entry_id)
        return record

    def _raw(self, record: Record) -> bytes:
        return self._log.read(record)

    def _read_many(self, records: Sequence[Record]) -> list[bytes]:
        read_many = getattr(self._log, "read_many", None)
        if read_many is not None:
            return read_many(records)  # type: ignore[no-any-return]
        return [self._log.read(r) for r in records]

    def _loaded(self, record: Record, field: str) -> Decoded:
        """The record's cache slot with ``field`` filled (its line read and decoded if not)."""
        slot: Decoded | None = record.cached
        if slot is None or getattr(slot, field) is None:
            raw = self._log.read(record)
            if slot is None:
                slot = self._cache.admit(record, len(raw))
            _FILL[field](slot, raw)
        return slot

    def _load_many(self, records: Sequence[Record], field: str) -> None:
        """Fill ``field`` for many records, the lines not cached yet read together."""
        missing = [r for r in records if r.cached is None or getattr(r.cached, field) is None]
        if len(missing) > 1:
            raws = self._read_many(missing)
            if all(record.cached is None for record in missing):  # read from cold
                slots = self._cache.admit_many(missing, map(len, raws))
            else:
                admit = self._cache.admit
                slots = [record.cached if record.cached is not None else admit(record, len(raw))
                         for record, raw in zip(missing, raws)]
            if field == "entry":  # one decoder call for them all (each line is one JSON value)
                try:
                    entries = entries_decoder().decode(b"[" + b",".join(raws) + b"]")
                except (msgspec.DecodeError, UnicodeDecodeError):
                    pass  # an unknown type or an odd line among them: one at a time
                else:
                    for slot, entry in zip(slots, entries):
                        slot.entry = entry
                    return
            elif field == "message":  # _fill_message's loop, without two calls a line
                decode = _message_only_decoder.decode
                for slot, raw in zip(slots, raws):
                    try:
                        slot.message = decode(raw).message or False
                    except (msgspec.DecodeError, UnicodeDecodeError):
                        _fill_message(slot, raw)
                return
            fill = _FILL[field]
            for slot, raw in zip(slots, raws):
                fill(slot, raw)

    def _decode(self, record: Record) -> AnyEntry:
        return self._loaded(record, "entry").entry  # type: ignore[no-any-return]

    def _decode_all(self, records: Sequence[Record]) -> list[AnyEntry]:
        """Typed entries of many records, the uncached lines read together."""
        try:
            found: list[Any] = [r.cached.entry for r in records]  # all cached: the usual case
            if None not in found:
                return found
        except AttributeError:  # a record without a slot
            pass
        self._load_many(records, "entry")
        return [self._decode(r) for r in records]

    def _message_json(self, record: Record) -> dict[str, Any] | msgspec.Raw | None:
        """A message entry's ``message`` as its stored bytes, without decoding it."""
        message = self._loaded(record, "message").message
        return message if message is not False else None

    def _prefetch_messages(self, records: Sequence[Record]) -> None:
        """Read the uncached messages of these records together (a context built from cold)."""
        self._load_many([r for r in records if r.type == "message"], "message")

    def _data(self, record: Record) -> dict[str, Any]:
        return self._loaded(record, "data").data  # type: ignore[return-value]

    def _path_records(self, target: str) -> Sequence[Any]:
        """The root-to-``target`` path as the index gives it (rows, or a database's path).

        Raises:
            EntryNotFound: no such entry (a database's empty path: the entry is looked up
                only then, not a round trip before every path).
        """
        index = self._index
        if isinstance(index, TreeIndex):
            self._record(target)
            return index.row_path(target)
        path = index.path(target)
        if not path:
            self._record(target)
        return path

    def entry(self, entry_id: str) -> AnyEntry:
        """The typed entry with this id.

        Raises:
            EntryNotFound: no such entry.
        """
        return self._decode(self._record(entry_id))

    def raw_line(self, entry_id: str) -> bytes:
        """The entry's line exactly as stored (without its line ending)."""
        return self._raw(self._record(entry_id))

    def ids(self) -> list[str]:
        """Every indexed entry id, in file order (no payload decoded)."""
        return self._index.ids()

    def entries(self) -> Iterator[AnyEntry]:
        """Every indexed entry in file order, decoded one at a time."""
        records = self._index.records()
        for start in range(0, len(records), 256):
            yield from self._decode_all(records[start:start + 256])

    def custom_entries(self, prefix: str = "") -> Iterator[Custom]:
        """The ``custom`` entries whose ``customType`` starts with ``prefix``, in file order.

        Only those lines are decoded, so this is cheap on large sessions.
        """
        for record in self._index.records():
            if record.type == "custom" and (record.custom_type or "").startswith(prefix):
                entry = self._decode(record)
                if isinstance(entry, Custom):
                    yield entry

    def listing(self, path: str | None = None) -> SessionListing:
        """This session as a listing row (pi's ``SessionInfo``)."""
        if is_indexed(self._log):
            return self._log.listing()
        from ._listing import ListingLine, listing_line, row_of_lines
        from .stores._jsonl_listing import read_listing

        location = path or self.file or ""
        if self.file is not None:  # what pi's listing reads: the file
            row = read_listing(self.file, as_pi=False)
            if row is not None:
                return row if path is None else msgspec.structs.replace(row, path=location)
        header = self.header
        lines = getattr(self._log, "lines", ())  # a memory log's lines, its header first
        parsed = [line for line in map(listing_line, lines) if line is not None]
        parsed = parsed[next((i + 1 for i, line in enumerate(parsed) if line.type == "session"),
                             0):]
        first = ListingLine(type="session", id=header.id, cwd=header.cwd,
                            timestamp=header.timestamp,
                            parentSession=header.parent_session or None)
        return row_of_lines(first, parsed, location, None)

    def _integrate(self, fresh: LoadResult | None) -> None:
        """Index what another writer appended (format-spec.md 18.5); our leaf stays where it is."""
        if fresh is None:
            return
        if self._header_data is None and fresh.header is not None:
            self._header_data = fresh.header
            self._header = typed_header(fresh.header)
        problems = list(fresh.problems)
        known = {(p.line, p.kind) for p in self._problems}
        if fresh.records:
            self._paths_changed()  # a duplicate id or a cycle may change existing paths
        self._index.extend(fresh.records, problems)
        self._problems.extend(p for p in problems if (p.line, p.kind) not in known)
        self._problems.sort(key=lambda p: (p.line, p.kind))

    def refresh(self) -> list[str]:
        """Read in what other writers (other handles on this session, other processes) appended
        since this one last looked, without taking the writer's lock; when anything came, the
        leaf moves to the last stored entry, as a reopened session's would (pi's rule).

        Returns:
            The new entries' ids, in stored order (``[]``: nothing new, or a log that cannot
            tell, as a memory log).
        """
        refresh = self._refresh
        if refresh is None:
            return []
        fresh = refresh()
        if fresh is None:
            return []
        self._integrate(fresh)
        if fresh.records:
            last = self._index.last()
            self._leaf = last.id if last is not None else None
        return [record.id for record in fresh.records]

    def release(self) -> None:
        """Let other writers append (a file's writer lock, kept from the first append until
        :meth:`close`, is given up; the next append takes it again and reads their lines in).
        Nothing for logs without a session-long lock."""
        release = getattr(self._log, "release", None)
        if release is not None:
            release()

    def _serialized_header(self) -> bytes:
        return _json.dumps(self.header)

    def extend(self, entries: Iterable[Mapping[str, Any] | AnyEntry]) -> list[str]:
        """Append entries as they are, ids and parents kept (copying between stores).

        Each id must be new and each ``parentId`` must name an entry already in the session
        (or be null); the leaf becomes the last entry.

        Raises:
            InvalidEntry: a duplicate id, a missing parent, or no type.
        """
        items = [dict(e) if isinstance(e, Mapping) else entry_builtins(e) for e in entries]
        while True:
            try:
                records = self._extend_once(items)
                break
            except LogBehind:  # others appended first: their lines are read, check again
                continue
        for record in records:
            self._index.add(record)
        if records:
            self._leaf = records[-1].id
        return [r.id for r in records]

    def _extend_once(self, items: list[dict[str, Any]]) -> Sequence[Record]:
        """One try of :meth:`extend`: the written records.

        Raises:
            LogBehind: the log refused the lines (see :class:`~.stores.base.LogBehind`).
        """
        fresh = self._log.begin_append()
        try:
            self._integrate(fresh)
            known: set[str] = set()
            check_stored = not isinstance(self._index, LazyIndex)  # a database checks itself
            for item in items:
                kind, entry_id, parent = item.get("type"), item.get("id"), item.get("parentId")
                if not isinstance(kind, str) or not isinstance(entry_id, str):
                    raise InvalidEntry("every entry needs a string type and id")
                if kind == "session":  # a second header: readers skip it, so it is refused
                    raise InvalidEntry(f"{entry_id} has type session, which only the header "
                                       f"has", entry_id=entry_id)
                if entry_id in known or (check_stored and entry_id in self._index):
                    raise InvalidEntry(f"id {entry_id} is already in the session", entry_id=entry_id)
                if parent is not None and parent not in known and check_stored and \
                        parent not in self._index:
                    raise InvalidEntry(f"parent {parent} of {entry_id} is not in the session",
                                       entry_id=entry_id)
                known.add(entry_id)
            lines = [entry_line(item) for item in items]
            header = None if self._header_data is not None else self._serialized_header()
            records = self._log.write(lines, header) if lines else []
            if header is not None and lines:
                self._header_data = _json.loads(header)
        finally:
            self._log.end_append()
        return records

    def _append_message(self, body: bytes, role: str) -> str:
        """Write a ``message`` entry whose message's JSON is ``body`` (checked) as the leaf's
        child; it becomes the leaf. What most appends are, made in one go: the general way
        (:meth:`_append_chain`) only when the log refuses the line (a database already holding
        the id drawn, a log without a lock that others overtook)."""
        log = self._log
        try:
            fresh = log.begin_append()
            try:
                if fresh is not None:
                    self._integrate(fresh)
                parent = self._leaf
                entry_id = self._index.new_id()
                now = iso_now()
                header = None if self._header_data is not None else self._serialized_header()
                (record,) = log.write((message_line(entry_id, parent, now, body),), header,
                                      (message_envelope(entry_id, parent, now, role),))
                if header is not None:
                    self._header_data = _json.loads(header)
            finally:
                log.end_append()
        except (LogBehind, DuplicateId):
            return self._append(lambda i, p, t: (message_line(i, p, t, body),
                                                 message_envelope(i, p, t, role)))
        self._index.add(record)
        self._leaf = entry_id
        return entry_id

    def _append(self, make: Callable[[str, str | None, str], Any]) -> str:
        """Write the entry ``make`` makes as the leaf's child; it becomes the leaf."""
        (entry_id,) = self._append_chain(lambda: (self._leaf, [make]))
        return entry_id

    def _append_chain(self, plan: Callable[[], tuple[str | None, Sequence[EntryMaker]]]) -> list[str]:
        """Write the entries ``plan`` makes, each the child of the one before and the first
        under the parent it names, in one write under the writer's lock; ``plan`` runs under
        the lock, after other writers' entries were read in (a log without a lock refuses a
        write that others overtook, and ``plan`` runs again with their entries read in)."""
        refused: set[str] = set()
        while True:
            try:
                ids = self._append_once(plan, refused)
            except LogBehind:
                continue
            if ids is not None:
                return ids

    def _append_once(self, plan: Callable[[], tuple[str | None, Sequence[EntryMaker]]],
                     refused: set[str]) -> list[str] | None:
        """One try of :meth:`_append_chain`: the ids written, or ``None`` when the log held one
        of the ids drawn (added to ``refused``; the caller tries again). Each try is a write
        of its own (a database transaction: after a failed statement PostgreSQL refuses every
        other until a rollback, and the session's row is read again under its lock).

        Raises:
            LogBehind: the log refused the lines (see :class:`~.stores.base.LogBehind`).
            DuplicateId: the ids drawn kept being taken (5 tries per entry).
        """
        fresh = self._log.begin_append()
        records: Sequence[Any] = ()
        try:
            if fresh is not None:
                self._integrate(fresh)
            parent, makers = plan()
            if not makers:
                return []
            ids: list[str] = []
            lines: list[bytes] = []
            envelopes: list[FileRecord | None] = []
            above, now = parent, iso_now()
            for make in makers:
                entry_id = self._index.new_id(Either(refused, ids) if ids or refused else ())
                entry = make(entry_id, above, now)
                if type(entry) is tuple:  # its line and that line's record
                    lines.append(entry[0])
                    envelopes.append(entry[1])
                else:
                    lines.append(entry_line(entry))
                    envelopes.append(None)
                ids.append(entry_id)
                above = entry_id
            header = None if self._header_data is not None else self._serialized_header()
            try:
                records = self._log.write(lines, header, envelopes)
            except DuplicateId:  # stored by another writer, or on a branch not read in
                if len(refused) >= 5 * len(makers):
                    raise
                refused.update(ids)
                return None
            if header is not None:
                self._header_data = _json.loads(header)
        finally:
            self._log.end_append()
        add = self._index.add
        for record in records:
            add(record)
        self._leaf = ids[-1]
        return ids


def _fill_entry(slot: Decoded, raw: bytes) -> None:
    slot.entry = decode_line(raw)


def _fill_message(slot: Decoded, raw: bytes) -> None:
    slot.message = _message_of(raw)


def _fill_data(slot: Decoded, raw: bytes) -> None:
    data = _json.loads(raw)
    assert isinstance(data, dict)
    slot.data = data


_FILL: dict[str, Callable[[Decoded, bytes], None]] = {
    "entry": _fill_entry, "message": _fill_message, "data": _fill_data}


def _message_of(raw: bytes) -> dict[str, Any] | msgspec.Raw | bool:
    """A message entry's ``message``: raw JSON, a dict for unusual lines, ``False`` for none."""
    try:
        message = _message_only_decoder.decode(raw).message
        return message if message else False
    except (msgspec.DecodeError, UnicodeDecodeError):  # lone surrogates and the like
        decoded = _json.loads(raw).get("message")
        return decoded if isinstance(decoded, dict) else False


class _OpensLogs(Protocol):
    def open_log(self, session_id: str) -> SessionLog: ...


class _Addressed(Protocol):
    read_only: bool

    @property
    def url(self) -> str: ...


class StoredEntries:
    """``append`` and ``read`` of a store whose sessions open as logs: both go through a
    :class:`TreeLog` over ``open_log``, so a store's entries are checked and decoded as a
    session's are; and its repr."""

    def __repr__(self: _Addressed) -> str:
        """``<SqliteStore sqlite:///x.db read-only>``: the kind, the address (never a
        password) and whether writes are refused."""
        return f"<{type(self).__name__} {self.url}{' read-only' if self.read_only else ''}>"

    def append(self: _OpensLogs, session_id: str,
               entries: Sequence[AnyEntry | Mapping[str, Any]]) -> None:
        """Append entries as they are (typed entries or on-disk dicts; ids and parents kept);
        parents must be stored already or come earlier in ``entries``."""
        with TreeLog(self.open_log(session_id), warn=False) as tree:
            tree.extend(entries)

    def read(self: _OpensLogs, session_id: str) -> Iterator[AnyEntry]:
        """Every entry of a session in append order."""
        with TreeLog(self.open_log(session_id), warn=False) as tree:
            yield from tree.entries()


def current_branch(tree: TreeLog) -> set[str]:
    """The ids on the path from the root to the leaf of ``tree`` (where it resumes): what
    search reports of each hit."""
    leaf = tree.leaf_id
    return {record.id for record in tree._index.path(leaf)} if leaf is not None else set()


EntryMaker = Callable[[str, "str | None", str], Any]
"""Makes an entry from its id, parent id and timestamp: a typed entry or an on-disk dict, or
its line (bytes, as ``JSON.stringify`` writes it) with that line's record in a tuple (see
:meth:`~sessiontree.stores.base.SessionLog.write`)."""


def entry_maker(entry: Mapping[str, Any] | AnyEntry) -> EntryMaker:
    """What writes ``entry`` (typed or an on-disk dict) with a new id, parent and timestamp.

    Raises:
        InvalidEntry: no string ``type``, or ``session``; a value JSON cannot hold (a set,
            bytes, another object), named.
    """
    data = entry if isinstance(entry, Mapping) else entry_builtins(entry)
    kind = data.get("type")
    if not isinstance(kind, str) or not kind or kind == "session":
        raise InvalidEntry(f"an entry needs a string 'type' other than 'session', got {kind!r}")
    held(entry, "", f"{kind} entry")
    return lambda i, p, t: ordered_entry(kind, i, p, t, data)
