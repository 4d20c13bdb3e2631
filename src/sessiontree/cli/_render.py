"""Terminal rendering of a session tree: linear runs stay in one column, branches indent.

This is how pi's tree selector draws a session, and it keeps a 20,000-entry conversation readable:
only a node with several children opens new columns, and the child on the active path (the
path to the current leaf) comes first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import msgspec
from rich.text import Text

from .._tree import TreeNode
from ..describe import KIND_NAMES, entry_kind, entry_summary

__all__ = ["Row", "render_row", "tree_rows"]


class Row(msgspec.Struct):
    """One printed line of the tree."""

    prefix: str
    node: TreeNode
    depth: int
    active: bool


def tree_rows(roots: Sequence[TreeNode], active_path: set[str]) -> Iterator[Row]:
    """Rows in display order: pre-order, the active child first at each branch point."""

    def ordered(children: list[TreeNode]) -> list[TreeNode]:
        return sorted(children, key=lambda c: c.id not in active_path)  # stable: timestamps kept

    stack: list[tuple[TreeNode, str, str, int]] = []
    tops = ordered(list(roots))
    for index in range(len(tops) - 1, -1, -1):
        last = index == len(tops) - 1
        connector = "" if len(tops) == 1 else ("└─ " if last else "├─ ")
        stack.append((tops[index], connector, "" if len(tops) == 1 else ("   " if last else "│  "), 0))
    while stack:
        node, connector, indent, depth = stack.pop()
        yield Row(indent[:-3] + connector if connector else indent, node, depth, node.id in active_path)
        children = ordered(node.children)
        if len(children) == 1:
            stack.append((children[0], "", indent, depth + 1))
            continue
        for index in range(len(children) - 1, -1, -1):
            last = index == len(children) - 1
            stack.append((children[index], "└─ " if last else "├─ ",
                          indent + ("   " if last else "│  "), depth + 1))


_KIND_STYLE = {
    "user": "bold cyan", "assistant": "green", "toolResult": "dim", "bashExecution": "yellow",
    "compaction": "bold magenta", "branch_summary": "magenta", "label": "dim", "custom": "dim",
    "custom_message": "blue", "session_info": "dim", "model_change": "dim",
    "thinking_level_change": "dim",
}


def render_row(row: Row, *, leaf_id: str | None, width: int = 72) -> Text:
    """One line: prefix, marker, id, kind, summary, label."""
    entry = row.node.entry
    kind = entry_kind(entry)
    text = Text(row.prefix, style="dim")
    if row.node.id == leaf_id:
        text.append("● ", style="bold yellow")
    elif row.active:
        text.append("• ", style="yellow")
    else:
        text.append("  ")
    text.append(row.node.id, style="bold" if row.active else "")
    text.append(f" {KIND_NAMES.get(kind, kind):<10} ", style=_KIND_STYLE.get(kind, ""))
    text.append(entry_summary(entry, width), style="" if row.active else "dim")
    if row.node.label:
        text.append(f"  [{row.node.label}]", style="bold yellow")
    return text
