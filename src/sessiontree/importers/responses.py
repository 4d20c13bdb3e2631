"""OpenAI Responses API / Agents SDK input items <-> pi entries, and the importer for a list of them.

The mapping follows pi's own OpenAI Responses provider (pi-ai), so that pi continuing such a
session with an OpenAI model sends the same items back:

* a user message -> a ``user`` message (text as ``text``, base64 ``input_image`` as ``image``);
* a ``system`` / ``developer`` message -> a ``custom_message`` (``openai.system`` /
  ``openai.developer``), which pi sends as user text;
* an assistant output message -> an ``assistant`` message, the item id in ``textSignature``;
* ``function_call`` -> an ``assistant`` message with a ``toolCall`` whose id is
  ``<call_id>|<item id>``; ``function_call_output`` -> a ``toolResult`` for it;
* ``reasoning`` -> an ``assistant`` message with a ``thinking`` block holding the summary and,
  in ``thinkingSignature``, the whole item as JSON;
* anything else (hosted tool calls and their outputs, ``item_reference``, compaction items,
  items of types added later) -> a ``custom`` entry ``openai.item`` with the item as ``data``:
  pi ignores it, nothing is lost.

Invariant: :func:`entry_items` of the entry made by :func:`item_entry` gives back exactly the item
(equal as JSON). Where the pi message alone cannot reproduce it (an ``input_file``, an image
given by URL, arguments that are not compact JSON, extra fields), the item is also kept verbatim
in the entry's ``openaiItem`` field, which pi ignores.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._time import iso_now
from ..context import convert_to_llm, entry_message
from ..entries import as_json_object
from ..messages import message_from_builtins, now_ms
from ._build import SourceConversation, SourceNode, fingerprint
from ._read import SourceFile, as_text

__all__ = [
    "FORMAT",
    "ITEM_CUSTOM_TYPE",
    "ITEM_FIELD",
    "AssistantInfo",
    "ToolCalls",
    "entry_items",
    "item_entry",
    "parse_responses",
]

FORMAT = "responses"
ITEM_CUSTOM_TYPE = "openai.item"
"""``customType`` of the custom entries that hold items pi has no message for."""
ITEM_FIELD = "openaiItem"
"""Entry field (ignored by pi) holding an item verbatim when its message cannot reproduce it."""

_ROLE_CUSTOM = {"system": "openai.system", "developer": "openai.developer"}


@dataclass(frozen=True)
class AssistantInfo:
    """What assistant messages made from items record as their origin (pi's required fields)."""

    provider: str = "openai"
    model: str = ""
    api: str = "openai-responses"


class ToolCalls:
    """The function calls seen so far on a path: ``call_id`` -> (pi tool call id, tool name), so
    that a ``function_call_output`` becomes a ``toolResult`` pi pairs with its call."""

    def __init__(self) -> None:
        self._calls: dict[str, tuple[str, str]] = {}

    def note(self, entry: Mapping[str, Any]) -> None:
        """Remember the tool calls of an entry (an on-disk dict) on the path."""
        message = entry.get("message") if entry.get("type") == "message" else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return
        for block in message.get("content") or ():
            if isinstance(block, dict) and block.get("type") == "toolCall":
                call_id = as_text(block.get("id")).split("|")[0]
                self._calls[call_id] = (as_text(block.get("id")), as_text(block.get("name")))

    def get(self, call_id: str) -> tuple[str, str]:
        return self._calls.get(call_id, (call_id, ""))


def _assistant(content: list[dict[str, Any]], info: AssistantInfo, stop: str,
               stamp: int) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "api": info.api, "provider": info.provider,
            "model": info.model, "usage": {"input": 0, "output": 0, "cacheRead": 0,
                                           "cacheWrite": 0, "totalTokens": 0,
                                           "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                                    "cacheWrite": 0, "total": 0}},
            "stopReason": stop, "timestamp": stamp}


def _data_image(url: Any) -> dict[str, Any] | None:
    """A pi image block from a ``data:<mime>;base64,<data>`` URL; ``None`` for anything else."""
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return None
    mime, _, data = url[5:].partition(";base64,")
    return {"type": "image", "data": data, "mimeType": mime}


def _parts_to_blocks(parts: Iterable[Any]) -> list[dict[str, Any]]:
    """Input content parts as pi text/image blocks; a part pi cannot hold becomes a short text
    naming it (the item itself is kept verbatim)."""
    blocks: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
            continue
        image = _data_image(part.get("image_url")) if kind == "input_image" else None
        if image is not None:
            blocks.append(image)
        elif kind == "input_file":
            name = part.get("filename") or part.get("file_id") or part.get("file_url") or "file"
            blocks.append({"type": "text", "text": f"[file: {name}]"})
        else:
            blocks.append({"type": "text", "text": f"[{kind or 'content'}]"})
    return blocks


def _message(body: dict[str, Any], timestamp: str) -> dict[str, Any]:
    return {"type": "message", "timestamp": timestamp, "message": body}


def _mapped(item: Mapping[str, Any], calls: ToolCalls, info: AssistantInfo, stamp: int,
            timestamp: str) -> dict[str, Any] | None:
    """The entry pi knows for an item, or ``None`` when it has none."""
    kind = item.get("type", "message")
    role = item.get("role")
    if kind == "message" and role in ("user", "system", "developer"):
        content = item.get("content")
        if isinstance(content, list):
            content = _parts_to_blocks(content)
        elif not isinstance(content, str):
            return None
        if role == "user":
            return _message({"role": "user", "content": content, "timestamp": stamp}, timestamp)
        return {"type": "custom_message", "customType": _ROLE_CUSTOM[str(role)],
                "content": content, "display": True, "timestamp": timestamp}
    if kind == "message" and role == "assistant":
        parts = item.get("content")
        text = parts if isinstance(parts, str) else "".join(
            as_text(p.get("text") if p.get("text") is not None else p.get("refusal"))
            for p in parts or () if isinstance(p, dict))
        block: dict[str, Any] = {"type": "text", "text": text}
        if isinstance(item.get("id"), str):
            signature = {"v": 1, "id": item["id"]}
            if isinstance(item.get("phase"), str):
                signature["phase"] = item["phase"]
            block["textSignature"] = json.dumps(signature, separators=(",", ":"))
        return _message(_assistant([block], info, "stop", stamp), timestamp)
    if kind == "function_call":
        try:
            arguments = json.loads(item.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = {}
        call_id = as_text(item.get("call_id"))
        pi_id = f"{call_id}|{item['id']}" if isinstance(item.get("id"), str) else call_id
        call = {"type": "toolCall", "id": pi_id, "name": as_text(item.get("name")),
                "arguments": arguments if isinstance(arguments, dict) else {}}
        return _message(_assistant([call], info, "toolUse", stamp), timestamp)
    if kind == "function_call_output":
        pi_id, name = calls.get(as_text(item.get("call_id")))
        output = item.get("output")
        blocks = [{"type": "text", "text": output}] if isinstance(output, str) else \
            _parts_to_blocks(output if isinstance(output, list) else ())
        return _message({"role": "toolResult", "toolCallId": pi_id, "toolName": name,
                         "content": blocks, "isError": False, "timestamp": stamp}, timestamp)
    if kind == "reasoning":
        summary = "\n\n".join(as_text(s.get("text")) for s in item.get("summary") or ()
                              if isinstance(s, dict))
        thinking = {"type": "thinking", "thinking": summary,
                    "thinkingSignature": json.dumps(item, separators=(",", ":"),
                                                    ensure_ascii=False)}
        return _message(_assistant([thinking], info, "stop", stamp), timestamp)
    return None


def item_entry(item: Mapping[str, Any], calls: ToolCalls, info: AssistantInfo = AssistantInfo(),
               *, timestamp: str | None = None, stamp: int | None = None) -> dict[str, Any]:
    """The entry (on-disk dict without ``id``/``parentId``) that stands for one item.

    Args:
        item: a Responses input item (a dict, as the Agents SDK passes them).
        calls: the tool calls on the path so far (a ``function_call_output`` looks its call up).
        info: provider, model and api recorded on assistant messages.
        timestamp: the entry's ISO time (default: now); ``stamp``: the message's epoch ms.

    Returns:
        A ``message``, ``custom_message`` or ``custom`` entry body; :func:`entry_items` of it
        gives back ``item``.
    """
    timestamp = timestamp or iso_now()
    stamp = now_ms() if stamp is None else stamp
    plain = json.loads(json.dumps(item))  # as it will read back from disk
    entry = _mapped(plain, calls, info, stamp, timestamp)
    if entry is None:
        return {"type": "custom", "customType": ITEM_CUSTOM_TYPE, "data": plain,
                "timestamp": timestamp}
    if entry_items(entry) != [plain]:
        entry[ITEM_FIELD] = plain
    return entry


def _user_item(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        return {"role": "user", "content": content}
    parts = []
    for block in content or ():
        if block.get("type") == "image":
            parts.append({"type": "input_image", "detail": "auto",
                          "image_url": f"data:{block.get('mimeType')};base64,{block.get('data')}"})
        else:
            parts.append({"type": "input_text", "text": block.get("text", "")})
    return {"role": "user", "content": parts}


def _assistant_items(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in message.get("content") or ():
        kind = block.get("type")
        if kind == "thinking" and isinstance(block.get("thinkingSignature"), str):
            try:
                reasoning = json.loads(block["thinkingSignature"])
            except ValueError:
                continue
            if isinstance(reasoning, dict):
                items.append(reasoning)
        elif kind == "text":
            item: dict[str, Any] = {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": block.get("text", ""), "annotations": []}],
                "status": "completed"}
            signature = block.get("textSignature")
            if isinstance(signature, str):
                try:
                    parsed = json.loads(signature) if signature.startswith("{") else {"id": signature}
                except ValueError:
                    parsed = {"id": signature}
                item["id"] = parsed.get("id")
                if "phase" in parsed:
                    item["phase"] = parsed["phase"]
            items.append(item)
        elif kind == "toolCall":
            call_id, _, item_id = as_text(block.get("id")).partition("|")
            call: dict[str, Any] = {"type": "function_call", "call_id": call_id,
                                    "name": block.get("name", ""),
                                    "arguments": json.dumps(block.get("arguments", {}),
                                                            separators=(",", ":"),
                                                            ensure_ascii=False)}
            if item_id:
                call["id"] = item_id
            items.append(call)
    return items


def entry_items(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Responses input items an entry (on-disk dict) stands for, in order.

    Entries made by :func:`item_entry` give back their item; other entries (written by pi or
    through sessiontree's API) give the items pi's OpenAI Responses provider would send for them:
    compaction and branch summaries, custom messages and bash executions as user messages.
    Entries that stand for no message (labels, model changes, other custom entries) give none.
    """
    kept = entry.get(ITEM_FIELD)
    if isinstance(kept, dict):
        return [kept]
    kind = entry.get("type")
    if kind == "custom":
        data = entry.get("data")
        return [data] if entry.get("customType") == ITEM_CUSTOM_TYPE and isinstance(data, dict) \
            else []
    if kind == "custom_message" and entry.get("customType") in _ROLE_CUSTOM.values():
        custom_role = str(entry.get("customType")).partition(".")[2]
        content = entry.get("content")
        return [{"role": custom_role, "content": content if isinstance(content, str)
                 else _user_item({"content": content})["content"]}]
    message = entry_message(entry)
    if message is None:
        return []
    role = message.get("role")
    if role == "user":
        return [_user_item(message)]
    if role == "assistant":
        return _assistant_items(message)
    if role == "toolResult":
        parts = message.get("content") or []
        texts = [b.get("text", "") for b in parts if b.get("type") == "text"]
        output: Any = "\n".join(texts)
        if any(b.get("type") == "image" for b in parts):
            output = _user_item({"content": parts})["content"]
        return [{"type": "function_call_output",
                 "call_id": as_text(message.get("toolCallId")).split("|")[0], "output": output}]
    if kind == "branch_summary" and not entry.get("summary"):
        return []
    converted = convert_to_llm([message_from_builtins(message)])  # type: ignore[list-item]
    return [_user_item(as_json_object(m)) for m in converted]


def parse_responses(source: SourceFile) -> list[SourceConversation]:
    """A file holding a JSON array of input items (or ``{"input": [...]}``, a Responses request
    body) as one linear conversation; its source id is a hash of the items."""
    document = source.json()
    where: tuple[str, ...] = ()
    if isinstance(document, dict) and "input" in document:
        document, where = document["input"], ("input",)
    items = source.expect_list(document, *where)
    calls = ToolCalls()
    nodes: list[SourceNode] = []
    timestamp, stamp = iso_now(), now_ms()
    for index, item in enumerate(items):
        source.expect_object(item, *where, index)
        if not isinstance(item.get("type", "message"), str):
            source.fail("an item's type must be a string", position=_path(where, index, "type"))
        entry = item_entry(item, calls, timestamp=timestamp, stamp=stamp)
        calls.note(entry)
        key = item.get("id") if isinstance(item.get("id"), str) else f"item-{index}"
        nodes.append(SourceNode(key=f"{index}:{key}", parent=nodes[-1].key if nodes else None,
                                entries=[entry]))
    digest = fingerprint(items)
    return [SourceConversation(format=FORMAT, source_id=digest, nodes=nodes,
                               leaf=nodes[-1].key if nodes else None, created=timestamp,
                               fingerprint=digest)]


def _path(where: tuple[str, ...], *more: str | int) -> str:
    from ._read import json_path

    return json_path(*where, *more)
