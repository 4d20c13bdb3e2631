"""What a tree view shows: filter modes, free-text search, and the flattened row layout.

One pure module used by ``sessiontree tree``, the ``browse`` TUI and the HTML export's data, so
the three always agree on what a filter hides.

Invariants:
* A filter hides nodes, never subtrees: the visible descendants of a hidden node hang under its
  nearest visible ancestor (or become roots), as in pi's tree selector.
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
from .describe import KIND_NAMES, entry_kind, entry_summary

__all__ = [
    "FILTER_MODES",
    "FilterMode",
    "Row",
    "ViewNode",
    "filter_tree",
    "flatten",
    "matches",
    "next_mode",
    "node_kind",
    "node_text",
    "search_terms",
    "unfiltered",
    "visible",
]

FilterMode = Literal["default", "no-tools", "user-only", "labeled-only", "all"]

FILTER_MODES: tuple[FilterMode, ...] = ("default", "no-tools", "user-only", "labeled-only", "all")
"""In the order ctrl+o cycles through them (pi's tree selector)."""

_SETTINGS = frozenset({"label", "custom", "model_change", "thinking_level_change", "session_info"})
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


def visible(node: TreeNode, mode: FilterMode) -> bool:
    """Whether ``mode`` shows this node (before any search)."""
    if mode == "all":
        return True
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
                keep: Callable[[TreeNode], bool] | None = None) -> list[ViewNode]:
    """The forest ``mode`` and ``search`` leave: hidden nodes drop out, their visible
    descendants move up to the nearest visible ancestor.

    Args:
        roots: :meth:`Session.tree`.
        mode: one of :data:`FILTER_MODES`.
        search: words that must all occur in a shown node's :func:`node_text`.
        text: the text searched (a cache can be passed here).
        keep: nodes to show whatever the mode and search say (e.g. the current selection).
    """
    terms = search_terms(search)
    out: list[ViewNode] = []
    # (node, the list its visible form goes into)
    stack: list[tuple[TreeNode, list[ViewNode]]] = [(r, out) for r in reversed(roots)]
    while stack:
        node, sink = stack.pop()
        shown = visible(node, mode) and matches(node, terms, text)
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
        prefix: the box-drawing prefix (``├─ ``, ``│  ``…).
        node: the entry shown, or ``None`` for a fold line.
        level: the indentation level (branch points passed), 0 at the roots.
        active: on the path to the leaf.
        folded: for a fold line, how many entries it stands for.
        folded_labels: for a fold line, the labels of the entries it hides.
        below: for a line cut by ``max_depth``, how many entries are under it, not shown.
    """

    prefix: str
    node: TreeNode | None
    level: int
    active: bool
    folded: int = 0
    folded_labels: list[str] = []
    below: int = 0


def _size(view: ViewNode) -> int:
    count, stack = 0, [view]
    while stack:
        item = stack.pop()
        count += 1
        stack.extend(item.children)
    return count


def flatten(roots: Sequence[ViewNode], active_path: set[str] | frozenset[str] = frozenset(), *,
            max_depth: int | None = None, fold: int = 0) -> Iterator[Row]:
    """Rows in display order: pre-order, linear runs in one column, the active child first.

    Args:
        roots: :func:`filter_tree`'s forest.
        active_path: ids on the path to the leaf.
        max_depth: show branches up to this many levels of indentation; the first entry of a
            deeper branch is shown with the count of what is under it (``Row.below``).
        fold: fold linear runs longer than this many entries into their first and last
            ``fold // 2`` entries and one fold line (0: never fold).
    """
    def ordered(children: list[ViewNode]) -> list[ViewNode]:
        return sorted(children, key=lambda c: c.node.id not in active_path)  # stable

    half = max(1, fold // 2) if fold else 0
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
        # the linear run starting here: follow single children
        run = [view]
        while len(run[-1].children) == 1:
            run.append(run[-1].children[0])
        if max_depth is not None and level > max_depth:
            yield Row(first_prefix, view.node, level, view.node.id in active_path,
                      below=_size(view) - 1)
            continue
        if half and len(run) > fold:
            hidden = run[half:len(run) - half]
            shown: list[ViewNode | list[ViewNode]] = [*run[:half], hidden, *run[len(run) - half:]]
        else:
            shown = list(run)
        for position, item in enumerate(shown):
            prefix = first_prefix if position == 0 else indent
            if isinstance(item, list):
                labels = [v.node.label for v in item if v.node.label]
                yield Row(prefix, None, level, any(v.node.id in active_path for v in item),
                          folded=len(item), folded_labels=labels)
            else:
                yield Row(prefix, item.node, level, item.node.id in active_path)
        tail = run[-1]
        if tail.children:
            push_siblings(ordered(tail.children), indent, level + 1, False)
