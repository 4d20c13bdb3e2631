"""The payloads of the agent-loop events on a session's bus (``session.events``), and what
their handlers may return. The rules are the bus's (:mod:`sessiontree.events`).

* ``before_agent_start``: :class:`BeforeAgentStartEvent` -> :class:`BeforeAgentStartResult`
  (a message to add after the prompt, persisted; a system prompt for this run)
* ``turn_start``: :class:`TurnStartEvent`; ``turn_end``: :class:`TurnEndEvent`
* ``tool_call``: :class:`ToolCallEvent` -> :class:`ToolCallDecision` (block with a reason, or
  rewrite the arguments)
* ``tool_result``: :class:`ToolResultEvent` -> a :class:`~sessiontree.messages.ToolResultMessage`
  to use instead
* ``context`` (before every model call): :class:`~sessiontree.events.ContextEvent`
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from ..messages import AssistantMessage, ImageContent, TextContent, ToolCall, ToolResultMessage, UserMessage

if TYPE_CHECKING:
    from ..session import Session
    from .session import AsyncAgentSession
    from .tools import Tool

__all__ = [
    "BeforeAgentStartEvent",
    "BeforeAgentStartResult",
    "ExtensionMessage",
    "ToolCallDecision",
    "ToolCallEvent",
    "ToolResultEvent",
    "TurnEndEvent",
    "TurnStartEvent",
]


@dataclass(frozen=True)
class ExtensionMessage:
    """A message an extension sends (seed 002's ``HookMessage``): written as a
    ``custom_message`` entry, sent to the model as a user message.

    Attributes:
        custom_type: the extension's identifier.
        content: text, or text and image blocks.
        display: whether viewers show it.
        details: extension data kept with it (not sent to the model).
    """

    custom_type: str
    content: str | list[TextContent | ImageContent]
    display: bool = True
    details: Any = UNSET


@dataclass(frozen=True, kw_only=True)
class BeforeAgentStartEvent:
    """A prompt was submitted; nothing of it is written yet."""

    agent: AsyncAgentSession
    session: Session
    prompt: UserMessage
    system_prompt: str | None


@dataclass(frozen=True, kw_only=True)
class BeforeAgentStartResult:
    """What a ``before_agent_start`` handler may return.

    Attributes:
        message: a message written right after the prompt (and so sent to the model).
        system_prompt: the system prompt for this run instead of the agent's.
    """

    message: ExtensionMessage | None = None
    system_prompt: str | None = None


@dataclass(frozen=True, kw_only=True)
class TurnStartEvent:
    """A turn (one model call and the tool calls it asks for) starts."""

    agent: AsyncAgentSession
    session: Session
    turn: int


@dataclass(frozen=True, kw_only=True)
class TurnEndEvent:
    """A turn ended: its reply (``None`` when the call was cancelled) and tool results."""

    agent: AsyncAgentSession
    session: Session
    turn: int
    message: AssistantMessage | None
    tool_results: list[ToolResultMessage] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ToolCallEvent:
    """A tool is about to run (``tool`` is ``None`` for a name the agent does not know)."""

    agent: AsyncAgentSession
    session: Session
    call: ToolCall
    tool: Tool | None


@dataclass(frozen=True, kw_only=True)
class ToolCallDecision:
    """What a ``tool_call`` handler may return.

    Attributes:
        block: do not run the tool; the model gets ``reason`` as an error result.
        reason: why it was blocked.
        arguments: run the tool with these arguments instead (the stored call is unchanged).
    """

    block: bool = False
    reason: str = ""
    arguments: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class ToolResultEvent:
    """A tool ran; a handler may return another result message to store and send instead."""

    agent: AsyncAgentSession
    session: Session
    call: ToolCall
    result: ToolResultMessage
