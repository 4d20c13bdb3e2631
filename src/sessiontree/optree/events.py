"""Operation-tree events: the unit of persistence and of update callbacks.

Every change to an operation tree is one event: a ``customType`` under ``sessiontree.op`` and
a small JSON object (REFERENCE.md 14.4). The default-mode builder applies each event to its
tree and hands it to its listeners (a session sink, callbacks); folding the same events in
order rebuilds the same tree.

Invariants:
* ``data`` holds only JSON builtins (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``,
  ``None``); decimals are written as strings. Keys are camelCase.
* Every ``data`` has ``v`` (the schema version) and ``run`` (the run id); events that read the
  clock carry ``t`` (epoch milliseconds).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..describe import BOOKKEEPING_PREFIX

__all__ = [
    "ACCOUNTING",
    "BATCH",
    "CHILD",
    "EVENT_PREFIX",
    "EVENT_TYPES",
    "LOG",
    "OP_BEGIN",
    "OP_END",
    "REASONING",
    "REASONING_FINAL",
    "REQUEST",
    "RESPONSE",
    "RUN_BEGIN",
    "RUN_END",
    "RUN_META",
    "SCHEMA_VERSION",
    "TURN_BEGIN",
    "TURN_END",
    "OpEvent",
]

EVENT_PREFIX = BOOKKEEPING_PREFIX
"""Every operation-tree ``customType`` starts with this prefix (``sessiontree.op``)."""

SCHEMA_VERSION = 1
"""The ``v`` of every event this library writes."""

RUN_BEGIN = "sessiontree.op.run.begin"
RUN_META = "sessiontree.op.run.meta"
RUN_END = "sessiontree.op.run.end"
TURN_BEGIN = "sessiontree.op.turn.begin"
TURN_END = "sessiontree.op.turn.end"
OP_BEGIN = "sessiontree.op.begin"
OP_END = "sessiontree.op.end"
LOG = "sessiontree.op.log"
ACCOUNTING = "sessiontree.op.accounting"
REASONING = "sessiontree.op.reasoning"
REASONING_FINAL = "sessiontree.op.reasoning.final"
REQUEST = "sessiontree.op.request"
RESPONSE = "sessiontree.op.response"
CHILD = "sessiontree.op.child"
BATCH = "sessiontree.op.batch"

EVENT_TYPES = frozenset({
    RUN_BEGIN, RUN_META, RUN_END, TURN_BEGIN, TURN_END, OP_BEGIN, OP_END, LOG, ACCOUNTING,
    REASONING, REASONING_FINAL, REQUEST, RESPONSE, CHILD, BATCH,
})
"""Every ``customType`` the loader understands."""


class OpEvent(msgspec.Struct, frozen=True):
    """One change to an operation tree.

    Attributes:
        custom_type: the event kind, one of :data:`EVENT_TYPES`.
        data: the event's JSON object (see REFERENCE.md 14.4 for each kind's keys).
    """

    custom_type: str
    data: dict[str, Any]
