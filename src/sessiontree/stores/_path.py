"""A stored session's root-to-leaf path read in chunks as it is asked for, the part the
database backends share: a context reads the leaf's end and the last compaction's kept range,
never the whole path, so a deep session opens at the cost of what its context holds."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import overload

from .._scan import Record


class ChunkedPath(Sequence[Record], ABC):
    """Position ``i`` is the entry of depth ``i + 1``. A backend reads chunks of ``chunk``
    positions in :meth:`_fetch` (several at once where it can batch them) and may read ahead
    in :meth:`_wanted`.

    Args:
        segments: the backend's ``(where, first depth, last depth)`` from the root's segment
            to the leaf's.
        last: the positions of the last thinking level change, model source and compaction
            (-1: none).
    """

    chunk: int = 1024

    def __init__(self, segments: list[tuple[int, int, int]], last: tuple[int, int, int]) -> None:
        self._segments = segments
        self._length = segments[-1][2] if segments else 0
        self._last = last
        self._chunks: dict[int, list[Record]] = {}

    @abstractmethod
    def _fetch(self, numbers: Sequence[int]) -> None:
        """Read these chunks into ``_chunks`` (raise ``ConcurrentModification`` when a chunk
        does not have the entries the segments promise: the path changed meanwhile)."""

    def _wanted(self, number: int) -> Sequence[int]:
        """The chunks to read when chunk ``number`` is asked for."""
        return [number]

    def _span(self, number: int) -> tuple[int, int]:
        """The first and last depth of chunk ``number``."""
        return number * self.chunk + 1, min(self._length, (number + 1) * self.chunk)

    def last_positions(self) -> tuple[int, int, int]:
        """Where the last thinking level change, model source and compaction are (-1: none)."""
        return self._last

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Record: ...
    @overload
    def __getitem__(self, index: slice) -> list[Record]: ...

    def __getitem__(self, index: int | slice) -> Record | list[Record]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            if start >= stop:
                return []
            numbers = range(start // self.chunk, (stop - 1) // self.chunk + 1)
            missing = [n for n in numbers if n not in self._chunks]
            if missing:
                self._fetch(missing)  # together, where the backend can batch them
            items = [record for n in numbers for record in self._chunks[n]]
            offset = numbers[0] * self.chunk
            return items[start - offset:stop - offset]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        number = index // self.chunk
        found = self._chunks.get(number)
        if found is None:
            self._fetch(self._wanted(number))
            found = self._chunks[number]
        return found[index % self.chunk]
