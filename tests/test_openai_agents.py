"""The OpenAI Agents SDK session: a real ``Agent`` run by ``Runner.run`` against a Responses API
and a Chat Completions server on 127.0.0.1, its history kept as a pi session tree that pi itself
reads."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session as SdkSession
from agents.memory import SessionSettings
from openai import AsyncOpenAI

from sessiontree import Session
from sessiontree.integrations.openai_agents import SessionTreeSession

from .fake_llm import OPENAI_KEY, FakeLLM, Reply
from .fake_responses import API_KEY, FakeResponses, call, reasoning, text
from .test_pi_interop import assert_same, pi_modules, pi_read  # noqa: F401  (fixture)

set_tracing_disabled(True)  # the SDK would otherwise upload traces; nothing leaves the machine

CITIES: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name.
    """
    CITIES.append(city)
    return f"sunny, 21C in {city}"


@pytest.fixture
def server() -> Iterator[FakeResponses]:
    fake = FakeResponses().start()
    yield fake
    fake.stop()


def make_agent(server: FakeResponses) -> Agent[Any]:
    client = AsyncOpenAI(base_url=server.url, api_key=API_KEY, max_retries=0)
    return Agent(name="weather", instructions="Answer briefly.", tools=[get_weather],
                 model=OpenAIResponsesModel(model="gpt-test", openai_client=client))


def test_runner_turns_tool_call_branch_and_both_branches_replay(
        server: FakeResponses, tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    server.then(
        [reasoning("The user wants the weather: call the tool.", "rs_1"),
         call("get_weather", {"city": "Paris"}, "call_1", "fc_1")],
        [text("It is sunny and 21C in Paris.", "msg_1")],
        [text("Tomorrow brings rain.", "msg_2")],
        [text("London is sunny too.", "msg_3")],
    )
    agent = make_agent(server)
    session = SessionTreeSession.create(tmp_path, cwd="/home/dev/app", model="gpt-test")
    assert isinstance(session, SdkSession)  # the SDK's runtime protocol

    async def run() -> dict[str, Any]:
        first = await Runner.run(agent, "What's the weather in Paris?", session=session)
        turn1 = await session.get_items()
        turn1_end = session.item_ids()[-1]
        second = await Runner.run(agent, "And tomorrow?", session=session)
        branch_a = await session.get_items()
        leaf_a = session.tree.leaf_id
        session.checkout(turn1_end)  # back to the end of turn 1
        third = await Runner.run(agent, "And in London?", session=session)
        branch_b = await session.get_items()
        session.checkout(leaf_a)
        replay_a = await session.get_items()
        session.checkout(session.tree.leaves()[-2])
        return {"outputs": [first.final_output, second.final_output, third.final_output],
                "turn1": turn1, "a": branch_a, "b": branch_b, "replay_a": replay_a}

    seen = asyncio.run(run())
    assert seen["outputs"] == ["It is sunny and 21C in Paris.", "Tomorrow brings rain.",
                               "London is sunny too."]
    assert CITIES[-1:] == ["Paris"]
    turn1 = seen["turn1"]
    assert [i.get("type", "message") for i in turn1] == [
        "message", "reasoning", "function_call", "function_call_output", "message"]
    assert turn1[1]["encrypted_content"] == "gAAAA-rs_1-opaque"  # kept, though pi cannot read it
    # what the model was sent: each request is the branch's history plus the new input
    inputs = [r["input"] for r in server.requests]
    assert inputs[2] == turn1 + [{"content": "And tomorrow?", "role": "user"}]
    assert inputs[3] == turn1 + [{"content": "And in London?", "role": "user"}]  # not branch A
    # both branches replay exactly what was stored on them
    assert seen["a"] == inputs[2] + [seen["a"][-1]] and seen["a"][-1]["id"] == "msg_2"
    assert seen["b"] == inputs[3] + [seen["b"][-1]] and seen["b"][-1]["id"] == "msg_3"
    assert seen["replay_a"] == seen["a"]

    file = Path(session.tree.file or "")
    session.close()
    reopened = SessionTreeSession.open(file)
    assert asyncio.run(reopened.get_items()) == seen["b"]  # the leaf survived, as pi sees it
    with Session.open(file, strict=True) as tree:
        assert len(tree.leaves()) == 2
        roles = [m["role"] for m in tree.build_context().to_builtins()["messages"]]
        assert roles == ["user", "assistant", "assistant", "toolResult", "assistant", "user",
                         "assistant"]
        call_message = tree.build_context().to_builtins()["messages"][2]
        assert call_message["content"][0]["id"] == "call_1|fc_1"
        assert call_message["model"] == "gpt-test"
    reopened.close()
    (answer,) = pi_read(pi_modules, [file])
    assert_same(file, answer)



def test_chat_completions_model_turns_tool_call_branch_and_both_branches_replay(
        tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    """The same story through the SDK's Chat Completions model: what the session stores is
    what the SDK sends back as chat messages, request after request, on either branch."""
    server = FakeLLM().start()
    server.then(Reply(text="", tool_calls=[("get_weather", {"city": "Lyon"})]),
                Reply(text="It is sunny and 21C in Lyon."),
                Reply(text="Tomorrow brings rain."),
                Reply(text="Nice is sunny too."))
    client = AsyncOpenAI(base_url=f"{server.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    agent = Agent(name="weather", instructions="Answer briefly.", tools=[get_weather],
                  model=OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client))
    session = SessionTreeSession.create(tmp_path, cwd="/home/dev/app", model="gpt-4.1")

    async def run() -> dict[str, Any]:
        first = await Runner.run(agent, "What's the weather in Lyon?", session=session)
        turn1_end = session.item_ids()[-1]
        second = await Runner.run(agent, "And tomorrow?", session=session)
        branch_a = await session.get_items()
        leaf_a = session.tree.leaf_id
        session.checkout(turn1_end)
        third = await Runner.run(agent, "And in Nice?", session=session)
        branch_b = await session.get_items()
        session.checkout(leaf_a)
        replay_a = await session.get_items()
        await client.close()
        return {"outputs": [first.final_output, second.final_output, third.final_output],
                "a": branch_a, "b": branch_b, "replay_a": replay_a}

    try:
        seen = asyncio.run(run())
    finally:
        server.stop()
    assert seen["outputs"] == ["It is sunny and 21C in Lyon.", "Tomorrow brings rain.",
                               "Nice is sunny too."]
    assert CITIES[-1:] == ["Lyon"]
    # every request passed the server's check against openai's own request types
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 4
    sent = [[(m["role"], m.get("content"), m.get("tool_calls") and
              [c["function"]["name"] for c in m["tool_calls"]]) for m in r.body["messages"]]
            for r in server.requests]
    turn1 = [("system", "Answer briefly.", None), ("user", "What's the weather in Lyon?", None),
             ("assistant", None, ["get_weather"]), ("tool", "sunny, 21C in Lyon", None),
             ("assistant", "It is sunny and 21C in Lyon.", None)]
    assert sent[1] == turn1[:4]
    assert sent[2] == turn1 + [("user", "And tomorrow?", None)]
    assert sent[3] == turn1 + [("user", "And in Nice?", None)]  # branch B never saw branch A
    tool_call = server.requests[2].body["messages"][2]["tool_calls"][0]
    assert server.requests[2].body["messages"][3]["tool_call_id"] == tool_call["id"]
    # both branches replay what was stored on them, and they share turn 1
    assert seen["replay_a"] == seen["a"]
    assert seen["a"][:-2] == seen["b"][:-2] and seen["a"][-2:] != seen["b"][-2:]
    assert seen["b"][-2] == {"content": "And in Nice?", "role": "user"}

    file = Path(session.tree.file or "")
    session.close()
    with Session.open(file, strict=True) as tree:
        assert len(tree.leaves()) == 2
        messages = tree.build_context().to_builtins()["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant",
                                                 "user", "assistant"]
        assert messages[1]["content"][0]["name"] == "get_weather"
        assert messages[2]["content"][0]["text"] == "sunny, 21C in Lyon"
    (answer,) = pi_read(pi_modules, [file])
    assert_same(file, answer)


HOSTED = [
    {"role": "user", "content": [
        {"type": "input_text", "text": "What is in these?"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"},
        {"type": "input_image", "image_url": "https://example.invalid/cat.png", "detail": "low"},
        {"type": "input_file", "file_id": "file-123", "filename": "plan.pdf"}]},
    {"type": "web_search_call", "id": "ws_1", "status": "completed",
     "action": {"type": "search", "query": "cats"}},
    {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBORw0KGgo="},
    {"type": "function_call", "call_id": "c9", "name": "lookup", "arguments": "{\"q\": \"x\"}"},
    {"type": "function_call_output", "call_id": "c9", "output": [
        {"type": "input_text", "text": "found"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
    {"role": "developer", "content": "Be terse."},
    {"type": "message", "role": "assistant", "id": "msg_9", "status": "completed",
     "content": [{"type": "output_text", "text": "Two cats.", "annotations": [], "logprobs": []}]},
]


def test_items_without_pi_equivalent_come_back_exactly_and_nothing_is_deleted(
        tmp_path: Path, pi_modules: Path) -> None:  # noqa: F811
    session = SessionTreeSession.create(tmp_path, session_settings=SessionSettings(limit=3))
    asyncio.run(session.add_items(HOSTED))
    assert asyncio.run(session.get_items(limit=len(HOSTED))) == HOSTED
    assert asyncio.run(session.get_items()) == HOSTED[-3:]  # session_settings.limit
    assert asyncio.run(session.get_items(limit=1)) == HOSTED[-1:]
    tree = session.tree
    kinds = [json.loads(tree.raw_line(i)).get("customType") for i in tree.path_ids()]
    assert kinds.count("openai.item") == 2  # the hosted calls, as custom entries pi ignores
    size = len(tree)

    popped = asyncio.run(session.pop_item())
    assert popped == HOSTED[-1]
    assert asyncio.run(session.get_items(limit=10)) == HOSTED[:-1]
    assert len(tree) == size + 1  # a checkout marker; the popped entry is still there
    asyncio.run(session.add_items([HOSTED[-1]]))
    assert len(tree.leaves()) == 2  # the popped item and its re-add are two branches

    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == [] and asyncio.run(session.pop_item()) is None
    asyncio.run(session.add_items([{"role": "user", "content": "fresh start"}]))
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "fresh start"}]
    old_leaf = next(i for i in tree.leaves() if i in tree.subtree_ids(tree.path_ids(
        tree.leaves()[0])[0]))
    session.checkout(old_leaf)  # the cleared history is still there
    assert asyncio.run(session.get_items(limit=100))[0] == HOSTED[0]

    forked = session.fork()
    assert forked.session_id != session.session_id and forked.tree.file != tree.file
    assert asyncio.run(forked.get_items(limit=100)) == asyncio.run(session.get_items(limit=100))
    files = [Path(tree.file or ""), Path(forked.tree.file or "")]
    session.close()
    forked.close()
    for path, answer in zip(files, pi_read(pi_modules, files)):
        assert_same(path, answer)


def test_history_follows_compaction_and_branch_summaries() -> None:
    session = SessionTreeSession.in_memory()
    asyncio.run(session.add_items([{"role": "user", "content": "q1"},
                                   {"type": "message", "role": "assistant", "id": "m1",
                                    "status": "completed", "content": [
                                        {"type": "output_text", "text": "a1", "annotations": []}]},
                                   {"role": "user", "content": "q2"}]))
    first_question, kept = session.item_ids()[0], session.item_ids()[-1]
    session.tree.append_compaction("Earlier: q1 was answered.", kept, 1000)
    items = asyncio.run(session.get_items())
    assert items[0]["role"] == "user" and "Earlier: q1 was answered." in \
        items[0]["content"][0]["text"]
    assert items[1:] == [{"role": "user", "content": "q2"}]

    # going back to q1 with a summary of the branch left: the summary is the next user item,
    # after q1's history, and nothing of the abandoned branch (compaction included) follows
    session.tree.branch_with_summary(first_question, "Tried q2; it went nowhere.")
    items = asyncio.run(session.get_items())
    assert items[0] == {"role": "user", "content": "q1"}
    assert len(items) == 2 and items[1]["role"] == "user"
    assert "Tried q2; it went nowhere." in items[1]["content"][0]["text"]
    asyncio.run(session.add_items([{"role": "user", "content": "q3"}]))
    assert asyncio.run(session.get_items())[2:] == [{"role": "user", "content": "q3"}]
