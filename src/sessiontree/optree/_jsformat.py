"""JavaScript value semantics the compatibility mode needs (REFERENCE.md section 9).

Invariants:
* ``UNDEFINED`` (``msgspec.UNSET``) stands for JavaScript ``undefined``; ``None`` is ``null``.
* "A number" is an ``int`` or ``float`` but never a ``bool``, as ``typeof x === "number"``.
* Strings are Python ``str``; lengths and slices that JavaScript measures in UTF-16 code units
  are measured the same way here, so a cut can leave a lone surrogate (a one-character ``str``).
* JSON text comes from :func:`sessiontree._json.dumps`, which already writes exactly what
  ``JSON.stringify`` writes for plain data; :func:`stringify` only adds the parts of
  ``JSON.stringify`` that plain data lacks (``undefined``, functions, non-finite numbers, cycles).
"""

from __future__ import annotations

import datetime as _dt
import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from msgspec import UNSET

from .._json import dumps, js_number

__all__ = [
    "UNDEFINED",
    "is_nullish",
    "is_number",
    "iso",
    "js_add",
    "js_string",
    "js_sub",
    "merge",
    "strict_equal",
    "stringify",
    "to_fixed",
    "utf16_len",
    "utf16_truncate",
]

UNDEFINED: Any = UNSET
"""JavaScript ``undefined``: a key that is missing or present with no value."""

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MAX_TIME = 8.64e15


def is_number(value: object) -> bool:
    """``typeof value === "number"``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_nullish(value: object) -> bool:
    """``value === undefined || value === null`` (what ``??`` tests)."""
    return value is UNSET or value is None


def _number_string(value: float) -> str:
    if isinstance(value, int):
        return str(value) if abs(value) < 10**21 else js_number(float(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return js_number(value)


def js_string(value: object) -> str:
    """JavaScript ``String(value)`` for the values the reference can meet."""
    if value is UNSET:
        return "undefined"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if is_number(value):
        return _number_string(value)  # type: ignore[arg-type]
    if isinstance(value, (list, tuple)):
        return ",".join("" if is_nullish(v) else js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    if callable(value):
        return "function () { [native code] }"
    return str(value)


def _to_number(value: object) -> float | int:
    if is_number(value):
        return value  # type: ignore[return-value]
    if value is True:
        return 1
    if value is False or value is None:
        return 0
    if value is UNSET:
        return math.nan
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return 0
        for parse in (lambda t: int(t, 10), lambda t: int(t, 0), float):
            try:
                return parse(text)
            except ValueError:
                continue
        return math.nan
    if isinstance(value, list):
        return _to_number(js_string(value))
    return math.nan


def _num_add(a: float, b: float) -> float | int:
    if isinstance(a, int) and isinstance(b, int):
        total = a + b
        return total if abs(total) <= 2**53 else float(total)
    return float(a) + float(b)


def js_add(a: object, b: object) -> Any:
    """JavaScript ``a + b``: string concatenation when either side is (or converts to) a string."""
    if is_number(a) and is_number(b):
        return _num_add(a, b)  # type: ignore[arg-type]
    prim_a = js_string(a) if isinstance(a, (list, tuple, dict)) or callable(a) else a
    prim_b = js_string(b) if isinstance(b, (list, tuple, dict)) or callable(b) else b
    if isinstance(prim_a, str) or isinstance(prim_b, str):
        return js_string(prim_a) + js_string(prim_b)
    return _num_add(_to_number(prim_a), _to_number(prim_b))


def js_sub(a: object, b: object) -> float | int:
    """JavaScript ``a - b`` (both sides converted to numbers)."""
    x, y = _to_number(a), _to_number(b)
    if isinstance(x, int) and isinstance(y, int):
        return x - y
    return float(x) - float(y)


def strict_equal(a: object, b: object) -> bool:
    """JavaScript ``a === b`` for primitives (objects compare by identity)."""
    if is_number(a) and is_number(b):
        return bool(a == b)  # NaN != NaN, 1 == 1.0
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is b


def to_fixed(value: float, digits: int) -> str:
    """JavaScript ``Number.prototype.toFixed(digits)`` (section 9.2): exact binary value, ties up."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if abs(value) >= 1e21:
        return _number_string(value)
    exact = Decimal(abs(value))
    quantum = Decimal(1).scaleb(-digits)
    rounded = exact.quantize(quantum, rounding=ROUND_HALF_UP)
    text = format(rounded, "f")
    return ("-" + text) if value < 0 else text


def iso(ms: object) -> str:
    """``new Date(ms).toISOString()`` for a number; ``""`` for anything else (section 9.4).

    Raises:
        ValueError: ``ms`` is NaN, infinite or beyond the JavaScript date range (JavaScript
            throws ``RangeError: Invalid time value``).
    """
    if not is_number(ms):
        return ""
    assert isinstance(ms, (int, float))
    if isinstance(ms, float) and (math.isnan(ms) or math.isinf(ms)):
        raise ValueError("Invalid time value")
    whole = int(ms)  # truncation toward zero
    if abs(whole) > _MAX_TIME:
        raise ValueError("Invalid time value")
    moment = _EPOCH + _dt.timedelta(milliseconds=whole)
    if not 1 <= moment.year <= 9999:  # JavaScript's six-digit years, beyond Python's datetime
        raise ValueError("Invalid time value")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def utf16_len(text: str) -> int:
    """``text.length``: the length in UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_truncate(text: str, limit: int, keep: int) -> str:
    """``text.length > limit ? text.slice(0, keep) + "..." : text`` in UTF-16 code units."""
    if utf16_len(text) <= limit:
        return text
    if text.isascii():
        return text[:keep] + "..."
    units = text.encode("utf-16-le", "surrogatepass")[: keep * 2]
    return units.decode("utf-16-le", "surrogatepass") + "..."


class _Cycle(TypeError):
    pass


def _clean(value: object, stack: list[int]) -> object:
    """Plain data as ``JSON.stringify`` sees it: ``undefined`` dropped, non-finite as ``null``."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        if id(value) in stack:
            raise _Cycle("Converting circular structure to JSON")
        stack.append(id(value))
        out = {str(k): _clean(v, stack) for k, v in value.items()
               if v is not UNSET and not callable(v)}
        stack.pop()
        return out
    if isinstance(value, (list, tuple)):
        if id(value) in stack:
            raise _Cycle("Converting circular structure to JSON")
        stack.append(id(value))
        items = [None if (v is UNSET or callable(v)) else _clean(v, stack) for v in value]
        stack.pop()
        return items
    return value


def stringify(value: object) -> Any:
    """``JSON.stringify(value)``: a ``str``, or ``UNDEFINED`` when JavaScript returns nothing.

    Raises:
        TypeError: the value holds a cycle (JavaScript throws a ``TypeError`` too).
    """
    if value is UNSET or callable(value):
        return UNSET
    cleaned = _clean(value, [])
    return dumps(cleaned).decode("utf-8", "surrogatepass")


def merge(a: object, b: object) -> Any:
    """The reference's payload merge (REFERENCE.md 3.11 ``MERGE``), quirks Q7 and Q8 included."""
    if is_nullish(a):
        return b
    if is_nullish(b):
        return a
    if not isinstance(a, (dict, list)) or not isinstance(b, (dict, list)):
        return b
    out: dict[str, Any] = (
        {str(i): v for i, v in enumerate(a)} if isinstance(a, list) else dict(a)
    )
    items = ((str(i), v) for i, v in enumerate(b)) if isinstance(b, list) else b.items()
    for key, val in items:
        if val is UNSET:
            continue
        out[key] = merge(out.get(key, UNSET), val)
    return out
