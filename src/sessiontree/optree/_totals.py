"""Totals: incremental updates in O(depth), and the pure full recompute they must equal.

Invariants (checked by the property tests):
* ``run.own`` equals :func:`own_totals` of the run.
* ``run.rollup`` equals ``own`` plus the ``rollup`` of every linked child run, with
  ``agents_run`` counting the run and every descendant run.
* An event touches ``own`` of one run and ``rollup`` of that run and each of its ancestors,
  nothing else: O(depth) per event, never a walk of the tree.
"""

from __future__ import annotations

from collections.abc import Iterator

from .model import Accounting, OpTree, Run, Totals

__all__ = [
    "FIELDS",
    "add_accounting",
    "add_totals",
    "diff_totals",
    "own_totals",
    "recompute",
    "rollup_chain",
]

FIELDS = ("tokens_in", "tokens_out", "cache_read", "cache_write", "reasoning", "cost_usd",
          "unpriced_calls", "llm_calls", "tools_run", "agents_run", "failed_ops")
"""Every counter of :class:`Totals`, in order."""


def add_accounting(totals: Totals, entry: Accounting) -> None:
    """Add one accounting record's usage and cost to ``totals``."""
    usage = entry.usage
    if usage is not None:
        totals.tokens_in += usage.input
        totals.tokens_out += usage.output
        totals.cache_read += usage.cache_read
        totals.cache_write += usage.cache_write
        totals.reasoning += usage.reasoning
    if entry.cost_usd is not None:
        totals.cost_usd += entry.cost_usd
    elif entry.priced_kind:
        totals.unpriced_calls += 1


def add_totals(totals: Totals, other: Totals) -> None:
    """Add every counter of ``other`` to ``totals``."""
    totals.tokens_in += other.tokens_in
    totals.tokens_out += other.tokens_out
    totals.cache_read += other.cache_read
    totals.cache_write += other.cache_write
    totals.reasoning += other.reasoning
    totals.cost_usd += other.cost_usd
    totals.unpriced_calls += other.unpriced_calls
    totals.llm_calls += other.llm_calls
    totals.tools_run += other.tools_run
    totals.agents_run += other.agents_run
    totals.failed_ops += other.failed_ops


def rollup_chain(tree: OpTree, run: Run) -> Iterator[Totals]:
    """``rollup`` of the run, then of each ancestor up to the root: what an event must update."""
    current: Run | None = run
    while current is not None:
        yield current.rollup
        current = tree.runs.get(current.parent.run) if current.parent is not None else None


def own_totals(run: Run) -> Totals:
    """The ``own`` totals of a run, from its ops alone (pure)."""
    totals = Totals(agents_run=1)
    for op in run.ops():
        if op.kind == "llm":
            totals.llm_calls += 1
        elif op.kind == "tool":
            totals.tools_run += 1
        if op.status == "failed":
            totals.failed_ops += 1
        for entry in op.accounting:
            add_accounting(totals, entry)
    return totals


def recompute(tree: OpTree) -> dict[str, tuple[Totals, Totals]]:
    """``(own, rollup)`` of every run of the tree, recomputed from scratch (pure).

    Child links are followed through ``Op.child``; a child id that is not in the tree adds
    nothing. Iterative, so deep trees do not hit the recursion limit.
    """
    result: dict[str, tuple[Totals, Totals]] = {}
    for run in tree.runs.values():
        own = own_totals(run)
        result[run.run_id] = (own, own.copy())
    # children before parents: a post-order over the link structure of every root
    for root in tree.roots():
        order = list(tree.subtree(root))
        for run in reversed(order):
            rollup = result[run.run_id][1]
            for child in tree.children(run):
                add_totals(rollup, result[child.run_id][1])
    return result


def diff_totals(a: Totals, b: Totals) -> list[str]:
    """The names of the counters that differ between two totals."""
    return [name for name in FIELDS if getattr(a, name) != getattr(b, name)]

