"""Following a session as it grows: whole new lines, as they land, from any backend.

Invariants: only complete lines (ending in ``\\n``) are ever handed out, so a reader never sees
a line a writer is still writing; lines that are not entries (the header, blank lines) are
skipped; a file that shrinks under the reader raises
:class:`~sessiontree.errors.ConcurrentModification`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

from .._scan import envelope
from ..errors import ConcurrentModification, InvalidLocation
from .base import FollowableLog

__all__ = ["follow_file", "follow_log", "idle_stop"]


def idle_stop(timeout: float | None) -> tuple[Callable[[], bool], Callable[[], None]]:
    """``(stop, touch)``: ``stop()`` is true once ``timeout`` seconds passed since the last
    ``touch()`` (never, for ``None``)."""
    last = [time.monotonic()]

    def stop() -> bool:
        return timeout is not None and time.monotonic() - last[0] >= timeout

    def touch() -> None:
        last[0] = time.monotonic()

    return stop, touch


def follow_log(log: object, *, idle_timeout: float | None, poll: float,
               stop: Callable[[], bool] | None) -> Iterator[bytes]:
    """The lines ``log`` gets appended from now on, until ``idle_timeout`` seconds pass without
    one or ``stop()`` is true (asked whenever nothing new came).

    Raises:
        InvalidLocation: the log cannot be followed.
    """
    if not isinstance(log, FollowableLog):
        raise InvalidLocation(f"{type(log).__name__} cannot be followed")
    idle, touch = idle_stop(idle_timeout)
    for line in log.follow(poll=poll, stop=idle if stop is None else
                           lambda: idle() or stop()):
        touch()
        yield line


def follow_file(path: str, start: int, *, poll: float,
                stop: Callable[[], bool]) -> Iterator[bytes]:
    """Entry lines appended to the file at ``path`` after byte ``start`` (a line start)."""
    position = start
    while True:
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            size = 0
        if size < position:
            raise ConcurrentModification(f"the file shrank from {position} to {size} bytes "
                                         "while it was followed", path=path)
        if size > position:
            with open(path, "rb") as stream:
                stream.seek(position)
                data = stream.read(size - position)
            end = data.rfind(b"\n") + 1
            for line in data[:end].split(b"\n")[:-1]:
                line = line.removesuffix(b"\r")
                if line.strip() and envelope(line) is not None:
                    yield line
            position += end
            if end:
                continue
        if stop():
            return
        time.sleep(poll)
