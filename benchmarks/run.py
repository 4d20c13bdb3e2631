"""sessiontree beside pi 1.5.2 and pi 0.73.1 on the same generated sessions, in one run; then the
operation tree and HTML export benchmarks, each beside its own baseline.

    .venv/bin/python benchmarks/run.py [--suites core,listing,optree,html,storage,async] [--sizes 1k,10k,100k]
                                       [--repeat 5] [--markdown FILE]

``--sizes 1k,10k,100k,1m`` adds the 1,000,000-entry session (about 1.6 GB, generated on demand
into benchmarks/.data/ or ``$SESSIONTREE_BENCH_DATA``, never committed): opens, first contexts and peak memory only, each pi
beside them under a time limit and a memory limit so the machine survives.

The ``core`` suite:

1. Generates the benchmark files with the repository's seeded generator
   (``sessiontree.testing.generate``) into benchmarks/.data/ (git-ignored; a file is reused while
   the generator's source and arguments are unchanged: both are in its name).
2. Installs both pis from npm into the cache folder if needed (sessiontree.testing.pi, shared
   with the tests) and runs ``node --expose-gc benchmarks/pi_bench.mjs FILE --dist DIST`` per
   file and pi: open, context, tree, path, reopens in the same process, 100 lines appended as
   another program would, reopens, 1,000 appends, the agent loop.
3. Measures sessiontree on a copy of the same file, each open in a new Python process
   (``benchmarks/open_child.py``, which imports nothing of the harness before its peak is read,
   so each peak RSS is that open's own, like pi's: both read VmHWM): the open without the
   index (``index=False``, what every open did before it) and the cold open (no index yet: it
   scans and writes the index, in a new cache folder each time), taking turns, five times each
   (three at 1m), their medians compared; the cold open with helper processes allowed, the
   reopen of the unchanged file (from the index), then the reopen after 100 lines another
   program appended (three times). Then, in one more process on another copy, the rest in pi's
   order: open, build_context, tree, path, reopens, the foreign lines, reopens, 1,000 appends
   (no fsync) and the agent loop. The cache folders are new temporary ones of the run
   (``SESSIONTREE_CACHE_DIR``), so first opens are cold.
4. Prints one table: every figure beside pi 1.5.2's and pi 0.73.1's with the ratios (pi ÷
   sessiontree, in bold below 1.0), a check column (our digests equal each pi's from this run;
   the appends persisted) and the targets. Rows include the agent loop (1,000 rounds of append +
   build_context on the 1k and 10k files, pi doing appendMessage + buildSessionContext) and the
   import time of both packages beside a bare ``python -c pass``.

The ``listing`` suite generates a folder of 1,000 sessions (``generate_folder``, 20-1,500
entries each) and times ``list_sessions()`` without and with its index, and ``sessiontree ls
--json``, beside each pi's ``SessionManager.list`` on the same folder, with a digest of the rows.

Exit status 1 when a digest differs (the timings would then compare different work).

The ``optree`` suite is ``benchmarks/bench_optree.py`` (incremental totals against a full
recompute after every event) and ``html`` is ``benchmarks/bench_html.py`` (time to interactive
of exported pages in headless Chromium); each prints its own table. ``storage`` (only when
asked: it generates and loads about two million entries) is ``benchmarks/bench_storage.py``:
SQLite and PostgreSQL at scale beside JSONL and pi's JSONL, in one run. ``async`` (only when
asked: it needs ``SESSIONTREE_TEST_POSTGRES``) is ``benchmarks/bench_async.py``: AsyncSession over
AsyncPostgresStore beside a blocking PostgresStore session, in a thread and called directly.
``agents`` (only when asked) is ``benchmarks/bench_agents.py``: the OpenAI Agents SDK session
(1,000 turns of ``get_items()`` + ``add_items()`` to 10,000 items) beside the SDK's own
``SQLiteSession`` in the same run. ``search`` (only when asked: it generates a 785 MB folder
and 10,000 database sessions) is ``benchmarks/bench_search.py``: full-text search of the folder
beside ``grep -r -F`` on the same files, and of SQLite and PostgreSQL, in one run.
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
sys.path.insert(0, str(REPO / "src"))
from sessiontree.testing.pi import PI_0_73, PI_1_5  # noqa: E402

from open_child import _peak_mib, _rss_mib  # noqa: E402

PI_1_5_VERSION, PI_0_73_VERSION = PI_1_5.version, PI_0_73.version
DATA = Path(os.environ.get("SESSIONTREE_BENCH_DATA") or HERE / ".data")
"""Generated files (git-ignored); ``SESSIONTREE_BENCH_DATA`` puts them elsewhere, so worktrees
can share one 1.6 GB 1M-entry file."""
GENERATOR = REPO / "src" / "sessiontree" / "testing" / "generate.py"
OPEN_CHILD = HERE / "open_child.py"

# generate_session() arguments of each benchmark file
SIZES: dict[str, dict[str, int]] = {
    "1k": {"entries": 1000, "branch_every": 100, "compact_every": 300, "seed": 1},
    "10k": {"entries": 10000, "branch_every": 200, "compact_every": 1000, "seed": 2},
    "100k": {"entries": 100000, "branch_every": 400, "compact_every": 2500, "seed": 3},
    "1m": {"entries": 1_000_000, "branch_every": 400, "compact_every": 2500, "seed": 4},
}
LIGHT_SIZES = {"1m"}      # opens and first contexts only
LOOP_SIZES = {"1k", "10k"}  # the agent loop rows
APPEND_SIZES = {"10k", "100k"}  # appends at least as fast as pi 1.5.2 (mean and median)
APPENDS = 1000
LOOP_ROUNDS = 1000
GROWN_RUNS = 3            # new processes reopening the grown file: their peaks must agree
OPEN_RUNS = 5             # new processes each opening cold and without the index: the medians
LIGHT_OPEN_RUNS = 3       # the same at 1m (seconds an open)
TARGET_SIZE = "100k"
TARGET_WARM = 30.0        # reopen of the unchanged file + context, × faster than pi 1.5.2
TARGET_GROWN = 25.0       # the same after 100 foreign lines
TARGET_COLD = 4.0         # open + context without an index
TARGET_MEMORY = 0.15      # peak RSS at most this share of pi 1.5.2's, every size
TARGET_IMPORT_MS = 50.0   # from sessiontree import Session, above python -c pass
TARGET_1M_REOPEN_MS = 300.0
TARGET_1M_PEAK_MIB = 150.0
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

FOREIGN_LINES = 100
"""Lines another program appends before the reopen after growth (``pi_bench.mjs`` appends the
same ones: same ids, times and text)."""


def append_foreign(path: Path | str, parent_id: str | None, count: int = FOREIGN_LINES) -> None:
    """Append ``count`` user messages as another program would (one write each, no index
    update): the same bytes ``foreignAppend`` of ``pi_bench.mjs`` writes."""
    import datetime as dt

    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        parent = parent_id
        for i in range(count):
            entry_id = f"z{i:07d}"
            stamp = (dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i))
            line = json.dumps({
                "type": "message", "id": entry_id, "parentId": parent,
                "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "message": {"role": "user", "content": [
                    {"type": "text", "text": f"a line another program appended, #{i}"}],
                    "timestamp": 1893456000000 + i * 1000}}, separators=(",", ":"))
            os.write(fd, line.encode() + b"\n")
            parent = entry_id
    finally:
        os.close(fd)


def last_id(path: Path | str) -> str:
    """The id of the file's last line (the leaf pi and we open on)."""
    with open(path, "rb") as stream:
        stream.seek(max(0, os.fstat(stream.fileno()).st_size - (1 << 20)))
        return str(json.loads(stream.read().rstrip(b"\n").rsplit(b"\n", 1)[-1])["id"])


def measure(source: str, repeat: int, loop: int = 0) -> dict[str, Any]:
    """Our figures for one file, in the order pi_bench.mjs takes them: the first open of a fresh copy (no index yet), the context, the tree,
    the path to the deepest leaf, reopens of the unchanged file, 100 foreign lines, reopens of
    the grown file, then 1,000 appends and the agent loop after them."""
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
        _flush(copy)

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
        session.close()

        def reopen() -> Any:
            with Session.open(copy) as again:
                return again.build_context()

        out["reopen_ms"], _ = timed(reopen)
        append_foreign(copy, last_id(copy))
        out["reopen_grown_ms"], grown = timed(reopen)
        out["grown_context"] = context_digest(grown.to_builtins()["messages"])

        session = Session.open(copy)
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


def run_pi(path: Path, dist: Path, repeat: int, size: str) -> dict[str, Any]:
    """One pi release on one file (``dist``: its package's dist folder)."""
    command = ["node", "--expose-gc", str(HERE / "pi_bench.mjs"), str(path), "--dist", str(dist),
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


CACHE = tempfile.mkdtemp(prefix="sessiontree-bench-cache-")
"""The cache folder of this run's sessiontree processes: every first open is cold, and no index
lands in the user's cache (removed at exit)."""


def _env(cache: str = CACHE) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items()
           if name not in ("SESSIONTREE_PROCESSES", "SESSIONTREE_INDEX")}  # the library's defaults
    return {**env, "SESSIONTREE_CACHE_DIR": cache,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"),
                                                        os.environ.get("PYTHONPATH")]))}


def _child(arguments: list[str], what: str, script: Path = Path(__file__),
           cache: str = CACHE) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(script), *arguments], capture_output=True,
                          text=True, env=_env(cache), check=False)
    if done.returncode != 0:
        raise SystemExit(f"the sessiontree measurement failed ({what}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def run_ours(path: Path, repeat: int, size: str) -> dict[str, Any]:
    command = ["--child", str(path), "--repeat", str(repeat)]
    if size in LOOP_SIZES:
        command += ["--loop", str(LOOP_ROUNDS)]
    return _child(command, str(path))


def _flush(path: Path) -> None:
    """Write a fresh copy's pages to disk, so that no measured open waits for their writeback."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One phase's figures over its processes: the median times, the highest peak (the memory
    target applies to every open), the count, and a context digest only if all agree."""
    contexts = {run["context"] for run in runs}
    return {**runs[0], "load_ms": statistics.median(run["load_ms"] for run in runs),
            "open_context_ms": statistics.median(run["open_context_ms"] for run in runs),
            "peak_mib": max(run["peak_mib"] for run in runs), "runs": len(runs),
            "context": contexts.pop() if len(contexts) == 1 else "the opens' contexts differ"}


def run_opens(path: Path, repeat: int, runs: int) -> dict[str, Any]:
    """The opens of one copy of ``path``, each in a new process: ``runs`` without the index and
    as many cold (no index yet: it writes one, in a new cache folder each time), taking turns
    so that a change of the machine's load weighs on both alike; then cold with helpers
    allowed, warm, and grown by 100 foreign lines (``GROWN_RUNS`` times), on the index the last
    cold open wrote."""
    opens: dict[str, Any] = {}
    today: list[dict[str, Any]] = []
    cold: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=DATA) as scratch:
        copy = Path(scratch) / path.name
        shutil.copyfile(path, copy)
        _flush(copy)
        cache = ""
        for _ in range(runs):
            # the open without the index first, so the first cold open is not the first read
            # of the copy either
            today.append(_child([str(copy), "today", "0"], f"open of {copy.name} without the "
                                "index", OPEN_CHILD))
            if cache:
                shutil.rmtree(cache)
            cache = tempfile.mkdtemp(dir=CACHE)
            cold.append(_child([str(copy), "cold", "0"], f"cold open of {copy.name}", OPEN_CHILD,
                               cache))
        opens["today"], opens["cold"] = _medians(today), _medians(cold)
        for phase in ("helper", "warm"):
            opens[phase] = _child([str(copy), phase, str(repeat)], f"{phase} open of {copy.name}",
                                  OPEN_CHILD, cache)
        append_foreign(copy, last_id(copy))
        opens["grown"] = [_child([str(copy), "grown", str(repeat)], f"grown open of {copy.name}",
                                 OPEN_CHILD, cache) for _ in range(GROWN_RUNS)]
        opens["bytes"] = path.stat().st_size
        opens["grown_bytes"] = copy.stat().st_size  # (with the foreign lines)
    return opens


def wall_ms(command: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    """The median wall time of a command, in milliseconds (after one warm-up run)."""
    times = []
    for i in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True, env=env)
        if i:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def compile_package() -> None:
    """Compile the package's bytecode, as an installed package's is, before anything is
    measured: with ``PYTHONDONTWRITEBYTECODE`` set (as on the test machine) every measured
    process would otherwise compile the sources it imports, inside the timed opens (the lazily
    imported modules) and inside their peak RSS (about 2 MiB at 1k entries)."""
    import compileall

    compileall.compile_dir(str(REPO / "src" / "sessiontree"), quiet=1)


def best_of(commands: dict[str, list[str]], runs: int, env: dict[str, str] | None = None
            ) -> dict[str, tuple[float, float]]:
    """Each command's best wall time and best CPU time (user + system), in milliseconds, over
    ``runs`` runs after one warm-up, the commands taking turns so that a change of the machine's
    load weighs on each alike (an import's noise only ever adds: the best run is the figure)."""
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(runs + 1):
        for name, command in commands.items():
            start = time.perf_counter()
            child = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env)
            _, status, usage = os.wait4(child.pid, 0)
            elapsed = (time.perf_counter() - start) * 1000
            if status != 0:
                raise subprocess.CalledProcessError(status, command)
            if i:
                walls[name].append(elapsed)
                cpus[name].append((usage.ru_utime + usage.ru_stime) * 1000)
    return {name: (min(walls[name]), min(cpus[name])) for name in commands}


def import_rows(dists: dict[str, Path], runs: int) -> list[list[str]]:
    """``from sessiontree import Session`` (what a user's first line costs; the target applies to
    it) and the bare ``import sessiontree`` beside ``python -c pass``, ``import msgspec`` and node
    importing each pi's session manager module (the package's bytecode compiled:
    :func:`compile_package`); best of ``runs`` runs taking turns (:func:`best_of`), with the CPU
    time beside the wall time (on a loaded machine the wall time also counts the waits for a CPU).

    The target is the import's own cost: its time above the interpreter's start (``python -c
    pass``), of which ``import msgspec``, the one dependency ``Session`` imports, is a floor no
    change of ours can go below (its time here depends on the environment: with
    ``typing_extensions`` installed, as the test extra installs it, msgspec imports it)."""
    python = best_of({"bare": [sys.executable, "-c", "pass"],
                      "msgspec": [sys.executable, "-c", "import msgspec"],
                      "ours": [sys.executable, "-c", "import sessiontree"],
                      "session": [sys.executable, "-c", "from sessiontree import Session"]},
                     runs, _env())
    node = best_of({"bare": ["node", "-e", "0"]} | {
        version: ["node", "-e", f"import({json.dumps((dist / 'core' / 'session-manager.js').as_uri())})"]
        for version, dist in dists.items()}, runs)
    (bare, bare_cpu), (floor, floor_cpu), (ours, ours_cpu), (session, session_cpu) = \
        python.values()
    pis = [node[version][0] for version in dists]
    mark = "**met**" if session - bare < TARGET_IMPORT_MS else "**NOT met**"
    return [
        row("all", "process start only (`python -c pass` / `node -e 0`)", bare, node["bare"][0],
            node["bare"][0], "ms", f"CPU {bare_cpu:.1f} ms"),
        row("all", "`import msgspec` (the floor: the one dependency `Session` imports; wall)",
            floor, None, None, "ms",
            f"import alone {floor - bare:.1f} ms (CPU {floor_cpu - bare_cpu:.1f} ms)"),
        row("all", "**`from sessiontree import Session`** / node `import()` of pi's "
            "`core/session-manager.js` (wall)", session, *pis, "ms",
            f"import alone {session - bare:.1f} ms (CPU {session_cpu - bare_cpu:.1f} ms), "
            f"msgspec's {floor - bare:.1f} ms of it; target < {TARGET_IMPORT_MS:g} ms above "
            f"`python -c pass`: {mark}"),
        row("all", "`import sessiontree` (names loaded when first used) / the same pi import "
            "(wall)", ours, *pis, "ms",
            f"import alone {ours - bare:.1f} ms (CPU {ours_cpu - bare_cpu:.1f} ms)"),
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
    """pi ÷ ours (above 1: sessiontree is faster or smaller); bold below 1.0."""
    if ours is None or pi is None or ours <= 0:
        return "—"
    ratio = pi / ours
    text = f"{ratio:,.1f}×" if ratio < 100 else f"{ratio:,.0f}×"
    return text if ratio >= 1.0 else f"**{text}**"


def row(label: str, name: str, ours: float | None, pi15: float | None, pi073: float | None,
        unit: str, check: str) -> list[str]:
    """One table row: our figure, then each pi's with its ratio (pi ÷ ours)."""
    return [label, name, _fmt(ours, unit), _fmt(pi15, unit), _ratio(ours, pi15),
            _fmt(pi073, unit), _ratio(ours, pi073), check]


def _same(ours: str, pis: dict[str, str], name: str) -> tuple[str, bool]:
    """Whether our digest equals each pi's (a pi that did not run is left out)."""
    differ = [version for version, digest in pis.items() if digest is not None and digest != ours]
    if not differ:
        return f"{name} digest = pi's", True
    return f"**{name} digest DIFFERS from pi {', '.join(differ)}'s**", False


def _met(value: float, target: float, above: bool = True) -> str:
    return "**met**" if (value >= target if above else value <= target) else "**NOT met**"


def _peak_rows(size: str, opens: dict[str, Any], pi_peaks: tuple[float | None, float | None]
               ) -> tuple[list[list[str]], list[str]]:
    """Peak RSS of each open's process beside pi's: the target applies to every one."""
    pi15 = pi_peaks[0]
    grown = [o["peak_mib"] for o in opens["grown"]]
    helper = opens["helper"]
    helped = helper["helper_peak_mib"] > 0
    peaks = {"cold": opens["cold"]["peak_mib"], "today": opens["today"]["peak_mib"],
             "warm": opens["warm"]["peak_mib"], "grown": max(grown),
             "helper": max(helper["peak_mib"], helper["peak_with_helpers_mib"])}
    worst = max(peaks.values())
    share = worst / pi15 if pi15 else None
    target = (f"highest {worst:.0f} MiB = {share:.2f} of pi 1.5.2's; target ≤ {TARGET_MEMORY:g}: "
              f"{_met(share, TARGET_MEMORY, above=False)}") if share is not None else ""
    highest = f"highest of {opens['cold']['runs']} processes"
    table = [
        row(size, "**peak RSS**, cold open + build_context (scans, writes the index)",
            peaks["cold"], *pi_peaks, "MiB", f"{target}; {highest}" if target else highest),
        row(size, "peak RSS, open + build_context without the index", peaks["today"], *pi_peaks,
            "MiB", highest),
        row(size, "peak RSS, open + build_context with helpers allowed (`processes=4`; with "
            "the helper's)", peaks["helper"], *pi_peaks, "MiB",
            f"a helper ran: its peak {helper['helper_peak_mib']:.0f} MiB" if helped
            else "no CPU was free: one process"),
        row(size, "**peak RSS**, reopen + build_context (index)", peaks["warm"], *pi_peaks, "MiB",
            ""),
        row(size, f"**peak RSS**, reopen + build_context after 100 foreign lines "
            f"({GROWN_RUNS} processes: highest)", peaks["grown"], *pi_peaks, "MiB",
            "each: " + ", ".join(f"{g:.1f}" for g in grown) + " MiB"),
    ]
    return table, ([f"peak RSS {share:.2f} of pi 1.5.2's ({_met(share, TARGET_MEMORY, above=False)}, "
                    f"target ≤ {TARGET_MEMORY:g})"] if share is not None else [])


def _open_rows(size: str, opens: dict[str, Any], pi_open_ctx: tuple[float | None, float | None],
               pi_load: tuple[float | None, float | None], target: bool
               ) -> tuple[list[list[str]], list[str]]:
    """The open rows (cold, without the index, warm, grown) beside pi's open + context."""
    cold, today, warm = opens["cold"], opens["today"], opens["warm"]
    grown = opens["grown"][0]
    pi15 = pi_open_ctx[0]
    cold_vs_today = cold["load_ms"] / today["load_ms"]
    table = [
        row(size, "open, cold (no index yet: scans, writes the index; median)", cold["load_ms"],
            *pi_load, "ms", f"{cold['entries']:,} entries; {cold_vs_today:.2f}× the time of "
            f"the open without the index (below); medians of {cold['runs']} new processes each, "
            "taking turns, each cold one with a new cache folder"),
        row(size, "open without the index (`index=False`: every open before the index; median)",
            today["load_ms"], *pi_load, "ms", ""),
        row(size, "**open + build_context, cold** (no index; median)", cold["open_context_ms"],
            *pi_open_ctx, "ms", f"target ≥ {TARGET_COLD:g}× pi 1.5.2: "
            f"{_met(pi15 / cold['open_context_ms'], TARGET_COLD)}" if target and pi15 else ""),
        row(size, "**reopen + build_context, unchanged file** (index; a new process)",
            warm["open_context_ms"], *pi_open_ctx, "ms",
            (f"target ≥ {TARGET_WARM:g}× pi 1.5.2: {_met(pi15 / warm['open_context_ms'], TARGET_WARM)}; "
             if target and pi15 else "") +
            f"{warm['indexed_bytes'] / 2**20:,.1f} MiB from the index"),
        row(size, f"**reopen + build_context after {FOREIGN_LINES} lines appended by another "
            "program** (a new process)", grown["open_context_ms"], *pi_open_ctx, "ms",
            (f"target ≥ {TARGET_GROWN:g}× pi 1.5.2: {_met(pi15 / grown['open_context_ms'], TARGET_GROWN)}; "
             if target and pi15 else "") +
            f"{(opens['grown_bytes'] - grown['indexed_bytes']) / 1024:,.1f} KiB scanned"),
    ]
    targets = []
    if target and pi15:
        targets = [f"reopen + context {pi15 / warm['open_context_ms']:.0f}× pi 1.5.2 "
                   f"({_met(pi15 / warm['open_context_ms'], TARGET_WARM)}, target ≥ {TARGET_WARM:g}×)",
                   f"after 100 foreign lines {pi15 / grown['open_context_ms']:.0f}× "
                   f"({_met(pi15 / grown['open_context_ms'], TARGET_GROWN)}, target ≥ {TARGET_GROWN:g}×)",
                   f"cold open + context {pi15 / cold['open_context_ms']:.1f}× "
                   f"({_met(pi15 / cold['open_context_ms'], TARGET_COLD)}, target ≥ {TARGET_COLD:g}×)",
                   f"cold open {cold_vs_today:.2f}× the time of the open without the index "
                   f"(medians of {cold['runs']})"]
    return table, targets


def rows(size: str, ours: dict[str, Any], opens: dict[str, Any], pis: dict[str, dict[str, Any]]
         ) -> tuple[list[list[str]], bool, list[str]]:
    """The table rows for one file, whether every check passed, and the target lines."""
    if size in LIGHT_SIZES:
        return light_rows(size, opens, pis)
    pi15, pi073 = pis[PI_1_5.version], pis[PI_0_73.version]

    def both(get: Callable[[dict[str, Any]], Any]) -> tuple[Any, Any]:
        return get(pi15), get(pi073)

    def digests(get: Callable[[dict[str, Any]], str]) -> dict[str, str]:
        return {version: get(pi) for version, pi in pis.items()}

    ctx_ok = _same(ours["context"]["digest"], digests(lambda p: p["context"]["digest"]), "context")
    opened_ok = _same(opens["warm"]["context"], digests(lambda p: p["context"]["digest"]), "context")
    tree_ok = _same(ours["tree"]["digest"], digests(lambda p: p["tree"]["digest"]), "tree")
    path_ok = _same(ours["branch"]["digest"], digests(lambda p: p["branch"]["digest"]), "path")
    typed_ok = _same(ours["branch"]["typed_digest"], digests(lambda p: p["branch"]["digest"]), "path")
    grown_ok = _same(ours["grown_context"], digests(lambda p: p["grown_context"]["digest"]),
                     "grown context")
    grown_open_ok = _same(opens["grown"][0]["context"],
                          digests(lambda p: p["grown_context"]["digest"]), "grown context")
    pi_open_ctx = both(lambda p: p["load_ms"] + p["build_context_ms"]["first"])
    table, targets = _open_rows(size, opens, pi_open_ctx, both(lambda p: p["load_ms"]),
                                size == TARGET_SIZE)
    table[2][-1] = "; ".join(filter(None, [table[2][-1], ctx_ok[0]]))
    table[3][-1] = "; ".join(filter(None, [table[3][-1], opened_ok[0]]))
    table[4][-1] = "; ".join(filter(None, [table[4][-1], grown_open_ok[0]]))
    persisted = ours["append_persisted"] and all(p["append_persisted"] for p in pis.values())
    ms = lambda key, stat: ours[key][stat]  # noqa: E731
    append_check = append_mean_check = ""
    if size in APPEND_SIZES:
        median_x = pi15["append_median_us"] / ours["append_median_us"]
        mean_x = pi15["append_mean_us"] / ours["append_mean_us"]
        append_check = f"target ≥ 1.0× pi 1.5.2: {_met(median_x, 1.0)}"
        append_mean_check = f"target ≥ 1.0× pi 1.5.2: {_met(mean_x, 1.0)}; "
        targets.append(f"append median {median_x:.1f}× and mean {mean_x:.1f}× pi 1.5.2 "
                       f"({_met(min(median_x, mean_x), 1.0)}, target ≥ 1.0×)")
    table += [
        row(size, "reopen + build_context, unchanged file, in the same process (median)",
            ms("reopen_ms", "median"), *both(lambda p: p["reopen_ms"]["median"]), "ms",
            "pi reads the whole file at every open"),
        row(size, "reopen + build_context after 100 foreign lines, same process (median)",
            ms("reopen_grown_ms", "median"), *both(lambda p: p["reopen_grown_ms"]["median"]), "ms",
            grown_ok[0]),
        row(size, "build_context, first", ms("build_context_ms", "first"),
            *both(lambda p: p["build_context_ms"]["first"]), "ms", ctx_ok[0]),
        row(size, "build_context, median", ms("build_context_ms", "median"),
            *both(lambda p: p["build_context_ms"]["median"]), "ms",
            f"{ours['context']['messages']:,} messages"),
        row(size, "build_context + typed messages, median", ms("typed_context_ms", "median"),
            *both(lambda p: p["build_context_ms"]["median"]), "ms", ""),
        row(size, "tree, first", ms("tree_ms", "first"), *both(lambda p: p["get_tree_ms"]["first"]),
            "ms", tree_ok[0]),
        row(size, "tree, median", ms("tree_ms", "median"), *both(lambda p: p["get_tree_ms"]["median"]),
            "ms", f"{ours['tree']['nodes']:,} nodes"),
        row(size, f"path to the deepest leaf ({ours['branch']['length']:,} entries), ids, median",
            ms("path_ids_ms", "median"), *both(lambda p: p["get_branch_ms"]["median"]), "ms",
            path_ok[0]),
        row(size, "path to the deepest leaf, typed entries, first", ms("path_ms", "first"),
            *both(lambda p: p["get_branch_ms"]["first"]), "ms", "pi parsed every entry when it opened"),
        row(size, "path to the deepest leaf, typed entries, median", ms("path_ms", "median"),
            *both(lambda p: p["get_branch_ms"]["median"]), "ms", typed_ok[0]),
        row(size, f"**append, median** of {APPENDS:,} (after the foreign lines)",
            ours["append_median_us"], *both(lambda p: p["append_median_us"]), "µs", append_check),
        row(size, f"**append, mean** of {APPENDS:,}", ours["append_mean_us"],
            *both(lambda p: p["append_mean_us"]), "µs",
            append_mean_check + ("persisted in all" if persisted else "**appends NOT persisted**")),
    ]
    ok = all(c[1] for c in (ctx_ok, opened_ok, tree_ok, path_ok, typed_ok, grown_ok,
                            grown_open_ok)) and persisted
    if "loop_ms" in ours:
        loop_ok = _same(ours["loop_context"], digests(lambda p: p["loop_context"]["digest"]),
                        "last context")
        ok = ok and loop_ok[1]
        table.append(row(size, f"**agent loop**: append + build_context, mean of {LOOP_ROUNDS:,} rounds",
                         ours["loop_ms"] * 1000 / LOOP_ROUNDS,
                         *both(lambda p: p["loop_per_round_us"]), "µs", loop_ok[0]))
    peaks, peak_targets = _peak_rows(size, opens, both(lambda p: p["peak_rss_after_load_mib"]))
    table += peaks
    targets += peak_targets
    table.append(row(size, "RSS growth from loading (after gc)",
                     ours["rss_after_load_mib"] - ours["rss_baseline_mib"],
                     *both(lambda p: p["mem_after_load_delta"]["rss_mib"]), "MiB", ""))
    return table, ok, targets


def light_rows(size: str, opens: dict[str, Any], pis: dict[str, dict[str, Any]]
               ) -> tuple[list[list[str]], bool, list[str]]:
    """Opens + first contexts and peak memory of a huge file, each pi beside them if it
    managed."""
    failed = {version: pi.get("failed") for version, pi in pis.items()}
    ordered = [pis[PI_1_5.version], pis[PI_0_73.version]]

    def both(get: Callable[[dict[str, Any]], Any]) -> tuple[Any, Any]:
        return tuple(None if pi.get("failed") else get(pi) for pi in ordered)  # type: ignore[return-value]

    pi_open_ctx = both(lambda p: p["load_ms"] + p["build_context_ms"]["first"])
    table, _ = _open_rows(size, opens, pi_open_ctx, both(lambda p: p["load_ms"]), False)
    warm, grown = opens["warm"], opens["grown"]
    ctx = _same(opens["cold"]["context"], {v: (None if failed[v] else pi["context"]["digest"])
                                            for v, pi in pis.items()}, "context")
    notes = "; ".join(f"pi {v}: {why}" for v, why in failed.items() if why)
    table[2][-1] = "; ".join(filter(None, [ctx[0], notes]))
    peaks, _ = _peak_rows(size, opens, both(lambda p: p.get("peak_rss_after_context_mib")))
    table += peaks
    reopen_ok = warm["open_context_ms"] < TARGET_1M_REOPEN_MS
    peak = max(warm["peak_mib"], max(g["peak_mib"] for g in grown))
    peak_ok = peak < TARGET_1M_PEAK_MIB
    targets = [f"reopen + context {warm['open_context_ms']:.0f} ms (target < "
               f"{TARGET_1M_REOPEN_MS:g} ms: {'**met**' if reopen_ok else '**NOT met**'})",
               f"peak RSS of the reopens {peak:.0f} MiB (target < {TARGET_1M_PEAK_MIB:g} MiB: "
               f"{'**met**' if peak_ok else '**NOT met**'})"]
    return table, ctx[1], targets


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
    """Our listing figures (in a fresh process, for its peak memory): one process (the
    library's default), then with helper processes allowed (as the command does)."""
    from sessiontree import list_sessions
    from sessiontree.stores._jsonl_listing import INDEX_NAME
    from sessiontree.testing.digests import listing_digest

    index = Path(folder) / INDEX_NAME
    index.unlink(missing_ok=True)
    out: dict[str, Any] = {}
    for key, processes in (("cold_ms", None), ("helpers_ms", 4)):
        runs = []
        for _ in range(repeat):
            start = time.perf_counter()
            rows = list_sessions(folder, index=False, processes=processes)
            runs.append((time.perf_counter() - start) * 1000)
        out[key] = statistics.median(runs)
        out[key.replace("_ms", "_digest")] = listing_digest(rows)
    helpers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out["helper_peak_mib"] = helpers / 2**20 if sys.platform == "darwin" else helpers / 1024
    out["digest"], out["sessions"] = out["cold_digest"], len(rows)
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


def listing(args: argparse.Namespace, dists: dict[str, Path]) -> tuple[list[str], bool]:
    """The listing table beside each pi's SessionManager.list."""
    folder = generate_listing_folder()
    files = list(folder.glob("*.jsonl"))
    size = sum(f.stat().st_size for f in files)
    pis: dict[str, dict[str, Any]] = {}
    for version, dist in dists.items():
        print(f"{folder.name}: pi {version} …", file=sys.stderr, flush=True)
        done = subprocess.run(["node", "--expose-gc", str(HERE / "pi_bench.mjs"), "--list",
                               str(folder), "--dist", str(dist), "--repeat", str(args.repeat)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"pi-bench --list failed:\n{done.stderr[-3000:]}")
        pis[version] = json.loads(done.stdout)
    print(f"{folder.name}: sessiontree …", file=sys.stderr, flush=True)
    ours = _child(["--child-listing", str(folder), "--repeat", str(args.repeat)], "listing")
    cli = wall_ms([sys.executable, "-m", "sessiontree", "ls", str(folder), "--json"], args.repeat,
                  _env())
    digests = {version: pi["digest"] for version, pi in pis.items()}
    same = _same(ours["digest"], digests, "rows")
    helped_same = _same(ours["helpers_digest"], digests, "rows")
    indexed_same = _same(ours["indexed_digest"], digests, "rows")
    pi_ms = (pis[PI_1_5.version]["list_ms"]["median"], pis[PI_0_73.version]["list_ms"]["median"])
    cold_x, indexed_x = pi_ms[0] / ours["cold_ms"], pi_ms[0] / ours["indexed_ms"]
    label = f"{len(files):,} files"
    helped = ours["helper_peak_mib"] > 0
    table = [
        row(label, "list, no index, one process (the library's default; median)", ours["cold_ms"],
            *pi_ms, "ms", f"{same[0]}; target ≥ 10× pi 1.5.2: {_met(cold_x, 10)}"),
        row(label, "list, no index, helper processes allowed (`processes=4`, as `sessiontree "
            "ls`; median)", ours["helpers_ms"], *pi_ms, "ms",
            helped_same[0] + ("" if helped else "; no CPU was free: one process")),
        row(label, "list, first with the index (reads every file, writes the index)",
            ours["build_index_ms"], *pi_ms, "ms", f"index {ours['index_bytes'] / 1024:,.0f} KiB"),
        row(label, "**list with the index** (median)", ours["indexed_ms"], *pi_ms, "ms",
            f"{indexed_same[0]}; target ≥ 100× pi 1.5.2: {_met(indexed_x, 100)}"),
        row(label, "`sessiontree ls DIR --json` with the index (wall, whole process)", cli, None,
            None, "ms", ""),
        row(label, "**peak RSS** (listing process)", ours["peak_mib"],
            pis[PI_1_5.version]["peak_rss_mib"], pis[PI_0_73.version]["peak_rss_mib"], "MiB",
            f"target < 200 MiB: {_met(200, ours['peak_mib'])}"),
    ]
    report = [
        "## listing: `list_sessions()` beside pi's `SessionManager.list`",
        "",
        f"folder: {len(files):,} sessions made by generate_folder (20-1,500 entries each), "
        f"{size / 2**20:,.0f} MiB, in the page cache; "
        + ", ".join(f"{pi['sessions']:,} listed by pi {v}" for v, pi in pis.items()),
        "",
        _HEADER, _RULE,
        *("| " + " | ".join(r) + " |" for r in table),
    ]
    return report, same[1] and indexed_same[1] and helped_same[1]


_HEADER = (f"| file | measure | sessiontree | pi {PI_1_5_VERSION} | 1.5.2 ÷ sessiontree | "
           f"pi {PI_0_73_VERSION} | 0.73.1 ÷ sessiontree | check |")
_RULE = "|---|---|---:|---:|---:|---:|---:|---|"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--suites", default="core,listing,optree,html",
                        help="comma-separated, of core (beside pi), listing (beside pi), optree, "
                             "html, storage (SQLite and PostgreSQL at scale, a long run: not in "
                             "the default), async (AsyncSession over PostgreSQL; not in the "
                             "default), agents (the Agents SDK session beside the SDK's "
                             "SQLiteSession; not in the default), search (full-text search "
                             "beside grep -r -F; not in the default)")
    parser.add_argument("--sizes", default="1k,10k,100k", help="comma-separated, of 1k, 10k, 100k, 1m")
    parser.add_argument("--repeat", type=int, default=5, help="calls per timed operation (median, first)")
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-listing", help=argparse.SUPPRESS)
    parser.add_argument("--loop", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.repeat, args.loop)))
        return
    if args.child_listing:
        print(json.dumps(measure_listing(args.child_listing, args.repeat)))
        return

    known = {"core", "listing", "optree", "html", "storage", "async", "agents", "search"}
    suites = {s.strip() for s in args.suites.split(",") if s.strip()}
    if suites - known:
        parser.error(f"unknown suite {', '.join(sorted(suites - known))}")
    try:
        all_ok = core(args, parser, suites)
    finally:
        shutil.rmtree(CACHE, ignore_errors=True)
    for suite in ("optree", "html", "storage", "async", "agents", "search"):
        if suite in suites:
            print(f"\n## {suite}\n", flush=True)
            done = subprocess.run([sys.executable, str(HERE / f"bench_{suite}.py")])
            all_ok = all_ok and done.returncode == 0
    if not all_ok:
        sys.exit(1)


def core(args: argparse.Namespace, parser: argparse.ArgumentParser, suites: set[str]) -> bool:
    """The tables beside both pis (core and listing); False when a digest differs."""
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()] if "core" in suites else []
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size {', '.join(unknown)} (choose from {', '.join(SIZES)})")
    if not sizes and "listing" not in suites:
        return True
    from sessiontree.testing.pi import PiUnavailable, ensure_pi, pi_dist

    try:
        dists = {release.version: pi_dist(ensure_pi(release=release), release)
                 for release in (PI_1_5, PI_0_73)}
    except PiUnavailable as error:
        raise SystemExit(str(error)) from None

    compile_package()
    load_before = os.getloadavg()[0]
    table: list[list[str]] = []
    targets: list[str] = []
    all_ok = True
    described = []
    for size in sizes:
        path = generate(size)
        pis = {}
        for version, dist in dists.items():
            print(f"{path.name}: pi {version} …", file=sys.stderr, flush=True)
            pis[version] = run_pi(path, dist, args.repeat, size)
        print(f"{path.name}: sessiontree …", file=sys.stderr, flush=True)
        opens = run_opens(path, args.repeat,
                          LIGHT_OPEN_RUNS if size in LIGHT_SIZES else OPEN_RUNS)
        ours = run_ours(path, args.repeat, size) if size not in LIGHT_SIZES else {}
        lines, ok, file_targets = rows(size, ours, opens, pis)
        table += lines
        targets += [f"{size}: {t}" for t in file_targets]
        all_ok = all_ok and ok
        described.append(f"pi-{size}.jsonl ({opens['cold']['entries']:,} entries, "
                         f"{path.stat().st_size / 2**20:,.1f} MiB)")
    if sizes:
        table += import_rows(dists, max(args.repeat, 10))
    listing_report: list[str] = []
    if "listing" in suites:
        listing_report, ok = listing(args, dists)
        all_ok = all_ok and ok
    load_after = os.getloadavg()[0]
    report = [
        f"sessiontree vs pi {PI_1_5.version} and pi {PI_0_73.version} — "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"machine: {machine()}; load average {load_before:.2f} before, {load_after:.2f} after",
    ]
    if sizes:
        below = sum(1 for r in table if r[4].startswith("**"))
        report += [
            f"files: {', '.join(described)}; repeat {args.repeat}",
            "",
            _HEADER, _RULE,
            *("| " + " | ".join(r) + " |" for r in table),
            "",
            "Targets: " + "; ".join(targets) + "." if targets else "",
            f"Rows below 1.0× pi {PI_1_5.version}: {below}." if below else
            f"Every row with a pi {PI_1_5.version} figure is at least 1.0× pi {PI_1_5.version}.",
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
