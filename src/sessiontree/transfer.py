"""Copying sessions between stores, byte for byte: one session or a whole store.

Invariants:
* Every line keeps its exact bytes: JSONL -> SQLite -> PostgreSQL -> JSONL gives back the same
  file (sources a copy would not reproduce are refused, see
  :class:`~sessiontree.errors.CopyRefused`).
* Each session is written whole or not at all (one transaction; a temporary file and a rename
  for JSONL), so a copy killed half-way leaves every session either complete or absent; but
  in Redis (a script per 500 lines, what was stored deleted again if the import fails) a
  process killed outright between two scripts leaves the first lines, which a copy run again
  completes (below).
* A session already at the destination with the same bytes is skipped, so an interrupted
  whole-store copy is finished by running it again, and copies running at once into one store
  each skip what another stored first. One there with the same header and a strict prefix of
  the lines is completed only in Redis (an import cut short: one script per 500 lines, and a
  writer killed between two leaves the first): the missing lines are appended, each script
  only if the session still holds exactly the lines read, the last the same; a session that
  changed meanwhile (a live agent appended) is other content. Elsewhere (one transaction, a
  rename: never cut) such a prefix is a real session: other content. One with other content
  is never touched, and nothing at the destination is ever deleted.
* A session file is read once (:func:`~sessiontree.stores.jsonl.session_bytes`): its listing
  check, its lines' check and its import are of the same bytes, one version of the file (one
  replaced meanwhile is never one's header with another's lines; one that changed during each
  of three reads is named). Every line is imported: a line that is no entry (a second session
  header, which pi ignores) has the file refused, as bad lines have.
* Nothing is skipped silently: a folder's every ``*.jsonl`` file (its project folders' too: a
  folder may be pi's sessions root) is copied, found already there, or named in
  ``CopyResult.failed`` with the reason (a file that is no session, one a copy would not
  reproduce, an id already at the destination with other bytes); the copy goes on with the
  others and then raises :class:`~sessiontree.errors.CopyIncomplete`.
* Into a folder, sessions land in pi's layout: a folder's sessions keep their project folder
  (relative to the source folder), a database's go to pi's ``--<cwd>--`` folder for their
  header's cwd, each file named ``<time>_<id>.jsonl``.
* A whole store's sessions are copied by several processes when the caller asks for them
  (:mod:`sessiontree._helpers`), each a share of the sessions, dealt out in turn, with its own
  connections; the result (copied, skipped, failed, in the source's order) is the one a
  single process gives. Not into SQLite: one writer at a time, whose other writers wait at
  most ``timeout`` (30 s) for the lock and then fail (``SessionLocked``), so the copy's own
  processes could stop it; measured, several processes copied no faster into it. Each
  process reads the files it copies (a folder is only listed and stat'ed first), so copying
  starts at once.
* The source is never written to.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import msgspec

from . import _helpers

from .errors import (
    CopyIncomplete,
    CopyRefused,
    CorruptHeader,
    CorruptLine,
    DuplicateId,
    InvalidEntry,
    InvalidLocation,
    SessionNotFound,
    UnsupportedVersion,
    WriteFailed,
)
from .stores.url import open_store, parse_location

__all__ = ["ANALYZE_AFTER", "CopyFailure", "CopyResult", "copy_sessions"]

_PER_SESSION = (CopyRefused, CorruptHeader, CorruptLine, InvalidEntry, InvalidLocation,
                SessionNotFound, UnsupportedVersion, OSError)
"""What leaves one session out of a whole-store copy (the others are still copied: a file of a
newer format version, say); anything else (the destination unreachable, read-only) stops the
copy, as does a database destination that does not open (opened once, before any session is
copied), or a file system that takes no more writes (:data:`_NO_MORE_WRITES`)."""

_NO_MORE_WRITES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""A full disk or quota, a read-only file system: no later session could be written either,
so the copy stops (run again once the cause is gone, it skips what it stored)."""


class CopyFailure(msgspec.Struct, frozen=True):
    """A session file or stored session a copy left out, and why."""

    source: str
    """The file, or ``<store URL>#<id>``."""
    reason: str


class CopyResult(msgspec.Struct, frozen=True):
    """What :func:`copy_sessions` did."""

    copied: list[str]
    """Ids of the sessions written to the destination."""
    skipped: list[str]
    """Ids already there with the same bytes."""
    destination: str
    failed: list[CopyFailure] = []
    """What could not be copied, each with the reason (then :func:`copy_sessions` raised
    :class:`~sessiontree.errors.CopyIncomplete` carrying this result)."""
    processes: int = 1
    """How many processes the sessions were dealt out to (this one and its helpers): fewer
    than asked for when CPUs were busy or the sessions few."""


class _Item(NamedTuple):
    """One session to copy: where it is (for people), how to read its lines, and the folder
    it goes to in a JSONL destination (``None``: pi's folder for its cwd)."""

    where: str
    read: Callable[[], tuple[bytes, list[bytes]]]
    folder: str | None


class _Outcome(NamedTuple):
    """What became of one session: ``copied`` or ``skipped`` (``name`` its id), or ``failed``
    (``name`` where it is, with the reason); what a helper process answers for each session
    of its share."""

    kind: str
    name: str
    reason: str = ""


class _Source:
    """The sessions a copy reads, each named by a key (a file's path, a stored session's id),
    so that a helper process given the location and its keys reads the same sessions."""

    def __init__(self, location: str) -> None:
        where = parse_location(location)
        self.store: Any = None
        self.root: str | None = None
        """A folder's absolute path: its files are the sessions."""
        self.one: str | None = where.session_id
        """The one session asked for (a file's path, a stored id), whose error is raised."""
        if where.kind == "jsonl":
            if os.path.isfile(where.store):
                self.one = where.store
            elif not os.path.isdir(where.store):
                raise SessionNotFound("no such session file or folder", path=where.store)
            else:
                self.root = os.path.abspath(where.store)
        else:
            self.store = open_store(location, read_only=True)

    def keys(self) -> list[str]:
        """Every session to copy: a folder's every ``*.jsonl`` file and its project folders'
        (a folder may be pi's sessions root), sorted, only stat'ed: each file is read by the
        process that copies it."""
        from .stores._jsonl_listing import session_files

        if self.one is not None:
            return [self.one]
        if self.root is not None:
            return session_files(self.root)
        return list(self.store.session_ids())

    def item(self, key: str) -> _Item:
        if self.store is not None:
            return _stored_item(self.store, key, "." if self.one is not None else None)
        if self.root is None:
            return _file_item(key, ".", listed=False)
        return _file_item(key, os.path.relpath(os.path.dirname(key), self.root), listed=True)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


def _file_item(path: str, folder: str, *, listed: bool) -> _Item:
    """A session file; ``listed``: one of a folder, copied only if ``ls --all`` lists it, the
    listing checked on the bytes imported (the file read once: one version of it)."""
    def read() -> tuple[bytes, list[bytes]]:
        from .stores._jsonl_listing import listing_of
        from .stores.jsonl import exact_lines, read_exact_lines, session_bytes

        if not listed:
            header, lines = read_exact_lines(path)
            return header, list(lines)
        data, st = session_bytes(path)  # (unreadable: OSError, the reason)
        if listing_of(data, path, st) is None:
            raise CorruptHeader("not a session file: its first line is not a session header "
                                "(pi does not list it either)", path=path)
        return exact_lines(data, path)

    return _Item(path, read, folder)


def _stored_item(store: Any, session_id: str, folder: str | None) -> _Item:
    def read() -> tuple[bytes, list[bytes]]:
        header, lines = store.export_lines(session_id)
        return header, list(lines)

    return _Item(store.session_url(session_id), read, folder)


ANALYZE_AFTER = 100
"""Sessions a copy writes into a database before it brings the planner's statistics up to
date: a bulk load (``ANALYZE`` samples each table: about 1.1 s at 141,000 search rows, more
than copying a few sessions costs)."""

PARALLEL_SESSIONS = 16
"""Sessions a copy splits over helper processes from (when the caller asks for them): a
helper takes a moment to start."""


class _Destination:
    """The store a copy writes to; a folder's sub-folders opened as they are needed."""

    def __init__(self, location: str) -> None:
        self.location = location
        where = parse_location(location)
        if where.session_id is not None:
            raise InvalidLocation(f"{location}: the destination is a store (no #SESSION_ID)")
        self.kind = where.kind
        self.is_folder = where.kind == "jsonl"
        self._stores: dict[str, Any] = {}
        self._ids: dict[str, set[str]] = {}

    def open(self) -> None:
        """Open a database destination now: an error (unreachable, a newer schema) is the
        copy's, raised once and naming the store, before any session is dealt out."""
        if not self.is_folder:
            self._open(".")

    def store(self, folder: str | None, header_line: bytes) -> tuple[Any, set[str]]:
        """The store for a session (and the ids it held when first opened)."""
        if not self.is_folder:
            folder = "."
        elif folder is None:
            from .stores.jsonl import default_session_dir

            cwd = _header_field(header_line, "cwd")
            folder = default_session_dir(cwd if isinstance(cwd, str) else "", root="").name
        return self._open(folder)

    def _open(self, folder: str) -> tuple[Any, set[str]]:
        if folder not in self._stores:
            target = os.path.normpath(os.path.join(self.location, folder)) if self.is_folder \
                else self.location
            opened = self._stores[folder] = open_store(target)
            self._ids[folder] = set(opened.session_ids())
        return self._stores[folder], self._ids[folder]

    def analyze(self) -> None:
        """Bring a database's planner statistics up to date after a bulk load
        (:meth:`SqlStore.analyze <sessiontree.stores._sql.SqlStore.analyze>`)."""
        from .stores._sql import SqlStore

        store = self._stores.get(".") if not self.is_folder else None
        if isinstance(store, SqlStore):
            store.analyze()

    def close(self) -> None:
        for store in self._stores.values():
            store.close()


def copy_sessions(source: str, destination: str, *, processes: int | None = None
                  ) -> CopyResult:
    """Copy one session (a ``.jsonl`` file, or ``URL#SESSION_ID``) or every session of a store
    (a folder, pi's sessions root included, ``sqlite:///x.db``, ``postgresql://...``) into the
    store ``destination`` (a folder receives pi's layout, see the module docstring).

    Args:
        processes: copy a whole store's sessions with this many processes (helper processes
            started for the copy, each writing its share of the sessions with its own
            connection; the result is the same), as :func:`sessiontree._helpers.processes`
            allows: only CPUs free at the start are used (on a busy machine, whose scheduler
            gives one program's processes one share, more processes copied no faster).
            ``None``: ``SESSIONTREE_PROCESSES``, else
            :data:`sessiontree._helpers.default_processes` (1 in a library, so no process is
            started unless asked for; the command-line tool's 4).

    Raises:
        InvalidLocation: ``destination`` names a session instead of a store.
        CopyRefused: the one session asked for has lines a copy would not keep (see ``repair``).
        DuplicateId: the one session asked for is at the destination with other bytes.
        CopyIncomplete: a whole-store copy left sessions out (raised once every other session
            was copied; ``result.failed`` names each with the reason).
        SessionNotFound: no such source.
        UnsupportedVersion, StoreUnavailable: the database destination does not open (a newer
            schema, unreachable): raised before any session is copied, naming it.
    """
    target = _Destination(destination)
    sessions = _Source(source)
    try:
        target.open()
        keys = sessions.keys()
        count = 1 if sessions.one is not None or len(keys) < PARALLEL_SESSIONS or \
            target.kind == "sqlite" else min(
                len(keys), _helpers.processes(processes))
        if count == 1:
            outcomes = list(_copy_keys(sessions, target, keys))
        else:
            outcomes = _shared(source, target, sessions, keys, count)
        copied = [o.name for o in outcomes if o.kind == "copied"]
        if len(copied) >= ANALYZE_AFTER:
            target.analyze()
    finally:
        target.close()
        sessions.close()
    skipped = [o.name for o in outcomes if o.kind == "skipped"]
    failed = [CopyFailure(o.name, o.reason) for o in outcomes if o.kind == "failed"]
    result = CopyResult(copied, skipped, destination, failed, count)
    if failed:
        raise CopyIncomplete(f"{len(failed)} session(s) not copied (copied {len(copied)}, "
                             f"{len(skipped)} already there): " + "; ".join(
                                 f"{f.source}: {f.reason}" for f in failed),
                             result=result, path=destination)
    return result


def _shared(source: str, target: _Destination, sessions: _Source, keys: list[str], count: int
            ) -> list[_Outcome]:
    """Each session's outcome, in the order of ``keys``, the sessions dealt out to ``count``
    processes (this one and helpers, :func:`sessiontree._helpers.shared`). A helper answers
    each session's outcome as it is done; the sessions of a helper that fails which it did not
    answer are copied here, so each session has the outcome one process gives it."""
    def read(answer: bytes, share: list[str]) -> list[_Outcome]:
        outcomes = _unframed(answer)
        if len(outcomes) > len(share):
            raise ValueError("more outcomes than sessions")
        return outcomes + list(_copy_keys(sessions, target, share[len(outcomes):]))

    done = _helpers.shared("sessiontree.transfer:_copy_share",
                           [keys[i::count] for i in range(count)],
                           lambda share: [source, target.location, *share],
                           lambda share: list(_copy_keys(sessions, target, share)), read,
                           partial=True)
    return [done[place % count][place // count] for place in range(len(keys))]


def _copy_share(source: str, destination: str, *keys: str) -> None:
    """A helper process: copy these sessions of ``source``, answering each one's outcome as
    soon as it is stored (:func:`_framed`). A database destination is opened first: an error
    opening it (a newer schema since its caller opened it) ends the helper, answering nothing,
    not one failure a session without the store's name (its caller copies the share)."""
    sessions = _Source(source)
    target = _Destination(destination)
    try:
        target.open()
        for outcome in _copy_keys(sessions, target, list(keys)):
            _helpers.reply(_framed(outcome))
    finally:
        target.close()
        sessions.close()


_SIZE = struct.Struct("<I")
_wire_encoder = msgspec.msgpack.Encoder()
_wire_decoder = msgspec.msgpack.Decoder(tuple[str, bytes, bytes])


def _framed(outcome: _Outcome) -> bytes:
    """One outcome as a helper sends it: its size, then MessagePack, the names as UTF-8 bytes
    that keep lone surrogates (a file name that is not UTF-8, decoded by ``os.fsdecode``)."""
    data = _wire_encoder.encode((outcome.kind, outcome.name.encode("utf-8", "surrogatepass"),
                                 outcome.reason.encode("utf-8", "surrogatepass")))
    return _SIZE.pack(len(data)) + data


def _unframed(answer: bytes) -> list[_Outcome]:
    """The whole outcomes of a helper's answer (one cut short by its end is left out)."""
    outcomes: list[_Outcome] = []
    at = 0
    while at + _SIZE.size <= len(answer):
        (size,) = _SIZE.unpack_from(answer, at)
        end = at + _SIZE.size + size
        if end > len(answer):
            break
        kind, name, reason = _wire_decoder.decode(answer[at + _SIZE.size:end])
        outcomes.append(_Outcome(kind, name.decode("utf-8", "surrogatepass"),
                                 reason.decode("utf-8", "surrogatepass")))
        at = end
    return outcomes


def _copy_keys(sessions: _Source, target: _Destination, keys: list[str]
               ) -> Iterator[_Outcome]:
    """Copy these sessions in this process, one after the other; each one's outcome once it
    is done."""
    for key in keys:
        item = sessions.item(key)
        try:
            header, lines = item.read()
            session_id = _session_id(header)
            store, existing = target.store(item.folder, header)
            done = _copy_one(store, existing, session_id, header, lines)
        except _PER_SESSION as exc:
            if sessions.one is not None or (isinstance(exc, OSError)
                                            and exc.errno in _NO_MORE_WRITES):
                raise
            yield _Outcome("failed", item.where, _reason(exc))
            continue
        yield _Outcome("copied" if done else "skipped", session_id)


def _copy_one(store: Any, existing: set[str], session_id: str, header: bytes,
              lines: list[bytes]) -> bool:
    """Store one session; ``True`` if written, ``False`` if there already with the same bytes.
    A Redis session there with the same header and the first of its lines only (an import cut
    short: one of more than one script whose writer was killed) is completed by appending the
    rest, each script only if the session still holds exactly those lines (a live agent's
    append meanwhile makes it other content); nothing is ever deleted. Elsewhere such a
    session is other content: an import there is one transaction or a rename, never cut.

    Raises:
        DuplicateId: there already with other bytes.
    """
    if session_id not in existing:
        try:
            store.import_lines(header, lines)
            existing.add(session_id)
            return True
        except DuplicateId:  # another copy stored it meanwhile (whole): compare
            if session_id not in store.session_ids():
                raise
    there, body = store.export_lines(session_id)
    held = list(body)
    if there == header and held == lines:
        return False
    complete = getattr(store, "complete_import", None)  # (Redis only)
    if complete is not None and there == header and len(held) < len(lines) \
            and lines[:len(held)] == held and complete(header, lines, len(held)):
        return True
    raise DuplicateId(f"session {session_id} is already at the destination with other content; "
                      "not copied", path=store.session_url(session_id))


def _reason(exc: BaseException) -> str:
    """Why a session was left out; a system error keeps its file's name (the source's, or the
    destination's that could not be written)."""
    if isinstance(exc, OSError):
        if exc.strerror and isinstance(exc.filename, str) and not isinstance(exc, WriteFailed):
            return f"{exc.strerror}: {exc.filename}"
        return str(exc)  # (WriteFailed's names its file)
    reason = getattr(exc, "reason", None) or str(exc)
    lineno = getattr(exc, "lineno", None)
    return reason if lineno is None else f"line {lineno}: {reason}"


def _header_field(header_line: bytes, name: str) -> Any:
    from . import _json

    header = _json.loads(header_line)
    return header.get(name) if isinstance(header, dict) else None


def _session_id(header_line: bytes) -> str:
    value = _header_field(header_line, "id")
    if not isinstance(value, str):
        raise InvalidLocation("the source header has no session id")
    return value
