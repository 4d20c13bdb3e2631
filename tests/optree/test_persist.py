"""The operation tree in the session file: written as ``custom`` entries, rebuilt on load,
a killed run leaves a valid partial tree, problems are reported, pi sees the same context."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sessiontree import AssistantMessage, LoadWarning, Session, TextContent, UserMessage
from sessiontree.optree import (
    NO_PRICES,
    OpTree,
    OpTreeBuilder,
    Usage,
    optree_to_builtins,
    render_ascii,
    run_to_builtins,
)
from sessiontree.optree.persist import (
    SessionSink,
    blob_dir,
    fold_events,
    load_blob,
    load_optree,
    optree_from_session,
)

from ..backends import Backend, reopen, stored_file, stored_lines
from .conftest import Clock, Ids

REPO = Path(__file__).resolve().parents[2]


def same_tree(loaded: OpTree, live: OpTree) -> None:
    assert set(loaded.runs) == set(live.runs)
    for run_id, run in loaded.runs.items():
        assert run_to_builtins(loaded, run) == run_to_builtins(live, live.runs[run_id])


def full_run(session: Session, clock: Clock, ids: Ids, **sink: Any) -> OpTreeBuilder:
    """A run with every kind of event: prompts, payloads, logs, reasoning, accounting, a spawned
    sub-agent, an independently built sub-agent attached later, a failure, the end."""
    target: Any = SessionSink(session, **sink) if sink else session
    root = OpTreeBuilder({"agentId": "root", "traceId": "T", "callPath": "root"}, clock=clock,
                         ids=ids, sink=target)
    root.set_session_title("Fix the tests")
    session.append_message(UserMessage(content="fix the tests", timestamp=clock.now))
    t0 = root.begin_turn(0, {"system": True, "label": "init"})
    init = root.begin_op(t0, "system", {"label": "init"})
    root.append_log(init, {"timestamp": clock.now, "severity": "VRB", "message": "ready",
                           "remoteIdentifier": "agent:init", "fatal": False})
    root.end_op(init)
    t1 = root.begin_turn(1, {"prompts": {"system": "You are helpful.", "user": "fix the tests"}})
    llm = root.begin_op(t1, "llm", {"provider": "anthropic", "model": "claude-sonnet-4"})
    root.set_request(llm, {"kind": "llm", "payload": {"messages": [{"role": "user",
                                                                    "content": "fix"}]},
                           "size": 42})
    clock.advance(120)
    root.append_reasoning_chunk(llm, "Let me look")
    root.append_reasoning_chunk(llm, " at the tests.")
    root.set_reasoning_final(llm, "Look at the tests.")
    root.set_response(llm, {"payload": {"content": "running"}, "size": 7})
    root.set_response(llm, {"payload": {"stop": "tool_use"}, "truncated": False})
    root.account_llm(llm, Usage.from_anthropic({"input_tokens": 1000, "output_tokens": 200,
                                                "cache_read_input_tokens": 300,
                                                "cache_creation_input_tokens": 50}),
                     stop_reason="tool_use", latency_ms=120)
    root.end_op(llm, "ok", {"latency": 120})
    session.append_message(AssistantMessage(content=[TextContent(text="running")],
                                            provider="anthropic", model="claude-sonnet-4",
                                            timestamp=clock.now))
    tool = root.begin_op(t1, "tool", {"name": "bash", "provider": "mcp"})
    root.append_accounting(tool, {"type": "tool", "timestamp": clock.now, "mcpServer": "sh",
                                  "command": "pytest", "charactersIn": 6, "charactersOut": 9})
    clock.advance(30)
    root.end_op(tool, "failed", {"error": "exit 1"})
    sub = root.begin_op(t1, "session", {"name": "agent__fixer"})
    child = root.spawn_child(sub, {"agentId": "fixer", "callPath": "root:fixer"})
    ct = child.begin_turn()
    cl = child.begin_op(ct, "llm", {"provider": "openai", "model": "gpt-4o"})
    child.account_llm(cl, Usage.from_openai({"prompt_tokens": 500, "completion_tokens": 20,
                                             "prompt_tokens_details": {"cached_tokens": 100}}))
    child.end_op(cl)
    child.end_turn(ct)
    child.end_session(True)
    root.end_op(sub)
    sub2 = root.begin_op(t1, "session", {"name": "agent__reviewer"})
    reviewer = OpTreeBuilder({"agentId": "reviewer"}, clock=clock, ids=ids, sink=target)
    rop = reviewer.begin_op(reviewer.begin_turn(), "tool", {"name": "read"})
    reviewer.append_log(rop, {"timestamp": clock.now, "message": "reading"})
    root.attach_child_session(sub2, reviewer)
    reviewer.end_op(rop)
    reviewer.end_session(True)
    root.end_op(sub2)
    root.end_turn(t1)
    root.end_turn(t0)
    root.end_session(True)
    if isinstance(target, SessionSink):
        target.flush()
    return root


def test_session_round_trip_rebuilds_the_tree(backend: Backend) -> None:
    clock, ids = Clock(), Ids()
    session = backend.create()
    root = full_run(session, clock, ids)
    session.close()
    with reopen(session) as reopened:
        loaded = optree_from_session(reopened, mark_open=False)
        customs = [e.custom_type for e in reopened.custom_entries("sessiontree.op")]
    assert loaded.problems == []
    same_tree(loaded, root.tree)
    assert render_ascii(loaded) == root.render_ascii()
    # 0.0062775 for the root's call + (400*2.5 + 100*1.25 + 20*10) / 1e6 for the fixer's
    assert loaded.runs[root.run_id].rollup.cost_usd == root.rollup.cost_usd == Decimal("0.0076025")
    assert all(c.startswith("sessiontree.op.") for c in customs)
    assert len(customs) == 40  # one entry per change


def test_loaded_tree_has_no_unfinished_marks_when_everything_ended(backend: Backend) -> None:
    session = backend.create()
    full_run(session, Clock(), Ids())
    with reopen(session) as reopened:
        tree = optree_from_session(reopened)
    assert not any(op.unfinished for op in tree.ops.values())
    assert not any(run.unfinished for run in tree.runs.values())


def test_events_are_small_and_carry_version_run_and_time(backend: Backend) -> None:
    session = backend.create()
    root = full_run(session, Clock(), Ids())
    lines = stored_lines(session)
    customs = [json.loads(line) for line in lines if b'"customType":"sessiontree.op' in line]
    assert all(c["data"]["v"] == 1 and "run" in c["data"] for c in customs)
    begin = next(c for c in customs if c["customType"] == "sessiontree.op.begin")
    assert list(begin)[:3] == ["type", "customType", "data"]  # pi's key order for custom
    assert set(begin["data"]) >= {"t", "opId", "turn", "seq", "path", "kind"}
    acc = next(c for c in customs if c["customType"] == "sessiontree.op.accounting")
    assert acc["data"]["entry"]["costUsd"] == "0.0062775"
    assert acc["data"]["entry"]["costSource"] == "computed"
    assert acc["data"]["entry"]["usage"] == {"input": 1000, "output": 200, "cacheRead": 300,
                                             "cacheWrite": 50, "convention": "anthropic"}
    end = next(c for c in customs if c["customType"] == "sessiontree.op.run.end"
               and c["data"]["run"] == root.run_id)
    assert end["data"]["rollup"]["agentsRun"] == 3
    assert max(len(line) for line in lines if b"sessiontree.op" in line) < 1200


def test_context_is_the_same_with_and_without_op_events(backend: Backend) -> None:
    clock, ids = Clock(), Ids()
    with_ops = backend.create()
    full_run(with_ops, clock, ids)
    plain = backend.create()
    clock = Clock()
    plain.append_message(UserMessage(content="fix the tests", timestamp=clock.now))
    clock.advance(120)
    plain.append_message(AssistantMessage(content=[TextContent(text="running")],
                                          provider="anthropic", model="claude-sonnet-4",
                                          timestamp=clock.now))
    assert with_ops.build_context().to_builtins() == plain.build_context().to_builtins()
    assert len(with_ops) == len(plain) + len(list(with_ops.custom_entries("sessiontree.op")))


def test_pi_reads_the_file_with_the_same_context(backend: Backend, tmp_path: Path) -> None:
    from sessiontree.testing.pi import ensure_pi, run_node_script

    modules = ensure_pi()
    session = backend.create()
    full_run(session, Clock(), Ids())
    session.close()
    probe = REPO / "tests" / "pi" / "pi_probe.mjs"
    path = stored_file(session, tmp_path / "exported.jsonl")
    (result,) = run_node_script(probe, str(modules), "read", payload=[str(path)])
    with reopen(session) as ours:
        assert result["unchanged"]
        assert result["leaf"] == ours.leaf_id
        assert result["context"] == ours.build_context().to_builtins()
        assert [m["role"] for m in result["context"]["messages"]] == ["user", "assistant"]


KILLED_RUN = textwrap.dedent("""
    import os, signal, sys
    from sessiontree import Session
    from sessiontree.optree import OpTreeBuilder, Usage
    where = sys.argv[1]  # a folder, or a database store's address
    stored = where.startswith(("sqlite:", "postgresql:"))
    session = Session.create(cwd="/k", store=where) if stored else Session.create(where)
    print(session.url, flush=True)
    root = OpTreeBuilder({"agentId": "root"}, sink=session)
    turn = root.begin_turn()
    done = root.begin_op(turn, "llm", {"provider": "anthropic", "model": "claude-sonnet-4"})
    root.account_llm(done, Usage(input=10, output=5))
    root.end_op(done)
    sub = root.begin_op(turn, "session", {"name": "agent__child"})
    child = root.spawn_child(sub, agent_id="child")
    open_op = child.begin_op(child.begin_turn(), "llm", {"provider": "openai", "model": "gpt-4o"})
    child.account_llm(open_op, Usage(input=7, output=1))
    child.append_log(open_op, {"timestamp": 1, "message": "streaming"})
    os.kill(os.getpid(), signal.SIGKILL)
    root.end_session(True)  # never reached
""")


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_a_killed_run_leaves_a_valid_partial_tree(kind: str, tmp_path: Path,
                                                  request: pytest.FixtureRequest) -> None:
    where = str(tmp_path) if kind == "jsonl" else f"sqlite:///{tmp_path / 's.db'}" \
        if kind == "sqlite" else request.getfixturevalue("postgres_url")
    done = subprocess.run([sys.executable, "-c", KILLED_RUN, where],
                          check=False, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == -signal.SIGKILL, done.stderr
    with Session.open(done.stdout.strip()) as killed:
        tree = killed.optree()
    assert tree.problems == []
    root = tree.root
    assert root is not None and root.unfinished and root.ended_at is None
    child = tree.children(root)[0]
    assert child.unfinished and child.agent_id == "child"
    ops = {op.path: op for op in tree.ops.values()}
    assert set(ops) == {"1-1", "1-2", "1-2.1-1"}
    assert not ops["1-1"].unfinished and ops["1-1"].status == "ok"
    assert ops["1-2"].unfinished and ops["1-2.1-1"].unfinished
    assert root.rollup.tokens_in == 17 and root.rollup.agents_run == 2
    assert ops["1-2.1-1"].logs[0].message == "streaming"
    text = render_ascii(tree)
    assert "status=unfinished" in text and "unfinished" in text.split("\n")[1]


def test_a_torn_last_line_keeps_everything_before_it(tmp_path: Path) -> None:
    clock, ids = Clock(), Ids()
    session = Session.create(tmp_path)
    b = OpTreeBuilder(clock=clock, ids=ids, sink=session, prices=NO_PRICES)
    op = b.begin_op(b.begin_turn(), "llm")
    b.account_llm(op, Usage(input=3, output=1))
    b.end_op(op)
    session.close()
    path = Path(session.file or "")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # the op.end line is cut short
    with pytest.warns(LoadWarning, match="torn"):
        tree = load_optree(path)
    assert tree.problems == []
    node = tree.ops[op]
    assert node.unfinished and node.accounting[0].usage == Usage(input=3, output=1)


def test_problems_are_reported_not_dropped(backend: Backend) -> None:
    clock, ids = Clock(), Ids()
    session = backend.create()
    b = OpTreeBuilder(clock=clock, ids=ids, sink=session, prices=NO_PRICES)
    op = b.begin_op(b.begin_turn(), "llm")
    b.end_session(True)
    session.append_custom("sessiontree.op.future", {"v": 1, "run": b.run_id})
    session.append_custom("sessiontree.op.log", {"v": 1, "run": b.run_id, "opId": "ghost",
                                                 "log": {"timestamp": 1}})
    bad = session.append_custom("sessiontree.op.accounting", {"v": 1, "run": b.run_id,
                                                             "opId": op, "entry": {"kind": 5}})
    session.append_custom("sessiontree.op.begin", {"v": 2, "run": b.run_id})
    session.append_custom("other.extension", {"kept": True})  # not ours: ignored
    tree = optree_from_session(session)
    reasons = [p.reason for p in tree.problems]
    assert len(reasons) == 4
    assert "unknown operation-tree event type 'sessiontree.op.future'" in reasons[0]
    assert "ghost" in reasons[1]
    assert tree.problems[2].entry_id == bad
    assert "unsupported event schema version 2" in reasons[3]
    assert optree_to_builtins(tree)["problems"][1]["customType"] == "sessiontree.op.log"


def test_end_snapshot_is_checked_against_the_fold() -> None:
    clock, ids = Clock(), Ids()
    events: list[Any] = []
    b = OpTreeBuilder(clock=clock, ids=ids, on_update=events.append, prices=NO_PRICES)
    op = b.begin_op(b.begin_turn(), "llm")
    b.account_llm(op, Usage(input=3, output=1), cost_usd="0.5")
    b.end_session(True)
    tampered = [(e.custom_type, json.loads(json.dumps(e.data))) for e in events]
    tampered[-1][1]["own"]["tokensIn"] = 99
    tree = fold_events(tampered)
    assert [p.reason for p in tree.problems] == [
        (f"run {b.run_id!r}: the own totals recorded at its end differ from the folded events "
         "in tokens_in")]


def test_batched_logs_fold_to_the_same_tree(backend: Backend) -> None:
    clock, ids = Clock(), Ids()
    session = backend.create()
    root = full_run(session, clock, ids, batch=8)
    with reopen(session) as reopened:
        entries = list(reopened.custom_entries("sessiontree.op"))
        loaded = optree_from_session(reopened, mark_open=False)
    ends = {e.data["opId"]: i for i, e in enumerate(entries)
            if e.custom_type == "sessiontree.op.end"}
    batches = [(i, e) for i, e in enumerate(entries) if e.custom_type == "sessiontree.op.batch"]
    assert batches
    for position, batch in batches:  # grouped events are written before their op ends
        assert all(ends[item["data"]["opId"]] > position for item in batch.data["events"])
    assert loaded.problems == []
    same_tree(loaded, root.tree)


def test_large_payloads_go_to_blobs(backend: Backend) -> None:
    clock, ids = Clock(), Ids()
    session = backend.create()
    sink = SessionSink(session, blob_threshold=1000)
    b = OpTreeBuilder(clock=clock, ids=ids, sink=sink, prices=NO_PRICES)
    op = b.begin_op(b.begin_turn(), "tool")
    big = {"data": "x" * 5000}
    b.set_request(op, {"kind": "tool", "payload": big, "size": 5012})
    b.set_response(op, {"payload": "small"})
    if session.file is None:  # blobs live beside a file: elsewhere the payload stays inline
        with reopen(session) as reopened:
            request = reopened.optree().ops[op].request
        assert request is not None and request.blob is None and request.payload == big
        return
    tree = load_optree(session.file or "")
    request = tree.ops[op].request
    assert request is not None and request.blob is not None and request.size == 5012
    assert request.preview is not None and request.preview.startswith('{"data":"xxx')
    assert load_blob(session.file or "", request.blob.sha256) == big
    assert (blob_dir(session.file or "") / f"{request.blob.sha256}.json").is_file()
    assert tree.ops[op].response is not None and tree.ops[op].response.payload == "small"
    assert "<blob sha256:" in render_ascii(tree)
    assert max(len(line) for line in Path(session.file or "").read_bytes().splitlines()) < 1000


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_child_run_in_another_session(kind: str, tmp_path: Path,
                                      request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("postgres_url") if kind == "postgres" else None
    backend = Backend(kind, tmp_path, url)
    request.addfinalizer(backend.close)
    clock, ids = Clock(), Ids()
    parent_session = backend.create()
    child_session = Session.create(Path(parent_session.file).parent) if parent_session.file \
        else backend.create()  # a file beside the parent's, or a session of its store
    parent = OpTreeBuilder({"agentId": "parent"}, clock=clock, ids=ids, sink=parent_session,
                           prices=NO_PRICES)
    sub = parent.begin_op(parent.begin_turn(), "session")
    child = OpTreeBuilder({"agentId": "child"}, clock=clock, ids=ids, sink=child_session,
                          prices=NO_PRICES)
    child.account_llm(child.begin_op(child.begin_turn(), "llm"), Usage(input=4, output=2))
    child.end_session(True)
    # a file names a file beside it; a stored session another session of its store
    name = os.path.basename(child_session.file) if child_session.file else child_session.id
    parent.attach_child_session(sub, child.run_id, file=name)
    parent.end_op(sub)
    parent.end_session(True)
    assert parent.rollup.tokens_in == 0  # the child lives in another session
    with reopen(parent_session) as reopened:
        tree = reopened.optree()
        alone = reopened.optree(resolve_files=False)
    assert tree.problems == []
    linked = tree.ops[sub]
    assert (linked.child, linked.child_file) == (child.run_id, name)
    assert tree.runs[parent.run_id].rollup.tokens_in == 4
    assert tree.runs[child.run_id].parent is not None
    assert child.run_id not in alone.runs and "not loaded" in render_ascii(alone)
    missing = OpTreeBuilder(clock=clock, ids=ids, sink=parent_session, prices=NO_PRICES)
    lost = missing.begin_op(missing.begin_turn(), "session")
    missing.attach_child_session(lost, "run-nowhere", file="no-such-session")
    assert "names missing" in "".join(p.reason for p in parent_session.optree().problems)


def test_session_without_an_operation_tree(backend: Backend) -> None:
    session = backend.create()
    session.append_message(UserMessage(content="hi", timestamp=1))
    tree = optree_from_session(session)
    assert tree.runs == {} and tree.root is None
    assert optree_to_builtins(tree) == {"version": 1, "roots": [], "problems": []}


def test_session_optree_method(backend: Backend) -> None:
    session = backend.create()
    root = full_run(session, Clock(), Ids())
    tree = session.optree()
    assert tree.problems == [] and tree.root is not None and tree.root.run_id == root.run_id
    assert tree.runs[root.run_id].rollup == root.rollup


def test_attaching_an_unrecorded_child_writes_its_events(backend: Backend) -> None:
    clock, ids = Clock(), Ids()
    session = backend.create()
    parent = OpTreeBuilder(clock=clock, ids=ids, sink=session, prices=NO_PRICES)
    sub = parent.begin_op(parent.begin_turn(), "session")
    loose = OpTreeBuilder({"agentId": "loose"}, clock=clock, ids=ids, prices=NO_PRICES)
    lop = loose.begin_op(loose.begin_turn(), "llm")
    loose.account_llm(lop, Usage(input=8, output=2), cost_usd="0.2")
    loose.append_log(lop, {"timestamp": 3, "message": "before"})
    parent.attach_child_session(sub, loose)  # nobody recorded the child: its events go first
    loose.append_log(lop, {"timestamp": 4, "message": "after (not recorded: no sink)"})
    tree = session.optree(resolve_files=False)
    assert tree.problems == []
    assert tree.runs[parent.run_id].rollup.tokens_in == 8
    assert [log.message for log in tree.ops[lop].logs] == ["before"]
    assert tree.ops[lop].path == "1-1.1-1"


def test_per_turn_writes_one_entry_per_turn_and_folds_to_the_same_tree(
        backend: Backend) -> None:
    """Issue 20 point 1: the agent's sink costs one entry per turn, not one per event."""
    clock, ids = Clock(), Ids()
    session = backend.create()
    root = full_run(session, clock, ids, per_turn=True)
    sink = SessionSink(session, per_turn=True)
    second = OpTreeBuilder({"agentId": "again"}, clock=clock, ids=ids, sink=sink)
    for number in range(3):
        turn = second.begin_turn()
        second.end_op(second.begin_op(turn, "llm", {"model": f"m{number}"}))
        second.end_turn(turn)
    second.end_session(True)
    with reopen(session) as reopened:
        entries = list(reopened.custom_entries("sessiontree.op"))
        loaded = optree_from_session(reopened, mark_open=False)
    assert [e.custom_type for e in entries] == ["sessiontree.op.batch"] * 4  # 1 + 3 turns
    assert entries[-1].data["events"][-1]["customType"] == "sessiontree.op.run.end"
    assert loaded.problems == []
    same_tree(loaded, _merged(root.tree, second.tree))
    if session.file is not None:  # the journal is gone once every event is in an entry
        assert not blob_dir(session.file).exists()


def _merged(*trees: OpTree) -> OpTree:
    merged = OpTree()
    for tree in trees:
        merged.runs.update(tree.runs)
    return merged


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_a_killed_per_turn_run_keeps_every_event_from_its_journal(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONTREE_CACHE_DIR", str(tmp_path / "cache"))
    where = str(tmp_path) if kind == "jsonl" else f"sqlite:///{tmp_path / 's.db'}" \
        if kind == "sqlite" else request.getfixturevalue("postgres_url")
    script = KILLED_RUN.replace("from sessiontree.optree import OpTreeBuilder, Usage",
                                "from sessiontree.optree import OpTreeBuilder, SessionSink, Usage")
    script = script.replace('sink=session)', 'sink=SessionSink(session, per_turn=True))')
    script = script.replace("\nsub = root.begin_op", "\nroot.end_turn(turn)\n"
                            "turn = root.begin_turn()\nsub = root.begin_op")
    assert script.count("SessionSink") == 2 and "turn = root.begin_turn()\nsub" in script
    done = subprocess.run([sys.executable, "-c", script, where],
                          check=False, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == -signal.SIGKILL, done.stderr
    with Session.open(done.stdout.strip()) as killed:
        written = list(killed.custom_entries("sessiontree.op"))
        tree = killed.optree()
    assert len(written) == 1  # the first turn; the second was in the journal only
    assert tree.problems == []
    root = tree.root
    assert root is not None and root.unfinished and len(root.turns) == 2
    ops = {op.path: op for op in tree.ops.values()}
    assert set(ops) == {"1-1", "2-1", "2-1.1-1"}
    assert not ops["1-1"].unfinished and ops["2-1"].unfinished and ops["2-1.1-1"].unfinished
    assert root.rollup.tokens_in == 17 and ops["2-1.1-1"].logs[0].message == "streaming"


def test_a_journal_already_written_as_an_entry_is_not_folded_twice(tmp_path: Path) -> None:
    session = Session.create(tmp_path)
    session.append_message(UserMessage.of("go"))
    sink = SessionSink(session, per_turn=True)
    run = OpTreeBuilder({"agentId": "a"}, sink=sink)
    turn = run.begin_turn()
    run.end_turn(turn)
    journal = blob_dir(session.file or "") / "pending-ops.journal"
    held = journal.read_bytes()
    run.begin_turn()  # the first turn is written as an entry; then a kill before truncating:
    journal.write_bytes(held + journal.read_bytes())
    with Session.open(session.file or "") as reopened:
        tree = reopened.optree()
    assert tree.problems == [] and len(tree.root.turns) == 2  # type: ignore[union-attr]
