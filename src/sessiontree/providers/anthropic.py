"""Context messages -> an Anthropic Messages request body (``POST /v1/messages``).

The conversion is pi 0.73.1's ``anthropic-messages`` provider:

* the system prompt is the top-level ``system`` field;
* user text and images become ``text`` and base64 ``image`` blocks (blank text blocks and
  blank string messages are left out, as the API rejects them);
* an assistant reply becomes one message of ``text``, ``thinking`` (with its signature),
  ``redacted_thinking`` and ``tool_use`` blocks; thinking without a signature is sent as text;
  blank blocks are left out, and so is a reply left with none;
* consecutive tool results become one user message of ``tool_result`` blocks (string content
  when a result is text only; blocks, with ``"(see attached image)"`` first when there is no
  text, when it has images);
* tool call ids from other providers are normalized to ``[a-zA-Z0-9_-]``, at most 64
  characters, as the API requires;
* system messages (pi 1.x) are replayed into the ``system`` prompt and ``tools``, or, for a
  model that takes them mid-conversation, kept in place as pi-ai 1.5.2 sends them
  (``system_in_place``, with tool changes in place: ``tool_changes``; see
  :func:`anthropic_request`).

Invariant: the body of the default form validates against the ``anthropic`` package's
``MessageCreateParamsNonStreaming`` with unknown keys forbidden (tests check it); the in-place
forms (``system`` role messages, ``tool_addition`` blocks) are checked against pi-ai 1.5.2's
bodies instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec

from ..messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    StopReason,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
)
from ..system_prompt import system_message_text, system_update_text
from ._common import (
    RequestSource,
    ToolSpec,
    as_tool_spec,
    in_place_prompt,
    prepare_messages,
    replayed_prompt,
    request_target,
    sanitize,
    sanitize_id,
)
from ._http import AnthropicEndpoint
from .base import Assembly, HttpModel

__all__ = ["API", "DEFAULT_MAX_TOKENS", "INLINE_TOOLS_BETA", "AnthropicModel", "anthropic_messages",
           "anthropic_request", "anthropic_tools"]

API = "anthropic-messages"
"""pi's name for this API (the ``api`` of the assistant messages it produces)."""

DEFAULT_MAX_TOKENS = 8192
"""The output budget when none is given (the API requires one)."""

INLINE_TOOLS_BETA = "inline-tools-2026-09-15"
"""The beta feature of tool changes in place (``tool_addition`` and ``tool_removal`` blocks)."""


def _deferred_placeholder() -> dict[str, Any]:
    """pi-ai's ``DEFERRED_TOOL_PLACEHOLDER``: a deferred tool never loaded, declared whenever
    tools change in place so that the first change keeps the cached prefix."""
    return {"name": "__pi_deferred_placeholder__",
            "description": "Reserved placeholder. Never available. Never call this.",
            "input_schema": {"type": "object", "properties": {}, "required": []},
            "defer_loading": True}


def _normalize_id(call_id: str, _source: AssistantMessage) -> str:
    return sanitize_id(call_id, 64) or "toolu"


def _image_block(image: ImageContent) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": image.mime_type,
                                        "data": image.data}}


def _result_content(blocks: Sequence[TextContent | ImageContent]) -> str | list[dict[str, Any]]:
    if not any(isinstance(b, ImageContent) for b in blocks):
        return sanitize("\n".join(b.text for b in blocks if isinstance(b, TextContent)))
    out = [{"type": "text", "text": sanitize(b.text)} if isinstance(b, TextContent)
           else _image_block(b) for b in blocks]
    if not any(isinstance(b, TextContent) for b in blocks):
        out.insert(0, {"type": "text", "text": "(see attached image)"})
    return out


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": sanitize(block.text)})
        elif isinstance(block, ThinkingContent):
            if block.redacted is True:
                if block.thinking_signature:
                    blocks.append({"type": "redacted_thinking", "data": block.thinking_signature})
            elif not block.thinking.strip():
                continue
            elif not block.thinking_signature or not block.thinking_signature.strip():
                blocks.append({"type": "text", "text": sanitize(block.thinking)})
            else:
                blocks.append({"type": "thinking", "thinking": sanitize(block.thinking),
                               "signature": block.thinking_signature})
        elif isinstance(block, ToolCall):
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name,
                           "input": block.arguments or {}})
    return blocks


def _system_update(message: SystemMessage, tool_changes: bool) -> dict[str, Any] | None:
    """A later system message in place (pi-ai's ``convertMessages``): its update text, and
    with ``tool_changes`` a ``tool_removal`` per tool removed and not defined again, then a
    ``tool_addition`` per tool added; ``None`` when that is nothing."""
    plain = msgspec.to_builtins(message)
    text = system_update_text(plain)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": sanitize(text)}] if text else []
    if tool_changes:
        added = plain.get("toolsAdded", [])
        redefined = {tool["name"] for tool in added}
        blocks.extend({"type": "tool_removal",
                       "tool": {"type": "tool_reference", "name": tool["name"]}}
                      for tool in plain.get("toolsRemoved", []) if tool["name"] not in redefined)
        blocks.extend({"type": "tool_addition", "tool": {"type": "tool_definition",
                                                         "definition": definition}}
                      for definition in anthropic_tools(added))
    return {"role": "system", "content": blocks} if blocks else None


def anthropic_messages(messages: Sequence[AgentMessage | UnknownMessage], *,
                       provider: str | None = None, model: str | None = None,
                       system_in_place: bool = False, tool_changes: bool = False
                       ) -> list[dict[str, Any]]:
    """The ``messages`` array of a Messages request.

    Args:
        messages: context messages, oldest first.
        provider: the target provider (decides which replies are the same model's).
        model: the target model.
        system_in_place: send system messages as ``system`` role messages, each held back to
            just before the next assistant message sent (Anthropic wants tool results right
            after their call) or the end; otherwise they are left out.
        tool_changes: with ``system_in_place``, declare their tool changes in place too.
    """
    prepared = prepare_messages(messages, api=API, provider=provider, model=model,
                                normalize_id=_normalize_id, system_in_place=system_in_place)
    out: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    index = 0
    while index < len(prepared):
        message = prepared[index]
        index += 1
        if isinstance(message, SystemMessage):
            update = _system_update(message, tool_changes)
            if update is not None:
                held.append(update)
        elif isinstance(message, ToolResultMessage):
            results = [message]
            while index < len(prepared) and isinstance(prepared[index], ToolResultMessage):
                results.append(prepared[index])  # type: ignore[arg-type]
                index += 1
            out.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": r.tool_call_id,
                 "content": _result_content(r.content), "is_error": r.is_error} for r in results]})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message)
            if blocks:
                out.extend(held)
                held.clear()
                out.append({"role": "assistant", "content": blocks})
        else:
            content = message.content
            if isinstance(content, str):
                if content.strip():
                    out.append({"role": "user", "content": sanitize(content)})
                continue
            user_blocks = [{"type": "text", "text": sanitize(b.text)} if isinstance(b, TextContent)
                           else _image_block(b) for b in content
                           if not isinstance(b, TextContent) or b.text.strip()]
            if user_blocks:
                out.append({"role": "user", "content": user_blocks})
    return out + held


def anthropic_tools(tools: Sequence[ToolSpec | Any]) -> list[dict[str, Any]]:
    """The ``tools`` array: name, description and ``input_schema``: an object schema of the
    parameters' ``properties``, ``required`` and shared definitions only, as pi 1.5.2 sends it
    (Anthropic refuses root keywords such as ``anyOf``)."""
    out = []
    for tool in tools:
        spec = as_tool_spec(tool)
        parameters = spec.parameters
        schema: dict[str, Any] = {
            "type": "object", "properties": parameters.get("properties", {}),
            "required": parameters.get("required", []),
            **{k: parameters[k] for k in ("$defs", "definitions") if k in parameters}}
        entry: dict[str, Any] = {"name": spec.name, "input_schema": schema}
        if spec.description:
            entry["description"] = spec.description
        out.append(entry)
    return out


def anthropic_request(source: RequestSource, *,
                      model: str | None = None, provider: str | None = None,
                      system: str | None = None, tools: Sequence[ToolSpec | Any] = (),
                      max_tokens: int | None = None, system_in_place: bool = False,
                      tool_changes: bool = False) -> dict[str, Any]:
    """A whole Messages request body (without ``stream``).

    Args:
        source: a session's context (:meth:`Session.build_context
            <sessiontree.Session.build_context>`), whose model and provider are the defaults
            of ``model`` and ``provider``; or context messages, oldest first.
        model: the model (``model`` is left out when there is none).
        provider: the target provider (see :func:`anthropic_messages`).
        system: the system prompt, if any.
        tools: the tools the model may call.
        max_tokens: the output budget (default :data:`DEFAULT_MAX_TOKENS`; the API requires it).
        system_in_place: for a model that takes system messages mid-conversation (pi-ai's
            ``compat.supportsMidConvoSystemMessages``): ``system`` and ``tools`` lead, the
            leading system message (the given prompt, or the context's first message) makes
            ``system``, each later one is a ``system`` role message with pi-ai's update text
            (content, then each section change named) held back to just before the next
            assistant message sent or the end, and ``tools`` are the ones current at the end.
            Otherwise (the default, as pi-ai's) all of them are replayed into ``system``.
        tool_changes: with ``system_in_place``, for a model that also takes tool changes
            mid-conversation (``compat.supportsMidConvoToolChanges``), when the leading system
            message declares tools: ``tools`` stay the leading ones plus pi-ai's deferred
            placeholder, each later system message withdraws tools (``tool_removal``) and
            defines added ones (``tool_addition``) in place, and ``betas`` (the
            ``anthropic-beta`` header's features, as the SDK's beta client takes them) names
            :data:`INLINE_TOOLS_BETA`.
    """
    messages, model, provider = request_target(source, model, provider)
    leading: dict[str, Any] | None = None
    if system_in_place:
        messages, tools = in_place_prompt(messages, system, tools)
        if messages and isinstance(messages[0], SystemMessage):
            leading = msgspec.to_builtins(messages[0])
            messages = messages[1:]
        system = system_message_text(leading) if leading is not None else None
    else:
        messages, system, tools = replayed_prompt(messages, system, tools)
    leading_tools = leading.get("toolsAdded", []) if leading is not None else []
    native = tool_changes and bool(leading_tools)
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    body["max_tokens"] = max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS
    if native:
        body["betas"] = [INLINE_TOOLS_BETA]
    if system:
        body["system"] = sanitize(system)
    body["messages"] = anthropic_messages(messages, provider=provider, model=model,
                                          system_in_place=system_in_place, tool_changes=native)
    if native:
        body["tools"] = [*anthropic_tools(leading_tools), _deferred_placeholder()]
    elif tools:
        body["tools"] = anthropic_tools(tools)
    return body


_STOP: dict[str, StopReason] = {"end_turn": "stop", "max_tokens": "length", "tool_use": "toolUse",
                                "refusal": "error", "pause_turn": "stop", "stop_sequence": "stop"}


class AnthropicModel(HttpModel, AnthropicEndpoint):
    """A Claude model behind the Anthropic Messages API, streamed. Thinking keeps its
    signature (``thinkingSignature``) so later requests can replay it.

    Args:
        model: the model name.
        **options: :class:`~sessiontree.providers.base.HttpModel`; the key and URL default to
            ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``.

    Raises:
        MissingExtra: httpx is not installed (``pip install 'sessiontree[llm]'``).
        ProviderNotConfigured: no model, or no key for api.anthropic.com.
    """

    api = API
    path = "messages"

    build = staticmethod(anthropic_request)

    async def read(self, events: AsyncIterator[tuple[str | None, Any]], into: Assembly) -> None:
        async for name, event in events:
            if not isinstance(event, dict):
                continue
            kind = event.get("type") or name
            key = event.get("index", 0)
            if kind == "error":
                self.error_in(event)
            elif kind == "message_start":
                message = event.get("message") or {}
                into.response_id = message.get("id")
                into.response_model = message.get("model")
                self._usage(into, message.get("usage") or {})
            elif kind == "content_block_start":
                block = event.get("content_block") or {}
                if block.get("type") == "tool_use":
                    into.open(key, "tool_call", call_id=block.get("id", ""), name=block.get("name", ""))
                elif block.get("type") == "thinking":
                    into.open(key, "thinking")
                elif block.get("type") == "redacted_thinking":
                    opened = into.open(key, "thinking")
                    opened.redacted, opened.signature = True, block.get("data", "")
                    opened.text = "[Reasoning redacted]"
                else:
                    into.open(key, "text")
                    into.add(key, "text", block.get("text") or "")
            elif kind == "content_block_delta":
                delta = event.get("delta") or {}
                if delta.get("type") == "text_delta":
                    into.add(key, "text", delta.get("text") or "")
                elif delta.get("type") == "thinking_delta":
                    into.add(key, "thinking", delta.get("thinking") or "")
                elif delta.get("type") == "signature_delta":
                    block = into.block(key, "thinking")
                    block.signature = (block.signature or "") + (delta.get("signature") or "")
                elif delta.get("type") == "input_json_delta":
                    into.add(key, "tool_call", delta.get("partial_json") or "")
            elif kind == "message_delta":
                reason = (event.get("delta") or {}).get("stop_reason")
                if reason:
                    into.stop = _STOP.get(reason, "stop")
                self._usage(into, event.get("usage") or {})
            elif kind == "message_stop":
                into.finished = True

    @staticmethod
    def _usage(into: Assembly, usage: dict[str, Any]) -> None:
        for ours, theirs in (("input", "input_tokens"), ("output", "output_tokens"),
                             ("cache_read", "cache_read_input_tokens"),
                             ("cache_write", "cache_creation_input_tokens")):
            if isinstance(usage.get(theirs), int):
                into.usage[ours] = usage[theirs]
