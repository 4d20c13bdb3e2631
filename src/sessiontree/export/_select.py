"""Which part of a session an export shows: all of it, the path to one entry, or a subtree.

Invariants:
* ``ids`` are in the session's file order and are closed under "parent of": every shown
  entry's effective parent is shown too (a subtree keeps the path to it unless
  ``ancestors=False``, when its top becomes a root).
* ``leaf_id`` is in ``ids``: the session's leaf when it is shown, else the branch target or
  the subtree's top.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import msgspec

from .._tree import TreeNode

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["Selection", "select", "selected_tree", "walk"]


class Selection(msgspec.Struct, frozen=True):
    """The entries an export shows.

    Attributes:
        ids: shown entry ids in file order.
        leaf_id: the entry the export opens on (its "current leaf").
        top_id: with a subtree, its top (a root of the export when ``ancestors`` is False).
        kind: ``"all"``, ``"branch"`` or ``"subtree"``.
    """

    ids: list[str]
    leaf_id: str | None
    top_id: str | None = None
    kind: str = "all"


def select(session: Session, *, branch: str | None = None, subtree: str | None = None,
           ancestors: bool = True) -> Selection:
    """The entries of ``session`` to export.

    Args:
        branch: the path from the root to this entry.
        subtree: this entry and all its descendants (and the path to it, with ``ancestors``).
        ancestors: with ``subtree``, keep the path from the root to it.

    Raises:
        EntryNotFound: ``branch`` or ``subtree`` is not in the session.
        ValueError: both ``branch`` and ``subtree``.
    """
    if branch is not None and subtree is not None:
        raise ValueError("give branch or subtree, not both")
    if branch is not None:
        path = set(session.path_ids(branch))
        return Selection([i for i in session.ids() if i in path], branch, kind="branch")
    if subtree is not None:
        above = session.path_ids(subtree)[:-1] if ancestors else []
        below = set(session.subtree_ids(subtree))
        shown = below | set(above)
        leaf = session.leaf_id if session.leaf_id in below else subtree
        return Selection([i for i in session.ids() if i in shown], leaf, subtree, "subtree")
    return Selection(session.ids(), session.leaf_id)


def selected_tree(session: Session, selection: Selection) -> list[TreeNode]:
    """The session's tree cut to the selection: roots in order, children pruned (copies; the
    session's own nodes are not changed)."""
    if selection.kind == "all":
        return session.tree()
    shown = set(selection.ids)
    roots: list[TreeNode] = []
    stack: list[tuple[TreeNode, bool]] = [(r, False) for r in reversed(session.tree())]
    while stack:
        node, parent_shown = stack.pop()
        if node.id in shown and not parent_shown:
            roots.append(node)
        stack.extend((c, node.id in shown) for c in reversed(node.children))
    return [_pruned(root, shown) for root in roots]


def _pruned(root: TreeNode, shown: set[str]) -> TreeNode:
    top = msgspec.structs.replace(root, children=[])
    stack: list[tuple[TreeNode, TreeNode]] = [(root, top)]
    while stack:
        original, copy = stack.pop()
        kids = []
        for child in original.children:
            if child.id in shown:
                dup = msgspec.structs.replace(child, children=[])
                kids.append(dup)
                stack.append((child, dup))
        copy.children = kids
    return top


def walk(roots: list[TreeNode]) -> Iterator[TreeNode]:
    """Every node under ``roots`` in pre-order (iterative)."""
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))
