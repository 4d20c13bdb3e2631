"""OpenTelemetry export: an operation tree replayed as spans (``pip install 'sessiontree[otel]'``).

Mapping (REFERENCE.md section 13):

* run → ``invoke_agent {agentId}`` (INTERNAL), turn → ``turn {index}`` (INTERNAL, optional),
  ``llm`` op → ``chat {model}`` (CLIENT), ``tool`` and ``session`` ops →
  ``execute_tool {name}`` (INTERNAL; a sub-agent's run span is the child of its ``session``
  op span), ``system`` op → ``sessiontree.system {label}``, custom kinds →
  ``sessiontree.op {kind}``; logs → span events ``sessiontree.log`` at their own time.
* Spans start and end at the tree's recorded times (ms × 1,000,000 ns); an op that never ended
  ends at the latest time in the tree and carries ``sessiontree.unfinished``.
* Ids are deterministic: the trace id is the first 16 bytes of SHA-256 of the root's
  ``traceId`` (or its run id), a span id the first 8 bytes of SHA-256 of
  ``<root run id>/<global path>`` (ops), ``<run id>/run`` or ``<run id>/turn/<index>``;
  exporting the same tree twice gives the same ids.

Nothing is counted twice: ``gen_ai.usage.*`` goes only on the span of the op that owns the
accounting record (every record belongs to exactly one op), never on agent spans; the totals
of a run go under ``sessiontree.own.*`` (its ops) and ``sessiontree.rollup.*`` (with its
sub-agents), names no backend sums. Summing ``gen_ai.usage.input_tokens`` over all spans
gives the root's inclusive input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

try:
    from opentelemetry import trace as trace_api
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from ..errors import MissingExtra

    raise MissingExtra("sessiontree.optree.otel requires the 'otel' extra: "
                       "pip install 'sessiontree[otel]'") from exc

from msgspec import UNSET

from .. import _json
from .model import Op, OpTree, Payload, Run, Totals, Turn
from .render import format_cost

__all__ = ["PROVIDER_NAMES", "export_otel", "span_id_for", "trace_id_for"]

PROVIDER_NAMES = {
    "anthropic": "anthropic", "openai": "openai", "google": "gcp.gemini",
    "gemini": "gcp.gemini", "google-gla": "gcp.gemini", "vertex": "gcp.vertex_ai",
    "google-vertex": "gcp.vertex_ai", "vertexai": "gcp.vertex_ai", "bedrock": "aws.bedrock",
    "aws-bedrock": "aws.bedrock", "azure": "azure.ai.openai", "azure-openai": "azure.ai.openai",
}
"""Provider ids mapped to ``gen_ai.provider.name`` values; others are passed verbatim."""


def _hash_id(text: str, size: int) -> int:
    suffix = ""
    while True:
        value = int.from_bytes(hashlib.sha256((text + suffix).encode()).digest()[:size], "big")
        if value:
            return value
        suffix += "#"  # an all-zero id is invalid: re-hash (practically never happens)


def trace_id_for(root: Run) -> int:
    """The deterministic 128-bit trace id of a root run."""
    return _hash_id(root.trace_id or root.run_id, 16)


def span_id_for(key: str) -> int:
    """The deterministic 64-bit span id for ``<root>/<path>``, ``<run>/run``, ``<run>/turn/<i>``."""
    return _hash_id(key, 8)


class _NextIds(IdGenerator):
    """Hands out the ids chosen for the next span (the SDK asks for them at span start)."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_span_id(self) -> int:
        return self.span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


def _ns(ms: int) -> int:
    return ms * 1_000_000


def _cost(value: Decimal) -> str:
    return format_cost(value)[1:]


def _totals_attrs(prefix: str, t: Totals, agents: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        f"{prefix}.tokens_in": t.tokens_in_total,
        f"{prefix}.tokens_in_uncached": t.tokens_in,
        f"{prefix}.tokens_out": t.tokens_out,
        f"{prefix}.cache_read": t.cache_read,
        f"{prefix}.cache_write": t.cache_write,
        f"{prefix}.reasoning": t.reasoning,
        f"{prefix}.cost_usd": _cost(t.cost_usd),
        f"{prefix}.unpriced_calls": t.unpriced_calls,
        f"{prefix}.tools_run": t.tools_run,
        f"{prefix}.llm_calls": t.llm_calls,
        f"{prefix}.failed_ops": t.failed_ops,
    }
    if agents:
        out[f"{prefix}.agents_run"] = t.agents_run
    return out


def _json_text(record: Payload | None) -> str | None:
    if record is None or record.payload is UNSET:
        return record.preview if record is not None else None
    if isinstance(record.payload, str):
        return record.payload
    return _json.dumps(record.payload).decode("utf-8", "surrogatepass")


def _provider(name: object) -> str | None:
    if not isinstance(name, str) or not name:
        return None
    return PROVIDER_NAMES.get(name.lower(), name)


class _Exporter:
    def __init__(self, tree: OpTree, tracer: trace_api.Tracer, ids: _NextIds, *,
                 capture_content: bool, turn_spans: bool, usage_on_agent_spans: bool,
                 cost_attributes: bool, conversation_id: str | None, end_ms: int) -> None:
        self.tree = tree
        self.tracer = tracer
        self.ids = ids
        self.capture_content = capture_content
        self.turn_spans = turn_spans
        self.usage_on_agent_spans = usage_on_agent_spans
        self.cost_attributes = cost_attributes
        self.conversation_id = conversation_id
        self.end_ms = end_ms
        self.count = 0
        self.root_id = ""

    def _start(self, name: str, key: str, parent: trace_api.Span | None, kind: SpanKind,
               start_ms: int, attributes: dict[str, Any]) -> trace_api.Span:
        self.ids.span_id = span_id_for(key)
        context = trace_api.set_span_in_context(parent) if parent is not None else None
        clean = {k: v for k, v in attributes.items() if v is not None}
        self.count += 1
        return self.tracer.start_span(name, context=context, kind=kind, attributes=clean,
                                      start_time=_ns(start_ms))

    def _end(self, span: trace_api.Span, ended_ms: int | None) -> None:
        if ended_ms is None:
            span.set_attribute("sessiontree.unfinished", True)
        span.end(end_time=_ns(ended_ms if ended_ms is not None else self.end_ms))

    def run(self, run: Run, parent: trace_api.Span | None) -> None:
        llm_ops = [op for op in run.ops() if op.kind == "llm"]
        providers = [p for p in (op.attributes.get("provider") for op in llm_ops)
                     if isinstance(p, str) and p]
        models = {op.attributes.get("model") for op in llm_ops}
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": _provider(providers[0]) if providers else None,
            "gen_ai.agent.name": run.agent_id,
            "gen_ai.agent.id": run.run_id,
            "gen_ai.conversation.id": self.conversation_id or run.trace_id,
            "gen_ai.request.model": next(iter(models)) if len(models) == 1
            and isinstance(next(iter(models)), str) else None,
            "sessiontree.run.id": run.run_id,
            "sessiontree.run.providers": sorted(set(providers)) if len(set(providers)) > 1
            else None,
            "sessiontree.trace_id": run.trace_id,
            "sessiontree.call_path": run.call_path,
            "sessiontree.title": run.title or None,
            "sessiontree.latest_status": run.latest_status,
            **_totals_attrs("sessiontree.own", run.own, agents=False),
            **_totals_attrs("sessiontree.rollup", run.rollup, agents=True),
        }
        if self.usage_on_agent_spans:
            attrs["gen_ai.usage.input_tokens"] = run.rollup.tokens_in_total
            attrs["gen_ai.usage.output_tokens"] = run.rollup.tokens_out
        if run.success is False:
            attrs["error.type"] = "_OTHER"
        name = f"invoke_agent {run.agent_id}" if run.agent_id else "invoke_agent"
        span = self._start(name, f"{run.run_id}/run", parent, SpanKind.INTERNAL,
                           run.started_at, attrs)
        if run.success is False:
            span.set_status(Status(StatusCode.ERROR, run.error or None))
        for turn in run.turns:
            if self.turn_spans:
                self.turn(run, turn, span)
            else:
                for op in turn.ops:
                    self.op(op, span)
        self._end(span, run.ended_at)

    def turn(self, run: Run, turn: Turn, parent: trace_api.Span) -> None:
        attrs: dict[str, Any] = {
            "sessiontree.turn.index": turn.index,
            "sessiontree.turn.id": turn.turn_id,
            "sessiontree.turn.system": turn.index == 0 or bool(turn.attributes.get("system")),
        }
        prompts = turn.attributes.get("prompts")
        if self.capture_content and isinstance(prompts, dict):
            system, user = prompts.get("system"), prompts.get("user")
            if isinstance(system, str) and system:
                attrs["gen_ai.system_instructions"] = _json.dumps(
                    [{"type": "text", "content": system}]).decode()
            if isinstance(user, str) and user:
                attrs["gen_ai.input.messages"] = _json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": user}]}]).decode()
        span = self._start(f"turn {turn.index}", f"{run.run_id}/turn/{turn.index}", parent,
                           SpanKind.INTERNAL, turn.started_at, attrs)
        for op in turn.ops:
            self.op(op, span)
        self._end(span, turn.ended_at)

    def _usage_attrs(self, op: Op) -> dict[str, Any]:
        entries = [a for a in op.accounting if a.usage is not None]
        attrs: dict[str, Any] = {}
        if entries:
            usage = op.usage
            attrs.update({
                "gen_ai.usage.input_tokens": usage.input_total,
                "gen_ai.usage.output_tokens": usage.output,
                "gen_ai.usage.cache_read.input_tokens": usage.cache_read,
                "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
            })
            if usage.reasoning:
                attrs["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning
        cost = op.cost_usd
        if op.accounting:
            sources = sorted({a.cost_source for a in op.accounting})
            attrs["sessiontree.accounting.count"] = len(op.accounting)
            attrs["sessiontree.cost_source"] = "+".join(sources)
            if cost is not None:
                attrs["sessiontree.cost_usd"] = _cost(cost)
                if self.cost_attributes:
                    attrs["gen_ai.usage.cost.amount"] = float(cost)
                    attrs["gen_ai.usage.cost.currency"] = "USD"
                    attrs["gen_ai.usage.cost.source"] = (
                        "provider" if sources == ["provider"] else "local")
        return attrs

    def op(self, op: Op, parent: trace_api.Span) -> None:
        a = op.attributes
        attrs: dict[str, Any] = {
            "sessiontree.op.id": op.op_id,
            "sessiontree.op.path": op.path,
            "sessiontree.op.kind": op.kind,
            "sessiontree.op.seq": op.seq,
        }
        attrs.update(self._usage_attrs(op))
        kind = SpanKind.INTERNAL
        if op.kind == "llm":
            model = a.get("model") if isinstance(a.get("model"), str) else None
            actual = next((e.actual_model for e in op.accounting if e.actual_model), None)
            stops = [e.stop_reason for e in op.accounting if e.stop_reason]
            name, kind = (f"chat {model}" if model else "chat"), SpanKind.CLIENT
            attrs.update({
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": _provider(a.get("provider")),
                "gen_ai.request.model": model,
                "gen_ai.response.model": actual,
                "gen_ai.response.finish_reasons": stops or None,
            })
            if self.capture_content:
                attrs["gen_ai.input.messages"] = _json_text(op.request)
                attrs["gen_ai.output.messages"] = _json_text(op.response)
        elif op.kind in ("tool", "session"):
            tool = a.get("name") if isinstance(a.get("name"), str) else None
            name = f"execute_tool {tool}" if tool else "execute_tool"
            extension = str(a.get("kind", "")).lower() in ("mcp", "rest") or \
                str(a.get("provider", "")).lower() in ("mcp", "rest")
            call_id = a.get("toolCallId", a.get("tool_call_id"))
            tool_entry = next((e for e in op.accounting if e.kind == "tool"), None)
            attrs.update({
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": call_id if isinstance(call_id, str) else None,
                "gen_ai.tool.type": "extension" if extension else "function",
                "sessiontree.child.run_id": op.child if op.kind == "session" else None,
            })
            if tool_entry is not None:
                attrs.update({
                    "sessiontree.tool.server": tool_entry.server,
                    "sessiontree.tool.command": tool_entry.command,
                    "sessiontree.tool.chars_in": tool_entry.chars_in,
                    "sessiontree.tool.chars_out": tool_entry.chars_out,
                })
            if op.response is not None:
                attrs["sessiontree.response.size"] = op.response.size
                attrs["sessiontree.response.truncated"] = op.response.truncated
            if self.capture_content:
                attrs["gen_ai.tool.call.arguments"] = _json_text(op.request)
                attrs["gen_ai.tool.call.result"] = _json_text(op.response)
        elif op.kind == "system":
            label = a.get("label") if isinstance(a.get("label"), str) else None
            name = f"sessiontree.system {label}" if label else "sessiontree.system"
            attrs["sessiontree.label"] = label
        else:
            name = f"sessiontree.op {op.kind}"
        failed = op.status == "failed"
        if failed:
            error_type = a.get("errorType", a.get("error_type"))
            attrs["error.type"] = error_type if isinstance(error_type, str) else "_OTHER"
        span = self._start(name, f"{self.root_id}/{op.path}", parent, kind, op.started_at, attrs)
        if failed:
            error = a.get("error")
            span.set_status(Status(StatusCode.ERROR, error if isinstance(error, str) else None))
        for log in op.logs:
            event: dict[str, Any] = {
                "sessiontree.log.severity": log.severity,
                "sessiontree.log.message": log.message,
                "sessiontree.log.path": log.path,
            }
            for key in ("remoteIdentifier", "fatal", "turn", "subturn", "direction", "type"):
                value = (log.fields or {}).get(key)
                if isinstance(value, (str, bool, int, float)):
                    snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
                    event[f"sessiontree.log.{snake}"] = value
            span.add_event("sessiontree.log", event, timestamp=_ns(log.timestamp))
        if self.capture_content and op.reasoning is not None:
            for chunk in op.reasoning.chunks:
                span.add_event("sessiontree.reasoning.chunk",
                               {"sessiontree.reasoning.text": chunk.text}, timestamp=_ns(chunk.ts))
        if op.child is not None and op.child in self.tree.runs:
            self.run(self.tree.runs[op.child], span)
        self._end(span, op.ended_at)


def _latest_ms(tree: OpTree, run: Run) -> int:
    latest = run.started_at
    for current in tree.subtree(run):
        for value in (current.started_at, current.ended_at):
            if value is not None:
                latest = max(latest, value)
        for turn in current.turns:
            latest = max(latest, turn.ended_at or turn.started_at)
            for op in turn.ops:
                latest = max(latest, op.ended_at or op.started_at,
                             *(log.timestamp for log in op.logs),
                             *(entry.timestamp for entry in op.accounting))
    return latest


def export_otel(tree: OpTree, *, exporter: SpanExporter | None = None,
                span_processors: Sequence[SpanProcessor] = (),
                tracer_provider: TracerProvider | None = None, run: Run | None = None,
                capture_content: bool = False, turn_spans: bool = True,
                usage_on_agent_spans: bool = False, cost_attributes: bool = False,
                conversation_id: str | None = None, service_name: str = "sessiontree") -> int:
    """Replay an operation tree as OpenTelemetry spans.

    Args:
        tree: the tree (every root run is exported, or only ``run``).
        exporter: spans go to this exporter through a ``SimpleSpanProcessor`` (for example
            ``InMemorySpanExporter`` or an OTLP exporter).
        span_processors: further processors for the spans.
        tracer_provider: an SDK provider to use instead of a new one (its id generator is
            swapped for the deterministic one while the tracer is made).
        run: export only this root run and its descendants.
        capture_content: add prompts, payloads and reasoning text (off by default).
        turn_spans: one span per turn between a run and its ops (default); off parents ops
            to the run span.
        usage_on_agent_spans: also put the rollup's ``gen_ai.usage.input_tokens`` and
            ``output_tokens`` on agent spans, for backends that read them there (then
            summing usage over every span counts tokens twice).
        cost_attributes: add ``gen_ai.usage.cost.*`` (names of an open proposal) to spans
            with a cost.
        conversation_id: ``gen_ai.conversation.id`` (the pi session id; default: the trace id).
        service_name: ``service.name`` of a new provider's resource.

    Returns:
        The number of spans exported.
    """
    ids = _NextIds()
    if tracer_provider is None:
        provider = TracerProvider(resource=Resource.create({"service.name": service_name}),
                                  id_generator=ids)
        own_provider = True
    else:
        provider, own_provider = tracer_provider, False
    processors = list(span_processors)
    if exporter is not None:
        processors.append(SimpleSpanProcessor(exporter))
    for processor in processors:
        provider.add_span_processor(processor)
    if own_provider:
        tracer = provider.get_tracer("sessiontree.optree")
    else:
        saved: IdGenerator = provider.id_generator
        provider.id_generator = ids  # type: ignore[assignment]  # the SDK types it narrowly
        try:
            tracer = provider.get_tracer("sessiontree.optree")
        finally:
            provider.id_generator = saved  # type: ignore[assignment]
    roots = [run] if run is not None else tree.roots()
    total = 0
    for root in roots:
        ids.trace_id = trace_id_for(root)
        replay = _Exporter(tree, tracer, ids, capture_content=capture_content,
                           turn_spans=turn_spans, usage_on_agent_spans=usage_on_agent_spans,
                           cost_attributes=cost_attributes, conversation_id=conversation_id,
                           end_ms=_latest_ms(tree, root))
        replay.root_id = root.run_id
        replay.run(root, None)
        total += replay.count
    provider.force_flush()
    return total
