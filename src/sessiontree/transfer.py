"""Copying sessions between stores, byte for byte: one session or a whole store.

Invariants:
* Every line keeps its exact bytes: JSONL -> SQLite -> PostgreSQL -> JSONL gives back the same
  file (sources a copy would not reproduce are refused, see
  :class:`~sessiontree.errors.CopyRefused`).
* Each session is written whole or not at all (one transaction; a temporary file and a rename
  for JSONL), so a copy killed half-way leaves every session either complete or absent.
* A session already at the destination with the same bytes is skipped, so an interrupted
  whole-store copy is finished by running it again, and copies running at once into one store
  each skip what another stored first.
* Nothing is skipped silently: a folder's every ``*.jsonl`` file (its project folders' too: a
  folder may be pi's sessions root) is copied, found already there, or named in
  ``CopyResult.failed`` with the reason (a file that is no session, one a copy would not
  reproduce, an id already at the destination with other bytes); the copy goes on with the
  others and then raises :class:`~sessiontree.errors.CopyIncomplete`.
* Into a folder, sessions land in pi's layout: a folder's sessions keep their project folder
  (relative to the source folder), a database's go to pi's ``--<cwd>--`` folder for their
  header's cwd, each file named ``<time>_<id>.jsonl``.
* The source is never written to.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

from .errors import (
    CopyIncomplete,
    CopyRefused,
    CorruptHeader,
    DuplicateId,
    InvalidEntry,
    InvalidLocation,
    SessionNotFound,
    UnsupportedVersion,
)
from .stores.url import open_store, parse_location

__all__ = ["ANALYZE_AFTER", "CopyFailure", "CopyResult", "copy_sessions"]

_PER_SESSION = (CopyRefused, CorruptHeader, InvalidEntry, InvalidLocation, SessionNotFound,
                UnsupportedVersion, OSError)
"""What leaves one session out of a whole-store copy (the others are still copied); anything
else (the destination unreachable, read-only) stops the copy."""


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


class _Item(NamedTuple):
    """One session to copy: where it is (for people), how to read its lines, and the folder
    it goes to in a JSONL destination (``None``: pi's folder for its cwd)."""

    where: str
    read: Callable[[], tuple[bytes, list[bytes]]]
    folder: str | None


def _file_item(path: str, folder: str) -> _Item:
    def read() -> tuple[bytes, list[bytes]]:
        from .stores.jsonl import read_exact_lines

        header, lines = read_exact_lines(path)
        return header, list(lines)

    return _Item(path, read, folder)


def _stored_item(store: Any, session_id: str, folder: str | None) -> _Item:
    def read() -> tuple[bytes, list[bytes]]:
        header, lines = store.export_lines(session_id)
        return header, list(lines)

    return _Item(store.session_url(session_id), read, folder)


def _folder_items(root: str) -> tuple[list[_Item], list[CopyFailure]]:
    """Every ``*.jsonl`` file of a folder and its project folders: the sessions ``ls --all``
    lists, and the files it does not (no session header), named as failures."""
    from .stores._jsonl_listing import list_root, session_files

    listed = {row.path for row in list_root(root)}
    items: list[_Item] = []
    failed: list[CopyFailure] = []
    base = os.path.abspath(root)
    for path in session_files(root):
        if path in listed:
            items.append(_file_item(path, os.path.relpath(os.path.dirname(path), base)))
        else:
            failed.append(CopyFailure(path, "not a session file: its first line is not a "
                                            "session header (pi does not list it either)"))
    return items, failed


def _sources(source: str) -> tuple[Any, list[_Item], list[CopyFailure], bool]:
    """The source store to close (or ``None``), the sessions to copy, the files that are no
    sessions, and whether the source is one session (whose error is raised as it is)."""
    where = parse_location(source)
    if where.kind == "jsonl":
        if os.path.isfile(where.store):
            return None, [_file_item(where.store, ".")], [], True
        if not os.path.isdir(where.store):
            raise SessionNotFound("no such session file or folder", path=where.store)
        items, failed = _folder_items(where.store)
        return None, items, failed, False
    store = open_store(source, read_only=True)
    if where.session_id is not None:
        return store, [_stored_item(store, where.session_id, ".")], [], True
    return store, [_stored_item(store, sid, None) for sid in store.session_ids()], [], False


ANALYZE_AFTER = 100
"""Sessions a copy writes into a database before it brings the planner's statistics up to
date: a bulk load (``ANALYZE`` samples each table: about 1.1 s at 141,000 search rows, more
than copying a few sessions costs)."""


class _Destination:
    """The store a copy writes to; a folder's sub-folders opened as they are needed."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.is_folder = parse_location(location).kind == "jsonl"
        self._stores: dict[str, Any] = {}
        self._ids: dict[str, set[str]] = {}

    def store(self, folder: str | None, header_line: bytes) -> tuple[Any, set[str]]:
        """The store for a session (and the ids it held when first opened)."""
        if not self.is_folder:
            folder = "."
        elif folder is None:
            from .stores.jsonl import default_session_dir

            cwd = _header_field(header_line, "cwd")
            folder = default_session_dir(cwd if isinstance(cwd, str) else "", root="").name
        if folder not in self._stores:
            target = os.path.normpath(os.path.join(self.location, folder)) if self.is_folder \
                else self.location
            opened = self._stores[folder] = open_store(target)
            self._ids[folder] = set(opened.session_ids())
        return self._stores[folder], self._ids[folder]

    def close(self, copied: int) -> None:
        """Close the stores; a database that received :data:`ANALYZE_AFTER` sessions or more
        has its planner statistics brought up to date (:meth:`SqlStore.analyze
        <sessiontree.stores._sql.SqlStore.analyze>`)."""
        from .stores._sql import SqlStore

        try:
            for store in self._stores.values():
                if copied >= ANALYZE_AFTER and isinstance(store, SqlStore):
                    store.analyze()
        finally:
            for store in self._stores.values():
                store.close()


def copy_sessions(source: str, destination: str) -> CopyResult:
    """Copy one session (a ``.jsonl`` file, or ``URL#SESSION_ID``) or every session of a store
    (a folder, pi's sessions root included, ``sqlite:///x.db``, ``postgresql://...``) into the
    store ``destination`` (a folder receives pi's layout, see the module docstring).

    Raises:
        InvalidLocation: ``destination`` names a session instead of a store.
        CopyRefused: the one session asked for has lines a copy would not keep (see ``repair``).
        DuplicateId: the one session asked for is at the destination with other bytes.
        CopyIncomplete: a whole-store copy left sessions out (raised once every other session
            was copied; ``result.failed`` names each with the reason).
        SessionNotFound: no such source.
    """
    if parse_location(destination).session_id is not None:
        raise InvalidLocation(f"{destination}: the destination is a store (no #SESSION_ID)")
    src_store, items, failed, single = _sources(source)
    copied: list[str] = []
    skipped: list[str] = []
    target = _Destination(destination)
    try:
        for item in items:
            try:
                header, lines = item.read()
                session_id = _session_id(header)
                store, existing = target.store(item.folder, header)
                done = _copy_one(store, existing, session_id, header, lines)
            except _PER_SESSION as exc:
                if single:
                    raise
                failed.append(CopyFailure(item.where, _reason(exc)))
                continue
            (copied if done else skipped).append(session_id)
    finally:
        target.close(len(copied))
        if src_store is not None:
            src_store.close()
    result = CopyResult(copied, skipped, destination, failed)
    if failed:
        raise CopyIncomplete(f"{len(failed)} session(s) not copied (copied {len(copied)}, "
                             f"{len(skipped)} already there): " + "; ".join(
                                 f"{f.source}: {f.reason}" for f in failed),
                             result=result, path=destination)
    return result


def _copy_one(store: Any, existing: set[str], session_id: str, header: bytes,
              lines: list[bytes]) -> bool:
    """Store one session; ``True`` if written, ``False`` if there already with the same bytes.

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
    if there == header and list(body) == lines:
        return False
    raise DuplicateId(f"session {session_id} is already at the destination with other content; "
                      "not copied", path=store.session_url(session_id))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return getattr(exc, "reason", None) or str(exc)


def _header_field(header_line: bytes, name: str) -> Any:
    from . import _json

    header = _json.loads(header_line)
    return header.get(name) if isinstance(header, dict) else None


def _session_id(header_line: bytes) -> str:
    value = _header_field(header_line, "id")
    if not isinstance(value, str):
        raise InvalidLocation("the source header has no session id")
    return value
