"""The Claude Agent SDK session store: the SDK's own conformance suite on every backend, a real
``query()`` round trip (the SDK's bundled Claude Code against the model server on 127.0.0.1,
tools, a subagent, a resume through the store), and the recorded transcript replayed through
``append`` in every split, in new processes' adapters, on every backend.

What the store keeps is compared with the SDK's own reference store fed by the same runs, and the
sessions are read by ``browse``, the HTML export in Chromium, ``ls`` and pi itself.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    InMemorySessionStore,
    ResultMessage,
    get_session_messages_from_store,
    list_sessions_from_store,
    project_key_for_directory,
    query,
)
from claude_agent_sdk.testing import run_session_store_conformance
from claude_agent_sdk.types import SessionKey, SessionStore
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import InvalidLocation, JsonlStore, MemoryStore, Session, SqliteStore
from sessiontree.cli import cli
from sessiontree.importers import import_file
from sessiontree.integrations.claude_agent_sdk import SessionTreeSessionStore

from .backends import postgres_dsn
from .fake_llm import ANTHROPIC_KEY, FakeLLM, Reply
from .test_pi_interop import assert_same, pi_modules, pi_read  # noqa: F401  (fixture)

OPTIONAL = ("list_sessions", "list_session_summaries", "delete", "list_subkeys")
MODEL = "claude-sonnet-4-5"


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


# -- stores on every backend ---------------------------------------------------------------------

class Backends:
    """Fresh adapters over one backend: each a store of its own (a new folder, database file or
    PostgreSQL schema), all closed and dropped at the end."""

    def __init__(self, kind: str, tmp_path: Path, redis: str | None = None) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.redis = redis  # the server's or cluster's URL, for the redis kinds
        self.count = itertools.count()
        self.opened: list[SessionTreeSessionStore] = []
        self.schemas: list[str] = []

    def __call__(self) -> SessionTreeSessionStore:
        n = next(self.count)
        if self.kind == "memory":
            store = SessionTreeSessionStore(MemoryStore())
        elif self.kind == "root":  # a sessions root in pi's layout
            store = SessionTreeSessionStore(self.tmp_path / f"root{n}")
        elif self.kind == "folder":  # a folder store object: every session in that folder
            store = SessionTreeSessionStore(JsonlStore(self.tmp_path / f"folder{n}"))
        elif self.kind == "sqlite":
            store = SessionTreeSessionStore(f"sqlite:///{self.tmp_path}/s{n}.db")
        elif self.redis is not None:  # a key prefix of its own: an empty store
            store = SessionTreeSessionStore(f"{self.redis}?prefix=cc{uuid.uuid4().hex[:12]}")
        else:
            dsn = postgres_dsn()
            schema = f"sessiontree_cc_{uuid.uuid4().hex[:12]}"
            self.schemas.append(schema)
            store = SessionTreeSessionStore(f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}")
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in self.opened:
            store.close()
        if self.schemas:
            import psycopg

            with psycopg.connect(postgres_dsn(), autocommit=True) as admin:
                for schema in self.schemas:
                    admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


KINDS = ["memory", "root", "folder", "sqlite", "postgres", "redis", "redis-cluster"]


@pytest.fixture(params=KINDS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backends]:
    kind = request.param
    redis = request.getfixturevalue("redis_deployments").url(kind) if kind.startswith("redis") \
        else None
    backends = Backends(kind, tmp_path, redis)
    yield backends
    backends.close()


def test_every_optional_method_is_implemented() -> None:
    for name in OPTIONAL:  # the SDK (and its suite) skip what is inherited from the protocol
        assert getattr(SessionTreeSessionStore, name) is not getattr(SessionStore, name), name


def test_the_sdks_conformance_suite_passes(stores: Backends) -> None:
    run(run_session_store_conformance(stores))
    assert stores.opened  # it ran (and made a store per contract)


# -- keys ------------------------------------------------------------------------------------------

ODD_KEYS: list[SessionKey] = [
    {"project_key": "-home-me-proj", "session_id": "7d1e5c3a-0b0e-4b8f-9a57-3e0c4b8f5a10"},
    {"project_key": "-home-me-proj", "session_id": "7d1e5c3a-0b0e-4b8f-9a57-3e0c4b8f5a10",
     "subpath": "subagents/agent-a9136383e47bda982"},
    {"project_key": "-home-me-proj", "session_id": "7d1e5c3a-0b0e-4b8f-9a57-3e0c4b8f5a10",
     "subpath": "subagents/workflows/" + "r" * 40 + "/agent-a1"},  # too long to spell out
    {"project_key": "tenant/ä b", "session_id": "_dot.ted_ü/x"},
    {"project_key": "tenant/ä b", "session_id": "s" * 200},  # too long to spell out
    {"project_key": "p" * 300, "session_id": "x", "subpath": "a.b/_c"},
]


def test_keys_of_any_characters_and_length_come_back_from_the_listings(stores: Backends) -> None:
    store = stores()
    for n, key in enumerate(ODD_KEYS):
        run(store.append(key, [{"type": "user", "n": n}]))
    ids = {SessionTreeSessionStore.session_id(key) for key in ODD_KEYS}
    assert len(ids) == len(ODD_KEYS) and all(len(i) <= 128 for i in ids)
    for n, key in enumerate(ODD_KEYS):
        assert run(store.load(key)) == [{"type": "user", "n": n}]
    listed = sorted(s["session_id"] for s in run(store.list_sessions("tenant/ä b")))
    assert listed == sorted(["_dot.ted_ü/x", "s" * 200])
    main = {"project_key": "-home-me-proj", "session_id": "7d1e5c3a-0b0e-4b8f-9a57-3e0c4b8f5a10"}
    assert sorted(run(store.list_subkeys(main))) == sorted(
        [ODD_KEYS[1]["subpath"], ODD_KEYS[2]["subpath"]])  # type: ignore[typeddict-item]
    assert run(store.list_subkeys({"project_key": "p" * 300, "session_id": "x"})) == ["a.b/_c"]
    run(store.delete(main))
    assert run(store.load(ODD_KEYS[2])) is None and run(store.list_sessions("-home-me-proj")) == []


def test_a_session_that_records_another_key_is_refused(tmp_path: Path) -> None:
    with SqliteStore.open(tmp_path / "s.db") as sqlite:
        store = SessionTreeSessionStore(sqlite)
        mine: SessionKey = {"project_key": "p", "session_id": "mine"}
        theirs: SessionKey = {"project_key": "p", "session_id": "theirs"}
        run(store.append(mine, [{"type": "x", "n": 1}]))
        header, lines = sqlite.export_lines(store.session_id(mine))
        fields = json.loads(header)
        fields["id"] = store.session_id(theirs)  # as if two keys' hashes had met
        sqlite.import_lines(json.dumps(fields).encode(), list(lines))
        with pytest.raises(InvalidLocation, match="holds the transcript of"):
            run(store.load(theirs))
        assert run(store.load(mine)) == [{"type": "x", "n": 1}]


# -- what is kept ---------------------------------------------------------------------------------

KEY: SessionKey = {"project_key": "proj", "session_id": "sess"}


def test_a_retried_batch_is_kept_once_and_a_changed_line_is_kept_as_well() -> None:
    store = SessionTreeSessionStore(MemoryStore())
    batch = [{"type": "user", "uuid": "u1", "parentUuid": None, "timestamp": "2025-01-01T00:00:00.000Z",
              "message": {"role": "user", "content": "hi"}},
             {"type": "queue-operation", "operation": "dequeue"}]  # no uuid: never deduplicated
    run(store.append(KEY, batch))
    run(store.append(KEY, [batch[0]]))  # the SDK retried a batch that had landed
    assert run(store.load(KEY)) == batch
    changed = {**batch[0], "message": {"role": "user", "content": "hi!"}}
    run(store.append(KEY, [changed]))
    assert run(store.load(KEY)) == [*batch, changed]
    with store.open(KEY) as session:
        kinds = [e.custom_type for e in session.custom_entries("claude-code.")]
        assert kinds == ["claude-code.queue-operation", "claude-code.duplicate"]


def test_a_line_the_mapping_refuses_is_kept_with_the_reason() -> None:
    store = SessionTreeSessionStore(MemoryStore())
    bad = {"type": "user", "uuid": "u1", "parentUuid": None, "timestamp": "2025-01-01T00:00:00.000Z",
           "message": "not an object"}
    run(store.append(KEY, [bad, {"type": "user", "uuid": 7, "parentUuid": None}]))
    assert run(store.load(KEY)) == [bad, {"type": "user", "uuid": 7, "parentUuid": None}]
    with store.open(KEY) as session:
        kept = [json.loads(session.raw_line(i))["claudeCode"] for i in session.ids()]
        assert kept[0]["problem"].endswith("expected an object, found a string")
        assert "uuid must be a non-empty string" in kept[1]["problem"]


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                                          allow_infinity=False)
                    | st.text(), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
LINE = st.fixed_dictionaries({"type": st.sampled_from(["user", "assistant", "system", "x",
                                                       "attachment", "summary"])},
                             optional={"uuid": st.sampled_from(["a", "b", "c", "d"]),
                                       "parentUuid": st.sampled_from([None, "a", "b", "zz"]),
                                       "timestamp": st.sampled_from(["2025-01-01T00:00:00.000Z",
                                                                     "nonsense"]),
                                       "message": JSON, "leafUuid": st.sampled_from(["a", "b"]),
                                       "isSidechain": st.booleans(), "data": JSON})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(LINE, max_size=12), cuts=st.lists(st.integers(0, 12), max_size=4),
       cold=st.booleans())
def test_load_gives_back_what_was_appended_whatever_the_lines_and_batches(
        lines: list[dict[str, Any]], cuts: list[int], cold: bool) -> None:
    memory = MemoryStore()
    store = SessionTreeSessionStore(memory)
    expected: list[Any] = []
    bounds = sorted({0, len(lines), *(c for c in cuts if c <= len(lines))})
    for start, end in zip(bounds, bounds[1:]):
        batch = lines[start:end]
        if cold:  # another process's adapter each time
            store = SessionTreeSessionStore(memory)
        run(store.append(KEY, batch))
        for line in batch:  # a line whose uuid was taken, unchanged, is a retry: kept once
            if "uuid" not in line or line not in [e for e in expected if e.get("uuid") == line["uuid"]]:
                expected.append(line)
    assert run(store.load(KEY)) == (expected or None)
    if expected:
        with store.open(KEY) as session:  # a tree: every entry's parent is in it
            assert not session.problems
            assert all(p is None or p in session for p in
                       (json.loads(session.raw_line(i))["parentId"] for i in session.ids()))


# -- a real round trip ------------------------------------------------------------------------------

class Tee(SessionStore):
    """Appends go to the SDK's reference store and to ours; reads come from ours (the first)."""

    def __init__(self, ours: Sequence[SessionTreeSessionStore]) -> None:
        self.ours = list(ours)
        self.reference = InMemorySessionStore()
        self.batches: list[tuple[SessionKey, list[Any]]] = []

    async def append(self, key: SessionKey, entries: list[Any]) -> None:
        self.batches.append((dict(key), json.loads(json.dumps(entries))))  # type: ignore[arg-type]
        await self.reference.append(key, entries)
        for store in self.ours:
            await store.append(key, entries)

    async def load(self, key: SessionKey) -> list[Any] | None:
        return await self.ours[0].load(key)

    async def list_sessions(self, project_key: str) -> Any:
        return await self.ours[0].list_sessions(project_key)

    async def list_session_summaries(self, project_key: str) -> Any:
        return await self.ours[0].list_session_summaries(project_key)

    async def delete(self, key: SessionKey) -> None:
        await self.ours[0].delete(key)

    async def list_subkeys(self, key: Any) -> list[str]:
        return await self.ours[0].list_subkeys(key)


@dataclass
class Live:
    """Two turns of a real Claude Code session, mirrored to SQLite, a sessions root and (when
    configured) PostgreSQL, and to the SDK's reference store."""

    tee: Tee
    stores: dict[str, SessionTreeSessionStore]
    key: SessionKey
    subkey: SessionKey
    project: Path
    config: Path
    requests: list[Any]
    results: list[ResultMessage]
    root: Path


TURN_ONE = [
    Reply(thinking="Two commands first.", text="Running them.",
          tool_calls=[("Bash", {"command": "echo alpha", "description": "print alpha"}),
                      ("Bash", {"command": "echo beta", "description": "print beta"})]),
    Reply(text="Now a helper.", tool_calls=[("Agent", {
        "description": "say a word", "prompt": "Say the word pear", "subagent_type": "general-purpose",
        "run_in_background": False})]),
    Reply(text="pear"),  # the subagent's answer
    Reply(text="The helper said pear."),
]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    base = tmp_path_factory.mktemp("claude")
    project = base / "project"
    project.mkdir()
    config = base / "home" / ".claude"
    root = base / "sessions"
    stores = {"sqlite": SessionTreeSessionStore(f"sqlite:///{base}/sessions.db"),
              "root": SessionTreeSessionStore(root)}
    dsn = postgres_dsn()
    schema = f"sessiontree_cc_{uuid.uuid4().hex[:12]}"
    stores["postgres"] = SessionTreeSessionStore(
        f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}")
    tee = Tee(list(stores.values()))
    server = FakeLLM().start().then(*TURN_ONE, Reply(text="Again: pear."))
    env = {"HOME": str(base / "home"), "CLAUDE_CONFIG_DIR": str(config),
           "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    results: list[ResultMessage] = []

    async def turn(prompt: str, **options: Any) -> None:
        settings = ClaudeAgentOptions(session_store=tee, env=env, cwd=str(project), model=MODEL,
                                      allowed_tools=["Bash", "Agent"], **options)
        async for message in query(prompt=prompt, options=settings):
            if isinstance(message, ResultMessage):
                results.append(message)

    try:
        run(turn("Run two commands, then ask a helper"))
        session_id = results[0].session_id
        # the second turn resumes from our store (the SDK loads it into a new CLI's config
        # folder) and mirrors as the CLI writes, not once per turn
        run(turn("And again?", resume=session_id, session_store_flush="eager"))
        key: SessionKey = {"project_key": project_key_for_directory(project),
                           "session_id": session_id}
        (subpath,) = run(stores["sqlite"].list_subkeys(key))
        yield Live(tee, stores, key, {**key, "subpath": subpath}, project, config,
                   [seen.body for seen in server.requests], results, root)
    finally:
        server.stop()
        for store in stores.values():
            store.close()
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_real_round_trip_is_kept_exactly_on_every_backend(live: Live) -> None:
    assert [r.is_error for r in live.results] == [False, False]
    assert [r.result for r in live.results] == ["The helper said pear.", "Again: pear."]
    reference = live.tee.reference
    keys = [live.key, live.subkey]
    for name, store in live.stores.items():
        for key in keys:  # the same entries as the SDK's own store
            assert run(store.load(key)) == run(reference.load(key)), (name, key)
        assert run(store.list_subkeys(live.key)) == run(reference.list_subkeys(live.key))
        assert [s["session_id"] for s in run(store.list_sessions(live.key["project_key"]))] == \
            [live.key["session_id"]]
        (ours,) = run(store.list_session_summaries(live.key["project_key"]))
        (theirs,) = run(reference.list_session_summaries(live.key["project_key"]))
        assert ours["data"] == theirs["data"] and ours["data"]["first_prompt"] == \
            "Run two commands, then ask a helper"
    # the resumed turn was sent everything the first one said: the CLI read our load()
    history = json.dumps(live.requests[-1]["messages"])
    for said in ("alpha", "beta", "The helper said pear.", "Run two commands, then ask a helper"):
        assert said in history
    assert len(live.requests) == 5 and "pear" in json.dumps(live.requests[2]["messages"])


def roots(session: Session) -> list[str]:
    return [i for i in session.ids() if json.loads(session.raw_line(i))["parentId"] is None]


def blocks(session: Session) -> list[tuple[str, str]]:
    """The context as (role, block) pairs: the same whether a reply is one message or several."""
    return [(role, block) for role, text in context_texts(session) for block in text.split(" | ")]


def context_texts(session: Session) -> list[tuple[str, str]]:
    out = []
    for message in session.build_context().to_builtins()["messages"]:
        content = message.get("content", message.get("summary"))
        if isinstance(content, list):
            content = " | ".join(str(b.get("text") or b.get("thinking") or b.get("name") or
                                     b.get("type")) for b in content)
        out.append((message["role"], str(content)))
    return out


def test_the_transcript_is_a_session_tree_as_claude_code_made_it(live: Live) -> None:
    with live.stores["sqlite"].open(live.key) as session:
        said = context_texts(session)
        assert [role for role, _ in said] == ["user", "assistant", "toolResult", "toolResult",
                                              "assistant", "toolResult", "assistant", "user",
                                              "assistant"]
        assert said[:2] == [("user", "Run two commands, then ask a helper"),  # one reply:
                            ("assistant", "Two commands first. | Running them. | Bash | Bash")]
        assert {said[2][1], said[3][1]} == {"alpha", "beta"}  # its results: one chain
        assert said[4] == ("assistant", "Now a helper. | Agent") and "pear" in said[5][1]
        assert said[6:] == [("assistant", "The helper said pear."), ("user", "And again?"),
                            ("assistant", "Again: pear.")]
        assert len(session.leaves()) == 1 and len(roots(session)) == 1  # nothing dangles
        assert session.header.cwd == str(live.project)
        kinds = {e.custom_type for e in session.custom_entries("claude-code.")}
        assert {"claude-code.attachment", "claude-code.queue-operation"} <= kinds
        main = session.url
    with live.stores["sqlite"].open(live.subkey) as sub:  # the subagent: its own session
        assert sub.header.parent_session == main
        assert context_texts(sub)[0] == ("user", "Say the word pear")
        assert context_texts(sub)[-1] == ("assistant", "pear")
    # the same tree on every backend
    shapes = {name: shape(store, live.key) for name, store in live.stores.items()}
    assert all(s == shapes["sqlite"] for s in shapes.values())


def test_pi_browse_html_and_ls_read_the_mirrored_sessions(live: Live, pi_modules: Path,  # noqa: F811
                                                          tmp_path: Path) -> None:
    address = live.stores["root"].address(live.key)
    assert address is not None
    file = Path(address)  # in pi's folder of the session's working directory
    assert file.parent.name == "--" + str(live.project).strip("/").replace("/", "-") + "--"
    sub = Path(live.stores["root"].address(live.subkey) or "")
    (answer, _) = pi_read(pi_modules, [file, sub])
    assert_same(file, answer)  # pi opens it at the same leaf with the same context
    listing = CliRunner().invoke(cli, ["ls", "--cwd", str(live.project), str(file.parent)])
    assert listing.exit_code == 0 and "Run two commands, then ask a helper" in listing.stdout
    db = live.stores["sqlite"].address(live.key) or ""
    listing = CliRunner().invoke(cli, ["ls", db.partition("#")[0]])
    assert "Run two commands, then ask a helper" in listing.stdout and "Say the word pear" in \
        listing.stdout
    html = tmp_path / "s.html"
    done = CliRunner().invoke(cli, ["export", db, "--format", "html", "-o", str(html)])
    assert done.exit_code == 0, done.output
    check_html(html)
    check_browse(file)


def check_html(path: Path) -> None:
    from .test_export_html import ARGS, CHROMIUM, Page

    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = Page(browser, path)
            text = page.page.text_content("#messages") or ""
            assert "Again: pear." in text and "The helper said pear." in text
            assert page.errors == [] and all(r.startswith("file:") for r in page.requests)
            page.close()
        finally:
            browser.close()


def check_browse(path: Path) -> None:
    from sessiontree.cli.tui import BrowseApp

    from .test_browse import settle

    async def main() -> None:
        app = BrowseApp(str(path))
        async with app.run_test(size=(110, 30)) as pilot:
            await settle(app, pilot)
            await pilot.press("slash", *"pear", "enter")
            await settle(app, pilot)
            rows = [r.node.id for r in app.tree_view.rows if r.node is not None]
            with Session.open(path) as session:
                texts = {i: session.raw_line(i).decode() for i in rows}
            assert any("The helper said pear." in t for t in texts.values())

    asyncio.run(main())


def test_the_sdks_own_readers_work_on_the_store(live: Live) -> None:
    store = live.stores["sqlite"]
    (info,) = run(list_sessions_from_store(store, directory=str(live.project)))
    assert info.session_id == live.key["session_id"] and info.summary == "And again?"
    assert info.first_prompt == "Run two commands, then ask a helper"
    messages = run(get_session_messages_from_store(store, live.key["session_id"],
                                                   directory=str(live.project)))
    assert messages[0].type == "user" and messages[-1].type == "assistant"


def test_the_importer_maps_claude_code_files_as_the_store_does(live: Live,
                                                               tmp_path: Path) -> None:
    mirrored = tmp_path / "mirrored.jsonl"
    mirrored.write_text("".join(json.dumps(line) + "\n" for line in main_lines(live)))
    (row,) = import_file("claude-code", mirrored, tmp_path / "a").imported
    # Claude Code's own file of the first turn (it also holds the API requests, not mirrored)
    (first_turn,) = live.config.glob(f"projects/*/{live.key['session_id']}.jsonl")
    (first,) = import_file("claude-code", first_turn, tmp_path / "b").imported
    with live.stores["sqlite"].open(live.key) as ours:
        expected = context_texts(ours)
    with Session.open(row.location or "") as imported:
        assert context_texts(imported) == expected
    with Session.open(first.location or "") as imported:
        assert context_texts(imported) == expected[:7]


# -- the recorded transcript, replayed --------------------------------------------------------------

def shape(store: SessionTreeSessionStore, key: SessionKey) -> list[tuple[Any, ...]]:
    """The session without its random ids: each entry named by the first transcript line it
    keeps (or its node and part), with its parent's name and its fields."""
    with store.open(key) as session:
        entries = [json.loads(session.raw_line(i)) for i in session.ids()]
    names: dict[str, Any] = {}
    for entry in entries:
        kept, source = entry.get("claudeCode") or {}, entry.get("source") or {}
        names[entry["id"]] = kept["lines"][0][0] if kept.get("lines") else \
            (source.get("id"), source.get("part"))
    out = []
    for entry in entries:
        body = {k: v for k, v in entry.items() if k not in ("id", "parentId")}
        body["claudeCode"] = {k: v for k, v in (body.get("claudeCode") or {}).items()
                              if k != "summary"}  # on the last entry of each batch
        for field in ("targetId", "firstKeptEntryId"):
            if field in body:
                body[field] = names.get(body[field])
        out.append((names[entry["id"]], names.get(entry["parentId"]), body))
    return out


def main_lines(live: Live) -> list[Any]:
    return run(live.tee.reference.load(live.key))  # type: ignore[no-any-return]


def test_the_sdks_batches_replayed_give_the_same_session_on_every_backend(
        live: Live, stores: Backends) -> None:
    store = stores()
    for key, batch in live.tee.batches:  # both turns, as the SDK flushed them
        run(store.append(key, batch))
    assert shape(store, live.key) == shape(live.stores["sqlite"], live.key)
    assert shape(store, live.subkey) == shape(live.stores["sqlite"], live.subkey)


def test_any_split_in_a_new_process_continues_as_one_process_would(live: Live) -> None:
    lines = main_lines(live)
    memory = MemoryStore()
    whole = SessionTreeSessionStore(memory)
    run(whole.append(live.key, lines))
    for cut in range(1, len(lines)):
        hot, cold_memory = SessionTreeSessionStore(MemoryStore()), MemoryStore()
        run(hot.append(live.key, lines[:cut]))
        run(hot.append(live.key, lines[cut:]))
        run(SessionTreeSessionStore(cold_memory).append(live.key, lines[:cut]))
        cold = SessionTreeSessionStore(cold_memory)  # a new process: state read from the store
        run(cold.append(live.key, lines[cut:]))
        assert shape(cold, live.key) == shape(hot, live.key), cut
        assert run(cold.load(live.key)) == lines
        with cold.open(live.key) as session:
            assert len(session.leaves()) == 1, cut  # a split never leaves a dead branch
            with whole.open(live.key) as one:  # a reply split in two is two messages
                assert blocks(session) == blocks(one), cut


def test_one_line_per_batch_keeps_every_tool_result_on_the_path(live: Live) -> None:
    store = SessionTreeSessionStore(MemoryStore())
    for line in main_lines(live):  # the eager mode's worst case: every block apart
        run(store.append(live.key, [line]))
    with store.open(live.key) as session:
        roles = [role for role, _ in context_texts(session)]
        assert roles.count("toolResult") == 3 and len(session.leaves()) == 1
        texts = [text for _, text in context_texts(session)]
        assert abs(texts.index("alpha") - texts.index("beta")) == 1
        with live.stores["sqlite"].open(live.key) as batched:
            assert blocks(session) == blocks(batched)



def test_the_importers_fixture_through_the_store_keeps_labels_compaction_and_branches(
        tmp_path: Path) -> None:
    source = Path(__file__).parent / "importers" / "claude-code-session.jsonl"
    lines = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    store = SessionTreeSessionStore(tmp_path / "root")
    run(store.append(KEY, lines))
    assert run(store.load(KEY)) == lines
    (row,) = import_file("claude-code", source, tmp_path / "imported").imported
    with store.open(KEY) as ours, Session.open(row.location or "") as imported:
        assert context_texts(ours) == context_texts(imported)  # the compaction and after it
        assert ours.name == imported.name == "Fix failing add test"
        assert sorted(label for label, _ in ours.labels().values()) == \
            sorted(label for label, _ in imported.labels().values()) == \
            ["Ask which test", "Fix failing add test"]
        compaction = next(e for e in ours.entries() if e.type == "compaction")
        assert compaction.summary.startswith("This session is being continued")
        assert len(ours.leaves()) == len(imported.leaves()) == 3  # the rewind, the sidechain
