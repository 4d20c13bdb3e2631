"""Operation-tree totals: incremental O(depth) updates beside recompute-everything, one run.

    .venv/bin/python benchmarks/bench_optree.py [--ops 100000] [--baseline-ops 1000,2000]

Workload: a root run with three levels of sub-agent runs below it (fan-out 10 at 100,000 ops:
1 + 10 + 100 + 1,000 runs), every run with its share of the ops; two thirds of the non-session
ops are ``llm`` ops with one accounting record each (usage and a provider cost), the rest
``tool`` ops. Every op is begun and ended.

* **ours**: ``OpTreeBuilder`` (default mode). Each event updates ``own`` of its run and
  ``rollup`` of the run and each ancestor: O(depth). The root's totals are exact after
  every event.
* **baseline**: the same builder calls, then after every event that changes totals (op begin,
  accounting, op end, child link) a full recompute of every run's totals from the root
  (``recompute(tree)``, the pure function the property tests compare against) — what keeping
  the root's totals exact costs when nothing is incremental (the reference recomputes its
  builder's whole subtree on every mutation).

The baseline is quadratic, so it runs in full only at the ``--baseline-ops`` sizes; at the
large size the table gives one measured full recompute of the final tree beside one measured
incremental update, and the baseline's total estimated from that measurement. Both sides check
their totals against a recompute at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sessiontree.optree import NO_PRICES, Accounting, OpTreeBuilder, Usage, recompute
from sessiontree.optree._totals import diff_totals

LEVELS = 3


def fanout_for(ops: int) -> int:
    return max(2, round((ops / 100) ** (1 / 3)))


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        self.now += 1
        return self.now


def build(total_ops: int, after_event: Callable[[OpTreeBuilder], None] | None) -> tuple[
        OpTreeBuilder, int, int]:
    """Build the workload; ``after_event`` runs after every totals-changing call.

    Returns:
        The root builder, the number of ops and the number of totals-changing events.
    """
    fanout = fanout_for(total_ops)
    runs = sum(fanout ** level for level in range(LEVELS + 1))
    session_ops = runs - 1
    plain = total_ops - session_ops
    per_run, extra = divmod(plain, runs)
    clock = Clock()
    counter = [0]

    def next_id() -> str:
        counter[0] += 1
        return f"x{counter[0]}"

    root = OpTreeBuilder({"agentId": "root"}, clock=clock, ids=next_id, prices=NO_PRICES,
                         monotonic=None)
    usage = Usage(input=900, cache_read=300, cache_write=20, output=150, reasoning=30)
    cost = Decimal("0.0041")
    counts = {"ops": 0, "events": 0, "run": 0}

    def tick(builder: OpTreeBuilder) -> None:
        counts["events"] += 1
        if after_event is not None:
            after_event(builder)

    def run(builder: OpTreeBuilder, level: int) -> None:
        index = counts["run"]
        counts["run"] += 1
        mine = per_run + (1 if index < extra else 0)
        children = fanout if level < LEVELS else 0
        turn = builder.begin_turn()
        every = max(1, mine // (children + 1))
        spawned = 0
        for i in range(mine):
            if spawned < children and i % every == every - 1:
                op = builder.begin_op(turn, "session", {"name": "agent__sub"})
                counts["ops"] += 1
                tick(builder)
                child = builder.spawn_child(op, {"agentId": f"L{level + 1}"})
                tick(builder)
                run(child, level + 1)
                builder.end_op(op)
                tick(builder)
                spawned += 1
            kind = "llm" if i % 3 else "tool"
            op = builder.begin_op(turn, kind, {"provider": "anthropic", "model": "m"})
            counts["ops"] += 1
            tick(builder)
            if kind == "llm":
                builder.append_accounting(op, Accounting(
                    timestamp=clock.now, usage=usage, cost_usd=cost, cost_source="provider"))
                tick(builder)
            builder.end_op(op, "ok" if i % 50 else "failed")
            tick(builder)
        while spawned < children:  # runs with fewer ops than children
            op = builder.begin_op(turn, "session")
            counts["ops"] += 1
            tick(builder)
            child = builder.spawn_child(op)
            tick(builder)
            run(child, level + 1)
            builder.end_op(op)
            tick(builder)
            spawned += 1
        builder.end_turn(turn)

    run(root, 0)
    return root, counts["ops"], counts["events"]


def check(root: OpTreeBuilder) -> bool:
    full = recompute(root.tree)
    return all(not diff_totals(run.own, full[run.run_id][0])
               and not diff_totals(run.rollup, full[run.run_id][1])
               for run in root.tree.runs.values())


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def fmt_s(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} µs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--baseline-ops", default="1000,2000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.baseline_ops.split(",") if s]

    print(f"Python {sys.version.split()[0]}; workload: root + {LEVELS} levels of sub-agent runs")
    print()
    print("| ops | runs | events | ours: build, totals exact after every event "
          "| baseline: build + full recompute after every event | ratio | totals check "
          "| baseline estimated as below |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for size in sizes:
        ours_t = min(timed(lambda size=size: build(size, None)) for _ in range(args.repeat))
        root, ops, events = build(size, None)
        state: dict[str, OpTreeBuilder] = {}

        def baseline_hook(builder: OpTreeBuilder) -> None:
            recompute(builder.tree)

        base_t = timed(lambda state=state, size=size: state.setdefault(
            "root", build(size, baseline_hook)[0]))
        ok = check(root) and check(state["root"])
        final = root.tree
        one = statistics.median(timed(lambda final=final: recompute(final)) for _ in range(5))
        print(f"| {ops:,} | {len(root.tree.runs):,} | {events:,} | {fmt_s(ours_t)} | "
              f"{fmt_s(base_t)} | {base_t / ours_t:,.0f}× | {'equal' if ok else 'DIFFER'} | "
              f"{fmt_s(one * events / 2)} |")

    times = []
    root = None
    for _ in range(args.repeat):
        start = time.perf_counter()
        root, ops, events = build(args.ops, None)
        times.append(time.perf_counter() - start)
    assert root is not None
    ours_t = min(times)
    tree = root.tree
    recompute_t = statistics.median(timed(lambda: recompute(tree)) for _ in range(5))
    # the baseline's total: one recompute per event, over a tree growing linearly to `ops`
    # (the last column of the measured rows applies the same estimate where it can be checked)
    estimate = recompute_t * events / 2
    ok = check(root)
    print(f"| {ops:,} | {len(tree.runs):,} | {events:,} | {fmt_s(ours_t)} | "
          f"≈ {fmt_s(estimate)} (estimated: {events:,} × ½ × one measured recompute) | "
          f"≈ {estimate / ours_t:,.0f}× | {'equal' if ok else 'DIFFER'} | |")

    deepest = next(r for r in reversed(list(tree.runs.values())))
    depth = len(list(tree.ancestors(deepest)))
    op = next(iter(deepest.ops())).op_id
    # one update at the deepest level: own + rollup of the run and its ancestors
    from sessiontree.optree import _apply

    entry = Accounting(timestamp=1, usage=Usage(input=1, output=1), cost_usd=Decimal("0.001"),
                       cost_source="provider")
    n = 20_000
    deepest.ended_at = None  # the fixture's runs have ended; allow the extra updates
    start = time.perf_counter()
    for _ in range(n):
        _apply.append_accounting(tree, op, entry)
    update_t = (time.perf_counter() - start) / n
    ok = check(root)
    print()
    print(f"At {ops:,} ops, one accounting event at depth {depth} (updates {depth + 2} totals):")
    print()
    print("| measure | ours (incremental) | baseline (full recompute) | ratio |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| keep totals exact after one event | {fmt_s(update_t)} | {fmt_s(recompute_t)} | "
          f"{recompute_t / update_t:,.0f}× |")
    print(f"| totals still equal a full recompute after {n:,} more events | "
          f"{'yes' if ok else 'NO'} | | |")


if __name__ == "__main__":
    main()
