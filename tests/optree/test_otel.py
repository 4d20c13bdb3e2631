"""OpenTelemetry export through the SDK's in-memory exporter."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from decimal import Decimal
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from sessiontree.optree import NO_PRICES, OpTreeBuilder, Usage
from sessiontree.optree.otel import export_otel, span_id_for, trace_id_for

from .conftest import B, Clock, Ids


def v4_tree() -> OpTreeBuilder:
    """V4 of the shared vectors (three levels of sub-agents), built in the default mode."""
    clock, ids = Clock(), Ids()
    root = OpTreeBuilder({"traceId": "T", "agentId": "root", "callPath": "root"}, clock=clock,
                         ids=ids, prices=NO_PRICES)
    root.begin_turn(1)
    clock.advance(1)
    llm = root.begin_op(1, "llm", {"provider": "p", "model": "m"})
    root.append_accounting(llm, {"type": "llm", "timestamp": B + 1, "status": "ok", "latency": 1,
                                 "provider": "p", "model": "m", "costUsd": 0.01,
                                 "tokens": {"inputTokens": 100, "outputTokens": 10,
                                            "totalTokens": 110}})
    root.end_op(llm, "ok")
    clock.advance(1)
    sess = root.begin_op(1, "session", {"name": "agent__child", "provider": "subagent",
                                        "kind": "agent"})
    child = OpTreeBuilder({"traceId": "T", "agentId": "child", "callPath": "root:child"},
                          clock=clock, ids=ids, prices=NO_PRICES)
    clock.advance(1)
    child.begin_turn(1)
    child.begin_turn(2)
    cl = child.begin_op(2, "llm", {"provider": "p", "model": "m"})
    child.append_accounting(cl, {"type": "llm", "timestamp": B + 3, "costUsd": 0.02,
                                 "tokens": {"inputTokens": 50, "outputTokens": 5,
                                            "cachedTokens": 7, "totalTokens": 62}})
    child.end_op(cl, "ok")
    cs = child.begin_op(2, "session", {"name": "agent__grand"})
    grand = OpTreeBuilder({"agentId": "grand"}, clock=clock, ids=ids, prices=NO_PRICES)
    grand.begin_turn(1)
    gt = grand.begin_op(1, "tool", {"name": "x"})
    grand.append_accounting(gt, {"type": "llm", "timestamp": B + 3, "costUsd": 0.005,
                                 "tokens": {"inputTokens": 1, "outputTokens": 1}})
    clock.advance(1)
    grand.end_op(gt, "ok")
    grand.end_session(True)
    child.attach_child_session(cs, grand)
    child.end_op(cs, "ok")
    child.end_session(True)
    clock.advance(1)
    root.attach_child_session(sess, child)
    root.end_op(sess, "ok")
    root.end_turn(1)
    root.end_session(True)
    return root


def export(builder: OpTreeBuilder, **kwargs: Any) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    count = export_otel(builder.tree, exporter=exporter, **kwargs)
    spans = list(exporter.get_finished_spans())
    assert count == len(spans)
    return spans


def shape(spans: list[ReadableSpan]) -> list[tuple[int, str, SpanKind]]:
    """(depth, name, kind) in depth-first start order."""
    by_id = {s.context.span_id: s for s in spans}

    def depth(span: ReadableSpan) -> int:
        d = 0
        while span.parent is not None:
            span = by_id[span.parent.span_id]
            d += 1
        return d

    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        children.setdefault(span.parent.span_id if span.parent else None, []).append(span)
    out: list[tuple[int, str, SpanKind]] = []

    def walk(parent: int | None) -> None:
        def order(s: ReadableSpan) -> tuple[int, int, int]:
            a = s.attributes or {}
            return (s.start_time or 0, int(a.get("sessiontree.turn.index", 0)),  # type: ignore[arg-type]
                    int(a.get("sessiontree.op.seq", 0)))  # type: ignore[arg-type]

        for span in sorted(children.get(parent, []), key=order):
            out.append((depth(span), span.name, span.kind))
            walk(span.context.span_id)

    walk(None)
    return out


def test_v4_span_names_kinds_and_parentage() -> None:
    spans = export(v4_tree())
    assert shape(spans) == [
        (0, "invoke_agent root", SpanKind.INTERNAL),
        (1, "turn 1", SpanKind.INTERNAL),
        (2, "chat m", SpanKind.CLIENT),
        (2, "execute_tool agent__child", SpanKind.INTERNAL),
        (3, "invoke_agent child", SpanKind.INTERNAL),
        (4, "turn 1", SpanKind.INTERNAL),
        (4, "turn 2", SpanKind.INTERNAL),
        (5, "chat m", SpanKind.CLIENT),
        (5, "execute_tool agent__grand", SpanKind.INTERNAL),
        (6, "invoke_agent grand", SpanKind.INTERNAL),
        (7, "turn 1", SpanKind.INTERNAL),
        (8, "execute_tool x", SpanKind.INTERNAL),
    ]
    assert len({s.context.trace_id for s in spans}) == 1


def test_no_usage_on_agent_spans_and_nothing_counted_twice() -> None:
    builder = v4_tree()
    spans = export(builder)
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    for span in agents:
        assert not any(k.startswith("gen_ai.usage.") for k in span.attributes or {})
    total_in = sum((s.attributes or {}).get("gen_ai.usage.input_tokens", 0) for s in spans)
    total_out = sum((s.attributes or {}).get("gen_ai.usage.output_tokens", 0) for s in spans)
    assert (total_in, total_out) == (builder.rollup.tokens_in_total, builder.rollup.tokens_out)
    assert total_in == 158  # 100 + (50 + 7 cached) + 1
    root = next(s for s in agents if s.name == "invoke_agent root")
    attrs = root.attributes or {}
    assert attrs["sessiontree.own.tokens_in"] == 100 and attrs["sessiontree.rollup.tokens_in"] == 158
    assert attrs["sessiontree.rollup.agents_run"] == 3 and "sessiontree.own.agents_run" not in attrs
    assert Decimal(str(attrs["sessiontree.rollup.cost_usd"])) == Decimal("0.035")
    assert attrs["gen_ai.agent.id"] == builder.run_id and attrs["gen_ai.agent.name"] == "root"
    assert attrs["gen_ai.provider.name"] == "p" and attrs["gen_ai.conversation.id"] == "T"


def test_usage_on_agent_spans_is_opt_in() -> None:
    spans = export(v4_tree(), usage_on_agent_spans=True)
    root = next(s for s in spans if s.name == "invoke_agent root")
    assert (root.attributes or {})["gen_ai.usage.input_tokens"] == 158
    assert "gen_ai.usage.cache_read.input_tokens" not in (root.attributes or {})


def test_v2_llm_span_has_inclusive_input_tokens() -> None:
    clock, ids = Clock(), Ids()
    b = OpTreeBuilder({"traceId": "tr-2", "agentId": "main"}, clock=clock, ids=ids,
                      prices=NO_PRICES)
    b.begin_turn(1, {"prompts": {"system": "You are helpful.", "user": "List files"}})
    op = b.begin_op(1, "llm", {"provider": "anthropic", "model": "claude-x"})
    b.set_request(op, {"kind": "llm", "payload": {"messages": [{"role": "user",
                                                                "content": "List files"}]}})
    b.set_response(op, {"payload": "calling ls", "size": 10})
    b.append_accounting(op, {"type": "llm", "timestamp": B + 320, "status": "ok",
                             "latency": 300, "provider": "anthropic", "model": "claude-x",
                             "costUsd": 0.0123, "stopReason": "tool_use",
                             "tokens": {"inputTokens": 1000, "outputTokens": 200,
                                        "cacheReadInputTokens": 300,
                                        "cacheWriteInputTokens": 50, "totalTokens": 1550}})
    clock.advance(300)
    b.end_op(op, "ok")
    tool = b.begin_op(1, "tool", {"name": "fs__ls", "provider": "mcp", "kind": "mcp"})
    b.append_accounting(tool, {"type": "tool", "timestamp": B + 345, "mcpServer": "fs",
                               "command": "ls", "charactersIn": 12, "charactersOut": 11})
    b.set_response(tool, {"payload": "a.txt\nb.txt", "size": 11, "truncated": False})
    b.append_log(tool, {"timestamp": B + 345, "severity": "VRB", "message": "ok",
                        "remoteIdentifier": "mcp:fs:ls", "fatal": False})
    clock.advance(15)
    b.end_op(tool, "ok")
    spans = export(b)
    chat = next(s for s in spans if s.name == "chat claude-x")
    attrs = chat.attributes or {}
    assert attrs["gen_ai.usage.input_tokens"] == 1350
    assert attrs["gen_ai.usage.output_tokens"] == 200
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 300
    assert attrs["gen_ai.usage.cache_creation.input_tokens"] == 50
    assert attrs["gen_ai.provider.name"] == "anthropic" and attrs["gen_ai.request.model"] == "claude-x"
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert (attrs["sessiontree.cost_usd"], attrs["sessiontree.cost_source"]) == ("0.0123",
                                                                                 "provider")
    assert attrs["sessiontree.op.path"] == "1-1" and "gen_ai.input.messages" not in attrs
    assert (chat.start_time, chat.end_time) == (B * 10**6, (B + 300) * 10**6)
    ls = next(s for s in spans if s.name == "execute_tool fs__ls")
    la = ls.attributes or {}
    assert (la["gen_ai.tool.type"], la["sessiontree.tool.server"], la["sessiontree.tool.chars_out"]) \
        == ("extension", "fs", 11)
    assert la["sessiontree.response.size"] == 11 and "gen_ai.usage.input_tokens" not in la
    (event,) = ls.events
    assert event.name == "sessiontree.log" and event.timestamp == (B + 345) * 10**6
    assert (event.attributes or {})["sessiontree.log.remote_identifier"] == "mcp:fs:ls"
    turn = next(s for s in spans if s.name == "turn 1")
    assert "gen_ai.system_instructions" not in (turn.attributes or {})
    content = export(b, capture_content=True)
    chat2 = next(s for s in content if s.name == "chat claude-x")
    assert "List files" in str((chat2.attributes or {})["gen_ai.input.messages"])
    turn2 = next(s for s in content if s.name == "turn 1")
    assert "You are helpful." in str((turn2.attributes or {})["gen_ai.system_instructions"])


def test_ids_are_deterministic() -> None:
    builder = v4_tree()
    first = {(s.name, s.context.span_id, s.context.trace_id) for s in export(builder)}
    second = {(s.name, s.context.span_id, s.context.trace_id) for s in export(builder)}
    assert first == second
    trace = int.from_bytes(hashlib.sha256(b"T").digest()[:16], "big")
    assert {t for _, _, t in first} == {trace} == {trace_id_for(builder.run)}
    ids = {name: span for name, span, _ in first}
    assert ids["invoke_agent root"] == span_id_for(f"{builder.run_id}/run")
    assert ids["execute_tool x"] == span_id_for(f"{builder.run_id}/1-2.2-2.1-1")


def test_failures_and_unfinished_ops() -> None:
    clock, ids = Clock(), Ids()
    b = OpTreeBuilder({"agentId": "a"}, clock=clock, ids=ids, prices=NO_PRICES)
    t = b.begin_turn()
    failed = b.begin_op(t, "llm", {"provider": "openai", "model": "gpt-4o"})
    b.account_llm(failed, Usage(input=5, output=0))
    clock.advance(10)
    b.end_op(failed, "failed", {"error": "timeout", "errorType": "timeout"})
    b.begin_op(t, "system", {"label": "fin"})
    clock.advance(5)
    spans = export(b)
    chat = next(s for s in spans if s.name == "chat gpt-4o")
    assert chat.status.status_code == StatusCode.ERROR and chat.status.description == "timeout"
    assert (chat.attributes or {})["error.type"] == "timeout"
    assert (chat.attributes or {})["gen_ai.provider.name"] == "openai"
    assert (chat.attributes or {})["sessiontree.cost_source"] == "none"
    system = next(s for s in spans if s.name == "sessiontree.system fin")
    assert (system.attributes or {})["sessiontree.unfinished"] is True
    assert system.end_time == (B + 10) * 10**6  # the latest time the tree recorded
    root = next(s for s in spans if s.name == "invoke_agent a")
    assert root.status.status_code == StatusCode.UNSET
    b.end_session(False, "gave up")
    root = next(s for s in export(b) if s.name == "invoke_agent a")
    assert root.status.status_code == StatusCode.ERROR and root.status.description == "gave up"


def test_without_turn_spans_and_with_a_given_provider() -> None:
    builder = v4_tree()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    export_otel(builder.tree, tracer_provider=provider, turn_spans=False)
    spans = list(exporter.get_finished_spans())
    assert not any(s.name.startswith("turn") for s in spans)
    assert [name for _, name, _ in shape(spans)][:3] == ["invoke_agent root", "chat m",
                                                         "execute_tool agent__child"]
    assert next(s for s in spans if s.name == "invoke_agent root").context.span_id == \
        span_id_for(f"{builder.run_id}/run")
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    assert isinstance(provider.id_generator, RandomIdGenerator)  # restored


def test_missing_extra_names_the_pip_command() -> None:
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "try:\n    import sessiontree.optree.otel\n"
            "except Exception as e:\n    print(type(e).__name__, e)")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True)
    assert done.stdout.strip() == ("MissingExtra sessiontree.optree.otel requires the 'otel' "
                                   "extra: pip install 'sessiontree[otel]'")
