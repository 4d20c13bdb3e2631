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

if TYPE_CHECKING:
    from ._treelog import TreeLog

__all__ = ["UsageTotals", "counted_usage", "session_usage", "usage_of_lines"]


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

    def add(self, usage: Any) -> None:
        """Add one usage object (pi's ``Usage``: ``input``, ``output``, ``cacheRead``,
        ``cacheWrite``, ``cost.total``); anything else adds nothing."""
        if not isinstance(usage, dict):
            return
        self.input += _count(usage.get("input"))
        self.output += _count(usage.get("output"))
        self.cache_read += _count(usage.get("cacheRead"))
        self.cache_write += _count(usage.get("cacheWrite"))
        cost = usage.get("cost")
        if isinstance(cost, dict):
            total = cost.get("total")
            if type(total) is int or type(total) is float:
                self.cost += total


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


def _count(value: Any) -> int:
    return int(value) if (type(value) is int or type(value) is float) and value == value and \
        abs(value) != float("inf") else 0


class _Line(msgspec.Struct):
    type: Any = None
    message: Any = None
    usage: Any = None


_decoder = msgspec.json.Decoder(_Line)


def counted_usage(entry: _Line | dict[str, Any]) -> Any:
    """The usage an entry adds to the session's totals (pi's rule), or ``None``."""
    kind = entry.get("type") if isinstance(entry, dict) else entry.type
    usage = entry.get("usage") if isinstance(entry, dict) else entry.usage
    if kind == "usage" or kind == "compaction" or kind == "branch_summary":
        return usage
    if kind == "message":
        message = entry.get("message") if isinstance(entry, dict) else entry.message
        if isinstance(message, dict) and message.get("role") in ("assistant", "toolResult"):
            return message.get("usage")
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
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # (as a listing skips it)
            continue
        totals.add(counted_usage(entry))
    return totals


def session_usage(session: TreeLog) -> UsageTotals:
    """The token and cost totals of every entry of the session (any store)."""
    return usage_of_lines(session.raw_line(entry_id) for entry_id in session.ids())
