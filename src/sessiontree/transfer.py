"""Copying sessions between stores, byte for byte: one session or a whole store.

Invariants:
* Every line keeps its exact bytes: JSONL -> SQLite -> PostgreSQL -> JSONL gives back the same
  file (sources a copy would not reproduce are refused, see
  :class:`~sessiontree.errors.CopyRefused`).
* Each session is written whole or not at all (one transaction; a temporary file and a rename
  for JSONL), so a copy killed half-way leaves every session either complete or absent.
* A session already at the destination with the same bytes is skipped, so an interrupted
  whole-store copy is finished by running it again, and copies running at once into one store
  each skip what another stored first; with different bytes it is an error, raised after every
  other session was copied.
* The source is never written to.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from .errors import DuplicateId, InvalidLocation, SessionNotFound
from .stores.url import open_store, parse_location

__all__ = ["CopyResult", "copy_sessions"]


class CopyResult(msgspec.Struct, frozen=True):
    """What :func:`copy_sessions` did."""

    copied: list[str]
    """Ids of the sessions written to the destination."""
    skipped: list[str]
    """Ids already there with the same bytes."""
    destination: str


def _source_sessions(source: str) -> tuple[Any, list[str], bool]:
    """The source store, the ids to copy, and whether the store is ours to close."""
    where = parse_location(source)
    if where.kind == "jsonl" and os.path.isfile(where.store):
        return None, [where.store], False
    if where.kind == "jsonl" and not os.path.isdir(where.store):
        raise SessionNotFound("no such session file or folder", path=where.store)
    store = open_store(source, read_only=True)
    if where.session_id is not None:
        return store, [where.session_id], True
    return store, store.session_ids(), True


def _lines_of(store: Any, item: str) -> tuple[bytes, list[bytes]]:
    if store is None:
        from .stores.jsonl import read_exact_lines

        header, lines = read_exact_lines(item)
    else:
        header, lines = store.export_lines(item)
    return header, list(lines)


def copy_sessions(source: str, destination: str) -> CopyResult:
    """Copy one session (a ``.jsonl`` file, or ``URL#SESSION_ID``) or every session of a store
    (a folder, ``sqlite:///x.db``, ``postgresql://...``) into the store ``destination``.

    Raises:
        InvalidLocation: ``destination`` names a session instead of a store.
        CopyRefused: a source session with lines a copy would not keep (see ``repair``).
        DuplicateId: sessions already at the destination with other bytes (raised once every
            other session was copied; the message says what was copied and skipped).
        SessionNotFound: no such source.
    """
    if parse_location(destination).session_id is not None:
        raise InvalidLocation(f"{destination}: the destination is a store (no #SESSION_ID)")
    src_store, items, owned = _source_sessions(source)
    copied: list[str] = []
    skipped: list[str] = []
    differing: list[str] = []
    try:
        with open_store(destination) as target:
            existing = set(target.session_ids())
            for item in items:
                header, lines = _lines_of(src_store, item)
                session_id = _session_id(header)
                if session_id not in existing:
                    try:
                        target.import_lines(header, lines)
                        copied.append(session_id)
                        continue
                    except DuplicateId:  # another copy stored it meanwhile (whole): compare
                        if session_id not in target.session_ids():
                            raise
                there, body = target.export_lines(session_id)
                if there == header and list(body) == lines:
                    skipped.append(session_id)
                else:
                    differing.append(session_id)
    finally:
        if owned and src_store is not None:
            src_store.close()
    if differing:
        raise DuplicateId(f"{len(differing)} session(s) already at the destination with other "
                          f"content, not copied: {', '.join(differing)} (copied "
                          f"{len(copied)}, {len(skipped)} already there)", path=destination)
    return CopyResult(copied, skipped, destination)


def _session_id(header_line: bytes) -> str:
    from . import _json

    header = _json.loads(header_line)
    value = header.get("id") if isinstance(header, dict) else None
    if not isinstance(value, str):
        raise InvalidLocation("the source header has no session id")
    return value
