"""``--format html``: one self-contained HTML page to read a session offline.

The page has a collapsible sidebar with the whole tree (labels, the active path marked, the
browser's filters and a search), shows the root-to-node path of any node clicked, has a button
back to the session's leaf, and renders messages readably (a safe Markdown subset, code blocks,
tool calls with their results, thinking collapsed, images inline, compactions and branch
summaries marked). On narrow screens the sidebar becomes an overlay.

Invariants (what makes the page safe and offline):
* One file: the style, the script and the data are inline; the Content-Security-Policy allows
  no network at all (``default-src 'none'``, images only from ``data:``) and runs only the
  page's own script, named by its SHA-256.
* The session's data is JSON inside ``<script type="application/json">`` with ``<``, ``>``,
  ``&``, U+2028 and U+2029 written as ``\\uXXXX``, so no text can close the element; the
  script builds the DOM with ``textContent`` and never parses data as HTML.
* The only text put into the page's HTML itself is the title, HTML-escaped.
* The entries are the stored lines spliced in as they are (never re-serialized).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import re
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

from .. import _json
from ..views import FILTER_MODES, shown_leaf, visible
from ._select import Selection, select, selected_tree, walk
from ..renderers import rendered_entries
from .json import entries_json, tree_data

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["export_html", "operations_data", "script_json"]

_PLACEHOLDER = re.compile(r"__([A-Z_]+)__")
_UNSAFE_IN_SCRIPT = {b"<": b"\\u003c", b">": b"\\u003e", b"&": b"\\u0026",
                     "\u2028".encode(): b"\\u2028", "\u2029".encode(): b"\\u2029"}
_UNSAFE_PATTERN = re.compile(b"|".join(re.escape(k) for k in _UNSAFE_IN_SCRIPT))


@functools.cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("_assets", name).read_text("utf-8")


def script_json(data: bytes) -> bytes:
    """JSON bytes made safe inside a ``<script>`` element: ``<``, ``>``, ``&``, U+2028 and
    U+2029 become ``\\u`` escapes (they can only occur inside JSON strings, where the escape
    means the same character)."""
    return _UNSAFE_PATTERN.sub(lambda m: _UNSAFE_IN_SCRIPT[m.group()], data)


def operations_data(session: Session) -> dict[str, Any] | None:
    """The operations panel's data: the op tree recorded in the session (plain JSON data from
    :mod:`sessiontree.optree`), or ``None`` when the session records none.

    This is the hook point of the operations panel: the page shows a panel when this returns
    data.
    """
    try:
        from ..optree import optree_to_builtins
        from ..optree.events import EVENT_PREFIX
        from ..optree.persist import optree_from_session
    except ImportError:  # pragma: no cover - the optree package is part of sessiontree
        return None
    if next(session.custom_entries(EVENT_PREFIX), None) is None:
        return None
    data: dict[str, Any] = optree_to_builtins(optree_from_session(session))
    return data


def _visibility(session: Session, selection: Selection) -> list[int]:
    """For each shown entry, a bit per filter mode (bit m: ``FILTER_MODES[m]`` shows it)."""
    masks: dict[str, int] = {}
    for node in walk(selected_tree(session, selection)):
        mask = 0
        for bit, mode in enumerate(FILTER_MODES):
            if visible(node, mode):
                mask |= 1 << bit
        masks[node.id] = mask
    return [masks.get(i, 0) for i in selection.ids]


def _generator() -> str:
    try:
        from importlib.metadata import version

        return f"sessiontree {version('sessiontree')}"
    except Exception:  # pragma: no cover - not installed as a distribution
        return "sessiontree"


def export_html(session: Session, selection: Selection | None = None, *,
                title: str | None = None, advance: Callable[[int], None] | None = None) -> bytes:
    """The page as UTF-8 bytes.

    Args:
        selection: what to export (default: everything, opened on the session's leaf).
        title: the page title (default: the session name, or its id).
        advance: called with the number of entries done, for a progress bar.
    """
    selection = selection or select(session)
    shown = set(selection.ids)
    labels = {k: v[0] for k, v in session.labels().items() if k in shown}
    leaf = selection.leaf_id
    if leaf is not None:  # the last conversation entry, not the bookkeeping after it
        leaf = shown_leaf(session.path_ids(leaf), session.entry)
        leaf = leaf if leaf in shown else selection.leaf_id
    head: dict[str, Any] = {
        "header": _header(session), "name": session.name, "leafId": leaf,
        "labels": labels, "tree": tree_data(session, selection),
        "modes": list(FILTER_MODES), "visible": _visibility(session, selection),
        "optree": operations_data(session) if selection.kind == "all" else None,
        "rendered": rendered_entries(session, selection.ids),
    }
    encoded = _json.dumps(head)
    data = encoded[:-1] + b',"entries":' + entries_json(session, selection.ids, advance) + b"}"
    data = script_json(_valid_utf8(data))
    script = _asset("app.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    page_title = title or session.name or f"Session {session.id}"
    values = {
        "SCRIPT_HASH": f"sha256-{digest}",
        "GENERATOR": html.escape(_generator()),
        "TITLE": html.escape(page_title),
        "STYLE": _asset("style.css"),
        "SCRIPT": script,
    }
    template = _asset("page.html")
    before, after = template.split("__DATA__")
    def fill(part: str) -> bytes:
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], part).encode("utf-8")
    return fill(before) + data + fill(after)


def _valid_utf8(data: bytes) -> bytes:
    """The bytes, with any invalid UTF-8 (a damaged line) replaced by U+FFFD."""
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace").encode("utf-8")


def _header(session: Session) -> Any:
    from .json import _header as header

    return header(session)
