"""A session's token and cost totals as pi 1.5.2 counts them (its footer and
``getSessionStats``): over every entry of the session, on every branch, compacted ones included,
in stored order, the usage of

* each assistant message,
* each tool result message that carries a ``usage``,
* each ``usage`` entry (model use that is not a message, such as cache warming; any ``kind``),
* each compaction and branch summary that carries a ``usage`` (the summarizer's).

Tokens are ``input + output + cacheRead + cacheWrite``; the cost is the sum of ``cost.total``,
added in entry order as pi adds its doubles. A token count that is not a number counts as 0 (pi
would print NaN), a fraction of one is dropped. Lines are read raw: no entry type needs to be known to count it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from . import _json

if TYPE_CHECKING:
    from ._treelog import TreeLog

__all__ = ["RawUsage", "UsageTotals", "counted_usage", "raw_usage", "session_usage", "usage_of_lines"]


class UsageTotals(msgspec.Struct, kw_only=True):
    """Token counts and cost summed over a session."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0
    """In the model's currency unit (US dollars for pi's models)."""

    @property
    def tokens(self) -> int:
        """All tokens, as pi's footer and stats count them."""
        return self.input + self.output + self.cache_read + self.cache_write

    def footer(self) -> str:
        """The totals as pi's footer shows them: ``↑input ↓output Rcache-read Wcache-write
        $cost``, each part only when not zero (empty when all are)."""
        parts = [f"{mark}{_tokens(count)}" for mark, count in (
            ("\u2191", self.input), ("\u2193", self.output), ("R", self.cache_read),
            ("W", self.cache_write)) if count]
        if self.cost:
            parts.append(f"${self.cost:.3f}")
        return " ".join(parts)

    def add(self, usage: RawUsage | None) -> None:
        """Add one usage (pi's ``Usage``: ``input``, ``output``, ``cacheRead``, ``cacheWrite``,
        ``cost.total``); ``None`` adds nothing."""
        if usage is None:
            return
        self.input += _count(usage.input)
        self.output += _count(usage.output)
        self.cache_read += _count(usage.cache_read)
        self.cache_write += _count(usage.cache_write)
        cost = usage.cost
        if cost is not None:
            total = cost.total
            if type(total) is float:
                self.cost += total
            elif type(total) is int:
                self.cost += _number(total)


class _Cost(msgspec.Struct):
    total: Any = 0


class RawUsage(msgspec.Struct, rename="camel"):
    """What the totals read of a stored usage object (other fields skipped, never decoded)."""

    input: Any = 0
    output: Any = 0
    cache_read: Any = 0
    cache_write: Any = 0
    cost: _Cost | None = None


def raw_usage(value: Any) -> RawUsage | None:
    """A usage object already decoded (a line that needed the careful reading) as
    :class:`RawUsage`; ``None`` for anything that is not one."""
    if not isinstance(value, dict):
        return None
    cost = value.get("cost")
    return RawUsage(input=value.get("input", 0), output=value.get("output", 0),
                    cache_read=value.get("cacheRead", 0), cache_write=value.get("cacheWrite", 0),
                    cost=_Cost(cost.get("total", 0)) if isinstance(cost, dict) else None)


def _tokens(count: int) -> str:
    """A token count as pi's footer writes it: 999, 1.2k, 12k, 1.2M, 12M."""
    if count < 1000:
        return str(count)
    if count < 10_000:
        return f"{count / 1000:.1f}k"
    if count < 1_000_000:
        return f"{math.floor(count / 1000 + 0.5)}k"
    if count < 10_000_000:
        return f"{count / 1_000_000:.1f}M"
    return f"{math.floor(count / 1_000_000 + 0.5)}M"


def _number(value: int) -> float:
    """An integer as JavaScript's number holds it: beyond the doubles, an infinity."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _count(value: Any) -> int:
    """A stored token count as pi adds it: an int as is, a finite float truncated, anything
    else (a string, NaN, an infinity, a missing count) nothing."""
    if type(value) is int:
        return value
    if type(value) is float and value == value and abs(value) != float("inf"):
        return int(value)
    return 0


class _Message(msgspec.Struct):
    role: Any = None
    usage: RawUsage | None = None


class _Line(msgspec.Struct):
    type: Any = None
    message: _Message | None = None
    usage: RawUsage | None = None


_decoder = msgspec.json.Decoder(_Line)


def counted_usage(entry: dict[str, Any]) -> RawUsage | None:
    """The usage an entry (as stored) adds to the session's totals (pi's rule), or ``None``."""
    kind = entry.get("type")
    if kind == "usage" or kind == "compaction" or kind == "branch_summary":
        return raw_usage(entry.get("usage"))
    message = entry.get("message")
    if kind == "message" and isinstance(message, dict) and \
            message.get("role") in ("assistant", "toolResult"):
        return raw_usage(message.get("usage"))
    return None


def usage_of_lines(lines: Iterable[bytes], totals: UsageTotals | None = None) -> UsageTotals:
    """The totals of these entry lines (added to ``totals`` when given); lines that do not
    parse add nothing."""
    totals = totals if totals is not None else UsageTotals()
    for line in lines:
        if b'"usage"' not in line:  # nothing to count, nothing to decode
            continue
        try:
            entry = _decoder.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError):  # odd shapes: read as they are
            try:
                value = _json.loads(line)
            except (ValueError, RecursionError):  # (as a listing skips it)
                continue
            if isinstance(value, dict):
                totals.add(counted_usage(value))
            continue
        except RecursionError:  # (as a listing skips it)
            continue
        kind, message = entry.type, entry.message
        if kind == "usage" or kind == "compaction" or kind == "branch_summary":
            totals.add(entry.usage)
        elif kind == "message" and message is not None and \
                (message.role == "assistant" or message.role == "toolResult"):
            totals.add(message.usage)
    return totals


def session_usage(session: TreeLog) -> UsageTotals:
    """The token and cost totals of every entry of the session (any store)."""
    return usage_of_lines(session.raw_line(entry_id) for entry_id in session.ids())
