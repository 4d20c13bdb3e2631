"""From a parsed source conversation to the entries of one session: the part every format shares.

A format module turns its file into :class:`SourceConversation` objects: nodes keyed by the
source's own ids, each with its parent's key and the entries (on-disk dicts, without ``id`` and
``parentId``) that stand for it. :func:`build_session` then gives every entry a new id and its
parent's id, and appends the session name, the labels and one ``sessiontree.import`` custom entry
under the source's current leaf.

Invariants:
* Every node becomes at least one entry; siblings stay siblings, so every branch of the source is
  a branch of the tree. A node whose parent is missing from the source becomes a root, and a node
  on a parent cycle is cut loose at the cycle; both are counted in the notes, never hidden.
* Parents come before children in file order; otherwise the source's order is kept.
* Each node's first entry carries ``"source": {"id": <source id>, ...}`` (pi ignores unknown
  entry fields and never rewrites lines), so a re-import can be matched entry by entry.
* The ``sessiontree.import`` entry is the last line, its parent the source's current leaf: after
  a reload pi and sessiontree both start from that leaf (the rule of format-spec.md 17 g).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import heapq
import json
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._codec import ordered_entry
from .._time import iso_now, new_entry_id
from ..entries import SessionHeader

__all__ = [
    "IMPORT_CUSTOM_TYPE",
    "OWN_ID",
    "BuiltSession",
    "SourceConversation",
    "SourceNode",
    "build_session",
    "fingerprint",
    "iso_from_seconds",
    "iso_from_ms",
    "node_entries",
    "session_id_for",
]

IMPORT_CUSTOM_TYPE = "sessiontree.import"
"""``customType`` of the entry that records where an imported session came from."""
OWN_ID = "\x00own-id"
"""Placeholder for an entry's own id in its body (a compaction that keeps nothing before it
names itself as ``firstKeptEntryId``)."""

_NAMESPACE = uuid.UUID("6f1d2c1e-2b7a-4f57-9a57-3e0c4b8f5a10")


@dataclass
class SourceNode:
    """One record of the source that has a place in its tree.

    Attributes:
        key: the source's id for it (unique within the conversation).
        parent: the parent's key, or ``None`` for a root.
        entries: the entries that stand for it, in order (each a child of the one before);
            on-disk dicts with ``type`` and ``timestamp`` and no ``id``/``parentId``.
        source: fields of the record that no entry field holds, kept in the first entry's
            ``source`` object beside the id.
    """

    key: str
    parent: str | None
    entries: list[dict[str, Any]]
    source: dict[str, Any] = field(default_factory=dict)


@dataclass
class SourceConversation:
    """One conversation of a source file, ready to become a session.

    Attributes:
        format: the importer's name (``claude-code``, ``chatgpt``, ``open-webui``, ``responses``).
        source_id: the conversation's id in the source (or a content hash where it has none).
        nodes: every node, in the source's order.
        leaf: the key of the source's current leaf (``None``: the last node).
        created: the conversation's start, ISO ``YYYY-MM-DDTHH:mm:ss.sssZ``.
        title: its name in the source, if any.
        cwd: the working directory it ran in, if the source records one.
        labels: ``(node key, text)`` pairs that become label entries.
        fingerprint: a hash of the conversation's source data, to tell an unchanged re-import.
        notes: what the parser had to repair or could not place, for the summary.
        unmapped: counts of things kept in ``source`` fields rather than as entries (content
            blocks pi has no type for), added to the summary's unmapped counts.
    """

    format: str
    source_id: str
    nodes: list[SourceNode]
    leaf: str | None
    created: str
    title: str | None = None
    cwd: str | None = None
    labels: list[tuple[str, str]] = field(default_factory=list)
    fingerprint: str = ""
    notes: list[str] = field(default_factory=list)
    unmapped: dict[str, int] = field(default_factory=dict)


@dataclass
class BuiltSession:
    """What :func:`build_session` made: the header and every entry, in file order."""

    header: SessionHeader
    entries: list[dict[str, Any]]
    leaf_id: str | None
    counts: dict[str, int]
    unmapped: dict[str, int]
    branches: int
    notes: list[str]


def session_id_for(format: str, source_id: str) -> str:
    """The session id an import of this source conversation gets: the same on every import, so a
    second import of the same conversation is recognized (a UUID, as pi expects)."""
    return str(uuid.uuid5(_NAMESPACE, f"{format}:{source_id}"))


def fingerprint(value: Any) -> str:
    """A hash of a JSON value that does not depend on key order or spacing."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def iso_from_ms(ms: int | float) -> str:
    """Epoch milliseconds as ``new Date(ms).toISOString()`` writes them."""
    moment = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=int(ms))
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def iso_from_seconds(seconds: int | float) -> str:
    """Epoch seconds (ChatGPT and Open WebUI times) as an ISO timestamp in pi's form."""
    return iso_from_ms(round(seconds * 1000))


def _order(nodes: list[SourceNode], notes: list[str]) -> list[tuple[SourceNode, str | None]]:
    """Nodes with their resolved parent key, parents first, otherwise in source order."""
    index = {node.key: i for i, node in enumerate(nodes)}
    parent_of: dict[str, str | None] = {}
    for node in nodes:
        parent = node.parent
        if parent is not None and parent not in index:
            notes.append(f"{node.key}: parent {parent} is not in the source; kept as a root")
            parent = None
        parent_of[node.key] = parent
    children: dict[str, list[str]] = {}
    for node in nodes:
        parent = parent_of[node.key]
        if parent is not None:
            children.setdefault(parent, []).append(node.key)
    ready = [index[n.key] for n in nodes if parent_of[n.key] is None]
    heapq.heapify(ready)
    placed: list[tuple[SourceNode, str | None]] = []
    done: set[str] = set()
    while len(done) < len(nodes):
        if not ready:  # only cycles are left: cut the first of them loose
            first = min(index[k] for k in index if k not in done)
            key = nodes[first].key
            notes.append(f"{key}: on a parent cycle; kept as a root")
            parent_of[key] = None
            heapq.heappush(ready, first)
        node = nodes[heapq.heappop(ready)]
        if node.key in done:
            continue
        done.add(node.key)
        placed.append((node, parent_of[node.key]))
        for child in children.get(node.key, ()):
            if child not in done and parent_of[child] == node.key:
                heapq.heappush(ready, index[child])
    return placed


def _ordered(body: Mapping[str, Any], entry_id: str, parent_id: str | None) -> dict[str, Any]:
    return ordered_entry(str(body["type"]), entry_id, parent_id, str(body["timestamp"]), body)


def node_entries(node: SourceNode, parent_id: str | None, taken: set[str]) -> list[dict[str, Any]]:
    """The node's entries with new ids (added to ``taken``): each the child of the one before, the
    first under ``parent_id``; the first carries the node's ``source``, the others its part."""
    out: list[dict[str, Any]] = []
    for position, body in enumerate(node.entries):
        entry_id = new_entry_id(taken)
        taken.add(entry_id)
        data = {k: entry_id if v == OWN_ID else v for k, v in body.items()}
        data["source"] = {"id": node.key, **node.source} if position == 0 else \
            {"id": node.key, "part": position}
        out.append(_ordered(data, entry_id, parent_id))
        parent_id = entry_id
    return out


def build_session(conversation: SourceConversation, *, cwd: str, session_id: str | None = None,
                  source_file: str | None = None) -> BuiltSession:
    """Give the conversation's entries ids and parents, and add its name, labels and import record.

    Args:
        conversation: what a format module parsed.
        cwd: the working directory for the header when the source records none.
        session_id: the new session's id (default: :func:`session_id_for` the source).
        source_file: the imported file, recorded in the import entry.

    Returns:
        The header and entries of the new session, and what they hold.
    """
    notes = list(conversation.notes)
    taken: set[str] = set()
    entries: list[dict[str, Any]] = []
    last_of: dict[str, str] = {}
    for node, parent_key in _order(conversation.nodes, notes):
        parent_id = last_of.get(parent_key) if parent_key is not None else None
        made = node_entries(node, parent_id, taken)
        entries.extend(made)
        parent_id = made[-1]["id"] if made else parent_id
        if parent_id is not None:
            last_of[node.key] = parent_id
    leaf_key = conversation.leaf
    if leaf_key is not None and leaf_key not in last_of:
        notes.append(f"the current leaf {leaf_key} is not in the source; the last entry is the leaf")
        leaf_key = None
    leaf = last_of[leaf_key] if leaf_key is not None else (entries[-1]["id"] if entries else None)

    counts: Counter[str] = Counter()
    unmapped: Counter[str] = Counter(conversation.unmapped)
    parents = {e["parentId"] for e in entries}
    for entry in entries:
        kind = entry["type"]
        if kind == "message":
            counts[f"message:{entry['message'].get('role')}"] += 1
        elif kind == "custom":
            unmapped[str(entry.get("customType"))] += 1
        else:
            counts[kind] += 1
    branches = sum(1 for e in entries if e["id"] not in parents)

    now = iso_now()
    tail: list[dict[str, Any]] = []
    if conversation.title:
        tail.append({"type": "session_info", "timestamp": now, "name": conversation.title.strip()})
    for key, text in conversation.labels:
        if key in last_of:
            tail.append({"type": "label", "timestamp": now, "targetId": last_of[key], "label": text})
        else:
            notes.append(f"label {text!r}: its entry {key} is not in the source; not set")
    record: dict[str, Any] = {"format": conversation.format, "sourceId": conversation.source_id}
    if source_file is not None:
        record["file"] = source_file
    record.update({"fingerprint": conversation.fingerprint, "counts": dict(sorted(counts.items())),
                   "unmapped": dict(sorted(unmapped.items()))})
    tail.append({"type": "custom", "customType": IMPORT_CUSTOM_TYPE, "data": record,
                 "timestamp": now})
    parent_id = leaf
    for body in tail:
        entry_id = new_entry_id(taken)
        taken.add(entry_id)
        entries.append(_ordered(body, entry_id, parent_id))
        parent_id = entry_id

    header = SessionHeader(id=session_id or session_id_for(conversation.format,
                                                           conversation.source_id),
                           timestamp=conversation.created, cwd=conversation.cwd or cwd)
    return BuiltSession(header=header, entries=entries, leaf_id=leaf, counts=dict(counts),
                        unmapped=dict(unmapped), branches=branches, notes=notes)
