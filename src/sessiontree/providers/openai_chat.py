"""Context messages -> an OpenAI Chat Completions request body (``POST /chat/completions``).

The conversion is pi 0.73.1's ``openai-completions`` provider, for the standard API:

* the system prompt is the first message (role ``system``, or ``developer`` when asked);
* user text and images become content parts (``text``, ``image_url`` with a ``data:`` URL);
* an assistant reply is one message: its text joined as a string, its tool calls as
  ``tool_calls`` (``arguments`` as a JSON string); thinking is not sent (another model's
  thinking arrives here already turned into text by :func:`._common.prepare_messages`);
  a reply with neither text nor tool calls is left out;
* each tool result is a ``tool`` message with its text (``"(see attached image)"`` when it has
  only images); the images of a run of tool results follow in one user message
  ``"Attached image(s) from tool result:"``, since ``tool`` messages cannot carry images;
* tool call ids from other providers are normalized: the part before ``|`` (Responses ids),
  made of ``[a-zA-Z0-9_-]``, at most 40 characters.

Invariant: the body validates against the ``openai`` package's
``CompletionCreateParamsNonStreaming`` with unknown keys forbidden (tests check it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import msgspec

from ..messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    StopReason,
    SystemMessage,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)
from ..system_prompt import system_message_text, system_update_text
from ._common import (
    RequestSource,
    ToolSpec,
    as_tool_spec,
    in_place_prompt,
    json_arguments,
    prepare_messages,
    replayed_prompt,
    request_target,
    sanitize,
    sanitize_id,
)
from ._http import OpenAIEndpoint
from .base import Assembly, HttpModel

__all__ = ["API", "OpenAIChatModel", "chat_messages", "chat_request", "chat_tools"]

API = "openai-completions"
"""pi's name for this API (the ``api`` of the assistant messages it produces)."""


def _normalize_id(call_id: str, _source: AssistantMessage) -> str:
    if "|" in call_id:
        return sanitize_id(call_id.split("|", 1)[0], 40)
    return call_id[:40]


def _data_url(image: ImageContent) -> str:
    return f"data:{image.mime_type};base64,{image.data}"


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": _data_url(image)}}


def chat_messages(messages: Sequence[AgentMessage | UnknownMessage], *, system: str | None = None,
                  provider: str | None = None, model: str | None = None,
                  system_role: Literal["system", "developer"] = "system",
                  system_in_place: bool = False) -> list[dict[str, Any]]:
    """The ``messages`` array of a Chat Completions request.

    Args:
        messages: context messages, oldest first.
        system: the system prompt, if any.
        provider: the target provider (decides which replies are the same model's).
        model: the target model.
        system_role: ``system``, or ``developer`` (OpenAI's reasoning models).
        system_in_place: send system messages where they are (see :func:`chat_request`);
            otherwise they are left out.
    """
    prepared = prepare_messages(messages, api=API, provider=provider, model=model,
                                normalize_id=_normalize_id, system_in_place=system_in_place)
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": system_role, "content": sanitize(system)})
    index = 0
    while index < len(prepared):
        message = prepared[index]
        if isinstance(message, UserMessage):
            content = message.content
            if isinstance(content, str):
                out.append({"role": "user", "content": sanitize(content)})
            elif content:
                out.append({"role": "user", "content": [
                    {"type": "text", "text": sanitize(b.text)} if isinstance(b, TextContent)
                    else _image_part(b) for b in content]})
        elif isinstance(message, SystemMessage):
            plain = msgspec.to_builtins(message)
            text = system_message_text(plain) if index == 0 else system_update_text(plain)
            if text:
                out.append({"role": system_role, "content": sanitize(text)})
        elif isinstance(message, AssistantMessage):
            text = "".join(sanitize(b.text) for b in message.content
                           if isinstance(b, TextContent) and b.text.strip())
            calls = [b for b in message.content if isinstance(b, ToolCall)]
            if text or calls:
                reply: dict[str, Any] = {"role": "assistant", "content": text or None}
                if calls:
                    reply["tool_calls"] = [
                        {"id": c.id, "type": "function",
                         "function": {"name": c.name,
                                      "arguments": json_arguments(c.arguments)}}
                        for c in calls]
                out.append(reply)
        else:
            images: list[dict[str, Any]] = []
            while index < len(prepared) and isinstance(prepared[index], ToolResultMessage):
                result = prepared[index]
                assert isinstance(result, ToolResultMessage)
                blocks = result.content
                text = "\n".join(b.text for b in blocks if isinstance(b, TextContent))
                out.append({"role": "tool", "tool_call_id": result.tool_call_id,
                            "content": sanitize(text) if text else "(see attached image)"})
                images.extend(_image_part(b) for b in blocks if isinstance(b, ImageContent))
                index += 1
            if images:
                out.append({"role": "user", "content": [
                    {"type": "text", "text": "Attached image(s) from tool result:"}, *images]})
            continue
        index += 1
    return out


def chat_tools(tools: Sequence[ToolSpec | Any]) -> list[dict[str, Any]]:
    """The ``tools`` array: each tool as a ``function`` with its JSON-schema parameters
    (``strict: false``, as pi sends it)."""
    out = []
    for tool in tools:
        spec = as_tool_spec(tool)
        function: dict[str, Any] = {"name": spec.name}
        if spec.description:
            function["description"] = spec.description
        function["parameters"] = spec.parameters
        function["strict"] = False
        out.append({"type": "function", "function": function})
    return out


def chat_request(source: RequestSource, *, model: str | None = None,
                 provider: str | None = None, system: str | None = None,
                 tools: Sequence[ToolSpec | Any] = (), max_tokens: int | None = None,
                 system_role: Literal["system", "developer"] = "system",
                 system_in_place: bool = False) -> dict[str, Any]:
    """A whole Chat Completions request body (without ``stream``).

    Args:
        source: a session's context (:meth:`Session.build_context
            <sessiontree.Session.build_context>`), whose model and provider are the defaults
            of ``model`` and ``provider``; or context messages, oldest first.
        model: the model (``model`` is left out when there is none).
        provider: the target provider (see :func:`chat_messages`).
        system: the system prompt, if any.
        tools: the tools the model may call.
        max_tokens: the output budget (``max_completion_tokens``), if any.
        system_role: see :func:`chat_messages`.
        system_in_place: for a model that takes system messages mid-conversation (pi-ai's
            ``compat.supportsMidConvoSystemMessages``): ``system`` and ``tools`` lead, each
            system message of the context stays where it is (after the results of tool calls
            pending there), later ones sent as pi-ai renders an update (content, then each
            section change named), and ``tools`` are the ones current at the end. Otherwise
            (the default, as pi-ai's) all of them are replayed into one leading prompt.
    """
    messages, model, provider = request_target(source, model, provider)
    if system_in_place:
        messages, tools = in_place_prompt(messages, system, tools)
        system = None
    else:
        messages, system, tools = replayed_prompt(messages, system, tools)
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    body["messages"] = chat_messages(messages, system=system, provider=provider, model=model,
                                     system_role=system_role, system_in_place=system_in_place)
    if tools:
        body["tools"] = chat_tools(tools)
    if max_tokens is not None:
        body["max_completion_tokens"] = max_tokens
    return body


_FINISH: dict[str, StopReason] = {"stop": "stop", "length": "length", "tool_calls": "toolUse",
                                  "function_call": "toolUse", "content_filter": "error"}


class OpenAIChatModel(HttpModel, OpenAIEndpoint):
    """A model behind an OpenAI-compatible Chat Completions API (OpenAI, vLLM, llama.cpp,
    Ollama, LiteLLM, OpenRouter...), streamed (``stream_options.include_usage``).

    Args:
        model: the model name.
        **options: :class:`~sessiontree.providers.base.HttpModel` (``api_key``,
            ``base_url``, ``timeout``, ``max_retries``, ``backoff``, ``max_backoff``,
            ``headers``, ``temperature``, ``max_tokens``, ``provider``); the key and URL default to
            ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``.

    Raises:
        MissingExtra: httpx is not installed (``pip install 'sessiontree[llm]'``).
        ProviderNotConfigured: no model, or no key for api.openai.com.
    """

    api = API
    path = "chat/completions"

    build = staticmethod(chat_request)
    stream_fields = {"stream": True, "stream_options": {"include_usage": True}}

    async def read(self, events: AsyncIterator[tuple[str | None, Any]], into: Assembly) -> None:
        async for _name, chunk in events:
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                self.error_in(chunk)
            into.response_id = into.response_id or chunk.get("id")
            into.response_model = into.response_model or chunk.get("model")
            usage = chunk.get("usage")
            if isinstance(usage, dict):
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                into.usage = {"input": max(0, int(usage.get("prompt_tokens") or 0) - cached),
                              "output": int(usage.get("completion_tokens") or 0),
                              "cache_read": int(cached)}
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str):
                    into.add("thinking", "thinking", reasoning)
                if isinstance(delta.get("content"), str):
                    into.add("text", "text", delta["content"])
                for call in delta.get("tool_calls") or ():
                    key = ("call", call.get("index", 0))
                    function = call.get("function") or {}
                    if key not in into.keys:
                        into.open(key, "tool_call", call_id=call.get("id") or "",
                                  name=function.get("name") or "")
                    block = into.block(key, "tool_call")
                    block.call_id = block.call_id or call.get("id") or ""
                    block.name = block.name or function.get("name") or ""
                    into.add(key, "tool_call", function.get("arguments") or "")
                reason = choice.get("finish_reason")
                if reason:
                    into.stop = _FINISH.get(reason, "stop")
                    into.finished = True
