"""The operation-tree builder, default mode (the reference's quirks fixed).

``OpTreeBuilder`` records one agent run: turns, operations, logs, accounting, reasoning,
request/response payloads and sub-agent runs, with totals kept up to date incrementally in
two scopes (the run alone, and the run with every descendant run). Every change is also an
:class:`~.events.OpEvent` handed to the builder's listeners: a
:class:`~.persist.SessionSink` writes them into a pi session file, and folding them rebuilds
the same tree (:func:`~.persist.fold_events`).

Differences from the reference (REFERENCE.md 14.2, D1–D16; the compatibility mode is
:class:`~.compat.CompatTreeBuilder`):

* unknown op, turn and run ids raise instead of being ignored (D2); turn indexes are unique
  non-negative integers and ``begin_turn()`` takes the next one (D3);
* a child run links only under an op of kind ``session``, once, never to its own ancestor (D4);
* totals exist from the start, per run (``own``) and rolled up over sub-agents (``rollup``),
  updated in O(depth) per event, so a parent is never stale (D5, D16);
* costs are exact ``Decimal`` values with their source; usage is typed and normalised (D6, D7);
* repeated request/response records merge as JSON Merge Patch (D8); logs are copied (D9);
* paths are global from the root once linked, assigned when the op begins (D10);
* ``render_ascii()`` renders every depth with full lines and totals (D11);
* ``end_session`` checks every totals field against a full recompute, in both scopes (D12);
* durations come from a monotonic clock when there is one (D13); ending twice raises (D14);
* kinds and timestamps are validated (D15).

Each difference has a test named ``test_d<N>_...`` in ``tests/optree/test_default_mode.py``
that runs the same calls through both modes. Listeners are called synchronously after each
change is applied; a builder is not thread-safe (use one builder per run and per thread).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, overload

import msgspec
from msgspec import UNSET

from .._time import uuid7
from . import _apply as A
from . import events as ev
from ._codec import (
    data_accounting,
    data_child,
    data_log,
    data_op_begin,
    data_op_end,
    data_payload,
    data_reasoning,
    data_reasoning_final,
    data_run_begin,
    data_run_end,
    data_turn_begin,
    data_turn_end,
    events_of_run,
)
from ._totals import diff_totals, recompute
from .compat import CompatTreeBuilder
from .errors import CycleError, InvalidOpTree, RunEnded
from .events import OpEvent
from .model import (
    Accounting,
    Log,
    Op,
    OpTree,
    ParentRef,
    Payload,
    ReasoningChunk,
    Run,
    Totals,
    Usage,
    decimal_of,
)
from .pricing import PriceTable, builtin_prices, price_accounting
from .render import Flattened, flatten, render_ascii, to_reference_node

__all__ = ["Listener", "OpTreeBuilder", "create_builder"]

_log = logging.getLogger("sessiontree.optree")

Listener = Callable[[OpEvent], None]
"""Called with every event a builder emits, after the change is applied."""

_DEFAULT: Any = object()


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _meta(meta: Mapping[str, Any] | None, snake: str, camel: str) -> Any:
    if not meta:
        return None
    return meta.get(snake, meta.get(camel))


class OpTreeBuilder:
    """Build the operation tree of one agent run (default mode).

    Args:
        meta: ``{traceId, agentId, callPath, sessionTitle, attributes}`` as the reference
            takes it (snake_case keys work too); the keyword arguments below override it.
        trace_id, agent_id, call_path, title, attributes: the run's identity.
        clock: current time in epoch milliseconds (default: the wall clock).
        ids: returns a fresh id for each run, turn and op (default: UUIDv7 strings).
        monotonic: seconds from a monotonic clock, for durations (default: ``time.monotonic``
            with the wall clock, none with an injected clock; durations then come from
            ``clock`` and are never negative).
        prices: the price table for accounting entries that have usage but no cost (default:
            the table shipped with sessiontree; :data:`~.pricing.NO_PRICES` prices nothing).
        sink: where events go, e.g. a :class:`sessiontree.Session` (wrapped in a
            :class:`~.persist.SessionSink`) or any callable taking an :class:`OpEvent`.
        on_update: a callback called with every event (same as :meth:`subscribe`).

    Raises:
        InvalidOpTree: invalid metadata.
    """

    def __init__(self, meta: Mapping[str, Any] | None = None, *, trace_id: str | None = None,
                 agent_id: str | None = None, call_path: str | None = None,
                 title: str | None = None, attributes: Mapping[str, Any] | None = None,
                 clock: Callable[[], int] | None = None, ids: Callable[[], str] | None = None,
                 monotonic: Callable[[], float] | None = _DEFAULT,
                 prices: PriceTable | None = None, sink: Any = None,
                 on_update: Listener | None = None,
                 _tree: OpTree | None = None, _parent: ParentRef | None = None,
                 _listeners: list[Listener] | None = None) -> None:
        self._clock: Callable[[], int] = clock or _wall_ms
        self._ids: Callable[[], str] = ids or uuid7
        if monotonic is _DEFAULT:
            monotonic = time.monotonic if clock is None else None
        self._monotonic: Callable[[], float] | None = monotonic
        self._prices: PriceTable = prices if prices is not None else builtin_prices()
        self._listeners: list[Listener] = _listeners if _listeners is not None else []
        if sink is not None:
            self._listeners.append(_as_listener(sink))
        if on_update is not None:
            self._listeners.append(on_update)
        self._mono_start: dict[str, float] = {}
        self.warnings: list[str] = []
        self._tree_ref = _tree if _tree is not None else OpTree()

        def pick(value: Any, snake: str, camel: str) -> Any:
            return value if value is not None else _meta(meta, snake, camel)

        run = Run(
            run_id=self._ids(), started_at=self._clock(),
            trace_id=pick(trace_id, "trace_id", "traceId"),
            agent_id=pick(agent_id, "agent_id", "agentId"),
            call_path=pick(call_path, "call_path", "callPath"),
            title=pick(title, "title", "sessionTitle") or "",
            attributes=A.json_copy(dict(pick(attributes, "attributes", "attributes") or {})),
        )
        for name in ("trace_id", "agent_id", "call_path", "title"):
            value = getattr(run, name)
            if value is not None and not isinstance(value, str):
                raise InvalidOpTree(f"{name} must be a string, got {value!r}")
        A.begin_run(self.tree, run, _parent)
        self._run_id = run.run_id
        self._emit(ev.RUN_BEGIN, lambda: data_run_begin(run))

    # -- plumbing

    @property
    def tree(self) -> OpTree:
        """The tree this run belongs to (shared with linked parent and child runs)."""
        tree = self._tree_ref
        while tree._forward is not None:
            tree = tree._forward
        self._tree_ref = tree
        return tree

    @property
    def run_id(self) -> str:
        """This run's id."""
        return self._run_id

    @property
    def run(self) -> Run:
        """This run's live node."""
        return self.tree.runs[self._run_id]

    @property
    def totals(self) -> Totals:
        """This run's own totals (its ops only); read, do not change."""
        return self.run.own

    @property
    def rollup(self) -> Totals:
        """This run's totals with every descendant run; read, do not change."""
        return self.run.rollup

    def subscribe(self, callback: Listener) -> Callable[[], None]:
        """Call ``callback`` with every event of this run (and of runs spawned from it).

        Returns:
            A function that removes the callback.
        """
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    def _emit(self, custom_type: str, make: Callable[[], dict[str, Any]]) -> None:
        if self._listeners:
            event = OpEvent(custom_type, make())
            for listener in list(self._listeners):
                listener(event)

    def _op(self, op_id: str) -> Op:
        op = self.tree.op(op_id)
        if op.run_id != self._run_id:
            raise InvalidOpTree(f"op {op_id!r} belongs to run {op.run_id!r}, not to this "
                                f"builder's run {self._run_id!r}")
        return op

    # -- run

    def get_session(self) -> Run:
        """The live run node (the reference's ``getSession()``)."""
        return self.run

    def set_session_title(self, title: str) -> None:
        """Set the run's title."""
        A.set_run_meta(self.tree, self._run_id, title=title)
        self._emit(ev.RUN_META, lambda: {"v": 1, "run": self._run_id, "title": title})

    def set_latest_status(self, status: str) -> None:
        """Set the run's latest progress status."""
        A.set_run_meta(self.tree, self._run_id, status=status)
        self._emit(ev.RUN_META, lambda: {"v": 1, "run": self._run_id, "status": status})

    def check_totals(self) -> list[str]:
        """Compare the incremental totals of this run and its descendants with a full
        recompute; returns one line per difference (empty when they agree)."""
        full = recompute(self.tree)
        problems = []
        for run in self.tree.subtree(self.run):
            own, rollup = full[run.run_id]
            for scope, expected in (("own", own), ("rollup", rollup)):
                differs = diff_totals(getattr(run, scope), expected)
                if differs:
                    problems.append(f"run {run.run_id}: incremental {scope} totals differ from a "
                                    f"full recompute in {', '.join(differs)}")
        return problems

    def end_session(self, success: bool = True, error: str | None = None) -> list[str]:
        """End the run: check every totals field against a full recompute (D12), then record
        the end time, ``success`` and ``error`` exactly as given.

        Returns:
            The warnings of the totals check (also in ``warnings`` and on the
            ``sessiontree.optree`` logger); an empty list when the totals agree.

        Raises:
            RunEnded: the run has ended already (D14).
            InvalidOpTree: ``success`` is not a boolean or ``error`` not a string.
        """
        run = self.run
        if run.ended_at is not None:
            raise RunEnded(f"run {self._run_id!r} has ended already; end_session is called once")
        found = self.check_totals()
        A.end_run(self.tree, self._run_id, self._clock(), success, error)
        for message in found:
            self.warnings.append(message)
            _log.warning("%s", message)
        self._emit(ev.RUN_END, lambda: data_run_end(run))
        return found

    # -- turns

    def begin_turn(self, index: int | None = None,
                   attributes: Mapping[str, Any] | None = None) -> str:
        """Begin a turn; without ``index`` it takes the next one (1 for the first).

        Returns:
            The turn id (``begin_op`` accepts it in place of the index).

        Raises:
            InvalidOpTree: the index is negative, not an integer, or already used.
            RunEnded: the run has ended.
        """
        run = self.run
        if index is None:
            index = max((t.index for t in run.turns), default=0) + 1
        turn = A.begin_turn(self.tree, self._run_id, self._ids(), index, self._clock(),
                            attributes)
        self._emit(ev.TURN_BEGIN, lambda: data_turn_begin(turn))
        return turn.turn_id

    def end_turn(self, turn: int | str, attributes: Mapping[str, Any] | None = None) -> None:
        """End a turn (by index or id), merging ``attributes`` into its attributes.

        Raises:
            TurnNotFound: no such turn. InvalidOpTree: the turn has ended already.
        """
        extra = A.json_copy(dict(attributes)) if attributes else None
        node = A.end_turn(self.tree, self._run_id, turn, self._clock(), extra)
        self._emit(ev.TURN_END, lambda: data_turn_end(node, extra))

    # -- ops

    def begin_op(self, turn: int | str, kind: str,
                 attributes: Mapping[str, Any] | None = None) -> str:
        """Begin an op at the end of a turn (by index or id).

        Args:
            turn: the turn's index or id.
            kind: ``llm``, ``tool``, ``session`` (a sub-agent call), ``system`` or a
                namespaced custom kind (``myorg.retrieval``).
            attributes: ``provider``, ``model``, ``name``... (copied).

        Returns:
            The op id.

        Raises:
            TurnNotFound: no such turn (the reference would make an invisible orphan op).
            InvalidOpTree: an invalid kind.
        """
        op = A.begin_op(self.tree, self._run_id, self._ids(), turn, kind, self._clock(),
                        attributes)
        if self._monotonic is not None:
            self._mono_start[op.op_id] = self._monotonic()
        self._emit(ev.OP_BEGIN, lambda: data_op_begin(op, op.attributes))
        return op.op_id

    def end_op(self, op_id: str, status: str = "ok",
               attributes: Mapping[str, Any] | None = None) -> None:
        """End an op once with ``status`` (``ok``, ``failed``...), merging ``attributes``.

        Raises:
            OpNotFound: no such op. OpEnded: the op has ended already.
        """
        op = self._op(op_id)
        duration = None
        start = self._mono_start.get(op_id)
        if start is not None and self._monotonic is not None and op.ended_at is None:
            duration = max(0, round((self._monotonic() - start) * 1000))
        extra = A.json_copy(dict(attributes)) if attributes else None
        A.end_op(self.tree, op_id, self._clock(), status, extra, duration)
        self._mono_start.pop(op_id, None)
        self._emit(ev.OP_END, lambda: data_op_end(op, extra))

    def append_log(self, op_id: str, log: Log | Mapping[str, Any]) -> Log:
        """Append a log to an op; a copy is stored with the op's global and local paths.

        Args:
            op_id: the op.
            log: a :class:`Log`, or a dict in ai-agent's ``LogEntry`` shape (not changed).

        Returns:
            The stored log.
        """
        op = self._op(op_id)
        value = log if isinstance(log, Log) else Log.from_mapping(log)
        if value.fields:
            value = msgspec.structs.replace(value, fields=A.json_copy(value.fields))
        stored = A.append_log(self.tree, op_id, value)
        self._emit(ev.LOG, lambda: data_log(op, stored))
        return stored

    def append_accounting(self, op_id: str, entry: Accounting | Mapping[str, Any], *,
                          convention: str = "reference") -> Accounting:
        """Append an accounting record; a record with usage and no cost is priced from the
        builder's price table (``cost_source="computed"``).

        Args:
            op_id: the op.
            entry: an :class:`Accounting`, or a dict in ai-agent's ``AccountingEntry`` shape.
            convention: the token convention of a dict's ``tokens`` (see
                :meth:`Usage.from_reference`).

        Returns:
            The stored (normalised, priced) record.
        """
        op = self._op(op_id)
        value = entry if isinstance(entry, Accounting) else \
            Accounting.from_reference(entry, convention=convention)
        value = price_accounting(value, self._prices)
        A.append_accounting(self.tree, op_id, value)
        self._emit(ev.ACCOUNTING, lambda: data_accounting(op, value))
        return value

    def account_llm(self, op_id: str, usage: Usage, *, provider: str | None = None,
                    model: str | None = None, cost_usd: Any = None, status: str = "ok",
                    latency_ms: float | None = None, stop_reason: str | None = None,
                    actual_provider: str | None = None, actual_model: str | None = None,
                    timestamp: int | None = None) -> Accounting:
        """Record one model call's usage on an op (provider and model default to the op's
        ``provider`` and ``model`` attributes; a ``cost_usd`` given wins over the table)."""
        op = self._op(op_id)
        amount = decimal_of(cost_usd)
        entry = Accounting(
            timestamp=timestamp if timestamp is not None else self._clock(), kind="llm",
            status=status, latency_ms=latency_ms,
            provider=provider if provider is not None else op.attributes.get("provider"),
            model=model if model is not None else op.attributes.get("model"),
            actual_provider=actual_provider, actual_model=actual_model, usage=usage,
            cost_usd=amount, cost_source="provider" if amount is not None else "none",
            stop_reason=stop_reason)
        return self.append_accounting(op_id, entry)

    def append_reasoning_chunk(self, op_id: str, text: str) -> None:
        """Append a streamed reasoning chunk (timestamped now)."""
        op = self._op(op_id)
        ts = self._clock()
        A.append_reasoning(self.tree, op_id, text, ts)
        self._emit(ev.REASONING, lambda: data_reasoning(op, ReasoningChunk(text, ts)))

    def set_reasoning_final(self, op_id: str, text: str) -> None:
        """Set the op's final reasoning text (a later call replaces it)."""
        op = self._op(op_id)
        A.set_reasoning_final(self.tree, op_id, text)
        self._emit(ev.REASONING_FINAL, lambda: data_reasoning_final(op, text))

    def _payload(self, op_id: str, which: str, record: Payload | Mapping[str, Any]) -> Payload:
        op = self._op(op_id)
        value = record if isinstance(record, Payload) else Payload.from_mapping(record)
        if value.payload is not UNSET:
            value = msgspec.structs.replace(value, payload=A.json_copy(value.payload))
        stored = A.set_payload(self.tree, op_id, which, value)
        self._emit(ev.REQUEST if which == "request" else ev.RESPONSE,
                   lambda: data_payload(op, value))
        return stored

    def set_request(self, op_id: str, record: Payload | Mapping[str, Any]) -> Payload:
        """Set the op's request record ``{kind, payload, size}``; a later call merges its
        payload as JSON Merge Patch (``null`` deletes a key, arrays replace).

        Returns:
            The stored (merged) record.
        """
        return self._payload(op_id, "request", record)

    def set_response(self, op_id: str, record: Payload | Mapping[str, Any]) -> Payload:
        """Set the op's response record ``{payload, size, truncated}`` (merged like requests;
        ``truncated`` is true only when the producer truncated the payload)."""
        return self._payload(op_id, "response", record)

    # -- sub-agent runs

    def spawn_child(self, op_id: str, meta: Mapping[str, Any] | None = None,
                    **kwargs: Any) -> OpTreeBuilder:
        """Start a sub-agent run linked under a ``session`` op of this run.

        The child shares this builder's tree, clock, ids, prices and listeners, so its
        events reach the same sink and its totals roll up at once.

        Raises:
            InvalidOpTree: the op is not of kind ``session`` or already has a child.
        """
        op = self._op(op_id)
        kwargs.setdefault("clock", self._clock)
        kwargs.setdefault("ids", self._ids)
        kwargs.setdefault("monotonic", self._monotonic)
        kwargs.setdefault("prices", self._prices)
        return OpTreeBuilder(meta, _tree=self.tree, _parent=ParentRef(run=self._run_id,
                                                                        op_id=op.op_id),
                             _listeners=self._listeners, **kwargs)

    def attach_child_session(self, op_id: str, child: OpTreeBuilder | Run | str, *,
                             file: str | None = None, record_child: bool | None = None) -> None:
        """Link a child run under a ``session`` op of this run.

        Args:
            op_id: the ``session`` op.
            child: a builder of another run (its tree is merged into this one), a run of this
                tree, or a run id; with ``file``, a run id stored in another session file.
            file: the session file (relative name) holding the child run, when it is not the
                file this run is written to; for a session in a database, the id of the
                session of the same store that holds it.
            record_child: write the child's events to this builder's listeners before the
                link. Default: when the child builder has listeners of its own that this one
                does not share (it was recorded elsewhere) no; when it has none, yes.

        Raises:
            InvalidOpTree: the op is not of kind ``session``. CycleError: the op has a child
                already, the child has a parent, or the child is an ancestor of the op.
        """
        op = self._op(op_id)
        if isinstance(child, OpTreeBuilder):
            builder: OpTreeBuilder | None = child
            child_tree, child_id = child.tree, child.run_id
        else:
            builder = None
            child_tree, child_id = self.tree, child.run_id if isinstance(child, Run) else child
        tree = self.tree
        A._live_op(tree, op_id)  # raises RunEnded before anything changes
        if child_tree is not tree:
            if op.kind != "session":
                raise InvalidOpTree(f"a child run links only to an op of kind 'session'; op "
                                    f"{op_id!r} is {op.kind!r}")
            if op.child is not None:
                raise CycleError(f"op {op_id!r} already links child run {op.child!r}")
            child_run = child_tree.run(child_id)
            if child_run.parent is not None:
                raise CycleError(f"run {child_id!r} already has a parent")
            _merge_trees(tree, child_tree)
        elif file is None:
            tree.run(child_id)
        if record_child is None:
            record_child = builder is not None and not builder._listeners
        if record_child and self._listeners and file is None:
            child_run = tree.run(child_id)
            A._check_link(tree, op, child_run)
            for event in events_of_run(tree, child_run, with_parent=False):
                for listener in list(self._listeners):
                    listener(event)
        A.link_child(tree, op_id, child_id, file)
        self._emit(ev.CHILD, lambda: data_child(op, child_id, file))

    # -- reading

    def get_op_path(self, op_id: str) -> str:
        """The op's global path (``1-2.3-1``), stable once linked.

        Raises:
            OpNotFound: no such op.
        """
        return self.tree.op(op_id).path

    def flatten(self) -> Flattened:
        """Logs and accounting of this run and its descendant runs, stably sorted by time."""
        return flatten(self.tree, self.run)

    def render_ascii(self, style: Literal["tree", "compat"] = "tree") -> str:
        """The run as text: ``tree`` (every depth, totals per run) or ``compat`` (the
        reference's layout, for the same data)."""
        return render_ascii(self.tree, self.run, style=style)

    def to_reference_snapshot(self) -> dict[str, Any]:
        """ai-agent's snapshot shape ``{"version": 1, "opTree": <SessionNode>}``."""
        return {"version": 1, "opTree": to_reference_node(self.tree, self.run)}

    def __repr__(self) -> str:
        run = self.run
        return (f"<OpTreeBuilder run={run.run_id} turns={len(run.turns)} "
                f"ended={run.ended_at is not None}>")


def _merge_trees(into: OpTree, other: OpTree) -> None:
    clash = (into.runs.keys() & other.runs.keys()) or (into.ops.keys() & other.ops.keys())
    if clash:
        raise InvalidOpTree(f"cannot merge operation trees: ids {sorted(clash)[:3]} are in both")
    into.runs.update(other.runs)
    into.ops.update(other.ops)
    into._turns.update(other._turns)
    into._turn_ids.update(other._turn_ids)
    into._pending.update(other._pending)
    into.problems.extend(other.problems)
    other.runs, other.ops, other._turns, other._turn_ids, other._pending = {}, {}, {}, {}, {}
    other._forward = into


def _as_listener(sink: Any) -> Listener:
    if hasattr(sink, "append_custom"):
        from .persist import SessionSink

        return SessionSink(sink)
    if callable(sink):
        return sink  # type: ignore[no-any-return]
    raise InvalidOpTree(f"a sink must be a Session or a callable, got {type(sink).__name__}")


@overload
def create_builder(meta: Any = ..., *, mode: Literal["default"] = ...,
                   **kwargs: Any) -> OpTreeBuilder: ...


@overload
def create_builder(meta: Any = ..., *, mode: Literal["compat"], **kwargs: Any) -> CompatTreeBuilder: ...


def create_builder(meta: Any = None, *, mode: Literal["default", "compat"] = "default",
                   **kwargs: Any) -> OpTreeBuilder | CompatTreeBuilder:
    """A builder in either mode.

    Args:
        meta: the reference's constructor metadata.
        mode: ``default`` (:class:`OpTreeBuilder`, the quirks fixed) or ``compat``
            (:class:`CompatTreeBuilder`, the reference byte for byte).
        **kwargs: passed to the builder (``clock``, ``ids``; ``warn`` for compat; ``sink``,
            ``prices``... for default).
    """
    if mode == "compat":
        return CompatTreeBuilder(UNSET if meta is None else meta, **kwargs)
    if mode == "default":
        return OpTreeBuilder(meta, **kwargs)
    raise InvalidOpTree(f"mode must be 'default' or 'compat', got {mode!r}")
