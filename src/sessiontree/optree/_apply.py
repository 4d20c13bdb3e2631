"""The state changes of the default mode, shared by the live builder and the event fold.

Each function checks everything first and changes the tree only when the change is valid, so
a refused call (raised error) leaves the tree untouched. The builder calls these with typed
values; :func:`apply_event` decodes a persisted event and calls the same function, so folding
the events a builder emitted rebuilds the builder's tree exactly.

Invariants:
* Totals change only here, through :mod:`._totals`: O(depth) per call.
* A child link re-labels the paths of the child's subtree once (O(subtree)); nothing else
  walks more than one run's ancestors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import UNSET

from . import events as ev
from ._totals import add_accounting, add_totals, diff_totals, rollup_chain
from .errors import (
    CycleError,
    InvalidOpTree,
    OpEnded,
    RunEnded,
    RunNotFound,
    TurnNotFound,
)
from .model import (
    Accounting,
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
)

__all__ = [
    "BUILTIN_KINDS",
    "append_accounting",
    "append_log",
    "append_reasoning",
    "apply_event",
    "begin_op",
    "begin_run",
    "begin_turn",
    "check_kind",
    "end_op",
    "end_run",
    "end_turn",
    "json_copy",
    "link_child",
    "mark_unfinished",
    "merge_patch",
    "set_payload",
    "set_reasoning_final",
    "set_run_meta",
]

BUILTIN_KINDS = frozenset({"llm", "tool", "session", "system"})
"""The op kinds with a meaning; custom kinds are namespaced (``myorg.retrieval``)."""


def json_copy(value: Any) -> Any:
    """A deep copy as JSON builtins (string keys); raises for values JSON cannot hold."""
    try:
        return msgspec.to_builtins(value, str_keys=True)
    except TypeError as exc:
        raise InvalidOpTree(f"not JSON data: {exc}") from None


def _attrs(value: Mapping[str, Any] | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidOpTree(f"attributes must be a mapping, got {type(value).__name__}")
    copied: dict[str, Any] = json_copy(dict(value))
    return copied


def _ms(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOpTree(f"{name} must be integer epoch milliseconds, got {value!r}")
    return value


def check_kind(kind: object) -> str:
    """``kind`` if it is a built-in kind or a namespaced custom one; else raise."""
    if isinstance(kind, str) and (kind in BUILTIN_KINDS or (
            "." in kind and all(part for part in kind.split(".")))):
        return kind
    raise InvalidOpTree(f"op kind must be one of {sorted(BUILTIN_KINDS)} or a namespaced custom "
                        f"kind such as 'myorg.retrieval', got {kind!r}")


def _live_run(tree: OpTree, run_id: str) -> Run:
    run = tree.run(run_id)
    if run.ended_at is not None:
        raise RunEnded(f"run {run_id!r} has ended; it takes no more changes")
    return run


def _live_op(tree: OpTree, op_id: str) -> tuple[Op, Run]:
    op = tree.op(op_id)
    return op, _live_run(tree, op.run_id)


# --- runs ------------------------------------------------------------------------------------


def _check_link(tree: OpTree, op: Op, child: Run) -> None:
    if op.kind != "session":
        raise InvalidOpTree(f"a child run links only to an op of kind 'session'; op {op.op_id!r} "
                            f"is {op.kind!r}")
    if op.child is not None and op.child != child.run_id:
        raise CycleError(f"op {op.op_id!r} already links child run {op.child!r}")
    if op.child == child.run_id and child.parent is not None:
        raise CycleError(f"run {child.run_id!r} is already linked under op {op.op_id!r}")
    if child.parent is not None:
        raise CycleError(f"run {child.run_id!r} already has a parent "
                         f"(op {child.parent.op_id!r} of run {child.parent.run!r})")
    parent_run = tree.run(op.run_id)
    if parent_run is child or any(r is child for r in tree.ancestors(parent_run)):
        raise CycleError(f"run {child.run_id!r} is an ancestor of op {op.op_id!r}: "
                         "linking it would make a cycle")


def _repath(tree: OpTree, run: Run, prefix: str) -> None:
    stack = [(run, prefix)]
    while stack:
        current, base = stack.pop()
        for op in current.ops():
            path = f"{base}.{op.local_path}"
            if op.path != path:
                op.path = path
                op.logs = [msgspec.structs.replace(log, path=path) for log in op.logs]
            if op.child is not None and op.child in tree.runs:
                stack.append((tree.runs[op.child], path))


def _link(tree: OpTree, op: Op, child: Run) -> None:
    parent_run = tree.runs[op.run_id]
    child.parent = ParentRef(run=parent_run.run_id, op_id=op.op_id)
    op.child = child.run_id
    tree._pending.pop(child.run_id, None)
    _repath(tree, child, op.path)
    for rollup in rollup_chain(tree, parent_run):
        add_totals(rollup, child.rollup)


def begin_run(tree: OpTree, run: Run, parent: ParentRef | None = None) -> None:
    """Add a new run; with ``parent``, link it under that ``session`` op at once."""
    if run.run_id in tree.runs:
        raise InvalidOpTree(f"run {run.run_id!r} exists already")
    _ms("started_at", run.started_at)
    op = None
    if parent is not None:
        op, _ = _live_op(tree, parent.op_id)
        if op.run_id != parent.run:
            raise InvalidOpTree(f"op {parent.op_id!r} belongs to run {op.run_id!r}, "
                                f"not {parent.run!r}")
        _check_link(tree, op, run)
    tree.runs[run.run_id] = run
    if op is not None:
        _link(tree, op, run)
    elif run.run_id in tree._pending:
        pending = tree._pending[run.run_id]
        waiting = tree.ops.get(pending.op_id)
        if waiting is not None:
            _check_link(tree, waiting, run)
            _link(tree, waiting, run)


def set_run_meta(tree: OpTree, run_id: str, *, title: Any = UNSET, status: Any = UNSET) -> None:
    """Set a run's title and/or latest status."""
    run = tree.run(run_id)
    if title is not UNSET and not isinstance(title, str):
        raise InvalidOpTree(f"a title must be a string, got {title!r}")
    if status is not UNSET and status is not None and not isinstance(status, str):
        raise InvalidOpTree(f"a status must be a string, got {status!r}")
    if title is not UNSET:
        run.title = title
    if status is not UNSET:
        run.latest_status = status


def end_run(tree: OpTree, run_id: str, t: int, success: bool, error: str | None) -> None:
    """End a run (once)."""
    run = _live_run(tree, run_id)
    _ms("t", t)
    if not isinstance(success, bool):
        raise InvalidOpTree(f"success must be a boolean, got {success!r}")
    if error is not None and not isinstance(error, str):
        raise InvalidOpTree(f"an error must be a string, got {error!r}")
    run.ended_at = t
    run.success = success
    run.error = error


def link_child(tree: OpTree, op_id: str, child_run_id: str, file: str | None = None) -> None:
    """Link a child run under a ``session`` op; a child stored in another ``file`` that is not
    loaded yet is recorded and linked when its run begins."""
    op, _ = _live_op(tree, op_id)
    child = tree.runs.get(child_run_id)
    if child is None:
        if file is None:
            raise RunNotFound(f"no run {child_run_id!r} in the operation tree")
        if op.kind != "session":
            raise InvalidOpTree(f"a child run links only to an op of kind 'session'; op "
                                f"{op_id!r} is {op.kind!r}")
        if op.child is not None:
            raise CycleError(f"op {op_id!r} already links child run {op.child!r}")
        op.child, op.child_file = child_run_id, file
        tree._pending[child_run_id] = ParentRef(run=op.run_id, op_id=op_id)
        return
    _check_link(tree, op, child)
    _link(tree, op, child)
    if file is not None:
        op.child_file = file


# --- turns and ops ---------------------------------------------------------------------------


def begin_turn(tree: OpTree, run_id: str, turn_id: str, index: int, t: int,
               attributes: Mapping[str, Any] | None = None) -> Turn:
    """Add a turn; indexes are non-negative integers, unique in their run."""
    run = _live_run(tree, run_id)
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise InvalidOpTree(f"a turn index must be a non-negative integer, got {index!r}")
    if (run_id, index) in tree._turns:
        raise InvalidOpTree(f"run {run_id!r} has a turn {index} already; turn indexes are unique")
    if turn_id in tree._turn_ids:
        raise InvalidOpTree(f"turn id {turn_id!r} exists already")
    turn = Turn(turn_id=turn_id, run_id=run_id, index=index, started_at=_ms("t", t),
                attributes=_attrs(attributes))
    run.turns.append(turn)
    tree._turns[(run_id, index)] = turn
    tree._turn_ids[turn_id] = turn
    return turn


def _turn(tree: OpTree, run_id: str, turn: int | str) -> Turn:
    found = tree._turn_ids.get(turn) if isinstance(turn, str) else tree._turns.get((run_id, turn))
    if found is None or found.run_id != run_id:
        raise TurnNotFound(f"run {run_id!r} has no turn {turn!r}")
    return found


def end_turn(tree: OpTree, run_id: str, turn: int | str, t: int,
             attributes: Mapping[str, Any] | None = None) -> Turn:
    """End a turn (once), merging attributes (new keys win)."""
    _live_run(tree, run_id)
    node = _turn(tree, run_id, turn)
    if node.ended_at is not None:
        raise InvalidOpTree(f"turn {node.index} of run {run_id!r} has ended already")
    extra = _attrs(attributes)
    node.ended_at = _ms("t", t)
    if extra:
        node.attributes = {**node.attributes, **extra}
    return node


def begin_op(tree: OpTree, run_id: str, op_id: str, turn: int | str, kind: str, t: int,
             attributes: Mapping[str, Any] | None = None) -> Op:
    """Add an op at the end of a turn; its path is fixed here."""
    run = _live_run(tree, run_id)
    node = _turn(tree, run_id, turn)
    check_kind(kind)
    if not isinstance(op_id, str) or not op_id:
        raise InvalidOpTree(f"an op id must be a non-empty string, got {op_id!r}")
    if op_id in tree.ops:
        raise InvalidOpTree(f"op {op_id!r} exists already")
    seq = len(node.ops) + 1
    local = f"{node.index}-{seq}"
    path = local
    if run.parent is not None and run.parent.op_id in tree.ops:
        path = f"{tree.ops[run.parent.op_id].path}.{local}"
    op = Op(op_id=op_id, run_id=run_id, kind=kind, turn=node.index, seq=seq, path=path,
            local_path=local, started_at=_ms("t", t), attributes=_attrs(attributes))
    node.ops.append(op)
    tree.ops[op_id] = op
    if kind in ("llm", "tool"):
        for totals in (run.own, *rollup_chain(tree, run)):
            if kind == "llm":
                totals.llm_calls += 1
            else:
                totals.tools_run += 1
    return op


def end_op(tree: OpTree, op_id: str, t: int, status: str,
           attributes: Mapping[str, Any] | None = None, duration_ms: int | None = None) -> Op:
    """End an op (once) with a status (``ok``, ``failed``...), merging attributes."""
    op, run = _live_op(tree, op_id)
    if op.ended_at is not None:
        raise OpEnded(f"op {op_id!r} has ended already (status {op.status!r})")
    if not isinstance(status, str) or not status:
        raise InvalidOpTree(f"a status must be a non-empty string, got {status!r}")
    _ms("t", t)
    if duration_ms is not None and (isinstance(duration_ms, bool)
                                    or not isinstance(duration_ms, int) or duration_ms < 0):
        raise InvalidOpTree(f"a duration must be a non-negative integer, got {duration_ms!r}")
    extra = _attrs(attributes)
    op.ended_at = t
    op.status = status
    op.duration_ms = duration_ms if duration_ms is not None else max(0, t - op.started_at)
    if extra:
        op.attributes = {**op.attributes, **extra}
    if status == "failed":
        for totals in (run.own, *rollup_chain(tree, run)):
            totals.failed_ops += 1
    return op


def append_log(tree: OpTree, op_id: str, log: Log) -> Log:
    """Append a log (a copy carrying the op's paths)."""
    op, _ = _live_op(tree, op_id)
    stored = msgspec.structs.replace(log, path=op.path, local_path=op.local_path)
    op.logs.append(stored)
    return stored


def append_accounting(tree: OpTree, op_id: str, entry: Accounting) -> None:
    """Append an accounting record and add it to ``own`` and every ``rollup`` up the chain."""
    op, run = _live_op(tree, op_id)
    if not isinstance(entry, Accounting):
        raise InvalidOpTree(f"expected an Accounting record, got {type(entry).__name__}")
    op.accounting.append(entry)
    add_accounting(run.own, entry)
    for rollup in rollup_chain(tree, run):
        add_accounting(rollup, entry)


def append_reasoning(tree: OpTree, op_id: str, text: str, ts: int) -> None:
    """Append a reasoning chunk."""
    op, _ = _live_op(tree, op_id)
    if not isinstance(text, str):
        raise InvalidOpTree(f"reasoning text must be a string, got {type(text).__name__}")
    chunk = ReasoningChunk(text=text, ts=_ms("ts", ts))
    if op.reasoning is None:
        op.reasoning = Reasoning()
    op.reasoning.chunks.append(chunk)


def set_reasoning_final(tree: OpTree, op_id: str, text: str) -> None:
    """Set the final reasoning text (a later call replaces it)."""
    op, _ = _live_op(tree, op_id)
    if not isinstance(text, str):
        raise InvalidOpTree(f"reasoning text must be a string, got {type(text).__name__}")
    if op.reasoning is None:
        op.reasoning = Reasoning()
    op.reasoning.final = text


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON Merge Patch (RFC 7386): objects merge recursively, ``null`` deletes a key,
    anything else (arrays included) replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def set_payload(tree: OpTree, op_id: str, which: str, record: Payload) -> Payload:
    """Set the op's ``request`` or ``response``; a later call merges into the first (D8)."""
    op, _ = _live_op(tree, op_id)
    if which not in ("request", "response"):
        raise InvalidOpTree(f"which must be 'request' or 'response', got {which!r}")
    old: Payload | None = getattr(op, which)
    if old is None:
        new = msgspec.structs.replace(record)
    else:
        if record.payload is not UNSET:
            base = None if old.payload is UNSET else old.payload
            payload, blob = merge_patch(base, record.payload), None
        elif record.blob is not None:
            payload, blob = UNSET, record.blob
        else:
            payload, blob = old.payload, old.blob
        new = Payload(
            kind=record.kind if record.kind is not None else old.kind,
            payload=payload,
            blob=blob,
            preview=record.preview if record.preview is not None else (
                old.preview if record.payload is UNSET else None),
            size=record.size if record.size is not None else old.size,
            truncated=record.truncated if record.truncated is not None else old.truncated,
        )
    setattr(op, which, new)
    return new


def mark_unfinished(tree: OpTree) -> None:
    """Mark every run, turn and op that never ended as ``unfinished`` (a loaded snapshot)."""
    for run in tree.runs.values():
        run.unfinished = run.ended_at is None
        for turn in run.turns:
            turn.unfinished = turn.ended_at is None
            for op in turn.ops:
                op.unfinished = op.ended_at is None


# --- the event fold ----------------------------------------------------------------------------


def _totals_of(value: Any) -> Totals | None:
    if value is None:
        return None
    return msgspec.convert(value, Totals)


def apply_event(tree: OpTree, custom_type: str, data: Mapping[str, Any]) -> list[str]:
    """Apply one persisted event to ``tree``.

    Returns:
        Consistency notes (a ``run.end`` snapshot that differs from the folded totals).

    Raises:
        OpTreeError: the event cannot be applied (unknown run or op, invalid values).
        msgspec.ValidationError: a value has the wrong shape.
    """
    if not isinstance(data, Mapping):
        raise InvalidOpTree("event data is not an object")
    version = data.get("v", 1)
    if version != 1:
        raise InvalidOpTree(f"unsupported event schema version {version!r}")
    run_id = data.get("run")
    if custom_type == ev.BATCH:
        notes: list[str] = []
        for item in data.get("events") or []:
            notes.extend(apply_event(tree, item["customType"], item["data"]))
        return notes
    if not isinstance(run_id, str):
        raise InvalidOpTree("event data has no run id")
    if custom_type == ev.RUN_BEGIN:
        parent = data.get("parent")
        begin_run(tree, Run(
            run_id=run_id, started_at=data["t"], trace_id=data.get("traceId"),
            agent_id=data.get("agentId"), call_path=data.get("callPath"),
            title=data.get("title") or "", attributes=_attrs(data.get("attrs"))),
            parent=ParentRef(run=parent["run"], op_id=parent["opId"]) if parent else None)
    elif custom_type == ev.RUN_META:
        set_run_meta(tree, run_id, title=data.get("title", UNSET), status=data.get("status", UNSET))
    elif custom_type == ev.TURN_BEGIN:
        begin_turn(tree, run_id, data["turnId"], data["turn"], data["t"], data.get("attrs"))
    elif custom_type == ev.TURN_END:
        end_turn(tree, run_id, data["turn"], data["t"], data.get("attrs"))
    elif custom_type == ev.OP_BEGIN:
        op = begin_op(tree, run_id, data["opId"], data["turn"], data["kind"], data["t"],
                      data.get("attrs"))
        seq = data.get("seq")
        if seq is not None and seq != op.seq:
            return [(f"op {op.op_id!r} was recorded at position {seq} of its turn but folds to "
                     f"{op.seq}")]
    elif custom_type == ev.OP_END:
        end_op(tree, data["opId"], data["t"], data["status"], data.get("attrs"),
               data.get("durationMs"))
    elif custom_type == ev.LOG:
        append_log(tree, data["opId"], msgspec.convert(data["log"], Log))
    elif custom_type == ev.ACCOUNTING:
        append_accounting(tree, data["opId"], msgspec.convert(data["entry"], Accounting))
    elif custom_type == ev.REASONING:
        append_reasoning(tree, data["opId"], data["text"], data["t"])
    elif custom_type == ev.REASONING_FINAL:
        set_reasoning_final(tree, data["opId"], data["text"])
    elif custom_type in (ev.REQUEST, ev.RESPONSE):
        record = Payload.from_mapping(data)
        set_payload(tree, data["opId"], "request" if custom_type == ev.REQUEST else "response",
                    record)
    elif custom_type == ev.CHILD:
        link_child(tree, data["opId"], data["child"], data.get("file"))
    elif custom_type == ev.RUN_END:
        run = tree.run(run_id)
        notes = []
        for scope in ("own", "rollup"):
            snapshot = _totals_of(data.get(scope))
            if snapshot is not None:
                differs = diff_totals(snapshot, getattr(run, scope))
                if differs:
                    notes.append(f"run {run_id!r}: the {scope} totals recorded at its end differ "
                                 f"from the folded events in {', '.join(differs)}")
        end_run(tree, run_id, data["t"], data["success"], data.get("error"))
        return notes
    else:
        raise InvalidOpTree(f"unknown operation-tree event type {custom_type!r}")
    return []

