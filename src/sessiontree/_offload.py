"""How the async operations (``anavigate_tree``, ``apop``, ``acompact``, ``abuild_context``)
run their blocking steps: the reads and writes between the hooks they await.

Invariants: an :class:`Offload` runs one step to completion and returns (or raises) what the
step does; hooks and summarizers are awaited in the caller's loop between steps, never inside
one. The default, :func:`inline`, runs a step in the loop's thread (a plain ``Session``);
:class:`~sessiontree.AsyncSession` runs each step in its worker thread, so the event loop never
waits on a file or a database.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

__all__ = ["Offload", "inline"]

T = TypeVar("T")


class Offload(Protocol):
    """Runs one blocking step (a call without arguments) and gives its result."""

    def __call__(self, step: Callable[[], T], /) -> Awaitable[T]: ...


async def inline(step: Callable[[], T], /) -> T:
    """Run ``step`` here, in the event loop's thread."""
    return step()
