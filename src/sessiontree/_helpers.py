"""Helper processes for work that splits: scanning a large file, listing a large folder,
copying many sessions.

A helper is ``python -I -c`` running one function of this package with string arguments, which
it reads from its standard input (a file: a share of ten thousand file names is beyond what a
command line may hold, and the caller never waits for the helper to read them); it answers on
its standard output (MessagePack, or packed columns for a split scan) and the caller
decodes the answer.

Invariants:
* A helper that cannot start, fails, or answers something unreadable costs only time: its
  caller is told ``None`` and does the work itself.
* What a helper says on its standard error (a warning, as Hyperscan's failure; its traceback
  when it fails) reaches its caller: a :class:`RuntimeWarning` in the caller, with the exit
  status when it failed (:func:`answer`). It is written to a temporary file, not a pipe: a
  helper that writes much there never waits for its caller, which reads its answer first.
* No helper is started unless the caller asked for more than one process: the ``processes``
  argument of the call, else ``SESSIONTREE_PROCESSES``, else what the program set in
  :data:`default_processes` (the command-line tool: 4), else 1. A library in a server never
  starts processes on its own.
* Nor when only one CPU is free (the CPUs this process may run on, less the other tasks
  running at that moment), or in a frozen or embedded program (no Python interpreter to
  start).
* A caller ends every helper it started, whatever happens (:func:`finish`), gently first: a
  helper takes its first ``SIGTERM`` as ``KeyboardInterrupt``, so its clean-up runs (a Redis
  import deletes the part it stored), and ignores later ones and ``SIGINT`` (a Ctrl-C reaches
  its process group: its caller ends it), so nothing interrupts that clean-up; it is killed
  only if it has not ended :data:`STOP_WAIT` seconds later.
* A helper is isolated (``-I``): neither the folder it starts in nor ``PYTHONPATH``, user
  site-packages or other ``PYTHON*`` variables reach its import path, so a ``typing.py`` in
  the folder where ``sessiontree ls`` runs is never imported.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import subprocess

__all__ = ["answer", "default_processes", "finish", "processes", "reply", "shared", "start"]

_Share = TypeVar("_Share")
_Result = TypeVar("_Result")

_RUN = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "signal.signal(signal.SIGTERM, lambda *given: (signal.signal(signal.SIGTERM, "
        "signal.SIG_IGN), signal.default_int_handler(*given))); "
        "import sys; sys.path.insert(0, sys.argv[1]); import importlib, os; "
        "module, function = sys.argv[2].split(':'); "
        "getattr(importlib.import_module(module), function)("
        "*map(os.fsdecode, sys.stdin.buffer.read().split(b'\\0')[:-1]))")
"""A helper's program: it ignores ``SIGINT`` (a terminal's Ctrl-C reaches the whole process
group; its caller, interrupted, ends it) and takes the first ``SIGTERM`` as
``KeyboardInterrupt``, ignoring any later one, so its clean-up is never itself interrupted."""


default_processes = 1
"""How many processes to use when neither the call nor ``SESSIONTREE_PROCESSES`` says: a
program's setting (the command-line tool sets 4 while a command runs)."""


def processes(requested: int | None = None) -> int:
    """How many processes work that splits may use (this one included), of ``requested``
    (``None``: ``SESSIONTREE_PROCESSES``, else :data:`default_processes`)."""
    if requested is None:
        wanted = os.environ.get("SESSIONTREE_PROCESSES", "")
        requested = int(wanted) if wanted.isdigit() else default_processes
    if requested <= 1 or getattr(sys, "frozen", False) or \
            not os.path.basename(sys.executable or "").lower().startswith(("python", "pypy")):
        return 1
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = os.cpu_count() or 1
    return max(1, min(available - _busy(), requested))


def _busy() -> int:
    """How many other tasks are running right now (``/proc/loadavg``; 0 where unknown): a
    helper on a CPU that another program keeps busy would slow this process down."""
    try:
        with open("/proc/loadavg", "rb") as stream:
            running = int(stream.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, running - 1)  # this process is one of them


def start(function: str, *arguments: str) -> subprocess.Popen[bytes] | None:
    """Start ``module:function`` of this package with ``arguments`` in a helper process (given
    on its standard input, each ended by a NUL, which no argument of a command line holds)."""
    import subprocess  # (not at import: a session that starts no helper never needs it)
    import tempfile

    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    command = [sys.executable, "-I", "-c", _RUN, package_parent, function]
    data = b"".join(os.fsencode(argument) + b"\0" for argument in arguments)
    if data.count(b"\0") != len(arguments):  # a NUL in an argument: the caller does the work
        return None
    said = None
    try:
        said = tempfile.TemporaryFile()
        with tempfile.TemporaryFile() as given:
            given.write(data)
            given.seek(0)
            helper = subprocess.Popen(command, stdin=given, stdout=subprocess.PIPE,
                                      stderr=said, close_fds=True)
    except OSError:
        if said is not None:
            said.close()
        return None
    helper.stderr = said  # (read by answer, closed by finish)
    return helper


def answer(helper: subprocess.Popen[bytes] | None, *, partial: bool = False) -> bytes | None:
    """The helper's whole answer once it has exited, ``None`` if it failed (``partial``: what
    it answered before it failed). An interrupt while waiting for it leaves it running: the
    caller's :func:`finish` asks every helper to stop at once."""
    if helper is None or helper.stdout is None:
        return None
    try:
        data, status = helper.stdout.read(), helper.wait()
    except OSError:
        data, status = None, 1
    said = _said(helper)
    finish(helper)
    if said or status:
        function = helper.args[-1] if isinstance(helper.args, list) else "?"
        failed = f" failed (exit status {status}; its work is done here)" if status else ""
        warnings.warn(f"a helper process ({function}){failed}" + (f": {said}" if said else ""),
                      RuntimeWarning, stacklevel=2)
    return data if data is not None and (status == 0 or partial) else None


SAID_SHOWN = 4000
"""Characters of a helper's standard error its caller's warning shows at most (the last ones:
a traceback ends with its error)."""


def _said(helper: subprocess.Popen[bytes]) -> str:
    """What the helper wrote to its standard error (its last :data:`SAID_SHOWN` characters)."""
    if helper.stderr is None:
        return ""
    try:
        helper.stderr.seek(0)
        text = helper.stderr.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return text if len(text) <= SAID_SHOWN else "..." + text[-SAID_SHOWN:]


STOP_WAIT = 5.0
"""Seconds a helper asked to stop has to clean up (all of them together) before it is killed."""


def finish(*helpers: subprocess.Popen[bytes] | None) -> None:
    """End helpers that still run (asked to stop, all at once; killed after :data:`STOP_WAIT`
    seconds) and close their pipes."""
    import subprocess
    import time

    running = [helper for helper in helpers
               if helper is not None and helper.returncode is None and helper.poll() is None]
    for helper in running:
        helper.terminate()
    deadline = time.monotonic() + STOP_WAIT
    for helper in running:
        try:
            helper.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.wait()
    for ended in helpers:
        for stream in (ended.stdout, ended.stderr) if ended is not None else ():
            if stream is not None:
                stream.close()


def shared(function: str, shares: Sequence[_Share], arguments: Callable[[_Share], list[str]],
           here: Callable[[_Share], _Result],
           read: Callable[[bytes, _Share], _Result | None], *, partial: bool = False
           ) -> list[_Result]:
    """Each share's result, in order: the first share's computed here (``here``) while a helper
    runs ``function`` with ``arguments(share)`` for each other one. ``read`` makes a helper's
    answer its result; a helper that fails, or whose answer ``read`` refuses (``None``, or a
    ``ValueError`` such as msgspec's decode errors), costs only time: its share is computed
    here too. ``partial``: ``read`` is also given what a helper that failed answered before
    (the part of its share it reports done), and does the rest itself."""
    helpers = [start(function, *arguments(share)) for share in shares[1:]]
    try:
        results = [here(shares[0])]
        for helper, share in zip(helpers, shares[1:]):
            data = answer(helper, partial=partial)
            try:
                theirs = read(data, share) if data is not None else None
            except ValueError:
                theirs = None
            results.append(theirs if theirs is not None else here(share))
        return results
    finally:
        finish(*helpers)


def reply(*parts: bytes | memoryview) -> None:
    """What a helper function calls to answer (its answer in one piece or several)."""
    for part in parts:
        sys.stdout.buffer.write(part)
    sys.stdout.buffer.flush()
