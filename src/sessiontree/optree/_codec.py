"""Event ``data`` objects for each change, and the events that rebuild a stored run.

The builder writes events with these functions and :func:`events_of_run` uses the same ones
to regenerate a run's events from its state (for attaching a run recorded elsewhere, or for
importing a tree), so both paths produce data the fold reads identically.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
from msgspec import UNSET

from . import events as ev
from .events import SCHEMA_VERSION, OpEvent
from .model import Accounting, Log, Op, OpTree, Payload, ReasoningChunk, Run, Turn

__all__ = [
    "data_accounting",
    "data_child",
    "data_log",
    "data_op_begin",
    "data_op_end",
    "data_payload",
    "data_reasoning",
    "data_run_begin",
    "data_run_end",
    "data_turn_begin",
    "data_turn_end",
    "events_of_run",
]


def _base(run_id: str, **data: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"v": SCHEMA_VERSION, "run": run_id}
    out.update((k, v) for k, v in data.items() if v is not None and v is not UNSET)
    return out


def data_run_begin(run: Run) -> dict[str, Any]:
    """``run.begin``: identity, start time and (for a sub-agent run) its parent."""
    parent = {"run": run.parent.run, "opId": run.parent.op_id} if run.parent else None
    return _base(run.run_id, t=run.started_at, traceId=run.trace_id, agentId=run.agent_id,
                 callPath=run.call_path, title=run.title, attrs=run.attributes or None,
                 parent=parent)


def data_turn_begin(turn: Turn) -> dict[str, Any]:
    """``turn.begin``."""
    return _base(turn.run_id, t=turn.started_at, turn=turn.index, turnId=turn.turn_id,
                 attrs=turn.attributes or None)


def data_turn_end(turn: Turn, attributes: dict[str, Any] | None) -> dict[str, Any]:
    """``turn.end`` with the attributes merged at the end (not the merged result)."""
    return _base(turn.run_id, t=turn.ended_at, turn=turn.index, attrs=attributes or None)


def data_op_begin(op: Op, attributes: dict[str, Any] | None) -> dict[str, Any]:
    """``op.begin`` (``path`` is the global path when the op began)."""
    return _base(op.run_id, t=op.started_at, opId=op.op_id, turn=op.turn, seq=op.seq,
                 path=op.path, kind=op.kind, attrs=attributes or None)


def data_op_end(op: Op, attributes: dict[str, Any] | None) -> dict[str, Any]:
    """``op.end``."""
    return _base(op.run_id, t=op.ended_at, opId=op.op_id, status=op.status,
                 attrs=attributes or None, durationMs=op.duration_ms)


def data_log(op: Op, log: Log) -> dict[str, Any]:
    """``op.log``."""
    return _base(op.run_id, opId=op.op_id, log=msgspec.to_builtins(log))


def data_accounting(op: Op, entry: Accounting) -> dict[str, Any]:
    """``op.accounting``: the normalised entry, cost as a decimal string with its source."""
    return _base(op.run_id, opId=op.op_id, entry=msgspec.to_builtins(entry))


def data_reasoning(op: Op, chunk: ReasoningChunk) -> dict[str, Any]:
    """``op.reasoning`` (one chunk)."""
    return _base(op.run_id, t=chunk.ts, opId=op.op_id, text=chunk.text)


def data_reasoning_final(op: Op, text: str) -> dict[str, Any]:
    """``op.reasoning.final``."""
    return _base(op.run_id, opId=op.op_id, text=text)


def data_payload(op: Op, record: Payload) -> dict[str, Any]:
    """``op.request`` / ``op.response``: the record as given (the fold merges it)."""
    body: dict[str, Any] = msgspec.to_builtins(record)
    if record.payload is not UNSET and record.payload is None:
        body["payload"] = None  # a JSON null payload is a value, not an absence
    return {"v": SCHEMA_VERSION, "run": op.run_id, "opId": op.op_id, **body}


def data_child(op: Op, child_run_id: str, file: str | None) -> dict[str, Any]:
    """``op.child``."""
    return _base(op.run_id, opId=op.op_id, child=child_run_id, file=file)


def data_run_end(run: Run) -> dict[str, Any]:
    """``run.end`` with the run's totals in both scopes (the loader's consistency check)."""
    data = _base(run.run_id, t=run.ended_at, success=run.success, error=run.error,
                 own=msgspec.to_builtins(run.own), rollup=msgspec.to_builtins(run.rollup))
    return data


def events_of_run(tree: OpTree, run: Run, *, with_parent: bool = True) -> Iterator[OpEvent]:
    """Events that rebuild ``run`` and its linked descendants when folded into a tree.

    Args:
        tree: the tree holding the run.
        run: the run to regenerate.
        with_parent: write the run's parent link into its ``run.begin`` (set to ``False`` for
            a run that will be linked by a ``child`` event instead).
    """
    begin = data_run_begin(run)
    if not with_parent:
        begin.pop("parent", None)
    yield OpEvent(ev.RUN_BEGIN, begin)
    if run.latest_status is not None:
        yield OpEvent(ev.RUN_META, _base(run.run_id, status=run.latest_status))
    for turn in run.turns:
        yield OpEvent(ev.TURN_BEGIN, data_turn_begin(turn))
        for op in turn.ops:
            yield OpEvent(ev.OP_BEGIN, data_op_begin(op, op.attributes))
            for log in op.logs:
                yield OpEvent(ev.LOG, data_log(op, log))
            for entry in op.accounting:
                yield OpEvent(ev.ACCOUNTING, data_accounting(op, entry))
            if op.reasoning is not None:
                for chunk in op.reasoning.chunks:
                    yield OpEvent(ev.REASONING, data_reasoning(op, chunk))
                if op.reasoning.final is not None:
                    yield OpEvent(ev.REASONING_FINAL, data_reasoning_final(op, op.reasoning.final))
            for which, kind in (("request", ev.REQUEST), ("response", ev.RESPONSE)):
                record = getattr(op, which)
                if record is not None:
                    yield OpEvent(kind, data_payload(op, record))
            if op.child is not None:
                child = tree.runs.get(op.child)
                if child is not None:
                    yield from events_of_run(tree, child)
                else:
                    yield OpEvent(ev.CHILD, data_child(op, op.child, op.child_file))
            if op.ended_at is not None:
                yield OpEvent(ev.OP_END, data_op_end(op, None))
        if turn.ended_at is not None:
            yield OpEvent(ev.TURN_END, data_turn_end(turn, None))
    if run.ended_at is not None:
        yield OpEvent(ev.RUN_END, data_run_end(run))
