"""sessiontree beside pi 0.73.1 on the same generated sessions, in one run; then the operation
tree and HTML export benchmarks, each beside its own baseline.

    .venv/bin/python benchmarks/run.py [--suites core,optree,html] [--sizes 1k,10k,100k]
                                       [--repeat 5] [--markdown FILE]

The ``core`` suite:

1. Generates the benchmark files with the repository's seeded generator
   (``sessiontree.testing.generate``) into benchmarks/.data/ (git-ignored; a file is reused while
   the generator's source and arguments are unchanged: both are in its name).
2. Installs pi from npm into the cache folder if needed (sessiontree.testing.pi, shared with the
   tests) and runs ``node --expose-gc benchmarks/pi_bench.mjs FILE --pi NODE_MODULES`` per file.
3. Measures sessiontree on the same file in a fresh Python process per file (so the peak RSS is
   per file, like pi's): open, build_context, tree, the path to the deepest leaf, 1,000 appends
   to a scratch copy (no fsync), peak RSS and RSS growth.
4. Prints one table: every figure beside pi's with the ratio, a check column (our digests equal
   pi's digests from this run; the appends persisted) and the three targets on the 100k file.

Exit status 1 when a digest differs (the timings would then compare different work).

The ``optree`` suite is ``benchmarks/bench_optree.py`` (incremental totals against a full
recompute after every event) and ``html`` is ``benchmarks/bench_html.py`` (time to interactive
of exported pages in headless Chromium); each prints its own table.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / ".data"
GENERATOR = REPO / "src" / "sessiontree" / "testing" / "generate.py"

# generate_session() arguments of each benchmark file
SIZES: dict[str, dict[str, int]] = {
    "1k": {"entries": 1000, "branch_every": 100, "compact_every": 300, "seed": 1},
    "10k": {"entries": 10000, "branch_every": 200, "compact_every": 1000, "seed": 2},
    "100k": {"entries": 100000, "branch_every": 400, "compact_every": 2500, "seed": 3},
}
APPENDS = 1000
TARGET_SIZE = "100k"
TARGET_SPEED = 5.0       # open + build_context at least 5x faster than pi
TARGET_MEMORY = 0.25     # peak RSS at most a quarter of pi's
TARGET_APPEND_US = 50.0  # median append under 50 microseconds


# -- files -----------------------------------------------------------------------------------------

def generate(size: str) -> Path:
    """The benchmark file of ``size``, generated unless this generator already made it."""
    from sessiontree.testing.generate import generate_session

    arguments = SIZES[size]
    key = hashlib.sha256(GENERATOR.read_bytes() + json.dumps(arguments).encode()).hexdigest()[:12]
    path = DATA / f"pi-{size}-{key}.jsonl"
    if path.exists():
        return path
    DATA.mkdir(exist_ok=True)
    for stale in DATA.glob(f"pi-{size}-*.jsonl"):
        stale.unlink()
    print(f"generating {path.name} …", file=sys.stderr, flush=True)
    scratch = path.with_suffix(".partial")
    scratch.unlink(missing_ok=True)
    generate_session(scratch, **arguments)
    scratch.rename(path)
    return path


# -- our side (runs in a fresh process per file) ----------------------------------------------------

def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB elsewhere


def measure(source: str, repeat: int) -> dict[str, Any]:
    """Our figures for one file."""
    from sessiontree import Session, UserMessage
    from sessiontree.testing import branch_digest, context_digest, tree_digest

    def timed(func: Callable[[], Any]) -> tuple[dict[str, float], Any]:
        runs, result = [], None
        for _ in range(repeat):
            start = time.perf_counter()
            result = func()
            runs.append((time.perf_counter() - start) * 1000)
        return {"first": runs[0], "median": statistics.median(runs), "min": min(runs)}, result

    gc.collect()
    baseline = _rss_mib()
    out: dict[str, Any] = {"rss_baseline_mib": baseline, "peak_before_load_mib": _peak_mib()}
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / Path(source).name
        shutil.copyfile(source, copy)  # the append benchmark writes to the copy only

        start = time.perf_counter()
        session = Session.open(copy)
        out["load_ms"] = (time.perf_counter() - start) * 1000
        out["peak_after_load_mib"] = _peak_mib()
        out["entries"] = len(session)

        out["build_context_ms"], context = timed(session.build_context)
        out["typed_context_ms"], _ = timed(lambda: session.build_context().messages)
        builtins = context.to_builtins()
        out["context"] = {"digest": context_digest(builtins["messages"]), "messages": len(context)}
        out["peak_after_context_mib"] = _peak_mib()
        gc.collect()
        out["rss_after_load_mib"] = _rss_mib()

        out["tree_ms"], roots = timed(session.tree)
        out["tree_walk_ms"], nodes = timed(lambda: sum(1 for root in session.tree() for _ in root.walk()))
        depth = {node.id: d for root in roots for node, d in root.walk()}
        out["tree"] = {"digest": tree_digest(roots), "nodes": nodes, "roots": len(roots),
                       "max_depth": max(depth.values())}
        deepest = next(i for i in session.ids() if depth[i] == out["tree"]["max_depth"])  # first in file order

        out["path_ids_ms"], path_ids = timed(lambda: session.path_ids(deepest))
        out["path_ms"], path = timed(lambda: session.path(deepest))
        out["branch"] = {"digest": branch_digest(path_ids), "length": len(path_ids),
                         "typed_digest": branch_digest([e.id for e in path])}

        messages = [UserMessage.of(f"bench append #{i}: please continue with the next step of the "
                                   "refactor and run the tests.") for i in range(APPENDS)]
        before = len(session)
        each = []
        block = time.perf_counter()
        for message in messages:
            start_ns = time.perf_counter_ns()
            session.append_message(message)
            each.append((time.perf_counter_ns() - start_ns) / 1000)
        out["append_block_ms"] = (time.perf_counter() - block) * 1000
        session.close()
        out["append_median_us"] = statistics.median(each)
        out["append_mean_us"] = statistics.mean(each)
        out["append_p99_us"] = sorted(each)[int(len(each) * 0.99) - 1]
        with Session.open(copy) as reopened:
            out["append_persisted"] = len(reopened) == before + APPENDS
        out["peak_end_mib"] = _peak_mib()
    return out


# -- running both ----------------------------------------------------------------------------------

def run_pi(path: Path, modules: Path, repeat: int) -> dict[str, Any]:
    done = subprocess.run(
        ["node", "--expose-gc", str(HERE / "pi_bench.mjs"), str(path), "--pi", str(modules),
         "--repeat", str(repeat), "--appends", str(APPENDS)],
        capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pi-bench failed on {path}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def run_ours(path: Path, repeat: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"),
                                                                      os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, __file__, "--child", str(path), "--repeat", str(repeat)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the sessiontree measurement failed on {path}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
        with open("/proc/meminfo") as info:
            memory = f", {int(next(line for line in info if line.startswith('MemTotal')).split()[1]) / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration):
        memory = ""
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    return (f"{cpu}, {os.cpu_count()} CPUs{memory}, {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, Node {node.lstrip('v')}")


# -- the table -------------------------------------------------------------------------------------

def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:,.2f} {unit}" if unit else f"{value:,.2f}"


def _ratio(ours: float | None, pi: float | None) -> str:
    if ours is None or pi is None or ours <= 0:
        return "—"
    return f"{pi / ours:,.1f}×"


def _same(ours: str, pi: str, name: str) -> tuple[str, bool]:
    return (f"{name} digest = pi's", True) if ours == pi else (f"**{name} digest DIFFERS**", False)


def rows(size: str, ours: dict[str, Any], pi: dict[str, Any]) -> tuple[list[list[str]], bool, list[str]]:
    """The table rows for one file, whether every check passed, and the target lines."""
    ctx_ok = _same(ours["context"]["digest"], pi["context"]["digest"], "context")
    tree_ok = _same(ours["tree"]["digest"], pi["tree"]["digest"], "tree")
    path_ok = _same(ours["branch"]["digest"], pi["branch"]["digest"], "path")
    typed_ok = _same(ours["branch"]["typed_digest"], pi["branch"]["digest"], "path")
    open_ctx = ours["load_ms"] + ours["build_context_ms"]["first"]
    pi_open_ctx = pi["load_ms"] + pi["build_context_ms"]["first"]
    peak = ours["peak_after_context_mib"]
    pi_peak = pi["peak_rss_after_load_mib"]
    targets: list[str] = []
    speed_check = memory_check = append_check = ""
    if size == TARGET_SIZE:
        speed, memory, append = pi_open_ctx / open_ctx, peak / pi_peak, ours["append_median_us"]
        speed_check = f"target ≥ {TARGET_SPEED:g}× faster: {'**met**' if speed >= TARGET_SPEED else '**NOT met**'}"
        memory_check = (f"{memory:.2f} of pi's; target ≤ {TARGET_MEMORY:g}: "
                        f"{'**met**' if memory <= TARGET_MEMORY else '**NOT met**'}")
        append_check = f"target < {TARGET_APPEND_US:g} µs: {'**met**' if append < TARGET_APPEND_US else '**NOT met**'}"
        targets = [f"open + build_context {speed:.1f}× faster than pi ({speed_check.split(': ')[1]})",
                   f"peak RSS {memory:.2f} of pi's ({memory_check.split(': ')[1]})",
                   f"append median {append:.1f} µs ({append_check.split(': ')[1]})"]
    persisted = ours["append_persisted"] and pi["append_persisted"]
    label = f"{size}"
    table = [
        [label, "open", _fmt(ours["load_ms"], "ms"), _fmt(pi["load_ms"], "ms"),
         _ratio(ours["load_ms"], pi["load_ms"]), f"{ours['entries']:,} = {pi['entries']:,} entries"],
        [label, "build_context, first", _fmt(ours["build_context_ms"]["first"], "ms"),
         _fmt(pi["build_context_ms"]["first"], "ms"),
         _ratio(ours["build_context_ms"]["first"], pi["build_context_ms"]["first"]), ctx_ok[0]],
        [label, "build_context, median", _fmt(ours["build_context_ms"]["median"], "ms"),
         _fmt(pi["build_context_ms"]["median"], "ms"),
         _ratio(ours["build_context_ms"]["median"], pi["build_context_ms"]["median"]),
         f"{ours['context']['messages']:,} messages"],
        [label, "build_context + typed messages, median", _fmt(ours["typed_context_ms"]["median"], "ms"),
         _fmt(pi["build_context_ms"]["median"], "ms"),
         _ratio(ours["typed_context_ms"]["median"], pi["build_context_ms"]["median"]), ""],
        [label, "**open + build_context (first)**", _fmt(open_ctx, "ms"), _fmt(pi_open_ctx, "ms"),
         _ratio(open_ctx, pi_open_ctx), speed_check],
        [label, "tree, first", _fmt(ours["tree_ms"]["first"], "ms"), _fmt(pi["get_tree_ms"]["first"], "ms"),
         _ratio(ours["tree_ms"]["first"], pi["get_tree_ms"]["first"]), tree_ok[0]],
        [label, "tree, median", _fmt(ours["tree_ms"]["median"], "ms"), _fmt(pi["get_tree_ms"]["median"], "ms"),
         _ratio(ours["tree_ms"]["median"], pi["get_tree_ms"]["median"]), f"{ours['tree']['nodes']:,} nodes"],
        [label, "tree + walk of every node, median", _fmt(ours["tree_walk_ms"]["median"], "ms"), "—", "—", ""],
        [label, f"path to the deepest leaf ({ours['branch']['length']:,} entries), ids, median",
         _fmt(ours["path_ids_ms"]["median"], "ms"), _fmt(pi["get_branch_ms"]["median"], "ms"),
         _ratio(ours["path_ids_ms"]["median"], pi["get_branch_ms"]["median"]), path_ok[0]],
        [label, "path to the deepest leaf, typed entries, median", _fmt(ours["path_ms"]["median"], "ms"),
         _fmt(pi["get_branch_ms"]["median"], "ms"), _ratio(ours["path_ms"]["median"], pi["get_branch_ms"]["median"]),
         typed_ok[0]],
        [label, f"**append, median** of {APPENDS:,}", _fmt(ours["append_median_us"], "µs"), "—", "—", append_check],
        [label, f"append, mean of {APPENDS:,}", _fmt(ours["append_block_ms"] * 1000 / APPENDS, "µs"),
         _fmt(pi["append_per_entry_us"], "µs"), _ratio(ours["append_block_ms"], pi[f"append_{APPENDS}_ms"]),
         "persisted in both" if persisted else "**appends NOT persisted**"],
        [label, "**peak RSS** (ours after open + build_context, pi after open)", _fmt(peak, "MiB"),
         _fmt(pi_peak, "MiB"), _ratio(peak, pi_peak), memory_check],
        [label, "RSS growth from loading (after gc)",
         _fmt(ours["rss_after_load_mib"] - ours["rss_baseline_mib"], "MiB"),
         _fmt(pi["mem_after_load_delta"]["rss_mib"], "MiB"), "—", ""],
        [label, "peak RSS at the end of the run", _fmt(ours["peak_end_mib"], "MiB"), "—", "—", ""],
    ]
    ok = ctx_ok[1] and tree_ok[1] and path_ok[1] and typed_ok[1] and persisted
    return table, ok, targets


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--suites", default="core,optree,html",
                        help="comma-separated, of core (beside pi), optree, html")
    parser.add_argument("--sizes", default="1k,10k,100k", help="comma-separated, of 1k, 10k, 100k")
    parser.add_argument("--repeat", type=int, default=5, help="calls per timed operation (median, first)")
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.repeat)))
        return

    suites = {s.strip() for s in args.suites.split(",") if s.strip()}
    if suites - {"core", "optree", "html"}:
        parser.error(f"unknown suite {', '.join(sorted(suites - {'core', 'optree', 'html'}))}")
    all_ok = "core" not in suites or core(args, parser)
    for suite in ("optree", "html"):
        if suite in suites:
            print(f"\n## {suite}\n", flush=True)
            done = subprocess.run([sys.executable, str(HERE / f"bench_{suite}.py")])
            all_ok = all_ok and done.returncode == 0
    if not all_ok:
        sys.exit(1)


def core(args: argparse.Namespace, parser: argparse.ArgumentParser) -> bool:
    """The table beside pi; False when a digest differs."""
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size {', '.join(unknown)} (choose from {', '.join(SIZES)})")
    sys.path.insert(0, str(REPO / "src"))
    from sessiontree.testing.pi import PI_VERSION, PiUnavailable, ensure_pi

    try:
        modules = ensure_pi()
    except PiUnavailable as error:
        raise SystemExit(str(error)) from None

    load_before = os.getloadavg()[0]
    table: list[list[str]] = []
    targets: list[str] = []
    all_ok = True
    described = []
    for size in sizes:
        path = generate(size)
        print(f"{path.name}: pi …", file=sys.stderr, flush=True)
        pi = run_pi(path, modules, args.repeat)
        print(f"{path.name}: sessiontree …", file=sys.stderr, flush=True)
        ours = run_ours(path, args.repeat)
        lines, ok, file_targets = rows(size, ours, pi)
        table += lines
        targets += file_targets
        all_ok = all_ok and ok
        described.append(f"pi-{size}.jsonl ({pi['entries']:,} entries, {pi['file_bytes'] / 2**20:,.1f} MiB)")

    load_after = os.getloadavg()[0]
    report = [
        f"sessiontree vs pi {PI_VERSION} — {time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"machine: {machine()}; load average {load_before:.2f} before, {load_after:.2f} after",
        f"files: {', '.join(described)}; repeat {args.repeat}",
        "",
        f"| file | measure | sessiontree | pi {PI_VERSION} | pi ÷ sessiontree | check |",
        "|---|---|---:|---:|---:|---|",
        *("| " + " | ".join(row) + " |" for row in table),
        "",
    ]
    if targets:
        report.append(f"Targets on pi-{TARGET_SIZE}.jsonl: " + "; ".join(targets) + ".")
    report.append("All digests equal pi's." if all_ok else "SOME CHECKS FAILED (see the check column).")
    text = "\n".join(report)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n", "utf-8")
    return all_ok


if __name__ == "__main__":
    main()
