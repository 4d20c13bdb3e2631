"""One open + first context of a session file in a fresh process, for ``run.py``: the peak
resident size (``VmHWM``) is this process's own, so nothing is imported before it is read but the
standard library's small modules and the open itself (the harness's ``run.py``, with argparse,
subprocess and the pi installer, held about 13 MiB more than the library: a tenth of pi 1.5.2's
peak at 10k entries).

    python benchmarks/open_child.py FILE PHASE REPEAT   (prints one JSON object)
"""

from __future__ import annotations

import os
import resource
import sys
import time
from typing import Any


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mib() -> float:
    """This process's peak resident size: Linux's ``VmHWM``, the high-water mark of this
    program's own memory since it started. Not ``ru_maxrss``: on Linux that is at least the
    peak of the process that started this one (the kernel carries the old memory's peak over
    ``exec``; a child of a driver that once held 450 MiB reports 450 MiB however little it
    used itself)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
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


def _is_helper(pid: int) -> bool:
    """Whether a child process is one of this package's helpers (not some other program this
    process started: the count must not take, say, a pi that appended lines, for ours)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as listed:
            return b"sessiontree" in listed.read()
    except OSError:
        return False


class RssSampler:
    """The largest sum of this process's and its helper processes' resident sizes, and the
    largest helper's, sampled every 5 ms (a large file may be scanned with helpers: their
    memory counts too; other children do not)."""

    def __init__(self) -> None:
        import threading

        self.peak = 0.0
        self.helper_peak = 0.0
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
            helpers = [_rss_of(child) for child in children if _is_helper(child)]
            self.helper_peak = max([self.helper_peak, *helpers])
            self.peak = max(self.peak, _rss_of(pid) + sum(helpers))
            self._stop.wait(0.005)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure_open(path: str, phase: str, repeat: int) -> dict[str, Any]:
    """One open + first context in a fresh process (for its own peak memory), then ``repeat``
    reopens in this process. ``phase``: ``cold`` (no index yet: scan, write the index),
    ``today`` (``index=False``: the scan every open did before the index), ``helper`` (a cold
    scan with ``processes=4``, helpers when a CPU is free), ``warm`` (the index of the unchanged
    file), ``grown`` (the index, and the lines appended since), ``append`` (as ``grown``, then
    the first append: ``first_append_ms``; it adds a line to the file). ``repeat`` 0: no
    reopens."""
    from sessiontree import Session

    options: dict[str, Any] = {"today": {"index": False},
                               "helper": {"index": False, "processes": 4}}.get(phase, {})
    out: dict[str, Any] = {"phase": phase, "rss_baseline_mib": _rss_mib()}
    with RssSampler() as sampler:
        start = time.perf_counter()
        session = Session.open(path, **options)
        out["load_ms"] = (time.perf_counter() - start) * 1000
        context = session.build_context()
        out["open_context_ms"] = (time.perf_counter() - start) * 1000
        if phase == "append":
            from sessiontree import UserMessage

            begin = time.perf_counter()
            session.append_message(UserMessage("the first append after the reopen"))
            out["first_append_ms"] = (time.perf_counter() - begin) * 1000
    out["peak_mib"] = _peak_mib()
    out["peak_with_helpers_mib"] = sampler.peak
    out["helper_peak_mib"] = sampler.helper_peak
    out["indexed_bytes"] = session._log.indexed_bytes  # type: ignore[attr-defined]
    out["entries"] = len(session)
    from sessiontree.testing import context_digest  # (after the peak: the harness's own)

    out["context"] = context_digest(context.to_builtins()["messages"])
    session.close()
    runs = []
    for _ in range(repeat):
        begin = time.perf_counter()
        with Session.open(path, **options) as again:
            again.build_context()
        runs.append((time.perf_counter() - begin) * 1000)
    if runs:
        import statistics

        out["reopen_ms"] = {"first": runs[0], "median": statistics.median(runs), "min": min(runs)}
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(measure_open(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
