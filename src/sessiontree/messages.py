"""Message payloads (``AgentMessage`` of pi-ai 0.73.1, and pi-ai 1.x's system messages) and their
content blocks, as typed structs.

Attribute names are snake_case; on disk they are camelCase. Field order is the key order pi
writes, so a struct serialized by :func:`sessiontree._json.dumps` is the line pi would write.
Optional keys use ``msgspec.UNSET`` so that "absent" and ``null`` stay different, as they are
on disk. A message of a role this library does not know is kept as :class:`UnknownMessage`.

Structs do not check their field types when constructed; :func:`validate_message` does, and
every ``of()`` constructor and ``Session.append_message`` call it, so a message of the wrong
shape raises :class:`~sessiontree.errors.InvalidMessage` naming the field before anything is
written.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeVar, Union

import msgspec
from msgspec import UNSET, UnsetType

from ._json import dumps, stringified, type_facts, unfit
from .errors import InvalidEntry, InvalidMessage

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
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolDeclaration",
    "ToolReference",
    "ToolResultMessage",
    "UnknownBlock",
    "UnknownMessage",
    "Usage",
    "UserMessage",
    "message_text",
    "now_ms",
    "validate_message",
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
        """A user message in the form pi writes: a text block, then any image blocks.

        Raises:
            InvalidMessage: ``text`` is not a string or an image is not an :class:`ImageContent`.
        """
        return _checked(cls(content=[TextContent(text=text), *images]), "UserMessage.of()")


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
    def of(cls, text: str = "", *, tool_calls: Sequence[ToolCall] = (), thinking: str | None = None,
           provider: str = "", model: str = "", api: str = "", usage: Usage | None = None,
           stop_reason: StopReason | None = None) -> AssistantMessage:
        """A reply in the block order pi writes: thinking, text, then tool calls.

        Args:
            text: the reply's text; left out when empty and there are tool calls.
            tool_calls: the tools the model asks to run (answer each with
                :meth:`ToolResultMessage.of`).
            thinking: the model's reasoning text, if any.
            provider: the provider name as pi writes it (``anthropic``, ``openai``).
            model: the model id.
            api: the API the reply came from (``anthropic-messages``, ``openai-completions``).
            usage: token usage and cost; zeros when not given.
            stop_reason: defaults to ``toolUse`` with tool calls, ``stop`` without.

        Raises:
            InvalidMessage: a field of the wrong type (the error's ``field`` names it).
        """
        content: list[TextContent | ThinkingContent | ToolCall] = []
        if thinking is not None:
            content.append(ThinkingContent(thinking=thinking))
        if text or not tool_calls:
            content.append(TextContent(text=text))
        content.extend(tool_calls)
        reason: StopReason = stop_reason or ("toolUse" if tool_calls else "stop")
        message = cls(content=content, api=api, provider=provider, model=model,
                      usage=usage if usage is not None else Usage(), stop_reason=reason)
        return _checked(message, "AssistantMessage.of()")

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The reply's tool-call blocks, in order."""
        return [block for block in self.content if isinstance(block, ToolCall)]


class ToolResultMessage(_Message, tag="toolResult"):
    tool_call_id: str
    tool_name: str
    content: list[TextContent | ImageContent]
    details: Any = UNSET
    is_error: bool = False
    timestamp: int = msgspec.field(default_factory=now_ms)

    @classmethod
    def of(cls, call: ToolCall | str, content: str | Sequence[TextContent | ImageContent] = "", *,
           tool_name: str | None = None, is_error: bool = False,
           details: Any = UNSET) -> ToolResultMessage:
        """The result of one tool call, as the message that answers it.

        Args:
            call: the :class:`ToolCall` being answered, or its id (then give ``tool_name``).
            content: the tool's output: a string (one text block) or content blocks.
            tool_name: the tool's name; taken from ``call`` when that is a :class:`ToolCall`.
            is_error: the tool failed; ``content`` says how (the model sees it).
            details: tool-specific data kept for the UI, never sent to the model.

        Raises:
            InvalidMessage: no tool name, or a field of the wrong type.
        """
        where = "ToolResultMessage.of()"
        if isinstance(call, ToolCall):
            call_id, name = call.id, tool_name if tool_name is not None else call.name
        elif tool_name is None:
            raise InvalidMessage(f"{where}: give tool_name when call is an id, not a ToolCall",
                                 field="toolName")
        else:
            call_id, name = call, tool_name
        blocks: Any = content  # anything but text or a sequence is left for _checked to refuse
        if isinstance(content, str):
            blocks = [TextContent(text=content)]
        elif isinstance(content, Sequence):
            blocks = list(content)
        message = cls(tool_call_id=call_id, tool_name=name, content=blocks, details=details,
                      is_error=is_error)
        return _checked(message, where)


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


class ToolDeclaration(msgspec.Struct, rename="camel"):
    """A tool the model may call, as a system message declares it (pi-ai's ``Tool``)."""

    name: str
    description: str = ""
    parameters: Any = msgspec.field(default_factory=dict)
    """The JSON Schema of the tool's arguments."""
    constrained_sampling: Any = UNSET


class ToolReference(msgspec.Struct):
    """A tool named by a system message's ``toolsRemoved``."""

    name: str


class SystemMessage(_Message, tag="system"):
    """The prompt and tool loadout at one point of the conversation (pi 1.x).

    The first one holds the whole prompt (``content`` and named ``sections``) and the tools;
    later ones patch ``sections`` by name (``None`` removes one) and add or remove tools.
    Replaying them in order (:func:`sessiontree.system_prompt.current_system_message`) gives
    the current prompt and tools. They stay in the context where they are.
    """

    content: str | list[TextContent] = ""
    sections: dict[str, str | None] | UnsetType = UNSET
    tools_added: list[ToolDeclaration] | UnsetType = UNSET
    tools_removed: list[ToolReference] | UnsetType = UNSET
    timestamp: int = msgspec.field(default_factory=now_ms)


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
    SystemMessage,
    UserMessage,
    AssistantMessage,
    ToolResultMessage,
    BashExecutionMessage,
    CustomMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
]

_message_type: Any = AgentMessage
_ROLES = ("system", "user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary",
          "compactionSummary")
_AT_FIELD = r" - at `\$\.?([^`]*)`$"  # patterns of the error path: compiled on first use
_MISSING_FIELD = r"missing required field `([^`]+)`"
_M = TypeVar("_M", bound=_Message)


def _invalid(where: str, error: Exception) -> InvalidMessage:
    """An :class:`InvalidMessage` from msgspec's error text, with the field it names."""
    text = str(error)
    at = re.search(_AT_FIELD, text)
    field = at.group(1) if at and at.group(1) else None
    missing = re.search(_MISSING_FIELD, text)
    if missing:
        field = f"{field}.{missing.group(1)}" if field else missing.group(1)
    return InvalidMessage(f"{where}: {text}", field=field)


_encode = msgspec.json.Encoder().encode


class _Class(NamedTuple):
    """What an append needs to know of a class of typed message (:func:`_class`)."""

    role: str
    summary: bool
    """Its messages are summaries, never appended as messages."""
    decoder: msgspec.json.Decoder[Any] | None
    """Checks a message by decoding its encoding as its class (a third of the cost of
    converting its builtins, and an append writes the encoding); ``None``: a class that can
    hold a dict of typed keys, whose builtins are checked (``TypeFacts.keyed``)."""
    exact: bool
    """Its encoding is what ``JSON.stringify`` writes (``TypeFacts.exact``)."""
    free: tuple[tuple[str, str], ...]
    """Its fields typed ``Any`` (name, JSON name), checked by ``unfit``: msgspec writes a set
    there as an array and bytes as base64 text."""


_CLASSES: dict[type, _Class | None] = {}
"""Each class met -> what :func:`_class` says of it (an ``isinstance`` against a struct class
goes through msgspec's metaclass, and ``role`` makes the class's config each time)."""


def _class(kind: type) -> _Class | None:
    """What an append needs to know of class ``kind``; ``None``: not a typed message."""
    try:
        return _CLASSES[kind]
    except KeyError:
        pass
    found = None
    if issubclass(kind, _Message):
        facts = type_facts(kind)
        found = _Class(str(kind.__struct_config__.tag),
                       issubclass(kind, (BranchSummaryMessage, CompactionSummaryMessage)),
                       None if facts.keyed else msgspec.json.Decoder(kind), facts.exact,
                       tuple((f.name, f.encode_name) for f in msgspec.structs.fields(kind)
                             if f.type is Any))
    _CLASSES[kind] = found
    return found


def _checked(message: _M, where: str | None = None) -> _M:
    """``message`` itself when every field has its declared type; raises otherwise (``where``
    begins the error; by default ``invalid <role> message``)."""
    known = _class(type(message))
    assert known is not None  # (a typed message's class)
    _checked_json(message, known, where)
    return message


def _checked_json(message: _Message, known: _Class, where: str | None = None) -> bytes | None:
    """msgspec's JSON of ``message`` once its fields are checked: the encoding decoded back as
    the message's class (a third of the cost of converting its builtins, and an append writes
    the encoding), or, for a class that can hold a string-keyed dict, the builtins' check.
    ``None`` when msgspec cannot encode it, or it passes only the builtins' check (a float
    field holding NaN, which JSON writes as ``null``); raises as that check does (``known``:
    what :func:`_class` says of its class; ``where`` begins the error; by default ``invalid
    <role> message``)."""
    decoder = known.decoder
    if decoder is not None:
        try:
            encoded = _encode(message)
            decoder.decode(encoded)
            return encoded
        except (msgspec.ValidationError, TypeError, UnicodeEncodeError, OverflowError):
            pass  # the builtins' check decides, and words the error
    try:
        msgspec.convert(msgspec.to_builtins(message), type(message))
    except (msgspec.ValidationError, TypeError) as error:
        raise _invalid(where or f"invalid {message.role} message", error) from None
    if decoder is None:  # checked by its builtins: its encoding, when msgspec can make one
        try:
            return _encode(message)
        except (TypeError, UnicodeEncodeError, OverflowError):
            pass
    return None


def validate_message(message: AgentMessage | Mapping[str, Any]) -> AgentMessage:
    """Check a message against its role's shape and return it typed.

    Args:
        message: a typed message, or a dict in the on-disk shape (camelCase keys, a ``role``).

    Returns:
        The typed message (the same object when it was typed already); a dict's missing
        optional fields get their defaults (``timestamp``: now).

    Raises:
        InvalidMessage: an unknown role, a missing required field, a field of the wrong type or
            an unknown content block; the error's ``field`` names it (``content[0].text``).
    """
    if isinstance(message, _Message):
        return _checked(message)
    role = message.get("role") if isinstance(message, Mapping) else None
    if role not in _ROLES:
        raise InvalidMessage(f"unknown message role {role!r}; expected one of {', '.join(_ROLES)}",
                             field="role")
    try:
        return msgspec.convert(dict(message), _message_type)  # type: ignore[no-any-return]
    except msgspec.ValidationError as error:
        raise _invalid(f"invalid {role} message", error) from None


_CHECKED_ROLES = frozenset({"system", "user", "assistant", "toolResult", "bashExecution",
                            "custom"})
"""Roles whose dict messages are checked against their struct before they are written."""

def stored_message(message: AgentMessage | UnknownMessage | Mapping[str, Any]
                   ) -> tuple[bytes, str]:
    """What a ``message`` entry stores for ``message``, checked before anything is written: a
    typed message validated; a dict of a role this library knows validated but written as
    given (timestamped now when it has no ``timestamp``); a dict of another role, or an
    :class:`UnknownMessage` (a message copied as it was stored), written unchecked.

    Returns:
        Its JSON, as ``JSON.stringify`` writes it (a typed message's encoding made once, by
        its check), and its role.

    Raises:
        InvalidMessage: a field of the wrong type, a missing required field, or a value no
            JSON holds (in a field typed ``Any``).
        InvalidEntry: no ``role``, or a summary message (those come from entries).
    """
    kind = type(message)
    known = _CLASSES[kind] if kind in _CLASSES else _class(kind)
    payload: Any
    if known is not None:  # (first: a class check costs a third of an ABC's)
        if known.summary:
            _refuse_summary(known.role)
        encoded = _checked_json(message, known)  # type: ignore[arg-type]
        role = known.role
        if encoded is not None and known.exact:  # (for most classes, the encoding is the answer)
            return encoded, role
        for name, where in known.free:
            _held(getattr(message, name), role, where)
        if encoded is not None:
            try:
                return stringified(encoded, message), role
            except TypeError as error:  # (a float key, in a field typed Any)
                raise InvalidMessage(f"invalid {role} message: {error}") from None
        payload = message
    elif isinstance(message, (UnknownMessage, Mapping)):
        data = message.data if isinstance(message, UnknownMessage) else message
        given = data.get("role")
        if not isinstance(given, str) or not given:
            raise InvalidEntry(f"a message needs a string 'role', got {given!r}")
        role = given
        _refuse_summary(role)
        if "timestamp" not in data:
            data = {**data, "timestamp": now_ms()}
        if isinstance(message, Mapping):
            if role in _CHECKED_ROLES:
                validate_message(data)
            _held(data, role, "")
        payload = data
    else:
        payload = validate_message(message)  # (neither: validate_message says what it wants)
        role = payload.role
    try:
        return dumps(payload), role
    except TypeError as error:  # (a value no JSON holds, in a field typed Any)
        raise InvalidMessage(f"invalid {role} message: {error}") from None


def _held(value: Any, role: str, where: str) -> None:
    """Refuse a message whose untyped ``value`` (its field ``where``) JSON cannot hold as
    given (a set, bytes)."""
    problem = unfit(value, where)
    if problem is not None:
        raise InvalidMessage(f"invalid {role} message: {problem}; nothing was written")


def _refuse_summary(role: str) -> None:
    if role in ("branchSummary", "compactionSummary"):
        raise InvalidEntry(f"{role} messages are synthesized from entries; use "
                           "branch_with_summary() or append_compaction()")


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
