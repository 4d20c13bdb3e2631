"""``--format json``: a session (or a part of it) as one JSON document, for tools.

Shape (``"format": "sessiontree-export", "version": 1``)::

    {"format", "version", "header", "name", "leafId", "labels": {id: label},
     "entries": [every shown entry exactly as stored, in file order],
     "tree": {"roots": [id...], "children": {id: [id...]}}}

Invariants:
* Entries are the stored lines spliced in as they are (never re-serialized), so an entry in
  the export is byte-identical to its line in the session file.
* The tree is flat (ids only), so any depth encodes without recursion; children are oldest
  first, as :meth:`Session.tree` orders them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _json
from ._select import Selection, select, selected_tree, walk

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["EXPORT_FORMAT", "export_json", "tree_data"]

EXPORT_FORMAT = "sessiontree-export"


def tree_data(session: Session, selection: Selection) -> dict[str, Any]:
    """``{"roots": [...], "children": {...}}`` for the selection (only nodes with children)."""
    roots = selected_tree(session, selection)
    children: dict[str, list[str]] = {}
    for node in walk(roots):
        if node.children:
            children[node.id] = [c.id for c in node.children]
    return {"roots": [r.id for r in roots], "children": children}


def entries_json(session: Session, ids: list[str],
                 advance: Callable[[int], None] | None = None) -> bytes:
    """A JSON array of the stored lines of ``ids``, spliced as they are."""
    parts: list[bytes] = []
    for index, entry_id in enumerate(ids):
        parts.append(session.raw_line(entry_id))
        if advance is not None and index % 1000 == 999:
            advance(1000)
    if advance is not None:
        advance(len(ids) % 1000)
    return b"[" + b",".join(parts) + b"]"


def export_json(session: Session, selection: Selection | None = None, *,
                advance: Callable[[int], None] | None = None) -> bytes:
    """The export document as UTF-8 JSON bytes (no trailing newline).

    Args:
        selection: what to export (default: everything, :func:`sessiontree.export.select`).
        advance: called with the number of entries done, for a progress bar.
    """
    selection = selection or select(session)
    shown = set(selection.ids)
    labels = {k: v[0] for k, v in session.labels().items() if k in shown}
    head = {"format": EXPORT_FORMAT, "version": 1,
            "header": _header(session), "name": session.name, "leafId": selection.leaf_id,
            "selection": {"kind": selection.kind, "topId": selection.top_id},
            "labels": labels, "tree": tree_data(session, selection)}
    encoded = _json.dumps(head)
    assert encoded.endswith(b"}")
    return encoded[:-1] + b',"entries":' + entries_json(session, selection.ids, advance) + b"}"


def _header(session: Session) -> Any:
    data = session.stored_header
    if data is not None:
        return data
    import msgspec

    return msgspec.to_builtins(session.header)
