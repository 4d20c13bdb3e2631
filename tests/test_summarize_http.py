"""The OpenAI-compatible and Anthropic summarizers against a real HTTP server on 127.0.0.1
(tests/fake_llm.py) that speaks both protocols: request shapes, retries on 429/5xx with
Retry-After, timeouts, cancellation, configuration from the environment, and compaction through
a model adapter. No mock of httpx anywhere.
"""

from __future__ import annotations

import asyncio
import email.utils
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from sessiontree import AssistantMessage, Session, TextContent, ToolCall, ToolResultMessage, UserMessage
from sessiontree.errors import MissingExtra
from sessiontree.summarize import (
    AnthropicSummarizer,
    CancelToken,
    OpenAISummarizer,
    SummarizerNotConfigured,
    SummaryCancelled,
    SummaryFailed,
    SummaryRequest,
    summarizer_from_spec,
)
from sessiontree.providers._http import retry_after as _retry_after
from sessiontree.summarize._http import HttpSummarizer

from .fake_llm import ANTHROPIC_KEY, OPENAI_KEY, FakeLLM, Reply

GUARD_SECONDS = 60.0
"""A watchdog cancels any summary still running after this long, so a regression fails the
test instead of hanging it (never a timing assertion)."""


def openai(server: FakeLLM, **options: Any) -> OpenAISummarizer:
    options.setdefault("backoff", 0.0)
    return OpenAISummarizer("gpt-4.1-mini", api_key=OPENAI_KEY, base_url=f"{server.url}/v1",
                            **options)


def anthropic(server: FakeLLM, **options: Any) -> AnthropicSummarizer:
    options.setdefault("backoff", 0.0)
    return AnthropicSummarizer("claude-sonnet-4-5", api_key=ANTHROPIC_KEY, base_url=server.url,
                               **options)


ADAPTERS = [openai, anthropic]


def request(**overrides: Any) -> SummaryRequest:
    messages = [
        UserMessage.of("Fix the flaky test in tests/test_store.py"),
        AssistantMessage(content=[TextContent(text="Reading it."), ToolCall(
            id="t1", name="read", arguments={"path": "tests/test_store.py"})], stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="t1", tool_name="read", content=[TextContent(text="def test(): ...")]),
        AssistantMessage.of("The test depends on dict order; I sorted the keys."),
    ]
    values: dict[str, Any] = {"messages": messages, "purpose": "compaction", "max_tokens": 500}
    values.update(overrides)
    return SummaryRequest(**values)


def guarded() -> tuple[CancelToken, threading.Timer]:
    token = CancelToken()
    timer = threading.Timer(GUARD_SECONDS, token.cancel)
    timer.daemon = True
    timer.start()
    return token, timer


def summarize(summarizer: HttpSummarizer, req: SummaryRequest | None = None) -> str:
    token, timer = guarded()
    try:
        return summarizer.summarize(req or request(), token)
    finally:
        timer.cancel()


def cancel_when_received(server: FakeLLM, token: CancelToken, count: int = 1) -> threading.Thread:
    def watch() -> None:
        while len(server.requests) < count:
            if not server.received.wait(GUARD_SECONDS):
                break
            server.received.clear()
        token.cancel()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


# -- request shapes -----------------------------------------------------------------------------


def test_openai_request_and_answer(server: FakeLLM) -> None:
    text = summarize(openai(server))
    assert text.startswith("## Goal\n- Fix the flaky test in tests/test_store.py")
    (seen,) = server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert seen.headers["content-type"] == "application/json"
    body = seen.body
    assert body["model"] == "gpt-4.1-mini" and body["max_tokens"] == 500
    system, user = body["messages"]
    assert system["role"] == "system" and "summar" in system["content"]
    assert user["role"] == "user"
    prompt = user["content"]
    assert prompt.startswith("<conversation>\n[User]: Fix the flaky test")
    assert '[Assistant tool calls]: read(path="tests/test_store.py")' in prompt
    assert "[Tool result]: def test(): ..." in prompt
    assert "## Goal" in prompt and "<previous-summary>" not in prompt


def test_anthropic_request_and_answer(server: FakeLLM) -> None:
    text = summarize(anthropic(server))
    assert text.startswith("## Goal\n- Fix the flaky test")
    (seen,) = server.requests
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == ANTHROPIC_KEY
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen.headers
    body = seen.body
    assert body["model"] == "claude-sonnet-4-5" and body["max_tokens"] == 500
    assert isinstance(body["system"], str) and "summar" in body["system"]
    (message,) = body["messages"]
    assert message["role"] == "user"
    assert message["content"][0]["text"].startswith("<conversation>\n[User]: Fix the flaky test")


@pytest.mark.parametrize("make", ADAPTERS)
def test_prompt_carries_previous_summary_and_instructions(server: FakeLLM, make: Any) -> None:
    summarize(make(server), request(previous_summary="## Goal\n- earlier goal",
                                    instructions="the database migration"))
    body = server.requests[0].body
    prompt = body["messages"][-1]["content"]
    prompt = prompt if isinstance(prompt, str) else prompt[0]["text"]
    assert "<previous-summary>\n## Goal\n- earlier goal\n</previous-summary>" in prompt
    assert prompt.rstrip().endswith("the database migration")


@pytest.mark.parametrize("make", ADAPTERS)
def test_turn_prefix_and_branch_prompts_differ(server: FakeLLM, make: Any) -> None:
    summarizer = make(server)
    for purpose in ("turn_prefix", "branch", "compaction"):
        summarize(summarizer, request(purpose=purpose))
    prompts = []
    for seen in server.requests:
        content = seen.body["messages"][-1]["content"]
        prompts.append(content if isinstance(content, str) else content[0]["text"])
    assert "## Original Request" in prompts[0] and "## Critical Context" not in prompts[0]
    assert "branch" in prompts[1] and "## Next Steps" in prompts[1]
    assert "## Critical Context" in prompts[2]


def test_openai_max_completion_tokens_and_temperature(server: FakeLLM) -> None:
    summarize(openai(server, max_tokens_field="max_completion_tokens", temperature=0.2))
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 500 and "max_tokens" not in body
    assert body["temperature"] == 0.2


# -- retries ------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", ADAPTERS)
def test_429_then_success_honours_retry_after(server: FakeLLM, make: Any) -> None:
    # A backoff of an hour: only the server's Retry-After (0 s) lets this finish (else the
    # watchdog cancels it and the test fails).
    server.then(Reply(429, error="Rate limit reached", headers={"Retry-After": "0"}))
    text = summarize(make(server, backoff=3600, max_backoff=3600))
    assert text.startswith("## Goal")
    assert len(server.requests) == 2


@pytest.mark.parametrize("make", ADAPTERS)
def test_retry_after_is_capped_by_max_backoff(server: FakeLLM, make: Any) -> None:
    server.then(Reply(429, headers={"Retry-After": "3600"}))
    assert summarize(make(server, max_backoff=0.01)).startswith("## Goal")
    assert len(server.requests) == 2


def test_retry_after_ms_header(server: FakeLLM) -> None:
    server.then(Reply(429, headers={"retry-after-ms": "5", "Retry-After": "3600"}))
    assert summarize(openai(server, max_backoff=3600)).startswith("## Goal")


@pytest.mark.parametrize("make", ADAPTERS)
def test_5xx_are_retried(server: FakeLLM, make: Any) -> None:
    server.then(Reply(500, error="boom"), Reply(502), Reply(503))
    assert summarize(make(server, max_retries=3)).startswith("## Goal")
    assert len(server.requests) == 4


def test_anthropic_overloaded_529_is_retried(server: FakeLLM) -> None:
    server.then(Reply(529, error="Overloaded"))
    assert summarize(anthropic(server)).startswith("## Goal")
    assert len(server.requests) == 2


@pytest.mark.parametrize("make", ADAPTERS)
def test_persistent_5xx_fails_after_the_retries(server: FakeLLM, make: Any) -> None:
    server.then(*[Reply(500, error="the server had an error") for _ in range(3)])
    with pytest.raises(SummaryFailed) as caught:
        summarize(make(server, max_retries=2))
    assert len(server.requests) == 3
    message = str(caught.value)
    assert "HTTP 500" in message and "the server had an error" in message and "3 attempts" in message


@pytest.mark.parametrize("make", ADAPTERS)
def test_client_errors_fail_at_once(server: FakeLLM, make: Any) -> None:
    server.then(Reply(400, error="context too long"))
    with pytest.raises(SummaryFailed, match="HTTP 400.*context too long"):
        summarize(make(server, max_retries=5))
    assert len(server.requests) == 1


def test_wrong_key_is_reported_with_the_servers_message(server: FakeLLM) -> None:
    with pytest.raises(SummaryFailed, match="HTTP 401.*Incorrect API key"):
        summarize(OpenAISummarizer("gpt-4.1-mini", api_key="sk-wrong", base_url=f"{server.url}/v1"))
    with pytest.raises(SummaryFailed, match="HTTP 401.*authentication_error.*invalid x-api-key"):
        summarize(AnthropicSummarizer("claude-sonnet-4-5", api_key="wrong", base_url=server.url))


def test_connection_refused_is_retried_then_fails(server: FakeLLM) -> None:
    url = server.url
    server.stop()
    with pytest.raises(SummaryFailed, match="2 attempts.*Connect"):
        summarize(OpenAISummarizer("m", api_key="k", base_url=f"{url}/v1", max_retries=1, backoff=0))


# -- bad answers --------------------------------------------------------------------------------


@pytest.mark.parametrize("make", ADAPTERS)
def test_empty_answer_is_a_failure(server: FakeLLM, make: Any) -> None:
    server.then(Reply(text=""))
    with pytest.raises(SummaryFailed, match="empty summary"):
        summarize(make(server))


@pytest.mark.parametrize("make", ADAPTERS)
def test_answer_that_is_not_json_is_a_failure(server: FakeLLM, make: Any) -> None:
    server.then(Reply(raw=b"<html>gateway</html>"))
    with pytest.raises(SummaryFailed, match="not JSON"):
        summarize(make(server))


def test_answer_without_choices_is_a_failure(server: FakeLLM) -> None:
    server.then(Reply(raw=b'{"object": "chat.completion", "choices": []}'))
    with pytest.raises(SummaryFailed, match="without choices"):
        summarize(openai(server))


# -- timeouts and cancellation ------------------------------------------------------------------


@pytest.mark.parametrize("make", ADAPTERS)
def test_slow_answer_times_out(server: FakeLLM, make: Any) -> None:
    server.then(Reply(delay=GUARD_SECONDS), Reply(delay=GUARD_SECONDS))
    # long enough for the server to record each request on a loaded machine, far below the delay
    with pytest.raises(SummaryFailed, match="2 attempts"):
        summarize(make(server, timeout=1.5, max_retries=1))
    assert len(server.requests) == 2


@pytest.mark.parametrize("make", ADAPTERS)
def test_slow_answer_then_success(server: FakeLLM, make: Any) -> None:
    server.then(Reply(delay=GUARD_SECONDS))
    assert summarize(make(server, timeout=0.3, max_retries=1)).startswith("## Goal")


@pytest.mark.parametrize("make", ADAPTERS)
def test_cancel_aborts_the_request_in_flight(server: FakeLLM, make: Any) -> None:
    server.then(Reply(delay=GUARD_SECONDS))
    token = CancelToken()
    watcher = cancel_when_received(server, token)
    with pytest.raises(SummaryCancelled):
        make(server, timeout=GUARD_SECONDS * 2).summarize(request(), token)
    watcher.join()
    assert len(server.requests) == 1
    assert not server.finished.is_set()  # the slow answer was never waited for


def test_cancel_stops_a_retry_wait(server: FakeLLM) -> None:
    server.then(Reply(429, headers={"Retry-After": "3600"}))
    token = CancelToken()
    watcher = cancel_when_received(server, token)
    with pytest.raises(SummaryCancelled):
        openai(server, max_backoff=3600).summarize(request(), token)
    watcher.join()
    assert len(server.requests) == 1


def test_cancel_ends_work_that_swallowed_a_cancellation(server: FakeLLM) -> None:
    """Python 3.11's wait_for can drop a cancellation that arrives as its inner call ends (the
    retry then waited an hour, and the suite hung once): the cancellation is repeated."""
    swallowed: list[bool] = []

    async def stubborn() -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            swallowed.append(True)
        await asyncio.sleep(3600)  # what a dropped cancellation leads into: a long retry wait
        return "never"

    async def run() -> None:
        token = CancelToken()
        asyncio.get_running_loop().call_later(0.1, token.cancel)
        waiting = asyncio.ensure_future(openai(server).cancellable(stubborn(), token, "it"))
        done, _ = await asyncio.wait({waiting}, timeout=30)  # without the repeat: an hour
        assert done, "the cancelled work went on"
        with pytest.raises(SummaryCancelled):
            waiting.result()

    asyncio.run(run())
    assert swallowed == [True]


def test_cancelled_before_start_sends_nothing(server: FakeLLM) -> None:
    token = CancelToken()
    token.cancel()
    with pytest.raises(SummaryCancelled):
        openai(server).summarize(request(), token)
    assert server.requests == []


# -- async --------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", ADAPTERS)
def test_asummarize_and_sync_call_from_a_running_loop(server: FakeLLM, make: Any) -> None:
    summarizer = make(server)

    async def main() -> tuple[str, str]:
        first = await summarizer.asummarize(request())
        second = summarizer.summarize(request())  # sync API inside a running loop
        return first, second

    first, second = asyncio.run(main())
    assert first == second and first.startswith("## Goal")


# -- configuration ------------------------------------------------------------------------------


def test_configuration_from_the_environment(server: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1/")
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    for spec in ("openai:gpt-4.1-mini", "anthropic:claude-sonnet-4-5"):
        summarizer = summarizer_from_spec(spec, backoff=0)
        assert isinstance(summarizer, HttpSummarizer)
        assert summarize(summarizer).startswith("## Goal")
    assert [s.path for s in server.requests] == ["/v1/chat/completions", "/v1/messages"]


def test_missing_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SummarizerNotConfigured, match="OPENAI_API_KEY"):
        OpenAISummarizer("gpt-4.1-mini")
    with pytest.raises(SummarizerNotConfigured, match="ANTHROPIC_API_KEY"):
        summarizer_from_spec("anthropic:claude-sonnet-4-5")
    with pytest.raises(SummarizerNotConfigured, match="model"):
        summarizer_from_spec("openai:")
    with pytest.raises(SummarizerNotConfigured, match="unknown summarizer"):
        summarizer_from_spec("cohere:command")
    # A local server needs no key.
    local = OpenAISummarizer("llama3", base_url="http://127.0.0.1:9/v1")
    assert local.api_key is None and local.auth_headers() == {}


def test_without_httpx_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(MissingExtra, match=r"pip install 'sessiontree\[llm\]'"):
        OpenAISummarizer("gpt-4.1-mini", api_key="k")


def test_retry_after_forms() -> None:
    assert _retry_after({"retry-after": "2.5"}) == 2.5
    assert _retry_after({"retry-after-ms": "250"}) == 0.25
    past = email.utils.format_datetime(email.utils.localtime().replace(year=2000))
    assert _retry_after({"retry-after": past}) == 0.0
    assert _retry_after({"retry-after": "soon"}) is None
    assert _retry_after({}) is None


# -- compaction through a model -----------------------------------------------------------------


@pytest.mark.parametrize("make", ADAPTERS)
def test_compaction_with_a_model_adapter(server: FakeLLM, make: Any, tmp_path: Path) -> None:
    session = Session.create(tmp_path, cwd="/home/dev/proj")
    for i in range(6):
        session.append_message(UserMessage.of(f"Step {i}: change module_{i}.py " + "x" * 400))
        session.append_message(AssistantMessage(content=[TextContent(text=f"Editing module_{i}.py"),
                                                         ToolCall(id=f"c{i}", name="edit",
                                                                  arguments={"path": f"module_{i}.py"})],
                                                stop_reason="toolUse"))
        session.append_message(ToolResultMessage(tool_call_id=f"c{i}", tool_name="edit",
                                                 content=[TextContent(text="ok")]))
    leaf = session.leaf_id
    token, timer = guarded()
    try:
        entry = session.compact(make(server), keep_recent_tokens=300, cancel=token)
    finally:
        timer.cancel()
    assert entry is not None and entry.parent_id == leaf
    assert entry.summary.startswith("## Goal\n- Step 0: change module_0.py")
    assert "<modified-files>\nmodule_0.py" in entry.summary
    assert len(server.requests) == 1
    session.close()


def test_failing_model_writes_nothing(server: FakeLLM, tmp_path: Path) -> None:
    session = Session.create(tmp_path, cwd="/home/dev/proj")
    for i in range(4):
        session.append_message(UserMessage.of(f"question {i} " + "y" * 300))
        session.append_message(AssistantMessage.of(f"answer {i} " + "z" * 300))
    before = Path(str(session.file)).read_bytes()
    leaf = session.leaf_id
    server.then(*[Reply(500) for _ in range(2)])
    with pytest.raises(SummaryFailed):
        session.compact(openai(server, max_retries=1), keep_recent_tokens=100)
    assert session.leaf_id == leaf
    assert Path(str(session.file)).read_bytes() == before
    session.close()


def test_async_compaction_uses_the_adapters_async_path(server: FakeLLM, tmp_path: Path) -> None:
    session = Session.create(tmp_path, cwd="/home/dev/proj")
    session.append_message(UserMessage.of("First task " + "a" * 600))
    session.append_message(AssistantMessage.of("First answer " + "b" * 600))
    session.append_message(UserMessage.of("Second task: one long turn"))
    for i in range(6):
        session.append_message(AssistantMessage(content=[ToolCall(id=f"c{i}", name="read",
                                                                  arguments={"path": f"f{i}.py"})],
                                                stop_reason="toolUse"))
        session.append_message(ToolResultMessage(tool_call_id=f"c{i}", tool_name="read",
                                                 content=[TextContent(text="r" * 800)]))
    prep = session.prepare_compaction(keep_recent_tokens=450)
    assert prep is not None and prep.is_split_turn
    entry = asyncio.run(session.acompact(openai(server), keep_recent_tokens=450))
    assert entry is not None
    history, prefix = entry.summary.split("\n\n---\n\n**Turn Context (split turn):**\n\n")
    assert history.startswith("## Goal\n- First task")
    assert prefix.startswith("## Goal\n- Second task: one long turn")
    budgets = sorted(seen.body["max_tokens"] for seen in server.requests)
    assert budgets == [int(0.5 * 16384), int(0.8 * 16384)]
    session.close()


@pytest.mark.parametrize("make", ADAPTERS)
def test_a_compaction_stores_the_summarizers_usage(server: FakeLLM, make: Any) -> None:
    """pi 1.5.2 stores the summary call's usage on the compaction (counted in the session's
    totals); the HTTP summarizers report it, priced from the offline table."""
    from sessiontree import Session, SummaryText

    text = summarize(make(server))
    assert isinstance(text, SummaryText) and text.usage is not None
    assert (text.usage.input, text.usage.output) == (812, 64)
    session = Session.in_memory()
    for index in range(6):
        session.append_message(UserMessage.of(f"question {index} " + "words " * 200))
        session.append_message(AssistantMessage.of(f"answer {index} " + "more " * 200))
    compaction = session.compact(make(server), keep_recent_tokens=300)
    assert compaction.usage is not None and compaction.usage.output >= 64  # type: ignore[union-attr]
    assert compaction.usage.input == 812 * (1 + compaction.summary.count("Turn Context"))  # type: ignore[union-attr]
