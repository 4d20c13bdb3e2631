"""A session's cache of decoded entry lines, bounded by the bytes of the lines it holds.

Invariants:
* A line is never re-read or re-decoded while its decoded forms are cached; what is cached is
  derived from the line's bytes only, and lines never change once written, so a cached form is
  never stale. (Lines another writer appends are new records; a record never changes.)
* The cache holds at most ``budget`` bytes of source lines (the oldest admitted line is dropped
  first); one line larger than the budget is still held until the next line is admitted.
* The decoded forms hang on the record itself (``Record.cached``), so a hit costs one attribute
  read; dropping a line sets that attribute back to ``None``. A slot is admitted only once its
  line was read (its size is then known, whatever the log).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from ._scan import Record

__all__ = ["DEFAULT_CACHE_BYTES", "Decoded", "DecodedCache"]

DEFAULT_CACHE_BYTES = 64 << 20
"""Default budget: 64 MiB of source lines (their decoded forms take about as much again)."""


class Decoded(msgspec.Struct, gc=False):
    """The decoded forms of one line, each filled on first use (a struct made in C, as a
    context read from cold makes one per message; not tracked by the garbage collector, which
    thousands of new slots would set off: what it holds, decoded from one line, never refers
    back to it)."""

    data: dict[str, Any] | None = None
    """The whole line as JSON values (on-disk key names)."""
    entry: Any = None
    """The typed entry."""
    message: Any = None
    """A message entry's ``message`` as raw JSON (or a dict), ``False`` when it has none."""
    typed: Any = None
    """A message entry's typed message."""


class DecodedCache:
    """Decoded lines of one session, the oldest dropped first past ``budget`` bytes."""

    def __init__(self, budget: int = DEFAULT_CACHE_BYTES) -> None:
        self.budget = budget
        self.used = 0
        self._held: deque[tuple[Record, int]] = deque()

    def admit(self, record: Record, size: int) -> Decoded:
        """A new slot for a record whose line (``size`` bytes) was just read; the oldest lines
        are dropped past the budget. With a budget of 0 the slot is the caller's only."""
        slot = Decoded()
        if self.budget <= 0:
            return slot
        record.cached = slot
        self._held.append((record, size))
        self.used += size
        self._evict()
        return slot

    def admit_many(self, records: Sequence[Record], sizes: Iterable[int]) -> list[Decoded]:
        """:meth:`admit` for many records whose lines were just read (one call, not one each)."""
        slots = [Decoded() for _ in records]
        if self.budget <= 0:
            return slots
        held = self._held
        for record, slot, size in zip(records, slots, sizes):
            record.cached = slot
            held.append((record, size))
            self.used += size
        self._evict()
        return slots

    def _evict(self) -> None:
        """Drop the oldest lines while over the budget (the newest always stays)."""
        held = self._held
        while self.used > self.budget and len(held) > 1:
            old, old_size = held.popleft()
            old.cached = None
            self.used -= old_size

    def clear(self) -> None:
        """Drop every cached line."""
        for record, _ in self._held:
            record.cached = None
        self._held.clear()
        self.used = 0
