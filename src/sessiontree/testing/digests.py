"""Digests of a context, a tree, a path and a listing that ``benchmarks/pi_bench.mjs``
computes the same way from pi's own objects, so that both sides did the same work.

Node encodes a lone surrogate as U+FFFD before hashing; so do these functions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from .._tree import TreeNode
from ..stores.base import SessionListing

__all__ = ["branch_digest", "context_digest", "listing_digest", "tree_digest"]


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "replace") if any(
        "\ud800" <= c <= "\udfff" for c in text) else text.encode("utf-8")


def _block_text(block: Any) -> str:
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "thinking":
        return "[thinking]" + str(block.get("thinking", ""))
    if kind == "toolCall":
        return f"[toolCall:{block.get('name')}]{block.get('id')}"
    if kind == "image":
        return f"[image:{block.get('mimeType')}]"
    return f"[{kind}]"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_block_text(b) for b in content)
    return ""


def _message_text(message: dict[str, Any]) -> str:
    role = message.get("role")
    if role in ("user", "custom", "assistant"):
        return _content_text(message.get("content"))
    if role == "toolResult":
        return f"[{message.get('toolCallId')}]" + _content_text(message.get("content"))
    if role == "bashExecution":
        return f"$ {message.get('command')}\n{message.get('output')}"
    if role in ("compactionSummary", "branchSummary"):
        return str(message.get("summary", ""))
    return ""


def context_digest(messages: Iterable[dict[str, Any]]) -> str:
    """SHA-256 over ``role + "\\x1f" + text + "\\x1e"`` for each context message (JSON shape)."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(_utf8(f"{message.get('role')}\x1f{_message_text(message)}\x1e"))
    return digest.hexdigest()


def tree_digest(roots: Sequence[TreeNode]) -> str:
    """SHA-256 over ``id:depth\\n`` for every node in pre-order."""
    digest = hashlib.sha256()
    for root in roots:
        for node, depth in root.walk():
            digest.update(_utf8(f"{node.id}:{depth}\n"))
    return digest.hexdigest()


def branch_digest(path_ids: Sequence[str]) -> str:
    """SHA-256 over the path's ids joined with ``\\n``."""
    return hashlib.sha256(_utf8("\n".join(path_ids))).hexdigest()


def listing_digest(rows: Iterable[SessionListing]) -> str:
    """sha256 over ``id, modified ms, message count, name, first message`` of each listing row,
    in order (pi's ``SessionManager.list`` rows hashed the same way by the benchmark)."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(_utf8(f"{row.id}\x1f{row.modified_ms}\x1f{row.message_count}\x1f"
                            f"{row.name or ''}\x1f{row.first_message}\x1e"))
    return digest.hexdigest()
