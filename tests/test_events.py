"""The event bus (sessiontree.events): tree, branch, compact and context hooks; sync and async
handlers; a raising handler cancels only its operation."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from sessiontree import Session, TextContent, UserMessage
from sessiontree.compaction import compact
from sessiontree.events import (
    BeforeBranchResult,
    BeforeCompactResult,
    BeforeTreeResult,
    BranchEvent,
    BranchPreparation,
    CompactEvent,
    CompactPreparation,
    ContextEvent,
    ContextResult,
    EventBus,
    HookFailed,
    HookWarning,
    OperationCancelled,
    TreeEvent,
    TreePreparation,
)
from sessiontree.summarize import SummaryCancelled

from .navhelpers import FailingSummarizer, ListSummarizer, branched, reply, user


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session.create(tmp_path / "s", cwd="/home/dev/proj")


def file_bytes(session: Session) -> bytes:
    assert session.file is not None
    return Path(session.file).read_bytes()


# -- the bus --------------------------------------------------------------------------------------


def test_subscribe_and_unsubscribe() -> None:
    bus = EventBus()
    calls: list[str] = []
    off = bus.on("session_tree", lambda e: calls.append("a"))
    bus.on("session_tree", lambda e: calls.append("b"))
    assert bus.has("session_tree") and len(bus.handlers("session_tree")) == 2
    bus.emit("session_tree", None)
    off()
    off()  # twice is harmless
    bus.emit("session_tree", None)
    assert calls == ["a", "b", "b"]
    with pytest.raises(ValueError, match="unknown event"):
        bus.on("session_before_everything", print)
    assert "session_tree=1" in repr(bus)


def test_before_results_first_cancel_wins_else_the_last() -> None:
    bus = EventBus()
    seen: list[str] = []

    def one(_: Any) -> BeforeBranchResult:
        seen.append("one")
        return BeforeBranchResult()

    def two(_: Any) -> None:
        seen.append("two")

    bus.on("session_before_branch", one)
    bus.on("session_before_branch", two)
    result, decider = bus.decide("session_before_branch", None)
    assert result == BeforeBranchResult() and decider is not None and decider.endswith(".one")
    bus.on("session_before_branch", lambda _: BeforeBranchResult(cancel=True))
    bus.on("session_before_branch", lambda _: seen.append("never"))
    assert bus.before("session_before_branch", None).cancel
    assert "never" not in seen


# -- session_before_tree / session_tree ----------------------------------------------------------


def test_tree_events_carry_the_preparation_and_the_result(session: Session) -> None:
    ids = branched(session)
    session.branch(ids["a3"])
    preps: list[TreePreparation] = []
    events: list[TreeEvent] = []
    session.events.on("session_before_tree", preps.append)
    session.events.on("session_tree", events.append)
    result = session.navigate_tree(ids["a2b"], summarize=True, instructions="be brief",
                                   label="tried python", summarizer=ListSummarizer())
    (prep,) = preps
    assert prep.session is session and prep.target_id == ids["a2b"]
    assert prep.old_leaf_id == ids["a3"] and prep.new_leaf_id == ids["a2b"]
    assert prep.common_ancestor_id == ids["a1"]
    assert [e.id for e in prep.entries_to_summarize] == [ids[k] for k in ("q2", "a2", "r", "q3", "a3")]
    assert prep.user_wants_summary and prep.instructions == "be brief" and prep.label == "tried python"
    (event,) = events
    assert event.new_leaf_id == session.leaf_id and event.old_leaf_id == ids["a3"]
    assert event.summary_entry == result.summary_entry and not event.from_hook


def test_a_handler_supplies_the_summary(session: Session) -> None:
    ids = branched(session)
    events: list[TreeEvent] = []
    session.events.on("session_before_tree", lambda p: BeforeTreeResult(
        summary="hand-written", details={"why": "hook"}))
    session.events.on("session_tree", events.append)
    result = session.navigate_tree(ids["a3"], summarizer=FailingSummarizer())  # no summary asked
    entry = result.summary_entry
    assert entry is not None and entry.summary == "hand-written" and entry.from_hook is True
    assert entry.details == {"why": "hook"} and entry.from_id == ids["a2b"]
    assert events[0].from_hook and events[0].summary_entry == entry


def test_handler_instructions_and_label(session: Session) -> None:
    ids = branched(session)
    summarizer = ListSummarizer()
    off = session.events.on("session_before_tree", lambda p: BeforeTreeResult(
        instructions="mention files", label="from hook"))
    result = session.navigate_tree(ids["a3"], summarize=True, instructions="be brief",
                                   summarizer=summarizer)
    assert summarizer.requests[-1].instructions == "be brief\n\nmention files"
    assert result.summary_entry is not None
    assert session.label(result.summary_entry.id) == "from hook"
    off()
    session.events.on("session_before_tree", lambda p: BeforeTreeResult(
        instructions="only this", replace_instructions=True))
    session.navigate_tree(ids["a2b"], summarize=True, instructions="be brief",
                          summarizer=summarizer)
    assert summarizer.requests[-1].instructions == "only this"


def test_cancel_by_result_names_the_handler_and_writes_nothing(session: Session) -> None:
    ids = branched(session)
    before = file_bytes(session)
    after: list[TreeEvent] = []

    def veto(prep: TreePreparation) -> BeforeTreeResult:
        return BeforeTreeResult(cancel=True)

    session.events.on("session_before_tree", veto)
    session.events.on("session_tree", after.append)
    with pytest.raises(OperationCancelled, match="veto") as info:
        session.navigate_tree(ids["a3"], summarize=True, summarizer=ListSummarizer())
    assert info.value.event == "session_before_tree" and info.value.handler.endswith("veto")
    assert session.leaf_id == ids["a2b"] and file_bytes(session) == before and after == []


def test_cancel_through_the_token(session: Session) -> None:
    ids = branched(session)
    before = file_bytes(session)
    session.events.on("session_before_tree", lambda p: p.cancel.cancel())
    with pytest.raises(SummaryCancelled):
        session.navigate_tree(ids["a3"])
    assert file_bytes(session) == before


def test_a_raising_handler_cancels_only_that_operation(session: Session) -> None:
    ids = branched(session)
    before = file_bytes(session)

    def broken(prep: TreePreparation) -> None:
        raise KeyError("oops")

    off = session.events.on("session_before_tree", broken)
    with pytest.raises(HookFailed, match="broken") as info:
        session.navigate_tree(ids["a3"], summarize=True, summarizer=ListSummarizer())
    assert isinstance(info.value.__cause__, KeyError) and info.value.handler.endswith("broken")
    assert session.leaf_id == ids["a2b"] and file_bytes(session) == before
    # the bus and other operations keep working
    session.append_message(user("still fine"))
    with session.create_branched_session(ids["a3"]) as fork:
        assert fork.leaf_id is not None
    off()
    assert session.navigate_tree(ids["a3"]).moved


def test_a_raising_after_handler_is_reported_and_the_operation_stands(session: Session) -> None:
    ids = branched(session)

    def noisy(event: TreeEvent) -> None:
        raise RuntimeError("display failed")

    session.events.on("session_tree", noisy)
    with pytest.warns(HookWarning, match="noisy"):
        result = session.navigate_tree(ids["a3"])
    assert session.leaf_id == result.leaf_id and result.marker_id is not None
    errors: list[HookFailed] = []
    session.events.on_error = errors.append
    session.navigate_tree(ids["a2b"])
    assert len(errors) == 1 and errors[0].handler.endswith("noisy")


# -- async handlers -------------------------------------------------------------------------------


def test_async_handlers_from_the_sync_api(session: Session) -> None:
    ids = branched(session)
    threads: list[str] = []

    async def supply(prep: TreePreparation) -> BeforeTreeResult:
        await asyncio.sleep(0)
        threads.append(threading.current_thread().name)
        return BeforeTreeResult(summary="async summary")

    session.events.on("session_before_tree", supply)
    result = session.navigate_tree(ids["a3"])  # no loop running: a private loop, this thread
    assert result.summary_entry is not None and result.summary_entry.summary == "async summary"
    assert threads == [threading.current_thread().name]

    async def inside_a_loop() -> Any:
        return session.navigate_tree(ids["a2b"])  # a loop is running: a private thread

    result = asyncio.run(inside_a_loop())
    assert result.summary_entry is not None and threads[-1].startswith("sessiontree-hook")


def test_async_handlers_are_awaited_in_the_callers_loop(session: Session) -> None:
    ids = branched(session)
    loops: list[Any] = []

    async def handler(prep: TreePreparation) -> None:
        loops.append(asyncio.get_running_loop())

    async def after(event: TreeEvent) -> None:
        loops.append(asyncio.get_running_loop())

    session.events.on("session_before_tree", handler)
    session.events.on("session_tree", after)

    async def main() -> Any:
        await session.anavigate_tree(ids["a3"], summarize=True, summarizer=ListSummarizer())
        return asyncio.get_running_loop()

    loop = asyncio.run(main())
    assert loops == [loop, loop]


def test_a_raising_async_handler_in_the_async_api(session: Session) -> None:
    ids = branched(session)
    before = file_bytes(session)

    async def broken(prep: TreePreparation) -> None:
        raise ValueError("async oops")

    session.events.on("session_before_tree", broken)
    with pytest.raises(HookFailed, match="broken"):
        asyncio.run(session.anavigate_tree(ids["a3"]))
    with pytest.raises(HookFailed, match="broken"):
        asyncio.run(session.apop(summarizer=ListSummarizer()))
    assert file_bytes(session) == before


# -- forks ----------------------------------------------------------------------------------------


def test_branch_events(session: Session, tmp_path: Path) -> None:
    ids = branched(session)
    preps: list[BranchPreparation] = []
    events: list[BranchEvent] = []
    session.events.on("session_before_branch", preps.append)
    session.events.on("session_branch", events.append)
    with session.create_branched_session(ids["a3"]) as fork:
        pass
    with Session.fork_from(session, directory=tmp_path / "all") as everything:
        pass
    assert [(p.entry_id, p.mode, p.in_memory) for p in preps] == [(ids["a3"], "path", False),
                                                                  (None, "all", False)]
    assert [e.new_session for e in events] == [fork, everything]
    assert events[0].previous_file == session.file and events[0].new_file == fork.file


def test_a_cancelled_fork_writes_no_file(session: Session, tmp_path: Path) -> None:
    ids = branched(session)
    session.events.on("session_before_branch", lambda p: BeforeBranchResult(cancel=True))
    out = tmp_path / "out"
    with pytest.raises(OperationCancelled):
        session.create_branched_session(ids["a3"], directory=out)
    with pytest.raises(OperationCancelled):
        Session.fork_from(session, directory=out)
    assert not out.exists()
    assert sorted(p.name for p in Path(session.file or "").parent.iterdir()) == \
        [Path(session.file or "").name]


# -- compaction -----------------------------------------------------------------------------------


def long_session(session: Session) -> None:
    for i in range(6):
        session.append_message(user(f"question {i} " + "words " * 200))
        session.append_message(reply(f"answer {i} " + "more words " * 200))


def test_compact_events_through_the_bus(session: Session) -> None:
    long_session(session)
    first = compact(session, keep_recent_tokens=600)
    assert first is not None
    session.append_message(user("and another " * 300))
    session.append_message(reply("ok " * 300))
    preps: list[CompactPreparation] = []
    events: list[CompactEvent] = []
    session.events.on("session_before_compact", preps.append)
    session.events.on("session_compact", events.append)
    second = compact(session, keep_recent_tokens=600)
    (prep,) = preps
    assert [c.id for c in prep.previous_compactions] == [first.id]
    assert prep.session is session and prep.messages_to_summarize
    assert events[0].compaction == second and not events[0].from_hook


def test_compact_cancelled_or_supplied_by_a_handler(session: Session) -> None:
    long_session(session)
    before = file_bytes(session)
    off = session.events.on("session_before_compact", lambda p: BeforeCompactResult(cancel=True))
    with pytest.raises(OperationCancelled):
        compact(session, keep_recent_tokens=600)
    assert file_bytes(session) == before
    off()
    session.events.on("session_before_compact", lambda p: BeforeCompactResult(summary="by hook"))
    entry = compact(session, keep_recent_tokens=600)
    assert entry is not None and entry.summary == "by hook" and entry.from_hook is True


# -- context --------------------------------------------------------------------------------------


def test_context_hooks_transform_without_changing_the_session(session: Session) -> None:
    ids = branched(session)
    before = file_bytes(session)
    plain = session.build_context().to_builtins()

    def drop_assistants(event: ContextEvent) -> ContextResult:
        assert event.session is session and event.leaf_id == ids["a2b"]
        return ContextResult(messages=[m for m in event.messages if m.role != "assistant"])

    def shout(event: ContextEvent) -> None:  # changes its private copy in place
        for m in event.messages:
            if isinstance(m, UserMessage) and isinstance(m.content, list):
                m.content[0] = TextContent(text=m.content[0].text.upper())  # type: ignore[union-attr]

    session.events.on("context", drop_assistants)
    session.events.on("context", shout)
    for_model = session.build_context(for_model=True)
    assert [m.role for m in for_model.messages] == ["user", "user"]
    assert for_model.messages[0].content[0].text == "Q1: BUILD A CLI"  # type: ignore[union-attr]
    assert for_model.to_builtins()["model"] == plain["model"]
    assert session.build_context().to_builtins() == plain  # unchanged
    assert file_bytes(session) == before

    async def main() -> Any:
        return await session.abuild_context()

    assert [m.role for m in asyncio.run(main()).messages] == ["user", "user"]


def test_context_hook_returning_a_list_and_a_raising_one(session: Session) -> None:
    branched(session)
    off = session.events.on("context", lambda e: e.messages[-1:])
    assert len(session.build_context(for_model=True)) == 1
    off()

    def bad(event: ContextEvent) -> None:
        raise RuntimeError("no")

    session.events.on("context", bad)
    with pytest.raises(HookFailed, match="bad"):
        session.build_context(for_model=True)
    assert len(session.build_context()) == 4  # without for_model no hook runs


def test_events_are_per_session(tmp_path: Path) -> None:
    a, b = Session.in_memory(), Session.in_memory()
    a.events.on("context", lambda e: [])
    a.append_message(user("x"))
    b.append_message(user("y"))
    assert len(a.build_context(for_model=True)) == 0 and len(b.build_context(for_model=True)) == 1
