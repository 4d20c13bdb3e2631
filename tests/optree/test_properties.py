"""Property tests: incremental totals always equal a full recompute, a refused call changes
nothing, and folding the emitted events rebuilds the same tree."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.optree import (
    NO_PRICES,
    Accounting,
    OpEvent,
    OpTree,
    OpTreeBuilder,
    OpTreeError,
    Usage,
    recompute,
    run_to_builtins,
)
from sessiontree.optree._totals import diff_totals
from sessiontree.optree.persist import fold_events

from .conftest import Clock, Ids

KINDS = st.sampled_from(["llm", "tool", "session", "system", "myorg.step"])
COST = st.one_of(st.none(), st.decimals(min_value=0, max_value=10, places=7,
                                        allow_nan=False, allow_infinity=False))
OP = st.tuples(st.just("op"), st.integers(0, 99), st.integers(0, 99), KINDS)
ACC = st.tuples(st.just("acc"), st.integers(0, 999), st.integers(0, 5000), st.integers(0, 500),
                st.integers(0, 500), st.integers(0, 900), COST, st.sampled_from(["llm", "tool"]))
SPAWN = st.tuples(st.just("spawn"), st.integers(0, 999))
ACTIONS = st.one_of(
    OP, OP, ACC, ACC, ACC, SPAWN, SPAWN,
    st.tuples(st.just("turn"), st.integers(0, 99), st.booleans()),
    st.tuples(st.just("end"), st.integers(0, 999), st.sampled_from(["ok", "failed"])),
    st.tuples(st.just("root"),),
    st.tuples(st.just("attach"), st.integers(0, 999), st.integers(0, 99)),
    st.tuples(st.just("endrun"), st.integers(0, 99), st.integers(0, 4)),
    st.tuples(st.just("log"), st.integers(0, 999), st.integers(0, 10**6)),
)


class World:
    """Builders driven by a script, every event recorded in order."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.ids = Ids()
        self.events: list[OpEvent] = []
        self.builders: list[OpTreeBuilder] = []
        self.ops: list[tuple[OpTreeBuilder, str]] = []
        root = self.new_root()
        root.begin_turn()
        self.ops.append((root, root.begin_op(1, "session")))

    def new_root(self) -> OpTreeBuilder:
        builder = OpTreeBuilder({"agentId": f"a{len(self.builders)}"}, clock=self.clock,
                                ids=self.ids, prices=NO_PRICES, on_update=self.events.append)
        self.builders.append(builder)
        return builder

    def trees(self) -> list[OpTree]:
        unique: dict[int, OpTree] = {}
        for builder in self.builders:
            unique[id(builder.tree)] = builder.tree
        return list(unique.values())

    def snapshot(self) -> list[Any]:
        return [[run_to_builtins(tree, run) for run in tree.runs.values()] for tree in self.trees()]

    def step(self, action: tuple[Any, ...]) -> None:
        self.clock.advance(1)
        name = action[0]
        if name == "turn":
            builder = self.builders[action[1] % len(self.builders)]
            builder.begin_turn(None if action[2] else action[1] % 4)
        elif name == "op":
            builder = self.builders[action[1] % len(self.builders)]
            if not builder.run.turns:
                builder.begin_turn()
            turns = builder.run.turns
            index = turns[action[2] % len(turns)].index
            self.ops.append((builder, builder.begin_op(index, action[3], {"model": "m"})))
        elif name in ("acc", "end", "spawn", "attach", "log"):
            candidates = self.ops
            if name in ("spawn", "attach"):  # mostly valid targets: session ops without a child
                free = [(b, o) for b, o in self.ops
                        if b.tree.op(o).kind == "session" and b.tree.op(o).child is None]
                candidates = free or self.ops
            builder, op_id = candidates[action[1] % len(candidates)]
            if name == "acc":
                _, _, uncached, read, write, out, cost, kind = action
                builder.append_accounting(op_id, Accounting(
                    timestamp=self.clock.now, kind=kind,
                    usage=Usage(input=uncached, cache_read=read, cache_write=write, output=out,
                                reasoning=out // 3),
                    cost_usd=cost, cost_source="provider" if cost is not None else "none"))
            elif name == "end":
                builder.end_op(op_id, action[2])
            elif name == "spawn":
                child = builder.spawn_child(op_id, {"agentId": "spawned"})
                self.builders.append(child)
                child.begin_turn()
                self.ops.append((child, child.begin_op(1, "session")))
            elif name == "log":
                builder.append_log(op_id, {"timestamp": action[2], "message": "m"})
            else:
                roots = [b for b in self.builders if b.run.parent is None]
                child = roots[action[2] % len(roots)]
                builder.attach_child_session(op_id, child)
        elif name == "root":
            root = self.new_root()
            root.begin_turn()
            self.ops.append((root, root.begin_op(1, "session")))
        elif name == "endrun" and action[2] == 0:
            self.builders[action[1] % len(self.builders)].end_session(True)

    def check_totals(self) -> None:
        for tree in self.trees():
            full = recompute(tree)
            for run in tree.runs.values():
                own, rollup = full[run.run_id]
                assert diff_totals(run.own, own) == [], (run.run_id, "own")
                assert diff_totals(run.rollup, rollup) == [], (run.run_id, "rollup")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ACTIONS, min_size=5, max_size=80))
def test_incremental_totals_equal_a_full_recompute(script: list[tuple[Any, ...]]) -> None:
    world = World()
    for action in script:
        before = world.snapshot()
        try:
            world.step(action)
        except OpTreeError:
            assert world.snapshot() == before  # a refused call changes nothing
        world.check_totals()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ACTIONS, min_size=5, max_size=80))
def test_folding_the_events_rebuilds_the_tree(script: list[tuple[Any, ...]]) -> None:
    world = World()
    for action in script:
        try:
            world.step(action)
        except OpTreeError:
            pass
    folded = fold_events(world.events, mark_open=False)
    assert folded.problems == []
    live = {run_id: (tree, run) for tree in world.trees() for run_id, run in tree.runs.items()}
    assert set(folded.runs) == set(live)
    for run_id, run in folded.runs.items():
        tree, original = live[run_id]
        assert run_to_builtins(folded, run) == run_to_builtins(tree, original)


def test_deep_chain_totals_roll_up_every_level() -> None:
    clock, ids = Clock(), Ids()
    root = OpTreeBuilder(clock=clock, ids=ids, prices=NO_PRICES)
    builders = [root]
    for _ in range(50):
        parent = builders[-1]
        op = parent.begin_op(parent.begin_turn(), "session")
        builders.append(parent.spawn_child(op))
    leaf = builders[-1]
    op = leaf.begin_op(leaf.begin_turn(), "llm")
    leaf.append_accounting(op, Accounting(timestamp=1, usage=Usage(input=3, output=1),
                                          cost_usd=Decimal("0.001"), cost_source="provider"))
    assert root.rollup.tokens_in == 3 and root.rollup.agents_run == 51
    assert root.totals.tokens_in == 0
    assert root.tree.op(op).path.count(".") == 50
    assert root.check_totals() == []
