"""Writing an imported session to a store all at once, and finding an earlier import of it.

Invariants:
* A store that takes whole sessions (:class:`~sessiontree.stores.base.LineStore`: every built-in
  one) gets the session's exact lines in one write: a JSONL file is written to a temporary file
  and published under its name only if the name is free; a database stores it in one
  transaction. A failure leaves nothing behind.
* Any other :class:`~sessiontree.stores.base.Store` gets ``create`` then one ``append`` of
  every entry; if the append fails the session is deleted again.
* Nothing existing is ever overwritten: an earlier import of the same source is reported, not
  replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import _json
from ..entries import Custom, SessionHeader
from ..errors import SessionNotFound
from ..stores.base import Store, has_lines
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


def save_session(store: Store, header: SessionHeader,
                 entries: Sequence[Mapping[str, Any]]) -> str:
    """Write a new session holding ``entries`` (ids and parents as given); returns where it is
    (a file path, or a store URL ``...#SESSION_ID``).

    Raises:
        DuplicateId: the session already exists.
    """
    if has_lines(store):
        store.import_lines(_json.dumps(header), [_json.dumps(entry) for entry in entries])
        return store.session_url(header.id)
    store.create(header)
    try:
        store.append(header.id, entries)
    except BaseException:
        store.delete(header.id)
        raise
    return f"{type(store).__name__}#{header.id}"
