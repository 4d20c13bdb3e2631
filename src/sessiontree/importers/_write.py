"""Writing an imported session to a store all at once, and finding an earlier import of it.

Invariants:
* A JSONL session is written whole to a temporary file in the destination folder, fsynced, and
  linked to its final name only if that name is free; a failure leaves no file behind.
* Any other store gets ``create`` then one ``append`` of every entry; if the append fails the
  session is deleted again.
* Nothing existing is ever overwritten: an earlier import of the same source is reported, not
  replaced.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .. import _fs
from ..entries import Custom, SessionHeader
from ..errors import InvalidEntry, SessionNotFound
from ..stores.base import Store
from ..stores.jsonl import JsonlFile, JsonlStore, session_file_name
from ._build import IMPORT_CUSTOM_TYPE

__all__ = ["earlier_import", "save_session"]


def earlier_import(store: Store, session_id: str) -> dict[str, Any] | None:
    """The import record of the session ``session_id`` in ``store``; ``None`` if there is none.

    A session with that id but no import record gives an empty dict (still a match).
    """
    try:
        entries = store.read(session_id)
        for entry in entries:
            if isinstance(entry, Custom) and entry.custom_type == IMPORT_CUSTOM_TYPE:
                return dict(entry.data) if isinstance(entry.data, Mapping) else {}
    except SessionNotFound:
        return None
    return {}


def _location(store: Store, header: SessionHeader) -> str:
    if isinstance(store, JsonlStore):
        return str(store.directory / session_file_name(header))
    return f"{type(store).__name__}#{header.id}"


def save_session(store: Store, header: SessionHeader,
                 entries: Sequence[Mapping[str, Any]]) -> str:
    """Write a new session holding ``entries`` (ids and parents as given); returns where it is.

    Raises:
        InvalidEntry: the session already exists (a JSONL file of that name).
    """
    if isinstance(store, JsonlStore):
        return _save_jsonl(store, header, entries)
    store.create(header)
    try:
        store.append(header.id, entries)
    except BaseException:
        store.delete(header.id)
        raise
    return _location(store, header)


def _save_jsonl(store: JsonlStore, header: SessionHeader,
                entries: Sequence[Mapping[str, Any]]) -> str:
    from ..session import Session

    store.directory.mkdir(parents=True, exist_ok=True)
    final = _location(store, header)
    if os.path.exists(final):
        raise InvalidEntry("a session file with this name already exists", path=final)
    temp = os.path.join(str(store.directory), f".{os.path.basename(final)}.import-{os.getpid()}")
    try:
        with Session(JsonlFile(temp, durable=True), header=header) as session:
            session.extend(entries)
        try:
            os.link(temp, final)  # fails if the name was taken meanwhile: never overwrite
        except FileExistsError:
            raise InvalidEntry("a session file with this name already exists", path=final) from None
        _fs.fsync_dir(str(store.directory))
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return final
