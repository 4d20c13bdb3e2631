"""The OpenAI Agents SDK session as the SDK's users use it: opened or created by id on every
backend in one line, settings given as a dict, and (below) several handles on one session."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.memory import SessionSettings
from openai import AsyncOpenAI

from sessiontree import Session
from sessiontree.errors import InvalidLocation, SessionNotFound
from sessiontree.integrations.openai_agents import SessionTreeSession
from sessiontree.stores.sqlite import SqliteStore

from .fake_llm import OPENAI_KEY, FakeLLM, Reply

set_tracing_disabled(True)

KINDS = ["memory", "root", "sqlite", "postgres"]


@pytest.fixture(params=KINDS)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """The store argument of each backend: ``None`` (memory), a folder (a sessions root in
    pi's layout), an SQLite URL, a PostgreSQL URL (a schema of this run)."""
    kind = request.param
    if kind == "memory":
        return None
    if kind == "root":
        return str(tmp_path / "sessions")
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/conversations.db"
    url: str = request.getfixturevalue("fresh_postgres_url")
    return url


def items(*texts: str) -> list[Any]:
    return [{"role": "user", "content": text} for text in texts]


def test_open_or_create_by_id_in_one_line_on_every_backend(where: str | None) -> None:
    first = SessionTreeSession("user_123", where, cwd="/home/dev/app")
    assert first.session_id == "user_123"
    assert asyncio.run(first.get_items()) == []  # a new id: an empty session, nothing stored
    asyncio.run(first.add_items(items("hello", "again")))
    if where is None:  # memory: like the SDK's ":memory:", each object is its own session
        assert repr(first) == "<SessionTreeSession user_123 memory>"
        first.close()
        return
    url = first.tree.url
    assert url is not None and repr(first) == f"<SessionTreeSession user_123 {url}>"
    assert ("sqlite:///" in url) == where.startswith("sqlite") and \
        ("postgresql://" in url) == where.startswith("postgresql")
    if where.startswith("postgresql"):
        assert "schema=" in url
    first.close()

    again = SessionTreeSession("user_123", where)  # the same line opens it
    assert asyncio.run(again.get_items()) == items("hello", "again")
    assert again.tree.cwd == "/home/dev/app"
    other = SessionTreeSession("user_456", where)  # another id: another session
    assert asyncio.run(other.get_items()) == []
    again.close()
    other.close()


def test_a_folder_is_a_sessions_root_in_pis_layout(tmp_path: Path) -> None:
    session = SessionTreeSession("user_123", tmp_path, cwd="/home/dev/app")
    asyncio.run(session.add_items(items("hello")))
    session.close()
    (file,) = (tmp_path / "--home-dev-app--").glob("*_user_123.jsonl")
    with Session.open(file) as tree:
        assert tree.id == "user_123"


def test_database_address_with_a_new_id_is_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/c.db"
    session = SessionTreeSession.open(f"{url}#new_id")
    asyncio.run(session.add_items(items("first")))
    session.close()
    reopened = SessionTreeSession.open(f"{url}#new_id")
    assert asyncio.run(reopened.get_items()) == items("first")
    reopened.close()
    with pytest.raises(SessionNotFound):  # a file path must exist
        SessionTreeSession.open(tmp_path / "missing.jsonl")
    with pytest.raises(InvalidLocation):  # an id that cannot be a file name or a key
        SessionTreeSession("../etc", url)
    with pytest.raises(InvalidLocation):  # the address names another session
        SessionTreeSession("a", f"{url}#b")


def test_create_and_in_memory_take_an_id_and_create_takes_a_store(tmp_path: Path) -> None:
    memory = SessionTreeSession.in_memory("chat-1")
    assert memory.session_id == "chat-1" and memory.tree.id == "chat-1"
    with SqliteStore.open(tmp_path / "s.db") as store:
        stored = SessionTreeSession.create(session_id="chat-2", store=store)
        asyncio.run(stored.add_items(items("x")))
        assert repr(stored) == f"<SessionTreeSession chat-2 sqlite:///{tmp_path}/s.db#chat-2>"
        stored.close()
        # a store object: open-or-create by id too, the store left open
        same = SessionTreeSession("chat-2", store)
        assert asyncio.run(same.get_items()) == items("x")
        same.close()
        assert store.session_ids() == ["chat-2"]
    by_url = SessionTreeSession.create(session_id="chat-3", store=f"sqlite:///{tmp_path}/t.db")
    asyncio.run(by_url.add_items(items("y")))
    by_url.close()
    assert SqliteStore.open(tmp_path / "t.db").session_ids() == ["chat-3"]
    with pytest.raises(InvalidLocation):
        SessionTreeSession(Session.in_memory(), f"sqlite:///{tmp_path}/s.db")


def test_settings_as_a_dict_are_normalized_and_checked() -> None:
    session = SessionTreeSession.in_memory(session_settings={"limit": 2})
    assert session.session_settings == SessionSettings(limit=2)
    asyncio.run(session.add_items(items("a", "b", "c")))
    assert asyncio.run(session.get_items()) == items("b", "c")
    with pytest.raises(TypeError, match="limitt"):  # the SDK's own error for an unknown key
        SessionTreeSession.in_memory(session_settings={"limitt": 2})
    with pytest.raises(pydantic.ValidationError):
        SessionTreeSession.in_memory(session_settings={"limit": "many"})
    typed = SessionTreeSession.in_memory(session_settings=SessionSettings(limit=1))
    assert typed.session_settings.limit == 1
    forked_from = SessionTreeSession.in_memory(session_settings={"limit": 1})
    asyncio.run(forked_from.add_items(items("a", "b")))
    assert forked_from.fork().session_settings == SessionSettings(limit=1)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    yield server
    server.stop()


def test_dict_settings_through_a_real_runner(llm: FakeLLM, where: str | None) -> None:
    """``Runner.run`` reads ``session.session_settings.limit``: a dict given to the constructor
    works there as in the SDK's own sessions, and the model sees only the latest items."""
    llm.then(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    client = AsyncOpenAI(base_url=f"{llm.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    agent = Agent(name="a", instructions="Be brief.",
                  model=OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client))
    session = SessionTreeSession("user_123", where, session_settings={"limit": 3})

    async def run() -> list[str]:
        outputs = []
        for prompt in ("q1", "q2", "q3"):
            result = await Runner.run(agent, prompt, session=session)
            outputs.append(result.final_output)
        await client.close()
        return outputs

    assert asyncio.run(run()) == ["one", "two", "three"]
    sent = [[(m["role"], m["content"]) for m in r.body["messages"]] for r in llm.requests]
    assert sent[0] == [("system", "Be brief."), ("user", "q1")]
    # the third request: the latest 3 stored items (a1's question fell out), then q3
    assert sent[2] == [("system", "Be brief."), ("assistant", "one"), ("user", "q2"),
                       ("assistant", "two"), ("user", "q3")]
    assert len(asyncio.run(session.get_items(limit=100))) == 6
    session.close()
