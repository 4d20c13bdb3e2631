"""The system prompt and tools a conversation has at a point, replayed from its system messages
(pi 1.x; pi-ai's ``getCurrentSystemMessage``, ``getCurrentTools`` and ``collapseSystemMessages``).

A session persists its prompt as system messages: the first holds the whole prompt (``content``
and named ``sections``) and the tool declarations (``toolsAdded``); later ones add instructions
(``content``), patch sections by name (``null`` removes one) and add or remove tools. Replaying
them in order gives one system message holding the current prompt and tools; a model API that
takes no system message mid-conversation gets that one first and none of the others.

Everything here works on messages in their on-disk JSON shape (dicts, or typed messages, which
are converted), so that the replayed message is byte for byte the one pi builds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from . import _json
from .errors import InvalidMessage
from .messages import ToolDeclaration, ToolReference, UnknownMessage, now_ms

__all__ = ["collapse_system_messages", "current_system_message", "current_tools",
           "new_system_message", "system_message_text", "system_update_text"]


def _plain(message: Any) -> Any:
    """A message as its on-disk JSON value."""
    if isinstance(message, msgspec.Raw):
        return _json.loads(message)
    if isinstance(message, UnknownMessage):
        return message.data
    if isinstance(message, msgspec.Struct):
        return msgspec.to_builtins(message)
    return message


def _is_system(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("role") == "system"


def _content_text(content: Any, separator: str = "\n") -> str:
    """pi-ai's ``contentText``: a string as is, else its text blocks joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return separator.join(str(block.get("text")) for block in content
                          if isinstance(block, Mapping) and block.get("type") == "text")


class _Key:
    """A tool name as a JavaScript ``Map`` key: strings and numbers by value, anything else by
    identity (two objects are two keys)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __hash__(self) -> int:
        return hash((type(self.value), self.value)) if isinstance(
            self.value, (str, int, float, bool, type(None))) else id(self.value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Key):
            return NotImplemented
        if isinstance(self.value, (str, int, float, bool, type(None))):
            return type(self.value) is type(other.value) and self.value == other.value
        return self.value is other.value


def _tools_of(message: Mapping[str, Any], key: str) -> list[Any]:
    tools = message.get(key)
    return tools if isinstance(tools, list) else []


def _name(tool: Any) -> _Key:
    return _Key(tool.get("name") if isinstance(tool, Mapping) else None)


def current_tools(messages: Iterable[Any]) -> list[Any]:
    """The tools after replaying every system message: per message its ``toolsRemoved``
    deleted by name, then its ``toolsAdded`` set by name (a tool keeps the place it was first
    added at until it is removed)."""
    tools: dict[_Key, Any] = {}
    for message in map(_plain, messages):
        if not _is_system(message):
            continue
        for tool in _tools_of(message, "toolsRemoved"):
            tools.pop(_name(tool), None)
        for tool in _tools_of(message, "toolsAdded"):
            tools[_name(tool)] = tool
    return list(tools.values())


def current_system_message(messages: Iterable[Any]) -> dict[str, Any] | None:
    """The one system message holding the prompt and tools after replaying every system message
    of ``messages`` (a context's), or ``None`` when there is none and no tool.

    Its ``content`` is the non-empty contents joined by a blank line, ``sections`` the sections
    patched in order (left out when none is left), ``toolsAdded`` :func:`current_tools` (left
    out when none), ``timestamp`` the first system message's."""
    plain = [_plain(m) for m in messages]
    content: list[str] = []
    sections: dict[str, Any] = {}
    timestamp: Any = None
    seen = False
    for message in plain:
        if not _is_system(message):
            continue
        if not seen or timestamp is None:  # JavaScript's ??=: set while null or undefined
            timestamp = message.get("timestamp")
        seen = True
        text = _content_text(message.get("content"))
        if text:
            content.append(text)
        patch = message.get("sections")
        if isinstance(patch, Mapping):
            for name, value in _js_entries(patch):
                if value is None:
                    sections.pop(name, None)
                else:
                    sections[name] = value
    tools = current_tools(plain)
    if timestamp is None and not tools:
        return None
    out: dict[str, Any] = {"role": "system", "content": "\n\n".join(content)}
    if sections:
        out["sections"] = sections
    if tools:
        out["toolsAdded"] = tools
    out["timestamp"] = 0 if timestamp is None else timestamp
    return out


def _js_entries(value: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``Object.entries`` of a parsed JSON object: integer-like keys first, ascending."""
    index = sorted((k for k in value if _json.is_index_key(k)), key=int)
    return [(k, value[k]) for k in index] + [(k, v) for k, v in value.items()
                                              if not _json.is_index_key(k)]


def system_message_text(message: Mapping[str, Any]) -> str:
    """pi-ai's ``getSystemMessageText``: the content then each section, non-empty parts joined
    by a blank line: the prompt as a model API with one system prompt receives it."""
    parts = [_content_text(message.get("content"))]
    sections = message.get("sections")
    if isinstance(sections, Mapping):
        parts.extend(str(value) for _, value in _js_entries(sections) if value is not None)
    return "\n\n".join(part for part in parts if part)


def system_update_text(message: Any) -> str:
    """pi-ai's ``renderSystemMessageUpdate``: a later system message as the text sent in place
    to a model API that takes system messages mid-conversation: its content, then each section
    change named (``Updated system prompt section "NAME":`` and the text, or ``Removed system
    prompt section "NAME".``), joined by a blank line."""
    plain = _plain(message)
    text = _content_text(plain.get("content"))
    parts = [text] if text else []
    sections = plain.get("sections")
    if isinstance(sections, Mapping):
        parts.extend(f'Removed system prompt section "{name}".' if value is None
                     else f'Updated system prompt section "{name}":\n\n{value}'
                     for name, value in _js_entries(sections))
    return "\n\n".join(parts)


def collapse_system_messages(messages: Sequence[Any]) -> list[Any]:
    """pi-ai's ``collapseSystemMessages``, for a model API without mid-conversation system
    messages: the replayed system message first, then every other message (system ones
    dropped)."""
    head = current_system_message(messages)
    rest = [m for m in messages if not _is_system(_plain(m))]
    return [head, *rest] if head is not None else rest


def _tool_declaration(tool: Any, where: str) -> dict[str, Any]:
    data = msgspec.to_builtins(tool) if isinstance(tool, ToolDeclaration) else tool
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str) or not data["name"]:
        raise InvalidMessage(f"{where}: a tool needs a non-empty string 'name'", field=where)
    if not isinstance(data.get("description", ""), str):
        raise InvalidMessage(f"{where}: 'description' must be a string", field=where)
    if not isinstance(data.get("parameters", {}), Mapping):
        raise InvalidMessage(f"{where}: 'parameters' must be a JSON Schema object", field=where)
    return {"name": data["name"], "description": data.get("description", ""),
            "parameters": data.get("parameters", {}),
            **{k: v for k, v in data.items() if k not in ("name", "description", "parameters")}}


def _tool_reference(tool: Any, where: str) -> dict[str, Any]:
    name = tool if isinstance(tool, str) else tool.name if isinstance(tool, (ToolReference,
                                                                               ToolDeclaration)) \
        else tool.get("name") if isinstance(tool, Mapping) else None
    if not isinstance(name, str) or not name:
        raise InvalidMessage(f"{where}: a removed tool is named by a non-empty string", field=where)
    return {"name": name}


def new_system_message(content: str | Sequence[Any] = "", *,
                       sections: Mapping[str, str | None] | None = None,
                       tools_added: Sequence[ToolDeclaration | Mapping[str, Any]] | None = None,
                       tools_removed: Sequence[str | ToolReference | Mapping[str, Any]] | None = None,
                       timestamp: int | None = None) -> dict[str, Any]:
    """A system message to append (on-disk shape), checked: ``content`` a string or text
    blocks, ``sections`` names to text (``None`` removes one), ``tools_added`` complete
    declarations (name, description, JSON Schema parameters), ``tools_removed`` tool names.
    Empty patches are left out, as pi leaves them out.

    Raises:
        InvalidMessage: a field of the wrong shape (the error's ``field`` names it).
    """
    if isinstance(content, str):
        body: Any = content
    else:
        body = [msgspec.to_builtins(b) if isinstance(b, msgspec.Struct) else b for b in content]
        if not all(isinstance(b, Mapping) and b.get("type") == "text" and
                   isinstance(b.get("text"), str) for b in body):
            raise InvalidMessage("system message content is a string or text blocks",
                                 field="content")
    message: dict[str, Any] = {"role": "system", "content": body}
    if sections:
        for name, value in sections.items():
            if not isinstance(name, str) or not (value is None or isinstance(value, str)):
                raise InvalidMessage(f"section {name!r}: a name maps to text or None",
                                     field=f"sections.{name}")
        message["sections"] = dict(sections)
    if tools_added:
        message["toolsAdded"] = [_tool_declaration(t, f"toolsAdded[{i}]")
                                 for i, t in enumerate(tools_added)]
    if tools_removed:
        message["toolsRemoved"] = [_tool_reference(t, f"toolsRemoved[{i}]")
                                   for i, t in enumerate(tools_removed)]
    message["timestamp"] = now_ms() if timestamp is None else timestamp
    return message
