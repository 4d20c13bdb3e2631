"""Helpers for testing sessiontree and programs built on it (digests comparable with pi's)."""

from __future__ import annotations

from .digests import branch_digest, context_digest, tree_digest

__all__ = ["branch_digest", "context_digest", "tree_digest"]
