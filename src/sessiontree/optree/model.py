"""Typed values of the operation tree (default mode): runs, turns, ops, usage, accounting, totals.

A *run* is one agent run (the reference's ``SessionNode``; "session" stays the word for pi's
session file). A run has turns, a turn has operations (*ops*), and an op of kind ``session``
(a sub-agent call) may link to a child run, so runs form a tree.

Invariants:
* Token counts are validated non-negative ``int`` values in *exclusive* buckets:
  ``Usage.input`` never includes cached tokens; ``Usage.input_total`` is the inclusive count
  (``input + cache_read + cache_write``). ``Usage.convention`` records how the provider
  reported them (REFERENCE.md 12.1). Reasoning tokens are a part of ``output``.
* Costs are ``Decimal`` US dollars, never rounded in storage; ``cost_source`` says where a
  cost came from (``provider``, ``computed`` from a price table, or ``none``).
* Timestamps are integer epoch milliseconds.
* Values callers hand in (``Usage``, ``Accounting``, ``Log``, ``ReasoningChunk``) are frozen;
  containers (``Run``, ``Turn``, ``Op``, ``Totals``) are changed only by the builder and the
  event fold, never by callers.
* Child runs are linked by id (``Op.child``), not embedded; :class:`OpTree` holds every run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

import msgspec
from msgspec import UNSET

from .errors import InvalidOpTree, OpNotFound, RunNotFound

__all__ = [
    "INCLUSIVE_CONVENTIONS",
    "Accounting",
    "Blob",
    "LoadProblem",
    "Log",
    "Op",
    "OpTree",
    "ParentRef",
    "Payload",
    "Reasoning",
    "ReasoningChunk",
    "Run",
    "Totals",
    "Turn",
    "Usage",
    "decimal_of",
]

INCLUSIVE_CONVENTIONS = frozenset({"inclusive", "openai", "gemini", "otel", "genai-prices"})
"""Conventions whose input count *includes* cache reads and writes (REFERENCE.md 12.1).

Every other convention (``exclusive``, ``anthropic``, ``reference`` for ai-agent's
``TokenUsage``) reports the uncached input alone.
"""


def _count(name: str, value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and value >= 0:
            return int(value)
        raise InvalidOpTree(f"token count {name} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise InvalidOpTree(f"token count {name} must be a non-negative integer, got {value!r}")
    return value


def decimal_of(value: object) -> Decimal | None:
    """A cost as a ``Decimal``: floats through their shortest repr (``0.1`` is ``Decimal('0.1')``).

    Returns ``None`` for ``None``; raises :class:`InvalidOpTree` for anything that is not a
    finite number (or a string holding one).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidOpTree(f"a cost must be a number, got {value!r}")
    if isinstance(value, Decimal):
        result = value
    elif isinstance(value, float):
        result = Decimal(repr(value))
    elif isinstance(value, (int, str)):
        try:
            result = Decimal(value)
        except ArithmeticError:
            raise InvalidOpTree(f"a cost must be a number, got {value!r}") from None
    else:
        raise InvalidOpTree(f"a cost must be a number, got {value!r}")
    if not result.is_finite():
        raise InvalidOpTree(f"a cost must be finite, got {value!r}")
    return result


class Usage(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """Token usage of one model call, in exclusive buckets.

    Attributes:
        input: uncached input tokens (never includes cache reads or writes).
        output: output tokens, reasoning tokens included.
        cache_read: input tokens read from the prompt cache.
        cache_write: input tokens written to the prompt cache.
        reasoning: the part of ``output`` spent on reasoning, when the provider reports it.
        convention: how the provider reported the counts (``anthropic``, ``openai``,
            ``gemini``, ``exclusive``, ``inclusive``, ``reference``...).
        raw: the provider's usage object as received, when kept.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    convention: str = "exclusive"
    raw: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_read", "cache_write", "reasoning"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidOpTree(f"Usage.{name} must be a non-negative integer, got {value!r}")

    @property
    def input_total(self) -> int:
        """Inclusive input: uncached input plus cache reads and writes."""
        return self.input + self.cache_read + self.cache_write

    @property
    def total(self) -> int:
        """Every token of the call: inclusive input plus output."""
        return self.input_total + self.output

    @classmethod
    def of(cls, *, input: int | None = 0, output: int | None = 0, cache_read: int | None = 0,
           cache_write: int | None = 0, reasoning: int | None = 0, convention: str = "exclusive",
           raw: Mapping[str, Any] | None = None) -> Usage:
        """Normalise counts reported under ``convention`` into exclusive buckets.

        Args:
            input: the provider's input count: uncached only for exclusive conventions
                (Anthropic), inclusive of ``cache_read`` and ``cache_write`` for inclusive ones
                (OpenAI, Gemini, OpenTelemetry, genai-prices; see :data:`INCLUSIVE_CONVENTIONS`).
            output: output tokens, reasoning included.
            cache_read: cached input tokens read.
            cache_write: input tokens written to the cache.
            reasoning: reasoning tokens (a part of ``output``).
            convention: the reporting convention.
            raw: the provider's usage object, kept as given.

        Raises:
            InvalidOpTree: a negative or non-integer count, or an inclusive input smaller
                than its cached parts.
        """
        counts = {k: _count(k, v) for k, v in (("input", input), ("output", output),
                                               ("cache_read", cache_read),
                                               ("cache_write", cache_write),
                                               ("reasoning", reasoning))}
        uncached = counts["input"]
        if convention in INCLUSIVE_CONVENTIONS:
            uncached -= counts["cache_read"] + counts["cache_write"]
            if uncached < 0:
                raise InvalidOpTree(
                    f"inclusive input {counts['input']} is smaller than its cached parts "
                    f"({counts['cache_read']} read + {counts['cache_write']} written)")
        return cls(input=uncached, output=counts["output"], cache_read=counts["cache_read"],
                   cache_write=counts["cache_write"], reasoning=counts["reasoning"],
                   convention=convention, raw=dict(raw) if raw is not None else None)

    @classmethod
    def from_anthropic(cls, usage: Mapping[str, Any], *, keep_raw: bool = False) -> Usage:
        """Anthropic Messages ``usage``: ``input_tokens`` excludes both cache counts."""
        return cls.of(input=usage.get("input_tokens"), output=usage.get("output_tokens"),
                      cache_read=usage.get("cache_read_input_tokens"),
                      cache_write=usage.get("cache_creation_input_tokens"),
                      convention="anthropic", raw=usage if keep_raw else None)

    @classmethod
    def from_openai(cls, usage: Mapping[str, Any], *, keep_raw: bool = False) -> Usage:
        """OpenAI Chat Completions or Responses ``usage``: the input count includes cached tokens."""
        prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
        completion = usage.get("completion_tokens", usage.get("output_tokens"))
        in_details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        out_details = (usage.get("completion_tokens_details")
                       or usage.get("output_tokens_details") or {})
        return cls.of(input=prompt, output=completion, cache_read=in_details.get("cached_tokens"),
                      reasoning=out_details.get("reasoning_tokens"), convention="openai",
                      raw=usage if keep_raw else None)

    @classmethod
    def from_gemini(cls, usage: Mapping[str, Any], *, keep_raw: bool = False) -> Usage:
        """Gemini ``usageMetadata``: the prompt count includes cached content; thoughts are
        billed as output and reported apart from the candidates."""
        thoughts = _count("thoughtsTokenCount", usage.get("thoughtsTokenCount"))
        candidates = _count("candidatesTokenCount", usage.get("candidatesTokenCount"))
        return cls.of(input=usage.get("promptTokenCount"), output=candidates + thoughts,
                      cache_read=usage.get("cachedContentTokenCount"), reasoning=thoughts,
                      convention="gemini", raw=usage if keep_raw else None)

    @classmethod
    def from_reference(cls, tokens: Mapping[str, Any], *, convention: str = "reference") -> Usage:
        """ai-agent's ``TokenUsage`` (``inputTokens``, ``outputTokens``, ``cacheReadInputTokens``
        or ``cachedTokens``, ``cacheWriteInputTokens``).

        ai-agent's own cost formula treats ``inputTokens`` as uncached, so the default
        convention is exclusive; pass ``convention="openai"`` for entries whose provider
        reported an inclusive input count.
        """
        read = tokens.get("cacheReadInputTokens")
        if read is None:
            read = tokens.get("cachedTokens")
        return cls.of(input=tokens.get("inputTokens"), output=tokens.get("outputTokens"),
                      cache_read=read, cache_write=tokens.get("cacheWriteInputTokens"),
                      convention=convention)

    def to_reference(self) -> dict[str, int]:
        """ai-agent's ``TokenUsage`` shape (uncached ``inputTokens``)."""
        out = {"inputTokens": self.input, "outputTokens": self.output}
        if self.cache_read:
            out["cacheReadInputTokens"] = self.cache_read
        if self.cache_write:
            out["cacheWriteInputTokens"] = self.cache_write
        out["totalTokens"] = self.total
        return out


class Accounting(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """One accounting record: a model call's usage and cost, or a tool call's sizes.

    Attributes:
        timestamp: epoch milliseconds (required).
        kind: ``llm``, ``tool`` or another kind; any kind may carry usage and cost.
        status: ``ok``, ``failed``... as reported.
        latency_ms: the call's latency.
        provider, model: what was asked for.
        actual_provider, actual_model: what served the call (routers), when known.
        usage: token usage in exclusive buckets.
        cost_usd: the cost in US dollars, exact; ``None`` when unknown.
        cost_source: ``provider`` (reported), ``computed`` (from ``price_table``) or ``none``.
        price_table: name and version of the price table a computed cost came from.
        stop_reason: the model's stop reason.
        server, command, chars_in, chars_out: tool call details.
        error: the error text of a failed call.
        extra: every other key of an ai-agent entry, kept as given.
    """

    timestamp: int
    kind: str = "llm"
    status: str | None = None
    latency_ms: float | int | None = None
    provider: str | None = None
    model: str | None = None
    actual_provider: str | None = None
    actual_model: str | None = None
    usage: Usage | None = None
    cost_usd: Decimal | None = None
    cost_source: str = "none"
    price_table: str | None = None
    stop_reason: str | None = None
    server: str | None = None
    command: str | None = None
    chars_in: int | None = None
    chars_out: int | None = None
    error: str | None = None
    extra: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.timestamp, bool) or not isinstance(self.timestamp, int):
            raise InvalidOpTree(f"an accounting timestamp must be integer epoch milliseconds, "
                                f"got {self.timestamp!r}")
        if not isinstance(self.kind, str) or not self.kind:
            raise InvalidOpTree(f"an accounting kind must be a non-empty string, got {self.kind!r}")
        if self.cost_usd is not None and not self.cost_usd.is_finite():
            raise InvalidOpTree(f"a cost must be finite, got {self.cost_usd!r}")
        if self.cost_source not in ("provider", "computed", "none"):
            raise InvalidOpTree(f"cost_source must be provider, computed or none, "
                                f"got {self.cost_source!r}")

    @property
    def priced_kind(self) -> bool:
        """Whether a missing cost makes a total partial: model calls and anything with usage."""
        return self.kind == "llm" or self.usage is not None

    _REFERENCE_KEYS = frozenset({
        "type", "timestamp", "status", "latency", "provider", "model", "actualProvider",
        "actualModel", "costUsd", "stopReason", "tokens", "mcpServer", "command",
        "charactersIn", "charactersOut", "error",
    })

    @classmethod
    def from_reference(cls, entry: Mapping[str, Any], *, convention: str = "reference") -> Accounting:
        """An ai-agent ``AccountingEntry`` (``{type, timestamp, tokens, costUsd, ...}``).

        Args:
            entry: the entry; keys ai-agent defines but this struct does not model
                (``agentId``, ``txnId``, ``details``...) go to ``extra``.
            convention: the token convention of ``entry["tokens"]`` (see
                :meth:`Usage.from_reference`).

        Raises:
            InvalidOpTree: no integer ``timestamp``, invalid token counts, or a cost that is
                not a finite number.
        """
        tokens = entry.get("tokens")
        usage = Usage.from_reference(tokens, convention=convention) \
            if isinstance(tokens, Mapping) else None
        cost = decimal_of(entry.get("costUsd"))
        error = entry.get("error")
        extra = {k: v for k, v in entry.items() if k not in cls._REFERENCE_KEYS}
        latency = entry.get("latency")
        return cls(
            timestamp=entry.get("timestamp"),  # type: ignore[arg-type]  # validated in __post_init__
            kind=str(entry.get("type", "llm")),
            status=_opt_str(entry.get("status")),
            latency_ms=latency if isinstance(latency, (int, float))
            and not isinstance(latency, bool) else None,
            provider=_opt_str(entry.get("provider")),
            model=_opt_str(entry.get("model")),
            actual_provider=_opt_str(entry.get("actualProvider")),
            actual_model=_opt_str(entry.get("actualModel")),
            usage=usage,
            cost_usd=cost,
            cost_source="provider" if cost is not None else "none",
            stop_reason=_opt_str(entry.get("stopReason")),
            server=_opt_str(entry.get("mcpServer")),
            command=_opt_str(entry.get("command")),
            chars_in=_opt_int(entry.get("charactersIn")),
            chars_out=_opt_int(entry.get("charactersOut")),
            error=error if isinstance(error, str) else (
                None if error is None else msgspec.json.encode(error).decode()),
            extra=extra or None,
        )

    def to_reference(self) -> dict[str, Any]:
        """ai-agent's ``AccountingEntry`` shape (float ``costUsd``, uncached ``inputTokens``)."""
        out: dict[str, Any] = {"type": self.kind, "timestamp": self.timestamp}
        for key, value in (("status", self.status), ("latency", self.latency_ms),
                           ("provider", self.provider), ("model", self.model),
                           ("actualProvider", self.actual_provider),
                           ("actualModel", self.actual_model),
                           ("costUsd", float(self.cost_usd) if self.cost_usd is not None else None),
                           ("stopReason", self.stop_reason), ("mcpServer", self.server),
                           ("command", self.command), ("charactersIn", self.chars_in),
                           ("charactersOut", self.chars_out), ("error", self.error)):
            if value is not None:
                out[key] = value
        if self.usage is not None:
            out["tokens"] = self.usage.to_reference()
        if self.extra:
            out.update(self.extra)
        return out


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Log(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """One log line of an op.

    Attributes:
        timestamp: epoch milliseconds (required).
        message: the text.
        severity: ``VRB``, ``WRN``, ``ERR``, ``TRC``, ``THK``, ``FIN`` (ai-agent's levels).
        path: the op's global path when the log was recorded (``1-2.1-1``), updated when the
            op's run is linked under a parent later.
        local_path: the op's path within its own run (``1-1``).
        fields: every other key of the caller's log (``turn``, ``direction``...); a ``path``
            the caller set is kept here as ``callerPath``.
    """

    timestamp: int
    message: str = ""
    severity: str = "VRB"
    path: str = ""
    local_path: str = ""
    fields: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.timestamp, bool) or not isinstance(self.timestamp, int):
            raise InvalidOpTree(f"a log timestamp must be integer epoch milliseconds, "
                                f"got {self.timestamp!r}")

    @classmethod
    def from_mapping(cls, log: Mapping[str, Any]) -> Log:
        """A log from a dict in ai-agent's ``LogEntry`` shape (the dict is not changed).

        Raises:
            InvalidOpTree: no integer ``timestamp``.
        """
        fields = {k: v for k, v in log.items()
                  if k not in ("timestamp", "message", "severity", "path")}
        if log.get("path") is not None:
            fields["callerPath"] = log["path"]
        message, severity = log.get("message", ""), log.get("severity", "VRB")
        return cls(timestamp=log.get("timestamp"),  # type: ignore[arg-type]
                   message=message if isinstance(message, str) else str(message),
                   severity=severity if isinstance(severity, str) else str(severity),
                   fields=fields or None)


class ReasoningChunk(msgspec.Struct, frozen=True):
    """A streamed piece of reasoning text and when it arrived."""

    text: str
    ts: int


class Reasoning(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An op's reasoning: the streamed chunks and the final text."""

    chunks: list[ReasoningChunk] = msgspec.field(default_factory=list)
    final: str | None = None


class Blob(msgspec.Struct, frozen=True):
    """A payload stored beside the session file, by content hash."""

    sha256: str
    size: int


class Payload(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """A request or response record of an op.

    Attributes:
        kind: the request kind (``llm``, ``tool``); unused on responses.
        payload: the JSON body (absent when stored as a blob or never given).
        blob: where the body is stored when it was too large to keep inline.
        preview: a short text of the body, kept with a blob.
        size: the body's size as the producer measured it.
        truncated: ``True`` only when the producer truncated the body.
    """

    kind: str | None = None
    payload: Any = UNSET
    blob: Blob | None = None
    preview: str | None = None
    size: int | None = None
    truncated: bool | None = None

    @classmethod
    def from_mapping(cls, record: Mapping[str, Any]) -> Payload:
        """A record from ``{kind?, payload?, size?, truncated?}`` (the reference's shape)."""
        kind, size, truncated = record.get("kind"), record.get("size"), record.get("truncated")
        if kind is not None and not isinstance(kind, str):
            raise InvalidOpTree(f"a payload kind must be a string, got {kind!r}")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise InvalidOpTree(f"a payload size must be a non-negative integer, got {size!r}")
        if truncated is not None and not isinstance(truncated, bool):
            raise InvalidOpTree(f"truncated must be a boolean, got {truncated!r}")
        blob = record.get("blob")
        return cls(kind=kind, payload=record.get("payload", UNSET),
                   blob=msgspec.convert(blob, Blob) if blob is not None else None,
                   preview=record.get("preview"), size=size, truncated=truncated)


class Totals(msgspec.Struct, kw_only=True, rename="camel"):
    """Aggregated counters of a run, in one scope (``own`` or ``rollup``).

    Attributes:
        tokens_in: uncached input tokens.
        tokens_out: output tokens (reasoning included).
        cache_read: cached input tokens read.
        cache_write: input tokens written to the cache.
        reasoning: reasoning tokens (a part of ``tokens_out``).
        cost_usd: the exact sum of known costs.
        unpriced_calls: accounting records of a priced kind with no cost: when it is not
            zero, ``cost_usd`` is a lower bound.
        llm_calls: ops of kind ``llm``.
        tools_run: ops of kind ``tool`` (a sub-agent call, kind ``session``, is not a tool).
        agents_run: runs in the scope, the run itself included.
        failed_ops: ops that ended with status ``failed``.
    """

    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    cost_usd: Decimal = Decimal(0)
    unpriced_calls: int = 0
    llm_calls: int = 0
    tools_run: int = 0
    agents_run: int = 0
    failed_ops: int = 0

    @property
    def tokens_in_total(self) -> int:
        """Inclusive input: uncached input plus cache reads and writes."""
        return self.tokens_in + self.cache_read + self.cache_write

    def copy(self) -> Totals:
        """An independent copy."""
        return msgspec.structs.replace(self)

    def to_builtins(self) -> dict[str, Any]:
        """JSON builtins, camelCase, with ``tokensInTotal`` and the cost as a decimal string."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        out["tokensInTotal"] = self.tokens_in_total
        return out


class ParentRef(msgspec.Struct, frozen=True, rename="camel"):
    """Where a child run hangs: the parent run and its ``session`` op."""

    run: str
    op_id: str


class Op(msgspec.Struct, kw_only=True, rename="camel"):
    """One operation: a model call, a tool call, a sub-agent call or a system step.

    Attributes:
        op_id: unique in the tree.
        run_id: the run the op belongs to.
        kind: ``llm``, ``tool``, ``session``, ``system`` or a namespaced custom kind.
        turn: the index of its turn.
        seq: its 1-based position in the turn.
        path: the global path from the root run (``1-2.2-1``).
        local_path: the path within its own run (``2-1``).
        started_at, ended_at: epoch milliseconds.
        duration_ms: from a monotonic clock when one was available, never negative.
        status: ``ok``, ``failed``... (``None`` while open).
        unfinished: the op never ended (set when a tree is loaded from a session).
        attributes: the caller's attributes (``provider``, ``model``, ``name``...).
        logs, accounting: in arrival order.
        reasoning, request, response: when recorded.
        child: the linked child run's id (kind ``session`` only).
        child_file: the session file holding the child run, when it is not this one.
    """

    op_id: str
    run_id: str
    kind: str
    turn: int
    seq: int
    path: str
    local_path: str
    started_at: int
    ended_at: int | None = None
    duration_ms: int | None = None
    status: str | None = None
    unfinished: bool = False
    attributes: dict[str, Any] = msgspec.field(default_factory=dict)
    logs: list[Log] = msgspec.field(default_factory=list)
    accounting: list[Accounting] = msgspec.field(default_factory=list)
    reasoning: Reasoning | None = None
    request: Payload | None = None
    response: Payload | None = None
    child: str | None = None
    child_file: str | None = None

    @property
    def usage(self) -> Usage:
        """The sum of the usage of the op's accounting records."""
        totals = [a.usage for a in self.accounting if a.usage is not None]
        if len(totals) == 1:
            return totals[0]
        return Usage(input=sum(u.input for u in totals), output=sum(u.output for u in totals),
                     cache_read=sum(u.cache_read for u in totals),
                     cache_write=sum(u.cache_write for u in totals),
                     reasoning=sum(u.reasoning for u in totals))

    @property
    def cost_usd(self) -> Decimal | None:
        """The sum of the known costs of the op's records; ``None`` when none has a cost."""
        costs = [a.cost_usd for a in self.accounting if a.cost_usd is not None]
        return sum(costs, Decimal(0)) if costs else None


class Turn(msgspec.Struct, kw_only=True, rename="camel"):
    """One turn of a run (turn 0 is ai-agent's system turn)."""

    turn_id: str
    run_id: str
    index: int
    started_at: int
    ended_at: int | None = None
    unfinished: bool = False
    attributes: dict[str, Any] = msgspec.field(default_factory=dict)
    ops: list[Op] = msgspec.field(default_factory=list)


class Run(msgspec.Struct, kw_only=True, rename="camel"):
    """One agent run: its identity, turns and totals in two scopes.

    Attributes:
        own: totals of this run's own ops.
        rollup: ``own`` plus the ``rollup`` of every linked child run; ``agents_run`` counts
            the run and all its descendants.
        parent: the parent run and op when this run is a linked sub-agent run.
        unfinished: the run never ended (set when a tree is loaded from a session).
    """

    run_id: str
    started_at: int
    trace_id: str | None = None
    agent_id: str | None = None
    call_path: str | None = None
    title: str = ""
    latest_status: str | None = None
    ended_at: int | None = None
    success: bool | None = None
    error: str | None = None
    unfinished: bool = False
    attributes: dict[str, Any] = msgspec.field(default_factory=dict)
    parent: ParentRef | None = None
    turns: list[Turn] = msgspec.field(default_factory=list)
    own: Totals = msgspec.field(default_factory=lambda: Totals(agents_run=1))
    rollup: Totals = msgspec.field(default_factory=lambda: Totals(agents_run=1))

    def ops(self) -> Iterator[Op]:
        """This run's ops, turn by turn, in order (child runs not included)."""
        for turn in self.turns:
            yield from turn.ops


class LoadProblem(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """An event the fold could not apply, or a consistency check that failed.

    Attributes:
        index: the event's position among the operation-tree events (0-based).
        entry_id: the session entry holding the event, when known.
        custom_type: the event's ``customType``.
        reason: what went wrong.
    """

    index: int
    custom_type: str
    reason: str
    entry_id: str | None = None


class OpTree:
    """Every run of an operation tree, indexed by run id and op id.

    A tree usually has one root run; loading a session whose events hold several unrelated
    runs gives several roots. ``problems`` lists what a load could not apply.

    Attributes:
        runs: every run by id, in the order they began.
        ops: every op by id.
        problems: the load problems (an empty list for a tree built live).
    """

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.ops: dict[str, Op] = {}
        self.problems: list[LoadProblem] = []
        self._turns: dict[tuple[str, int], Turn] = {}
        self._turn_ids: dict[str, Turn] = {}
        self._pending: dict[str, ParentRef] = {}
        self._forward: OpTree | None = None

    def __repr__(self) -> str:
        return f"<OpTree runs={len(self.runs)} ops={len(self.ops)} roots={len(self.roots())}>"

    def run(self, run_id: str) -> Run:
        """The run with this id.

        Raises:
            RunNotFound: no such run.
        """
        try:
            return self.runs[run_id]
        except KeyError:
            raise RunNotFound(f"no run {run_id!r} in the operation tree") from None

    def op(self, op_id: str) -> Op:
        """The op with this id.

        Raises:
            OpNotFound: no such op.
        """
        try:
            return self.ops[op_id]
        except (KeyError, TypeError):
            raise OpNotFound(f"no op {op_id!r} in the operation tree") from None

    def roots(self) -> list[Run]:
        """Runs without a parent, in the order they began."""
        return [run for run in self.runs.values() if run.parent is None]

    @property
    def root(self) -> Run | None:
        """The first root run, or ``None`` for an empty tree."""
        for run in self.runs.values():
            if run.parent is None:
                return run
        return None

    def parent_of(self, run: Run) -> Run | None:
        """The parent run of a linked child run."""
        return self.runs.get(run.parent.run) if run.parent is not None else None

    def ancestors(self, run: Run) -> Iterator[Run]:
        """The run's parent, grandparent... up to its root (the run itself excluded)."""
        current = self.parent_of(run)
        while current is not None:
            yield current
            current = self.parent_of(current)

    def children(self, run: Run) -> list[Run]:
        """The linked child runs of a run, in the order of their ops."""
        return [self.runs[op.child] for op in run.ops()
                if op.child is not None and op.child in self.runs]

    def subtree(self, run: Run) -> Iterator[Run]:
        """The run and every descendant run, depth first in op order."""
        stack = [run]
        while stack:
            current = stack.pop()
            yield current
            stack.extend(reversed(self.children(current)))

    def turn(self, run_id: str, index: int) -> Turn | None:
        """The turn of a run with this index, if any."""
        return self._turns.get((run_id, index))
