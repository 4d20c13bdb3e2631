"""Exports of a session for people and tools: HTML, Markdown and JSON.

* :func:`sessiontree.export.html.export_html` — one self-contained, offline HTML file with a
  tree sidebar (no external request; every string escaped; data as JSON, DOM built with
  ``textContent``).
* :func:`sessiontree.export.markdown.export_markdown` — the active branch (or every branch)
  as readable Markdown.
* :func:`sessiontree.export.json.export_json` — the entries and the tree as one JSON document.

Each takes a :class:`Selection` (all of a session, one branch, or one subtree) made by
:func:`select`. The modules are imported on first use.
"""

from __future__ import annotations

from ._select import Selection, select

__all__ = ["Selection", "select"]
