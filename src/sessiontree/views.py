"""What a tree view shows: filter modes, free-text search, and the flattened row layout.

One pure module used by ``sessiontree tree``, the ``browse`` TUI and the HTML export's data, so
the three always agree on what a filter hides.

Invariants:
* A filter hides nodes, never subtrees: the visible descendants of a hidden node hang under its
  nearest visible ancestor (or become roots), as in pi's tree selector.
* ``usage`` entries (pi 1.5.2: model use that is no message) show only in mode ``all`` (pi's
  tree selector hides them in every mode). The operation tree's bookkeeping entries
  (``sessiontree.op*``) show only in mode ``all`` (or when asked for), and :func:`shown_leaf` never names one: a view marks the last
  conversation entry on the path as the leaf.
* Sibling order is the session's (children oldest first); at each branch point the child on the
  active path (the path to the leaf) comes first.
* Nothing here does I/O; payloads are decoded only when the mode or the search needs them
  (``default``, ``no-tools``, ``user-only`` and ``labeled-only`` use the envelope only).
* Every walk is iterative, so a 100,000-entry chain needs no recursion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import msgspec

from ._tree import TreeNode
from .describe import KIND_NAMES, entry_kind, entry_summary, is_bookkeeping

__all__ = [
    "FILTER_MODES",
    "FilterMode",
    "Row",
    "ViewNode",
    "filter_tree",
    "fit_prefix",
    "flatten",
    "matches",
    "next_mode",
    "node_kind",
    "node_text",
    "prefix_columns",
    "search_terms",
    "shown_leaf",
    "unfiltered",
    "visible",
]

FilterMode = Literal["default", "no-tools", "user-only", "labeled-only", "all"]

FILTER_MODES: tuple[FilterMode, ...] = ("default", "no-tools", "user-only", "labeled-only", "all")
"""In the order ctrl+o cycles through them (pi's tree selector)."""

_SETTINGS = frozenset({"label", "custom", "model_change", "thinking_level_change", "session_info",
                       "context_edit"})
"""Entry types the default mode hides: they change state, they are not conversation."""


def next_mode(mode: FilterMode, step: int = 1) -> FilterMode:
    """The mode ``step`` places after ``mode`` in :data:`FILTER_MODES`, wrapping around."""
    return FILTER_MODES[(FILTER_MODES.index(mode) + step) % len(FILTER_MODES)]


def node_kind(node: TreeNode) -> str:
    """``user``, ``assistant``, ``toolResult``… for messages, the entry type otherwise; from the
    envelope only."""
    if node.type == "message" and node.role:
        return node.role
    return node.type


def shown_leaf(path_ids: Sequence[str], entry: Callable[[str], object]) -> str | None:
    """The leaf a person is shown and labels: the last entry of the path to the leaf
    (``path_ids``, root first; ``entry`` decodes one) that is not operation-tree bookkeeping."""
    for entry_id in reversed(path_ids):
        if not is_bookkeeping(entry(entry_id)):
            return entry_id
    return None


def visible(node: TreeNode, mode: FilterMode, *, ops: bool | None = None) -> bool:
    """Whether ``mode`` shows this node (before any search); ``ops``: whether the operation
    tree's bookkeeping shows (default: only in mode ``all``)."""
    shown = _shows(node, mode)
    if shown and node.type == "custom" and not (mode == "all" if ops is None else ops):
        return not is_bookkeeping(node.entry)  # (decoded only when the mode would show it)
    return shown


def _shows(node: TreeNode, mode: FilterMode) -> bool:
    if mode == "all":
        return True
    if node.type == "usage":
        return False
    if mode == "labeled-only":
        return node.label is not None
    kind = node_kind(node)
    if mode == "user-only":
        return kind == "user"
    if node.type in _SETTINGS:
        return False
    return not (mode == "no-tools" and kind == "toolResult")


def node_text(node: TreeNode, limit: int = 4000) -> str:
    """What a search looks at: id, kind, label and the entry's text (decodes the payload)."""
    entry = node.entry
    kind = entry_kind(entry)
    parts = [node.id, kind, KIND_NAMES.get(kind, kind), entry_summary(entry, limit)]
    if node.label:
        parts.append(node.label)
    return " ".join(parts)


def search_terms(query: str | None) -> list[str]:
    """The lower-cased words of a query; every one must occur in a node's text."""
    return [word.casefold() for word in (query or "").split()]


def matches(node: TreeNode, terms: Sequence[str],
            text: Callable[[TreeNode], str] = node_text) -> bool:
    """Whether every term occurs in the node's text (case-insensitive); no terms match all."""
    if not terms:
        return True
    haystack = text(node).casefold()
    return all(term in haystack for term in terms)


class ViewNode(msgspec.Struct, gc=False):
    """A visible node and its visible children (the nearest visible descendants)."""

    node: TreeNode
    children: list[ViewNode] = []

    @property
    def id(self) -> str:
        return self.node.id


def filter_tree(roots: Sequence[TreeNode], mode: FilterMode = "default",
                search: str | None = None, *,
                text: Callable[[TreeNode], str] = node_text,
                keep: Callable[[TreeNode], bool] | None = None,
                ops: bool | None = None) -> list[ViewNode]:
    """The forest ``mode`` and ``search`` leave: hidden nodes drop out, their visible
    descendants move up to the nearest visible ancestor.

    Args:
        roots: :meth:`Session.tree`.
        mode: one of :data:`FILTER_MODES`.
        search: words that must all occur in a shown node's :func:`node_text`.
        text: the text searched (a cache can be passed here).
        keep: nodes to show whatever the mode and search say (e.g. the current selection).
        ops: show the operation tree's bookkeeping (default: only in mode ``all``).
    """
    terms = search_terms(search)
    out: list[ViewNode] = []
    # (node, the list its visible form goes into)
    stack: list[tuple[TreeNode, list[ViewNode]]] = [(r, out) for r in reversed(roots)]
    while stack:
        node, sink = stack.pop()
        shown = visible(node, mode, ops=ops) and matches(node, terms, text)
        if not shown and keep is not None and keep(node):
            shown = True
        if shown:
            view = ViewNode(node, [])
            sink.append(view)
            sink = view.children
        stack.extend((child, sink) for child in reversed(node.children))
    return out


def unfiltered(roots: Sequence[TreeNode]) -> list[ViewNode]:
    """Every node, as :func:`filter_tree` with mode ``all`` and no search (cheaper)."""
    return filter_tree(roots, "all")


class Row(msgspec.Struct, gc=False):
    """One line of a drawn tree.

    Attributes:
        prefix: the box-drawing prefix (``├─ ``, ``│  ``…), three characters per column.
        node: the entry shown, or ``None`` for a fold line.
        level: the indentation level (branch points passed), 0 at the roots.
        active: on the path to the leaf.
        folded: for a fold line, how many entries it stands for.
        below: how many entries are under this line and not shown (cut by ``max_depth``, or
            a collapsed subtree).
        start: the entry starts a branch: a root, or one child of a branch point (the
            first entry of a linear run).
        foldable: a ``start`` with entries under it: it can be collapsed (pi's fold).
        collapsed: its subtree is collapsed.
    """

    prefix: str
    node: TreeNode | None
    level: int
    active: bool
    folded: int = 0
    below: int = 0
    start: bool = False
    foldable: bool = False
    collapsed: bool = False


def _size(view: ViewNode) -> int:
    count, stack = 0, [view]
    while stack:
        item = stack.pop()
        count += 1
        stack.extend(item.children)
    return count


def _fold_run(run: list[ViewNode], fold: int, keep: Callable[[TreeNode], bool]
              ) -> list[ViewNode | list[ViewNode]]:
    """A linear run with its middle folded into lists (fold lines), keeping ``keep`` entries
    (labelled ones, the leaf) on their own lines."""
    half = max(1, fold // 2)
    if len(run) <= fold:
        return list(run)
    shown: list[ViewNode | list[ViewNode]] = list(run[:half])
    hidden: list[ViewNode] = []
    for view in run[half:len(run) - half]:
        if keep(view.node):
            if hidden:
                shown.append(hidden)
                hidden = []
            shown.append(view)
        else:
            hidden.append(view)
    if hidden:
        shown.append(hidden)
    shown.extend(run[len(run) - half:])
    return shown


def flatten(roots: Sequence[ViewNode], active_path: set[str] | frozenset[str] = frozenset(), *,
            max_depth: int | None = None, fold: int = 0, leaf_id: str | None = None,
            collapsed: set[str] | frozenset[str] = frozenset()) -> Iterator[Row]:
    """Rows in display order: pre-order, linear runs in one column, the active child first.

    Args:
        roots: :func:`filter_tree`'s forest.
        active_path: ids on the path to the leaf.
        max_depth: show branches up to this many levels of indentation; the first entry of a
            deeper branch is shown with the count of what is under it (``Row.below``).
        fold: fold linear runs longer than this many entries into their first and last
            ``fold // 2`` entries and fold lines (0: never fold); labelled entries and
            ``leaf_id`` stay on their own lines.
        leaf_id: the session's leaf (never folded away).
        collapsed: ids of branch starts whose subtree is collapsed (only foldable rows are).
    """
    def ordered(children: list[ViewNode]) -> list[ViewNode]:
        return sorted(children, key=lambda c: c.node.id not in active_path)  # stable

    def keep(node: TreeNode) -> bool:
        return node.label is not None or node.id == leaf_id

    # work items: (view, connector, indent, level)
    stack: list[tuple[ViewNode, str, str, int]] = []

    def push_siblings(items: list[ViewNode], indent: str, level: int, top: bool) -> None:
        single = top and len(items) == 1
        for index in range(len(items) - 1, -1, -1):
            last = index == len(items) - 1
            if single:
                stack.append((items[index], "", indent, level))
            else:
                stack.append((items[index], "└─ " if last else "├─ ",
                              indent + ("   " if last else "│  "), level))

    push_siblings(ordered(list(roots)), "", 0, True)
    while stack:
        view, connector, indent, level = stack.pop()
        first_prefix = indent[:-3] + connector if connector else indent
        if max_depth is not None and level > max_depth:
            yield Row(first_prefix, view.node, level, view.node.id in active_path,
                      below=_size(view) - 1, start=True)
            continue
        if view.children and view.node.id in collapsed:
            yield Row(first_prefix, view.node, level, view.node.id in active_path,
                      below=_size(view) - 1, start=True, foldable=True, collapsed=True)
            continue
        # the linear run starting here: follow single children
        run = [view]
        while len(run[-1].children) == 1:
            run.append(run[-1].children[0])
        shown = _fold_run(run, fold, keep) if fold else list(run)
        for position, item in enumerate(shown):
            prefix = first_prefix if position == 0 else indent
            if isinstance(item, list):
                yield Row(prefix, None, level, any(v.node.id in active_path for v in item),
                          folded=len(item))
            else:
                yield Row(prefix, item.node, level, item.node.id in active_path,
                          start=position == 0, foldable=position == 0 and bool(item.children))
        tail = run[-1]
        if tail.children:
            push_siblings(ordered(tail.children), indent, level + 1, False)


def fit_prefix(prefix: str, columns: int) -> str:
    """``prefix`` in at most ``columns`` three-character columns (about), so that the entry's
    text keeps its room however deep the branch is.

    Deeper prefixes lose their leftmost columns in steps of ``columns // 2`` (rows of one
    step keep their guides aligned); ``⋯N`` stands for the N columns left out.
    """
    cells = len(prefix) // 3
    columns = max(2, columns)
    if cells <= columns:
        return prefix
    step = max(1, columns // 2)
    hidden = -(-(cells - columns + 1) // step) * step
    return f"⋯{hidden}".ljust(3) + prefix[3 * hidden:]


def prefix_columns(width: int) -> int:
    """How many prefix columns a tree drawn ``width`` characters wide gives its guides: about
    a quarter of the width (at least 2)."""
    return max(2, width // 12)
