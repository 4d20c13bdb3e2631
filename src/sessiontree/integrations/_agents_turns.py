"""Turns, tool use and token usage of an Agents SDK conversation, read from a branch's entries.

What the SDK's ``AdvancedSQLiteSession`` keeps in side tables is derived here from the session
itself: a turn is a user item and what follows it up to the next one; a run's tokens are a pi
1.5.2 ``usage`` entry (kind :data:`RUN_KIND`) appended after the run's items, so it belongs to
the turn it closes, counts in the session's totals (``sessiontree ls``, ``browse``) and moves
with the tree like every entry. Pure functions over on-disk entry dicts, root first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..importers.responses import entry_items

__all__ = ["RUN_KIND", "run_usage_entry", "tool_usage", "turn_usage", "turns", "usage_totals"]

RUN_KIND = "openai-agents.run"
"""The ``kind`` of the ``usage`` entry ``store_run_usage`` writes."""

_AGENTS_FIELD = "agentsUsage"
"""The SDK's own figures (requests, token details), kept beside pi's ``usage``."""

_NAMED_BY_TYPE = {"computer_call", "file_search_call", "web_search_call", "code_interpreter_call",
                  "shell_call", "apply_patch_call"}
_TOOL_TYPES = {"tool_call", "function_call", "custom_tool_call", "mcp_call",
               "mcp_approval_request", "tool_search_call", *_NAMED_BY_TYPE}


def run_usage_entry(usage: Any, provider: str, model: str) -> dict[str, Any]:
    """The ``usage`` entry for one run's ``agents.usage.Usage``: pi's counts (``input``
    without the cached tokens, which are ``cacheRead``) and the SDK's figures as given."""
    details_in = _details(getattr(usage, "input_tokens_details", None))
    details_out = _details(getattr(usage, "output_tokens_details", None))
    input_tokens, output_tokens = _int(usage.input_tokens), _int(usage.output_tokens)
    cached = _int(details_in.get("cached_tokens") if details_in else 0)
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    return {"type": "usage", "kind": RUN_KIND, "provider": provider, "model": model,
            "usage": {"input": max(input_tokens - cached, 0), "output": output_tokens,
                      "cacheRead": cached, "cacheWrite": 0,
                      "totalTokens": _int(usage.total_tokens), "cost": zero},
            _AGENTS_FIELD: {"requests": _int(usage.requests), "input_tokens": input_tokens,
                            "output_tokens": output_tokens,
                            "total_tokens": _int(usage.total_tokens),
                            "input_tokens_details": details_in,
                            "output_tokens_details": details_out}}


def _details(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    found = value if isinstance(value, Mapping) else getattr(value, "__dict__", None)
    return {k: v for k, v in found.items() if not k.startswith("_")} if found else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _numbered(entries: Iterable[Mapping[str, Any]]
              ) -> Iterator[tuple[int, Mapping[str, Any], dict[str, Any] | None]]:
    """``(turn, entry, item)`` for every item of the entries (``item`` ``None`` for an entry
    without items); the turn counts the user items so far (0 before the first)."""
    turn = 0
    for entry in entries:
        items = entry_items(entry) if entry.get("type") != "compaction" else []
        if not items:
            yield turn, entry, None
        for item in items:
            if item.get("role") == "user":
                turn += 1
            yield turn, entry, item


def turns(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The user turns, as ``AdvancedSQLiteSession.get_conversation_turns`` lists them, with the
    entry id of each user item (``entry_id``: where :meth:`checkout` goes back to)."""
    found = []
    for turn, entry, item in _numbered(entries):
        if item is not None and item.get("role") == "user":
            content = item.get("content", "")
            text = content if isinstance(content, str) else json.dumps(content,
                                                                        ensure_ascii=False)
            found.append({"turn": turn, "content": text[:100] + "..." if len(text) > 100 else text,
                          "full_content": content, "timestamp": entry.get("timestamp"),
                          "can_branch": True, "entry_id": entry.get("id")})
    return found


def tool_usage(entries: Iterable[Mapping[str, Any]]) -> list[tuple[str, int, int]]:
    """``(tool name, calls, turn)`` per tool and turn, by turn (the SDK's ``get_tool_usage``)."""
    counts: dict[tuple[int, str], int] = {}
    for turn, _, item in _numbered(entries):
        name = _tool_name(item) if item is not None and item.get("type") in _TOOL_TYPES else None
        if name is not None:
            counts[turn, name] = counts.get((turn, name), 0) + 1
    return [(name, count, turn) for (turn, name), count in counts.items()]


def _tool_name(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    if kind in ("mcp_call", "mcp_approval_request") and item.get("server_label"):
        name = item.get("name")
        return f"{item['server_label']}.{name}" if name else str(item["server_label"])
    if kind == "tool_search_call":
        return "tool_search"
    if kind in _NAMED_BY_TYPE:
        return str(kind)
    name = item.get("name")
    return str(name) if name is not None else None


def turn_usage(entries: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Each turn's run usage summed (the SDK's ``get_turn_usage`` rows), by turn number."""
    found: dict[int, dict[str, Any]] = {}
    for turn, entry, _ in _numbered(entries):
        figures = _run_figures(entry)
        if figures is not None:
            _add(found.setdefault(turn, {"user_turn_number": turn}), figures)
    return found


def usage_totals(entries: Iterable[Mapping[str, Any]], *, one_branch: bool = True
                 ) -> dict[str, int] | None:
    """The runs' usage summed (the SDK's ``get_session_usage``), with ``total_turns``: the
    turns that have some on one branch (a path, root first), else the runs (every entry of
    a session, whose turns are on different branches); ``None`` when no run stored any."""
    rows = list(turn_usage(entries).values()) if one_branch else \
        [figures for entry in entries if (figures := _run_figures(entry)) is not None]
    if not rows:
        return None
    totals: dict[str, Any] = {}
    for row in rows:
        _add(totals, row)
    return {"requests": totals.get("requests", 0), "input_tokens": totals.get("input_tokens", 0),
            "output_tokens": totals.get("output_tokens", 0),
            "total_tokens": totals.get("total_tokens", 0), "total_turns": len(rows)}


def _run_figures(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    if entry.get("type") != "usage" or entry.get("kind") != RUN_KIND:
        return None
    figures = entry.get(_AGENTS_FIELD)
    return figures if isinstance(figures, dict) else None


def _add(into: dict[str, Any], figures: Mapping[str, Any]) -> None:
    for key in ("requests", "input_tokens", "output_tokens", "total_tokens"):
        into[key] = into.get(key, 0) + _int(figures.get(key))
    for key in ("input_tokens_details", "output_tokens_details"):
        given = figures.get(key)
        if isinstance(given, dict):
            details = into.get(key) or {}
            for name, value in given.items():  # counts add up; anything else is kept as given
                details[name] = _int(details.get(name)) + value if isinstance(value, int) else value
            into[key] = details
        else:
            into.setdefault(key, None)
