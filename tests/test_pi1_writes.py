"""Writing what pi 1.5.2 writes, checked as pi checks it: system messages, usage entries and
context edits appended through our API and through pi's own (``tests/pi/pi1_probe.mjs apply``)
give the same entries and the same refusals, and every file we write opens in pi 1.5.2 with
the same leaf, tree, contexts, projections and replayed system messages as here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessiontree import (
    AssistantMessage,
    EntryNotFound,
    InvalidEntry,
    InvalidMessage,
    Session,
    TextContent,
    ToolDeclaration,
    ToolResultMessage,
    UserMessage,
)
from sessiontree._json import loads
from sessiontree.testing.pi import run_node_script

from .test_conformance_pi1 import PROBE, assert_contexts, pi1_modules, pi1_read, tree_of

USAGE = {"input": 5, "output": 0, "cacheRead": 900, "cacheWrite": 0, "totalTokens": 905,
         "cost": {"input": 0.000015, "output": 0, "cacheRead": 0.00027, "cacheWrite": 0,
                  "total": 0.000285}}
TOOL = {"name": "read", "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}

# Ops as both sides run them. A ref is the index of an entry appended by an earlier op that
# succeeded (failed ops append nothing, on both sides).
SCRIPT: list[list[Any]] = [
    ["system", "", {"preamble": "You are terse.", "cwd": "/p"}, [TOOL], None],
    ["user", "my password is hunter2"],
    ["assistant", "Logged in with hunter2."],
    ["tool", "c1", "hunter2 accepted"],
    ["user", "what now?"],
    ["edit", 1, {"content": "my password is [redacted]"}],
    ["edit", 2, None],
    ["edit", 3, "tool output hidden"],           # a string for a tool result: one text block
    ["edit", 0, None],                           # a system message: not editable
    ["edit", "nosuchid", None],                  # unknown
    ["edit", 1, {"content": 5}],                 # no string or list content
    ["edit", 1, {"note": "no content"}],
    ["usage", "cache_warm", "anthropic", "claude-sonnet-4-5", USAGE, ""],
    ["usage", "something-new", "openai", "gpt-5", USAGE, "an unknown kind"],
    ["system", "Also: be kind.", {"preamble": None, "skills": "<skills/>"}, None, ["read"]],
    ["edit", 1, [{"type": "text", "text": "array replacement"}]],
    ["branch", 2],
    ["user", "on a branch"],
    ["edit", 4, None],                           # not on the current branch
    ["edit", 2, "assistant hidden here too"],
]


def run_ours(session: Session) -> tuple[list[str], list[dict[str, Any]]]:
    """The script through our API: the ids appended and one result per op."""
    ids: list[str] = []
    results: list[dict[str, Any]] = []
    ref = lambda r: ids[r] if isinstance(r, int) else r  # noqa: E731
    for op in SCRIPT:
        kind, *a = op
        try:
            if kind == "system":
                new = session.append_system_message(
                    a[0], sections=a[1], tools_added=[ToolDeclaration(**t) for t in a[2] or []],
                    tools_removed=a[3])
            elif kind == "user":
                new = session.append_message(UserMessage.of(a[0]))
            elif kind == "assistant":
                new = session.append_message(AssistantMessage.of(
                    a[0], provider="anthropic", model="claude-sonnet-4-5", api="anthropic-messages"))
            elif kind == "tool":
                new = session.append_message(ToolResultMessage.of(a[0], [TextContent(text=a[1])],
                                                                  tool_name="bash"))
            elif kind == "edit":
                new = session.append_context_edit(ref(a[0]), a[1])
            elif kind == "usage":
                new = session.append_usage(*a)
            else:
                session.branch(ref(a[0]))
                results.append({"ok": None})
                continue
        except (EntryNotFound, InvalidEntry) as error:
            results.append({"error": type(error).__name__})
            continue
        ids.append(new)
        entry = loads(session.raw_line(new))
        results.append({"ok": {k: v for k, v in entry.items()
                               if k not in ("id", "parentId", "timestamp")}})
    return ids, results


def pi_ops(ours: list[dict[str, Any]], ids: list[str]) -> list[list[Any]]:
    """The same script for pi: messages exactly as we wrote them (same times)."""
    ops: list[list[Any]] = []
    for op, result in zip(SCRIPT, ours):
        kind, *a = op
        if kind in ("system", "user", "assistant", "tool"):
            ops.append(["message", result["ok"]["message"]])
        elif kind == "edit":  # our API also takes the content itself; pi takes {content}
            replacement = {"content": a[1]} if isinstance(a[1], (str, list)) else a[1]
            ops.append(["edit", a[0], replacement])
        elif kind == "usage":
            ops.append(["usage", *a])
        else:
            ops.append(["branch", a[0]])
    return ops


def by_index(result: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """A result with its target named by index (the two sides draw different ids)."""
    entry = result.get("ok")
    if isinstance(entry, dict) and entry.get("targetId") in ids:
        return {"ok": {**entry, "targetId": ids.index(entry["targetId"])}}
    return {"error": True} if "error" in result else result


def test_our_writes_are_pis_writes_and_open_identically_in_pi(tmp_path: Path) -> None:
    ours_file = tmp_path / "ours.jsonl"
    with Session.create(tmp_path, cwd="/home/dev/proj") as session:
        ids, ours = run_ours(session)
        assert session.file is not None
        ours_file = Path(session.file)
    (pi_dir := tmp_path / "pi").mkdir()
    (answer,) = run_node_script(PROBE, str(pi1_modules()), "apply",
                                payload=[{"dir": str(pi_dir), "cwd": "/home/dev/proj",
                                          "ops": pi_ops(ours, ids)}])
    pi_ids = [loads(line)["id"] for line in Path(answer["file"]).read_bytes().splitlines()[1:]]
    assert len(answer["results"]) == len(ours)
    for op, mine, theirs in zip(SCRIPT, ours, answer["results"]):
        assert by_index(mine, ids) == by_index(theirs, pi_ids), op
    refused = [op for op, r in zip(SCRIPT, ours) if "error" in r]
    assert len(refused) == 5
    # pi opens our file with our leaf, tree, contexts, projections and system messages
    (read,) = pi1_read([ours_file], full=True)
    assert read["unchanged"]
    with Session.open(ours_file, strict=True) as session:
        assert session.leaf_id == read["leaf"] and tree_of(session) == read["tree"]
        assert_contexts(session, read, False, "ours")
        context = session.build_context(ids[11]).to_json()  # the main line, all edits made
        assert "hunter2" not in context and "[redacted]" not in context  # array replacement
        system = session.system_message(ids[11])
        assert system is not None and system.sections == {"cwd": "/p", "skills": "<skills/>"}


def test_bad_system_messages_and_usage_are_refused() -> None:
    session = Session.in_memory()
    with pytest.raises(InvalidMessage) as error:
        session.append_system_message(sections={"a": 5})  # type: ignore[dict-item]
    assert error.value.field == "sections.a"
    with pytest.raises(InvalidMessage):
        session.append_system_message(tools_added=[{"description": "no name"}])
    with pytest.raises(InvalidMessage):
        session.append_system_message(tools_removed=[""])
    with pytest.raises(InvalidMessage):
        session.append_message({"role": "system", "content": 5, "timestamp": 1})
    with pytest.raises(InvalidEntry):
        session.append_usage("cache_warm", "p", "m", {"input": "lots"})
    assert session.ids() == []


def test_async_twins_write_the_same(tmp_path: Path) -> None:
    import asyncio

    from sessiontree import AsyncSession

    async def run() -> list[bytes]:
        async with await AsyncSession.create(tmp_path, cwd="/p") as session:
            await session.append_system_message("Base.", sections={"a": "b"})
            user = await session.append_message(UserMessage.of("secret"))
            await session.append_context_edit(user, "[redacted]")
            await session.append_usage("cache_warm", "p", "m", USAGE, note="warm")
            await session.branch_with_summary(user, "summary", usage=USAGE)
            return [line for line in Path(session.sync.file or "").read_bytes().splitlines()[1:]]

    lines = asyncio.run(run())
    kinds = [loads(line)["type"] for line in lines]
    assert kinds == ["message", "message", "context_edit", "usage", "branch_summary"]
    assert loads(lines[-1])["usage"] == USAGE
    assert loads(lines[2])["replacement"] == {"content": "[redacted]"}


def test_compaction_writes_pis_checkpoint_and_opens_identically_in_pi(tmp_path: Path) -> None:
    """compact() on a session with system messages and edits: the compaction carries the
    system message pi 1.5.2 replays at the leaf (stamped with the compaction's time) and the
    summarizer's usage given; pi opens the result with our contexts everywhere."""
    import shutil

    from sessiontree._time import iso_to_ms
    from sessiontree.testing.generate import generate_session

    source = tmp_path / "g.jsonl"
    generate_session(source, 400, seed=31, branch_every=0, compact_every=0, pi1=True)
    work = tmp_path / "work.jsonl"
    shutil.copyfile(source, work)
    (before,) = pi1_read([source], full=True)
    with Session.open(work) as session:
        leaf = session.leaf_id
        assert leaf is not None
        entry = session.compact(keep_recent_tokens=2000)
        raw = loads(session.raw_line(entry.id))
        session.append_message(UserMessage.of("after the compaction"))
        usage_id = session.append_compaction("again", session.leaf_id or "", 10, usage=USAGE)
    expected = loads(before["at"][leaf]["system"])
    assert expected is not None
    assert raw["systemMessage"] == {**expected, "timestamp": iso_to_ms(raw["timestamp"])}
    (after,) = pi1_read([work], full=True)
    with Session.open(work, strict=True) as session:
        assert tree_of(session) == after["tree"]
        assert_contexts(session, after, False, "compacted", projections=25)
        assert loads(session.raw_line(usage_id))["usage"] == USAGE
        first = session.build_context().to_builtins()["messages"][0]
        assert first["role"] == "system"
