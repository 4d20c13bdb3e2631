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
from ..views import Row, fit_prefix, flatten, unfiltered

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


def _marked(prefix: str, row: Row) -> str:
    """The prefix with pi's fold mark: ``⊟`` foldable, ``⊞`` collapsed (in the connector, or
    before a root's text when collapsed)."""
    if not (row.foldable or row.collapsed):
        return prefix
    mark = "⊞" if row.collapsed else "⊟"
    if len(prefix) >= 3 and prefix[-3] in "├└":
        return prefix[:-2] + mark + " "
    return prefix + ("⊞ " if row.collapsed else "")


def render_row(row: Row, *, leaf_id: str | None, width: int = 72, columns: int | None = None,
               fold_marks: bool = False, edit: str | None = None) -> Text:
    """One line: prefix, marker, id, kind, summary, label (or a fold line).

    Args:
        row: the row (:func:`sessiontree.views.flatten`).
        leaf_id: the session's leaf (marked ``●``).
        width: the room for the entry's summary.
        columns: fit the prefix into about this many columns (:func:`fit_prefix`).
        fold_marks: show which rows can be collapsed (the browser's fold keys).
        edit: ``edited`` or ``omitted``: the model sees the entry so (a context edit).
    """
    prefix = fit_prefix(row.prefix, columns) if columns is not None else row.prefix
    if fold_marks:
        prefix = _marked(prefix, row)
    text = Text(prefix, style="dim")
    if row.node is None:
        text.append("• " if row.active else "  ", style="yellow")
        text.append(f"… {row.folded} more entr{'y' if row.folded == 1 else 'ies'} …",
                    style="dim italic")
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
    if edit is not None:
        text.append(f"  {'✎' if edit == 'edited' else '⊘'} {edit}", style="italic magenta")
    if row.node.label:
        text.append(f"  [{row.node.label}]", style="bold yellow")
    if row.below:
        what = "hidden" if row.collapsed else "below"
        text.append(f"  (+{row.below} {what})", style="dim italic")
    return text
