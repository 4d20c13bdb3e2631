"""The agent loop over a session tree: :class:`AsyncAgentSession` and its sync twin
:class:`AgentSession` (same method names).

One run (``prompt``): ``before_agent_start`` (may add a message or change the system prompt;
nothing is written before it) -> the prompt is appended -> turns until the model stops: build
the context from the leaf -> ``context`` handlers -> stream the model's reply (deltas to the
callback) -> append it -> run each tool call (``tool_call`` may block or rewrite it,
``tool_result`` may replace the result) and append each result -> the next turn.

Invariants:
* Every message is appended as soon as it is complete; nothing is appended half-done. A
  cancelled model call appends nothing; a cancel during tool calls lets the running tool
  finish and answers the calls not run yet with error results, so calls and results stay
  paired (a ``tool_call`` or ``tool_result`` handler that raises gives an error result naming
  it, for the same reason). A failed model call is appended as pi does (``stopReason: "error"`` with the
  message) and ends the run.
* Every run records its operation tree into the session (:class:`~sessiontree.optree.OpTreeBuilder`
  with the session as sink): one run, a turn per model call, an ``llm`` op with usage and cost
  (offline price table) per call, a ``tool`` op per tool call, a ``session`` op with a linked
  child run per sub-agent. It costs one ``custom`` entry per turn (``SessionSink(per_turn=True)``:
  journaled beside the file until written, so a killed run loses none of it).
* Messages sent by extensions while a run is going are written at the end of the current turn
  and the run goes on with them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from msgspec import UNSET

from ..events import ContextEvent, HookFailed, _run_coroutine
from ..messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    message_text,
)
from ..providers._http import ModelRequestCancelled, ModelRequestFailed
from ..providers.base import DeltaCallback, Model, ModelRequest
from ..summarize.base import CancelToken
from .events import (
    BeforeAgentStartEvent,
    BeforeAgentStartResult,
    ExtensionMessage,
    ToolCallDecision,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from .extensions import CommandContext, ExtensionAPI, RegisteredCommand, apply_extension, load_installed
from .tools import Tool, ToolContext, run_tool

if TYPE_CHECKING:
    from ..optree import OpTreeBuilder
    from ..session import Session

__all__ = ["AgentSession", "AsyncAgentSession", "RunResult", "Totals"]

StopKind = Literal["stop", "length", "error", "aborted", "max_turns", "command"]


@dataclass
class Totals:
    """Tokens and dollars spent (summed from the replies' usage)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    def add(self, usage: Usage) -> None:
        self.input += usage.input
        self.output += usage.output
        self.cache_read += usage.cache_read
        self.cache_write += usage.cache_write
        self.cost += usage.cost.total

    @property
    def tokens(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write


@dataclass
class RunResult:
    """What one run did.

    Attributes:
        stop: why it ended: the model stopped (``stop``), hit its output limit (``length``),
            failed (``error``), was cancelled (``aborted``), ran ``max_turns`` turns, or a
            command handled the input without the model (``command``).
        messages: the messages appended, in order (prompt, extension messages, replies,
            tool results).
        entry_ids: their entry ids.
        totals: the run's tokens and cost.
        error: the failure's message, for ``error``.
        run_id: the run's id in the operation tree.
    """

    stop: StopKind
    messages: list[Any] = field(default_factory=list)
    entry_ids: list[str] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    error: str | None = None
    run_id: str | None = None

    @property
    def text(self) -> str:
        """The text of the last reply."""
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                return message_text(message)
        return ""


class AsyncAgentSession:
    """An agent over a :class:`~sessiontree.Session`, for async code.

    Args:
        session: the session (any store); its leaf is where the conversation goes on.
        model: the model (:mod:`sessiontree.providers`), or ``None`` until :meth:`set_model`.
        tools: tools the model may call.
        system_prompt: the system prompt.
        extensions: extension objects or functions (``setup(api)``).
        installed_extensions: also load the ``sessiontree.extensions`` entry points.
        max_turns: the most model calls one run makes.
        max_tokens: the output budget of each call, if any.
        on_delta: the default callback for streamed deltas.
        agent_id: the agent's name in the operation tree.
    """

    def __init__(self, session: Session, model: Model | None = None, *,
                 tools: Iterable[Tool] = (), system_prompt: str | None = None,
                 extensions: Iterable[Any] = (), installed_extensions: bool = False,
                 max_turns: int = 50, max_tokens: int | None = None,
                 on_delta: DeltaCallback | None = None, agent_id: str = "agent") -> None:
        self.session = session
        self.model = model
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.on_delta = on_delta
        self.agent_id = agent_id
        self.commands: dict[str, RegisteredCommand] = {}
        self.totals = Totals()
        self._queue: list[tuple[ExtensionMessage, bool]] = []
        self._trigger = False
        self._running = False
        self.extensions: list[tuple[str, Any]] = []
        for extension in extensions:
            self.add_extension(extension)
        if installed_extensions:
            self.extensions += load_installed(self)

    # -- extensions ------------------------------------------------------------------------

    def add_extension(self, extension: Any, name: str | None = None) -> ExtensionAPI:
        """Set up an extension (an object with ``setup(api)`` or a function of ``api``)."""
        label = name or getattr(extension, "name", None) or getattr(
            extension, "__name__", type(extension).__name__)
        api = ExtensionAPI(self, str(label))
        apply_extension(extension, api)
        self.extensions.append((str(label), extension))
        return api

    def queue_message(self, message: ExtensionMessage, trigger_turn: bool = False) -> None:
        """Write ``message`` now, or at the end of the current turn while a run goes on; with
        ``trigger_turn`` the model answers it (the run goes on, or :meth:`prompt` with no
        text, :meth:`run_command` and :meth:`send_message` start one)."""
        if self._running:
            self._queue.append((message, trigger_turn))
            return
        self._append_extension_message(message)
        self._trigger = self._trigger or trigger_turn

    def _append_extension_message(self, message: ExtensionMessage) -> str:
        return self.session.append_custom_message(message.custom_type, message.content,
                                                   message.display, message.details)

    async def send_message(self, message: ExtensionMessage | Mapping[str, Any],
                           trigger_turn: bool = False, *, on_delta: DeltaCallback | None = None,
                           cancel: CancelToken | None = None) -> RunResult | None:
        """Write a custom message; with ``trigger_turn`` run the model on it and return the run."""
        from .extensions import _as_message

        self.queue_message(_as_message(message), trigger_turn)
        if self._trigger and not self._running:
            return await self.prompt(None, on_delta=on_delta, cancel=cancel)
        return None

    def append_entry(self, custom_type: str, data: Any = UNSET) -> str:
        """Store extension state as a ``custom`` entry; returns its id."""
        return self.session.append_custom(custom_type, data)

    # -- model -----------------------------------------------------------------------------

    def set_model(self, model: Model) -> str:
        """Use ``model`` from now on; appends a ``model_change`` entry (as pi does) and returns
        its id."""
        self.model = model
        return self.session.append_model_change(model.provider, model.model)

    # -- commands --------------------------------------------------------------------------

    async def run_command(self, line: str, output: Callable[[str], None] = print, *,
                          on_delta: DeltaCallback | None = None,
                          cancel: CancelToken | None = None) -> RunResult | None:
        """Run ``/name args`` if ``name`` is a registered command; a handler's returned text is
        sent as a prompt, and a turn it triggered runs. Returns the run, or ``None`` when the
        command needed no model.

        Raises:
            KeyError: no such command.
        """
        name, _, args = line.strip().lstrip("/").partition(" ")
        command = self.commands.get(name)
        if command is None:
            raise KeyError(name)
        result = command.handler(CommandContext(args.strip(), self, self.session, output))
        if asyncio.iscoroutine(result):
            result = await result
        if isinstance(result, str) and result.strip():
            return await self.prompt(result, on_delta=on_delta, cancel=cancel)
        if self._trigger:
            return await self.prompt(None, on_delta=on_delta, cancel=cancel)
        return None

    # -- the loop --------------------------------------------------------------------------

    async def prompt(self, text: str | UserMessage | None, *, images: Sequence[ImageContent] = (),
                     on_delta: DeltaCallback | None = None, cancel: CancelToken | None = None,
                     ) -> RunResult:
        """Send a prompt and run the loop until the model stops.

        Args:
            text: the prompt (text or a :class:`~sessiontree.messages.UserMessage`); ``None``
                continues from the leaf without a new prompt (after an extension message).
            images: images sent with a text prompt.
            on_delta: where streamed deltas go (default: the agent's ``on_delta``).
            cancel: stops the run cleanly (see the module documentation).

        Raises:
            HookFailed: a ``before_agent_start`` or ``context`` handler raised (nothing of the
                prompt was written in the first case).
            RuntimeError: no model, or a run is already going on.
        """
        if self.model is None:
            raise RuntimeError("the agent has no model: pass one or call set_model()")
        if self._running:
            raise RuntimeError("a run is already going on; queue messages with send_message")
        cancel = cancel or CancelToken()
        on_delta = on_delta or self.on_delta
        result = RunResult("stop")
        system = self.system_prompt
        self._trigger = False
        self._running = True
        try:
            if text is not None:
                message = text if isinstance(text, UserMessage) else UserMessage.of(text, *images)
                decision, _ = await self.session.events.adecide(
                    "before_agent_start", BeforeAgentStartEvent(
                        agent=self, session=self.session, prompt=message, system_prompt=system))
                if isinstance(decision, BeforeAgentStartResult):
                    system = decision.system_prompt if decision.system_prompt is not None else system
                self._record(result, message, self.session.append_message(message))
                if isinstance(decision, BeforeAgentStartResult) and decision.message is not None:
                    self._record(result, _as_custom(decision.message),
                                 self._append_extension_message(decision.message))
            await self._loop(result, system, on_delta, cancel, builder=None)
        finally:
            self._running = False
        return result

    async def _loop(self, result: RunResult, system: str | None, on_delta: DeltaCallback | None,
                    cancel: CancelToken, builder: OpTreeBuilder | None) -> None:
        from ..optree import OpTreeBuilder, SessionSink

        assert self.model is not None
        model = self.model
        own_builder = builder is None
        if builder is None:
            title = next((message_text(m) for m in result.messages if isinstance(m, UserMessage)),
                         "continue")
            builder = OpTreeBuilder(agent_id=self.agent_id, title=title[:80],
                                    sink=SessionSink(self.session, per_turn=True))
        result.run_id = builder.run_id
        failed: str | None = None
        try:
            for number in range(1, self.max_turns + 1):
                if cancel.cancelled:
                    result.stop = "aborted"
                    break
                turn = builder.begin_turn()
                await self.session.events.aemit("turn_start", TurnStartEvent(
                    agent=self, session=self.session, turn=number))
                reply, tool_results = await self._turn(result, system, on_delta, cancel, builder,
                                                       turn, model)
                await self.session.events.aemit("turn_end", TurnEndEvent(
                    agent=self, session=self.session, turn=number, message=reply,
                    tool_results=tool_results))
                builder.end_turn(turn)
                trigger = self._flush_queue(result)
                if reply is None:
                    result.stop = "aborted"
                    break
                if reply.stop_reason in ("error", "aborted", "length"):
                    result.stop = "error" if reply.stop_reason == "aborted" else reply.stop_reason
                    result.error = reply.error_message or None
                    break
                if cancel.cancelled:
                    result.stop = "aborted"
                    break
                if not reply.tool_calls and not trigger:
                    result.stop = "stop"
                    break
            else:
                result.stop = "max_turns"
        except BaseException as exc:
            failed = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            if own_builder:
                builder.end_session(result.stop in ("stop", "max_turns") and failed is None,
                                    failed or result.error)

    def _flush_queue(self, result: RunResult) -> bool:
        trigger = False
        queue, self._queue = self._queue, []
        for message, wants_turn in queue:
            self._record(result, _as_custom(message), self._append_extension_message(message))
            trigger = trigger or wants_turn
        return trigger

    async def _turn(self, result: RunResult, system: str | None, on_delta: DeltaCallback | None,
                    cancel: CancelToken, builder: OpTreeBuilder, turn: str, model: Model
                    ) -> tuple[AssistantMessage | None, list[ToolResultMessage]]:
        from ..optree import Usage as OpUsage

        context = self.session.build_context()
        messages = await self.session.events.aemit("context", ContextEvent(
            session=self.session, leaf_id=self.session.leaf_id, messages=context.messages))
        op = builder.begin_op(turn, "llm", {"provider": model.provider, "model": model.model,
                                            "api": model.api})
        request = ModelRequest(messages, system, [t.spec for t in self.tools.values()],
                               self.max_tokens)
        try:
            reply = await model.astream(request, on_delta, cancel)
        except ModelRequestCancelled:
            builder.end_op(op, "cancelled")
            return None, []
        except ModelRequestFailed as exc:
            reply = AssistantMessage(content=[], api=model.api, provider=model.provider,
                                     model=model.model, stop_reason="error",
                                     error_message=str(exc))
        usage = reply.usage
        builder.account_llm(op, OpUsage(input=usage.input, output=usage.output,
                                        cache_read=usage.cache_read, cache_write=usage.cache_write),
                            stop_reason=reply.stop_reason,
                            status="error" if reply.stop_reason == "error" else "ok")
        thinking = "\n\n".join(b.thinking for b in reply.content if hasattr(b, "thinking"))
        if thinking:
            builder.set_reasoning_final(op, thinking)
        builder.end_op(op, "failed" if reply.stop_reason == "error" else "ok",
                       {"error": reply.error_message} if reply.error_message else None)
        self._record(result, reply, self.session.append_message(reply))
        result.totals.add(usage)
        self.totals.add(usage)
        results: list[ToolResultMessage] = []
        for call in reply.tool_calls:
            if cancel.cancelled:
                outcome = ToolResultMessage(tool_call_id=call.id, tool_name=call.name, is_error=True,
                                            content=[TextContent(text="Cancelled before it ran")])
            else:
                outcome = await self._call_tool(call, cancel, builder, turn)
            self._record(result, outcome, self.session.append_message(outcome))
            results.append(outcome)
        return reply, results

    async def _call_tool(self, call: ToolCall, cancel: CancelToken, builder: OpTreeBuilder,
                         turn: str) -> ToolResultMessage:
        found = self.tools.get(call.name)
        op = builder.begin_op(turn, "tool", {"name": call.name, "callId": call.id})
        try:
            decision, handler = await self.session.events.adecide("tool_call", ToolCallEvent(
                agent=self, session=self.session, call=call, tool=found))
        except HookFailed as exc:  # the call still gets its result: the model reads why
            decision, handler = ToolCallDecision(block=True, reason=str(exc)), exc.handler
        if isinstance(decision, ToolCallDecision) and decision.block:
            outcome = ToolResultMessage(tool_call_id=call.id, tool_name=call.name, is_error=True,
                                        content=[TextContent(text=decision.reason or
                                                             f"Blocked by {handler}")])
        else:
            if isinstance(decision, ToolCallDecision) and decision.arguments is not None:
                call = ToolCall(id=call.id, name=call.name, arguments=decision.arguments)
            context = ToolContext(call, cancel, self, self._subagent_runner(builder, turn))
            outcome = await run_tool(found, call, context)
        try:
            replaced, _ = await self.session.events.adecide("tool_result", ToolResultEvent(
                agent=self, session=self.session, call=call, result=outcome))
        except HookFailed as exc:
            replaced = ToolResultMessage(tool_call_id=call.id, tool_name=call.name, is_error=True,
                                         content=[TextContent(text=str(exc))])
        if isinstance(replaced, ToolResultMessage):
            outcome = replaced
        builder.end_op(op, "failed" if outcome.is_error else "ok",
                       {"error": message_text(outcome)[:500]} if outcome.is_error else None)
        return outcome

    def _subagent_runner(self, builder: OpTreeBuilder, turn: str) -> Callable[..., Any]:
        async def run(prompt: str, *, system_prompt: str | None = None, tools: Sequence[Tool] = (),
                      model: Model | None = None) -> str:
            from ..session import Session

            op = builder.begin_op(turn, "session", {"agent": "subagent"})
            parent = self.session
            if parent.file is not None:
                child_session = Session.create(os.path.dirname(parent.file), cwd=parent.cwd,
                                               parent_session=parent.file)
            else:
                child_session = Session.in_memory(parent.cwd)
            child = AsyncAgentSession(child_session, model or self.model, tools=tools,
                                      system_prompt=system_prompt, max_turns=self.max_turns,
                                      max_tokens=self.max_tokens, agent_id=f"{self.agent_id}.sub")
            child_builder = builder.spawn_child(op, agent_id=child.agent_id, title=prompt[:80])
            outcome = RunResult("stop", run_id=child_builder.run_id)
            message = UserMessage.of(prompt)
            child._record(outcome, message, child_session.append_message(message))
            child._running = True
            try:
                await child._loop(outcome, system_prompt, None, CancelToken(), child_builder)
            finally:
                child._running = False
                child_builder.end_session(outcome.stop == "stop", outcome.error)
                builder.end_op(op, "ok" if outcome.stop == "stop" else "failed")
                if child_session.file is not None:
                    builder.set_response(op, {"payload": {"file": os.path.basename(child_session.file)}})
            self.totals.add(Usage(input=outcome.totals.input, output=outcome.totals.output,
                                  cache_read=outcome.totals.cache_read,
                                  cache_write=outcome.totals.cache_write))
            return outcome.text

        return run

    @staticmethod
    def _record(result: RunResult, message: Any, entry_id: str) -> None:
        result.messages.append(message)
        result.entry_ids.append(entry_id)

    def __repr__(self) -> str:
        model = f"{self.model.provider}:{self.model.model}" if self.model else "no model"
        return f"<{type(self).__name__} {model} tools={sorted(self.tools)}>"


def _as_custom(message: ExtensionMessage) -> Any:
    from ..messages import CustomMessage

    return CustomMessage(custom_type=message.custom_type, content=message.content,
                         display=message.display, details=message.details)


class AgentSession:
    """:class:`AsyncAgentSession` for sync code: the same constructor and method names, each
    call run to completion (in a private event loop; from inside a running loop, in a worker
    thread). Attributes (``session``, ``model``, ``tools``, ``commands``, ``totals``...) are the
    async agent's, shared."""

    def __init__(self, session: Session, model: Model | None = None, **options: Any) -> None:
        self._agent = AsyncAgentSession(session, model, **options)

    @property
    def agent(self) -> AsyncAgentSession:
        """The async agent this one drives."""
        return self._agent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_agent":
            object.__setattr__(self, name, value)
        else:  # session, model, system_prompt...: the async agent's, shared
            setattr(self._agent, name, value)

    def prompt(self, text: str | UserMessage | None, *, images: Sequence[ImageContent] = (),
               on_delta: DeltaCallback | None = None, cancel: CancelToken | None = None,
               ) -> RunResult:
        """See :meth:`AsyncAgentSession.prompt`."""
        return _run_coroutine(self._agent.prompt(text, images=images, on_delta=on_delta,  # type: ignore[no-any-return]
                                                 cancel=cancel))

    def send_message(self, message: ExtensionMessage | Mapping[str, Any],
                     trigger_turn: bool = False, *, on_delta: DeltaCallback | None = None,
                     cancel: CancelToken | None = None) -> RunResult | None:
        """See :meth:`AsyncAgentSession.send_message`."""
        return _run_coroutine(self._agent.send_message(  # type: ignore[no-any-return]
            message, trigger_turn, on_delta=on_delta, cancel=cancel))

    def run_command(self, line: str, output: Callable[[str], None] = print, *,
                    on_delta: DeltaCallback | None = None,
                    cancel: CancelToken | None = None) -> RunResult | None:
        """See :meth:`AsyncAgentSession.run_command`."""
        return _run_coroutine(self._agent.run_command(  # type: ignore[no-any-return]
            line, output, on_delta=on_delta, cancel=cancel))

    def add_extension(self, extension: Any, name: str | None = None) -> ExtensionAPI:
        """See :meth:`AsyncAgentSession.add_extension`."""
        return self._agent.add_extension(extension, name)

    def append_entry(self, custom_type: str, data: Any = UNSET) -> str:
        """See :meth:`AsyncAgentSession.append_entry`."""
        return self._agent.append_entry(custom_type, data)

    def set_model(self, model: Model) -> str:
        """See :meth:`AsyncAgentSession.set_model`."""
        return self._agent.set_model(model)

    def __repr__(self) -> str:
        return repr(self._agent).replace("AsyncAgentSession", "AgentSession")
