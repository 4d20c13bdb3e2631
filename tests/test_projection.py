"""The projection API (pi 1.5.2's ``buildSessionProjection``) and the replayed system prompt, as
a UI and an agent use them; their values are compared with pi 1.5.2's in
test_conformance_pi1.py."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from sessiontree import (
    AsyncSession,
    EntryNotFound,
    Session,
    SystemMessage,
    ToolDeclaration,
    collapse_system_messages,
    current_system_message,
    current_tools,
    system_message_text,
)

from .conftest import TESTS

GOLDEN = TESTS / "conformance-pi1"


def golden(name: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{name}.jsonl"
    shutil.copyfile(GOLDEN / f"{name}.jsonl", path)
    return path


def test_projection_marks_edited_and_omitted_entries(tmp_path: Path) -> None:
    with Session.open(golden("redact-and-omit", tmp_path)) as session:
        ids = session.ids()
        projection = session.build_projection()
        by_id = {e.entry_id: e for e in projection.entries}
        user, answer = by_id[ids[1]], by_id[ids[2]]
        assert user.edited and not user.omitted
        assert user.messages[0]["content"] == "Log in with password [redacted] please"
        assert "hunter2" in user.original[0]["content"][0]["text"]
        assert user.edit is not None and user.edit["id"] == ids[5]
        assert answer.omitted and answer.messages == [] and answer.original
        edits = [e for e in projection.entries if e.type == "context_edit"]
        assert len(edits) == 2 and all(e.messages == [] for e in edits)
        assert projection.entry(ids[1]) is user and projection.entry("nope") is None
        assert projection.messages == session.build_context().to_builtins()["messages"]
        shaped = projection.to_builtins()
        assert shaped["entries"][1]["sourceEntry"]["id"] == ids[1]
        assert shaped["thinkingLevel"] == "off" and shaped["model"]["modelId"] == "claude-sonnet-4-5"
        # before the edits the original content is what the model sees
        earlier = session.build_projection(ids[4])
        assert not any(e.edited or e.omitted for e in earlier.entries)
        assert session.build_projection(None).entries == []
        with pytest.raises(EntryNotFound):
            session.build_projection("missing")


def test_usage_entries_contribute_nothing_and_a_compaction_leads(tmp_path: Path) -> None:
    with Session.open(golden("compaction-checkpoint", tmp_path)) as session:
        projection = session.build_projection(session.ids()[12])  # below both compactions
        first = projection.entries[0]
        assert first.type == "compaction"
        assert [m["role"] for m in first.messages] == ["system", "compactionSummary"]
        older = [e for e in projection.entries[1:] if e.type == "compaction"]
        assert older and older[0].messages == []  # inside the kept range: nothing
    with Session.open(golden("edit-rules", tmp_path)) as session:
        usage = [e for e in session.build_projection().entries if e.type == "usage"]
        assert len(usage) == 2 and all(e.messages == [] for e in usage)


def test_system_message_replays_sections_and_tools(tmp_path: Path) -> None:
    with Session.open(golden("system-messages", tmp_path)) as session:
        ids = session.ids()
        first = session.system_message(ids[0])
        assert isinstance(first, SystemMessage)
        assert first.content == "Base prompt." and first.sections == {
            "preamble": "P1", "tools": "T1", "skills": "S1"}
        assert [t.name for t in first.tools_added or []] == ["read", "bash"]
        last = session.system_message()
        assert isinstance(last, SystemMessage)
        # read removed then added back (at the end), bash removed, grep added; "2" removed
        assert [t.name for t in last.tools_added or []] == ["read", "grep"]
        assert last.sections == {"10": "ten", "preamble": "P1", "tools": "T2", "date": "today"}
        assert last.content == "Base prompt.\n\nAlso be brief."
        assert last.timestamp == first.timestamp
        replayed = current_system_message(session.build_context().to_builtins()["messages"])
        assert replayed is not None and list(replayed) == ["role", "content", "sections",
                                                           "toolsAdded", "timestamp"]
        assert system_message_text(replayed) == "Base prompt.\n\nAlso be brief.\n\nten\n\nP1\n\nT2\n\ntoday"
        assert session.system_message(None) is None


def test_replay_without_system_messages_and_collapse() -> None:
    assert current_system_message([{"role": "user", "content": "hi", "timestamp": 1}]) is None
    tool = ToolDeclaration(name="ls", description="List", parameters={})
    messages = [
        SystemMessage(content="A", tools_added=[tool], timestamp=5),
        {"role": "user", "content": "q", "timestamp": 6},
        {"role": "system", "content": [{"type": "text", "text": "B"}], "toolsRemoved": [{"name": "ls"}],
         "timestamp": 7},
        {"role": "assistant", "content": [], "timestamp": 8},
    ]
    assert current_tools(messages) == []
    collapsed = collapse_system_messages(messages)
    assert [m["role"] for m in collapsed] == ["system", "user", "assistant"]
    assert collapsed[0] == {"role": "system", "content": "A\n\nB", "timestamp": 5}
    only_tools = current_system_message([{"role": "system", "content": "",
                                          "toolsAdded": [{"name": "x"}], "timestamp": None}])
    assert only_tools == {"role": "system", "content": "", "toolsAdded": [{"name": "x"}],
                          "timestamp": 0}


def test_async_twins(tmp_path: Path) -> None:
    path = golden("redact-and-omit", tmp_path)

    async def run() -> tuple[int, object]:
        async with await AsyncSession.open(path) as session:
            projection = await session.build_projection()
            return len(projection.entries), await session.system_message()

    count, system = asyncio.run(run())
    with Session.open(path) as session:
        assert count == len(session.build_projection().entries)
        assert system == session.system_message()
