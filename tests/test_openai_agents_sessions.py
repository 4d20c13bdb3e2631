"""The OpenAI Agents SDK session as the SDK's users use it: opened or created by id on every
backend in one line, settings given as a dict, and (below) several handles on one session."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.memory import SessionSettings
from openai import AsyncOpenAI

from sessiontree import Session
from sessiontree.errors import InvalidLocation, SessionLockedError, SessionNotFound
from sessiontree.integrations.openai_agents import SessionTreeSession
from sessiontree.stores.sqlite import SqliteStore

from .backends import handle_store
from .fake_llm import OPENAI_KEY, FakeLLM, Reply

set_tracing_disabled(True)

KINDS = ["memory", "root", "sqlite", "postgres", "redis-cluster"]


@pytest.fixture(params=KINDS)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """The store argument of each backend: ``None`` (memory), a folder (a sessions root in
    pi's layout), an SQLite URL, a PostgreSQL URL (a schema of this run), a Redis Cluster URL
    (a key prefix of its own)."""
    return handle_store(request, tmp_path, request.param)


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


# -- several handles on one session: the stored session is the truth ----------------------------

SHARED = ["root", "sqlite", "postgres", "redis-cluster"]


@pytest.fixture(params=SHARED)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store several handles and processes open the same session in."""
    url = handle_store(request, tmp_path, request.param)
    assert url is not None
    return url


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def stored_tree(where: str, session_id: str) -> Session:
    """The session as a fresh reader sees it."""
    return SessionTreeSession(session_id, where).tree


def test_handles_on_one_id_see_each_others_writes(shared: str) -> None:
    a = SessionTreeSession("chat", shared)
    b = SessionTreeSession("chat", shared)  # made before anything was stored
    run(a.add_items(items("from a")))
    assert run(b.get_items()) == items("from a")
    run(b.add_items(items("from b")))
    assert run(a.get_items()) == items("from a", "from b")  # one branch, not two
    assert a.item_ids() == b.item_ids()
    assert run(a.pop_item()) == items("from b")[0]
    assert run(b.get_items()) == items("from a")  # b sees a's pop
    assert run(b.pop_item()) == items("from a")[0]
    assert run(a.pop_item()) is None and run(b.pop_item()) is None  # each item popped once
    run(a.add_items(items("again")))
    b.checkout(None)  # a move made by one handle is the other's too
    assert run(a.get_items()) == []
    run(b.add_items(items("fresh")))
    run(a.clear_session())
    assert run(b.get_items()) == []
    a.close()
    b.close()
    tree = stored_tree(shared, "chat")
    messages = [e for e in tree.entries() if e.type == "message"]
    assert len(messages) == 4  # nothing was deleted: every item is still in the tree
    assert tree.file is None or len(list(Path(shared).rglob("*.jsonl"))) == 1
    tree.close()


def test_pops_racing_in_threads_pop_each_item_once(shared: str) -> None:
    seeded = items(*(f"item {n}" for n in range(24)))
    seed = SessionTreeSession("race", shared)
    run(seed.add_items(seeded))
    handles = [SessionTreeSession("race", shared) for _ in range(4)]
    popped: list[list[Any]] = [[] for _ in handles]
    start = threading.Barrier(len(handles))

    def pop_all(n: int) -> None:
        start.wait()
        while (item := run(handles[n].pop_item())) is not None:
            popped[n].append(item)

    threads = [threading.Thread(target=pop_all, args=(n,)) for n in range(len(handles))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [item for each in popped for item in each]
    assert sorted(i["content"] for i in every) == sorted(i["content"] for i in seeded)
    for each in popped:  # each handle popped from the end: newest first
        numbers = [int(i["content"].split()[1]) for i in each]
        assert numbers == sorted(numbers, reverse=True)
    assert run(seed.get_items()) == []
    for handle in [seed, *handles]:
        handle.close()


@pytest.mark.parametrize("kind", ["memory", *SHARED])
def test_one_session_from_threads_and_tasks(kind: str, tmp_path: Path,
                                           request: pytest.FixtureRequest) -> None:
    """One handle used by several threads and tasks at once, and one Session wrapped twice:
    every add lands, every item is popped once."""
    where = None if kind == "memory" else str(tmp_path / "s") if kind == "root" else \
        f"sqlite:///{tmp_path}/s.db" if kind == "sqlite" else \
        request.getfixturevalue("fresh_postgres_url")
    handle = SessionTreeSession("busy", where)
    twice = SessionTreeSession(handle.tree)

    async def adds(tag: str) -> None:
        await asyncio.gather(*(handle.add_items(items(f"{tag} {n}")) for n in range(6)))

    threads = [threading.Thread(target=run, args=(adds(f"t{n}"),)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = run(twice.get_items())
    assert sorted(i["content"] for i in stored) == sorted(
        f"t{t} {n}" for t in range(3) for n in range(6))

    popped: list[Any] = []

    def pops(session: SessionTreeSession) -> None:
        async def many() -> list[Any]:
            return list(await asyncio.gather(*(session.pop_item() for _ in range(6))))

        popped.extend(run(many()))

    threads = [threading.Thread(target=pops, args=(s,)) for s in (handle, twice, handle)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert None not in popped and len(popped) == 18
    assert sorted(i["content"] for i in popped) == sorted(i["content"] for i in stored)
    assert run(handle.get_items()) == []
    handle.close()


WORKER = """
import asyncio, json, os, sys, time
from sessiontree.integrations.openai_agents import SessionTreeSession
where, session_id, action, count, go = sys.argv[1:6]
handle = SessionTreeSession(session_id, where)
while not os.path.exists(go):
    time.sleep(0.005)
done = []
if action == "pop":
    while (item := asyncio.run(handle.pop_item())) is not None:
        done.append(item)
else:
    for n in range(int(count)):
        asyncio.run(handle.add_items([{"role": "user", "content": f"{action} {n}"}]))
        done.append(n)
handle.close()
print(json.dumps(done))
"""


def run_processes(where: str, session_id: str, actions: list[str], count: int,
                  tmp_path: Path) -> list[Any]:
    go = tmp_path / f"go-{session_id}"
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, where, session_id, action,
                                 str(count), str(go)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for action in actions]
    time.sleep(0.5)  # (not a timing assertion: most workers are waiting on the go file by now)
    go.write_text("go")
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        results.append(json.loads(out))
    return results


def test_handles_in_several_processes_pop_once_and_add_on_one_branch(
        shared: str, tmp_path: Path) -> None:
    seeded = items(*(f"item {n}" for n in range(20)))
    seed = SessionTreeSession("procs", shared)
    run(seed.add_items(seeded))
    popped = run_processes(shared, "procs", ["pop"] * 2, 0, tmp_path)
    every = [i["content"] for each in popped for i in each]
    assert sorted(every) == sorted(i["content"] for i in seeded)  # each exactly once
    assert run(seed.get_items()) == []

    run_processes(shared, "procs", ["p0", "p1"], 8, tmp_path)
    stored = [i["content"] for i in run(seed.get_items())]  # this handle sees them all
    assert sorted(stored) == sorted(f"p{p} {n}" for p in range(2) for n in range(8))
    for p in range(2):  # each process's items in its order, all on one branch
        assert [s for s in stored if s.startswith(f"p{p} ")] == [f"p{p} {n}" for n in range(8)]
    seed.close()


def test_jsonl_writer_holding_the_lock_makes_a_handle_wait_then_raise(tmp_path: Path) -> None:
    handle = SessionTreeSession("locked", tmp_path, lock_timeout=0.2)
    run(handle.add_items(items("first")))
    (file,) = tmp_path.rglob("*.jsonl")
    with Session.open(file) as writer:  # a plain Session keeps the lock until it closes
        writer.append_message({"role": "user", "content": "from the writer", "timestamp": 1})
        assert run(handle.get_items())[-1] == {"role": "user", "content": "from the writer"}
        with pytest.raises(SessionLockedError):
            run(handle.pop_item())
        with pytest.raises(SessionLockedError):
            run(handle.add_items(items("second")))
    assert run(handle.pop_item()) == {"role": "user", "content": "from the writer"}
    assert run(handle.get_items()) == items("first")
    handle.close()


def test_items_handed_out_are_copies_and_any_limit_is_exact(where: str | None) -> None:
    """The history is kept between calls (in pickled chunks of 512 items and JSON): every
    limit gives exactly the stored items, changing what was handed out changes nothing, and a
    pop across a chunk's edge or a reopen gives the same."""
    session = SessionTreeSession("long", where)
    stored = [{"role": "user", "content": f"q{n}"} if n % 3 else
              {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": "{}"}
              for n in range(1030)]
    for start in range(0, len(stored), 100):
        run(session.add_items(stored[start:start + 100]))
    for limit in (None, 0, 1, 5, 511, 512, 513, 518, 1024, 1025, 1029, 1030, 5000):
        expected = stored if limit is None else stored[len(stored) - limit:] if limit else []
        assert run(session.get_items(limit)) == expected, limit
    handed = run(session.get_items())
    handed[0]["content"] = "changed"
    handed[600].clear()
    assert run(session.get_items()) == stored
    for _ in range(7):  # back over the second chunk's edge
        run(session.pop_item())
    assert run(session.get_items()) == stored[:1023]
    assert run(session.get_items(600)) == stored[423:1023]
    run(session.add_items(stored[1023:]))
    assert run(session.get_items()) == stored
    if where is not None:
        session.close()
        again = SessionTreeSession("long", where)
        assert run(again.get_items(700)) == stored[-700:]
        again.close()


def test_handles_creating_one_new_id_at_once_make_one_session(shared: str) -> None:
    """Per-request handles on an id nobody stored yet, all adding at once: one session holds
    every item (PostgreSQL has no row to lock yet: the losers append again after it)."""
    handles = [SessionTreeSession("brand-new", shared) for _ in range(4)]
    start = threading.Barrier(len(handles))
    failures: list[BaseException] = []

    def add(n: int) -> None:
        start.wait()
        try:
            run(handles[n].add_items(items(f"h{n}")))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(len(handles))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    for handle in handles:
        assert sorted(i["content"] for i in run(handle.get_items())) == ["h0", "h1", "h2", "h3"]
        handle.close()
    if "://" not in shared:  # a sessions root: one file
        assert len(list(Path(shared).rglob("*_brand-new.jsonl"))) == 1
