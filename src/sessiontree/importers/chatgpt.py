"""ChatGPT data export (``conversations.json``): every conversation becomes one session.

The export is an array of conversations; each holds its messages in ``mapping`` (node id ->
``{id, message, parent, children}``) and names its current leaf in ``current_node``. Siblings in
the mapping (edited prompts, regenerated answers) stay siblings in the tree.

* ``user`` text and ``multimodal_text`` -> a ``user`` message (an image asset, whose bytes are not
  in ``conversations.json``, becomes a ``[image: <asset>]`` text and is kept in ``source.parts``);
* ``assistant`` text -> an ``assistant`` message with the message's ``model_slug``;
  ``thoughts`` -> an ``assistant`` message with ``thinking``; a message addressed to a tool
  (``recipient`` other than ``all``: code for ``python``, a ``browser`` search) -> an
  ``assistant`` message with a ``toolCall``;
* ``tool`` messages answering such a call -> a ``toolResult``;
* ``system`` messages (usually hidden), custom instructions (``user_editable_context``),
  ``reasoning_recap`` and tool messages with no call -> ``custom`` entries ``chatgpt.<kind>``
  holding the message, counted as unmapped;
* a node without a message (the root ChatGPT creates) is not an entry; its children hang from
  its parent.

Times are the messages' ``create_time`` (else the parent's, else the conversation's); the
conversation's title is the session name. What a message's content holds beside the text read
from it (a ``tether_quote``'s url, domain and title, a code block's language, a ``parts`` that
was not an array) is kept in the entry's ``source.content``.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

from ._build import SourceConversation, SourceNode, fingerprint, iso_from_seconds
from ._read import SourceFile, as_text, json_path, obj

__all__ = ["FORMAT", "parse_chatgpt"]

FORMAT = "chatgpt"


class _Conversation:
    """One conversation being read; ``where`` is its JSON path prefix for errors."""

    def __init__(self, source: SourceFile, data: dict[str, Any], where: tuple[str | int, ...]):
        self.source = source
        self.data = data
        self.where = where
        self.default_model = data.get("default_model_slug") if isinstance(
            data.get("default_model_slug"), str) else ""
        self.calls: dict[str, tuple[str, str]] = {}  # node key -> (tool call id, tool name)

    def fail(self, reason: str, *more: str | int) -> NoReturn:
        self.source.fail(reason, position=json_path(*self.where, *more))

    def seconds(self, value: Any, *more: str | int) -> float | None:
        return self.source.seconds(value, *self.where, *more)

    def texts(self, content: dict[str, Any], key: str) -> tuple[list[str], list[Any], str | None]:
        """The text pieces of a message's content, the parts that are not text, and the content
        field they were read from (``None``: none, the content is kept whole in ``source``)."""
        parts = content.get("parts")
        if isinstance(parts, (str, dict)):  # one part where a list is expected: still a part
            parts = [parts]
        elif parts is not None and not isinstance(parts, list):
            self.fail("parts must be an array of strings and objects",
                      "mapping", key, "message", "content", "parts")
        if parts is not None:
            texts: list[str] = []
            other: list[Any] = []
            for index, part in enumerate(parts):
                if isinstance(part, str):
                    if part:
                        texts.append(part)
                elif isinstance(part, dict):
                    other.append(part)
                    pointer = part.get("asset_pointer")
                    kind = part.get("content_type", "part")
                    texts.append(f"[{'image' if 'image' in str(kind) else kind}: "
                                 f"{pointer or kind}]")
                else:
                    self.fail("a content part must be a string or an object",
                              "mapping", key, "message", "content", "parts", index)
            return texts, other, "parts" if isinstance(content["parts"], list) else None
        for field in ("text", "result"):
            if isinstance(content.get(field), str):
                return [content[field]], [], field
        if content.get("content_type") == "thoughts" and isinstance(content.get("thoughts"), list):
            return [as_text(t.get("content") if t.get("content") is not None else t.get("summary"))
                    for t in content["thoughts"]
                    if isinstance(t, dict)], [], None
        return [], [], None

    def node(self, key: str, raw: Any, times: dict[str, float]) -> SourceNode:
        node = self.source.expect_object(raw, *self.where, "mapping", key)
        parent = node.get("parent")
        if parent is not None and not isinstance(parent, str):
            self.fail("parent must be a node id or null", "mapping", key, "parent")
        message = node.get("message")
        created = self.seconds(self.data.get("create_time"), "create_time") or 0.0
        when = times.get(parent, created) if isinstance(parent, str) else created
        if message is None:
            times[key] = when
            return SourceNode(key=key, parent=parent, entries=[])
        message = self.source.expect_object(message, *self.where, "mapping", key, "message")
        author = message.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        if not isinstance(role, str):
            self.fail("a message needs author.role", "mapping", key, "message", "author")
        content = message.get("content")
        if not isinstance(content, dict):
            self.fail("a message needs a content object", "mapping", key, "message", "content")
        when = self.seconds(message.get("create_time"), "mapping", key, "message",
                            "create_time") or when
        times[key] = when
        texts, other, read = self.texts(content, key)
        source = {k: v for k, v in message.items() if k not in ("id", "content", "create_time")}
        source["contentType"] = content.get("content_type")
        if other:
            source["parts"] = other
        entry = self.entry(key, role, message, content, texts, parent, iso_from_seconds(when),
                           round(when * 1000))
        rest = {k: v for k, v in content.items() if k not in ("content_type", read)}
        if rest and entry["type"] != "custom":  # (a custom entry holds the whole content)
            source["content"] = rest  # a tether_quote's url, domain and title, say
        return SourceNode(key=key, parent=parent, entries=[entry], source=source)

    def entry(self, key: str, role: str, message: dict[str, Any], content: dict[str, Any],
              texts: list[str], parent: str | None, timestamp: str, stamp: int) -> dict[str, Any]:
        kind = content.get("content_type")
        recipient = message.get("recipient", "all")
        metadata = obj(message.get("metadata"))
        text = "\n".join(texts)
        if role == "user" and kind in ("text", "multimodal_text"):
            return _message({"role": "user", "content": [{"type": "text", "text": t}
                                                         for t in texts], "timestamp": stamp},
                            timestamp)
        if role == "assistant" and kind not in ("reasoning_recap", None):
            model = metadata.get("model_slug") if isinstance(metadata.get("model_slug"), str) \
                else self.default_model
            if isinstance(recipient, str) and recipient != "all":
                self.calls[key] = (key, recipient)
                block: dict[str, Any] = {"type": "toolCall", "id": key, "name": recipient,
                                         "arguments": _arguments(text)}
                stop = "toolUse"
            elif kind == "thoughts":
                block, stop = {"type": "thinking", "thinking": "\n\n".join(texts)}, "stop"
            else:
                block, stop = {"type": "text", "text": text}, "stop"
            return _message({"role": "assistant", "content": [block], "api": "chatgpt",
                             "provider": "openai", "model": model, "usage": _NO_USAGE,
                             "stopReason": stop, "timestamp": stamp}, timestamp)
        call = self.calls.get(parent or "")
        if role == "tool" and call is not None:
            return _message({"role": "toolResult", "toolCallId": call[0], "toolName": call[1],
                             "content": [{"type": "text", "text": text}],
                             "isError": False, "timestamp": stamp}, timestamp)
        what = kind if kind in ("user_editable_context", "reasoning_recap") else role
        return {"type": "custom", "customType": f"chatgpt.{what}",
                "data": {"role": role, "text": text, "content": content}, "timestamp": timestamp}

    def conversation(self) -> SourceConversation:
        mapping = self.source.expect_object(self.data.get("mapping"), *self.where, "mapping")
        times: dict[str, float] = {}
        by_key = {}
        order = _parents_first(mapping)
        for key in order:
            by_key[key] = self.node(key, mapping[key], times)
        nodes = [by_key[key] for key in mapping]
        conversation_id = self.data.get("conversation_id") or self.data.get("id")
        digest = fingerprint(self.data)
        leaf = self.data.get("current_node")
        title = self.data.get("title")
        created = self.seconds(self.data.get("create_time"), "create_time")
        if created is None:
            created = min(times.values(), default=0.0)
        return SourceConversation(
            format=FORMAT, source_id=conversation_id if isinstance(conversation_id, str) else digest,
            nodes=nodes, leaf=leaf if isinstance(leaf, str) else None,
            created=iso_from_seconds(created), title=title if isinstance(title, str) else None,
            fingerprint=digest)


_NO_USAGE = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def _message(body: dict[str, Any], timestamp: str) -> dict[str, Any]:
    return {"type": "message", "timestamp": timestamp, "message": body}


def _arguments(text: str) -> dict[str, Any]:
    """A tool call's arguments: the JSON object the text holds, else ``{"input": text}``."""
    try:
        value = json.loads(text)
    except ValueError:
        return {"input": text}
    return value if isinstance(value, dict) else {"input": text}


def _parents_first(mapping: dict[str, Any]) -> list[str]:
    """Node keys with each parent before its children (so times can fall back to the parent's)."""
    seen: set[str] = set()
    out: list[str] = []
    for start in mapping:
        chain = []
        key: Any = start
        while isinstance(key, str) and key in mapping and key not in seen and key not in chain:
            chain.append(key)
            node = mapping[key]
            key = node.get("parent") if isinstance(node, dict) else None
        for item in reversed(chain):
            seen.add(item)
            out.append(item)
    return out


def parse_chatgpt(source: SourceFile) -> list[SourceConversation]:
    """Every conversation of a ``conversations.json`` (an array, or one conversation object)."""
    document = source.json()
    if isinstance(document, dict) and "mapping" in document:
        return [_Conversation(source, document, ()).conversation()]
    conversations = source.expect_list(document)
    return [_Conversation(source, source.expect_object(c, i), (i,)).conversation()
            for i, c in enumerate(conversations)]
