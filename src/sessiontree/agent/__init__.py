"""An agent over a session tree: the loop (:class:`AgentSession`, :class:`AsyncAgentSession`),
tools (:func:`tool`, :class:`Tool`), the seed-002 extension API (:class:`ExtensionAPI`) and the
agent-loop event payloads. Model adapters live in :mod:`sessiontree.providers`.

Importing this package imports no HTTP library (adapters import httpx when constructed).
"""

from __future__ import annotations

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
from .extensions import (
    ENTRY_POINT_GROUP,
    CommandContext,
    Extension,
    ExtensionAPI,
    ExtensionWarning,
    RegisteredCommand,
    load_installed,
)
from .session import AgentSession, AsyncAgentSession, RunResult, Totals
from .tools import Tool, ToolContext, ToolError, ToolResult, run_tool, tool

__all__ = [
    "ENTRY_POINT_GROUP",
    "AgentSession",
    "AsyncAgentSession",
    "BeforeAgentStartEvent",
    "BeforeAgentStartResult",
    "CommandContext",
    "Extension",
    "ExtensionAPI",
    "ExtensionMessage",
    "ExtensionWarning",
    "RegisteredCommand",
    "RunResult",
    "Tool",
    "ToolCallDecision",
    "ToolCallEvent",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolResultEvent",
    "Totals",
    "TurnEndEvent",
    "TurnStartEvent",
    "load_installed",
    "run_tool",
    "tool",
]
