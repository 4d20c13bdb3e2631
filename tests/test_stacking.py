"""Stacking and cherry-pick: the first seed's diagrams as tests (seeds/000, "Consequences for
Stacking", "Compaction + Stacking", "Example: Full Session with Branching")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessiontree import BranchSummary, EntryNotFound, InvalidEntry, Session, ToolCall
from sessiontree._json import loads
from sessiontree.events import BeforeTreeResult, TreePreparation
from sessiontree.navigation import NothingToPop
from sessiontree.summarize import SummaryFailed

from .backends import Backend, reopen, stored, stored_lines
from .navhelpers import FailingSummarizer, ListSummarizer, reply, tool_result, user


def call(n: int) -> ToolCall:
    return ToolCall(id=f"call{n}", name="bash", arguments={"command": f"step {n}"})


def roles(session: Session) -> list[str]:
    return [m["role"] for m in session.build_context().to_builtins()["messages"]]


def parent(session: Session, entry_id: str) -> str | None:
    return session.entry(entry_id).parent_id


@pytest.fixture
def session(backend: Backend) -> Session:
    return backend.create(cwd="/home/dev/proj")


def numbered(session: Session) -> dict[int, str]:
    """Entries 1-8 of the "Multiple Pops" diagram: [0] is the header; 4 is the last user
    message of the path, 5-8 are the agent working."""
    e: dict[int, str] = {}
    e[1] = session.append_message(user("Build a CLI"))
    e[2] = session.append_message(reply("I'll create it", call(2)))
    e[3] = session.append_message(tool_result("call2", "bash", "created"))
    e[4] = session.append_message(user("Add --verbose"))
    e[5] = session.append_message(reply("adding", call(5)))
    e[6] = session.append_message(tool_result("call5", "bash", "ok"))
    e[7] = session.append_message(reply("testing", call(7)))
    e[8] = session.append_message(tool_result("call7", "bash", "2 passed"))
    return e


def test_multiple_pops_diagram(session: Session) -> None:
    r"""
    [0]─[1]─[2]─[3]─[4]─[5]─[6]─[7]─[8]
                 └─[9:summary of 4-8]─[10]─[11]─[12]
                    └─[13:summary of 10-12]
    Context: 13→9→3→2→1→0.
    """
    e = numbered(session)
    summarizer = ListSummarizer()
    first = session.pop(summarizer=summarizer)
    assert first.editor_text == "Add --verbose"
    assert isinstance(first.summary_entry, BranchSummary)
    e[9] = first.summary_entry.id
    assert parent(session, e[9]) == e[3]
    assert first.summary_entry.from_id == e[8]
    assert first.summarized_ids == [e[k] for k in range(4, 9)]
    assert [m.role for m in summarizer.requests[0].messages] == ["user", "assistant", "assistant"]

    e[10] = session.append_message(user("Make it quieter"))
    e[11] = session.append_message(reply("quieter", call(11)))
    e[12] = session.append_message(tool_result("call11", "bash", "ok"))
    second = session.pop(summarizer=summarizer)
    assert second.summary_entry is not None
    e[13] = second.summary_entry.id
    assert parent(session, e[13]) == e[9]
    assert second.summarized_ids == [e[10], e[11], e[12]]

    assert session.path_ids() == [e[1], e[2], e[3], e[9], e[13]]
    assert roles(session) == ["user", "assistant", "toolResult", "branchSummary", "branchSummary"]
    children = session.children_ids(e[3])
    assert children == [e[4], e[9]]  # the popped entries stay in the file


def test_pop_to_an_entry_gives_the_same_shape(session: Session) -> None:
    """The "Tree Approach": pop to entry 3 = a summary of 4-8 with parent 3."""
    e = numbered(session)
    result = session.pop(e[3], summarizer=ListSummarizer())
    assert result.summary_entry is not None
    assert parent(session, result.summary_entry.id) == e[3]
    assert result.summarized_ids == [e[k] for k in range(4, 9)]
    assert result.editor_text is None


def test_compaction_and_stacking_diagram(session: Session) -> None:
    r"""
    [0]─[1]─[2]─[3]─[4]─[5]
     └─[6:compaction summary]─[7]─[8]─[9]─[10]
                               └─[11:stack summary]
    Context: 11→7→6→0: no special handling, both are just branches. In pi's format the
    compaction is appended at the leaf and keeps entries from firstKeptEntryId.
    """
    e: dict[int, str] = {}
    e[1] = session.append_message(user("q1"))
    e[2] = session.append_message(reply("r1"))
    e[3] = session.append_message(user("q2"))
    e[4] = session.append_message(reply("r2"))
    e[5] = session.append_message(user("q3"))
    e[6] = session.append_compaction("q1 and q2 answered", e[5], 5000)
    e[7] = session.append_message(reply("r3"))
    e[8] = session.append_message(user("q4"))
    e[9] = session.append_message(reply("r4"))
    e[10] = session.append_message(user("q5"))
    stack = session.pop(e[7], summarizer=ListSummarizer())
    assert stack.summary_entry is not None
    e[11] = stack.summary_entry.id
    assert parent(session, e[11]) == e[7]
    assert session.path_ids()[-3:] == [e[6], e[7], e[11]]
    assert roles(session) == ["compactionSummary", "user", "assistant", "branchSummary"]

    # popping again goes past the compaction: the new summary covers it and the old summary
    summarizer = ListSummarizer()
    again = session.pop(summarizer=summarizer)
    assert again.summary_entry is not None
    assert parent(session, again.summary_entry.id) == e[4]
    assert [m.role for m in summarizer.requests[0].messages] == \
        ["user", "compactionSummary", "assistant", "branchSummary"]
    assert roles(session) == ["user", "assistant", "user", "assistant", "branchSummary"]


def test_full_session_with_branching_example(session: Session) -> None:
    """The seed's closing example: the Node.js attempt summarized, then the Rust path."""
    e: dict[int, str] = {}
    e[1] = session.append_message(user("Build a CLI"))
    e[2] = session.append_message(reply("I'll create..."))
    e[3] = session.append_message(user("Add --verbose flag"))
    e[4] = session.append_message(reply("Here's the flag..."))
    e[5] = session.append_message(user("Actually use Python"))
    e[6] = session.append_message(reply("Converting to Python..."))

    def supply(prep: TreePreparation) -> BeforeTreeResult:
        assert [x.id for x in prep.entries_to_summarize] == [e[k] for k in range(3, 7)]
        return BeforeTreeResult(summary="Attempted Node.js CLI with --verbose flag")

    off = session.events.on("session_before_tree", supply)
    result = session.pop(e[2], summarizer=FailingSummarizer())
    off()
    assert result.from_hook and result.summary_entry is not None
    e[7] = result.summary_entry.id
    e[8] = session.append_message(user("Use Rust instead"))
    e[9] = session.append_message(reply("Creating Rust CLI..."))
    assert session.path_ids() == [e[1], e[2], e[7], e[8], e[9]]
    messages = session.build_context().to_builtins()["messages"]
    assert [m.get("summary") or m["content"][0]["text"] for m in messages] == [
        "Build a CLI", "I'll create...", "Attempted Node.js CLI with --verbose flag",
        "Use Rust instead", "Creating Rust CLI..."]
    stored = loads(stored_lines(session)[6])
    assert stored["type"] == "branch_summary" and stored["fromHook"] is True
    assert stored["fromId"] == e[6] and stored["parentId"] == e[2]


def test_pop_of_a_root_user_message_starts_a_new_root(session: Session) -> None:
    q = session.append_message(user("only question"))
    session.append_message(reply("answer"))
    result = session.pop(summarizer=ListSummarizer())
    assert result.position_id is None and result.summary_entry is not None
    assert result.summary_entry.parent_id is None
    assert session.children_ids(q) != []


# -- bad input ------------------------------------------------------------------------------------


def snapshot(session: Session) -> tuple[bytes, str | None]:
    return stored(session), session.leaf_id


def test_popping_past_the_root(session: Session) -> None:
    with pytest.raises(NothingToPop):
        session.pop()
    session.append_model_change("anthropic", "claude")
    session.append_message(reply("no user message here"))
    before = snapshot(session)
    with pytest.raises(NothingToPop, match="past the root"):
        session.pop()
    assert snapshot(session) == before


def test_bad_pop_targets(session: Session) -> None:
    e = numbered(session)
    session.branch(e[2])
    other = session.append_message(user("another branch"))
    session.branch(e[8])
    before = snapshot(session)
    with pytest.raises(NothingToPop, match="is the leaf"):
        session.pop(e[8])
    with pytest.raises(NothingToPop, match="not on the current path"):
        session.pop(other)
    with pytest.raises(EntryNotFound):
        session.pop("0badc0de")
    with pytest.raises(SummaryFailed):
        session.pop(summarizer=FailingSummarizer())
    assert snapshot(session) == before


# -- cherry-pick ----------------------------------------------------------------------------------


def test_cherry_pick_copies_the_message_onto_the_leaf(session: Session) -> None:
    e = numbered(session)
    session.branch(e[2])
    session.append_message(user("a different direction"))
    leaf = session.leaf_id
    copy = session.cherry_pick(e[4])
    assert session.leaf_id == copy and parent(session, copy) == leaf
    original, copied = loads(session.raw_line(e[4])), loads(session.raw_line(copy))
    assert copied["message"] == original["message"]
    assert list(copied) == list(original) and copied["id"] != original["id"]
    assert session.build_context().to_builtins()["messages"][-1] == original["message"]


def test_cherry_pick_copies_a_custom_message(session: Session) -> None:
    session.append_message(user("q"))
    note = session.append_custom_message("note", "keep it short", display=False)
    first = session.append_message(reply("a"))
    session.branch(first)
    session.reset_leaf()
    session.append_message(user("elsewhere"))
    copy = session.cherry_pick(note)
    assert list(loads(session.raw_line(copy)))[:3] == ["type", "customType", "content"]
    context = session.build_context().to_builtins()
    assert context["messages"][-1]["content"] == "keep it short"


@pytest.mark.parametrize(("kind", "why"), [
    ("toolResult", "a tool result belongs right after"),
    ("label", "a label is not a message"),
    ("session_info", "a session name is not a message"),
    ("compaction", "a compaction depends on its position"),
    ("custom", "a custom entry is extension state"),
    ("checkout", "a checkout marker records a leaf move"),
    ("model_change", "a model change is a setting"),
    ("thinking", "a thinking level change is a setting"),
    ("branch_summary", "a branch summary records a move"),
    ("unknown", "a mystery entry is not a message"),
])
def test_cherry_pick_refuses_what_is_not_a_message(session: Session, kind: str, why: str) -> None:
    e = numbered(session)
    makers: dict[str, Any] = {
        "toolResult": lambda: e[3],
        "label": lambda: session.set_label(e[1], "x"),
        "session_info": lambda: session.set_name("n"),
        "compaction": lambda: session.append_compaction("s", e[4], 10),
        "custom": lambda: session.append_custom("ext", {"n": 1}),
        "checkout": lambda: session.checkout(e[2]),
        "model_change": lambda: session.append_model_change("openai", "gpt-5"),
        "thinking": lambda: session.append_thinking_level_change("high"),
        "branch_summary": lambda: session.branch_with_summary(e[2], "left"),
        "unknown": lambda: session.append_entry({"type": "mystery", "x": 1}),
    }
    target = makers[kind]()
    before = snapshot(session)
    with pytest.raises(InvalidEntry) as caught:
        session.cherry_pick(target)
    assert why in str(caught.value) and "copies messages and custom messages" in str(caught.value)
    assert snapshot(session) == before


def test_cherry_pick_unknown_id(session: Session) -> None:
    numbered(session)
    with pytest.raises(EntryNotFound):
        session.cherry_pick("nope")
