"""Claude Code session files (``~/.claude/projects/<project>/<session id>.jsonl``).

Each line is a record. ``user``, ``assistant`` and ``system`` records carry ``uuid`` and
``parentUuid`` and form a tree: a rewind or an edited prompt leaves siblings, a sub-agent's
sidechain (``isSidechain``) its own root. One file becomes one session, every branch kept.

* ``user`` text and images -> a ``user`` message; each ``tool_result`` block -> a ``toolResult``
  (the tool's name from its ``tool_use``, ``toolUseResult`` as ``details``); a record holding
  several becomes a chain of entries;
* ``isMeta`` user records (caveats and instructions Claude Code adds) -> a ``custom_message``
  ``claude-code.meta`` with ``display: false``, which pi sends to the model as Claude Code did;
* ``assistant`` -> an ``assistant`` message (text, thinking with its signature, ``tool_use`` as
  ``toolCall``, model, usage, stop reason, the API message id as ``responseId``). Claude Code
  writes one record per content block of a reply, each the parent of the next: these are merged
  into one message, and tool results that it attached to different blocks of one reply are
  chained, so a reply with parallel tool calls is one turn, not a fan of branches;
* a ``compact_boundary`` (a new root whose ``logicalParentUuid`` names the last record before the
  compaction) -> a ``compaction`` under that record, its summary the text of the
  ``isCompactSummary`` user record that follows, ``tokensBefore`` its ``preTokens``; nothing
  before it is kept in the context, as in Claude Code;
* ``summary`` records -> a label on the entry named by ``leafUuid``; ``custom-title`` -> the
  session name (else the summary of the current leaf);
* other ``system`` records -> ``custom`` entries ``claude-code.system`` in their place in the
  tree; records outside the tree (``file-history-snapshot``, ``queue-operation`` and any other
  type) -> ``custom`` entries ``claude-code.<type>`` after the leaf, counted as unmapped.

The leaf is the last user or assistant record of the main chain (not a sidechain), as Claude
Code resumes. Every record's other fields (``cwd``, ``gitBranch``, ``version``, ``requestId``...)
are kept in the first entry's ``source`` object.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ._build import OWN_ID, SourceConversation, SourceNode, fingerprint
from ._read import SourceFile, obj

__all__ = ["FORMAT", "parse_claude_code"]

FORMAT = "claude-code"

_ENVELOPE = ("uuid", "parentUuid", "type", "timestamp")
_STOP = {"tool_use": "toolUse", "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
         "refusal": "stop", "pause_turn": "stop"}


def _stamp(timestamp: str) -> int:
    from .._time import iso_to_ms

    return iso_to_ms(timestamp) or 0


def _usage(usage: Any) -> dict[str, Any]:
    usage = obj(usage)

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) else 0

    numbers = {"input": count("input_tokens"), "output": count("output_tokens"),
               "cacheRead": count("cache_read_input_tokens"),
               "cacheWrite": count("cache_creation_input_tokens")}
    return {**numbers, "totalTokens": sum(numbers.values()),
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def _image(block: dict[str, Any]) -> dict[str, Any] | None:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        return {"type": "image", "data": str(source.get("data", "")),
                "mimeType": str(source.get("media_type", ""))}
    return None


class _Reader:
    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.nodes: list[SourceNode] = []
        self.by_key: dict[str, SourceNode] = {}
        self.alias: dict[str, str] = {}  # uuid of a merged record -> its reply's node key
        self.reply: dict[str, tuple[str, str]] = {}  # node key -> (API message id, last uuid)
        self.tool_names: dict[str, str] = {}
        self.tool_ids: dict[str, set[str]] = {}  # assistant node key -> its tool_use ids
        self.results: dict[str, set[str]] = {}  # user node key -> tool_use ids it answers
        self.compactions: dict[str, dict[str, Any]] = {}  # boundary key -> compaction entry
        self.detached: list[tuple[int, dict[str, Any]]] = []
        self.summaries: list[tuple[str, str]] = []
        self.titles: list[str] = []
        self.unmapped: Counter[str] = Counter()
        self.main_leaf: str | None = None
        self.any_leaf: str | None = None

    # -- records ---------------------------------------------------------------------------

    def record(self, lineno: int, record: Any) -> None:
        if not isinstance(record, dict):
            self.source.fail("a line must hold a JSON object", lineno=lineno)
        kind = record.get("type")
        if kind == "summary" and isinstance(record.get("leafUuid"), str):
            self.summaries.append((record["leafUuid"], str(record.get("summary", ""))))
            self.detached.append((lineno, record))  # becomes a label if its entry is here
            return
        if kind == "custom-title" and isinstance(record.get("customTitle"), str):
            self.titles.append(record["customTitle"])
            return
        if kind not in ("user", "assistant", "system") or "uuid" not in record:
            self.detached.append((lineno, record))
            return
        key, parent = record.get("uuid"), record.get("parentUuid")
        timestamp = record.get("timestamp")
        if not isinstance(key, str) or not key:
            self.source.fail("uuid must be a non-empty string", lineno=lineno)
        if parent is not None and not isinstance(parent, str):
            self.source.fail("parentUuid must be a uuid or null", lineno=lineno)
        if not isinstance(timestamp, str) or not _stamp(timestamp):
            self.source.fail("timestamp must be an ISO time", lineno=lineno)
        if key in self.by_key or key in self.alias:
            self.detached.append((lineno, {**record, "duplicateUuid": True}))
            return
        parent = self.alias.get(parent, parent) if parent is not None else None
        if kind == "system":
            self.system(key, parent, timestamp, record)
        elif kind == "assistant":
            self.assistant(lineno, key, parent, timestamp, record)
        else:
            self.user(lineno, key, parent, timestamp, record)
        if kind in ("user", "assistant"):
            resolved = self.alias.get(key, key)
            self.any_leaf = resolved
            if not record.get("isSidechain"):
                self.main_leaf = resolved

    def add(self, key: str, parent: str | None, entries: list[dict[str, Any]],
            record: dict[str, Any], *, drop: tuple[str, ...] = ()) -> SourceNode:
        rest = {k: v for k, v in record.items() if k not in _ENVELOPE and k not in drop}
        node = SourceNode(key=key, parent=parent, entries=entries, source=rest)
        self.nodes.append(node)
        self.by_key[key] = node
        return node

    def system(self, key: str, parent: str | None, timestamp: str, record: dict[str, Any]) -> None:
        if record.get("subtype") != "compact_boundary":
            self.add(key, parent, [{"type": "custom", "customType": "claude-code.system",
                                    "data": record, "timestamp": timestamp}], record)
            return
        logical = record.get("logicalParentUuid")
        if parent is None and isinstance(logical, str):
            parent = self.alias.get(logical, logical)
        metadata = obj(record.get("compactMetadata"))
        tokens = metadata.get("preTokens")
        entry = {"type": "compaction", "timestamp": timestamp,
                 "summary": str(record.get("content") or "Conversation compacted"),
                 "firstKeptEntryId": OWN_ID,
                 "tokensBefore": tokens if isinstance(tokens, int) else 0,
                 "details": {"trigger": metadata.get("trigger")}, "fromHook": False}
        self.compactions[key] = entry
        self.add(key, parent, [entry], record, drop=("content", "compactMetadata"))

    def assistant(self, lineno: int, key: str, parent: str | None, timestamp: str,
                  record: dict[str, Any]) -> None:
        message = self.source.expect_object(record.get("message"), "message", lineno=lineno)
        blocks: list[dict[str, Any]] = []
        tool_ids: set[str] = set()
        other: list[Any] = []
        for block in message.get("content") or ():
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                blocks.append({"type": "text", "text": str(block.get("text", ""))})
            elif kind == "thinking":
                thinking = {"type": "thinking", "thinking": str(block.get("thinking", ""))}
                if isinstance(block.get("signature"), str):
                    thinking["thinkingSignature"] = block["signature"]
                blocks.append(thinking)
            elif kind == "redacted_thinking":
                blocks.append({"type": "thinking", "thinking": "",
                               "thinkingSignature": str(block.get("data", "")), "redacted": True})
            elif kind == "tool_use":
                tool_id = str(block.get("id", ""))
                self.tool_names[tool_id] = str(block.get("name", ""))
                tool_ids.add(tool_id)
                blocks.append({"type": "toolCall", "id": tool_id, "name": str(block.get("name", "")),
                               "arguments": block.get("input") if isinstance(block.get("input"),
                                                                             dict) else {}})
            else:
                other.append(block)
                self.unmapped[f"claude-code block {kind}"] += 1
        message_id = message.get("id")
        stop = _STOP.get(str(message.get("stop_reason")), "stop")
        group = self.reply.get(parent or "")
        if parent is not None and group is not None and isinstance(message_id, str) \
                and group == (message_id, record.get("parentUuid")):
            node = self.by_key[parent]  # the next block of the same reply: merge
            body = node.entries[0]["message"]
            body["content"].extend(blocks)
            body["usage"] = _usage(message.get("usage"))
            if stop != "stop" or any(b["type"] == "toolCall" for b in body["content"]):
                body["stopReason"] = "toolUse" if any(b["type"] == "toolCall"
                                                      for b in body["content"]) else stop
            node.source.setdefault("merged", []).append(key)
            if other:
                node.source.setdefault("blocks", []).extend(other)
            self.tool_ids[parent] |= tool_ids
            self.alias[key] = parent
            self.reply[parent] = (message_id, key)
            return
        body = {"role": "assistant", "content": blocks, "api": "anthropic-messages",
                "provider": "anthropic", "model": str(message.get("model") or ""),
                "usage": _usage(message.get("usage")),
                "stopReason": "toolUse" if tool_ids else stop, "timestamp": _stamp(timestamp)}
        if isinstance(message_id, str):
            body["responseId"] = message_id
        rest = {k: v for k, v in message.items() if k != "content"}
        node = self.add(key, parent, [{"type": "message", "timestamp": timestamp,
                                       "message": body}], {**record, "message": rest})
        if other:
            node.source["blocks"] = other
        self.tool_ids[key] = tool_ids
        if isinstance(message_id, str):
            self.reply[key] = (message_id, key)

    def user(self, lineno: int, key: str, parent: str | None, timestamp: str,
             record: dict[str, Any]) -> None:
        message = self.source.expect_object(record.get("message"), "message", lineno=lineno)
        content = message.get("content")
        stamp = _stamp(timestamp)
        if parent in self.compactions and record.get("isCompactSummary"):
            self.compactions[parent]["summary"] = _text(content)
            self.add(key, parent, [], record, drop=("message",))
            return
        if record.get("isMeta"):
            entry = {"type": "custom_message", "customType": "claude-code.meta",
                     "content": _text(content), "display": False, "timestamp": timestamp}
            self.add(key, parent, [entry], record, drop=("message",))
            return
        entries: list[dict[str, Any]] = []
        answered: set[str] = set()
        parts: list[dict[str, Any]] = []
        other = []
        for block in content if isinstance(content, list) else [{"type": "text",
                                                                  "text": str(content or "")}]:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                tool_id = str(block.get("tool_use_id", ""))
                answered.add(tool_id)
                result = block.get("content")
                blocks = [{"type": "text", "text": result}] if isinstance(result, str) else [
                    b for b in (_block(x) for x in result or ()) if b is not None]
                body: dict[str, Any] = {"role": "toolResult", "toolCallId": tool_id,
                                        "toolName": self.tool_names.get(tool_id, ""),
                                        "content": blocks or [{"type": "text", "text": ""}]}
                if "toolUseResult" in record and not entries:
                    body["details"] = record["toolUseResult"]
                body.update({"isError": bool(block.get("is_error")), "timestamp": stamp})
                entries.append({"type": "message", "timestamp": timestamp, "message": body})
            elif kind in ("text", "image") and _block(block) is not None:
                parts.append(_block(block))  # type: ignore[arg-type]
            else:
                other.append(block)
                parts.append({"type": "text", "text": f"[{kind or 'content'}]"})
                self.unmapped[f"claude-code block {kind}"] += 1
        if parts or not entries:
            entries.append({"type": "message", "timestamp": timestamp, "message": {
                "role": "user", "content": parts or [{"type": "text", "text": ""}],
                "timestamp": stamp}})
        rest = {k: v for k, v in message.items() if k != "content"}
        node = self.add(key, parent, entries, {**record, "message": rest}, drop=("toolUseResult",))
        if other:
            node.source["blocks"] = other
        if answered and not parts:
            self.results[key] = answered

    # -- after the last line -----------------------------------------------------------------

    def chain_parallel_results(self) -> None:
        """Tool results that Claude Code hung from different blocks of one reply: one chain."""
        children: dict[str, list[SourceNode]] = {}
        for node in self.nodes:
            if node.parent is not None:
                children.setdefault(node.parent, []).append(node)
        for key, calls in self.tool_ids.items():
            kids = children.get(key, [])
            if len(kids) < 2 or not all(k.key in self.results for k in kids):
                continue
            answered = [self.results[k.key] for k in kids]
            if sum(len(a) for a in answered) != len(set().union(*answered)) or \
                    not set().union(*answered) <= calls:
                continue  # the same call answered twice: real alternatives, keep the branches
            for before, after in zip(kids, kids[1:]):
                after.parent = before.key

    def conversation(self) -> SourceConversation:
        self.chain_parallel_results()
        first = next((r for _, r in self.detached if isinstance(r.get("sessionId"), str)), None)
        session_id = next((n.source.get("sessionId") for n in self.nodes
                           if isinstance(n.source.get("sessionId"), str)), None) or \
            (first or {}).get("sessionId")
        cwd = next((n.source["cwd"] for n in self.nodes if isinstance(n.source.get("cwd"), str)),
                   None)
        leaf = self.main_leaf or self.any_leaf
        labels = [(self.alias.get(k, k), text) for k, text in self.summaries
                  if self.alias.get(k, k) in self.by_key]
        title = self.titles[-1] if self.titles else next(
            (text for k, text in reversed(labels) if k == leaf), None)
        tail_parent = leaf
        for lineno, record in self.detached:
            if record.get("type") == "summary" and \
                    self.alias.get(record["leafUuid"], record["leafUuid"]) in self.by_key:
                continue
            kind = "duplicate" if record.get("duplicateUuid") else str(record.get("type"))
            stamp = record.get("timestamp")
            timestamp = stamp if isinstance(stamp, str) and _stamp(stamp) else (
                self.nodes[-1].entries[0]["timestamp"] if self.nodes and self.nodes[-1].entries
                else "1970-01-01T00:00:00.000Z")
            key = f"line-{lineno}"
            self.nodes.append(SourceNode(key=key, parent=tail_parent, entries=[{
                "type": "custom", "customType": f"claude-code.{kind}", "data": record,
                "timestamp": timestamp}], source={"line": lineno}))
            tail_parent = key
        timestamps = [e["timestamp"] for n in self.nodes for e in n.entries]
        digest = fingerprint(self.source.text)
        return SourceConversation(
            format=FORMAT, source_id=session_id if isinstance(session_id, str) else digest,
            nodes=self.nodes, leaf=tail_parent, created=min(timestamps, default=_now()),
            title=title, cwd=cwd, labels=labels, fingerprint=digest,
            unmapped=dict(self.unmapped))


def _now() -> str:
    from .._time import iso_now

    return iso_now()


def _block(block: Any) -> dict[str, Any] | None:
    if not isinstance(block, dict):
        return None
    if block.get("type") == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if block.get("type") == "image":
        return _image(block)
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content or ()
                     if isinstance(b, dict) and b.get("type") == "text")


def parse_claude_code(source: SourceFile) -> list[SourceConversation]:
    """The session of one Claude Code ``.jsonl`` file."""
    reader = _Reader(source)
    for lineno, record in source.json_lines():
        reader.record(lineno, record)
    if not reader.nodes and not reader.detached:
        source.fail("no Claude Code records in the file", lineno=1)
    return [reader.conversation()]
