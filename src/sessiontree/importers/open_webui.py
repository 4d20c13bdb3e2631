"""Open WebUI chat export (``chat-export-<ms>.json``, "Export chat (.json)" or "Export all chats").

The export is an array of chat records ``{id, title, chat: {history: {messages, currentId}, ...},
created_at, ...}``. ``history.messages`` maps message id -> ``{id, parentId, childrenIds, role,
content, timestamp, model, ...}``: a tree whose siblings are regenerated answers, edited prompts
and the answers of several models to one prompt. Each chat becomes one session, every sibling a
branch, ``currentId`` the leaf.

* ``user`` -> a ``user`` message; image files given as data URLs become ``image`` blocks, other
  files a ``[file: <name>]`` text (the file records stay in ``source.files``);
* ``assistant`` -> an ``assistant`` message with the message's ``model``, its token usage when
  recorded, and ``stopReason: "error"`` with the error text when the answer failed;
* ``system`` or any other role -> a ``custom`` entry ``open-webui.<role>``, counted as unmapped.

Times are the messages' ``timestamp`` (epoch seconds); a chat with no ``created_at`` starts at its
first message (or, with no time anywhere, at the import). The chat's title is the session name.
Everything else a message records (``modelName``, ``sources``, ``statusHistory``, ``info``...) is
kept in the entry's ``source`` object.
"""

from __future__ import annotations

import time
from typing import Any

from ._build import SourceConversation, SourceNode, fingerprint, iso_from_seconds
from ._read import SourceFile, as_text, json_path, obj

__all__ = ["FORMAT", "parse_open_webui"]

FORMAT = "open-webui"

_OWN = ("id", "parentId", "childrenIds", "role", "content", "timestamp")


def _seconds(source: SourceFile, value: Any, *where: str | int) -> float | None:
    milliseconds = isinstance(value, (int, float)) and value > 1e11  # as some versions store
    return source.seconds(value, *where, per_second=1000 if milliseconds else 1)


def _usage(message: dict[str, Any]) -> dict[str, Any]:
    usage = obj(message.get("usage"))
    prompt = usage.get("prompt_tokens", usage.get("input_tokens", 0))
    completion = usage.get("completion_tokens", usage.get("output_tokens", 0))
    prompt = prompt if isinstance(prompt, int) else 0
    completion = completion if isinstance(completion, int) else 0
    total = usage.get("total_tokens", prompt + completion)
    return {"input": prompt, "output": completion, "cacheRead": 0, "cacheWrite": 0,
            "totalTokens": total if isinstance(total, int) else prompt + completion,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def _user_content(text: str, files: Any) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for item in files if isinstance(files, list) else ():
        if not isinstance(item, dict):
            continue
        url = item.get("url")
        if item.get("type") == "image" and isinstance(url, str) and url.startswith("data:") \
                and ";base64," in url:
            mime, _, data = url[5:].partition(";base64,")
            blocks.append({"type": "image", "data": data, "mimeType": mime})
        else:
            name = item.get("name") or obj(item.get("file")).get("filename") or item.get("id")
            blocks.append({"type": "text", "text": f"[file: {name or 'file'}]"})
    return blocks or [{"type": "text", "text": ""}]


def _node(source: SourceFile, key: str, raw: Any, where: tuple[str | int, ...],
          fallback: float) -> tuple[SourceNode, float]:
    message = source.expect_object(raw, *where, key)
    parent = message.get("parentId")
    if parent is not None and not isinstance(parent, str):
        source.fail("parentId must be a message id or null", position=json_path(*where, key,
                                                                                 "parentId"))
    role = message.get("role")
    content = message.get("content", "")
    if not isinstance(role, str):
        source.fail("a message needs a role", position=json_path(*where, key, "role"))
    if not isinstance(content, str):
        source.fail("content must be a string", position=json_path(*where, key, "content"))
    when = _seconds(source, message.get("timestamp"), *where, key, "timestamp") or fallback
    timestamp, stamp = iso_from_seconds(when), round(when * 1000)
    rest = {k: v for k, v in message.items() if k not in _OWN}
    if role == "user":
        body: dict[str, Any] = {"role": "user", "content": _user_content(content,
                                                                         message.get("files")),
                                "timestamp": stamp}
        entry = {"type": "message", "timestamp": timestamp, "message": body}
    elif role == "assistant":
        error = message.get("error")
        body = {"role": "assistant", "content": [{"type": "text", "text": content}],
                "api": "open-webui", "provider": "open-webui",
                "model": str(message.get("model") or ""), "usage": _usage(message),
                "stopReason": "error" if error else "stop", "timestamp": stamp}
        if error:
            detail = error.get("content") if isinstance(error, dict) else error
            body["errorMessage"] = as_text(detail)  # (the error record stays in source)
        entry = {"type": "message", "timestamp": timestamp, "message": body}
    else:
        entry = {"type": "custom", "customType": f"open-webui.{role}",
                 "data": {"role": role, "content": content}, "timestamp": timestamp}
    return SourceNode(key=key, parent=parent, entries=[entry], source=rest), when


def _chat(source: SourceFile, record: dict[str, Any], where: tuple[str | int, ...]
          ) -> SourceConversation:
    chat = obj(record.get("chat")) or record
    chat_where = (*where, "chat") if chat is not record else where
    history = source.expect_object(chat.get("history"), *chat_where, "history")
    messages = source.expect_object(history.get("messages"), *chat_where, "history", "messages")
    created = _seconds(source, record.get("created_at"), *where, "created_at") \
        or _seconds(source, chat.get("timestamp"), *chat_where, "timestamp")
    if not created:  # no time for the chat: its first message's, else now (never 1970)
        stamps = (_seconds(source, raw.get("timestamp"), *chat_where, "history", "messages", key,
                           "timestamp") for key, raw in messages.items() if isinstance(raw, dict))
        created = min((t for t in stamps if t), default=time.time())
    nodes = []
    last = created
    for key, raw in messages.items():
        node, last = _node(source, key, raw, (*chat_where, "history", "messages"), last)
        nodes.append(node)
    chat_id = record.get("id") or chat.get("id")
    digest = fingerprint(record)
    leaf = history.get("currentId")
    title = record.get("title") or chat.get("title")
    return SourceConversation(
        format=FORMAT, source_id=chat_id if isinstance(chat_id, str) and chat_id else digest,
        nodes=nodes, leaf=leaf if isinstance(leaf, str) else None,
        created=iso_from_seconds(created), title=title if isinstance(title, str) else None,
        fingerprint=digest)


def parse_open_webui(source: SourceFile) -> list[SourceConversation]:
    """Every chat of an Open WebUI export (an array of chat records, or one record)."""
    document = source.json()
    if isinstance(document, dict):
        return [_chat(source, document, ())]
    chats = source.expect_list(document)
    return [_chat(source, source.expect_object(c, i), (i,)) for i, c in enumerate(chats)]
