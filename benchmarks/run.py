"""sessiontree beside pi 0.73.1 on the same generated sessions, in one run; then the operation
tree and HTML export benchmarks, each beside its own baseline.

    .venv/bin/python benchmarks/run.py [--suites core,listing,optree,html,storage,async] [--sizes 1k,10k,100k]
                                       [--repeat 5] [--markdown FILE]

``--sizes 1k,10k,100k,1m`` adds the 1,000,000-entry session (about 1.6 GB, generated on demand
into benchmarks/.data/, never committed): open + first context and peak memory only, pi beside it
under a time limit and a memory limit so the machine survives.

The ``core`` suite:

1. Generates the benchmark files with the repository's seeded generator
   (``sessiontree.testing.generate``) into benchmarks/.data/ (git-ignored; a file is reused while
   the generator's source and arguments are unchanged: both are in its name).
2. Installs pi from npm into the cache folder if needed (sessiontree.testing.pi, shared with the
   tests) and runs ``node --expose-gc benchmarks/pi_bench.mjs FILE --pi NODE_MODULES`` per file.
3. Measures sessiontree on the same file in a fresh Python process per file (so the peak RSS is
   per file, like pi's): open, build_context, tree, the path to the deepest leaf, 1,000 appends
   to a scratch copy (no fsync), peak RSS and RSS growth.
4. Prints one table: every figure beside pi's with the ratio and whether it meets 1.0x, a check
   column (our digests equal pi's digests from this run; the appends persisted) and the targets.
   Rows include the agent loop (1,000 rounds of append + build_context on the 1k and 10k files,
   pi doing appendMessage + buildSessionContext) and the import time of both packages beside a
   bare ``python -c pass``.

The ``listing`` suite generates a folder of 1,000 sessions (``generate_folder``, 20-1,500
entries each) and times ``list_sessions()`` without and with its index, and ``sessiontree ls
--json``, beside pi's ``SessionManager.list`` on the same folder, with a digest of the rows.

Exit status 1 when a digest differs (the timings would then compare different work).

The ``optree`` suite is ``benchmarks/bench_optree.py`` (incremental totals against a full
recompute after every event) and ``html`` is ``benchmarks/bench_html.py`` (time to interactive
of exported pages in headless Chromium); each prints its own table. ``storage`` (only when
asked: it generates and loads about two million entries) is ``benchmarks/bench_storage.py``:
SQLite and PostgreSQL at scale beside JSONL and pi's JSONL, in one run. ``async`` (only when
asked: it needs ``SESSIONTREE_TEST_POSTGRES``) is ``benchmarks/bench_async.py``: AsyncSession over
AsyncPostgresStore beside a blocking PostgresStore session, in a thread and called directly.
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
    "1m": {"entries": 1_000_000, "branch_every": 400, "compact_every": 2500, "seed": 4},
}
LIGHT_SIZES = {"1m"}      # open + first context only
LOOP_SIZES = {"1k", "10k"}  # the agent loop rows
APPENDS = 1000
LOOP_ROUNDS = 1000
TARGET_SIZE = "100k"
TARGET_SPEED = 10.0      # open + build_context at least 10x faster than pi
TARGET_MEMORY = 0.25     # peak RSS at most a quarter of pi's
TARGET_APPEND_US = 50.0  # median append under 50 microseconds
TARGET_IMPORT_MS = 50.0  # from sessiontree import Session, beside python -c pass
TARGET_1M_OPEN_S = 3.0
TARGET_1M_PEAK_MIB = 400.0
PI_1M_TIMEOUT_S = 300
PI_1M_MEMORY_GIB = 10     # pi is stopped past this resident size (and its heap is capped at 8 GiB)
LISTING_SESSIONS = 1000


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


def _rss_of(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class RssSampler:
    """The largest sum of this process's and its children's resident sizes, sampled every
    5 ms (a large file is scanned with helper processes: their memory counts too)."""

    def __init__(self) -> None:
        import threading

        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        pid = os.getpid()
        while not self._stop.is_set():
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as listed:
                    children = [int(c) for c in listed.read().split()]
            except OSError:
                children = []
            self.peak = max(self.peak, _rss_of(pid) + sum(map(_rss_of, children)))
            self._stop.wait(0.005)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(source: str, repeat: int, light: bool = False, loop: int = 0) -> dict[str, Any]:
    """Our figures for one file (``light``: open and the first context only)."""
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

        with RssSampler() as sampler:
            start = time.perf_counter()
            session = Session.open(copy)
            out["load_ms"] = (time.perf_counter() - start) * 1000
            out["peak_after_load_mib"] = _peak_mib()
            out["entries"] = len(session)
            out["build_context_ms"], context = timed(session.build_context)
        out["peak_with_helpers_mib"] = sampler.peak
        helpers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        out["helper_peak_mib"] = helpers / 2**20 if sys.platform == "darwin" else helpers / 1024

        out["typed_context_ms"], _ = timed(lambda: session.build_context().messages)
        builtins = context.to_builtins()
        out["context"] = {"digest": context_digest(builtins["messages"]), "messages": len(context)}
        out["peak_after_context_mib"] = _peak_mib()
        if light:
            session.close()
            return out
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
        if loop:
            start = time.perf_counter()
            for i in range(loop):
                session.append_message(UserMessage.of(
                    f"agent loop turn #{i}: read the failing test and fix it."))
                last = session.build_context()
                last.messages  # typed, as pi's objects are
            out["loop_ms"] = (time.perf_counter() - start) * 1000
            out["loop_context"] = context_digest(last.to_builtins()["messages"])
        session.close()
        out["append_median_us"] = statistics.median(each)
        out["append_mean_us"] = statistics.mean(each)
        out["append_p99_us"] = sorted(each)[int(len(each) * 0.99) - 1]
        with Session.open(copy) as reopened:
            out["append_persisted"] = len(reopened) == before + APPENDS + loop
        out["peak_end_mib"] = _peak_mib()
    return out


# -- running both ----------------------------------------------------------------------------------

def _guarded(command: list[str], timeout: float, memory_gib: float) -> tuple[str, str, str | None]:
    """Run ``command``; stop it past ``timeout`` seconds or ``memory_gib`` GiB resident.
    Returns stdout, stderr and why it was stopped (``None`` if it ended by itself)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    start, stopped = time.monotonic(), None
    import threading

    def watch() -> None:
        nonlocal stopped
        while process.poll() is None:
            try:
                with open(f"/proc/{process.pid}/status") as status:
                    rss = next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
            except OSError:
                rss = 0
            if rss > memory_gib * 2**20:
                stopped = f"stopped at {rss / 2**20:.1f} GiB resident after {time.monotonic() - start:.0f} s"
                process.kill()
            elif time.monotonic() - start > timeout:
                stopped = f"stopped after {timeout:.0f} s (time limit)"
                process.kill()
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, err = process.communicate()
    watcher.join()
    return out, err, stopped


def run_pi(path: Path, modules: Path, repeat: int, size: str) -> dict[str, Any]:
    command = ["node", "--expose-gc", str(HERE / "pi_bench.mjs"), str(path), "--pi", str(modules),
               "--repeat", str(repeat), "--appends", str(APPENDS)]
    if size in LOOP_SIZES:
        command += ["--loop", str(LOOP_ROUNDS)]
    if size in LIGHT_SIZES:
        command = [command[0], "--max-old-space-size=8192", *command[1:], "--light", "--repeat", "1"]
        start = time.monotonic()
        out, err, stopped = _guarded(command, PI_1M_TIMEOUT_S, PI_1M_MEMORY_GIB)
        if stopped or not out.strip():
            lines = err.strip().splitlines() or ["no output"]
            why = next((line.strip() for line in lines if "Error" in line), lines[-1])[:160]
            return {"failed": stopped or f"failed after {time.monotonic() - start:.0f} s: {why}"}
        return json.loads(out)  # type: ignore[no-any-return]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pi-bench failed on {path}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"),
                                                                   os.environ.get("PYTHONPATH")]))}


def run_ours(path: Path, repeat: int, size: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", str(path), "--repeat", str(repeat)]
    if size in LIGHT_SIZES:
        command += ["--light", "--repeat", "1"]
    if size in LOOP_SIZES:
        command += ["--loop", str(LOOP_ROUNDS)]
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), check=False)
    if done.returncode != 0:
        raise SystemExit(f"the sessiontree measurement failed on {path}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def wall_ms(command: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    """The median wall time of a command, in milliseconds (after one warm-up run)."""
    times = []
    for i in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True, env=env)
        if i:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def import_rows(modules: Path, runs: int) -> list[list[str]]:
    """``from sessiontree import Session`` (what a user's first line costs; the target applies to
    it) and the bare ``import sessiontree`` beside ``python -c pass`` and node importing pi's
    package entry. The package's bytecode is compiled first, as an installed package's is
    (``PYTHONDONTWRITEBYTECODE`` would otherwise make every run compile the sources again)."""
    import compileall

    compileall.compile_dir(str(REPO / "src" / "sessiontree"), quiet=1)
    entry = (modules / "@mariozechner" / "pi-coding-agent" / "dist" / "index.js").as_uri()
    bare = wall_ms([sys.executable, "-c", "pass"], runs)
    ours = wall_ms([sys.executable, "-c", "import sessiontree"], runs, _env())
    session = wall_ms([sys.executable, "-c", "from sessiontree import Session"], runs, _env())
    node_bare = wall_ms(["node", "-e", "0"], runs)
    pi = wall_ms(["node", "-e", f"import({json.dumps(entry)})"], runs)
    mark = "**met**" if session - bare < TARGET_IMPORT_MS else "**NOT met**"
    return [
        row("all", "process start only (`python -c pass` / `node -e 0`)", bare, node_bare, "ms", ""),
        row("all", "**`from sessiontree import Session`** / node `import()` of pi's package entry "
            "(wall)", session, pi, "ms",
            f"import alone {session - bare:.1f} ms; target < {TARGET_IMPORT_MS:g} ms: {mark}"),
        row("all", "`import sessiontree` (names loaded when first used) / the same pi import "
            "(wall)", ours, pi, "ms", f"import alone {ours - bare:.1f} ms"),
    ]


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
    return f"{pi / ours:,.1f}×" if pi / ours < 100 else f"{pi / ours:,.0f}×"


def row(label: str, name: str, ours: float | None, pi: float | None, unit: str,
        check: str) -> list[str]:
    """One table row: figures, ratio (pi ÷ ours: above 1 we are faster or smaller), ≥ 1.0×?"""
    meets = "—" if ours is None or pi is None or ours <= 0 else (
        "yes" if pi / ours >= 1.0 else "**no**")
    return [label, name, _fmt(ours, unit), _fmt(pi, unit), _ratio(ours, pi), meets, check]


def _same(ours: str, pi: str, name: str) -> tuple[str, bool]:
    return (f"{name} digest = pi's", True) if ours == pi else (f"**{name} digest DIFFERS**", False)


def rows(size: str, ours: dict[str, Any], pi: dict[str, Any]) -> tuple[list[list[str]], bool, list[str]]:
    """The table rows for one file, whether every check passed, and the target lines."""
    if size in LIGHT_SIZES:
        return light_rows(size, ours, pi)
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
    ms = lambda key, stat: ours[key][stat]  # noqa: E731
    table = [
        row(size, "open", ours["load_ms"], pi["load_ms"], "ms",
            f"{ours['entries']:,} = {pi['entries']:,} entries"),
        row(size, "build_context, first", ms("build_context_ms", "first"),
            pi["build_context_ms"]["first"], "ms", ctx_ok[0]),
        row(size, "build_context, median", ms("build_context_ms", "median"),
            pi["build_context_ms"]["median"], "ms", f"{ours['context']['messages']:,} messages"),
        row(size, "build_context + typed messages, median", ms("typed_context_ms", "median"),
            pi["build_context_ms"]["median"], "ms", ""),
        row(size, "**open + build_context (first)**", open_ctx, pi_open_ctx, "ms", speed_check),
        row(size, "tree, first", ms("tree_ms", "first"), pi["get_tree_ms"]["first"], "ms", tree_ok[0]),
        row(size, "tree, median", ms("tree_ms", "median"), pi["get_tree_ms"]["median"], "ms",
            f"{ours['tree']['nodes']:,} nodes"),
        row(size, "tree + walk of every node, median", ms("tree_walk_ms", "median"), None, "ms", ""),
        row(size, f"path to the deepest leaf ({ours['branch']['length']:,} entries), ids, median",
            ms("path_ids_ms", "median"), pi["get_branch_ms"]["median"], "ms", path_ok[0]),
        row(size, "path to the deepest leaf, typed entries, first", ms("path_ms", "first"),
            pi["get_branch_ms"]["first"], "ms", "pi parsed every entry when it opened"),
        row(size, "open + path to the deepest leaf, typed entries, first",
            ours["load_ms"] + ms("path_ms", "first"), pi["load_ms"] + pi["get_branch_ms"]["first"],
            "ms", ""),
        row(size, "path to the deepest leaf, typed entries, median", ms("path_ms", "median"),
            pi["get_branch_ms"]["median"], "ms", typed_ok[0]),
        row(size, f"**append, median** of {APPENDS:,}", ours["append_median_us"], None, "µs",
            append_check),
        row(size, f"append, mean of {APPENDS:,}", ours["append_block_ms"] * 1000 / APPENDS,
            pi["append_per_entry_us"], "µs",
            "persisted in both" if persisted else "**appends NOT persisted**"),
    ]
    ok = ctx_ok[1] and tree_ok[1] and path_ok[1] and typed_ok[1] and persisted
    if "loop_ms" in ours:
        loop_ok = _same(ours["loop_context"], pi["loop_context"]["digest"], "last context")
        ok = ok and loop_ok[1]
        table.append(row(size, f"**agent loop**: append + build_context, mean of {LOOP_ROUNDS:,} rounds",
                         ours["loop_ms"] * 1000 / LOOP_ROUNDS, pi["loop_per_round_us"], "µs",
                         loop_ok[0]))
    table += [
        row(size, "**peak RSS** (ours after open + build_context, pi after open)", peak, pi_peak,
            "MiB", memory_check),
        row(size, "RSS growth from loading (after gc)",
            ours["rss_after_load_mib"] - ours["rss_baseline_mib"], pi["mem_after_load_delta"]["rss_mib"],
            "MiB", ""),
        row(size, "peak RSS at the end of the run", ours["peak_end_mib"], None, "MiB", ""),
    ]
    return table, ok, targets


def light_rows(size: str, ours: dict[str, Any], pi: dict[str, Any]) -> tuple[list[list[str]], bool, list[str]]:
    """Open + first context and peak memory on a huge file, pi beside it if it managed."""
    open_ctx = ours["load_ms"] + ours["build_context_ms"]["first"]
    peak = ours["peak_after_context_mib"]
    failed = pi.get("failed")
    pi_open = None if failed else pi["load_ms"]
    pi_ctx = None if failed else pi["build_context_ms"]["first"]
    pi_peak = None if failed else pi.get("peak_rss_after_context_mib")
    ctx = ("pi: " + failed) if failed else _same(ours["context"]["digest"], pi["context"]["digest"],
                                                  "context")[0]
    open_ok = ours["load_ms"] < TARGET_1M_OPEN_S * 1000
    together = max(peak, ours["peak_with_helpers_mib"])
    peak_ok = together < TARGET_1M_PEAK_MIB
    helped = ours["helper_peak_mib"] > 0  # no helper starts when no CPU is free
    targets = [(f"open {ours['load_ms'] / 1000:.2f} s (target < {TARGET_1M_OPEN_S:g} s: "
                f"{'**met**' if open_ok else '**NOT met**'})"),
               f"peak RSS {peak:.0f} MiB" +
               (f", {together:.0f} MiB with the scan's helper process" if helped else "") +
               f" (target < {TARGET_1M_PEAK_MIB:g} MiB: {'**met**' if peak_ok else '**NOT met**'})"]
    table = [
        row(size, "open", ours["load_ms"], pi_open, "ms", f"{ours['entries']:,} entries"),
        row(size, "build_context, first", ours["build_context_ms"]["first"], pi_ctx, "ms", ctx),
        row(size, "**open + build_context (first)**", open_ctx,
            None if failed else pi_open + pi_ctx, "ms", ""),
        row(size, "**peak RSS** after open + build_context", peak, pi_peak, "MiB", ""),
    ]
    if helped:
        table += [
            row(size, "peak RSS of the scan's helper process", ours["helper_peak_mib"], None,
                "MiB", "it scans part of the file while this process scans the rest"),
            row(size, "**peak RSS of both together** (sampled every 5 ms)",
                ours["peak_with_helpers_mib"], None, "MiB", ""),
        ]
    else:
        table[0] = row(size, "open", ours["load_ms"], pi_open, "ms",
                       f"{ours['entries']:,} entries; one process (no CPU was free for a helper)")
    ok = failed is not None or ours["context"]["digest"] == pi["context"]["digest"]
    return table, ok, targets


# -- listing ---------------------------------------------------------------------------------------

def generate_listing_folder() -> Path:
    """The listing benchmark's folder of sessions, generated unless this generator made it."""
    from sessiontree.testing.generate import generate_folder

    key = hashlib.sha256(GENERATOR.read_bytes() + str(LISTING_SESSIONS).encode()).hexdigest()[:12]
    folder = DATA / f"folder-{LISTING_SESSIONS}-{key}"
    if folder.is_dir():
        return folder
    for stale in DATA.glob(f"folder-{LISTING_SESSIONS}-*"):
        shutil.rmtree(stale)
    print(f"generating {folder.name} …", file=sys.stderr, flush=True)
    scratch = folder.with_suffix(".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    generate_folder(scratch, LISTING_SESSIONS, seed=1, cwds=("/home/dev/projects/acme-api",
                                                              "/home/dev/projects/web"))
    scratch.rename(folder)
    return folder


def measure_listing(folder: str, repeat: int) -> dict[str, Any]:
    """Our listing figures (in a fresh process, for its peak memory)."""
    from sessiontree import list_sessions
    from sessiontree.stores._jsonl_listing import INDEX_NAME
    from sessiontree.testing.digests import listing_digest

    index = Path(folder) / INDEX_NAME
    index.unlink(missing_ok=True)
    out: dict[str, Any] = {}
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        rows = list_sessions(folder, index=False)
        runs.append((time.perf_counter() - start) * 1000)
    out["cold_ms"] = statistics.median(runs)
    out["digest"], out["sessions"] = listing_digest(rows), len(rows)
    start = time.perf_counter()
    list_sessions(folder)  # builds the index
    out["build_index_ms"] = (time.perf_counter() - start) * 1000
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        rows = list_sessions(folder)
        runs.append((time.perf_counter() - start) * 1000)
    out["indexed_ms"] = statistics.median(runs)
    out["indexed_digest"] = listing_digest(rows)
    out["index_bytes"] = index.stat().st_size
    out["peak_mib"] = _peak_mib()
    return out


def listing(args: argparse.Namespace, modules: Path) -> tuple[list[str], bool]:
    """The listing table beside pi's SessionManager.list."""
    folder = generate_listing_folder()
    files = list(folder.glob("*.jsonl"))
    size = sum(f.stat().st_size for f in files)
    print(f"{folder.name}: pi …", file=sys.stderr, flush=True)
    done = subprocess.run(["node", "--expose-gc", str(HERE / "pi_bench.mjs"), "--list", str(folder),
                           "--pi", str(modules), "--repeat", str(args.repeat)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pi-bench --list failed:\n{done.stderr[-3000:]}")
    pi = json.loads(done.stdout)
    print(f"{folder.name}: sessiontree …", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, __file__, "--child-listing", str(folder), "--repeat",
                           str(args.repeat)], capture_output=True, text=True, env=_env(), check=False)
    if done.returncode != 0:
        raise SystemExit(f"the listing measurement failed:\n{done.stderr[-3000:]}")
    ours = json.loads(done.stdout)
    cli = wall_ms([sys.executable, "-m", "sessiontree", "ls", str(folder), "--json"], args.repeat,
                  _env())
    same = _same(ours["digest"], pi["digest"], "rows")
    indexed_same = _same(ours["indexed_digest"], pi["digest"], "rows")
    pi_ms = pi["list_ms"]["median"]
    cold_x, indexed_x = pi_ms / ours["cold_ms"], pi_ms / ours["indexed_ms"]
    label = f"{len(files):,} files"
    table = [
        row(label, "list, no index (median)", ours["cold_ms"], pi_ms, "ms",
            f"{same[0]}; target ≥ 10×: {'**met**' if cold_x >= 10 else '**NOT met**'}"),
        row(label, "list, first with the index (reads every file, writes the index)",
            ours["build_index_ms"], pi_ms, "ms", f"index {ours['index_bytes'] / 1024:,.0f} KiB"),
        row(label, "**list with the index** (median)", ours["indexed_ms"], pi_ms, "ms",
            f"{indexed_same[0]}; target ≥ 100×: {'**met**' if indexed_x >= 100 else '**NOT met**'}"),
        row(label, "`sessiontree ls DIR --json` with the index (wall, whole process)", cli, None,
            "ms", ""),
        row(label, "**peak RSS** (listing process)", ours["peak_mib"], pi["peak_rss_mib"], "MiB",
            f"target < 200 MiB: {'**met**' if ours['peak_mib'] < 200 else '**NOT met**'}"),
    ]
    report = [
        f"## listing: `list_sessions()` beside pi's `SessionManager.list`",
        "",
        f"folder: {len(files):,} sessions made by generate_folder (20-1,500 entries each), "
        f"{size / 2**20:,.0f} MiB, in the page cache; {pi['sessions']:,} listed by pi",
        "",
        "| folder | measure | sessiontree | pi | pi ÷ sessiontree | ≥ 1.0× | check |",
        "|---|---|---:|---:|---:|:---:|---|",
        *("| " + " | ".join(r) + " |" for r in table),
    ]
    return report, same[1] and indexed_same[1]



def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--suites", default="core,listing,optree,html",
                        help="comma-separated, of core (beside pi), listing (beside pi), optree, "
                             "html, storage (SQLite and PostgreSQL at scale, a long run: not in "
                             "the default), async (AsyncSession over PostgreSQL; not in the "
                             "default)")
    parser.add_argument("--sizes", default="1k,10k,100k", help="comma-separated, of 1k, 10k, 100k, 1m")
    parser.add_argument("--repeat", type=int, default=5, help="calls per timed operation (median, first)")
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-listing", help=argparse.SUPPRESS)
    parser.add_argument("--light", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--loop", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.repeat, args.light, args.loop)))
        return
    if args.child_listing:
        print(json.dumps(measure_listing(args.child_listing, args.repeat)))
        return

    known = {"core", "listing", "optree", "html", "storage", "async"}
    suites = {s.strip() for s in args.suites.split(",") if s.strip()}
    if suites - known:
        parser.error(f"unknown suite {', '.join(sorted(suites - known))}")
    all_ok = core(args, parser, suites)
    for suite in ("optree", "html", "storage", "async"):
        if suite in suites:
            print(f"\n## {suite}\n", flush=True)
            done = subprocess.run([sys.executable, str(HERE / f"bench_{suite}.py")])
            all_ok = all_ok and done.returncode == 0
    if not all_ok:
        sys.exit(1)


def core(args: argparse.Namespace, parser: argparse.ArgumentParser, suites: set[str]) -> bool:
    """The tables beside pi (core and listing); False when a digest differs."""
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()] if "core" in suites else []
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size {', '.join(unknown)} (choose from {', '.join(SIZES)})")
    if not sizes and "listing" not in suites:
        return True
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
        pi = run_pi(path, modules, args.repeat, size)
        print(f"{path.name}: sessiontree …", file=sys.stderr, flush=True)
        ours = run_ours(path, args.repeat, size)
        lines, ok, file_targets = rows(size, ours, pi)
        table += lines
        targets += [f"pi-{size}.jsonl: {t}" for t in file_targets]
        all_ok = all_ok and ok
        described.append(f"pi-{size}.jsonl ({ours['entries']:,} entries, "
                         f"{path.stat().st_size / 2**20:,.1f} MiB)")
    if sizes:
        table += import_rows(modules, max(args.repeat, 5))
    listing_report: list[str] = []
    if "listing" in suites:
        listing_report, ok = listing(args, modules)
        all_ok = all_ok and ok
    load_after = os.getloadavg()[0]
    report = [
        f"sessiontree vs pi {PI_VERSION} — {time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"machine: {machine()}; load average {load_before:.2f} before, {load_after:.2f} after",
    ]
    if sizes:
        below = sum(1 for r in table if r[5] == "**no**")
        report += [
            f"files: {', '.join(described)}; repeat {args.repeat}",
            "",
            f"| file | measure | sessiontree | pi {PI_VERSION} | pi ÷ sessiontree | ≥ 1.0× | check |",
            "|---|---|---:|---:|---:|:---:|---|",
            *("| " + " | ".join(r) + " |" for r in table),
            "",
            "Targets: " + "; ".join(targets) + "." if targets else "",
            f"Rows below 1.0× pi: {below}." if below else "Every row with a pi figure is at least 1.0× pi.",
        ]
    report += ["", *listing_report] if listing_report else []
    report.append("All digests equal pi's." if all_ok else "SOME CHECKS FAILED (see the check column).")
    text = "\n".join(report)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n", "utf-8")
    return all_ok


if __name__ == "__main__":
    main()
