"""Errors of the operation tree (default mode), under :class:`sessiontree.SessionTreeError`.

    SessionTreeError
    └── OpTreeError
        ├── RunNotFound        a run id the tree does not hold
        ├── TurnNotFound       a turn index or id the run does not hold
        ├── OpNotFound         an op id the tree does not hold
        └── InvalidOpTree      a call the tree refuses (bad argument or state)
            ├── RunEnded       the run has ended: it takes no more changes
            ├── OpEnded        the op has ended already
            └── CycleError     a child link that would make a cycle or a second parent

The compatibility mode never raises these: it reproduces the reference, which ignores unknown
ids (REFERENCE.md quirk Q5).
"""

from __future__ import annotations

from ..errors import SessionTreeError

__all__ = [
    "CycleError",
    "InvalidOpTree",
    "OpEnded",
    "OpNotFound",
    "OpTreeError",
    "RunEnded",
    "RunNotFound",
    "TurnNotFound",
]


class OpTreeError(SessionTreeError):
    """Root of the operation-tree errors."""


class _NotFound(OpTreeError, KeyError):
    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self._format()


class RunNotFound(_NotFound):
    """A run id the tree does not hold."""


class TurnNotFound(_NotFound):
    """A turn index or turn id the run does not hold (the reference makes an orphan op)."""


class OpNotFound(_NotFound):
    """An op id the tree does not hold (the reference silently drops the call)."""


class InvalidOpTree(OpTreeError, ValueError):
    """A call the tree refuses: an invalid argument, or one the tree's state does not allow."""


class RunEnded(InvalidOpTree):
    """The run has ended (``end_session``); it takes no more changes."""


class OpEnded(InvalidOpTree):
    """The op has ended already; ``end_op`` is called once per op."""


class CycleError(InvalidOpTree):
    """Linking this child would give a run two parents or make it its own ancestor."""
