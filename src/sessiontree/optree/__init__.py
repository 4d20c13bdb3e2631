"""The operation tree: what an agent run did (runs, turns, operations), its totals and views.

Two modes share one vocabulary (REFERENCE.md 14.2):

* default: :class:`OpTreeBuilder` over typed structs, totals per run and rolled up over
  sub-agents, kept incrementally in O(depth), exact ``Decimal`` costs, events persisted in the
  session file (:class:`SessionSink`, :func:`optree_from_session`);
* compat: :class:`CompatTreeBuilder`, the reference ``SessionTreeBuilder`` byte for byte.

A tour::

    from sessiontree import Session
    from sessiontree.optree import OpTreeBuilder, Usage

    session = Session.create()
    run = OpTreeBuilder(agent_id="main", sink=session)      # events go into the session file
    turn = run.begin_turn()
    op = run.begin_op(turn, "llm", {"provider": "anthropic", "model": "claude-sonnet-4"})
    run.account_llm(op, Usage.from_anthropic(response.usage))  # priced offline, exact Decimal
    run.end_op(op)
    sub = run.spawn_child(run.begin_op(turn, "session", {"name": "agent__fixer"}))
    ...
    run.end_session(True)
    print(run.render_ascii())                                # every depth, own/rollup totals
    session.optree()                                         # rebuilt from the file

OpenTelemetry export is :func:`sessiontree.optree.otel.export_otel` (``[otel]`` extra); the
``sessiontree ops FILE`` command prints the tree and a totals table.
"""

from __future__ import annotations

from ._apply import merge_patch
from ._totals import recompute
from .builder import Listener, OpTreeBuilder, create_builder
from .compat import CompatTreeBuilder, compat_totals, render_reference_ascii
from .errors import (
    CycleError,
    InvalidOpTree,
    OpEnded,
    OpNotFound,
    OpTreeError,
    RunEnded,
    RunNotFound,
    TurnNotFound,
)
from .events import EVENT_PREFIX, OpEvent
from .interop import optree_from_reference, reference_events
from .model import (
    Accounting,
    Blob,
    LoadProblem,
    Log,
    Op,
    OpTree,
    ParentRef,
    Payload,
    Reasoning,
    ReasoningChunk,
    Run,
    Totals,
    Turn,
    Usage,
)
from .persist import SessionSink, fold_events, load_blob, load_optree, optree_from_session
from .pricing import (
    NO_PRICES,
    GenaiPricesTable,
    JsonPriceTable,
    Prices,
    PriceTable,
    builtin_prices,
    cost_of,
    price_accounting,
)
from .render import (
    Flattened,
    flatten,
    optree_to_builtins,
    render_ascii,
    run_to_builtins,
    to_reference_node,
    totals_table,
)

__all__ = [
    "EVENT_PREFIX",
    "NO_PRICES",
    "Accounting",
    "Blob",
    "CompatTreeBuilder",
    "CycleError",
    "Flattened",
    "GenaiPricesTable",
    "InvalidOpTree",
    "JsonPriceTable",
    "Listener",
    "LoadProblem",
    "Log",
    "Op",
    "OpEnded",
    "OpEvent",
    "OpNotFound",
    "OpTree",
    "OpTreeBuilder",
    "OpTreeError",
    "ParentRef",
    "Payload",
    "PriceTable",
    "Prices",
    "Reasoning",
    "ReasoningChunk",
    "Run",
    "RunEnded",
    "RunNotFound",
    "SessionSink",
    "Totals",
    "Turn",
    "TurnNotFound",
    "Usage",
    "builtin_prices",
    "compat_totals",
    "cost_of",
    "create_builder",
    "flatten",
    "fold_events",
    "load_blob",
    "load_optree",
    "merge_patch",
    "optree_from_reference",
    "optree_from_session",
    "optree_to_builtins",
    "price_accounting",
    "recompute",
    "reference_events",
    "render_ascii",
    "render_reference_ascii",
    "run_to_builtins",
    "to_reference_node",
    "totals_table",
]
