"""The streaming model adapters (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages)
against a real HTTP server on 127.0.0.1 (tests/fake_llm.py) that checks every request body
against the provider SDK's request types: streamed text, thinking and tool calls, usage and
cost, a second request that replays the first reply with its tool results, retries with
Retry-After before the stream starts, a stream that breaks off, and cancellation.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sessiontree import TextContent, ThinkingContent, ToolCall, ToolResultMessage, UserMessage
from sessiontree.providers import (
    ModelRequest,
    ModelRequestCancelled,
    ModelRequestFailed,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ProviderNotConfigured,
    StreamDelta,
    ToolSpec,
    model_from_spec,
)
from sessiontree.summarize import CancelToken

from .fake_llm import ANTHROPIC_KEY, FakeLLM, Reply, anthropic_model, chat_model, responses_model

READ = ToolSpec(name="read", description="Read a file", parameters={
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})


chat, responses, anthropic = chat_model, responses_model, anthropic_model
ADAPTERS = [chat, responses, anthropic]
PATHS = {chat: "/v1/chat/completions", responses: "/v1/responses", anthropic: "/v1/messages"}


def ask(model: Any, *messages: Any, tools: Any = (READ,), cancel: CancelToken | None = None
        ) -> tuple[Any, list[StreamDelta]]:
    deltas: list[StreamDelta] = []
    reply = model.stream(ModelRequest(list(messages), system="Be brief.", tools=tools),
                         deltas.append, cancel)
    return reply, deltas


@pytest.mark.parametrize("make", ADAPTERS)
def test_streamed_text_with_usage_and_cost(server: FakeLLM, make: Any) -> None:
    server.then(Reply(text="The answer is forty-two, as always.", usage=(1000, 200, 0)))
    model = make(server)
    reply, deltas = ask(model, UserMessage.of("What is the answer?"))
    assert [b.text for b in reply.content if isinstance(b, TextContent)] == ["The answer is forty-two, as always."]
    assert "".join(d.text for d in deltas if d.kind == "text") == "The answer is forty-two, as always."
    assert len([d for d in deltas if d.kind == "text"]) > 1  # it really streamed
    assert reply.stop_reason == "stop" and reply.api == model.api and reply.model == model.model
    assert reply.usage.input == 1000 and reply.usage.output == 200
    assert reply.usage.cost.total > 0 and reply.usage.cost.total == pytest.approx(
        reply.usage.cost.input + reply.usage.cost.output)
    (seen,) = server.requests
    assert seen.path == PATHS[make] and seen.body["stream"] is True


@pytest.mark.parametrize("make", ADAPTERS)
def test_tool_calls_and_thinking_then_the_replay_is_accepted(server: FakeLLM, make: Any) -> None:
    server.then(Reply(text="Let me look.", thinking="I should read the file first.",
                      tool_calls=[("read", {"path": "a.py"}), ("read", {"path": "b.py"})]),
                Reply(text="Both files are empty."))
    model = make(server)
    question = UserMessage.of("What is in a.py and b.py?")
    reply, deltas = ask(model, question)
    calls = [b for b in reply.content if isinstance(b, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [("read", {"path": "a.py"}), ("read", {"path": "b.py"})]
    assert reply.stop_reason == "toolUse"
    thinking = [b for b in reply.content if isinstance(b, ThinkingContent)]
    assert thinking and thinking[0].thinking == "I should read the file first."
    assert {d.kind for d in deltas} == {"thinking", "text", "tool_call"}
    results = [ToolResultMessage(tool_call_id=c.id, tool_name="read", content=[TextContent(text="")])
               for c in calls]
    final, _ = ask(model, question, reply, *results)
    assert final.content[0].text == "Both files are empty."  # type: ignore[union-attr]
    # the server (which checks the body against the SDK types) accepted the replay
    replay = server.requests[1].body
    text = str(replay)
    assert all(c.id.split("|")[0] in text for c in calls)


@pytest.mark.parametrize("make", ADAPTERS)
def test_429_before_the_stream_is_retried_after_retry_after(server: FakeLLM, make: Any) -> None:
    server.then(Reply(429, error="slow down", headers={"Retry-After": "0"}), Reply(text="ok"))
    reply, _ = ask(make(server, backoff=3600, max_backoff=3600), UserMessage.of("hi"))
    assert reply.content[0].text == "ok" and len(server.requests) == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("make", ADAPTERS)
def test_a_stream_that_breaks_off_fails_without_a_retry(server: FakeLLM, make: Any) -> None:
    server.then(Reply(text="a long answer that will not arrive whole", break_after=3))
    with pytest.raises(ModelRequestFailed, match="broke off|ended before"):
        ask(make(server, max_retries=3), UserMessage.of("hi"))
    assert len(server.requests) == 1


@pytest.mark.parametrize("make", ADAPTERS)
def test_a_400_fails_at_once_with_the_server_message(server: FakeLLM, make: Any) -> None:
    server.then(Reply(400, error="context too long"))
    with pytest.raises(ModelRequestFailed, match="HTTP 400.*context too long"):
        ask(make(server), UserMessage.of("hi"))
    assert len(server.requests) == 1


@pytest.mark.parametrize("make", ADAPTERS)
def test_cancel_during_a_slow_stream(server: FakeLLM, make: Any) -> None:
    server.then(Reply(text="word " * 200, chunk_delay=0.05))
    token = CancelToken()
    deltas: list[StreamDelta] = []

    def on_delta(delta: StreamDelta) -> None:
        deltas.append(delta)
        if len(deltas) == 3:
            token.cancel()

    with pytest.raises(ModelRequestCancelled):
        make(server).stream(ModelRequest([UserMessage.of("talk")]), on_delta, token)
    assert 3 <= len(deltas) < 100


def test_async_use_and_specs(server: FakeLLM) -> None:
    server.then(Reply(text="async hello"))
    model = model_from_spec("anthropic:claude-sonnet-4-5", api_key=ANTHROPIC_KEY, base_url=server.url)
    reply = asyncio.run(model.astream(ModelRequest([UserMessage.of("hi")])))
    assert reply.content[0].text == "async hello"  # type: ignore[union-attr]
    assert isinstance(model_from_spec("openai-responses:gpt-5", api_key="k"), OpenAIResponsesModel)
    with pytest.raises(ProviderNotConfigured, match="unknown model provider"):
        model_from_spec("cohere:command")


def test_missing_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ProviderNotConfigured, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4.1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert OpenAIChatModel("gpt-4.1").base_url == "http://127.0.0.1:9/v1"


