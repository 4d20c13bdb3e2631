"""Compatibility mode against the 17 shared vectors, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest

from ._vectors import Replay, canon, decode, load_vectors

VECTORS = load_vectors()


def test_all_seventeen_vectors_are_present() -> None:
    names = [v["name"] for v in VECTORS]
    assert names == [f"V{i}" for i in range(1, 11)] + [f"X{i}" for i in range(1, 8)]


@pytest.fixture(params=VECTORS, ids=[v["name"] for v in VECTORS])
def replayed(request: pytest.FixtureRequest) -> Replay:
    replay = Replay(request.param)
    replay.run()  # checks every `returns` and `arg_after` as the calls run
    return replay


def test_totals(replayed: Replay) -> None:
    expected = replayed.vector["expected"]
    assert canon(replayed.root.get_session()["totals"]) == canon(decode(expected["totals"]))


def test_paths(replayed: Replay) -> None:
    expected: dict[str, str] = replayed.vector["expected"]["paths"]
    assert list(expected) == replayed.op_ids
    assert {op: replayed.root.get_op_path(op) for op in replayed.op_ids} == expected


def test_ascii_byte_for_byte(replayed: Replay) -> None:
    expected: str = replayed.vector["expected"]["ascii"]
    got = replayed.root.render_ascii()
    assert got == expected
    assert not got.endswith("\n")


def test_flatten_order(replayed: Replay) -> None:
    expected = decode(replayed.vector["expected"]["flatten"])
    got = replayed.root.flatten()
    assert canon(got) == canon(expected)


def test_warnings_verbatim(replayed: Replay) -> None:
    assert replayed.warnings == replayed.vector["expected"]["warnings"]


def test_whole_session_node(replayed: Replay) -> None:
    expected: dict[str, Any] = decode(replayed.vector["expected"]["session"])
    assert canon(replayed.root.get_session()) == canon(expected)


# --- the same calls in the default mode, where they are valid there -----------------------------

DEFAULT_VALID = ["V1", "V2", "V3", "V4", "X4"]


class _DefaultAdapter:
    """Default-mode builder behind the reference's call names (for vectors valid in both)."""

    def __init__(self, meta: Any, replay: Replay) -> None:
        from sessiontree.optree import NO_PRICES, OpTreeBuilder
        from sessiontree.optree._jsformat import UNDEFINED

        self.builder = OpTreeBuilder(None if meta is UNDEFINED else meta, clock=replay.now,
                                     ids=replay.next_id, prices=NO_PRICES)

    def get_session(self) -> Any:
        return self  # attach_child_session receives the adapter of the child

    def __getattr__(self, name: str) -> Any:
        from sessiontree.optree._jsformat import UNDEFINED

        method = getattr(self.builder, name)

        def call(*args: Any) -> Any:
            args = tuple(None if a is UNDEFINED else (a.builder if isinstance(a, _DefaultAdapter)
                                                      else a) for a in args)
            if name in ("get_op_path", "render_ascii", "flatten"):
                return None  # compared after the replay
            return method(*args)

        return call


@pytest.mark.parametrize("vector", [v for v in VECTORS if v["name"] in DEFAULT_VALID],
                         ids=DEFAULT_VALID)
def test_default_mode_renders_the_reference_layout(vector: dict[str, Any]) -> None:
    from sessiontree.optree import compat_totals, to_reference_node

    replay = Replay(vector)
    replay.factory = lambda meta: _DefaultAdapter(meta, replay)
    for call in vector["calls"]:
        if call["method"] == "getTotals":
            continue
        call = {k: v for k, v in call.items() if k not in ("returns", "arg_after")}
        replay.step(call)
    builder = replay.root.builder
    expected = vector["expected"]
    assert builder.render_ascii(style="compat") == expected["ascii"]
    node = to_reference_node(builder.tree, builder.run)
    assert canon(compat_totals(node)) == canon(decode(expected["totals"]))
    assert {op: builder.get_op_path(op) for op in replay.op_ids} == expected["paths"]
    flat = builder.flatten()
    from sessiontree.optree.render import _log_reference

    assert [_log_reference(log) for log in flat.logs] == decode(expected["flatten"]["logs"])
    assert [a.timestamp for a in flat.accounting] == \
        [a["timestamp"] for a in expected["flatten"]["accounting"]]
    assert builder.check_totals() == []


def test_compat_callbacks_on_updates() -> None:
    from sessiontree.optree import CompatTreeBuilder

    seen: list[tuple[str, Any]] = []
    b = CompatTreeBuilder({"agentId": "a"}, clock=lambda: 1, ids=iter(["s", "t", "o"]).__next__)
    unsubscribe = b.subscribe(lambda e: seen.append((e.custom_type, e.data.get("opId"))))
    b.begin_turn(1)
    op = b.begin_op(1, "llm")
    b.set_latest_status("working")
    unsubscribe()
    b.end_op(op, "ok")
    assert seen == [("sessiontree.op.turn.begin", None), ("sessiontree.op.begin", "o"),
                    ("sessiontree.op.run.meta", None)]
    assert b.get_session()["latestStatus"] == "working"


# --- ai-agent snapshots imported into the default mode ---------------------------------------------


@pytest.mark.parametrize("vector", [v for v in VECTORS if v["name"] in DEFAULT_VALID],
                         ids=DEFAULT_VALID)
def test_reference_snapshot_import_renders_the_same(vector: dict[str, Any]) -> None:
    from sessiontree.optree import render_ascii
    from sessiontree.optree.interop import optree_from_reference

    node = decode(vector["expected"]["session"])
    tree = optree_from_reference({"version": 1, "opTree": node})
    assert tree.problems == []
    assert render_ascii(tree, style="compat") == vector["expected"]["ascii"]
    assert {op: tree.ops[op].path for op in vector["expected"]["paths"]} == \
        vector["expected"]["paths"]


def test_reference_snapshot_quirks_become_problems() -> None:
    from sessiontree.optree.interop import optree_from_reference

    by_name = {v["name"]: v for v in VECTORS}
    v8 = optree_from_reference(decode(by_name["V8"]["expected"]["session"]))  # repeated Turn#1
    assert [p.reason for p in v8.problems] == [
        "run 'id1' has a turn 1 already; turn indexes are unique",
        "run 'id1' has no turn 'id5'", "run 'id1' has no turn 'id5'"]
    v7 = optree_from_reference(decode(by_name["V7"]["expected"]["session"]))  # child on a tool op
    assert len(v7.roots()) == 2 and "session" in v7.problems[0].reason
    v5 = optree_from_reference(decode(by_name["V5"]["expected"]["session"]))
    assert v5.problems == [] and str(v5.runs["id1"].own.cost_usd) == "0.3"
    x7 = optree_from_reference(decode(by_name["X7"]["expected"]["session"]))  # attached twice
    assert "more than once" in x7.problems[0].reason
    assert x7.runs["id1"].rollup.agents_run == 2
