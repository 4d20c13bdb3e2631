"""navigate_tree as pi's /tree (seed 001, format-spec.md 12, 17 g/h, 18.6), on real files."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import BranchSummary, EntryNotFound, Session
from sessiontree._json import loads
from sessiontree.navigation import (
    BRANCH_SUMMARY_PREAMBLE,
    NO_CONTENT_SUMMARY,
    collect_entries_for_branch_summary,
    prepare_branch_entries,
)
from sessiontree.summarize import CancelToken, SummaryCancelled, SummaryFailed

from .backends import Backend, reopen, stored, stored_lines
from .navhelpers import (
    CancellingSummarizer,
    EmptySummarizer,
    FailingSummarizer,
    IgnoringCancelSummarizer,
    ListSummarizer,
    TypedFailingSummarizer,
    branched,
    reply,
    user,
)


@pytest.fixture
def session(backend: Backend) -> Session:
    return backend.create(cwd="/home/dev/proj")


def lines(session: Session) -> list[dict[str, Any]]:
    return [loads(x) for x in stored_lines(session)]


def reopened_context(session: Session) -> dict[str, Any]:
    with reopen(session, strict=True) as again:
        return again.build_context().to_builtins()


# -- collecting and preparing ---------------------------------------------------------------------


def test_collect_entries_stops_at_the_common_ancestor(session: Session) -> None:
    ids = branched(session)
    session.branch(ids["a3"])
    got = collect_entries_for_branch_summary(session, ids["a3"], ids["a2b"])
    assert got.common_ancestor_id == ids["a1"]
    assert [e.id for e in got.entries] == [ids[k] for k in ("q2", "a2", "r", "q3", "a3")]
    # target on the old path: only what lies below it
    got = collect_entries_for_branch_summary(session, ids["a3"], ids["q2"])
    assert got.common_ancestor_id == ids["q2"]
    assert [e.id for e in got.entries] == [ids[k] for k in ("a2", "r", "q3", "a3")]
    # no old leaf: nothing abandoned; no target: the whole old path
    assert collect_entries_for_branch_summary(session, None, ids["a1"]).entries == []
    whole = collect_entries_for_branch_summary(session, ids["a2b"], None)
    assert whole.common_ancestor_id is None
    assert [e.id for e in whole.entries] == [ids[k] for k in ("q1", "a1", "q2b", "a2b")]
    with pytest.raises(EntryNotFound):
        collect_entries_for_branch_summary(session, ids["a3"], "nope")


def test_prepare_branch_entries_skips_tool_results_and_collects_files(session: Session) -> None:
    ids = branched(session)
    entries = collect_entries_for_branch_summary(session, ids["a3"], ids["a2b"]).entries
    prepared = prepare_branch_entries(entries)
    assert [m.role for m in prepared.messages] == ["user", "assistant", "user", "assistant"]
    assert prepared.file_details.read_files == ["src/cli.js"]
    assert prepared.file_details.modified_files == ["src/flags.js"]
    # a budget that only fits the newest message keeps the newest
    small = prepare_branch_entries(entries, token_budget=8)
    assert [m.role for m in small.messages] == ["assistant"]
    assert small.total_tokens <= 8


def test_prepare_branch_entries_takes_files_of_earlier_summaries(session: Session) -> None:
    first = session.append_message(user("start"))
    session.append_entry({"type": "branch_summary", "fromId": first, "summary": "earlier",
                          "details": {"readFiles": ["a.py"], "modifiedFiles": ["b.py"]},
                          "fromHook": False})
    session.append_entry({"type": "branch_summary", "fromId": first, "summary": "by a hook",
                          "details": {"readFiles": ["hook.py"], "modifiedFiles": []},
                          "fromHook": True})
    prepared = prepare_branch_entries(session.path())
    assert prepared.file_details.read_files == ["a.py"]
    assert prepared.file_details.modified_files == ["b.py"]
    assert [m.role for m in prepared.messages] == ["user", "branchSummary", "branchSummary"]


# -- the moves ------------------------------------------------------------------------------------


def test_non_message_target_becomes_the_leaf_and_the_move_survives_a_reload(
        session: Session) -> None:
    ids = branched(session)
    before = session.build_context(ids["a3"]).to_builtins()
    result = session.navigate_tree(ids["a3"])
    assert result.moved and result.position_id == ids["a3"] and result.editor_text is None
    assert result.old_leaf_id == ids["a2b"]
    marker = lines(session)[-1]
    assert marker["type"] == "custom" and marker["customType"] == "sessiontree.checkout"
    assert marker["parentId"] == ids["a3"] and marker["data"] == {"targetId": ids["a3"]}
    assert result.marker_id == marker["id"] == session.leaf_id
    assert session.build_context().to_builtins() == before
    assert reopened_context(session) == before


def test_user_target_moves_to_its_parent_and_returns_its_text(session: Session) -> None:
    ids = branched(session)
    result = session.navigate_tree(ids["q2"])
    assert result.position_id == ids["a1"]
    assert result.editor_text == "q2: add a --verbose flag"
    assert session.build_context().to_builtins() == session.build_context(ids["a1"]).to_builtins()


def test_custom_message_target_moves_to_its_parent(session: Session) -> None:
    q = session.append_message(user("q"))
    custom = session.append_custom_message("reminder", "remember the constraint")
    session.append_message(reply("a"))
    result = session.navigate_tree(custom)
    assert result.position_id == q and result.editor_text == "remember the constraint"


def test_root_user_target_goes_before_the_first_entry(session: Session) -> None:
    ids = branched(session)
    result = session.navigate_tree(ids["q1"], summarize=True, summarizer=ListSummarizer())
    summary = result.summary_entry
    assert result.position_id is None and summary is not None
    assert summary.parent_id is None and summary.from_id == ids["a2b"]
    context = session.build_context().to_builtins()
    assert [m["role"] for m in context["messages"]] == ["branchSummary"]


def test_current_leaf_is_a_no_op(session: Session) -> None:
    ids = branched(session)
    before = stored(session)
    result = session.navigate_tree(ids["a2b"], summarize=True, summarizer=FailingSummarizer())
    assert not result.moved and result.leaf_id == ids["a2b"]
    assert stored(session) == before


def test_summary_entry_at_the_new_position(session: Session) -> None:
    ids = branched(session)
    session.branch(ids["a3"])
    summarizer = ListSummarizer()
    result = session.navigate_tree(ids["a2b"], summarize=True, summarizer=summarizer,
                                   instructions="focus on flags")
    entry = result.summary_entry
    assert isinstance(entry, BranchSummary)
    assert entry.parent_id == ids["a2b"] and entry.from_id == ids["a3"]  # decision h
    assert entry.from_hook is False and session.leaf_id == entry.id
    assert entry.details == {"readFiles": ["src/cli.js"], "modifiedFiles": ["src/flags.js"]}
    assert entry.summary.startswith(BRANCH_SUMMARY_PREAMBLE + "user: q2: add a --verbose flag")
    assert entry.summary.endswith("<read-files>\nsrc/cli.js\n</read-files>\n\n"
                                  "<modified-files>\nsrc/flags.js\n</modified-files>")
    (request,) = summarizer.requests
    assert request.purpose == "branch" and request.instructions == "focus on flags"
    assert request.read_files == ["src/cli.js"] and request.modified_files == ["src/flags.js"]
    assert result.summarized_ids == [ids[k] for k in ("q2", "a2", "r", "q3", "a3")]
    stored = lines(session)[-1]
    assert list(stored) == ["type", "id", "parentId", "timestamp", "fromId", "summary", "details",
                            "fromHook"]
    context = session.build_context().to_builtins()
    assert [m["role"] for m in context["messages"]] == ["user", "assistant", "user", "assistant",
                                                        "branchSummary"]
    assert context["messages"][-1]["fromId"] == ids["a3"]
    assert reopened_context(session) == context


def test_summary_with_label_labels_the_summary(session: Session) -> None:
    ids = branched(session)
    session.branch(ids["a3"])
    result = session.navigate_tree(ids["a2b"], summarize=True, summarizer=ListSummarizer(),
                                   label="python attempt")
    assert result.summary_entry is not None
    assert session.label(result.summary_entry.id) == "python attempt"
    assert result.label_id == session.leaf_id


def test_label_without_summary_labels_the_target_and_persists_the_move(session: Session) -> None:
    ids = branched(session)
    result = session.navigate_tree(ids["a3"], label="here")
    assert session.label(ids["a3"]) == "here" and result.marker_id is None
    last = lines(session)[-1]
    assert last["type"] == "label" and last["parentId"] == ids["a3"]
    assert reopened_context(session) == session.build_context(ids["a3"]).to_builtins()


def test_nothing_to_summarize_only_moves(session: Session) -> None:
    ids = branched(session)
    session.reset_leaf()
    result = session.navigate_tree(ids["a3"], summarize=True, summarizer=FailingSummarizer())
    assert result.summary_entry is None and result.marker_id is not None


def test_no_messages_to_summarize_writes_no_summary(session: Session) -> None:
    q = session.append_message(user("q"))
    a = session.append_message(reply("a"))
    session.append_model_change("openai", "gpt-5")
    session.append_thinking_level_change("high")
    session.set_label(q, "start")
    session.append_custom("ext-state", {"n": 1})
    before = len(lines(session))
    # the summarizer is never asked: there is nothing to give it
    result = session.navigate_tree(a, summarize=True, summarizer=FailingSummarizer())
    assert result.summary_entry is None and result.nothing_to_summarize
    assert result.marker_id == session.leaf_id and result.position_id == a
    written = lines(session)[before:]
    assert [e["type"] for e in written] == ["custom"]  # only the checkout marker
    assert "branch_summary" not in {e["type"] for e in lines(session)}
    assert reopened_context(session) == session.build_context(a).to_builtins()
    # leaving a branch that holds only a marker and a label writes no summary either
    session.set_label(q, "answer")
    abandoned = session.path_ids()[-2:]
    assert [e["type"] for e in lines(session)[-2:]] == ["custom", "label"]
    result = session.navigate_tree(a, summarize=True, label="back")
    assert result.summary_entry is None and result.nothing_to_summarize
    assert result.label_id == session.leaf_id  # the label persists the move
    assert session.path_ids()[-2] == a and not set(abandoned) & set(session.path_ids())
    assert "branch_summary" not in {e["type"] for e in lines(session)}


def test_pis_placeholder_summary_never_reaches_the_model(session: Session) -> None:
    q = session.append_message(user("q"))
    a = session.append_message(reply("a"))
    placeholder = session.branch_with_summary(a, NO_CONTENT_SUMMARY)  # as pi 0.73.1 writes it
    session.append_message(user("next"))
    context = session.build_context()
    roles = [m.role for m in context.messages]
    assert roles == ["user", "assistant", "branchSummary", "user"]  # pi's buildSessionContext
    sent = context.to_llm()
    assert [m.role for m in sent] == ["user", "assistant", "user"]
    assert all(NO_CONTENT_SUMMARY not in str(m) for m in sent)
    # leaving a branch that holds only the placeholder and a marker: nothing to summarize
    session.checkout(placeholder)
    asked = ListSummarizer()
    result = session.navigate_tree(a, summarize=True, summarizer=asked)
    assert result.summary_entry is None and asked.requests == [] and result.nothing_to_summarize
    assert q in session.path_ids()


def test_persist_false_moves_in_memory_only(session: Session) -> None:
    ids = branched(session)
    before = stored(session)
    result = session.navigate_tree(ids["a3"], persist=False)
    assert session.leaf_id == ids["a3"] and result.marker_id is None
    assert stored(session) == before


# -- nothing written when it does not happen -----------------------------------------------------


@pytest.mark.parametrize("make, error", [
    (FailingSummarizer, SummaryFailed),
    (TypedFailingSummarizer, SummaryFailed),
    (EmptySummarizer, SummaryFailed),
    (CancellingSummarizer, SummaryCancelled),
    (IgnoringCancelSummarizer, SummaryCancelled),
])
def test_failed_or_cancelled_summary_writes_nothing(session: Session, make: Any,
                                                    error: type[Exception]) -> None:
    ids = branched(session)
    session.branch(ids["a3"])
    before = stored(session)
    with pytest.raises(error):
        session.navigate_tree(ids["a2b"], summarize=True, summarizer=make())
    assert session.leaf_id == ids["a3"]
    assert stored(session) == before


def test_cancelled_token_writes_nothing(session: Session) -> None:
    ids = branched(session)
    token = CancelToken()
    token.cancel()
    before = stored(session)
    with pytest.raises(SummaryCancelled):
        session.navigate_tree(ids["a3"], summarize=True, summarizer=ListSummarizer(), cancel=token)
    with pytest.raises(SummaryCancelled):
        session.navigate_tree(ids["a3"], cancel=token)  # also without a summary
    assert session.leaf_id == ids["a2b"] and stored(session) == before


def test_unknown_target(session: Session) -> None:
    branched(session)
    with pytest.raises(EntryNotFound):
        session.navigate_tree("deadbeef")


def test_async_navigation(session: Session) -> None:
    ids = branched(session)

    async def main() -> Any:
        return await session.anavigate_tree(ids["a3"], summarize=True, summarizer=ListSummarizer())

    result = asyncio.run(main())
    assert result.summary_entry is not None and result.summary_entry.parent_id == ids["a3"]


def test_async_navigation_cancelled_by_the_task(session: Session) -> None:
    import threading

    ids = branched(session)
    started = threading.Event()

    class Slow:
        def summarize(self, request: Any, cancel: CancelToken | None = None) -> str:
            assert cancel is not None
            started.set()
            cancel.wait(5)
            cancel.raise_if_cancelled()
            return "late"

    async def main() -> None:
        task = asyncio.create_task(session.anavigate_tree(ids["a3"], summarize=True,
                                                          summarizer=Slow()))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    before = stored(session)
    asyncio.run(main())
    assert session.leaf_id == ids["a2b"] and stored(session) == before


def test_in_memory_sessions_navigate_too() -> None:
    session = Session.in_memory()
    ids = branched(session)
    result = session.navigate_tree(ids["q3"], summarize=True, summarizer=ListSummarizer())
    assert result.position_id == ids["r"] and result.summary_entry is not None


def test_default_summarizer_is_the_offline_one(session: Session) -> None:
    ids = branched(session)
    result = session.navigate_tree(ids["a3"], summarize=True)
    assert result.summary_entry is not None
    assert result.summary_entry.summary.startswith(BRANCH_SUMMARY_PREAMBLE)


# -- properties -----------------------------------------------------------------------------------


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[int, str]]:
    """(parent index or -1, kind) for a random tree of messages and settings entries."""
    n = draw(st.integers(min_value=1, max_value=18))
    out = []
    for i in range(n):
        parent = draw(st.integers(min_value=-1, max_value=i - 1))
        kind = draw(st.sampled_from(["user", "assistant", "custom_message", "model", "label"]))
        out.append((parent, kind))
    return out


def build(session: Session, spec: list[tuple[int, str]]) -> list[str]:
    ids: list[str] = []
    for i, (parent, kind) in enumerate(spec):
        if parent < 0:
            session.reset_leaf()
        else:
            session.branch(ids[parent])
        if kind == "user":
            ids.append(session.append_message(user(f"u{i}")))
        elif kind == "assistant":
            ids.append(session.append_message(reply(f"a{i}")))
        elif kind == "custom_message":
            ids.append(session.append_custom_message("note", f"c{i}"))
        elif kind == "label" and parent >= 0:
            ids.append(session.set_label(ids[parent], f"l{i}"))
        else:
            ids.append(session.append_model_change("p", f"m{i}"))
    return ids


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=trees(), data=st.data(), summarize=st.booleans())
def test_navigating_gives_the_targets_context(backend: Backend, spec: list[tuple[int, str]],
                                              data: st.DataObject, summarize: bool) -> None:
    with backend.create(cwd="/p") as session:
        ids = build(session, spec)
        target = data.draw(st.sampled_from(ids))
        start = data.draw(st.sampled_from(ids))
        session.branch(start)
        result = session.navigate_tree(target, summarize=summarize, summarizer=ListSummarizer())
        expected = session.build_context(result.position_id).to_builtins()
        got = session.build_context().to_builtins()
        if not result.moved:
            assert target == start and got == expected
        elif result.summary_entry is None:
            assert got == expected
            assert reopened_context(session) == expected
        else:
            assert got["messages"][:-1] == expected["messages"]
            assert got["messages"][-1]["role"] == "branchSummary"
            assert got["messages"][-1]["fromId"] == start
            assert reopened_context(session) == got
