"""ai-agent snapshots (``{"version": 1, "opTree": <SessionNode>}``) into operation-tree events.

The reverse of :meth:`~.builder.OpTreeBuilder.to_reference_snapshot`: a reference tree becomes
the events a default-mode builder would have written, so it can be folded into an
:class:`~.model.OpTree` or appended to a session file. What the default mode refuses (a
repeated turn index, a child under a non-``session`` op, a child node attached twice, a
non-finite cost...) is reported as a :class:`~.model.LoadProblem`, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from . import events as ev
from .errors import OpTreeError
from .events import SCHEMA_VERSION, OpEvent
from .model import Accounting, LoadProblem, Log, OpTree

__all__ = ["optree_from_reference", "reference_events"]


def _num(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def reference_events(snapshot: Mapping[str, Any], *, convention: str = "reference") -> tuple[
        list[OpEvent], list[LoadProblem]]:
    """The events that rebuild a reference tree, and what could not be converted.

    Args:
        snapshot: ``{"version": 1, "opTree": node}`` or a bare ``SessionNode``.
        convention: the token convention of the accounting entries (see
            :meth:`~.model.Usage.from_reference`).
    """
    root = snapshot.get("opTree", snapshot)
    out: list[OpEvent] = []
    problems: list[LoadProblem] = []
    seen: set[str] = set()

    def emit(custom_type: str, run_id: str, **data: Any) -> None:
        body = {"v": SCHEMA_VERSION, "run": run_id}
        body.update((k, v) for k, v in data.items() if v is not None)
        out.append(OpEvent(custom_type, body))

    def problem(custom_type: str, reason: str) -> None:
        problems.append(LoadProblem(index=-1, custom_type=custom_type, reason=reason))

    def run(node: Mapping[str, Any], parent: tuple[str, str] | None) -> None:
        run_id = str(node.get("id"))
        if run_id in seen:
            problem(ev.CHILD, f"run {run_id!r} is attached more than once; kept at its first place")
            return
        seen.add(run_id)
        emit(ev.RUN_BEGIN, run_id, t=node.get("startedAt"), traceId=node.get("traceId"),
             agentId=node.get("agentId"), callPath=node.get("callPath"),
             title=node.get("sessionTitle") or "", attrs=node.get("attributes"),
             parent={"run": parent[0], "opId": parent[1]} if parent else None)
        if isinstance(node.get("latestStatus"), str):
            emit(ev.RUN_META, run_id, status=node["latestStatus"])
        turns = node.get("turns") or []
        counts: dict[Any, int] = {}
        for turn in turns:
            counts[turn.get("index")] = counts.get(turn.get("index"), 0) + 1
        for turn in turns:
            emit(ev.TURN_BEGIN, run_id, t=turn.get("startedAt"), turn=turn.get("index"),
                 turnId=turn.get("id"), attrs=turn.get("attributes"))
            # a repeated index (Q6): address the turn by id, so its ops stay in it (or fail)
            ref = turn.get("id") if counts[turn.get("index")] > 1 else turn.get("index")
            for op in turn.get("ops") or []:
                operation(run_id, ref, op)
            if _num(turn.get("endedAt")):
                emit(ev.TURN_END, run_id, t=turn["endedAt"], turn=ref)
        if _num(node.get("endedAt")):
            success = node.get("success")
            emit(ev.RUN_END, run_id, t=node["endedAt"],
                 success=success if isinstance(success, bool) else True,
                 error=node.get("error") if isinstance(node.get("error"), str) else None)

    def operation(run_id: str, turn: Any, op: Mapping[str, Any]) -> None:
        op_id = op.get("opId")
        emit(ev.OP_BEGIN, run_id, t=op.get("startedAt"), opId=op_id, turn=turn,
             kind=op.get("kind"), attrs=op.get("attributes"))
        for log in op.get("logs") or []:
            try:
                value = Log.from_mapping(log)
            except (OpTreeError, AttributeError) as exc:
                problem(ev.LOG, f"op {op_id!r}: a log could not be converted: {exc}")
                continue
            emit(ev.LOG, run_id, opId=op_id, log=msgspec.to_builtins(value))
        for entry in op.get("accounting") or []:
            try:
                value2 = Accounting.from_reference(entry, convention=convention)
            except (OpTreeError, AttributeError) as exc:
                problem(ev.ACCOUNTING, f"op {op_id!r}: an accounting entry could not be "
                                       f"converted: {exc}")
                continue
            emit(ev.ACCOUNTING, run_id, opId=op_id, entry=msgspec.to_builtins(value2))
        reasoning = op.get("reasoning")
        if isinstance(reasoning, Mapping):
            for chunk in reasoning.get("chunks") or []:
                emit(ev.REASONING, run_id, t=chunk.get("ts"), opId=op_id, text=chunk.get("text"))
            if isinstance(reasoning.get("final"), str):
                emit(ev.REASONING_FINAL, run_id, opId=op_id, text=reasoning["final"])
        for key, custom_type in (("request", ev.REQUEST), ("response", ev.RESPONSE)):
            record = op.get(key)
            if isinstance(record, Mapping):
                body = {k: record[k] for k in ("kind", "payload", "size", "truncated")
                        if k in record}
                out.append(OpEvent(custom_type, {"v": SCHEMA_VERSION, "run": run_id,
                                                 "opId": op_id, **body}))
        child = op.get("childSession")
        if isinstance(child, Mapping):
            if op.get("kind") == "session":
                run(child, (run_id, str(op_id)))
            else:  # Q4: kept as a separate root; the link is reported by the fold
                run(child, None)
                emit(ev.CHILD, run_id, opId=op_id, child=str(child.get("id")))
        if _num(op.get("endedAt")):
            status = op.get("status")
            emit(ev.OP_END, run_id, t=op["endedAt"], opId=op_id,
                 status=status if isinstance(status, str) and status else "ok")

    run(root, None)
    return out, problems


def optree_from_reference(snapshot: Mapping[str, Any], *,
                          convention: str = "reference") -> OpTree:
    """An :class:`~.model.OpTree` from an ai-agent snapshot (see :func:`reference_events`).

    Returns:
        The tree; ``problems`` lists what could not be converted or applied.
    """
    from .persist import fold_events

    events, problems = reference_events(snapshot, convention=convention)
    tree = fold_events(events)
    tree.problems[:0] = problems
    return tree
