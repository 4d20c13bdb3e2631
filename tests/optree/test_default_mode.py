"""Default mode: each deliberate difference from the reference (REFERENCE.md D1–D16), side by
side with what the compatibility mode does for the same calls."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from sessiontree.optree import (
    Accounting,
    CompatTreeBuilder,
    CycleError,
    InvalidOpTree,
    Log,
    OpEnded,
    OpNotFound,
    OpTreeBuilder,
    RunEnded,
    TurnNotFound,
    Usage,
    create_builder,
    recompute,
)

from .conftest import B, Clock, Ids

Make = Callable[..., OpTreeBuilder]


def compat(clock: Clock, ids: Ids, meta: Any = None) -> CompatTreeBuilder:
    from msgspec import UNSET

    return CompatTreeBuilder(UNSET if meta is None else meta, clock=clock, ids=ids)


def first_op(c: CompatTreeBuilder, kind: str) -> str:
    """Begin turn 1 and an op in it (the reference's ``beginOp`` takes the turn index)."""
    c.begin_turn(1)
    return c.begin_op(1, kind)


# --- D1: clock and ids are injected -------------------------------------------------------------


def test_d1_injected_clock_and_ids(make: Make, clock: Clock) -> None:
    b = make({"agentId": "main"})
    assert b.run_id == "id1" and b.run.started_at == B
    clock.advance(7)
    turn = b.begin_turn()
    assert turn == "id2" and b.run.turns[0].started_at == B + 7


def test_d1_default_ids_are_uuid7() -> None:
    b = OpTreeBuilder()
    assert len(b.run_id) == 36 and b.run_id[14] == "7"


# --- D2: unknown ids raise ------------------------------------------------------------------------


def test_d2_unknown_op_raises_where_compat_ignores(make: Make, clock: Clock, ids: Ids) -> None:
    b = make()
    with pytest.raises(OpNotFound):
        b.end_op("nope")
    with pytest.raises(OpNotFound):
        b.append_log("nope", {"timestamp": 1})
    with pytest.raises(OpNotFound):
        b.append_accounting("nope", {"type": "llm", "timestamp": 1})
    c = compat(clock, ids)
    c.end_op("nope", "ok")  # the reference drops it silently
    assert c.get_op_path("nope") == ""


def test_d2_op_on_missing_turn_raises_where_compat_makes_an_orphan(make: Make, clock: Clock,
                                                                  ids: Ids) -> None:
    b = make()
    with pytest.raises(TurnNotFound):
        b.begin_op(5, "llm")
    c = compat(clock, ids)
    orphan = c.begin_op(5, "llm")
    assert c.get_op_path(orphan) == ""  # Q5: indexed but invisible


# --- D3: unique turn indexes ----------------------------------------------------------------------


def test_d3_duplicate_turn_index_raises(make: Make, clock: Clock, ids: Ids) -> None:
    b = make()
    b.begin_turn(1)
    with pytest.raises(InvalidOpTree, match="turn 1 already"):
        b.begin_turn(1)
    c = compat(clock, ids)
    c.begin_turn(1)
    c.begin_turn(1)  # Q6: a second Turn#1
    assert len(c.get_session()["turns"]) == 2


def test_d3_next_index_and_validation(make: Make) -> None:
    b = make()
    b.begin_turn(0, {"system": True})
    b.begin_turn()
    b.begin_turn()
    assert [t.index for t in b.run.turns] == [0, 1, 2]
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(InvalidOpTree):
            b.begin_turn(bad)  # type: ignore[arg-type]


def test_d3_turn_by_id_or_index(make: Make) -> None:
    b = make()
    t = b.begin_turn(4)
    first = b.begin_op(t, "llm")
    second = b.begin_op(4, "tool")
    assert (b.get_op_path(first), b.get_op_path(second)) == ("4-1", "4-2")


# --- D4: child links ----------------------------------------------------------------------------------


def test_d4_child_only_under_session_ops(make: Make, clock: Clock, ids: Ids) -> None:
    b = make()
    tool = b.begin_op(b.begin_turn(), "tool")
    child = make({"agentId": "x"})
    with pytest.raises(InvalidOpTree, match="session"):
        b.attach_child_session(tool, child)
    c = compat(clock, ids)
    ctool = first_op(c, "tool")
    c.attach_child_session(ctool, compat(clock, ids))  # Q4: rendered, never counted
    assert "child:" in c.render_ascii()


def test_d4_attach_once_and_no_cycles(make: Make) -> None:
    b = make()
    t = b.begin_turn()
    s1, s2 = b.begin_op(t, "session"), b.begin_op(t, "session")
    child = make()
    b.attach_child_session(s1, child)
    with pytest.raises(CycleError, match="already has a parent"):
        b.attach_child_session(s2, child.run_id)  # X7's double attachment
    with pytest.raises(CycleError):
        b.attach_child_session(s1, make())  # a second child on the same op
    inner = child.begin_op(child.begin_turn(), "session")
    with pytest.raises(CycleError, match="ancestor"):
        child.attach_child_session(inner, b.run_id)  # the root under its own grandchild
    assert recompute(b.tree)[b.run_id][1].agents_run == 2


# --- D5: totals from the start, own and rollup, never stale --------------------------------------


def test_d5_totals_present_from_the_start(make: Make, clock: Clock, ids: Ids) -> None:
    b = make()
    assert b.totals.agents_run == 1 and b.rollup.agents_run == 1
    assert b.totals.cost_usd == 0
    c = compat(clock, ids)
    assert "totals" not in c.get_session()  # Q11


def test_d5_own_and_rollup_at_three_levels(make: Make) -> None:
    root = make({"agentId": "root"})
    t = root.begin_turn()
    llm = root.begin_op(t, "llm")
    root.account_llm(llm, Usage(input=100, output=10), cost_usd="0.01")
    sess = root.begin_op(t, "session")
    child = root.spawn_child(sess, {"agentId": "child"})
    ct = child.begin_turn()
    child.account_llm(child.begin_op(ct, "llm"), Usage(input=50, output=5, cache_read=7),
                      cost_usd="0.02")
    grand = child.spawn_child(child.begin_op(ct, "session"), agent_id="grand")
    gop = grand.begin_op(grand.begin_turn(), "tool")
    grand.append_accounting(gop, Accounting(timestamp=B, kind="llm", usage=Usage(input=1, output=1),
                                            cost_usd=Decimal("0.005"), cost_source="provider"))
    assert (grand.totals.tokens_in, grand.rollup.agents_run) == (1, 1)
    assert (child.totals.tokens_in, child.totals.cost_usd) == (50, Decimal("0.02"))
    assert (child.rollup.tokens_in, child.rollup.cost_usd, child.rollup.agents_run) == (
        51, Decimal("0.025"), 2)
    assert (root.totals.tokens_in, root.totals.tools_run, root.totals.agents_run) == (100, 0, 1)
    assert (root.rollup.tokens_in, root.rollup.cache_read, root.rollup.tools_run,
            root.rollup.agents_run, root.rollup.cost_usd) == (151, 7, 1, 3, Decimal("0.035"))
    assert root.check_totals() == []


def test_d5_parent_never_stale_where_compat_warns(make: Make, clock: Clock, ids: Ids) -> None:
    # V10's shape: the child changes after it was attached.
    p = make({"agentId": "p"})
    t = p.begin_turn()
    sess = p.begin_op(t, "session")
    c = make({"agentId": "c"})
    cop = c.begin_op(c.begin_turn(), "llm")
    p.attach_child_session(sess, c)
    c.append_accounting(cop, {"type": "llm", "timestamp": 2,
                              "tokens": {"inputTokens": 11, "outputTokens": 1}, "costUsd": 0.5})
    assert p.rollup.tokens_in == 11 and p.rollup.cost_usd == Decimal("0.5")
    assert p.end_session() == []
    cp = compat(clock, ids, {"agentId": "p"})
    csess = first_op(cp, "session")
    cc = compat(clock, ids, {"agentId": "c"})
    ccop = first_op(cc, "llm")
    cp.attach_child_session(csess, cc)
    cc.append_accounting(ccop, {"type": "llm", "timestamp": 2,
                                "tokens": {"inputTokens": 11, "outputTokens": 1}})
    assert cp.get_session()["totals"]["tokensIn"] == 0  # Q15: stale
    cp.end_session(True)
    assert cp.warnings and "accounting mismatch" in cp.warnings[0]


# --- D6: exact decimal costs, every kind may carry usage and cost --------------------------------


def test_d6_decimal_cost_is_exact(make: Make, clock: Clock, ids: Ids) -> None:
    b = make()
    op = b.begin_op(b.begin_turn(), "llm")
    for cost in (0.1, 0.2, 0.125, -0.09375):
        b.append_accounting(op, {"type": "llm", "timestamp": 1, "costUsd": cost, "tokens": {}})
    assert b.totals.cost_usd == Decimal("0.33125")  # no float sum, no rounding
    c = compat(clock, ids)
    cop = first_op(c, "llm")
    for cost in (0.1, 0.2, 0.125, -0.09375):
        c.append_accounting(cop, {"type": "llm", "timestamp": 1, "costUsd": cost, "tokens": {}})
    assert c.get_session()["totals"]["costUsd"] == 0.3313  # float sum, then 4 decimals


def test_d6_unpriced_calls_are_counted(make: Make) -> None:
    b = make()
    op = b.begin_op(b.begin_turn(), "llm", {"provider": "p", "model": "unknown"})
    b.account_llm(op, Usage(input=5, output=1))
    b.account_llm(op, Usage(input=5, output=1), cost_usd=0.25)
    assert b.totals.unpriced_calls == 1 and b.totals.cost_usd == Decimal("0.25")
    assert [a.cost_source for a in b.run.turns[0].ops[0].accounting] == ["none", "provider"]


def test_d6_tool_entries_count_where_compat_ignores_them(make: Make, clock: Clock,
                                                         ids: Ids) -> None:
    entry = {"type": "tool", "timestamp": 1, "costUsd": 9, "tokens": {"inputTokens": 5}}
    b = make()
    b.append_accounting(b.begin_op(b.begin_turn(), "tool"), dict(entry))
    assert (b.totals.tokens_in, b.totals.cost_usd) == (5, Decimal(9))
    c = compat(clock, ids)
    c.append_accounting(first_op(c, "tool"), dict(entry))
    assert (c.get_session()["totals"]["tokensIn"], c.get_session()["totals"]["costUsd"]) == (0, 0)


def test_d6_non_finite_cost_is_refused(make: Make) -> None:
    b = make()
    op = b.begin_op(b.begin_turn(), "llm")
    with pytest.raises(InvalidOpTree, match="finite"):
        b.append_accounting(op, {"type": "llm", "timestamp": 1, "costUsd": float("nan")})
    assert b.totals.cost_usd == 0 and b.run.turns[0].ops[0].accounting == []


# --- D7: typed usage ----------------------------------------------------------------------------------


def test_d7_usage_is_validated(make: Make) -> None:
    with pytest.raises(InvalidOpTree):
        Usage(input=-1)
    with pytest.raises(InvalidOpTree):
        Usage.of(input="5")  # type: ignore[arg-type]  # Q24: the reference concatenates strings
    with pytest.raises(InvalidOpTree, match="smaller than its cached parts"):
        Usage.of(input=10, cache_read=20, convention="openai")
    b = make()
    op = b.begin_op(b.begin_turn(), "llm")
    with pytest.raises(InvalidOpTree):
        b.append_accounting(op, {"type": "llm", "timestamp": 1, "tokens": {"inputTokens": "5"}})


def test_d7_conventions_normalise_to_exclusive_buckets() -> None:
    anthropic = Usage.from_anthropic({"input_tokens": 1000, "cache_read_input_tokens": 300,
                                      "cache_creation_input_tokens": 50, "output_tokens": 200})
    openai = Usage.from_openai({"prompt_tokens": 1350, "completion_tokens": 200,
                                "prompt_tokens_details": {"cached_tokens": 300},
                                "completion_tokens_details": {"reasoning_tokens": 40}})
    gemini = Usage.from_gemini({"promptTokenCount": 1350, "cachedContentTokenCount": 300,
                                "candidatesTokenCount": 160, "thoughtsTokenCount": 40})
    assert (anthropic.input, anthropic.input_total, anthropic.convention) == (1000, 1350,
                                                                              "anthropic")
    assert (openai.input, openai.cache_read, openai.reasoning, openai.input_total) == (
        1050, 300, 40, 1350)
    assert (gemini.input, gemini.output, gemini.reasoning) == (1050, 200, 40)
    responses = Usage.from_openai({"input_tokens": 10, "output_tokens": 3,
                                   "input_tokens_details": {"cached_tokens": 4}})
    assert (responses.input, responses.cache_read) == (6, 4)


# --- D8: JSON Merge Patch -------------------------------------------------------------------------------


def test_d8_merge_patch_where_compat_merges_arrays(make: Make, clock: Clock, ids: Ids) -> None:
    first = {"kind": "llm", "payload": {"a": {"x": 1, "y": 2}, "keep": "k", "arr": [1, 2, 3],
                                        "s": "old"}, "size": 10}
    second = {"kind": "tool", "payload": {"a": {"y": 20, "z": 30}, "keep": None, "arr": [9],
                                          "s": {"now": "obj"}, "n": None}}
    b = make()
    op = b.begin_op(b.begin_turn(), "llm")
    b.set_request(op, first)
    stored = b.set_request(op, second)
    assert stored.payload == {"a": {"x": 1, "y": 20, "z": 30}, "arr": [9], "s": {"now": "obj"}}
    assert (stored.kind, stored.size) == ("tool", 10)
    c = compat(clock, ids)
    cop = first_op(c, "llm")
    c.set_request(cop, first)
    c.set_request(cop, second)
    merged = c._op(cop)["request"]["payload"]  # type: ignore[index]
    assert merged["arr"] == {"0": 9, "1": 2, "2": 3} and merged["keep"] == "k"  # Q7, Q8


def test_d8_payload_is_copied(make: Make) -> None:
    b = make()
    op = b.begin_op(b.begin_turn(), "tool")
    body = {"path": "."}
    b.set_request(op, {"kind": "tool", "payload": body})
    body["path"] = "changed"
    assert b.run.turns[0].ops[0].request.payload == {"path": "."}  # type: ignore[union-attr]


# --- D9 and D10: logs are copies with global paths ---------------------------------------------------


def test_d9_log_is_copied_not_written_into(make: Make, clock: Clock, ids: Ids) -> None:
    log = {"timestamp": 5, "message": "x", "turn": 1}
    b = make()
    stored = b.append_log(b.begin_op(b.begin_turn(), "llm"), log)
    assert log == {"timestamp": 5, "message": "x", "turn": 1}
    assert (stored.path, stored.fields) == ("1-1", {"turn": 1})
    c = compat(clock, ids)
    c.append_log(first_op(c, "llm"), log)
    assert log["path"] == "1-1"  # Q14


def test_d10_global_paths_once_linked(make: Make) -> None:
    p = make()
    t = p.begin_turn()
    p.begin_op(t, "llm")
    sess = p.begin_op(t, "session")
    c = make()
    cop = c.begin_op(c.begin_turn(), "llm")
    early = c.append_log(cop, {"timestamp": 10, "message": "before the link"})
    assert (early.path, c.get_op_path(cop)) == ("1-1", "1-1")
    p.attach_child_session(sess, c)
    late = c.append_log(cop, {"timestamp": 11, "message": "after"})
    op = p.tree.op(cop)
    assert (op.path, op.local_path) == ("1-2.1-1", "1-1")
    assert [log.path for log in op.logs] == ["1-2.1-1", "1-2.1-1"]  # re-labelled on link
    assert (late.path, late.local_path) == ("1-2.1-1", "1-1")
    assert [log.message for log in p.flatten().logs] == ["before the link", "after"]


# --- D11: rendering -------------------------------------------------------------------------------------


def test_d11_tree_rendering(make: Make, clock: Clock) -> None:
    root = make({"agentId": "root", "traceId": "T"})
    t = root.begin_turn(1, {"prompts": {"system": "", "user": "line one\nline two"}})
    llm = root.begin_op(t, "llm", {"provider": "p", "model": None, "name": "fallback"})
    root.set_request(llm, {"kind": "llm"})
    root.set_response(llm, {"payload": "😀" * 250})
    clock.advance(3)
    root.end_op(llm)
    sess = root.begin_op(t, "session", {"name": "agent__child"})
    child = root.spawn_child(sess, agent_id="child")
    grand = child.spawn_child(child.begin_op(child.begin_turn(), "session"), agent_id="grand")
    grand.begin_op(grand.begin_turn(), "tool", {"name": "deep"})
    text = root.render_ascii()
    lines = text.split("\n")
    assert lines[0] == "Run id1 agent=root trace=T"
    assert lines[2].startswith("├─ own    tokens in=0 ")  # one space after the connector
    assert "|  " not in text  # Q1
    assert "   │  user:   line one\\nline two" in lines  # escaped newline, │ continuation
    assert any(line.startswith("   ├─ LLM 1-1 op=id3 [p:fallback] ") for line in lines)
    assert "   │     request: <none>" in lines  # each preview on its own (Q9)
    response = next(line for line in lines if "response:" in line)
    assert response.endswith("😀" * 197 + "...")  # code points, not UTF-16 units (Q17)
    assert any("Run id8 agent=grand" in line for line in lines)  # every depth (Q3)
    assert any("TOOL 1-2.1-1.1-1 op=" in line and "[deep]" in line for line in lines)
    assert sum("rollup tokens" in line for line in lines) == 3  # totals per run
    assert not text.endswith("\n")


def test_d11_compat_style_keeps_reference_layout(make: Make) -> None:
    b = make({"agentId": "a"})
    b.begin_op(b.begin_turn(), "llm")
    text = b.render_ascii(style="compat")
    assert text.startswith("SessionTree id1 agent=a\n├─ started=2023-11-14T22:13:20.000Z |  tokens")


# --- D12: the end-of-run check compares every field -----------------------------------------------


def test_d12_check_compares_every_field_including_agents(make: Make,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    b = make()
    b.begin_op(b.begin_turn(), "llm")
    b.run.rollup.agents_run += 1  # corrupt one counter the reference never compares (Q12)
    warnings = b.end_session()
    assert warnings == [("run id1: incremental rollup totals differ from a full recompute in "
                         "agents_run")]
    assert b.warnings == warnings and "agents_run" in caplog.text


# --- D13: durations -------------------------------------------------------------------------------------


def test_d13_durations_from_a_monotonic_clock(clock: Clock, ids: Ids) -> None:
    mono = [100.0]
    b = OpTreeBuilder(clock=clock, ids=ids, monotonic=lambda: mono[0])
    op = b.begin_op(b.begin_turn(), "llm")
    clock.advance(-500)  # the wall clock went back
    mono[0] += 0.25
    b.end_op(op)
    node = b.tree.op(op)
    assert node.ended_at is not None and node.ended_at < node.started_at
    assert node.duration_ms == 250


def test_d13_durations_without_monotonic_clock_are_never_negative(make: Make,
                                                                  clock: Clock) -> None:
    b = make()
    op = b.begin_op(b.begin_turn(), "llm")
    clock.advance(-5)
    b.end_op(op)
    assert b.tree.op(op).duration_ms == 0


# --- D14: ending ------------------------------------------------------------------------------------------


def test_d14_ending_twice_raises_and_error_is_exact(make: Make, clock: Clock, ids: Ids) -> None:
    b = make()
    b.end_session(False, "first error")
    with pytest.raises(RunEnded):
        b.end_session(True, "")
    with pytest.raises(RunEnded):
        b.begin_turn()
    assert (b.run.success, b.run.error) == (False, "first error")
    other = make()
    other.end_session(True, "")
    assert other.run.error == ""
    c = compat(clock, ids)
    c.end_session(False, "first error")
    c.end_session(True, "")  # Q21: allowed, error never cleared
    assert (c.get_session()["success"], c.get_session()["error"]) == (True, "first error")


def test_op_ends_once(make: Make) -> None:
    b = make()
    op = b.begin_op(b.begin_turn(), "session")
    b.end_op(op, "ok", {"a": 1})
    with pytest.raises(OpEnded):
        b.end_op(op, "failed", {"b": 2})
    assert (b.tree.op(op).status, b.tree.op(op).attributes) == ("ok", {"a": 1})


# --- D15: kinds and timestamps ------------------------------------------------------------------------


def test_d15_kind_and_timestamps_validated(make: Make) -> None:
    b = make()
    t = b.begin_turn()
    for bad in ("LLM", "", 42, "myorg."):
        with pytest.raises(InvalidOpTree):
            b.begin_op(t, bad)  # type: ignore[arg-type]
    custom = b.begin_op(t, "myorg.retrieval")
    assert b.tree.op(custom).kind == "myorg.retrieval"
    with pytest.raises(InvalidOpTree, match="timestamp"):
        b.append_log(custom, {"message": "no time"})
    with pytest.raises(InvalidOpTree, match="timestamp"):
        Log(timestamp="now")  # type: ignore[arg-type]


# --- D16 and other behaviour -------------------------------------------------------------------------


def test_d16_paths_are_stored_not_searched(make: Make) -> None:
    b = make()
    t = b.begin_turn()
    ops = [b.begin_op(t, "tool") for _ in range(3)]
    assert [b.tree.op(o).path for o in ops] == ["1-1", "1-2", "1-3"]
    assert [b.tree.op(o).seq for o in ops] == [1, 2, 3]


def test_reasoning_title_status_and_attributes(make: Make, clock: Clock) -> None:
    b = make({"traceId": "tr-x", "sessionTitle": "initial", "attributes": {"team": "blue"}})
    b.set_session_title("renamed")
    b.set_latest_status("working")
    t = b.begin_turn(1, {"keep": 1, "over": "old"})
    op = b.begin_op(t, "llm")
    b.set_reasoning_final(op, "F0")
    clock.advance(7)
    b.append_reasoning_chunk(op, "a")
    b.append_reasoning_chunk(op, "b")
    b.set_reasoning_final(op, "F1")
    b.end_turn(1, {"over": "new", "added": True})
    run = b.run
    assert (run.title, run.latest_status, run.attributes) == ("renamed", "working",
                                                              {"team": "blue"})
    assert run.turns[0].attributes == {"keep": 1, "over": "new", "added": True}
    reasoning = b.tree.op(op).reasoning
    assert reasoning is not None and reasoning.final == "F1"
    assert [(c.text, c.ts) for c in reasoning.chunks] == [("a", B + 7), ("b", B + 7)]


def test_flatten_is_stable_by_time(make: Make) -> None:
    p = make()
    t = p.begin_turn()
    first = p.begin_op(t, "llm")
    sess = p.begin_op(t, "session")
    c = p.spawn_child(sess)
    cop = c.begin_op(c.begin_turn(), "llm")
    p.append_log(first, {"timestamp": 30, "message": "p-30"})
    p.append_log(first, {"timestamp": 10, "message": "p-10"})
    c.append_log(cop, {"timestamp": 10, "message": "c-10"})
    c.append_log(cop, {"timestamp": 5, "message": "c-5"})
    p.append_log(sess, {"timestamp": 10, "message": "ps-10"})
    assert [log.message for log in p.flatten().logs] == ["c-5", "p-10", "ps-10", "c-10", "p-30"]


def test_create_builder_modes() -> None:
    assert isinstance(create_builder(mode="compat"), CompatTreeBuilder)
    assert isinstance(create_builder({"agentId": "x"}), OpTreeBuilder)
    with pytest.raises(InvalidOpTree):
        create_builder(mode="other")  # type: ignore[call-overload]


def test_callbacks_receive_every_event(make: Make) -> None:
    seen: list[str] = []
    b = make(on_update=lambda e: seen.append(e.custom_type))
    t = b.begin_turn()
    unsubscribe = b.subscribe(lambda e: seen.append("second:" + e.custom_type))
    op = b.begin_op(t, "llm")
    unsubscribe()
    b.end_op(op)
    b.set_latest_status("done")
    assert seen == ["sessiontree.op.run.begin", "sessiontree.op.turn.begin",
                    "sessiontree.op.begin",
                    "second:sessiontree.op.begin", "sessiontree.op.end",
                    "sessiontree.op.run.meta"]


def test_builder_only_touches_its_own_run(make: Make) -> None:
    p = make()
    sess = p.begin_op(p.begin_turn(), "session")
    c = p.spawn_child(sess)
    cop = c.begin_op(c.begin_turn(), "llm")
    with pytest.raises(InvalidOpTree, match="belongs to run"):
        p.end_op(cop)


def test_reference_snapshot_shape(make: Make) -> None:
    b = make({"agentId": "a"})
    op = b.begin_op(b.begin_turn(), "llm", {"provider": "p", "model": "m"})
    b.append_accounting(op, {"type": "llm", "timestamp": 1, "costUsd": 0.01,
                             "tokens": {"inputTokens": 3, "outputTokens": 1}})
    snap = b.to_reference_snapshot()
    node = snap["opTree"]
    assert snap["version"] == 1 and node["id"] == "id1" and node["agentId"] == "a"
    entry = node["turns"][0]["ops"][0]["accounting"][0]
    assert entry["costUsd"] == 0.01 and entry["tokens"]["inputTokens"] == 3
    assert node["totals"]["tokensIn"] == 3
