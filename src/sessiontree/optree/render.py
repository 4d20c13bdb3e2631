"""Views of an operation tree: ASCII tree, totals table, flatten, plain JSON, reference shape.

Everything here reads stored values (paths, totals); nothing recomputes totals, except
:func:`to_reference_node`, which computes the reference's own totals for its shape.

The default ASCII layout (``style="tree"``) fixes the reference's rendering quirks (D11):
one space after a bar, a ``│`` continuation under every non-last branch, every depth of
sub-agent runs with full lines and their own totals, request and response previews each on
their own, newlines shown as ``\\n``, truncation by code points, ``[provider:model]`` from the
first non-empty string of ``model`` and ``name``.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from .. import _json
from ._jsformat import iso
from .compat import compat_totals, render_reference_ascii
from .model import Accounting, Log, Op, OpTree, Payload, Run, Totals, Turn

__all__ = [
    "Flattened",
    "flatten",
    "format_cost",
    "optree_to_builtins",
    "render_ascii",
    "run_to_builtins",
    "to_reference_node",
    "totals_table",
]


class Flattened(msgspec.Struct, frozen=True):
    """Every log and accounting record of a run and its descendant runs, by time."""

    logs: list[Log]
    accounting: list[Accounting]


def _walk_ops(tree: OpTree, run: Run) -> Iterator[Op]:
    """Ops depth first: each op, then (for a linked child) the child run's ops."""
    stack: list[Iterator[Op]] = [run.ops()]
    while stack:
        op = next(stack[-1], None)
        if op is None:
            stack.pop()
            continue
        yield op
        if op.child is not None and op.child in tree.runs:
            stack.append(tree.runs[op.child].ops())


def flatten(tree: OpTree, run: Run) -> Flattened:
    """Logs and accounting of ``run`` and its descendants, stably sorted by timestamp (ties keep
    tree order: an op's logs, its accounting, then its child run's)."""
    logs: list[Log] = []
    accounting: list[Accounting] = []
    for op in _walk_ops(tree, run):
        logs.extend(op.logs)
        accounting.extend(op.accounting)
    logs.sort(key=lambda log: log.timestamp)
    accounting.sort(key=lambda entry: entry.timestamp)
    return Flattened(logs=logs, accounting=accounting)


# --- text --------------------------------------------------------------------------------------


def format_cost(cost: Decimal) -> str:
    """``$`` and the exact decimal, without exponent or trailing zeros (``$0.0062775``)."""
    if cost == 0:
        return "$0"
    text = format(cost.normalize(), "f")
    return "$" + text


def _one_line(text: str, limit: int) -> str:
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dur(start: int | None, end: int | None) -> str:
    return f"{max(0, end - start)}ms" if start is not None and end is not None else ""


def _totals_text(t: Totals, *, agents: bool) -> str:
    parts = [f"in={t.tokens_in}", f"cR={t.cache_read}", f"cW={t.cache_write}",
             f"out={t.tokens_out}"]
    if t.reasoning:
        parts.append(f"reasoning={t.reasoning}")
    parts.append(f"cost={format_cost(t.cost_usd)}")
    if t.unpriced_calls:
        parts.append(f"unpriced={t.unpriced_calls}")
    parts += [f"llm={t.llm_calls}", f"tools={t.tools_run}"]
    if agents:
        parts.append(f"agents={t.agents_run}")
    parts.append(f"failed={t.failed_ops}")
    return "tokens " + " ".join(parts)


class _Node:
    __slots__ = ("children", "details", "text")

    def __init__(self, text: str, details: list[str] | None = None,
                 children: list[_Node] | None = None) -> None:
        self.text = text
        self.details = details or []
        self.children = children or []


def _meta(attrs: dict[str, Any]) -> str:
    provider = attrs.get("provider")
    name = next((v for v in (attrs.get("model"), attrs.get("name"))
                 if isinstance(v, str) and v), None)
    parts = [p for p in (provider if isinstance(provider, str) and provider else None, name) if p]
    return f" [{':'.join(parts)}]" if parts else ""


def _payload_text(record: Payload) -> str:
    if record.blob is not None:
        text = f"<blob sha256:{record.blob.sha256[:12]} {record.blob.size} bytes>"
        if record.preview:
            text += " " + record.preview
    elif record.payload is UNSET:
        text = "<none>"
    elif isinstance(record.payload, str):
        text = record.payload
    else:
        text = _json.dumps(record.payload).decode("utf-8", "surrogatepass")
    out = _one_line(text, 200)
    if record.size is not None:
        out += f" (size={record.size})"
    if record.truncated:
        out += " [truncated]"
    return out


def _op_node(tree: OpTree, op: Op) -> _Node:
    line = f"{op.kind.upper()} {op.path} op={op.op_id}{_meta(op.attributes)} {iso(op.started_at)}"
    if op.ended_at is not None:
        duration = op.duration_ms if op.duration_ms is not None else max(
            0, op.ended_at - op.started_at)
        line += f" → {iso(op.ended_at)} ({duration}ms)"
    if op.status is not None:
        line += f" status={op.status}"
        error = op.attributes.get("error")
        if op.status == "failed" and isinstance(error, str) and error:
            line += f" error={_one_line(error, 200)}"
    elif op.unfinished:
        line += " status=unfinished"
    detail = f"logs={len(op.logs)} accounting={len(op.accounting)}"
    if any(a.usage is not None for a in op.accounting):
        usage = op.usage
        detail += (f" tokens in={usage.input} cR={usage.cache_read} cW={usage.cache_write}"
                   f" out={usage.output}")
        if usage.reasoning:
            detail += f" reasoning={usage.reasoning}"
    cost = op.cost_usd
    if cost is not None:
        sources = sorted({a.cost_source for a in op.accounting if a.cost_usd is not None})
        detail += f" cost={format_cost(cost)} ({'+'.join(sources)})"
    unpriced = sum(1 for a in op.accounting if a.cost_usd is None and a.priced_kind)
    if unpriced:
        detail += f" unpriced={unpriced}"
    for entry in op.accounting:
        if entry.kind == "tool" and (entry.server or entry.command):
            detail += f" tool={entry.server or ''}:{entry.command or ''}"
            if entry.chars_in is not None or entry.chars_out is not None:
                detail += f" chars in={entry.chars_in} out={entry.chars_out}"
            break
    details = [detail]
    if op.reasoning is not None:
        text = f"reasoning: chunks={len(op.reasoning.chunks)}"
        if op.reasoning.final is not None:
            text += " final=" + _one_line(op.reasoning.final, 120)
        details.append(text)
    if op.request is not None:
        details.append("request: " + _payload_text(op.request))
    if op.response is not None:
        details.append("response: " + _payload_text(op.response))
    children = []
    if op.child is not None:
        child = tree.runs.get(op.child)
        if child is not None:
            children.append(_run_node(tree, child))
        else:
            where = f" in {op.child_file}" if op.child_file else ""
            children.append(_Node(f"Run {op.child} (not loaded{where})"))
    return _Node(line, details, children)


def _turn_node(tree: OpTree, turn: Turn) -> _Node:
    line = f"Turn#{turn.index} {iso(turn.started_at)}"
    if turn.ended_at is not None:
        line += f" → {iso(turn.ended_at)} ({_dur(turn.started_at, turn.ended_at)})"
    elif turn.unfinished:
        line += " unfinished"
    details = []
    prompts = turn.attributes.get("prompts")
    if isinstance(prompts, dict):
        for key, label in (("system", "system: "), ("user", "user:   ")):
            text = prompts.get(key)
            if isinstance(text, str) and text:
                details.append(label + _one_line(text, 120))
    return _Node(line, details, [_op_node(tree, op) for op in turn.ops])


def _run_node(tree: OpTree, run: Run) -> _Node:
    line = f"Run {run.run_id}"
    for label, value in (("agent", run.agent_id), ("trace", run.trace_id),
                         ("callPath", run.call_path)):
        if value:
            line += f" {label}={value}"
    if run.title:
        line += f" title={_one_line(run.title, 120)}"
    status = f"started={iso(run.started_at)}"
    if run.ended_at is not None:
        status += f" ended={iso(run.ended_at)} dur={_dur(run.started_at, run.ended_at)}"
    if run.success is not None:
        status += f" success={'true' if run.success else 'false'}"
    if run.error:
        status += f" error={_one_line(run.error, 200)}"
    if run.latest_status:
        status += f" status={_one_line(run.latest_status, 120)}"
    if run.unfinished:
        status += " unfinished"
    children = [
        _Node(status),
        _Node("own    " + _totals_text(run.own, agents=False)),
        _Node("rollup " + _totals_text(run.rollup, agents=True)),
        _Node(f"turns={len(run.turns)}"),
    ]
    children.extend(_turn_node(tree, turn) for turn in run.turns)
    return _Node(line, [], children)


def _lines(node: _Node, first: str, rest: str, out: list[str]) -> None:
    out.append(first + node.text)
    bar = "│  " if node.children else "   "
    out.extend(rest + bar + detail for detail in node.details)
    for i, child in enumerate(node.children):
        last = i == len(node.children) - 1
        _lines(child, rest + ("└─ " if last else "├─ "), rest + ("   " if last else "│  "), out)


def render_ascii(tree: OpTree, run: Run | None = None, *,
                 style: Literal["tree", "compat"] = "tree") -> str:
    """The run (default: the first root) as text, lines joined by ``\\n``, no final newline.

    Args:
        tree: the tree.
        run: the run to render with its descendants.
        style: ``tree`` (the default layout) or ``compat`` (the reference's layout and quirks,
            over :func:`to_reference_node` of the same data).
    """
    target = run if run is not None else tree.root
    if target is None:
        return "(no operation tree)"
    if style == "compat":
        return render_reference_ascii(to_reference_node(tree, target))
    out: list[str] = []
    _lines(_run_node(tree, target), "", "", out)
    return "\n".join(out)


def _depths(tree: OpTree, run: Run) -> Iterator[tuple[int, Run]]:
    stack = [(0, run)]
    while stack:
        depth, current = stack.pop()
        yield depth, current
        stack.extend((depth + 1, c) for c in reversed(tree.children(current)))


def totals_table(tree: OpTree, run: Run | None = None) -> str:
    """A text table of every run's ``own`` and ``rollup`` totals (sub-agent runs indented)."""
    roots = [run] if run is not None else tree.roots()
    header = ["run", "agent", "scope", "in", "cR", "cW", "out", "reasoning", "cost", "unpriced",
              "llm", "tools", "agents", "failed"]
    rows: list[list[str]] = []
    for root in roots:
        for depth, current in _depths(tree, root):
            for scope in ("own", "rollup"):
                t: Totals = getattr(current, scope)
                rows.append([
                    ("  " * depth + current.run_id) if scope == "own" else "",
                    (current.agent_id or "") if scope == "own" else "",
                    scope, str(t.tokens_in), str(t.cache_read), str(t.cache_write),
                    str(t.tokens_out), str(t.reasoning), format_cost(t.cost_usd),
                    str(t.unpriced_calls), str(t.llm_calls), str(t.tools_run), str(t.agents_run),
                    str(t.failed_ops)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    left = {0, 1, 2}

    def fmt(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, rows)])


# --- data ----------------------------------------------------------------------------------------


def run_to_builtins(tree: OpTree, run: Run) -> dict[str, Any]:
    """One run as plain JSON data (camelCase), linked child runs nested under their op as
    ``childRun``; costs are decimal strings and totals carry ``tokensInTotal``."""
    out: dict[str, Any] = msgspec.to_builtins(run)
    out["own"] = run.own.to_builtins()
    out["rollup"] = run.rollup.to_builtins()
    for turn_data, turn in zip(out["turns"], run.turns):
        for op_data, op in zip(turn_data["ops"], turn.ops):
            if op.child is not None and op.child in tree.runs:
                op_data["childRun"] = run_to_builtins(tree, tree.runs[op.child])
    return out


def optree_to_builtins(tree: OpTree) -> dict[str, Any]:
    """The whole tree as plain JSON data, for the HTML operations panel and ``--json``.

    Returns:
        ``{"version": 1, "roots": [run...], "problems": [...]}`` where each run is
        :func:`run_to_builtins` (children nested).
    """
    return {
        "version": 1,
        "roots": [run_to_builtins(tree, root) for root in tree.roots()],
        "problems": [msgspec.to_builtins(p) for p in tree.problems],
    }


def _log_reference(log: Log) -> dict[str, Any]:
    fields = dict(log.fields or {})
    caller_path = fields.pop("callerPath", None)
    return {"timestamp": log.timestamp, "severity": log.severity, **fields,
            "message": log.message, "path": caller_path if caller_path is not None else log.path}


def _payload_reference(record: Payload, request: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if request:
        out["kind"] = record.kind if record.kind is not None else UNSET
    out["payload"] = record.payload if record.blob is None else {
        "blob": msgspec.to_builtins(record.blob), "preview": record.preview}
    if record.size is not None:
        out["size"] = record.size
    if not request and record.truncated is not None:
        out["truncated"] = record.truncated
    return out


def to_reference_node(tree: OpTree, run: Run) -> dict[str, Any]:
    """The run in ai-agent's ``SessionNode`` shape (camelCase, float ``costUsd``, uncached
    ``inputTokens``), children embedded, each node with the reference's own totals."""

    def node(current: Run) -> dict[str, Any]:
        out: dict[str, Any] = {"id": current.run_id}
        for key, value in (("traceId", current.trace_id), ("agentId", current.agent_id),
                           ("callPath", current.call_path)):
            if value is not None:
                out[key] = value
        out["sessionTitle"] = current.title
        out["startedAt"] = current.started_at
        if current.attributes:
            out["attributes"] = current.attributes
        out["turns"] = [turn_node(t) for t in current.turns]
        if current.latest_status is not None:
            out["latestStatus"] = current.latest_status
        out["totals"] = compat_totals(out)
        ends: tuple[tuple[str, object], ...] = (
            ("endedAt", current.ended_at), ("success", current.success), ("error", current.error))
        for key, end_value in ends:
            if end_value is not None:
                out[key] = end_value
        return out

    def turn_node(turn: Turn) -> dict[str, Any]:
        out: dict[str, Any] = {"id": turn.turn_id, "index": turn.index,
                               "startedAt": turn.started_at}
        if turn.attributes:
            out["attributes"] = turn.attributes
        out["ops"] = [op_node(op) for op in turn.ops]
        if turn.ended_at is not None:
            out["endedAt"] = turn.ended_at
        return out

    def op_node(op: Op) -> dict[str, Any]:
        out: dict[str, Any] = {"opId": op.op_id, "kind": op.kind, "startedAt": op.started_at}
        if op.attributes:
            out["attributes"] = op.attributes
        out["logs"] = [_log_reference(log) for log in op.logs]
        out["accounting"] = [entry.to_reference() for entry in op.accounting]
        if op.child is not None and op.child in tree.runs:
            out["childSession"] = node(tree.runs[op.child])
        if op.ended_at is not None:
            out["endedAt"] = op.ended_at
        if op.status is not None:
            out["status"] = op.status
        if op.reasoning is not None:
            reasoning: dict[str, Any] = {"chunks": [{"text": c.text, "ts": c.ts}
                                                    for c in op.reasoning.chunks]}
            if op.reasoning.final is not None:
                reasoning["final"] = op.reasoning.final
            out["reasoning"] = reasoning
        if op.request is not None:
            out["request"] = _payload_reference(op.request, True)
        if op.response is not None:
            out["response"] = _payload_reference(op.response, False)
        return out

    return node(run)

