"""sessiontree beside pi 0.73.1 on the same generated sessions, in one run.

    .venv/bin/python benchmarks/run.py [--sizes 1k,10k,100k] [--repeat 5]

Generates the benchmark files with ../shared/bench/gen_pi_session.py (checked against the
sha256 sums of ../shared/bench/README.md, cached in benchmarks/.data/), installs pi from npm if
needed, runs ../shared/bench/pi-bench.mjs and our own measurements (each in a fresh process, so
peak memory is per file), and prints every figure beside pi's with the ratio. The digests of
both are compared too: the numbers only count if both built the same context, tree and path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("SESSIONTREE_SHARED", HERE.parent.parent / "shared")).resolve()
DATA = HERE / ".data"

SIZES = {
    "1k": (["--entries", "1000", "--branch-every", "100", "--compact-every", "300", "--seed", "1"],
           "30f4a5cec2cd97e6ebc4180a6eeccfb70184e2900acc0338b1a11f4aa85f920a"),
    "10k": (["--entries", "10000", "--branch-every", "200", "--compact-every", "1000", "--seed", "2"],
            "a745243f6b9124405141e57d7a5fa0bcee437973b1629752721fb23f75c92b95"),
    "100k": (["--entries", "100000", "--branch-every", "400", "--compact-every", "2500", "--seed", "3"],
             "dc3d1558c3407bd367fe24e49cf20c6cf6575ba865ff8bb15f374fc17dfae65a"),
}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def generate(size: str) -> Path:
    args, expected = SIZES[size]
    path = DATA / f"pi-{size}.jsonl"
    if not (path.exists() and sha256(path) == expected):
        DATA.mkdir(exist_ok=True)
        subprocess.run([sys.executable, str(SHARED / "bench" / "gen_pi_session.py"), *args, str(path)],
                       check=True, capture_output=True)
        if sha256(path) != expected:
            raise SystemExit(f"{path}: the generator's output differs from bench/README.md")
    return path


def ms(seconds: float) -> float:
    return seconds * 1000


def measure(path: str, repeat: int) -> dict[str, Any]:
    """Our figures for one file; runs in a fresh process (see main)."""
    def rss_mib() -> float:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    from sessiontree import Session, UserMessage
    from sessiontree.testing import branch_digest, context_digest, tree_digest

    baseline = rss_mib()
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / Path(path).name
        shutil.copyfile(path, copy)
        start = time.perf_counter()
        session = Session.open(copy)
        load = time.perf_counter() - start

        def timed(func: Any) -> tuple[dict[str, float], Any]:
            runs, result = [], None
            for _ in range(repeat):
                t = time.perf_counter()
                result = func()
                runs.append(ms(time.perf_counter() - t))
            return {"first": runs[0], "median": statistics.median(runs)}, result

        context_ms, context = timed(session.build_context)
        typed_ms, _ = timed(lambda: session.build_context().messages)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        after_load = rss_mib()
        tree_ms, tree = timed(session.tree)
        walk_ms, _ = timed(lambda: sum(1 for root in session.tree() for _ in root.walk()))
        depth = {node.id: d for root in tree for node, d in root.walk()}
        greatest = max(depth.values())
        deepest = next(i for i in session.ids() if depth[i] == greatest)
        path_ids_ms, path_ids = timed(lambda: session.path_ids(deepest))
        path_ms, _ = timed(lambda: session.path(deepest))

        message = UserMessage.of("benchmark append " * 8)
        appends = []
        for _ in range(1000):
            t = time.perf_counter_ns()
            session.append_message(message)
            appends.append((time.perf_counter_ns() - t) / 1000)
        session.close()
    return {
        "load_ms": ms(load), "build_context_ms": context_ms, "typed_context_ms": typed_ms,
        "tree_ms": tree_ms,
        "tree_walk_ms": walk_ms, "path_ids_ms": path_ids_ms, "path_ms": path_ms,
        "append_median_us": statistics.median(appends), "append_mean_us": statistics.mean(appends),
        "peak_rss_mib": peak, "rss_delta_mib": after_load - baseline,
        "digests": {"context": context_digest(context.to_builtins()["messages"]),
                    "tree": tree_digest(tree), "branch": branch_digest(path_ids)},
        "path_length": len(path_ids),
    }


def run_pi(path: Path, modules: Path, repeat: int) -> dict[str, Any]:
    out = subprocess.run(
        ["node", "--expose-gc", str(SHARED / "bench" / "pi-bench.mjs"), str(path), "--pi", str(modules),
         "--entry", "index", "--repeat", str(repeat)],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def run_ours(path: Path, repeat: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", str(path), "--repeat", str(repeat)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def row(name: str, ours: float, pi: float | None, unit: str) -> str:
    if pi is None:
        return f"| {name} | {ours:,.2f} {unit} | — | — |"
    ratio = pi / ours if ours else float("inf")
    return f"| {name} | {ours:,.2f} {unit} | {pi:,.2f} {unit} | {ratio:,.1f}× |"


def report(size: str, ours: dict[str, Any], pi: dict[str, Any]) -> list[str]:
    same = (ours["digests"]["context"] == pi["context"]["digest"]
            and ours["digests"]["tree"] == pi["tree"]["digest"]
            and ours["digests"]["branch"] == pi["branch"]["digest"])
    open_ctx = ours["load_ms"] + ours["build_context_ms"]["first"]
    pi_open_ctx = pi["load_ms"] + pi["build_context_ms"]["first"]
    lines = [
        f"### pi-{size}.jsonl ({pi['entries']:,} entries, {pi['file_bytes'] / 2**20:,.1f} MiB) — "
        f"digests {'equal' if same else 'DIFFERENT'}",
        "",
        "| measure | sessiontree | pi 0.73.1 | pi ÷ sessiontree |",
        "|---|---|---|---|",
        row("open", ours["load_ms"], pi["load_ms"], "ms"),
        row("build_context (first)", ours["build_context_ms"]["first"], pi["build_context_ms"]["first"], "ms"),
        row("build_context (median)", ours["build_context_ms"]["median"], pi["build_context_ms"]["median"], "ms"),
        row("build_context + typed messages (median)", ours["typed_context_ms"]["median"],
            pi["build_context_ms"]["median"], "ms"),
        row("**open + build_context**", open_ctx, pi_open_ctx, "ms"),
        row("tree (first)", ours["tree_ms"]["first"], pi["get_tree_ms"]["first"], "ms"),
        row("tree (median)", ours["tree_ms"]["median"], pi["get_tree_ms"]["median"], "ms"),
        row("tree + full walk (median)", ours["tree_walk_ms"]["median"], None, "ms"),
        row(f"path to the deepest leaf, ids ({ours['path_length']:,})", ours["path_ids_ms"]["median"],
            pi["get_branch_ms"]["median"], "ms"),
        row("path to the deepest leaf, typed entries", ours["path_ms"]["median"],
            pi["get_branch_ms"]["median"], "ms"),
        row("append, median per entry", ours["append_median_us"], None, "µs"),
        row("append, mean per entry", ours["append_mean_us"], pi["append_per_entry_us"], "µs"),
        row("**peak RSS after load**", ours["peak_rss_mib"], pi["peak_rss_after_load_mib"], "MiB"),
        row("RSS growth from loading", ours["rss_delta_mib"], pi["mem_after_load_delta"]["rss_mib"], "MiB"),
        "",
    ]
    if size == "100k":
        speed = pi_open_ctx / open_ctx
        memory = ours["peak_rss_mib"] / pi["peak_rss_after_load_mib"]
        lines += [
            f"Targets on this file: open + build_context {speed:.1f}× faster than pi (target ≥ 5×: "
            f"{'met' if speed >= 5 else 'NOT met'}); peak memory {memory:.2f} of pi's (target ≤ 0.25: "
            f"{'met' if memory <= 0.25 else 'NOT met'}); append median {ours['append_median_us']:.1f} µs "
            f"(target < 50 µs: {'met' if ours['append_median_us'] < 50 else 'NOT met'}).",
            "",
        ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1k,10k,100k")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.repeat)))
        return

    sys.path.insert(0, str(HERE.parent / "src"))
    from sessiontree.testing.pi import ensure_pi

    modules = ensure_pi()
    print(f"python {sys.version.split()[0]}, node {subprocess.check_output(['node', '--version'], text=True).strip()}, "
          f"{os.cpu_count()} CPUs; repeat {args.repeat}\n")
    for size in args.sizes.split(","):
        path = generate(size)
        pi = run_pi(path, modules, args.repeat)
        ours = run_ours(path, args.repeat)
        print("\n".join(report(size, ours, pi)), flush=True)


if __name__ == "__main__":
    main()
