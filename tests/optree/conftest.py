"""Fixtures for the operation-tree tests: an injected clock and id source."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sessiontree.optree import NO_PRICES, OpTreeBuilder

B = 1_700_000_000_000


class Clock:
    """A settable clock in epoch milliseconds."""

    def __init__(self, start: int = B) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


class Ids:
    """``id1``, ``id2``, ... shared by every builder that uses it."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"id{self.n}"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ids() -> Ids:
    return Ids()


@pytest.fixture
def make(clock: Clock, ids: Ids) -> Callable[..., OpTreeBuilder]:
    """Build default-mode builders on the shared clock and ids (no price table by default)."""

    def factory(meta: Any = None, **kwargs: Any) -> OpTreeBuilder:
        kwargs.setdefault("prices", NO_PRICES)
        return OpTreeBuilder(meta, clock=clock, ids=ids, **kwargs)

    return factory
