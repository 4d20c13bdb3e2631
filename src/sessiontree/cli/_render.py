"""Terminal rendering of a session tree: linear runs stay in one column, branches indent.

This is how pi's tree selector draws a session, and it keeps a 20,000-entry conversation readable:
only a node with several children opens new columns, and the child on the active path (the
path to the current leaf) comes first. What is shown (filters, search, folding, depth) is
decided by :mod:`sessiontree.views`; this module only turns rows into rich text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rich.text import Text

from .._tree import TreeNode
from ..describe import KIND_NAMES, entry_kind, entry_summary
from ..views import Row, flatten, unfiltered

__all__ = ["KIND_STYLE", "Row", "render_row", "tree_rows"]


def tree_rows(roots: Sequence[TreeNode], active_path: set[str]) -> Iterator[Row]:
    """Every node as rows in display order (no filter, no folding)."""
    return flatten(unfiltered(roots), active_path)


KIND_STYLE = {
    "user": "bold cyan", "assistant": "green", "toolResult": "dim", "bashExecution": "yellow",
    "compaction": "bold magenta", "branch_summary": "magenta", "label": "dim", "custom": "dim",
    "custom_message": "blue", "session_info": "dim", "model_change": "dim",
    "thinking_level_change": "dim",
}


def render_row(row: Row, *, leaf_id: str | None, width: int = 72) -> Text:
    """One line: prefix, marker, id, kind, summary, label (or a fold line)."""
    text = Text(row.prefix, style="dim")
    if row.node is None:
        text.append("• " if row.active else "  ", style="yellow")
        text.append(f"… {row.folded} more entr{'y' if row.folded == 1 else 'ies'} …",
                    style="dim italic")
        if row.folded_labels:
            shown = ", ".join(row.folded_labels[:5])
            more = f" +{len(row.folded_labels) - 5}" if len(row.folded_labels) > 5 else ""
            text.append(f"  [{shown}{more}]", style="yellow")
        return text
    entry = row.node.entry
    kind = entry_kind(entry)
    if row.node.id == leaf_id:
        text.append("● ", style="bold yellow")
    elif row.active:
        text.append("• ", style="yellow")
    else:
        text.append("  ")
    text.append(row.node.id, style="bold" if row.active else "")
    text.append(f" {KIND_NAMES.get(kind, kind):<10} ", style=KIND_STYLE.get(kind, ""))
    text.append(entry_summary(entry, width), style="" if row.active else "dim")
    if row.node.label:
        text.append(f"  [{row.node.label}]", style="bold yellow")
    if row.below:
        text.append(f"  (+{row.below} below)", style="dim italic")
    return text
