"""What the three payload conversions share: tool specs, and pi's ``transformMessages`` pass.

:func:`prepare_messages` turns context messages into the messages a model API accepts, as pi
1.5.2 does before every request:

* session-only roles become user messages (:func:`~sessiontree.context.convert_to_llm`:
  ``bashExecution``, ``custom``, branch and compaction summaries with pi's exact wording);
  messages that cannot be typed (:class:`~sessiontree.messages.UnknownMessage`) are left out;
* errored and aborted assistant replies are left out (they are incomplete turns);
* thinking from another model is left out (pi 1.5.2; pi 0.73.1 sent it as plain text), and so
  is empty thinking of the same model; a tool call from another model loses its ``thoughtSignature``
  and gets its id normalized for the target API, and its results follow the new id;
* every tool call gets a result before the next assistant or user message: a missing one is
  an error result ``"No result provided"`` (pi's rule), so calls and results always pair;
* a tool result whose call is not pending (its assistant reply was left out) is left out too,
  since every API rejects a result without its call (pi sends it and gets the request refused).

Lone UTF-16 surrogates (which JSON allows and HTTP bodies do not) are removed from text, as
pi's ``sanitizeSurrogates`` does. Nothing here changes the messages it is given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

import msgspec

from ..context import SessionContext, convert_to_llm
from ..messages import (
    AgentMessage,
    AssistantMessage,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
    message_from_builtins,
)

__all__ = [
    "LlmMessage", "RequestSource", "ToolSpec", "as_tool_spec", "json_arguments", "prepare_messages",
    "in_place_prompt", "replayed_prompt",
    "request_target", "sanitize", "sanitize_id",
]

LlmMessage = UserMessage | AssistantMessage | ToolResultMessage | SystemMessage
"""A message in the form a model API takes (after :func:`prepare_messages`)."""

RequestSource = Union[SessionContext, Sequence[Union[AgentMessage, UnknownMessage]]]
"""What a request is built from: a session's context, or context messages oldest first."""


def request_target(source: RequestSource, model: str | None, provider: str | None,
                   ) -> tuple[Sequence[AgentMessage | UnknownMessage], str | None, str | None]:
    """The messages, model and provider of a request: a context gives its messages, and its
    model and provider where the caller gives none (left out when the context has none)."""
    if not isinstance(source, SessionContext):
        return source, model, provider
    ref = source.model
    if model is None and ref is not None and isinstance(ref.model_id, str):
        model = ref.model_id
    if provider is None and ref is not None and isinstance(ref.provider, str):
        provider = ref.provider
    return source.messages, model, provider


def replayed_prompt(messages: Sequence[AgentMessage | UnknownMessage], system: str | None,
                    tools: Sequence[ToolSpec | Any]
                    ) -> tuple[Sequence[AgentMessage | UnknownMessage], str | None, list[Any]]:
    """The messages, system prompt and tools of a request to a model API that takes no system
    message mid-conversation, as pi-ai 1.x builds them: the given ``system`` and ``tools``
    become a leading system message (``normalizeContext``), every system message is replayed
    into one that leads and the others are dropped (``collapseSystemMessages``); the prompt is
    its content then its sections (``getSystemMessageText``), the tools its ``toolsAdded``.
    Without system messages in ``messages`` everything is returned as given."""
    from ..system_prompt import collapse_system_messages, system_message_text

    if not any(getattr(m, "role", None) == "system" for m in messages):
        return messages, system, list(tools)
    declared = [msgspec.to_builtins(as_tool_spec(t)) for t in tools]
    initial: list[Any] = []
    if system or declared:
        initial = [{"role": "system", "content": system or "",
                    **({"toolsAdded": declared} if declared else {}), "timestamp": 0}]
    collapsed = collapse_system_messages([*initial, *messages])
    head = collapsed[0]
    text = system_message_text(head)
    return collapsed[1:], text or None, list(head.get("toolsAdded", []))


def in_place_prompt(messages: Sequence[AgentMessage | UnknownMessage], system: str | None,
                    tools: Sequence[ToolSpec | Any]
                    ) -> tuple[list[AgentMessage | UnknownMessage], list[Any]]:
    """The messages and tools of a request to a model API that takes system messages
    mid-conversation, as pi-ai 1.5.2 builds them: the given ``system`` and ``tools`` become a
    leading system message (``normalizeContext``), every system message stays where it is, and
    the request's tools are the ones current at the end (``getCurrentTools``: pi-ai declares
    no tool change in place unless the model supports that too)."""
    from ..system_prompt import current_tools, new_system_message

    declared = [msgspec.to_builtins(as_tool_spec(t)) for t in tools]
    initial = [message_from_builtins(new_system_message(system or "", tools_added=declared,
                                                        timestamp=0))] if system or declared else []
    out = [*initial, *messages]
    return out, current_tools(out)


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool as a model sees it: a name, what it does, and its JSON-schema ``parameters``."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}})


def as_tool_spec(tool: ToolSpec | Mapping[str, Any] | Any) -> ToolSpec:
    """A :class:`ToolSpec` from a spec, a dict with ``name``/``description``/``parameters``, or
    any object with a ``spec`` attribute (an agent tool)."""
    if isinstance(tool, ToolSpec):
        return tool
    spec = getattr(tool, "spec", None)
    if isinstance(spec, ToolSpec):
        return spec
    if isinstance(tool, Mapping):
        return msgspec.convert(dict(tool), ToolSpec)
    raise TypeError(f"not a tool: {tool!r}")


_SURROGATE = re.compile("[\ud800-\udfff]")
_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def sanitize(text: str) -> str:
    """``text`` without lone surrogates (a decoded pair is one code point, so any left is lone)."""
    return _SURROGATE.sub("", text) if _SURROGATE.search(text) else text


def json_arguments(arguments: Mapping[str, Any]) -> str:
    """Tool call arguments as the JSON string the OpenAI APIs carry (``JSON.stringify`` form)."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def sanitize_id(part: str, limit: int = 64) -> str:
    """Characters other than ``[a-zA-Z0-9_-]`` replaced by ``_``, cut to ``limit``."""
    return _ID_UNSAFE.sub("_", part)[:limit]


def _same_model(message: AssistantMessage, api: str, provider: str | None, model: str | None) -> bool:
    return message.api == api and message.provider == (provider or "") and message.model == (model or "")


def _thinking(block: ThinkingContent, same: bool) -> list[ThinkingContent]:
    if not same:
        return []
    if block.redacted is True or block.thinking_signature or block.thinking.strip():
        return [block]
    return []


def prepare_messages(messages: Sequence[AgentMessage | UnknownMessage], *, api: str,
                     provider: str | None = None, model: str | None = None,
                     normalize_id: Callable[[str, AssistantMessage], str] | None = None,
                     system_in_place: bool = False) -> list[LlmMessage]:
    """Context messages -> the messages a model API takes (see the module documentation).

    Args:
        messages: context messages, oldest first.
        api: the target API in pi's naming (``openai-completions``, ``openai-responses``,
            ``anthropic-messages``); with ``provider`` and ``model`` it decides which assistant
            replies are "the same model" (their thinking and ids are replayed as they are).
        provider: the target provider.
        model: the target model id.
        normalize_id: maps a tool call id from another model to one the API accepts.
        system_in_place: keep system messages (otherwise left out), each where it is, or
            after the results of the tool calls pending there (pi's ``transformMessages``).
    """
    llm = convert_to_llm([m for m in messages if not isinstance(m, UnknownMessage)])
    renamed: dict[str, str] = {}
    out: list[LlmMessage] = []
    pending: list[ToolCall] = []
    answered: set[str] = set()
    held: list[SystemMessage] = []

    def close_pending() -> None:
        for call in pending:
            if call.id not in answered:
                out.append(ToolResultMessage(tool_call_id=call.id, tool_name=call.name,
                                             content=[TextContent(text="No result provided")],
                                             is_error=True))
        pending.clear()
        answered.clear()
        out.extend(held)
        held.clear()

    for message in llm:
        if isinstance(message, AssistantMessage):
            close_pending()
            if message.stop_reason in ("error", "aborted"):
                continue
            same = _same_model(message, api, provider, model)
            content: list[TextContent | ThinkingContent | ToolCall] = []
            for block in message.content:
                if isinstance(block, ThinkingContent):
                    content.extend(_thinking(block, same))
                elif isinstance(block, ToolCall):
                    call = block
                    if not same:
                        new_id = normalize_id(block.id, message) if normalize_id else block.id
                        if new_id != block.id:
                            renamed[block.id] = new_id
                        call = ToolCall(id=new_id, name=block.name, arguments=block.arguments)
                    content.append(call)
                    pending.append(call)
                elif isinstance(block, TextContent):
                    content.append(block if same else TextContent(text=block.text))
            out.append(msgspec.structs.replace(message, content=content))
        elif isinstance(message, ToolResultMessage):
            call_id = renamed.get(message.tool_call_id, message.tool_call_id)
            if not any(call.id == call_id for call in pending) or call_id in answered:
                continue
            answered.add(call_id)
            out.append(message if call_id == message.tool_call_id
                       else msgspec.structs.replace(message, tool_call_id=call_id))
        elif isinstance(message, UserMessage):
            close_pending()
            out.append(message)
        elif isinstance(message, SystemMessage) and system_in_place:
            (held if pending else out).append(message)
    close_pending()
    return out
