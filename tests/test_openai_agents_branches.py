"""What the SDK's AdvancedSQLiteSession adds, on every backend: named branches, turns, tool
and token usage per run, turn and branch, kept in the session itself (pi 1.5.2 ``usage``
entries), through a real ``Runner.run`` against the 127.0.0.1 model server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from sessiontree import Session
from sessiontree.export.html import export_html
from sessiontree.export.markdown import export_markdown
from sessiontree.integrations.openai_agents import SessionTreeSession
from sessiontree.usage import session_usage

from .backends import handle_store
from .fake_llm import OPENAI_KEY, FakeLLM, Reply

set_tracing_disabled(True)


@function_tool
def lookup(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name.
    """
    return f"sunny in {city}"


@pytest.fixture(params=["memory", "root", "sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    return handle_store(request, tmp_path, request.param)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    yield server
    server.stop()


def test_branches_turns_and_usage_through_real_runs(llm: FakeLLM, where: str | None) -> None:
    llm.then(Reply(text="", tool_calls=[("lookup", {"city": "Paris"})], usage=(100, 10, 40)),
             Reply(text="Sunny in Paris.", usage=(150, 20, 0)),
             Reply(text="Rain tomorrow.", usage=(200, 5, 100)),
             Reply(text="Lyon is sunny.", usage=(300, 7, 0)),
             Reply(text="Nice is sunny.", usage=(310, 8, 0)))
    client = AsyncOpenAI(base_url=f"{llm.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    agent = Agent(name="w", instructions="Be brief.", tools=[lookup],
                  model=OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client))
    session = SessionTreeSession("user_1", where, model="gpt-4.1")

    async def turn(prompt: str) -> str:
        result = await Runner.run(agent, prompt, session=session)
        await session.store_run_usage(result)
        return str(result.final_output)

    async def story() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        seen["answers"] = [await turn("Weather in Paris?"), await turn("And tomorrow?")]
        seen["turns"] = await session.get_conversation_turns()
        seen["found"] = await session.find_turns_by_content("TOMORROW")
        seen["tools"] = await session.get_tool_usage()
        seen["turn_usage"] = await session.get_turn_usage()
        seen["turn_2"] = await session.get_turn_usage(2)
        seen["turn_9"] = await session.get_turn_usage(9)
        seen["main_items"] = await session.get_items()
        seen["branch"] = await session.create_branch_from_turn(2, "lyon")
        seen["after_branching"] = await session.get_items()
        seen["answers"].append(await turn("Weather in Lyon?"))
        seen["lyon_items"] = await session.get_items()
        seen["branches"] = await session.list_branches()
        seen["main_by_id"] = await session.get_items(branch_id="main")
        await session.switch_to_branch("main")
        seen["main_again"] = await session.get_items()
        seen["auto"] = await session.create_branch_from_content("paris")
        seen["answers"].append(await turn("Weather in Nice?"))
        seen["session_usage"] = await session.get_session_usage()
        seen["lyon_usage"] = await session.get_session_usage("lyon")
        seen["lyon_turns"] = await session.get_conversation_turns("lyon")
        with pytest.raises(ValueError):
            await session.switch_to_branch("nowhere")
        with pytest.raises(ValueError):
            await session.create_branch_from_turn(1, "lyon")  # a name is used once
        with pytest.raises(ValueError):
            await session.create_branch_from_turn(7)
        await client.close()
        return seen

    seen = asyncio.run(story())
    assert seen["answers"] == ["Sunny in Paris.", "Rain tomorrow.", "Lyon is sunny.",
                               "Nice is sunny."]
    assert [(t["turn"], t["full_content"]) for t in seen["turns"]] == [
        (1, "Weather in Paris?"), (2, "And tomorrow?")]
    assert all(t["can_branch"] and t["timestamp"] for t in seen["turns"])
    assert [t["turn"] for t in seen["found"]] == [2]
    assert seen["tools"] == [("lookup", 1, 1)]
    # turn 1 took two requests (the tool call, then the answer); input tokens count the cached
    # ones (the server's prompt = input + cached), which are in the details
    assert [(u["user_turn_number"], u["requests"], u["input_tokens"], u["output_tokens"])
            for u in seen["turn_usage"]] == [(1, 2, 290, 30), (2, 1, 300, 5)]
    assert seen["turn_usage"][0]["input_tokens_details"]["cached_tokens"] == 40
    assert seen["turn_2"]["input_tokens"] == 300 and "user_turn_number" not in seen["turn_2"]
    assert seen["turn_9"] == {}

    # the branch starts just before turn 2: turn 1's items, and the new question then
    assert seen["branch"] == "lyon"
    turn_1 = seen["main_items"][:-2]
    assert seen["after_branching"] == turn_1
    assert seen["lyon_items"][:len(turn_1)] == turn_1
    assert seen["lyon_items"][len(turn_1)] == {"role": "user", "content": "Weather in Lyon?"}
    branches = {b["branch_id"]: b for b in seen["branches"]}
    assert set(branches) == {"main", "lyon"}
    assert branches["lyon"]["is_current"] and not branches["main"]["is_current"]
    assert branches["main"]["user_turns"] == 2 and branches["lyon"]["user_turns"] == 2
    assert branches["lyon"]["message_count"] == len(seen["lyon_items"])
    assert seen["main_by_id"] == seen["main_items"] == seen["main_again"]
    assert seen["auto"].startswith("branch_from_turn_1_")
    assert seen["lyon_turns"][-1]["full_content"] == "Weather in Lyon?"
    # every run is counted once over the session, the branch's on its own path
    assert seen["session_usage"] == {"requests": 5, "input_tokens": 1200, "output_tokens": 50,
                                     "total_tokens": 1250, "total_turns": 4}
    assert seen["lyon_usage"] == {"requests": 3, "input_tokens": 590, "output_tokens": 37,
                                  "total_tokens": 627, "total_turns": 2}

    # stored in the session: a new handle sees the branches, and pi's totals count the runs
    tree = session.tree
    totals = session_usage(tree)
    assert (totals.input, totals.output, totals.cache_read) == (1060, 50, 140)
    # the exports show the runs' usage entries, and the branch labels
    document = export_markdown(tree, all_branches=True)
    assert document.count("*Usage (openai-agents.run): openai/gpt-4.1,") == 4
    page = export_html(tree)
    assert page.count(b"openai-agents.run") >= 4 and b"lyon" in page
    if where is not None:
        session.close()
        again = SessionTreeSession("user_1", where)
        names = {b["branch_id"] for b in asyncio.run(again.list_branches())}
        assert names == {"main", "lyon", seen["auto"]}
        assert asyncio.run(again.get_items(branch_id="lyon")) == seen["lyon_items"]
        again.close()


def test_switching_from_advanced_sqlite_session_is_a_change_of_import(tmp_path: Path) -> None:
    from sessiontree.integrations.openai_agents import SessionTreeSession as AdvancedSQLiteSession

    session = AdvancedSQLiteSession(session_id="conv", db_path=tmp_path / "c.db",
                                    create_tables=True)
    asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
    session.close()
    again = SessionTreeSession.open(f"sqlite:///{tmp_path}/c.db#conv")
    assert asyncio.run(again.get_items()) == [{"role": "user", "content": "hi"}]
    assert asyncio.run(again.get_session_usage()) is None
    assert [b["branch_id"] for b in asyncio.run(again.list_branches())] == ["main"]
    again.close()
    memory = AdvancedSQLiteSession(session_id="m", db_path=":memory:")
    assert memory.tree.url is None
    with pytest.raises(TypeError):
        AdvancedSQLiteSession(db_path=tmp_path / "c.db")


WRITERS: dict[str, Callable[[SessionTreeSession, Any], Any]] = {
    "checkout": lambda handle, result: handle.checkout(None),
    "switch_to_branch": lambda handle, result: asyncio.run(handle.switch_to_branch("main")),
    "create_branch_from_turn": lambda handle, result: asyncio.run(
        handle.create_branch_from_turn(1, "again")),
    "store_run_usage": lambda handle, result: asyncio.run(handle.store_run_usage(result)),
}
"""Each writing method besides add_items, pop_item and clear_session, and what it stores."""
STORED = {"checkout": 2, "switch_to_branch": 1, "create_branch_from_turn": 3, "store_run_usage": 2}


@pytest.mark.parametrize("method", sorted(WRITERS))
def test_every_write_to_a_new_id_waits_for_the_first_write_in_progress(
        llm: FakeLLM, tmp_path: Path, method: str) -> None:
    """The branch and usage methods take their turn on the first write of an id new to a
    sessions root too (they wrote outside it): a handle whose write comes while another
    handle's first write is in progress waits for it, then continues that file, instead of
    starting a file of its own."""
    llm.then(Reply(text="ok", usage=(10, 2, 0)))

    async def one_run() -> Any:  # a run's usage, without a session
        async with AsyncOpenAI(base_url=f"{llm.url}/v1", api_key=OPENAI_KEY,
                               max_retries=0) as client:
            agent = Agent(name="w", instructions="Be brief.",
                          model=OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client))
            return await Runner.run(agent, "hello")

    result = asyncio.run(one_run())
    root = tmp_path / "sessions"
    writer, waiting = (SessionTreeSession("fresh", str(root), lock_timeout=600) for _ in range(2))
    failures: list[BaseException] = []

    def write() -> None:
        try:
            WRITERS[method](waiting, result)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    thread = threading.Thread(target=write)
    with writer._writing():  # the writer's first write, under way
        thread.start()
        thread.join(timeout=2)  # (without its turn, the other handle wrote its own file now)
        assert not list(root.rglob("*_fresh.jsonl"))
        writer._append_planned(lambda branch: (False, branch.leaf,
                                               [{"role": "user", "content": "first"}]))
    thread.join()
    assert failures == []
    [stored] = root.rglob("*_fresh.jsonl")
    with Session.open(stored) as session:
        assert len(session) == STORED[method]
        assert session.entry(session.ids()[0]).message.role == "user"  # the writer's, first
    for handle in (writer, waiting):
        handle.close()
