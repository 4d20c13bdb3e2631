"""Short human-readable descriptions of entries, shared by the command, the browser and exports."""

from __future__ import annotations

from typing import Any

import msgspec

from .entries import (
    AnyEntry,
    BranchSummary,
    Compaction,
    ContextEdit,
    Custom,
    CustomMessageEntry,
    Label,
    MessageEntry,
    ModelChange,
    SessionInfo,
    ThinkingLevelChange,
    UnknownEntry,
    UsageEntry,
)
from .messages import (
    AssistantMessage,
    BashExecutionMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_text,
)

__all__ = ["BOOKKEEPING_PREFIX", "KIND_NAMES", "entry_kind", "entry_summary", "is_bookkeeping",
           "one_line", "system_change"]

BOOKKEEPING_PREFIX = "sessiontree.op"
"""``customType`` prefix of the operation tree's entries: bookkeeping, not conversation."""


def is_bookkeeping(entry: object) -> bool:
    """Whether ``entry`` is an operation-tree ``custom`` entry (``sessiontree.op*``): views hide
    it by default, and a label or the leaf the user is shown is never one (as pi keeps its own
    bookkeeping out of its tree's default view)."""
    if not isinstance(entry, Custom):
        return False
    kind = entry.custom_type
    return kind == BOOKKEEPING_PREFIX or kind.startswith(BOOKKEEPING_PREFIX + ".")


KIND_NAMES = {
    "toolResult": "tool", "bashExecution": "bash", "branch_summary": "summary",
    "custom_message": "custom msg", "session_info": "name", "model_change": "model",
    "thinking_level_change": "thinking", "compaction": "compaction", "context_edit": "edit",
}
"""Short display names for kinds whose own names are long."""


def one_line(text: str, limit: int = 80) -> str:
    """Collapse whitespace and cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def entry_kind(entry: AnyEntry) -> str:
    """``user``, ``assistant``, ``toolResult``… for messages; the entry type otherwise."""
    if isinstance(entry, MessageEntry):
        message: Any = entry.message
        return str(message.role)
    return entry.type if isinstance(entry, UnknownEntry) else _tag(entry)


def _tag(value: msgspec.Struct) -> str:
    tag = value.__struct_config__.tag
    return tag if isinstance(tag, str) else type(value).__name__


def _assistant_text(message: AssistantMessage) -> str:
    parts = [b.text for b in message.content if isinstance(b, TextContent)]
    calls = [f"{b.name}({one_line(msgspec.json.encode(b.arguments).decode(), 40)})"
             for b in message.content if isinstance(b, ToolCall)]
    text = " ".join(parts)
    if calls:
        text = (text + " " if text else "") + "→ " + ", ".join(calls)
    if message.stop_reason in ("error", "aborted"):
        text = f"[{message.stop_reason}] " + (text or getattr(message, "error_message", "") or "")
    return text


def system_change(message: SystemMessage) -> str:
    """What a system message changes in the prompt and tools, in pi's replay terms: its text,
    the sections it sets or removes, the tools it adds or removes."""
    parts = []
    text = message.content if isinstance(message.content, str) else " ".join(
        b.text for b in message.content)
    if text:
        parts.append(f"prompt: {text}")
    sections = message.sections if isinstance(message.sections, dict) else {}
    if set_ := [name for name, value in sections.items() if value is not None]:
        parts.append("sections " + ", ".join(set_))
    if removed := [name for name, value in sections.items() if value is None]:
        parts.append("- sections " + ", ".join(removed))
    if isinstance(message.tools_added, list) and message.tools_added:
        parts.append("+ tools " + ", ".join(tool.name for tool in message.tools_added))
    if isinstance(message.tools_removed, list) and message.tools_removed:
        parts.append("- tools " + ", ".join(tool.name for tool in message.tools_removed))
    return "; ".join(parts) or "no change"


def entry_summary(entry: AnyEntry, limit: int = 80) -> str:
    """One line saying what the entry is about (no kind prefix)."""
    text: str
    if isinstance(entry, MessageEntry):
        message: Any = entry.message
        if isinstance(message, AssistantMessage):
            text = _assistant_text(message)
        elif isinstance(message, ToolResultMessage):
            body = " ".join(b.text for b in message.content if isinstance(b, TextContent))
            images = sum(isinstance(b, ImageContent) for b in message.content)
            text = f"{message.tool_name}: {body}" + (f" [{images} image(s)]" if images else "")
            if message.is_error:
                text = "[error] " + text
        elif isinstance(message, BashExecutionMessage):
            text = f"$ {message.command}"
        elif isinstance(message, SystemMessage):
            text = system_change(message)
        elif isinstance(message, UserMessage) and not isinstance(message.content, str):
            images = sum(isinstance(b, ImageContent) for b in message.content)
            text = message_text(message, separator=" ") + (f" [{images} image(s)]" if images else "")
        else:
            text = message_text(message, separator=" ")
    elif isinstance(entry, Compaction):
        text = f"compacted {entry.tokens_before} tokens: {entry.summary}"
    elif isinstance(entry, BranchSummary):
        text = entry.summary or "(empty summary)"
    elif isinstance(entry, Label):
        text = f"{entry.target_id} = {entry.label}" if entry.label else f"{entry.target_id} cleared"
    elif isinstance(entry, SessionInfo):
        text = f"name: {entry.name}" if entry.name else "name cleared"
    elif isinstance(entry, ModelChange):
        text = f"{entry.provider}/{entry.model_id}"
    elif isinstance(entry, ThinkingLevelChange):
        text = f"thinking {entry.thinking_level}"
    elif isinstance(entry, Custom):
        text = entry.custom_type
    elif isinstance(entry, ContextEdit):
        text = (f"omit {entry.target_id}" if entry.replacement is None else
                f"replace {entry.target_id}: " + (entry.replacement.content if isinstance(
                    entry.replacement.content, str) else " ".join(
                    b.text for b in entry.replacement.content if isinstance(b, TextContent))))
    elif isinstance(entry, UsageEntry):
        usage = entry.usage
        tokens = usage.input + usage.output + usage.cache_read + usage.cache_write
        text = f"{entry.kind}: {entry.provider}/{entry.model} {tokens:,} tokens " \
               f"${usage.cost.total:.4f}"
    elif isinstance(entry, CustomMessageEntry):
        content = entry.content
        body = content if isinstance(content, str) else " ".join(
            b.text for b in content if isinstance(b, TextContent))
        text = f"{entry.custom_type}: {body}"
    else:
        text = ""
    return one_line(text, limit)
