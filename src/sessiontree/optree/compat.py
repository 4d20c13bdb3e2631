"""Compatibility mode: the reference ``SessionTreeBuilder`` reproduced exactly.

This is a transcription of the semantics in REFERENCE.md sections 2 to 9 (ai-agent
``src/session-tree.ts`` at 470cb9a5), quirks Q1 to Q28 included. The tree is made of plain
``dict``/``list`` values shaped like the reference's JavaScript objects, so callers can pass
and inspect the same objects; totals are recomputed by walking the whole tree after every
mutating call, exactly as the reference does.

Invariants:
* ``UNDEFINED`` (``msgspec.UNSET``) is JavaScript ``undefined``; a dict value equal to it is
  omitted from JSON, as ``JSON.stringify`` omits it.
* The clock and the id source are injected (quirk Q18, the one deliberate change); with the
  defaults the builder reads ``time.time_ns()`` and draws reference-style ids.
* Objects passed in (logs, accounting entries, payload records, child nodes) are stored by
  reference, and ``append_log`` writes ``path`` into the caller's log (quirk Q14).
* ``warnings`` lists every warning in emission order; each is also sent to the ``warn``
  callback (when given) and to the ``sessiontree.optree`` logger.

Use :class:`sessiontree.optree.OpTreeBuilder` (the default mode) for new code; this class
exists for parity tests and for reading or writing ai-agent snapshots.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import time
from collections.abc import Callable, Hashable
from typing import Any

from ._jsformat import (
    UNDEFINED,
    is_nullish,
    is_number,
    iso,
    js_add,
    js_string,
    js_sub,
    merge,
    strict_equal,
    stringify,
    to_fixed,
    utf16_len,
    utf16_truncate,
)
from .events import (
    ACCOUNTING,
    CHILD,
    LOG,
    OP_BEGIN,
    OP_END,
    REASONING,
    REASONING_FINAL,
    REQUEST,
    RESPONSE,
    RUN_END,
    RUN_META,
    TURN_BEGIN,
    TURN_END,
    OpEvent,
)

__all__ = [
    "CompatTreeBuilder",
    "compat_totals",
    "reference_uid",
    "render_reference_ascii",
]

_log = logging.getLogger("sessiontree.optree")

JSObject = dict[str, Any]
Clock = Callable[[], "int | float"]


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    if n == 0:
        return "0"
    out = []
    sign = "-" if n < 0 else ""
    n = abs(n)
    while n:
        n, r = divmod(n, 36)
        out.append(digits[r])
    return sign + "".join(reversed(out))


def reference_uid(clock: Clock = _wall_ms) -> Callable[[], str]:
    """An id source drawing ids like the reference: base-36 time, ``-``, six random characters."""

    def uid() -> str:
        rand = _base36(int.from_bytes(os.urandom(8), "big"))[-6:]
        return f"{_base36(int(clock()))}-{rand}"

    return uid


def _prop(obj: object, key: str) -> Any:
    """``obj.key`` for a JavaScript value (``undefined`` for primitives and missing keys)."""
    if isinstance(obj, dict):
        return obj.get(key, UNDEFINED)
    if obj is None or obj is UNDEFINED:
        raise TypeError(f"Cannot read properties of {js_string(obj)} (reading '{key}')")
    if isinstance(obj, list) and key == "length":
        return len(obj)
    return UNDEFINED


def _coalesce(value: Any, fallback: Any) -> Any:
    """``value ?? fallback``."""
    return fallback if is_nullish(value) else value


def _spread(value: object) -> JSObject:
    """``{...value}`` (own enumerable properties as a plain object)."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, str)):
        return {str(i): v for i, v in enumerate(value)}
    return {}


def _map_key(value: object) -> Hashable:
    """A key comparing like JavaScript ``Map`` keys (SameValueZero)."""
    if isinstance(value, bool):
        return ("b", value)
    if is_number(value):
        number = float(value)  # type: ignore[arg-type]
        return ("nan",) if math.isnan(number) else ("n", number)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("null",)
    if value is UNDEFINED:
        return ("undefined",)
    return ("object", id(value))


def _array(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _iterate(value: object, name: str) -> list[Any]:
    """``for (const x of value)``: lists (and strings) iterate, anything else throws."""
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return list(value)
    raise TypeError(f"{name} is not iterable")


def compat_totals(node: JSObject) -> JSObject:
    """The reference's totals of a session node (REFERENCE.md section 4), without storing them.

    Args:
        node: a session node in the reference's shape.

    Returns:
        ``{tokensIn, tokensOut, tokensCacheRead, tokensCacheWrite, costUsd, toolsRun, agentsRun}``
        with ``costUsd`` ``UNDEFINED`` when the sum is not finite.
    """
    acc: dict[str, Any] = {"tokensIn": 0, "tokensOut": 0, "tokensCacheRead": 0,
                           "tokensCacheWrite": 0, "costUsd": 0, "toolsRun": 0, "agentsRun": 0}

    def visit(session: object) -> None:
        acc["agentsRun"] += 1
        for turn in _array(_prop(session, "turns")):
            for op in _array(_prop(turn, "ops")):
                kind = _prop(op, "kind")
                if strict_equal(kind, "tool"):
                    acc["toolsRun"] += 1
                for entry in _array(_prop(op, "accounting")):
                    if not strict_equal(_prop(entry, "type"), "llm"):
                        continue
                    tokens = _coalesce(_prop(entry, "tokens"), {})
                    acc["tokensIn"] = js_add(acc["tokensIn"],
                                             _coalesce(_prop(tokens, "inputTokens"), 0))
                    acc["tokensOut"] = js_add(acc["tokensOut"],
                                              _coalesce(_prop(tokens, "outputTokens"), 0))
                    read = _coalesce(_prop(tokens, "cacheReadInputTokens"),
                                     _coalesce(_prop(tokens, "cachedTokens"), 0))
                    acc["tokensCacheRead"] = js_add(acc["tokensCacheRead"], read)
                    acc["tokensCacheWrite"] = js_add(
                        acc["tokensCacheWrite"], _coalesce(_prop(tokens, "cacheWriteInputTokens"), 0))
                    cost = _prop(entry, "costUsd")
                    if is_number(cost):
                        acc["costUsd"] = js_add(acc["costUsd"], cost)
                child = _prop(op, "childSession")
                if strict_equal(kind, "session") and child is not UNDEFINED:
                    visit(child)

    visit(node)
    normalized = float(to_fixed(acc["costUsd"], 4))
    return {
        "tokensIn": acc["tokensIn"],
        "tokensOut": acc["tokensOut"],
        "tokensCacheRead": acc["tokensCacheRead"],
        "tokensCacheWrite": acc["tokensCacheWrite"],
        "costUsd": normalized if math.isfinite(normalized) else UNDEFINED,
        "toolsRun": acc["toolsRun"],
        "agentsRun": acc["agentsRun"],
    }


# --- rendering (REFERENCE.md section 8) ------------------------------------------------------


def _dur(a: object, b: object) -> str:
    if is_number(a) and is_number(b):
        return js_string(js_sub(b, a)) + "ms"
    return ""


def _upper(kind: object) -> str:
    if not isinstance(kind, str):
        raise TypeError("o.kind.toUpperCase is not a function")
    return kind.upper()


def _header_line(node: object) -> str:
    line = "SessionTree " + js_string(_prop(node, "id"))
    for key, label in (("traceId", "trace"), ("agentId", "agent"), ("callPath", "callPath")):
        value = _prop(node, key)
        if isinstance(value, str) and value:
            line += f" {label}={value}"
    return line


def _status_line(node: object, with_totals: bool) -> str:
    started, ended = _prop(node, "startedAt"), _prop(node, "endedAt")
    line = "├─ started=" + iso(started)
    if is_number(ended):
        line += " ended=" + iso(ended) + " dur=" + _dur(started, ended)
    success = _prop(node, "success")
    if isinstance(success, bool):
        line += " success=" + ("true" if success else "false")
    error = _prop(node, "error")
    if isinstance(error, str) and error:
        line += " error=" + error
    totals = _prop(node, "totals") if with_totals else UNDEFINED
    if totals is not UNDEFINED:
        cost = _coalesce(_prop(totals, "costUsd"), 0)
        if not is_number(cost):
            raise TypeError("(totals.costUsd ?? 0).toFixed is not a function")
        tot = (f" tokens in={js_string(_prop(totals, 'tokensIn'))}"
               f" out={js_string(_prop(totals, 'tokensOut'))}"
               f" cR={js_string(_prop(totals, 'tokensCacheRead'))}"
               f" cW={js_string(_prop(totals, 'tokensCacheWrite'))}"
               f" tools={js_string(_prop(totals, 'toolsRun'))}"
               f" agents={js_string(_prop(totals, 'agentsRun'))}"
               f" cost=${to_fixed(cost, 2)}")
        line += " | " + tot
    return line


def _turn_line(turn: object, last: bool) -> str:
    started, ended = _prop(turn, "startedAt"), _prop(turn, "endedAt")
    line = ("└─" if last else "├─") + " Turn#" + js_string(_prop(turn, "index")) + " " + iso(started)
    if is_number(ended):
        line += " → " + iso(ended) + " (" + _dur(started, ended) + ")"
    return line


def _prompt_lines(turn: object, prefix: str) -> list[str]:
    out: list[str] = []
    try:
        attrs = _prop(turn, "attributes")
        if not isinstance(attrs, dict) or "prompts" not in attrs:
            return out
        prompts = attrs["prompts"]
        if not isinstance(prompts, dict):
            return out
        for key, label in (("system", "system: "), ("user", "user:   ")):
            text = prompts.get(key, UNDEFINED)
            if isinstance(text, str) and text:
                out.append(prefix + label + utf16_truncate(text, 120, 117))
    except Exception:  # noqa: BLE001  # the reference swallows any error of this block
        return out
    return out


def _meta(attrs: object) -> str:
    if not isinstance(attrs, dict):
        return ""
    provider = attrs.get("provider", UNDEFINED)
    model_or_name = _coalesce(attrs.get("model", UNDEFINED), attrs.get("name", UNDEFINED))
    parts = [p for p in (provider, model_or_name) if isinstance(p, str)]
    return " [" + ":".join(parts) + "]" if parts else ""


def _op_line(op: object, prefix: str, with_meta: bool) -> str:
    started, ended = _prop(op, "startedAt"), _prop(op, "endedAt")
    kind = _upper(_prop(op, "kind"))
    meta = _meta(_prop(op, "attributes")) if with_meta else ""
    line = f"{prefix} {kind} op={js_string(_prop(op, 'opId'))}{meta} {iso(started)}"
    if is_number(ended):
        line += " → " + iso(ended) + " (" + _dur(started, ended) + ")"
    status = _prop(op, "status")
    if isinstance(status, str):
        line += " status=" + status
    return line


def _preview(record: object) -> str:
    payload = _prop(record, "payload")
    text = payload if isinstance(payload, str) else stringify(payload)
    if not isinstance(text, str):  # JSON.stringify gave nothing: `.length` throws
        raise TypeError("Cannot read properties of undefined (reading 'length')")
    return utf16_truncate(text, 200, 197)


def _render(node: object, full: bool) -> list[str]:
    lines = [_header_line(node), _status_line(node, with_totals=full)]
    turns = _prop(node, "turns")
    if not isinstance(turns, list):
        raise TypeError("Cannot read properties of undefined (reading 'length')")
    lines.append("├─ turns=" + js_string(len(turns)))
    for ti, turn in enumerate(turns):
        last = ti == len(turns) - 1
        lines.append(_turn_line(turn, last))
        if full:
            lines.extend(_prompt_lines(turn, "   " if last else "│  "))
        ops = _prop(turn, "ops")
        for oi, op in enumerate(ops):
            olast = oi == len(ops) - 1
            opfx = ("   └─" if olast else "   ├─") if last else ("│  └─" if olast else "│  ├─")
            lines.append(_op_line(op, opfx, with_meta=full))
            q = "      " if last else "│     "
            logs, accounting = _prop(op, "logs"), _prop(op, "accounting")
            lines.append(f"{q}logs={js_string(_prop(logs, 'length'))}"
                         f" accounting={js_string(_prop(accounting, 'length'))}")
            if not full:
                continue
            try:
                request = _prop(op, "request")
                if request is not UNDEFINED:
                    lines.append(q + "request: " + _preview(request))
                response = _prop(op, "response")
                if response is not UNDEFINED:
                    lines.append(q + "response: " + _preview(response))
            except TypeError:
                pass
            child = _prop(op, "childSession")
            if child is not UNDEFINED:
                lines.append(q + "child:")
                block = "\n".join(_render(child, full=False))
                lines.extend(q + "   " + ln for ln in block.split("\n"))
    return lines


def render_reference_ascii(node: JSObject) -> str:
    """The reference's ``renderAscii()`` of a session node, byte for byte (REFERENCE.md 8).

    Raises:
        TypeError: an op ``kind`` is not a string, or a child node has no ``turns`` array.
        ValueError: a timestamp is not a valid JavaScript time.
    """
    return "\n".join(_render(node, full=True))


# --- the builder ------------------------------------------------------------------------------


class CompatTreeBuilder:
    """The reference ``SessionTreeBuilder`` in Python, quirk for quirk (compatibility mode).

    Method names are the reference's in snake_case; arguments and stored values are the
    reference's plain JavaScript-shaped objects (``dict``), and an omitted optional argument is
    ``UNDEFINED``, not ``None`` (``None`` is JSON ``null`` and behaves as such).

    Args:
        meta: the constructor's ``{traceId, agentId, callPath, sessionTitle, attributes}``.
        clock: returns the current time in epoch milliseconds (default: the wall clock).
        ids: returns a new id on each call (default: reference-style ids).
        warn: called with each warning string, in addition to the ``warnings`` list.
    """

    def __init__(self, meta: Any = UNDEFINED, *, clock: Clock | None = None,
                 ids: Callable[[], str] | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self._now: Clock = clock or _wall_ms
        self._uid = ids or reference_uid(self._now)
        self._warn_cb = warn
        self.warnings: list[str] = []
        self._listeners: list[Callable[[OpEvent], None]] = []
        self._turn_index: dict[Hashable, JSObject] = {}
        self._op_index: dict[Hashable, JSObject] = {}

        def m(key: str) -> Any:
            return UNDEFINED if is_nullish(meta) else _prop(meta, key)

        session_id = self._uid()
        self._session: JSObject = {
            "id": session_id,
            "traceId": m("traceId"),
            "agentId": m("agentId"),
            "callPath": m("callPath"),
            "sessionTitle": _coalesce(m("sessionTitle"), ""),
            "startedAt": self._now(),
        }
        self._session["attributes"] = m("attributes")
        self._session["turns"] = []

    # -- plumbing

    def subscribe(self, callback: Callable[[OpEvent], None]) -> Callable[[], None]:
        """Call ``callback`` after every call that changes the tree.

        The event's ``data`` holds the run id and the call's arguments as given (not
        necessarily JSON). Returns a function that removes the callback.
        """
        self._listeners.append(callback)
        return functools.partial(self._listeners.remove, callback)

    def _notify(self, custom_type: str, **data: Any) -> None:
        if self._listeners:
            event = OpEvent(custom_type, {"run": self._session["id"], **data})
            for listener in list(self._listeners):
                listener(event)

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        _log.warning("%s", message)
        if self._warn_cb is not None:
            self._warn_cb(message)

    def _op(self, op_id: object) -> JSObject | None:
        return self._op_index.get(_map_key(op_id))

    def _recompute(self) -> JSObject:
        totals = compat_totals(self._session)
        self._session["totals"] = totals
        return totals

    # -- the reference API

    def get_session(self) -> JSObject:
        """The live session node (not a copy)."""
        return self._session

    def set_session_title(self, title: Any) -> None:
        """Set ``sessionTitle`` (no clock, no recompute)."""
        self._session["sessionTitle"] = title
        self._notify(RUN_META, title=title)

    def set_latest_status(self, status: Any) -> None:
        """Set ``latestStatus`` (no clock, no recompute)."""
        self._session["latestStatus"] = status
        self._notify(RUN_META, status=status)

    def begin_turn(self, index: Any, attributes: Any = UNDEFINED) -> str:
        """Append a turn (a repeated index appends another one, quirk Q6); returns its id."""
        turn_id = self._uid()
        node = {"id": turn_id, "index": index, "startedAt": self._now(),
                "attributes": attributes, "ops": []}
        self._session["turns"].append(node)
        self._turn_index[_map_key(index)] = node
        self._recompute()
        self._notify(TURN_BEGIN, turn=index, turnId=turn_id, attrs=attributes)
        return turn_id

    def end_turn(self, index: Any, attributes: Any = UNDEFINED) -> None:
        """End the latest turn with this index (unknown index: only a recompute)."""
        turn = self._turn_index.get(_map_key(index))
        if turn is not None:
            turn["endedAt"] = self._now()
            if attributes is not UNDEFINED:
                turn["attributes"] = {**_spread(_coalesce(turn.get("attributes", UNDEFINED), {})),
                                      **_spread(attributes)}
        self._recompute()
        self._notify(TURN_END, turn=index, attrs=attributes)

    def begin_op(self, turn_index: Any, kind: Any, attributes: Any = UNDEFINED) -> str:
        """Begin an op in the latest turn with this index; an unknown turn makes an orphan (Q5)."""
        turn = self._turn_index.get(_map_key(turn_index))
        op_id = self._uid()
        node = {"opId": op_id, "kind": kind, "startedAt": self._now(), "attributes": attributes,
                "logs": [], "accounting": []}
        if turn is not None:
            turn["ops"].append(node)
        self._op_index[_map_key(op_id)] = node
        self._recompute()
        self._notify(OP_BEGIN, opId=op_id, turn=turn_index, kind=kind, attrs=attributes)
        return op_id

    def end_op(self, op_id: Any, status: Any, attributes: Any = UNDEFINED) -> None:
        """Set ``endedAt`` and ``status`` (again on a second call) and merge attributes."""
        op = self._op(op_id)
        if op is not None:
            op["endedAt"] = self._now()
            op["status"] = status
            if attributes is not UNDEFINED:
                op["attributes"] = {**_spread(_coalesce(op.get("attributes", UNDEFINED), {})),
                                    **_spread(attributes)}
        self._recompute()
        self._notify(OP_END, opId=op_id, status=status, attrs=attributes)

    def attach_child_session(self, op_id: Any, child: Any) -> None:
        """Store ``child`` (a session node, or a builder whose node is taken) on the op."""
        if isinstance(child, CompatTreeBuilder):
            child = child.get_session()
        op = self._op(op_id)
        if op is not None:
            op["childSession"] = child
        self._recompute()
        self._notify(CHILD, opId=op_id, child=_prop(child, "id") if isinstance(child, dict)
                     else UNDEFINED)

    def append_log(self, op_id: Any, log: Any) -> None:
        """Append ``log`` (the caller's object), writing its ``path`` when absent (Q14)."""
        op = self._op(op_id)
        if op is None:
            return
        try:
            if _prop(log, "path") is UNDEFINED:
                log["path"] = self.get_op_path(op_id)
        except TypeError as exc:
            self._warn(f"session-tree: failed to compute path for op {js_string(op_id)}: {exc}")
        op["logs"].append(log)
        self._notify(LOG, opId=op_id, log=log)

    def append_accounting(self, op_id: Any, entry: Any) -> None:
        """Append an accounting entry (unknown op: dropped, but totals are still recomputed)."""
        op = self._op(op_id)
        if op is not None:
            op["accounting"].append(entry)
        self._recompute()
        self._notify(ACCOUNTING, opId=op_id, entry=entry)

    def get_op_path(self, op_id: Any) -> str:
        """The op's path from this builder's node (``1-2.3-1``); ``""`` when not in the tree.

        Raises:
            TypeError: a descended child node has no ``turns`` array (``appendLog`` turns
                this into a warning).
        """

        def walk(node: object, prefix: str) -> str | None:
            if node is None or node is UNDEFINED:
                raise TypeError(f"Cannot read properties of {js_string(node)} (reading 'turns')")
            for turn in _iterate(_prop(node, "turns"), "node.turns"):
                base = js_string(_prop(turn, "index"))
                for i, op in enumerate(_iterate(_prop(turn, "ops"), "t.ops")):
                    segment = f"{base}-{i + 1}"
                    label = f"{prefix}.{segment}" if prefix else segment
                    if strict_equal(_prop(op, "opId"), op_id):
                        return label
                    child = _prop(op, "childSession")
                    if strict_equal(_prop(op, "kind"), "session") and child is not UNDEFINED:
                        found = walk(child, label)
                        if found is not None:
                            return found
            return None

        return walk(self._session, "") or ""

    def append_reasoning_chunk(self, op_id: Any, text: Any) -> None:
        """Append ``{text, ts: now()}`` to the op's reasoning chunks."""
        op = self._op(op_id)
        if op is None:
            return
        existing = op.get("reasoning", UNDEFINED)
        reasoning = {"chunks": []} if is_nullish(existing) else existing
        ts = self._now()
        reasoning["chunks"].append({"text": text, "ts": ts})
        op["reasoning"] = reasoning
        self._notify(REASONING, opId=op_id, text=text, t=ts)

    def set_reasoning_final(self, op_id: Any, text: Any) -> None:
        """Set the op's final reasoning text (overwrites)."""
        op = self._op(op_id)
        if op is None:
            return
        existing = op.get("reasoning", UNDEFINED)
        reasoning = {"chunks": []} if is_nullish(existing) else existing
        reasoning["final"] = text
        op["reasoning"] = reasoning
        self._notify(REASONING_FINAL, opId=op_id, text=text)

    def set_request(self, op_id: Any, req: Any) -> None:
        """Store the request record; a later call merges payloads (quirks Q7, Q8)."""
        op = self._op(op_id)
        if op is None:
            return
        old = op.get("request", UNDEFINED)
        if old is UNDEFINED:
            op["request"] = req
        else:
            op["request"] = {
                "kind": _prop(req, "kind"),
                "payload": merge(_prop(old, "payload"), _prop(req, "payload")),
                "size": _coalesce(_prop(req, "size"), _prop(old, "size")),
            }
        self._notify(REQUEST, opId=op_id, record=req)

    def set_response(self, op_id: Any, res: Any) -> None:
        """Store the response record; a later call merges payloads (quirks Q7, Q8)."""
        op = self._op(op_id)
        if op is None:
            return
        old = op.get("response", UNDEFINED)
        if old is UNDEFINED:
            op["response"] = res
        else:
            op["response"] = {
                "payload": merge(_prop(old, "payload"), _prop(res, "payload")),
                "size": _coalesce(_prop(res, "size"), _prop(old, "size")),
                "truncated": _coalesce(_prop(res, "truncated"), _prop(old, "truncated")),
            }
        self._notify(RESPONSE, opId=op_id, record=res)

    def flatten(self) -> dict[str, list[Any]]:
        """Every log and accounting entry reachable through ``session`` ops, stably sorted by
        ``timestamp`` (the same objects, not copies)."""
        logs: list[Any] = []
        accounting: list[Any] = []

        def visit(node: object) -> None:
            for turn in _iterate(_prop(node, "turns"), "node.turns"):
                for op in _iterate(_prop(turn, "ops"), "t.ops"):
                    logs.extend(_prop(op, "logs"))
                    accounting.extend(_prop(op, "accounting"))
                    child = _prop(op, "childSession")
                    if strict_equal(_prop(op, "kind"), "session") and child is not UNDEFINED:
                        visit(child)

        visit(self._session)

        def compare(a: object, b: object) -> int:
            diff = js_sub(_prop(a, "timestamp"), _prop(b, "timestamp"))
            if isinstance(diff, float) and math.isnan(diff):
                return 0
            return -1 if diff < 0 else (1 if diff > 0 else 0)

        key = functools.cmp_to_key(compare)
        return {"logs": sorted(logs, key=key), "accounting": sorted(accounting, key=key)}

    def end_session(self, success: Any, error: Any = UNDEFINED) -> None:
        """Recompute, warn if the stored totals were stale (``agentsRun`` not compared, Q12),
        then set ``endedAt``, ``success`` and a non-empty ``error`` (never cleared, Q21)."""
        before = self._session.get("totals", UNDEFINED)
        recomputed = self._recompute()
        if before is not UNDEFINED:
            keys = ("tokensIn", "tokensOut", "tokensCacheRead", "tokensCacheWrite")
            mismatch = any(not strict_equal(_prop(before, k), recomputed[k]) for k in keys)
            mismatch = mismatch or not strict_equal(_coalesce(_prop(before, "costUsd"), 0),
                                                    _coalesce(recomputed["costUsd"], 0))
            mismatch = mismatch or not strict_equal(_prop(before, "toolsRun"),
                                                    recomputed["toolsRun"])
            if mismatch:
                try:
                    self._warn("session-tree: accounting mismatch detected; "
                               f"snapshot={stringify(before)} recomputed={stringify(recomputed)}")
                except TypeError:
                    pass
        ended = self._now()
        self._session["endedAt"] = ended
        self._session["success"] = success
        if isinstance(error, str) and utf16_len(error) > 0:
            self._session["error"] = error
        self._notify(RUN_END, t=ended, success=success, error=error)

    def render_ascii(self) -> str:
        """The reference's ASCII rendering (REFERENCE.md section 8), byte for byte."""
        return render_reference_ascii(self._session)

    @staticmethod
    def indent_ascii(block: str) -> str:
        """Prefix every line of ``block`` with three spaces."""
        return "\n".join("   " + line for line in block.split("\n"))

    def to_reference_json(self) -> bytes:
        """The session node as the reference's ``JSON.stringify`` writes it."""
        text = stringify(self._session)
        assert isinstance(text, str)
        return text.encode("utf-8", "surrogatepass")
