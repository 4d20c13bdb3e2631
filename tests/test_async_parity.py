"""Sync and async twins give the same results: the stores (SQLite in a thread, PostgreSQL on
psycopg's async pool, the same statements) and AsyncSession over every backend."""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from sessiontree import (
    AssistantMessage,
    AsyncSession,
    DuplicateId,
    InvalidEntry,
    Session,
    SessionHeader,
    SessionNotFound,
    Usage,
    UserMessage,
)
from sessiontree._time import iso_now, uuid7
from sessiontree.optree import render_ascii
from sessiontree.testing.conformance import sample_entries
from sessiontree.testing.digests import context_digest

from .backends import Backend, reopen
from .optree.conftest import Clock, Ids
from .optree.test_persist import full_run


async def store_scenario(store: Any, awaited: bool) -> dict[str, Any]:
    """Create, append, read, list and delete through a store, sync or async."""

    async def call(name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(store, name)(*args, **kwargs)
        return await result if awaited else result

    a = SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/a")
    b = SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/b")
    await call("create", a)
    await call("create", b)
    entries = sample_entries()
    await call("append", b.id, entries)
    more = sample_entries("more")
    more[0] = type(more[0])(id=more[0].id, parent_id=entries[-1].id,
                            timestamp=more[0].timestamp, message=more[0].message)
    await call("append", b.id, more)
    with pytest.raises(DuplicateId):
        await call("append", b.id, entries[:1])
    orphan = sample_entries("orphan")[1:]
    with pytest.raises(InvalidEntry):
        await call("append", b.id, orphan)
    read = list(await call("read", b.id))
    listing = [(x.id, x.cwd, x.entry_count, x.message_count, x.first_message)
               for x in await call("list_sessions", cwd="/b")]
    everything = [x.id for x in await call("list_sessions")]
    await call("delete", a.id)
    with pytest.raises(SessionNotFound):
        await call("delete", a.id)
    after = [x.id for x in await call("list_sessions")]
    return {"read": [(e.id, e.parent_id) for e in read], "listing": listing,
            "everything": sorted(everything), "after": after, "ids": (a.id, b.id),
            "first": read[0].message.content}  # type: ignore[union-attr]


def normalized(result: dict[str, Any]) -> dict[str, Any]:
    """The same scenario with new ids: compare shapes, not ids."""
    a, b = result["ids"]
    names = {a: "A", b: "B"}
    return {"entries": len(result["read"]), "chained": [p is None for _, p in result["read"]],
            "listing": [(names[i], *rest) for i, *rest in result["listing"]],
            "everything": sorted(names[i] for i in result["everything"]),
            "after": [names[i] for i in result["after"]], "first": result["first"]}


def test_async_sqlite_store_matches_the_sync_one(tmp_path: Path) -> None:
    from sessiontree import AsyncSqliteStore, SqliteStore

    with SqliteStore.open(tmp_path / "sync.db") as sync:
        expected = asyncio.run(store_scenario(sync, False))

    async def run() -> dict[str, Any]:
        async with AsyncSqliteStore.open(tmp_path / "async.db") as store:
            return await store_scenario(store, True)

    assert normalized(asyncio.run(run())) == normalized(expected)


def test_async_postgres_store_matches_the_sync_one(fresh_postgres_url: str) -> None:
    from sessiontree import AsyncPostgresStore, PostgresStore

    with PostgresStore.from_url(fresh_postgres_url) as sync:
        expected = asyncio.run(store_scenario(sync, False))
        kept = sync.session_ids()
        for session_id in kept:  # an empty store again for the async run
            sync.delete(session_id)

    async def run() -> dict[str, Any]:
        async with AsyncPostgresStore.from_url(fresh_postgres_url) as store:
            result = await store_scenario(store, True)
            session_id = result["ids"][1]
            # what the async store wrote, the sync one reads (and the other way round)
            with PostgresStore.from_url(fresh_postgres_url) as sync:
                assert [e.id for e in sync.read(session_id)] == [i for i, _ in result["read"]]
                assert kept and not set(kept) & set(sync.session_ids())
            return result

    assert normalized(asyncio.run(run())) == normalized(expected)


def test_async_postgres_follow_wakes_on_notify(fresh_postgres_url: str) -> None:
    from sessiontree import AsyncPostgresStore

    async def run() -> list[bytes]:
        async with AsyncPostgresStore.from_url(fresh_postgres_url) as store:
            header = SessionHeader(id=uuid7(), timestamp=iso_now(), cwd="/f")
            await store.create(header)
            entries = sample_entries()

            async def write() -> None:
                await asyncio.sleep(0.2)
                await store.append(header.id, entries)

            writer = asyncio.create_task(write())
            seen = [line async for line in store.follow(header.id, idle_timeout=2.0)]
            await writer
            return seen

    lines = asyncio.run(run())
    assert len(lines) == 2 and b"second" in lines[1]  # both appended lines, in order


# -- AsyncSession: every name of Session ----------------------------------------------------------

TWINS = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__",
         "__contains__": "contains", "anavigate_tree": "navigate_tree", "apop": "pop",
         "acompact": "compact", "abuild_context": "build_context"}
"""Session names whose AsyncSession twin has another name (DESIGN.md 7: only close/aclose, and
Session's own async variants, which are the plain names there)."""

NO_IO = {"in_memory", "__len__"}
"""Session methods that never read or write: plain methods of AsyncSession too."""

STREAMS = {"follow", "follow_lines"}
"""Session generators that wait for what is still to come: async iterators there (the other
generators, ``entries`` and ``custom_entries``, are coroutines that return lists)."""

IO_PROPERTIES = {"problems"}
"""Session properties that may read (a database session loads its tree): coroutines there."""

PARAMETERS_LEFT_OUT = {
    "follow": {"stop"}, "follow_lines": {"stop"},  # leaving the async for stops it
    "anavigate_tree": {"offload"}, "apop": {"offload"}, "acompact": {"offload"},
    "abuild_context": {"offload"},  # AsyncSession runs the steps in its worker thread
}
PARAMETERS_ADDED = {
    "open": {"store"},  # a session id of an (async) store object
    "abuild_context": {"for_model"},  # build_context(for_model=True) is abuild_context
}


def public_names(cls: type) -> set[str]:
    dunders = {"__len__", "__contains__", "__enter__", "__exit__"}
    return {name for name in dir(cls) if not name.startswith("_") or name in dunders}


def parameters(func: Any) -> dict[str, tuple[Any, Any]]:
    signature = inspect.signature(func)
    return {name: (p.kind, p.default) for name, p in signature.parameters.items()
            if name not in ("self", "cls")}


@pytest.mark.parametrize("name", sorted(public_names(Session)))
def test_async_session_has_every_public_name_of_session(name: str) -> None:
    twin = TWINS.get(name, name)
    assert hasattr(AsyncSession, twin), f"AsyncSession lacks {twin} (Session.{name})"
    mine, theirs = inspect.getattr_static(Session, name), inspect.getattr_static(AsyncSession, twin)
    if isinstance(mine, property):
        if name in IO_PROPERTIES:
            assert inspect.iscoroutinefunction(theirs), f"AsyncSession.{twin} must be awaited"
        else:
            assert isinstance(theirs, property), f"AsyncSession.{twin} is not a property"
        return
    assert isinstance(theirs, classmethod) == isinstance(mine, classmethod), twin
    func = getattr(AsyncSession, twin)
    if name in NO_IO:
        assert not inspect.iscoroutinefunction(func)
    elif name in STREAMS:
        assert inspect.isasyncgenfunction(func), f"AsyncSession.{twin} is not an async iterator"
    else:
        assert inspect.iscoroutinefunction(func), f"AsyncSession.{twin} is not a coroutine"
    if name in ("__enter__", "__exit__", "__contains__", "close"):
        return
    expected = {k: v for k, v in parameters(getattr(Session, name)).items()
                if k not in PARAMETERS_LEFT_OUT.get(name, set())}
    found = {k: v for k, v in parameters(func).items()
             if k not in PARAMETERS_ADDED.get(name, set())}
    assert found == expected, f"AsyncSession.{twin} takes other parameters than Session.{name}"


def test_the_name_check_fails_for_a_missing_twin() -> None:
    class Lacking(AsyncSession):
        pop = None  # type: ignore[assignment]

    assert not inspect.iscoroutinefunction(getattr(Lacking, TWINS["apop"]))
    assert "navigate_tree" in public_names(Session) and "optree" in public_names(Session)
    assert public_names(Session) - set(TWINS) <= public_names(AsyncSession)


# -- the same scenario through Session and AsyncSession, on every backend -----------------------

ASYNC_KINDS = ["memory", "jsonl", "sqlite", "sqlite-async", "postgres-thread", "postgres"]
"""How an AsyncSession is opened: memory; a JSONL file; SQLite through a sync SqliteStore or an
AsyncSqliteStore (both in threads); PostgreSQL through a sync PostgresStore run in threads, or
natively through an AsyncPostgresStore (``postgres``)."""


def sync_kind(kind: str) -> str:
    return kind.split("-")[0]


class AsyncBackend:
    """Opens AsyncSessions of one kind, in the running event loop."""

    def __init__(self, kind: str, tmp_path: Path, postgres: str | None) -> None:
        self.kind, self.tmp_path, self.postgres = kind, tmp_path, postgres
        self.store: Any = None
        self.count = 0

    async def __aenter__(self) -> AsyncBackend:
        from sessiontree import AsyncPostgresStore, AsyncSqliteStore, PostgresStore, SqliteStore

        database = self.tmp_path / "async.db"
        if self.kind == "sqlite":
            self.store = SqliteStore.open(database)
        elif self.kind == "sqlite-async":
            self.store = AsyncSqliteStore.open(database)
        elif self.kind == "postgres-thread":
            self.store = PostgresStore.from_url(self.postgres or "")
        elif self.kind == "postgres":
            self.store = await AsyncPostgresStore.from_url(self.postgres or "").open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.store is not None:
            closing = getattr(self.store, "aclose", None)
            await closing() if closing is not None else self.store.close()

    async def create(self, cwd: str = "/home/dev/proj") -> AsyncSession:
        self.count += 1
        if self.kind == "memory":
            return AsyncSession.in_memory(cwd)
        if self.kind == "jsonl":
            return await AsyncSession.create(self.tmp_path / f"a{self.count}", cwd)
        return await AsyncSession.create(cwd=cwd, store=self.store)

    async def reopen(self, session: AsyncSession) -> AsyncSession:
        if self.kind == "memory":
            return AsyncSession(reopen(session.sync))
        if self.kind == "jsonl":
            return await AsyncSession.open(session.file or "")
        return await AsyncSession.open(session.id, store=self.store)


@pytest.fixture(params=ASYNC_KINDS)
def async_kind(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    kind = request.param
    url = request.getfixturevalue("postgres_url") if kind.startswith("postgres") else None
    return kind, url


def reply(text: str, total: int) -> AssistantMessage:
    return AssistantMessage.of(text, provider="anthropic", model="claude",
                               usage=Usage(total_tokens=total))


def flatten(nodes: list[Any], depth: int = 0) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for node in nodes:
        out.append((depth, node.id, node.type, node.label, node.entry.type))
        out.extend(flatten(node.children, depth + 1))
    return out


async def session_scenario(s: Any, awaited: bool, tmp: Path, reopen_session: Any
                           ) -> dict[str, Any]:
    """Every Session operation once, through ``s`` (a Session, or an AsyncSession with
    ``awaited``); ids replaced by their order of appearance, so two runs compare."""
    from sessiontree.events import BeforeTreeResult

    async def call(name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(s, name)(*args, **kwargs)
        return await result if awaited else result

    names: dict[str, str] = {}

    def n(entry_id: Any) -> Any:
        if isinstance(entry_id, (list, tuple)):
            return [n(i) for i in entry_id]
        return entry_id if entry_id is None else names.setdefault(entry_id, f"e{len(names)}")

    seen: list[tuple[str, Any]] = []
    loop = asyncio.get_running_loop()

    def record(event: str, detail: Any) -> None:
        seen.append((event, detail))
        if awaited:  # an async handler: awaited in the loop that called the operation
            assert asyncio.get_running_loop() is loop

    if awaited:
        async def before_tree(prep: Any) -> Any:
            await asyncio.sleep(0)
            record("before_tree", len(prep.entries_to_summarize))
            return BeforeTreeResult(instructions="short") if prep.user_wants_summary else None

        async def before_compact(prep: Any) -> None:
            await asyncio.sleep(0)
            record("before_compact", len(prep.messages_to_summarize))

        async def on_context(event: Any) -> None:
            await asyncio.sleep(0)
            record("context", len(event.messages))
    else:
        def before_tree(prep: Any) -> Any:
            record("before_tree", len(prep.entries_to_summarize))
            return BeforeTreeResult(instructions="short") if prep.user_wants_summary else None

        def before_compact(prep: Any) -> None:
            record("before_compact", len(prep.messages_to_summarize))

        def on_context(event: Any) -> None:
            record("context", len(event.messages))

    if awaited:  # an operation tree recorded through the wrapped session, read back through s
        await asyncio.to_thread(full_run, s.sync, Clock(), Ids())
    else:
        full_run(s, Clock(), Ids())
    s.events.on("session_before_tree", before_tree)
    s.events.on("session_before_compact", before_compact)
    s.events.on("context", on_context)
    out: dict[str, Any] = {}

    users, replies = [], []
    await call("append_model_change", "anthropic", "claude")
    for i in range(4):
        users.append(await call("append_message", UserMessage.of(f"Task {i}: " + "go " * 60)))
        replies.append(await call("append_message", reply(f"Did {i}. " + "ok " * 40, 100 * i)))
    await call("append_custom", "ext.state", {"n": 1})
    await call("append_custom_message", "ext.note", "a note", True)
    await call("append_thinking_level_change", "high")
    await call("append_entry", {"type": "custom", "customType": "ext.raw", "data": [1]})
    await call("set_label", users[0], "start")
    named = await call("set_name", "named")
    out["contains"] = (await s.contains(users[0]), await s.contains("nope")) if awaited \
        else (users[0] in s, "nope" in s)
    out["len"] = len(s)
    nav = await call("navigate_tree", replies[1], summarize=True)
    out["nav"] = (n(nav.leaf_id), n(nav.position_id), nav.summary_entry is not None,
                  len(nav.summarized_ids))
    out["plain nav"] = n((await call("navigate_tree", users[1])).leaf_id)
    await call("branch", named)
    popped = await call("pop")
    out["pop"] = (n(popped.position_id), popped.editor_text[:6] if popped.editor_text else None)
    out["cherry"] = n(await call("cherry_pick", replies[0]))
    out["checkout"] = n(await call("checkout", users[1]))
    summary_id = await call("branch_with_summary", replies[2], "manual summary")
    out["summary"] = n(summary_id)
    await call("reset_leaf")
    out["reset"] = s.leaf_id
    await call("branch", summary_id)
    for i in range(4, 7):
        await call("append_message", UserMessage.of(f"More {i}: " + "go " * 60))
        await call("append_message", reply(f"Did {i}. " + "ok " * 40, 100 * i))
    prep = await call("prepare_compaction", keep_recent_tokens=150)
    out["prepared"] = (n(prep.first_kept_entry_id), prep.tokens_before,
                       len(prep.messages_to_summarize))
    out["should"] = (await call("should_compact", 200), await call("should_compact", 10**6))
    compaction = await call("compact", keep_recent_tokens=150)
    out["compaction"] = (n(compaction.first_kept_entry_id), compaction.tokens_before,
                         compaction.summary.split("\n")[0])
    out["context"] = context_digest((await call("build_context")).to_builtins()["messages"])
    model_context = await call("build_context", for_model=True)
    out["model context"] = context_digest(model_context.to_builtins()["messages"])
    out["context at"] = context_digest(
        (await call("build_context", users[1])).to_builtins()["messages"])
    ids = await call("ids")
    out["ids"] = n(ids)
    out["entries"] = [e.type for e in await call("entries")]
    out["customs"] = [e.custom_type for e in await call("custom_entries", "ext")]
    out["raw"] = json.loads(await call("raw_line", users[0]))["message"]["content"]
    out["entry"] = (await call("entry", users[0])).type
    out["subtree"] = n(await call("subtree_ids", users[1]))
    out["children"] = n(await call("children_ids", replies[1]))
    out["children entries"] = [e.type for e in await call("children", replies[1])]
    out["path"] = n(await call("path_ids"))
    out["path types"] = [e.type for e in await call("path")]
    out["tree"] = [(d, n(i), *rest) for d, i, *rest in flatten(await call("tree"))]
    out["leaves"] = n(await call("leaves"))
    out["branch points"] = n(await call("branch_points"))
    out["labels"] = {n(k): v[0] for k, v in (await call("labels")).items()}
    out["label"] = await call("label", users[0])
    out["problems"] = await s.problems() if awaited else s.problems
    listing = await call("listing")
    out["listing"] = (listing.message_count, listing.entry_count, listing.first_message,
                      listing.name, listing.cwd)
    out["optree"] = render_ascii(await call("optree"))
    fork = await call("create_branched_session", replies[1])
    out["fork"] = (len(fork), (fork.url is None) == (s.url is None))
    await (fork.aclose() if awaited else _closed(fork))
    forked_all = await call("fork_from", s, None, directory=tmp / "forks")
    out["fork all"] = len(forked_all)
    await (forked_all.aclose() if awaited else _closed(forked_all))
    branch_file = await call("export_branch", replies[1], tmp / "branch.jsonl")
    subtree_file = await call("export_subtree", users[1], tmp / "subtree.jsonl")
    out["exports"] = [[json.loads(line)["type"] for line in Path(f).read_bytes().splitlines()]
                      for f in (branch_file, subtree_file)]
    out["events"] = seen
    leaf = s.leaf_id
    await (s.aclose() if awaited else _closed(s))
    again = await reopen_session(s)
    out["reopened"] = (len(again), again.leaf_id == leaf, n(again.leaf_id), context_digest(
        (await (again.build_context() if awaited else _value(again.build_context()))
         ).to_builtins()["messages"]))
    await (again.aclose() if awaited else _closed(again))
    return out


async def _closed(session: Session) -> None:
    session.close()


async def _value(value: Any) -> Any:
    return value


def test_async_session_matches_the_session(async_kind: tuple[str, str | None],
                                           tmp_path: Path) -> None:
    kind, url = async_kind
    (tmp_path / "sync").mkdir()
    (tmp_path / "async").mkdir()
    backend = Backend(sync_kind(kind), tmp_path / "sync", url)
    try:
        async def run_sync() -> dict[str, Any]:
            async def again(s: Session) -> Session:
                return reopen(s)

            return await session_scenario(backend.create(cwd="/p"), False, tmp_path / "sync",
                                          again)

        expected = asyncio.run(run_sync())
    finally:
        backend.close()

    async def run_async() -> dict[str, Any]:
        async with AsyncBackend(kind, tmp_path / "async", url) as async_backend:
            session = await async_backend.create(cwd="/p")
            if kind == "postgres":  # statements on the async store's pool, not a second one
                assert type(session.sync._log.store).__name__ == "ThreadView"
            return await session_scenario(session, True, tmp_path / "async",
                                          async_backend.reopen)

    found = asyncio.run(run_async())
    assert found == expected
    assert [event for event, _ in found["events"]] == [
        "before_tree", "before_tree", "before_tree", "before_compact", "context"]


def test_reading_a_new_async_session_whole_then_appending_chains(
        async_kind: tuple[str, str | None], tmp_path: Path) -> None:
    """Issue 23 point 1 through AsyncSession, each whole-tree read on a fresh session."""
    kind, url = async_kind

    async def run() -> None:
        async with AsyncBackend(kind, tmp_path, url) as backend:
            for read in ("ids", "leaves", "tree", "entries", "labels", "branch_points",
                         "optree", "problems"):
                session = await backend.create()
                await getattr(session, read)()
                made = [await session.append_message(UserMessage.of(f"q{i}")) for i in range(3)]
                assert await session.ids() == made, read
                assert await session.path_ids() == made, read
                await session.aclose()
                again = await backend.reopen(session)
                assert await again.ids() == made and await again.leaves() == made[-1:], read
                await again.aclose()

    asyncio.run(run())


def test_nul_characters_are_stored_through_every_async_path(
        async_kind: tuple[str, str | None], tmp_path: Path) -> None:
    """Issue 23 point 10: a NUL in cwd, message, label, name and custom type through
    AsyncSession and the async stores' own ``append``; answers alike before and after a
    reopen (PostgreSQL's columns hold U+FFFD, its lines the NUL)."""
    kind, url = async_kind

    async def run() -> None:
        async with AsyncBackend(kind, tmp_path, url) as backend:
            session = await backend.create(cwd="/w\x00")
            first = await session.append_message(UserMessage.of("q\x00"))
            await session.set_label(first, "l\x00")
            await session.append_custom("c\x00")
            await session.set_name("n\x00")
            answers = (await session.label(first), session.name, await session.labels())
            held = "\ufffd" if kind.startswith("postgres") else "\x00"
            assert answers[:2] == (f"l{held}", f"n{held}")
            store = backend.store
            if hasattr(store, "aclose"):  # an async store: its own append and listing
                await store.append(session.id, [{
                    "type": "custom", "id": "abcd0001", "parentId": session.leaf_id,
                    "timestamp": "2026-01-01T00:00:00.000Z", "customType": "t\x00"}])
                (listing,) = [found for found in await store.list_sessions(cwd="/w\x00")
                              if found.id == session.id]
                assert listing.cwd == f"/w{held}" and listing.first_message == f"q{held}"
                (*_, custom) = await store.read(session.id)
                assert custom.custom_type == "t\x00"
            await session.aclose()
            again = await backend.reopen(session)
            assert (await again.label(first), again.name, await again.labels()) == answers
            assert (await again.entry(first)).message.content[0].text == "q\x00"
            await again.aclose()

    asyncio.run(run())


# -- follow, cancellation, the loop's own thread, addresses --------------------------------------


async def until(condition: Any, what: str, timeout: float = 30.0) -> None:
    """Wait for ``condition()`` (looked at every 10 ms, at most ``timeout`` seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"still waiting for {what}"
        await asyncio.sleep(0.01)


def test_async_follow_over_postgres_wakes_on_notify_for_every_follower(postgres_url: str) -> None:
    from sessiontree import AsyncPostgresStore, PostgresStore

    def write(session_id: str, texts: list[str]) -> None:  # another connection, another pool
        with PostgresStore.from_url(postgres_url) as other:
            with Session(other.open_log(session_id)) as writer:
                for text in texts:
                    writer.append_message(UserMessage.of(text))

    async def run() -> list[list[str]]:
        async with AsyncPostgresStore.from_url(postgres_url) as store:
            sessions = [await AsyncSession.create(cwd=f"/{name}", store=store) for name in "ab"]
            for session in sessions:
                await session.append_message(UserMessage.of("stored"))

            async def take(session: AsyncSession, count: int) -> list[str]:
                got: list[str] = []
                async for entry in session.follow(poll=3600):  # polling would wait an hour
                    got.append(entry.message.content[0].text)  # type: ignore[union-attr]
                    if len(got) == count:
                        return got
                return got

            followers = [asyncio.create_task(take(s, 2)) for s in sessions]
            # both wait on NOTIFY before anything is written (the store's waiters, per session)
            await until(lambda: all(store._waiters.get(s.id) for s in sessions), "the followers")
            for session in sessions:
                await asyncio.to_thread(write, session.id, [f"{session.cwd} 1", f"{session.cwd} 2"])
            found = await asyncio.wait_for(asyncio.gather(*followers), 60)
            for session in sessions:
                await session.aclose()
            assert store._waiters == {}  # every follower left
            return found

    assert asyncio.run(run()) == [["/a 1", "/a 2"], ["/b 1", "/b 2"]]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_async_follow_in_a_worker_thread(kind: str, tmp_path: Path) -> None:
    backend = Backend(kind, tmp_path, None)
    first = backend.create(cwd="/p")
    first.append_message(UserMessage.of("stored"))
    first.close()

    async def run() -> tuple[list[str], list[str]]:
        follower = AsyncSession(reopen(first))  # reads, takes no writer's lock
        writer = reopen(first)

        async def write() -> None:
            for text in ("one", "two", "three"):
                await asyncio.to_thread(writer.append_message, UserMessage.of(text))

        writing = asyncio.create_task(write())
        got = []
        async for entry in follower.follow(poll=0.01):
            got.append(entry.message.content[0].text)  # type: ignore[union-attr]
            if len(got) == 3:
                break  # leaving the loop stops the worker thread's follow
        await writing
        writer.close()
        # a second follow starts after what the session has read (it read none of them), and
        # ends once nothing new came for idle_timeout seconds
        again = [json.loads(line)["message"]["content"][0]["text"]
                 async for line in follower.follow_lines(idle_timeout=0.05, poll=0.01)]
        await follower.aclose()
        return got, again

    try:  # run() returned: asyncio.run waited for the worker threads, so none was left behind
        assert asyncio.run(run()) == (["one", "two", "three"], ["one", "two", "three"])
    finally:
        backend.close()


def test_a_cancelled_call_keeps_the_turn_until_its_thread_is_done(tmp_path: Path) -> None:
    import threading

    async def run() -> list[str]:
        session = AsyncSession.in_memory("/p")
        started, release = threading.Event(), threading.Event()

        def slow() -> str:
            started.set()
            release.wait(30)
            return "slow"

        first = asyncio.create_task(session._run(slow))
        await until(started.is_set, "the first call's thread")
        first.cancel()
        second = asyncio.create_task(session.append_message(UserMessage.of("after")))
        for _ in range(20):
            await asyncio.sleep(0)
        # the thread still runs on the session: the next call waits for it
        assert not second.done() and len(session) == 0
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        await second
        return [e.type for e in await session.entries()]

    assert asyncio.run(run()) == ["message"]


def test_blocking_calls_from_the_loop_over_an_async_postgres_store(postgres_url: str) -> None:
    from sessiontree import AsyncPostgresStore, BlockingCallInLoop
    from sessiontree.events import TreeEvent

    async def run() -> tuple[str, list[str]]:
        async with AsyncPostgresStore.from_url(postgres_url) as store:
            async with await AsyncSession.create(cwd="/p", store=store) as session:
                first = await session.append_message(UserMessage.of("q"))
                answer = await session.append_message(AssistantMessage.of("a"))
                await session.append_message(UserMessage.of("q2"))
                with pytest.raises(BlockingCallInLoop, match="await the AsyncSession"):
                    session.sync.listing()  # a query: it would wait for the loop it blocks
                seen: list[str] = []

                async def after(event: TreeEvent) -> None:  # a hook reads the sync session
                    path = await asyncio.to_thread(event.session.path_ids)
                    seen.extend(path)

                session.events.on("session_tree", after)
                await session.navigate_tree(answer)
                return first, seen

    first, seen = asyncio.run(run())
    assert seen[0] == first and len(seen) == 3  # q, a and the checkout marker under a


def test_async_session_by_address_and_store(postgres_url: str, tmp_path: Path) -> None:
    from sessiontree import AsyncPostgresStore, AsyncSqliteStore, ReadOnlyStore

    async def run() -> None:
        created = await AsyncSession.create(cwd="/p", store=postgres_url)
        owned = created._owned
        await created.append_message(UserMessage.of("hello"))
        await created.aclose()
        assert owned is not None and owned._pool is None  # the store opened for it is closed
        by_url = await AsyncSession.open(f"{postgres_url}#{created.id}")
        assert [e.type for e in await by_url.entries()] == ["message"]
        assert by_url.url == f"{by_url.sync._log.store.url}#{created.id}"
        await by_url.aclose()
        read_only = await AsyncSession.open(f"{postgres_url}#{created.id}", read_only=True)
        with pytest.raises(ReadOnlyStore):
            await read_only.append_message(UserMessage.of("refused"))
        await read_only.aclose()
        async with AsyncPostgresStore.from_url(postgres_url) as store:
            async with await AsyncSession.open(created.id, store=store) as again:
                assert (await again.listing()).first_message == "hello"
            assert store._pool is not None  # a store given is left open
        with pytest.raises(Exception, match="#SESSION_ID"):
            await AsyncSession.open(postgres_url)
        async with AsyncSqliteStore.open(tmp_path / "s.db") as lite:
            async with await AsyncSession.create(cwd="/q", store=lite) as in_sqlite:
                await in_sqlite.append_message(UserMessage.of("lite"))
            async with await AsyncSession.open(in_sqlite.id, store=lite) as reopened:
                assert len(reopened) == 1

    asyncio.run(run())


def test_async_follow_survives_losing_the_listening_connection(postgres_url: str) -> None:
    import psycopg

    from sessiontree import AsyncPostgresStore

    from .backends import postgres_dsn

    async def run() -> list[str]:
        async with AsyncPostgresStore.from_url(postgres_url) as store:
            session = await AsyncSession.create(cwd="/l", store=store)
            await session.append_message(UserMessage.of("stored"))
            writer = await AsyncSession.open(session.id, store=store)
            got: list[str] = []

            async def take() -> None:
                async for entry in session.follow(poll=3600):
                    got.append(entry.message.content[0].text)  # type: ignore[union-attr]
                    if len(got) == 2:
                        return

            following = asyncio.create_task(take())
            await until(lambda: store._waiters.get(session.id), "the follower")
            await writer.append_message(UserMessage.of("before"))
            await until(lambda: got == ["before"], "the first entry")
            lost = store._listener
            assert lost is not None
            with psycopg.connect(postgres_dsn(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (lost.info.backend_pid,))
            await until(lambda: store._listener not in (None, lost), "a new listening connection")
            await writer.append_message(UserMessage.of("after"))
            await asyncio.wait_for(following, 60)
            await writer.aclose()
            await session.aclose()
            return got

    assert asyncio.run(run()) == ["before", "after"]


def test_two_async_handles_see_each_others_appends(tmp_path: Path) -> None:
    """refresh, append_at_last and release through AsyncSession, on one SQLite session."""
    from sessiontree import AsyncSession, SqliteStore, UserMessage

    async def scenario() -> None:
        store = SqliteStore.open(tmp_path / "handles.db")
        first = await AsyncSession.create(cwd="/w", store=store, session_id="shared")
        await first.append_message(UserMessage.of("one"))
        second = await AsyncSession.open("shared", store=store)
        await first.append_message(UserMessage.of("two"))
        fresh = await second.refresh()
        assert len(fresh) == 1 and second.leaf_id == fresh[0]
        seen: list[str | None] = []

        def plan(leaf: str | None) -> tuple[str | None, list[dict[str, Any]]]:
            seen.append(leaf)
            return leaf, [{"type": "custom", "customType": "note"}]

        written = await second.append_at_last(plan)
        await second.release()
        assert seen == [fresh[0]] and len(written) == 1
        assert await first.refresh() == written
        await first.aclose()
        await second.aclose()
        store.close()

    asyncio.run(scenario())
