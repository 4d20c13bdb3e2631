"""Hypothesis: random sequences of appends, branches, labels and resets keep every invariant.

The reference below is a second, deliberately naive implementation of format-spec.md sections 10 and
12 over the file's parsed lines; the library must agree with it on every leaf.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import AssistantMessage, Session, TextContent, ToolCall, ToolResultMessage, UserMessage
from sessiontree._json import dumps, loads
from sessiontree.stores.base import Store
from sessiontree.stores.sqlite import SqliteStore

from .backends import reopen, stored_lines

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["", "é ü 中文 😀", "\u2028", "line\nbreak", "\x00\x1f", '"quoted"', "</script>"])

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), TEXT),
        st.tuples(st.just("assistant"), TEXT),
        st.tuples(st.just("tool"), TEXT),
        st.tuples(st.just("custom"), TEXT),
        st.tuples(st.just("custom_message"), TEXT),
        st.tuples(st.just("model"), st.sampled_from(["m1", "m2"])),
        st.tuples(st.just("thinking"), st.sampled_from(["off", "low", "high"])),
        st.tuples(st.just("label"), st.integers(0, 50), TEXT),
        st.tuples(st.just("name"), TEXT),
        st.tuples(st.just("branch"), st.integers(0, 50)),
        st.tuples(st.just("reset")),
        st.tuples(st.just("branch_summary"), st.integers(-1, 50), TEXT),
        st.tuples(st.just("compaction"), st.integers(0, 50), TEXT),
        st.tuples(st.just("checkout"), st.integers(0, 50)),
    ),
    max_size=40,
)


def apply(session: Session, ops: list[tuple[Any, ...]]) -> None:
    def pick(index: int) -> str | None:
        ids = session.ids()
        return ids[index % len(ids)] if ids else None

    for op in ops:
        kind = op[0]
        if kind == "user":
            session.append_message(UserMessage.of(op[1]))
        elif kind == "assistant":
            session.append_message(AssistantMessage(
                content=[TextContent(text=op[1]), ToolCall(id="t1", name="read", arguments={"path": op[1]})],
                provider="anthropic", model=f"model-{len(op[1])}", stop_reason="toolUse"))
        elif kind == "tool":
            session.append_message(ToolResultMessage(tool_call_id="t1", tool_name="read",
                                                     content=[TextContent(text=op[1])]))
        elif kind == "custom":
            session.append_custom("ext", {"value": op[1]})
        elif kind == "custom_message":
            session.append_custom_message("note", op[1], display=len(op[1]) % 2 == 0)
        elif kind == "model":
            session.append_model_change("prov", op[1])
        elif kind == "thinking":
            session.append_thinking_level_change(op[1])
        elif kind == "label" and (target := pick(op[1])) is not None:
            session.set_label(target, op[2] or None)
        elif kind == "name":
            session.set_name(op[1])
        elif kind == "branch" and (target := pick(op[1])) is not None:
            session.branch(target)
        elif kind == "reset":
            session.reset_leaf()
        elif kind == "branch_summary":
            session.branch_with_summary(pick(op[1]) if op[1] >= 0 else None, op[2])
        elif kind == "compaction" and session.leaf_id is not None:
            path = session.path_ids()
            session.append_compaction(op[2], path[op[1] % len(path)], op[1] * 100)
        elif kind == "checkout" and (target := pick(op[1])) is not None:
            session.checkout(target)


def ms(timestamp: str) -> int:
    moment = dt.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
    return int(moment.timestamp() * 1000 + 0.5)


def reference_context(entries: list[dict[str, Any]], leaf: str | None) -> dict[str, Any]:
    """format-spec.md section 10, written as plainly as possible."""
    if leaf is None:
        return {"messages": [], "thinkingLevel": "off", "model": None}
    by_id = {e["id"]: e for e in entries}
    path = []
    node: dict[str, Any] | None = by_id[leaf]
    while node is not None:
        path.insert(0, node)
        node = by_id.get(node["parentId"]) if node["parentId"] else None
    thinking, model, compaction = "off", None, None
    for e in path:
        if e["type"] == "thinking_level_change":
            thinking = e["thinkingLevel"]
        elif e["type"] == "model_change":
            model = {"provider": e["provider"], "modelId": e["modelId"]}
        elif e["type"] == "message" and e["message"]["role"] == "assistant":
            model = {"provider": e["message"]["provider"], "modelId": e["message"]["model"]}
        elif e["type"] == "compaction":
            compaction = e

    def emit(e: dict[str, Any]) -> list[dict[str, Any]]:
        if e["type"] == "message":
            return [e["message"]]
        if e["type"] == "custom_message":
            return [{"role": "custom", "customType": e["customType"], "content": e["content"],
                     "display": e["display"], "timestamp": ms(e["timestamp"])}]
        if e["type"] == "branch_summary" and e["summary"]:
            return [{"role": "branchSummary", "summary": e["summary"], "fromId": e["fromId"],
                     "timestamp": ms(e["timestamp"])}]
        return []

    messages: list[dict[str, Any]] = []
    if compaction is None:
        for e in path:
            messages += emit(e)
    else:
        at = path.index(compaction)
        messages.append({"role": "compactionSummary", "summary": compaction["summary"],
                         "tokensBefore": compaction["tokensBefore"],
                         "timestamp": ms(compaction["timestamp"])})
        ids = [e["id"] for e in path[:at]]
        start = ids.index(compaction["firstKeptEntryId"]) if compaction["firstKeptEntryId"] in ids else at
        for e in path[start:at] + path[at + 1:]:
            messages += emit(e)
    return {"messages": messages, "thinkingLevel": thinking, "model": model}


def check_invariants(session: Session) -> None:
    """Every invariant of a session after random operations, checked against its stored lines
    (the naive reference); the session opened afresh answers the same."""
    lines = stored_lines(session)
    entries = [loads(line) for line in lines]
    by_id = {e["id"]: e for e in entries}
    assert [e["id"] for e in entries] == session.ids()  # ids are unique and in stored order

    children: dict[str, list[str]] = {}
    for e in entries:
        if e["parentId"] is not None:
            children.setdefault(e["parentId"], []).append(e["id"])
    assert session.leaves() == [i for i in by_id if i not in children]
    assert session.branch_points() == [i for i in by_id if len(children.get(i, [])) > 1]

    for entry_id in by_id:
        path = session.path_ids(entry_id)
        assert path[-1] == entry_id and by_id[path[0]]["parentId"] is None  # ends at a root
        assert all(by_id[b]["parentId"] == a for a, b in zip(path, path[1:]))

    for leaf in [*session.leaves(), session.leaf_id]:
        assert session.build_context(leaf).to_builtins() == reference_context(entries, leaf)

    nodes = [(n.id, d) for root in session.tree() for n, d in root.walk()]
    assert sorted(i for i, _ in nodes) == sorted(by_id)

    # write -> read: a reopened session answers the same, and every line round-trips byte-exactly
    leaf = session.ids()[-1]
    with reopen(session, strict=True) as reopened:
        assert reopened.leaf_id == leaf
        assert reopened.ids() == list(by_id)
        assert [(n.id, d, n.label) for root in reopened.tree() for n, d in root.walk()] == \
            [(n.id, d, n.label) for root in session.tree() for n, d in root.walk()]
        assert reopened.build_context().to_builtins() == reference_context(entries, leaf)
    for raw in lines:
        assert dumps(loads(raw)) == raw


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_sessions_keep_every_invariant(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        session = Session.create(folder)
        memory = Session.in_memory()
        apply(session, ops)
        if not session.ids():
            return
        check_invariants(session)
        session.close()

        # the same operations in memory give the same shape
        apply(memory, ops)
        assert len(memory) == len(session)


def check_database(store: Store, ops: list[tuple[Any, ...]]) -> None:
    """The random operations on a database session: the same invariants as a file's, and the
    same tree shape as the operations give in memory. The operations read the whole tree before
    the first append (``pick``), which once made every append after it fail (issue 23)."""
    with Session.create(cwd="/p", store=store) as session:
        apply(session, ops)
        if not session.ids():
            return
        check_invariants(session)
        memory = Session.in_memory()
        apply(memory, ops)
        assert [[d for _, d in root.walk()] for root in session.tree()] == \
            [[d for _, d in root.walk()] for root in memory.tree()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_random_sqlite_sessions_keep_every_invariant(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder, \
            SqliteStore.open(Path(folder) / "s.db") as store:
        check_database(store, ops)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_random_postgres_sessions_keep_every_invariant(postgres_url: str,
                                                        ops: list[tuple[Any, ...]]) -> None:
    from sessiontree.stores.postgres import PostgresStore

    with PostgresStore.from_url(postgres_url) as store:
        check_database(store, ops)


@settings(deadline=None)
@given(OPS)
def test_contexts_remembered_and_extended_step_by_step_equal_the_reference(
        ops: list[tuple[Any, ...]]) -> None:
    """The session remembers contexts and builds a child's from its parent's (the agent loop);
    after every operation that context equals the naive reference and a cold build's."""
    with tempfile.TemporaryDirectory() as folder:
        session = Session.create(folder)
        for op in ops:
            apply(session, [op])
            if session.file is None or not Path(session.file).exists():
                continue
            entries = [loads(line) for line in Path(session.file).read_bytes().splitlines()[1:]]
            leaf = session.leaf_id
            context = session.build_context()
            assert context.to_builtins() == reference_context(entries, leaf)
            assert session.build_context().to_builtins() == context.to_builtins()  # remembered
            with Session.open(session.file, cache_bytes=0, warn=False) as cold:
                fresh = cold.build_context(leaf)
                assert msgspec.to_builtins(context.messages) == msgspec.to_builtins(fresh.messages)
                if leaf is not None:
                    assert [e.id for e in session.path(leaf)] == cold.path_ids(leaf)
        session.close()
