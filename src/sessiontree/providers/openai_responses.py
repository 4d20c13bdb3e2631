"""Context messages -> an OpenAI Responses request body (``POST /responses``).

The conversion is pi 0.73.1's ``openai-responses`` provider:

* the system prompt is the first input item (role ``system``, or ``developer`` when asked);
* user text and images become ``input_text`` and ``input_image`` parts (``detail: auto``,
  ``data:`` URL);
* an assistant reply becomes output items in order: a thinking block of the same model that
  carries its reasoning item (pi keeps it, JSON-encoded, as ``thinkingSignature``) is replayed
  as that ``reasoning`` item; text becomes an assistant ``message`` item (its id from
  ``textSignature`` when it carries one, else ``msg_<index of the message>``, as pi sends it;
  ids over 64 characters shortened with pi's ``shortHash``); a tool call becomes
  a ``function_call`` (its ``call_id`` is the part of pi's ``<call_id>|<item_id>`` before the
  bar, the item id is kept only for replies of the same model);
* a tool result becomes a ``function_call_output`` whose ``output`` is the text, or a list of
  ``input_text``/``input_image`` parts when the result has images;
* tool call ids from other providers are normalized to ``[a-zA-Z0-9_-]``, at most 64
  characters, without trailing underscores;
* system messages (pi 1.x) are replayed into the leading prompt item and ``tools``, or, for a
  model that takes them mid-conversation, kept in place as pi-ai 1.5.2 sends them
  (``system_in_place``, with tools declared in ``additional_tools`` items or loaded by client
  tool search; see :func:`responses_request`).

Invariant: the body of the default form validates against the ``openai`` package's
``ResponseCreateParamsNonStreaming`` with unknown keys forbidden (tests check it); the in-place
forms are checked against pi-ai 1.5.2's bodies instead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import msgspec

from ..messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)
from ..system_prompt import current_tools, system_message_text, system_update_text
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

__all__ = [
    "API", "OpenAIResponsesModel", "ToolChanges", "responses_input", "responses_request",
    "responses_tools", "short_hash",
]

API = "openai-responses"
"""pi's name for this API (the ``api`` of the assistant messages it produces)."""

_REASONING_KEYS = ("type", "id", "summary", "content", "encrypted_content", "status")


def _normalize_id(call_id: str, _source: AssistantMessage) -> str:
    return sanitize_id(call_id.split("|", 1)[0], 64).rstrip("_") or "call"


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"type": "input_image", "detail": "auto",
            "image_url": f"data:{image.mime_type};base64,{image.data}"}


def _parse_json(text: str | Any) -> Any:
    if not isinstance(text, str) or not text.startswith("{"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _reasoning_item(block: ThinkingContent) -> dict[str, Any] | None:
    item = _parse_json(block.thinking_signature)
    if not isinstance(item, dict) or item.get("type") != "reasoning" or not item.get("id"):
        return None
    out = {k: item[k] for k in _REASONING_KEYS if item.get(k) is not None}
    out.setdefault("summary", [])
    return out


def _imul(a: int, b: int) -> int:
    return (a * b) & 0xFFFFFFFF


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if not value:
            return out


def short_hash(text: str) -> str:
    """pi's ``shortHash`` (two 32-bit multiplicative hashes in base 36), used to shorten ids."""
    h1, h2 = 0xDEADBEEF, 0x41C6CE57
    utf16 = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(utf16), 2):  # JavaScript's charCodeAt: UTF-16 code units
        ch = utf16[i] | utf16[i + 1] << 8
        h1 = _imul(h1 ^ ch, 2654435761)
        h2 = _imul(h2 ^ ch, 1597334677)
    h1 = _imul(h1 ^ (h1 >> 16), 2246822507) ^ _imul(h2 ^ (h2 >> 13), 3266489909)
    h2 = _imul(h2 ^ (h2 >> 16), 2246822507) ^ _imul(h1 ^ (h1 >> 13), 3266489909)
    return _base36(h2) + _base36(h1)


def _text_item(block: TextContent, index: int, nth: int) -> dict[str, Any]:
    signature = _parse_json(block.text_signature)
    parsed = isinstance(signature, dict) and signature.get("v") == 1 and \
        isinstance(signature.get("id"), str)
    item_id = signature["id"] if parsed else block.text_signature or None
    if not isinstance(item_id, str) or not item_id:
        item_id = f"msg_pi_{index}" if nth == 0 else f"msg_pi_{index}_{nth}"
    elif len(item_id) > 64:
        item_id = f"msg_{short_hash(item_id)}"
    item: dict[str, Any] = {"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": sanitize(block.text),
                                         "annotations": []}],
                            "status": "completed", "id": item_id}
    phase = signature.get("phase") if parsed else None
    if phase in ("commentary", "final_answer"):
        item["phase"] = phase
    return item


ToolChanges = Literal["none", "changes", "additions"]
"""How a request with system messages in place declares tool changes (pi-ai's
``getResponsesToolSupport``): ``none``, the top-level ``tools`` are the current ones; ``changes``,
every system message declares its tools in ``additional_tools`` items (no top-level tools) and
removals are announced as text; ``additions``, added tools are loaded by client ``tool_search``
items and the top-level ``tools`` are the tool set after the last removal or redefinition."""


def _tool_changes(system_in_place: bool, additional_tools: bool, tool_search: bool) -> ToolChanges:
    if system_in_place and additional_tools:
        return "changes"
    return "additions" if tool_search else "none"


def _tool_names(message: dict[str, Any], key: str) -> list[Any]:
    tools = message.get(key)
    return [t.get("name") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def _tool_plan(messages: Sequence[Any], changes: ToolChanges) -> tuple[list[Any], int]:
    """pi-ai's ``resolveTranscriptTools``: the top-level tools of the request, and how many
    leading system messages are folded into them (the later ones declare their tools in place)."""
    systems = [msgspec.to_builtins(m) for m in messages if isinstance(m, SystemMessage)]
    if changes == "none":
        return current_tools(systems), len(systems)
    if changes == "changes":
        return [], 0
    declared: set[Any] = set()
    last = -1  # the last one that removes or declares again (findLastNonAdditiveToolChange)
    for number, message in enumerate(systems):
        if _tool_names(message, "toolsRemoved"):
            last = number
        for name in _tool_names(message, "toolsAdded"):
            if name in declared:
                last = number
            declared.add(name)
    leading = 1 if messages and isinstance(messages[0], SystemMessage) else 0
    folded = max(leading, last + 1)
    return current_tools(systems[:folded]), folded


class _SystemInPlace:
    """System messages kept in place (pi-ai's ``convertResponsesMessages``): the first whole,
    later ones as updates; those after the ``folded`` first declare their tools in place (an
    ``additional_tools`` item per message that adds tools, each after the first preceded by the
    incremental notice, or a client ``tool_search`` call and output) and announce true
    removals in their text."""

    def __init__(self, changes: ToolChanges, folded: int, role: str) -> None:
        self.changes = changes
        self.folded = folded
        self.role = role
        self.seen = 0
        self.declared = False
        self.unavailable: dict[Any, None] = {}  # a JavaScript Set: insertion order

    def items(self, message: SystemMessage, *, leading: bool, index: int) -> list[dict[str, Any]]:
        """The items of one system message; ``index`` is pi's ``msgIndex`` there."""
        plain = msgspec.to_builtins(message)
        anchored = self.seen >= self.folded
        self.seen += 1
        out = self.additions(plain, f"system:{index}") if anchored else []
        parts = [system_message_text(plain) if leading else system_update_text(plain)]
        if anchored:
            parts.append(self.removals(plain))
        text = "\n\n".join(part for part in parts if part)
        if text:
            out.append({"role": self.role, "content": sanitize(text)})
        return out

    def additions(self, message: dict[str, Any], seed: str) -> list[dict[str, Any]]:
        tools = message.get("toolsAdded")
        tools = tools if isinstance(tools, list) else []
        for name in _tool_names(message, "toolsAdded"):
            self.unavailable.pop(name, None)
        if not tools:
            return []
        if self.changes == "changes":
            items: list[dict[str, Any]] = []
            if self.declared:
                items.append({"role": self.role, "content": self._notice()})
            self.declared = True
            items.append({"type": "additional_tools", "role": "developer",
                          "tools": responses_tools(tools)})
            return items
        if self.changes != "additions":
            return []
        names = [str(n) for n in _tool_names(message, "toolsAdded")]
        call_id = f"pi_tool_load_{short_hash(seed + ':' + ','.join(names))}"
        return [{"type": "tool_search_call", "call_id": call_id, "execution": "client",
                 "status": "completed",
                 "arguments": {"query": " ".join(names), "limit": len(names)}},
                {"type": "tool_search_output", "call_id": call_id, "execution": "client",
                 "status": "completed",
                 "tools": [{**t, "defer_loading": True} for t in responses_tools(tools)]}]

    def removals(self, message: dict[str, Any]) -> str:
        added = set(_tool_names(message, "toolsAdded"))
        removed = [n for n in _tool_names(message, "toolsRemoved") if n not in added]
        for name in removed:
            self.unavailable[name] = None
        if not removed:
            return ""
        return "The following tools are no longer available. Do not call them:\n" + \
            "\n".join(f"- {name}" for name in removed)

    def _notice(self) -> str:
        notice = ("This is an incremental tools update. Previously declared tools remain "
                  "available unless explicitly marked unavailable. A tool declared again here is "
                  "available again, and its latest definition replaces the earlier one.")
        if self.unavailable:
            notice += f"\nStill unavailable: {', '.join(map(str, self.unavailable))}."
        return notice


def responses_input(messages: Sequence[AgentMessage | UnknownMessage], *, system: str | None = None,
                    provider: str | None = None, model: str | None = None,
                    system_role: Literal["system", "developer"] = "system",
                    system_in_place: bool = False,
                    tool_changes: ToolChanges = "none") -> list[dict[str, Any]]:
    """The ``input`` items of a Responses request.

    Args:
        messages: context messages, oldest first.
        system: the system prompt, if any.
        provider: the target provider (decides which replies are the same model's).
        model: the target model.
        system_role: ``system``, or ``developer`` (OpenAI's reasoning models).
        system_in_place: send system messages where they are (see :func:`responses_request`);
            otherwise they are left out.
        tool_changes: how system messages in place declare their tools (:data:`ToolChanges`).
    """
    prepared = prepare_messages(messages, api=API, provider=provider, model=model,
                                normalize_id=_normalize_id, system_in_place=system_in_place)
    items: list[dict[str, Any]] = []
    if system:
        items.append({"role": system_role, "content": sanitize(system)})
    in_place = _SystemInPlace(tool_changes, _tool_plan(prepared, tool_changes)[1], system_role)
    index = 0  # pi's msgIndex: counts the messages that produced items, and system messages
    for number, message in enumerate(prepared):
        produced = len(items)
        if isinstance(message, SystemMessage):
            items.extend(in_place.items(message, leading=number == 0, index=index))
            index += number != 0
            continue
        if isinstance(message, UserMessage):
            content = message.content
            parts: list[TextContent | ImageContent] = \
                [TextContent(text=content)] if isinstance(content, str) else content
            if parts:
                items.append({"role": "user", "content": [
                    {"type": "input_text", "text": sanitize(b.text)} if isinstance(b, TextContent)
                    else _image_part(b) for b in parts]})
        elif isinstance(message, AssistantMessage):
            texts = 0
            for block in message.content:
                if isinstance(block, ThinkingContent):
                    reasoning = _reasoning_item(block)
                    if reasoning is not None:
                        items.append(reasoning)
                elif isinstance(block, TextContent):
                    items.append(_text_item(block, index, texts))
                    texts += 1
                elif isinstance(block, ToolCall):
                    call_id, _, item_id = block.id.partition("|")
                    call: dict[str, Any] = {"type": "function_call", "call_id": call_id,
                                            "name": block.name,
                                            "arguments": json_arguments(block.arguments)}
                    if item_id:
                        call["id"] = item_id
                    items.append(call)
        elif isinstance(message, ToolResultMessage):
            blocks = message.content
            text = "\n".join(b.text for b in blocks if isinstance(b, TextContent))
            output: str | list[dict[str, Any]]
            if any(isinstance(b, ImageContent) for b in blocks):
                output = ([{"type": "input_text", "text": sanitize(text)}] if text else []) + \
                    [_image_part(b) for b in blocks if isinstance(b, ImageContent)]
            else:
                output = sanitize(text) if text else "(see attached image)"
            items.append({"type": "function_call_output",
                          "call_id": message.tool_call_id.partition("|")[0],
                          "output": output})
        if len(items) > produced:
            index += 1
    return items


def responses_tools(tools: Sequence[ToolSpec | Any]) -> list[dict[str, Any]]:
    """The ``tools`` array: each tool as a ``function`` (``strict: false``, as pi sends it)."""
    out = []
    for tool in tools:
        spec = as_tool_spec(tool)
        entry: dict[str, Any] = {"type": "function", "name": spec.name}
        if spec.description:
            entry["description"] = spec.description
        entry["parameters"] = spec.parameters
        entry["strict"] = False
        out.append(entry)
    return out


def responses_request(source: RequestSource, *,
                      model: str | None = None, provider: str | None = None,
                      system: str | None = None, tools: Sequence[ToolSpec | Any] = (),
                      max_tokens: int | None = None,
                      system_role: Literal["system", "developer"] = "system",
                      system_in_place: bool = False, additional_tools: bool = False,
                      tool_search: bool = False) -> dict[str, Any]:
    """A whole Responses request body (without ``stream``), with ``store: false`` as pi sends
    it (the conversation lives in the session, not on the server).

    Args:
        source: a session's context (:meth:`Session.build_context
            <sessiontree.Session.build_context>`), whose model and provider are the defaults
            of ``model`` and ``provider``; or context messages, oldest first.
        model: the model (``model`` is left out when there is none).
        provider: the target provider (see :func:`responses_input`).
        system: the system prompt, if any.
        tools: the tools the model may call.
        max_tokens: the output budget (``max_output_tokens``), if any.
        system_role: see :func:`responses_input`.
        system_in_place: for a model that takes system messages mid-conversation (pi-ai's
            ``compat.supportsMidConvoSystemMessages``): ``system`` and ``tools`` lead, each
            system message of the context stays where it is (after the results of tool calls
            pending there), the first one sent whole and later ones as pi-ai renders an update
            (content, then each section change named), and ``tools`` are the ones current at
            the end. Otherwise (the default, as pi-ai's) all of them are replayed into one
            leading prompt.
        additional_tools: with ``system_in_place``, for a model that also takes
            ``additional_tools`` items (``compat.supportsAdditionalTools``): each system message
            declares the tools it adds in place, removals are announced in its text, and there
            are no top-level ``tools``.
        tool_search: with ``system_in_place`` (and without ``additional_tools``), for a model
            that takes client tool search (``compat.supportsToolSearch``): tools added after the
            last removal or redefinition are loaded by ``tool_search`` items in place.
    """
    messages, model, provider = request_target(source, model, provider)
    changes = _tool_changes(system_in_place, additional_tools, tool_search)
    if system_in_place:
        messages, _ = in_place_prompt(messages, system, tools)
        system = None
        tools, _ = _tool_plan(messages, changes)
    else:
        messages, system, tools = replayed_prompt(messages, system, tools)
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    body["input"] = responses_input(messages, system=system, provider=provider, model=model,
                                    system_role=system_role, system_in_place=system_in_place,
                                    tool_changes=changes)
    if tools:
        body["tools"] = responses_tools(tools)
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    body["store"] = False
    return body


class OpenAIResponsesModel(HttpModel, OpenAIEndpoint):
    """A model behind the OpenAI Responses API, streamed. Replies keep what a later request
    needs, as pi stores it: a reasoning item as its thinking block's ``thinkingSignature``
    (JSON), a message item's id in ``textSignature``, tool call ids as ``<call_id>|<item_id>``.

    Args:
        model: the model name.
        **options: :class:`~sessiontree.providers.base.HttpModel`; the key and URL default to
            ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``.

    Raises:
        MissingExtra: httpx is not installed (``pip install 'sessiontree[llm]'``).
        ProviderNotConfigured: no model, or no key for api.openai.com.
    """

    api = API
    path = "responses"

    build = staticmethod(responses_request)

    async def read(self, events: AsyncIterator[tuple[str | None, Any]], into: Assembly) -> None:
        async for name, event in events:
            if not isinstance(event, dict):
                continue
            kind = event.get("type") or name
            key = event.get("output_index", 0)
            if kind in ("error", "response.failed"):
                response = event.get("response")
                self.error_in(response if isinstance(response, dict) and response.get("error")
                              else event)
            elif kind in ("response.created", "response.in_progress"):
                response = event.get("response") or {}
                into.response_id = into.response_id or response.get("id")
            elif kind == "response.output_item.added":
                item = event.get("item") or {}
                if item.get("type") == "function_call":
                    into.open(key, "tool_call", call_id=f"{item.get('call_id', '')}|{item.get('id', '')}",
                              name=item.get("name", ""))
                elif item.get("type") == "reasoning":
                    into.open(key, "thinking")
                elif item.get("type") == "message":
                    into.open(key, "text")
            elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                into.add(key, "thinking", event.get("delta") or "")
            elif kind == "response.output_text.delta":
                into.add(key, "text", event.get("delta") or "")
            elif kind == "response.function_call_arguments.delta":
                into.add(key, "tool_call", event.get("delta") or "")
            elif kind == "response.output_item.done":
                self._finish_item(into, key, event.get("item") or {})
            elif kind in ("response.completed", "response.incomplete"):
                response = event.get("response") or {}
                into.response_id = response.get("id") or into.response_id
                into.response_model = response.get("model") or into.response_model
                usage = response.get("usage") or {}
                cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
                into.usage = {"input": max(0, int(usage.get("input_tokens") or 0) - cached),
                              "output": int(usage.get("output_tokens") or 0),
                              "cache_read": int(cached)}
                if response.get("status") == "incomplete":
                    into.stop = "length"
                into.finished = True

    @staticmethod
    def _finish_item(into: Assembly, key: Any, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "reasoning":
            block = into.block(key, "thinking")
            summary = "\n\n".join(part.get("text", "") for part in item.get("summary") or ())
            block.text = block.text or summary
            block.signature = json.dumps(item, separators=(",", ":"), ensure_ascii=False)
        elif kind == "message":
            block = into.block(key, "text")
            final = "".join(part.get("text", "") for part in item.get("content") or ()
                            if part.get("type") == "output_text")
            block.text = final or block.text
            signature: dict[str, Any] = {"v": 1, "id": item.get("id", "")}
            if item.get("phase") in ("commentary", "final_answer"):
                signature["phase"] = item["phase"]
            block.signature = json.dumps(signature, separators=(",", ":"))
        elif kind == "function_call":
            block = into.block(key, "tool_call")
            block.call_id = f"{item.get('call_id', '')}|{item.get('id', '')}"
            block.name = item.get("name") or block.name
            if isinstance(item.get("arguments"), str):
                block.text = item["arguments"]
