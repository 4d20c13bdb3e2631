"""The seam between a :class:`~sessiontree.Session` and where its entries are indexed.

A session asks its index for envelopes (:class:`~sessiontree._scan.Record`), never for payloads.
Two implementations:

* :class:`~sessiontree._tree.TreeIndex`: every envelope in memory, built by one scan of a file
  or memory log (JSONL and memory sessions).
* :class:`LazyIndex`: for logs that answer queries themselves (databases, see
  :class:`~sessiontree.stores.base.IndexedLog`). Opening costs one query; a path or one entry
  is one indexed query; the whole tree is loaded only when something needs all of it
  (``tree()``, ``leaves()``, ``children()``, ``labels()``, iteration), and kept up to date from
  then on.

Invariants: both give the same answers for the same stored entries; ``last()`` is the last entry
in stored order (the leaf on open); ``taken()`` may be a subset of the stored ids (a database
refuses a duplicate id itself, see :class:`~sessiontree.errors.DuplicateId`).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from ._scan import Problem, Record
from ._time import Either, new_entry_id
from ._tree import TreeIndex, TreeNode, js_trim

if TYPE_CHECKING:
    from .entries import AnyEntry
    from .stores.base import IndexedLog, LogHead

__all__ = ["EntryIndex", "LazyIndex"]


class EntryIndex(Protocol):
    """What a session asks of the index over its entries (envelopes only)."""

    @property
    def name(self) -> str | None: ...
    @property
    def labels(self) -> Mapping[str, tuple[str, str | None]]: ...
    @property
    def cycle_roots(self) -> set[str]: ...
    def __len__(self) -> int: ...
    def __contains__(self, entry_id: object) -> bool: ...
    def get(self, entry_id: str) -> Record | None: ...
    def last(self) -> Record | None: ...
    def taken(self) -> Container[str]: ...
    def new_id(self, also: Container[str] = ()) -> str: ...
    def records(self) -> list[Record]: ...
    def ids(self) -> list[str]: ...
    def path(self, leaf_id: str) -> Sequence[Record]: ...
    def label(self, entry_id: str) -> tuple[str, str | None] | None: ...
    def children(self, entry_id: str) -> list[Record]: ...
    def roots(self) -> list[Record]: ...
    def leaves(self) -> list[Record]: ...
    def branch_points(self) -> list[Record]: ...
    def tree(self, load: Callable[[Record], AnyEntry]) -> list[TreeNode]: ...
    def add(self, rec: Record) -> None: ...
    def extend(self, records: Iterable[Record], problems: list[Problem]) -> None: ...


class LazyIndex:
    """An :class:`EntryIndex` over a log that answers queries (a database session)."""

    def __init__(self, log: IndexedLog, head: LogHead) -> None:
        self._log = log
        self._count = head.entry_count
        self._last = head.last
        self._name = head.name
        self._known: dict[str, Record] = {} if head.last is None else {head.last.id: head.last}
        self._full: TreeIndex | None = None
        self.problems: list[Problem] = []
        """What loading the whole tree found (orphans); empty until then."""

    def full(self) -> TreeIndex:
        """Every envelope in memory, loaded on first use."""
        if self._full is None:
            result = self._log.load()
            problems = list(result.problems)
            self._full = TreeIndex(result.records, problems)
            self.problems = sorted(problems, key=lambda p: (p.line, p.kind))
        return self._full

    @property
    def loaded(self) -> bool:
        return self._full is not None

    # -- answered without loading the tree -------------------------------------------------

    @property
    def name(self) -> str | None:
        return self._name

    def __len__(self) -> int:
        return self._count

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and self.get(entry_id) is not None

    def get(self, entry_id: str) -> Record | None:
        if self._full is not None:
            return self._full.get(entry_id)
        found = self._known.get(entry_id)
        if found is None:
            found = self._log.record(entry_id)
            if found is not None:
                self._known[entry_id] = found
        return found

    def last(self) -> Record | None:
        return self._last

    def taken(self) -> Container[str]:
        """The ids known here (a subset of the stored ones: the database checks the rest)."""
        return self._full.taken() if self._full is not None else self._known

    def new_id(self, also: Container[str] = ()) -> str:
        """An id for a new entry, not among :meth:`taken` nor ``also`` (the database checks
        the rest)."""
        taken = self.taken()
        return new_entry_id(Either(taken, also) if also else taken)

    def path(self, leaf_id: str) -> Sequence[Record]:
        if self._full is not None:
            return self._full.path(leaf_id)
        return self._log.path(leaf_id)

    def label(self, entry_id: str) -> tuple[str, str | None] | None:
        if self._full is not None:
            return self._full.label(entry_id)
        return self._log.label(entry_id)

    # -- answered by the whole tree ----------------------------------------------------------

    @property
    def labels(self) -> Mapping[str, tuple[str, str | None]]:
        return self.full().labels

    @property
    def cycle_roots(self) -> set[str]:
        return self.full().cycle_roots

    def records(self) -> list[Record]:
        return self.full().records()

    def ids(self) -> list[str]:
        return self.full().ids()

    def children(self, entry_id: str) -> list[Record]:
        return self.full().children(entry_id)

    def roots(self) -> list[Record]:
        return self.full().roots()

    def leaves(self) -> list[Record]:
        return self.full().leaves()

    def branch_points(self) -> list[Record]:
        return self.full().branch_points()

    def tree(self, load: Callable[[Record], AnyEntry]) -> list[TreeNode]:
        return self.full().tree(load)

    # -- updates -----------------------------------------------------------------------------

    def _note(self, rec: Record) -> None:
        self._count += 1
        self._last = rec
        self._known[rec.id] = rec
        if rec.type == "session_info":
            self._name = js_trim(rec.name or "") or None

    def add(self, rec: Record) -> None:
        self._note(rec)
        if self._full is not None:
            self._full.add(rec)

    def extend(self, records: Iterable[Record], problems: list[Problem]) -> None:
        new = list(records)
        for rec in new:
            self._note(rec)
        if self._full is not None:
            self._full.extend(new, problems)
