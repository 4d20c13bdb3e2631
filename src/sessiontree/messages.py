"""Message payloads (``AgentMessage`` of pi-ai 0.73.1) and their content blocks, as typed structs.

Attribute names are snake_case; on disk they are camelCase. Field order is the key order pi
writes, so a struct serialized by :func:`sessiontree._json.dumps` is the line pi would write.
Optional keys use ``msgspec.UNSET`` so that "absent" and ``null`` stay different, as they are
on disk. A message of a role this library does not know is kept as :class:`UnknownMessage`.
"""

from __future__ import annotations

import time
from typing import Any, Literal, Union

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "AgentMessage",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummaryMessage",
    "CompactionSummaryMessage",
    "ContentBlock",
    "Cost",
    "CustomMessage",
    "ImageContent",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultMessage",
    "UnknownBlock",
    "UnknownMessage",
    "Usage",
    "UserMessage",
    "message_text",
    "now_ms",
]


def now_ms() -> int:
    """Milliseconds since the Unix epoch, as pi stores ``message.timestamp``."""
    return time.time_ns() // 1_000_000


class _Block(msgspec.Struct, tag_field="type", rename="camel"):
    @property
    def type(self) -> str:
        """The block's ``type`` tag (``text``, ``thinking``, ``image``, ``toolCall``)."""
        return str(self.__struct_config__.tag)


class TextContent(_Block, tag="text"):
    text: str
    text_signature: str | UnsetType = UNSET


class ThinkingContent(_Block, tag="thinking"):
    thinking: str
    thinking_signature: str | UnsetType = UNSET
    redacted: bool | UnsetType = UNSET


class ImageContent(_Block, tag="image"):
    data: str
    """Base64-encoded image bytes."""
    mime_type: str


class ToolCall(_Block, tag="toolCall"):
    id: str
    name: str
    arguments: dict[str, Any]
    thought_signature: str | UnsetType = UNSET


class UnknownBlock(msgspec.Struct):
    """A content block of a type this library does not know; ``data`` is the block as stored."""

    data: dict[str, Any]

    @property
    def type(self) -> str:
        value = self.data.get("type")
        return value if isinstance(value, str) else ""


ContentBlock = Union[TextContent, ThinkingContent, ImageContent, ToolCall]


class Cost(msgspec.Struct, rename="camel"):
    input: float = 0
    output: float = 0
    cache_read: float = 0
    cache_write: float = 0
    total: float = 0


class Usage(msgspec.Struct, rename="camel"):
    """Token usage of one assistant reply. ``input`` excludes cached tokens, as pi counts them."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = msgspec.field(default_factory=Cost)


StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]


class _Message(msgspec.Struct, tag_field="role", rename="camel"):
    @property
    def role(self) -> str:
        """The message's ``role`` tag."""
        return str(self.__struct_config__.tag)


class UserMessage(_Message, tag="user"):
    content: str | list[TextContent | ImageContent]
    timestamp: int = msgspec.field(default_factory=now_ms)

    @classmethod
    def of(cls, text: str, *images: ImageContent) -> UserMessage:
        """A user message in the form pi writes: a text block, then any image blocks."""
        return cls(content=[TextContent(text=text), *images])


class AssistantMessage(_Message, tag="assistant"):
    content: list[TextContent | ThinkingContent | ToolCall]
    api: str = ""
    provider: str = ""
    model: str = ""
    usage: Usage = msgspec.field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | UnsetType = UNSET
    timestamp: int = msgspec.field(default_factory=now_ms)
    response_id: str | UnsetType = UNSET
    response_model: str | UnsetType = UNSET
    diagnostics: list[dict[str, Any]] | UnsetType = UNSET

    @classmethod
    def of(cls, text: str, *, provider: str = "", model: str = "", api: str = "") -> AssistantMessage:
        """A plain text reply."""
        return cls(content=[TextContent(text=text)], provider=provider, model=model, api=api)


class ToolResultMessage(_Message, tag="toolResult"):
    tool_call_id: str
    tool_name: str
    content: list[TextContent | ImageContent]
    details: Any = UNSET
    is_error: bool = False
    timestamp: int = msgspec.field(default_factory=now_ms)


class BashExecutionMessage(_Message, tag="bashExecution"):
    command: str
    output: str
    exit_code: int | None | UnsetType = UNSET
    cancelled: bool = False
    truncated: bool = False
    full_output_path: str | UnsetType = UNSET
    timestamp: int = msgspec.field(default_factory=now_ms)
    exclude_from_context: bool | UnsetType = UNSET


class CustomMessage(_Message, tag="custom"):
    custom_type: str
    content: str | list[TextContent | ImageContent]
    display: bool = True
    details: Any = UNSET
    timestamp: int = msgspec.field(default_factory=now_ms)


class BranchSummaryMessage(_Message, tag="branchSummary"):
    """Synthesized by context building from a ``branch_summary`` entry; never stored."""

    summary: str
    from_id: str | UnsetType = UNSET
    timestamp: int | None = None


class CompactionSummaryMessage(_Message, tag="compactionSummary"):
    """Synthesized by context building from a ``compaction`` entry; never stored."""

    summary: str
    tokens_before: int | float | UnsetType = UNSET
    timestamp: int | None = None


class UnknownMessage(msgspec.Struct):
    """A message this library cannot type (an unknown role, or fields of unexpected types).

    ``data`` is the message exactly as stored, so nothing is lost.
    """

    data: dict[str, Any]

    @property
    def role(self) -> str:
        value = self.data.get("role")
        return value if isinstance(value, str) else ""


AgentMessage = Union[
    UserMessage,
    AssistantMessage,
    ToolResultMessage,
    BashExecutionMessage,
    CustomMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
]

_message_type: Any = AgentMessage


def message_from_builtins(data: Any) -> AgentMessage | UnknownMessage:
    """Type a message decoded from JSON; anything that does not fit stays an :class:`UnknownMessage`."""
    try:
        return msgspec.convert(data, _message_type)  # type: ignore[no-any-return]
    except msgspec.ValidationError:
        return UnknownMessage(data=data if isinstance(data, dict) else {"value": data})


def message_text(message: AgentMessage | UnknownMessage, *, separator: str = "\n") -> str:
    """The readable text of a message: text blocks joined, or the summary, command and output."""
    if isinstance(message, (BranchSummaryMessage, CompactionSummaryMessage)):
        return message.summary
    if isinstance(message, BashExecutionMessage):
        return f"$ {message.command}\n{message.output}"
    if isinstance(message, UnknownMessage):
        content = message.data.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return separator.join(
                b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
            )
        return ""
    content = message.content
    if isinstance(content, str):
        return content
    return separator.join(b.text for b in content if isinstance(b, TextContent))
