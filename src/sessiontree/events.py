"""The event bus of a session: hooks around navigation, forks, compaction and model context.

Every :class:`~sessiontree.Session` has one bus, ``session.events``. Subscribe with
:meth:`EventBus.on`; it returns a function that unsubscribes::

    def keep_quiet(prep: TreePreparation) -> BeforeTreeResult | None:
        if prep.user_wants_summary and not prep.entries_to_summarize:
            return BeforeTreeResult(cancel=True)
        return None

    off = session.events.on("session_before_tree", keep_quiet)

Events (name: payload -> what a handler may return):

* ``session_before_tree``: :class:`TreePreparation` -> :class:`BeforeTreeResult` (cancel, or
  supply the summary, instructions, a label)
* ``session_tree``: :class:`TreeEvent` -> nothing
* ``session_before_branch``: :class:`BranchPreparation` -> :class:`BeforeBranchResult` (cancel)
* ``session_branch``: :class:`BranchEvent` -> nothing
* ``session_before_compact``: :class:`CompactPreparation` -> :class:`BeforeCompactResult`
  (cancel, or supply the compaction)
* ``session_compact``: :class:`CompactEvent` -> nothing
* ``context``: :class:`ContextEvent` -> :class:`ContextResult`, a message list, or ``None``

Around the agent loop (:mod:`sessiontree.agent`; the payload and result types live there):

* ``before_agent_start``: a prompt was submitted, nothing written yet -> may add a custom
  message (written after the prompt) or change the system prompt for this run
* ``turn_start`` / ``turn_end``: one model call and its tool calls -> nothing
* ``tool_call``: a tool is about to run -> may block it (``block=True``, the model gets the
  reason as an error result) or rewrite its arguments
* ``tool_result``: a tool ran -> may replace its result

Rules:

* Handlers run in subscription order. For a ``session_before_*`` event the first result with
  ``cancel=True`` stops the operation at once (later handlers are not called); otherwise the
  last non-``None`` result is the one used (pi's rule). A cancelled operation writes nothing
  and leaves the leaf where it was; the operation (``navigate_tree``, ``pop``, the forks,
  ``compact``) then raises :class:`OperationCancelled` naming the handler.
* ``before_agent_start``, ``tool_call`` and ``tool_result`` decide like ``session_before_*``
  events (a result with ``block=True`` stops like ``cancel=True``); a handler that raises
  stops that step with :class:`HookFailed`. ``turn_start`` and ``turn_end`` are notifications
  like the after-events.
* ``context`` handlers are chained: each gets the messages the previous one returned. They work
  on fresh copies of the messages, so nothing they do changes the session.
* A handler may be a plain function or a coroutine function. The async operations
  (:meth:`EventBus.aemit`, ``Session.anavigate_tree``, ...) await coroutines in the caller's
  event loop. The sync operations run a coroutine to completion in a private event loop: in
  the calling thread when no loop is running there, otherwise in a private worker thread (so
  calling the sync API from async code does not deadlock, but the handler must not rely on
  objects bound to the caller's loop; use the ``a*`` variants from async code).
* A ``before`` or ``context`` handler that raises cancels only that operation: the operation
  raises :class:`HookFailed` naming the handler, writes nothing and leaves the leaf where it
  was. The bus and other operations keep working.
* An after-event handler (``session_tree``, ``session_branch``, ``session_compact``) runs when
  the operation is already written. If it raises, the error goes to the bus's ``on_error``
  callback, or else is reported as a :class:`HookWarning` naming the handler; the operation's
  result stands.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union, overload

import msgspec

from .errors import SessionTreeError
from .summarize.base import CancelToken

if TYPE_CHECKING:
    from .context import SessionContext
    from .entries import AnyEntry, BranchSummary, Compaction, FileDetails
    from .messages import AgentMessage
    from .session import Session

__all__ = [
    "AFTER_EVENTS",
    "AGENT_DECISIONS",
    "AGENT_NOTIFICATIONS",
    "BEFORE_EVENTS",
    "EVENTS",
    "BranchEvent",
    "BranchPreparation",
    "BeforeBranchResult",
    "CompactEvent",
    "CompactPreparation",
    "BeforeCompactResult",
    "ContextEvent",
    "ContextResult",
    "EventBus",
    "EventName",
    "HookFailed",
    "HookWarning",
    "OperationCancelled",
    "TreeEvent",
    "TreePreparation",
    "BeforeTreeResult",
    "context_with_messages",
    "handler_name",
]

EventName = Literal[
    "session_before_tree", "session_tree",
    "session_before_branch", "session_branch",
    "session_before_compact", "session_compact",
    "context",
    "before_agent_start", "turn_start", "turn_end", "tool_call", "tool_result",
]

BEFORE_EVENTS = frozenset({"session_before_tree", "session_before_branch", "session_before_compact"})
AFTER_EVENTS = frozenset({"session_tree", "session_branch", "session_compact"})
AGENT_DECISIONS = frozenset({"before_agent_start", "tool_call", "tool_result"})
AGENT_NOTIFICATIONS = frozenset({"turn_start", "turn_end"})
EVENTS = BEFORE_EVENTS | AFTER_EVENTS | {"context"} | AGENT_DECISIONS | AGENT_NOTIFICATIONS
_DECIDING = BEFORE_EVENTS | AGENT_DECISIONS
_NOTIFYING = AFTER_EVENTS | AGENT_NOTIFICATIONS


# -- errors -------------------------------------------------------------------------------------


class HookFailed(SessionTreeError):
    """A handler raised; the operation it was part of was cancelled and wrote nothing.

    Attributes:
        event: the event name.
        handler: the handler's qualified name (``module.function``).
    The handler's exception is ``__cause__``.
    """

    def __init__(self, event: str, handler: str, error: BaseException) -> None:
        self.event = event
        self.handler = handler
        outcome = ("the operation had already been written and stands" if event in _NOTIFYING
                   else "the operation was cancelled and nothing was written")
        super().__init__(f"{event} handler {handler} raised {type(error).__name__}: {error}; "
                         f"{outcome}")


class OperationCancelled(SessionTreeError):
    """A ``session_before_*`` handler cancelled the operation; nothing was written.

    Attributes:
        event: the event name.
        handler: the qualified name of the handler that cancelled.
    """

    def __init__(self, event: str, handler: str) -> None:
        self.event = event
        self.handler = handler
        super().__init__(f"{event} handler {handler} cancelled the operation; nothing was written")


class HookWarning(UserWarning):
    """An after-event handler raised; the operation had already been written and stands."""


# -- payloads -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TreePreparation:
    """``session_before_tree``: a leaf move (``navigate_tree``, ``pop``) about to happen.

    Attributes:
        session: the session.
        target_id: the entry the user chose (``None``: before the first entry).
        old_leaf_id: the leaf being left.
        new_leaf_id: where the leaf will go (the target, or its parent for a user message or
            ``custom_message`` target).
        common_ancestor_id: the deepest common ancestor of the old leaf and the target
            (``None`` when they share none).
        entries_to_summarize: the abandoned entries, old leaf back to (not including) the
            common ancestor, in chronological order.
        user_wants_summary: whether the caller asked for a summary.
        instructions: the caller's extra instructions for the summarizer, if any.
        label: the label the caller asked for, if any.
        cancel: the operation's cancellation token; a handler may cancel it (same effect as
            returning ``BeforeTreeResult(cancel=True)``) or pass it to its own summarizer.
    """

    session: Session
    target_id: str | None
    old_leaf_id: str | None
    new_leaf_id: str | None
    common_ancestor_id: str | None
    entries_to_summarize: list[AnyEntry]
    user_wants_summary: bool
    instructions: str | None = None
    label: str | None = None
    cancel: CancelToken = field(default_factory=CancelToken)


@dataclass(frozen=True, kw_only=True)
class BeforeTreeResult:
    """What a ``session_before_tree`` handler may return.

    Attributes:
        cancel: stop the navigation; nothing is written, the leaf stays.
        summary: a summary to write instead of running the summarizer (the entry gets
            ``fromHook: true``). Used whether or not the caller asked for a summary.
        details: the ``details`` stored with a supplied summary (omitted when ``None``).
        instructions: instructions for the built-in summarizer, added to the caller's (or
            replacing them with ``replace_instructions``).
        replace_instructions: see ``instructions``.
        label: a label to set instead of the caller's.
    """

    cancel: bool = False
    summary: str | None = None
    details: Any = None
    instructions: str | None = None
    replace_instructions: bool = False
    label: str | None = None


@dataclass(frozen=True, kw_only=True)
class TreeEvent:
    """``session_tree``: the leaf moved.

    Attributes:
        session: the session.
        new_leaf_id: the leaf now (the summary entry's id when one was written).
        old_leaf_id: the leaf before.
        target_id: the entry the user chose.
        summary_entry: the ``branch_summary`` written, if any.
        from_hook: whether a handler supplied that summary.
        editor_text: the chosen user or custom message's text (for an editor), if any.
    """

    session: Session
    new_leaf_id: str | None
    old_leaf_id: str | None
    target_id: str | None = None
    summary_entry: BranchSummary | None = None
    from_hook: bool = False
    editor_text: str | None = None


@dataclass(frozen=True, kw_only=True)
class BranchPreparation:
    """``session_before_branch``: a fork into a new session is about to be written.

    Attributes:
        session: the source session.
        entry_id: the entry the fork ends at (``create_branched_session``), or ``None`` for a
            copy of every branch (``fork_from``).
        mode: ``"path"`` (root to ``entry_id``) or ``"all"`` (every entry).
        in_memory: whether the fork stays in memory.
    """

    session: Session
    entry_id: str | None
    mode: Literal["path", "all"]
    in_memory: bool = False


@dataclass(frozen=True, kw_only=True)
class BeforeBranchResult:
    """What a ``session_before_branch`` handler may return: ``cancel`` stops the fork."""

    cancel: bool = False


@dataclass(frozen=True, kw_only=True)
class BranchEvent:
    """``session_branch``: a fork was written.

    Attributes:
        session: the source session.
        new_session: the fork (open; the caller closes it).
        previous_file: the source's file (``None`` in memory).
        new_file: the fork's file (``None`` in memory, or before its first entry).
        entry_id: as in :class:`BranchPreparation`.
        mode: as in :class:`BranchPreparation`.
    """

    session: Session
    new_session: Session
    previous_file: str | None
    new_file: str | None
    entry_id: str | None
    mode: Literal["path", "all"]


@dataclass(frozen=True, kw_only=True)
class CompactPreparation:
    """``session_before_compact``: a compaction is about to be computed and appended
    (format-spec.md section 14; the fields are :func:`sessiontree.compaction.prepare_compaction`'s).

    Attributes:
        first_kept_entry_id: the first entry the context keeps after the compaction.
        tokens_before: the estimated context tokens before compacting.
        messages_to_summarize: the history to summarize, oldest first.
        turn_prefix_messages: the start of a turn split by the cut (summarized separately).
        is_split_turn: whether the cut splits a turn.
        previous_summary: the previous compaction's summary, if any.
        file_details: files read and modified by the summarized part.
        previous_compactions: the compactions already on the path, newest first.
        instructions: the caller's extra instructions, if any.
        session: the session.
        cancel: the operation's cancellation token.
    """

    first_kept_entry_id: str
    tokens_before: int
    messages_to_summarize: list[AgentMessage]
    turn_prefix_messages: list[AgentMessage] = field(default_factory=list)
    is_split_turn: bool = False
    previous_summary: str | None = None
    file_details: FileDetails | None = None
    previous_compactions: list[Compaction] = field(default_factory=list)
    instructions: str | None = None
    session: Session | None = None
    cancel: CancelToken = field(default_factory=CancelToken)


@dataclass(frozen=True, kw_only=True)
class BeforeCompactResult:
    """What a ``session_before_compact`` handler may return.

    Attributes:
        cancel: stop the compaction; nothing is written.
        summary: a summary to append instead of running the summarizer (``fromHook: true``).
        first_kept_entry_id: with ``summary``: where the kept part starts (default: the
            preparation's).
        tokens_before: with ``summary``: the tokens before (default: the preparation's).
        details: with ``summary``: the ``details`` to store (omitted when ``None``).
    """

    cancel: bool = False
    summary: str | None = None
    first_kept_entry_id: str | None = None
    tokens_before: int | None = None
    details: Any = None


@dataclass(frozen=True, kw_only=True)
class CompactEvent:
    """``session_compact``: a compaction entry was appended.

    Attributes:
        compaction: the entry written.
        from_hook: whether a handler supplied the summary.
        session: the session.
    """

    compaction: Compaction
    from_hook: bool = False
    session: Session | None = None


@dataclass(frozen=True, kw_only=True)
class ContextEvent:
    """``context``: messages about to be sent to a model.

    Attributes:
        session: the session (read it, do not change it from here).
        leaf_id: the leaf the context was built from.
        messages: a private copy of the messages; a handler may change it in place and return
            ``None``, or return a new list (or a :class:`ContextResult`).
    """

    session: Session
    leaf_id: str | None
    messages: list[AgentMessage]


@dataclass(frozen=True, kw_only=True)
class ContextResult:
    """What a ``context`` handler may return: the messages to send instead."""

    messages: list[AgentMessage]


Payload = Union[TreePreparation, TreeEvent, BranchPreparation, BranchEvent, CompactPreparation,
                CompactEvent, ContextEvent]
BeforeResult = Union[BeforeTreeResult, BeforeBranchResult, BeforeCompactResult]
Handler = Callable[[Any], Any]


def context_with_messages(context: SessionContext, messages: Sequence[AgentMessage]
                          ) -> SessionContext:
    """A copy of ``context`` (same thinking level and model) holding ``messages`` instead."""
    from .context import SessionContext
    from .messages import UnknownMessage

    data: list[Any] = [m.data if isinstance(m, UnknownMessage) else msgspec.to_builtins(m)
                       for m in messages]
    return SessionContext(data, getattr(context, "_thinking_level"), context.model)


def for_model(session: Session, leaf_id: str | None, context: SessionContext) -> SessionContext:
    """``context`` as the session's ``context`` handlers leave it, just before a model call
    (``Session.build_context(for_model=True)``); the session itself is never changed.

    Raises:
        HookFailed: a handler raised.
    """
    messages = session.events.emit("context", ContextEvent(
        session=session, leaf_id=leaf_id, messages=context.copy_messages()))
    return context_with_messages(context, messages)


async def afor_model(session: Session, leaf_id: str | None, context: SessionContext
                     ) -> SessionContext:
    """:func:`for_model` for async code: coroutine handlers awaited in the running loop."""
    messages = await session.events.aemit("context", ContextEvent(
        session=session, leaf_id=leaf_id, messages=context.copy_messages()))
    return context_with_messages(context, messages)


def handler_name(handler: Callable[..., Any]) -> str:
    """``module.qualname`` of a handler, for error messages."""
    target = getattr(handler, "func", handler)  # functools.partial
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    module = getattr(target, "__module__", None)
    return f"{module}.{qualname}" if module else str(qualname)


def _run_coroutine(awaitable: Awaitable[Any]) -> Any:
    """Run an awaitable to completion from sync code, in a private event loop."""
    import asyncio

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiontree-hook") as pool:
        return pool.submit(asyncio.run, wait()).result()


def _context_messages(result: Any, current: list[AgentMessage]) -> list[AgentMessage]:
    if result is None:
        return current
    if isinstance(result, ContextResult):
        return list(result.messages)
    if isinstance(result, Sequence) and not isinstance(result, (str, bytes)):
        return list(result)
    raise TypeError(f"a context handler must return None, a ContextResult or a list of messages, "
                    f"not {type(result).__name__}")


def _stops(result: Any) -> bool:
    """Whether a deciding handler's result ends the round (``cancel=True`` or ``block=True``)."""
    return bool(getattr(result, "cancel", False) or getattr(result, "block", False))


class EventBus:
    """Handlers by event name; see the module documentation for the rules.

    Args:
        on_error: called with a :class:`HookFailed` when an after-event handler raises
            (default: a :class:`HookWarning`).
    """

    def __init__(self, on_error: Callable[[HookFailed], None] | None = None) -> None:
        self._handlers: dict[str, list[Handler]] = {}
        self.on_error = on_error

    # -- subscribing ---------------------------------------------------------------------------

    @overload
    def on(self, event: Literal["session_before_tree"],
           handler: Callable[[TreePreparation], BeforeTreeResult | None
                             | Awaitable[BeforeTreeResult | None]]) -> Callable[[], None]: ...
    @overload
    def on(self, event: Literal["session_tree"],
           handler: Callable[[TreeEvent], object]) -> Callable[[], None]: ...
    @overload
    def on(self, event: Literal["session_before_branch"],
           handler: Callable[[BranchPreparation], BeforeBranchResult | None
                             | Awaitable[BeforeBranchResult | None]]) -> Callable[[], None]: ...
    @overload
    def on(self, event: Literal["session_branch"],
           handler: Callable[[BranchEvent], object]) -> Callable[[], None]: ...
    @overload
    def on(self, event: Literal["session_before_compact"],
           handler: Callable[[CompactPreparation], BeforeCompactResult | None
                             | Awaitable[BeforeCompactResult | None]]) -> Callable[[], None]: ...
    @overload
    def on(self, event: Literal["session_compact"],
           handler: Callable[[CompactEvent], object]) -> Callable[[], None]: ...
    @overload
    def on(self, event: Literal["context"],
           handler: Callable[[ContextEvent], Any]) -> Callable[[], None]: ...
    @overload
    def on(self, event: str, handler: Callable[[Any], Any]) -> Callable[[], None]: ...

    def on(self, event: str, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Subscribe ``handler`` to ``event``; returns a function that unsubscribes it.

        Raises:
            ValueError: an unknown event name.
        """
        if event not in EVENTS:
            raise ValueError(f"unknown event {event!r}; known: {', '.join(sorted(EVENTS))}")
        self._handlers.setdefault(event, []).append(handler)

        def unsubscribe() -> None:
            self.off(event, handler)

        return unsubscribe

    def off(self, event: str, handler: Callable[[Any], Any]) -> None:
        """Unsubscribe ``handler`` from ``event`` (no error if it was not subscribed)."""
        handlers = self._handlers.get(event)
        if handlers and handler in handlers:
            handlers.remove(handler)

    def handlers(self, event: str) -> list[Callable[[Any], Any]]:
        """The handlers of ``event``, in calling order."""
        return list(self._handlers.get(event, ()))

    def has(self, event: str) -> bool:
        """Whether any handler is subscribed to ``event``."""
        return bool(self._handlers.get(event))

    # -- emitting ------------------------------------------------------------------------------

    @overload
    def emit(self, event: Literal["session_before_tree"],
             payload: TreePreparation) -> BeforeTreeResult | None: ...
    @overload
    def emit(self, event: Literal["session_before_branch"],
             payload: BranchPreparation) -> BeforeBranchResult | None: ...
    @overload
    def emit(self, event: Literal["session_before_compact"],
             payload: CompactPreparation) -> BeforeCompactResult | None: ...
    @overload
    def emit(self, event: Literal["context"], payload: ContextEvent) -> list[AgentMessage]: ...
    @overload
    def emit(self, event: Literal["session_tree", "session_branch", "session_compact"],
             payload: TreeEvent | BranchEvent | CompactEvent) -> None: ...
    @overload
    def emit(self, event: str, payload: Any) -> Any: ...

    def emit(self, event: str, payload: Any) -> Any:
        """Call the handlers of ``event`` (sync; coroutines run in a private loop).

        Returns:
            ``session_before_*``: the result to use (the first one with ``cancel=True``, else
            the last one that is not ``None``), or ``None``. ``context``: the messages. After
            events: ``None``.

        Raises:
            HookFailed: a ``before`` or ``context`` handler raised.
        """
        if event == "context":
            messages = self._context_copy(payload)
            for handler in self.handlers(event):
                result = self._call(event, handler, payload, messages)
                messages = _context_messages(result, messages)
            return messages
        return self.decide(event, payload)[0]

    def before(self, event: str, payload: Any) -> Any:
        """:meth:`emit` for a ``session_before_*`` event (the name reads better at call sites)."""
        if event not in BEFORE_EVENTS:
            raise ValueError(f"{event!r} is not a session_before_* event")
        return self.emit(event, payload)

    def decide(self, event: str, payload: Any) -> tuple[Any, str | None]:
        """Like :meth:`emit`, also returning the name of the handler whose result is used."""
        chosen: Any = None
        decider: str | None = None
        for handler in self.handlers(event):
            result = self._call(event, handler, payload, None)
            if event in _DECIDING and result is not None:
                chosen, decider = result, handler_name(handler)
                if _stops(result):
                    break
        return chosen, decider

    @overload
    async def aemit(self, event: Literal["session_before_tree"],
                    payload: TreePreparation) -> BeforeTreeResult | None: ...
    @overload
    async def aemit(self, event: Literal["session_before_branch"],
                    payload: BranchPreparation) -> BeforeBranchResult | None: ...
    @overload
    async def aemit(self, event: Literal["session_before_compact"],
                    payload: CompactPreparation) -> BeforeCompactResult | None: ...
    @overload
    async def aemit(self, event: Literal["context"],
                    payload: ContextEvent) -> list[AgentMessage]: ...
    @overload
    async def aemit(self, event: Literal["session_tree", "session_branch", "session_compact"],
                    payload: TreeEvent | BranchEvent | CompactEvent) -> None: ...
    @overload
    async def aemit(self, event: str, payload: Any) -> Any: ...

    async def aemit(self, event: str, payload: Any) -> Any:
        """:meth:`emit` for async code: coroutine handlers are awaited in the running loop."""
        if event == "context":
            messages = self._context_copy(payload)
            for handler in self.handlers(event):
                result = await self._acall(event, handler, payload, messages)
                messages = _context_messages(result, messages)
            return messages
        return (await self.adecide(event, payload))[0]

    async def adecide(self, event: str, payload: Any) -> tuple[Any, str | None]:
        """:meth:`decide` for async code."""
        chosen: Any = None
        decider: str | None = None
        for handler in self.handlers(event):
            result = await self._acall(event, handler, payload, None)
            if event in _DECIDING and result is not None:
                chosen, decider = result, handler_name(handler)
                if _stops(result):
                    break
        return chosen, decider

    # -- internals -----------------------------------------------------------------------------

    @staticmethod
    def _context_copy(payload: ContextEvent) -> list[AgentMessage]:
        return copy.deepcopy(list(payload.messages))

    @staticmethod
    def _context_payload(payload: Any, messages: list[AgentMessage] | None) -> Any:
        if messages is None:
            return payload
        return ContextEvent(session=payload.session, leaf_id=payload.leaf_id, messages=messages)

    def _call(self, event: str, handler: Handler, payload: Any,
              messages: list[AgentMessage] | None) -> Any:
        try:
            result = handler(self._context_payload(payload, messages))
            if isinstance(result, Awaitable):
                result = _run_coroutine(result)
        except Exception as exc:  # noqa: BLE001 - reported by name, never swallowed
            return self._failed(event, handler, exc)
        return result

    async def _acall(self, event: str, handler: Handler, payload: Any,
                     messages: list[AgentMessage] | None) -> Any:
        try:
            result = handler(self._context_payload(payload, messages))
            if isinstance(result, Awaitable):
                result = await result
        except Exception as exc:  # noqa: BLE001 - reported by name, never swallowed
            return self._failed(event, handler, exc)
        return result

    def _failed(self, event: str, handler: Handler, exc: Exception) -> None:
        error = HookFailed(event, handler_name(handler), exc)
        error.__cause__ = exc
        if event not in _NOTIFYING:
            raise error
        if self.on_error is not None:
            self.on_error(error)
        else:
            warnings.warn(HookWarning(str(error)), stacklevel=4)
        return None

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={len(v)}" for k, v in self._handlers.items() if v)
        return f"<EventBus {counts or 'no handlers'}>"
