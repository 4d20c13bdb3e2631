"""Progress display for long work, only when a person is watching.

Invariants:
* Nothing is drawn unless stdout is a terminal (not a pipe, not ``TERM=dumb``), so scripts and
  ``--json`` output never see it; it is drawn on stderr and removed when the work ends.
* The helpers cost nothing when nothing is drawn: the callback is a no-op.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

__all__ = ["LARGE_FILE_BYTES", "LARGE_SESSION_ENTRIES", "copying", "is_terminal", "loading",
           "progress"]

LARGE_FILE_BYTES = 32 * 1024 * 1024
"""Files at least this large get a loading indicator (about 20,000 pi entries)."""

LARGE_SESSION_ENTRIES = 10_000
"""Copies of sessions with at least this many entries get an indicator."""

Advance = Callable[[int], None]


def is_terminal() -> bool:
    """Whether a person is watching stdout (a terminal, and not ``TERM=dumb``)."""
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


def _noop(_: int) -> None:
    return None


@contextlib.contextmanager
def progress(description: str, total: int | None, *, enabled: bool | None = None
             ) -> Iterator[Advance]:
    """A transient progress bar on stderr; yields ``advance(n)``.

    Args:
        description: what is being done ("exporting html").
        total: the number of steps (``None``: an indeterminate bar).
        enabled: force on or off (default: when stdout is a terminal).
    """
    if not (is_terminal() if enabled is None else enabled):
        yield _noop
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("{task.description}"), BarColumn()]
    if total is not None:
        columns.append(MofNCompleteColumn())
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)

        def advance(n: int) -> None:
            bar.advance(task, n)

        yield advance


@contextlib.contextmanager
def loading(path: str, *, enabled: bool | None = None) -> Iterator[None]:
    """An indeterminate bar while a very large file (:data:`LARGE_FILE_BYTES`) is opened."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    if size < LARGE_FILE_BYTES:
        yield
        return
    with progress(f"loading {os.path.basename(path)} ({size / 2**20:,.0f} MiB)", None,
                  enabled=enabled):
        yield


@contextlib.contextmanager
def copying(entries: int, *, enabled: bool | None = None) -> Iterator[None]:
    """An indeterminate bar while a large session is copied into a new file."""
    if entries < LARGE_SESSION_ENTRIES:
        yield
        return
    with progress(f"copying {entries:,} entries", None, enabled=enabled):
        yield
