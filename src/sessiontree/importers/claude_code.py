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
* other ``system`` records, and records of any other type that have a ``uuid`` and a
  ``parentUuid`` (the ``attachment`` records Claude Code 2 writes between a prompt and its
  reply) -> ``custom`` entries ``claude-code.<type>`` holding the record, in their place in the
  tree; records outside the tree (``file-history-snapshot``, ``queue-operation`` and any other
  type) -> ``custom`` entries ``claude-code.<type>`` after the leaf, counted as unmapped.

The leaf is the last user or assistant record of the main chain (not a sidechain), as Claude
Code resumes. Every record's other fields (``cwd``, ``gitBranch``, ``version``, ``requestId``...)
are kept in the first entry's ``source`` object.

The reader takes one record at a time and decides where each goes as it arrives (a tool result
follows the results already under its reply), so a transcript that grows in batches is mapped
the same way (:mod:`sessiontree.importers.claude_code_mirror`); :meth:`_Reader.freeze` marks
the nodes read so far as written (later records no longer merge into them).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal, NamedTuple

from ._build import OWN_ID, SourceConversation, SourceNode, fingerprint
from ._read import SourceFile, as_text, obj

__all__ = ["FORMAT", "Took", "detached_entry", "parse_claude_code"]

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


class Took(NamedTuple):
    """What the reader did with one record.

    ``kind`` is ``"node"`` (a new node of the tree, ``key``), ``"merged"`` (into the node
    ``key``: the next block of a reply), ``"title"`` (the session name, ``text``), ``"summary"``
    (``text`` labels the node ``key``, when that is in the tree) or ``"detached"`` (outside the
    tree; ``line`` is the record as kept, marked ``duplicateUuid`` when its uuid was taken).
    """

    kind: Literal["node", "merged", "title", "summary", "detached"]
    key: str | None = None
    text: str = ""
    line: Any = None


def _image(block: dict[str, Any]) -> dict[str, Any] | None:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        return {"type": "image", "data": as_text(source.get("data")),
                "mimeType": as_text(source.get("media_type"))}
    return None


class _Reader:
    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.nodes: list[SourceNode] = []
        self.by_key: dict[str, SourceNode] = {}
        self.alias: dict[str, str] = {}  # uuid of a merged record -> its reply's node key
        self.reply: dict[str, tuple[str, str]] = {}  # node key -> (API message id, last uuid)
        self.tool_names: dict[str, str] = {}
        self.tool_ids: dict[str, set[str]] = {}  # reply (its first node) -> its tool_use ids
        # a reply whose blocks were read after its first ones were written is several nodes:
        self.heads: dict[str, str] = {}  # later node of a reply -> its first node
        self.last_part: dict[str, str] = {}  # first node of a reply -> its latest node
        # assistant node key -> (tool_use ids answered by the results under it, the last of
        # those results), or None once something else went under it
        self.chains: dict[str, tuple[set[str], str] | None] = {}  # by reply (first node)
        self.compactions: dict[str, dict[str, Any]] = {}  # boundary key -> compaction entry
        self.detached: list[tuple[int, dict[str, Any]]] = []
        self.summaries: list[tuple[str, str]] = []
        self.titles: list[str] = []
        self.unmapped: Counter[str] = Counter()
        self.main_leaf: str | None = None
        self.any_leaf: str | None = None
        self.last_timestamp: str | None = None  # of the latest record that had one

    def known(self, key: str) -> bool:
        """Whether a record with this uuid was read (a node, or merged into one)."""
        return key in self.by_key or key in self.alias

    def freeze(self) -> None:
        """The nodes read so far are written: later records do not merge into them, and only
        what those need is kept (the nodes' keys, tool calls, chains of results)."""
        self.compactions.clear()
        self.alias.update((key, key) for key in self.by_key)
        self.nodes.clear()
        self.by_key.clear()
        self.detached.clear()
        self.summaries.clear()
        self.titles.clear()

    # -- records ---------------------------------------------------------------------------

    def record(self, lineno: int, record: Any) -> Took:
        if not isinstance(record, dict):
            self.source.fail("a line must hold a JSON object", lineno=lineno)
        kind = record.get("type")
        key, parent = record.get("uuid"), record.get("parentUuid")
        if kind == "summary" and isinstance(record.get("leafUuid"), str):
            text = as_text(record.get("summary"))
            self.summaries.append((record["leafUuid"], text))
            self.detached.append((lineno, record))  # becomes a label if its entry is here
            return Took("summary", self.alias.get(record["leafUuid"], record["leafUuid"]), text,
                        record)
        if kind == "custom-title" and isinstance(record.get("customTitle"), str):
            self.titles.append(record["customTitle"])
            return Took("title", text=record["customTitle"])
        in_tree = kind in ("user", "assistant", "system") and "uuid" in record or \
            isinstance(key, str) and key != "" and "parentUuid" in record
        if not in_tree:
            self.detached.append((lineno, record))
            return Took("detached", line=record)
        timestamp = record.get("timestamp")
        if not isinstance(key, str) or not key:
            self.source.fail("uuid must be a non-empty string", lineno=lineno)
        if parent is not None and not isinstance(parent, str):
            self.source.fail("parentUuid must be a uuid or null", lineno=lineno)
        timed = timestamp if isinstance(timestamp, str) and _stamp(timestamp) else None
        if kind in ("user", "assistant", "system") and timed is None:
            self.source.fail("timestamp must be an ISO time", lineno=lineno)
        if self.known(key):
            marked = {**record, "duplicateUuid": True}
            self.detached.append((lineno, marked))
            return Took("detached", line=marked)
        if timed is not None:
            self.last_timestamp = timestamp = timed
        else:
            timestamp = self.last_timestamp or _EPOCH
        parent = self.alias.get(parent, parent) if parent is not None else None
        nodes = len(self.nodes)
        if kind == "assistant":
            self.assistant(lineno, key, parent, timestamp, record)
        elif kind == "user":
            self.user(lineno, key, parent, timestamp, record)
        else:
            self.other(str(kind), key, parent, timestamp, record)
        if kind in ("user", "assistant"):
            resolved = self.alias.get(key, key)
            self.any_leaf = resolved
            if not record.get("isSidechain"):
                self.main_leaf = resolved
        if len(self.nodes) == nodes:
            return Took("merged", self.alias[key])
        node = self.nodes[-1]
        if kind != "user" and key not in self.heads:  # (user nodes went through chained())
            node.parent = self.chained(node.parent, key, None)
        return Took("node", key)

    def chained(self, parent: str | None, key: str, answered: set[str] | None) -> str | None:
        """Where a node goes when its parent is a reply with tool calls.

        Claude Code hangs each tool result from the block of the reply that made the call, so
        parallel calls would fan out into branches. The first result goes below the whole reply
        (its last part, when it was written in parts); results that answer other calls of the
        same reply follow the results already there: one chain. Anything else under the reply
        (``answered`` is None), or a call answered twice, ends the chain.
        """
        head = self.heads.get(parent, parent) if parent is not None else None
        if head is None or head not in self.tool_ids:
            return parent
        if head in self.chains and self.chains[head] is None:
            return parent
        chain = self.chains.get(head)
        if answered is None or not answered <= self.tool_ids[head] or \
                (chain is not None and answered & chain[0]):
            self.chains[head] = None
            return parent
        self.chains[head] = (answered if chain is None else chain[0] | answered, key)
        return self.last_part.get(head, head) if chain is None else chain[1]

    def add(self, key: str, parent: str | None, entries: list[dict[str, Any]],
            record: dict[str, Any], *, drop: tuple[str, ...] = ()) -> SourceNode:
        rest = {k: v for k, v in record.items() if k not in _ENVELOPE and k not in drop}
        node = SourceNode(key=key, parent=parent, entries=entries, source=rest)
        self.nodes.append(node)
        self.by_key[key] = node
        return node

    def other(self, kind: str, key: str, parent: str | None, timestamp: str,
              record: dict[str, Any]) -> None:
        if kind != "system" or record.get("subtype") != "compact_boundary":
            self.add(key, parent, [{"type": "custom", "customType": f"claude-code.{kind}",
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
        content = message.get("content")
        for block in content if isinstance(content, list) else [{"type": "text",
                                                                 "text": str(content or "")}]:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                blocks.append({"type": "text", "text": as_text(block.get("text"))})
            elif kind == "thinking":
                thinking = {"type": "thinking", "thinking": as_text(block.get("thinking"))}
                if isinstance(block.get("signature"), str):
                    thinking["thinkingSignature"] = block["signature"]
                blocks.append(thinking)
            elif kind == "redacted_thinking":
                blocks.append({"type": "thinking", "thinking": "",
                               "thinkingSignature": as_text(block.get("data")), "redacted": True})
            elif kind == "tool_use":
                tool_id = as_text(block.get("id"))
                self.tool_names[tool_id] = as_text(block.get("name"))
                tool_ids.add(tool_id)
                blocks.append({"type": "toolCall", "id": tool_id, "name": as_text(block.get("name")),
                               "arguments": block.get("input") if isinstance(block.get("input"),
                                                                             dict) else {}})
            else:
                other.append(block)
                self.unmapped[f"claude-code block {kind}"] += 1
        message_id = message.get("id")
        stop = _STOP.get(str(message.get("stop_reason")), "stop")
        continues = parent is not None and isinstance(message_id, str) and \
            self.reply.get(parent) == (message_id, record.get("parentUuid"))
        if parent is not None and continues and parent in self.by_key and \
                isinstance(message_id, str):
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
            self.tool_ids[self.heads.get(parent, parent)] |= tool_ids
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
        head = key
        if parent is not None and continues:  # the rest of a reply already written: its part
            head = self.heads[key] = self.heads.get(parent, parent)
        self.tool_ids.setdefault(head, set()).update(tool_ids)
        self.last_part[head] = key
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
            self.add(key, self.chained(parent, key, None), [entry], record, drop=("message",))
            return
        entries: list[dict[str, Any]] = []
        answered: set[str] = set()
        parts: list[dict[str, Any]] = []
        other = []
        for block in content if isinstance(content, list) else [{"type": "text",
                                                                  "text": str(content or "")}]:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                tool_id = as_text(block.get("tool_use_id"))
                answered.add(tool_id)
                result = block.get("content")
                blocks = [{"type": "text", "text": result}] if isinstance(result, str) else [
                    b for b in (_block(x) for x in (result if isinstance(result, list) else ()))
                    if b is not None]
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
        parent = self.chained(parent, key, answered if answered and not parts else None)
        node = self.add(key, parent, entries, {**record, "message": rest}, drop=("toolUseResult",))
        if other:
            node.source["blocks"] = other

    # -- after the last line -----------------------------------------------------------------

    def conversation(self) -> SourceConversation:
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
            fallback = self.nodes[-1].entries[0]["timestamp"] if self.nodes and \
                self.nodes[-1].entries else _EPOCH
            key = f"line-{lineno}"
            self.nodes.append(SourceNode(key=key, parent=tail_parent,
                                         entries=[detached_entry(record, fallback)],
                                         source={"line": lineno}))
            tail_parent = key
        timestamps = [e["timestamp"] for n in self.nodes for e in n.entries]
        digest = fingerprint(self.source.text)
        return SourceConversation(
            format=FORMAT, source_id=session_id if isinstance(session_id, str) else digest,
            nodes=self.nodes, leaf=tail_parent, created=min(timestamps, default=_now()),
            title=title, cwd=cwd, labels=labels, fingerprint=digest,
            unmapped=dict(self.unmapped))


_EPOCH = "1970-01-01T00:00:00.000Z"


def detached_entry(record: Any, fallback: str) -> dict[str, Any]:
    """The ``custom`` entry ``claude-code.<type>`` that keeps a record outside the tree (its own
    time, else ``fallback``)."""
    fields = record if isinstance(record, dict) else {}
    kind = "duplicate" if fields.get("duplicateUuid") else str(fields.get("type"))
    stamp = fields.get("timestamp")
    return {"type": "custom", "customType": f"claude-code.{kind}", "data": record,
            "timestamp": stamp if isinstance(stamp, str) and _stamp(stamp) else fallback}


def _now() -> str:
    from .._time import iso_now

    return iso_now()


def _block(block: Any) -> dict[str, Any] | None:
    if not isinstance(block, dict):
        return None
    if block.get("type") == "text":
        return {"type": "text", "text": as_text(block.get("text"))}
    if block.get("type") == "image":
        return _image(block)
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(as_text(b.get("text")) for b in (content if isinstance(content, list) else ())
                     if isinstance(b, dict) and b.get("type") == "text")


def parse_claude_code(source: SourceFile) -> list[SourceConversation]:
    """The session of one Claude Code ``.jsonl`` file."""
    reader = _Reader(source)
    for lineno, record in source.json_lines():
        reader.record(lineno, record)
    if not reader.nodes and not reader.detached:
        source.fail("no Claude Code records in the file", lineno=1)
    return [reader.conversation()]
