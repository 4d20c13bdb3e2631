"""JSON exactly as JavaScript's ``JSON.stringify`` writes it, and a tolerant strict parser.

pi writes every line with ``JSON.stringify``; a line we write must be byte-identical to what pi
would write for the same value (format-spec.md section 2). msgspec already agrees with JavaScript on
strings (``\\b \\t \\n \\f \\r``, other control characters as lowercase ``\\u00xx``, everything else
raw) and on most numbers; it differs on floats that are integral (``1.0``) or that it writes with
an exponent (``9e-6``, ``1e16``). Those are rewritten here. Strings holding lone surrogates, which
msgspec cannot encode, and objects with integer-like keys, which JavaScript lists first, take a
pure-Python path.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import msgspec

__all__ = ["JSONError", "TypeFacts", "dumps", "is_index_key", "js_number", "loads", "string",
           "stringified", "type_facts", "unfit"]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()

JSONError = ValueError
"""Raised by :func:`loads` for text that is not strict JSON."""


class NestedTooDeep(ValueError):
    """Raised by :func:`loads` for JSON nested deeper than Python's recursion allows (about a
    thousand arrays or objects inside each other): valid JSON (pi's ``JSON.parse`` reads it)
    that this library cannot decode. Callers say so, naming the line, instead of calling it
    corrupt."""

# A float that msgspec writes differently from JavaScript has an exponent ("1e20", "1e-7") or
# ends in ".0"; in compact output a number follows ":", "," or "[". The check looks for those
# marks with bytes.find (a regular expression tried at every ":", "," or "[" cost about 10 µs a
# line, most of an append's time) and walks back from each to see whether a number ends there.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NUMBER_BODY = frozenset(b"0123456789.")
_BEFORE_DIGIT = frozenset(b"0123456789.-:,[")  # what comes before a digit in a number
_OPENERS = frozenset(b'{["')  # the first byte of an object, array or string (not a number)
# (the checks search with bytes.find, never "x in bytes": "in" tries its operand as an integer
# first, and the TypeError raised and cleared costs more than the search itself)
# JavaScript objects list integer-like keys ("0", "17") first, in ascending order. Such a key
# is digits between a '"' and '":' (a raw '"' in compact JSON only ever delimits a string);
# the check finds '":' after a digit in the digits-as-zero copy the float check makes anyway
# (a regular expression cost about as much as encoding the line).
_INDEX_KEY = re.compile(r"(?:0|[1-9][0-9]{0,9})\Z")
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*')
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
# Text, compiled (and cached by re) by the first value that takes the pure-Python path:
# compiling the surrogate range costs most of a millisecond, too much for every import.
_NEEDS_ESCAPE = "[\"\\\\\x00-\x1f\ud800-\udfff]"


def is_index_key(key: str) -> bool:
    """Whether JavaScript lists this object key first (an array index: "0" to "4294967294")."""
    return bool(_INDEX_KEY.match(key)) and int(key) < 4294967295


def js_number(x: float) -> str:
    """``Number.prototype.toString`` of a double: shortest round-trip digits, JavaScript layout."""
    if math.isnan(x) or math.isinf(x):
        return "null"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp_text = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    if frac == "0":
        frac = ""
    all_digits = whole + frac
    stripped = all_digits.lstrip("0")
    # value = 0.<digits> * 10**point
    point = len(whole) + int(exp_text or 0) - (len(all_digits) - len(stripped))
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= point <= 21:
        body = digits + "0" * (point - k)
    elif 0 < point <= 21:
        body = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        body = "0." + "0" * -point + digits
    else:
        e = point - 1
        exp = ("+" if e >= 0 else "-") + str(abs(e))
        body = (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + exp
    return sign + body


def _fix_number(match: re.Match[bytes]) -> bytes:
    token = match.group()
    if token[0] == 0x22 or not (b"." in token or b"e" in token):
        return token
    return js_number(float(token)).encode()


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    return _ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def _dump_str(s: str) -> str:
    if any("\ud800" <= c <= "\udfff" for c in s):
        # Join valid surrogate pairs into one code point, as a JavaScript string would read them.
        s = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return '"' + re.sub(_NEEDS_ESCAPE, _escape_char, s) + '"'


def _dump_py(value: Any) -> str:
    """The slow, general path (lone surrogates, huge integers)."""
    if isinstance(value, str):
        return _dump_str(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return js_number(value)
    if isinstance(value, dict):
        items = [(_key(k), v) for k, v in value.items()]
        index_keys = [(int(k), k, v) for k, v in items if is_index_key(k)]
        if index_keys:
            taken = {k for _, k, _ in index_keys}
            items = [(k, v) for _, k, v in sorted(index_keys)] + \
                [(k, v) for k, v in items if k not in taken]
        return "{" + ",".join(_dump_str(k) + ":" + _dump_py(v) for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_dump_py(v) for v in value) + "]"
    if isinstance(value, (msgspec.Struct, msgspec.Raw)):
        if isinstance(value, msgspec.Raw):
            return bytes(value).decode("utf-8", "surrogatepass")
        return _dump_py(msgspec.to_builtins(value))
    raise TypeError(f"cannot serialize {type(value).__name__} as JSON")


def _key(key: Any) -> str:
    """An object key as text (an integer's digits: JavaScript's keys are strings); a float key
    is refused, as :func:`unfit` refuses it."""
    if isinstance(key, str):
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    raise TypeError(f"cannot serialize a dict key of type {type(key).__name__} as JSON "
                    f"(keys are strings or integers)")


_JSON_SCALARS = (str, int, float, bool, type(None), msgspec.UnsetType)


def unfit(value: Any, where: str) -> str | None:
    """Where ``value`` holds what JSON cannot, said as ``data.tags[0] is a set`` (``where``
    names ``value``), or ``None``. msgspec writes a set as an array, bytes as base64 text and a
    datetime or dataclass as text or an object, which read back as other values: those are
    refused with any other object. Keys are strings or integers: msgspec writes a float key
    unlike JavaScript (``1.0``, ``nan``). A :class:`msgspec.Raw`, written as it is, must be JSON
    on one line.
    (A loop, not recursion: JSON nested a thousand deep is still JSON; each value's path is
    kept as a link to its container's and spelled out only for the answer.)"""
    todo: list[tuple[Any, Any]] = [(value, None)]
    while todo:
        item, link = todo.pop()
        if isinstance(item, _JSON_SCALARS):
            continue
        if isinstance(item, (list, tuple)):
            todo.extend((inner, (link, i)) for i, inner in enumerate(item))
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    return (f"{_spelled(where, link)} has a key of type {type(key).__name__} "
                            f"({key!r}), which JSON cannot hold (keys are strings or integers)")
                todo.append((inner, (link, str(key))))
        elif isinstance(item, msgspec.Raw):
            raw = bytes(item)
            try:
                loads(raw)
            except ValueError as error:
                return f"{_spelled(where, link)} is a Raw that is not JSON ({error})"
            if raw.find(b"\n") >= 0:
                return f"{_spelled(where, link)} is a Raw with a line break"
        elif isinstance(item, msgspec.Struct):
            # (the struct's own field tuples: msgspec.structs.fields reads its type hints)
            todo.extend((getattr(item, name), (link, encoded)) for name, encoded in
                        zip(item.__struct_fields__, item.__struct_encode_fields__))
        else:
            return f"{_spelled(where, link)} is a {type(item).__name__}, which JSON cannot hold"
    return None


def _spelled(where: str, link: Any) -> str:
    """A path :func:`unfit` kept as links (``(container's link, key or index)``) as text."""
    steps: list[str] = []
    while link is not None:
        link, step = link
        steps.append(f"[{step}]" if isinstance(step, int) else f".{step}")
    path = where + "".join(reversed(steps))
    return path.lstrip(".") or "the value"


def _maybe_index_key(zeroed: bytes) -> bool:
    """Whether compact JSON (its digits as zeros) may have an integer-like key: a key of
    digits only. It may hit on an escaped quote before digits (then the exact pure-Python
    pass runs for nothing) but never misses a key."""
    at = zeroed.find(b'0":')
    while at >= 0:
        start = at
        while start > 0 and zeroed[start - 1] == 0x30:  # "0": a digit
            start -= 1
        if start > 0 and zeroed[start - 1] == 0x22 and at - start < 10:  # '"' then at most ten digits
            return True
        at = zeroed.find(b'0":', at + 3)
    return False


def _maybe_float_diff(out: bytes, zeroed: bytes) -> bool:
    """Whether compact JSON (and its digits as zeros) may hold a float msgspec wrote unlike
    ``JSON.stringify``: a digit then "e", or ".0" then the end of a value, ending a number. It
    may hit inside a string (then the exact tokenizing pass runs for nothing) but never misses
    a number."""
    at = zeroed.find(b"0e")
    while at >= 0:
        # (an entry id's hex digits often hit: one after a quote or a letter is no number)
        if out[at - 1] in _BEFORE_DIGIT and _ends_number(out, at + 1):
            return True
        at = zeroed.find(b"0e", at + 2)
    at = out.find(b".0")
    while at >= 0:
        if out[at + 2:at + 3] in (b",", b"]", b"}") and _ends_number(out, at):
            return True
        at = out.find(b".0", at + 2)
    return False


def _ends_number(out: bytes, end: int) -> bool:
    """Whether ``out[:end]`` ends with digits (and points) after ":", "," or "[" and an
    optional "-"."""
    at = end
    while at > 0 and out[at - 1] in _NUMBER_BODY:
        at -= 1
    if at == end:
        return False
    if out[at - 1:at] == b"-":
        at -= 1
    return out[at - 1:at] in (b":", b",", b"[")


def dumps(value: Any) -> bytes:
    """Serialize ``value`` (builtins, msgspec Structs, ``msgspec.Raw``) as ``JSON.stringify`` would."""
    try:
        out = _encoder.encode(value)
    except (UnicodeEncodeError, OverflowError):
        return _dump_py(value).encode("utf-8", "surrogatepass")
    return stringified(out, value)


class TypeFacts(NamedTuple):
    """What :func:`type_facts` tells of a type."""

    exact: bool
    """msgspec writes every value that checks as the type (decodes as it) exactly as
    ``JSON.stringify`` does, so that :func:`stringified` has nothing to look for: the type
    holds no float and no object of free keys (a dict, or anything untyped), only strings,
    integers, booleans, nulls, and arrays and structs of them."""
    keyed: bool
    """The type can hold a dict whose keys are typed (strings, say): its JSON cannot tell
    ``{1: x}`` from ``{"1": x}``, so only a check of its builtins refuses a wrong key."""


def type_facts(kind: Any) -> TypeFacts:
    """:class:`TypeFacts` of ``kind``, from one walk of msgspec's type info (asked once per
    class: the caller keeps the answer)."""
    from msgspec import inspect

    exact, keyed = True, False
    seen: set[int] = set()
    todo: list[Any] = [inspect.type_info(kind)]
    while todo:
        info = todo.pop()
        if isinstance(info, (inspect.StrType, inspect.IntType, inspect.BoolType,
                             inspect.NoneType)):
            continue
        if isinstance(info, inspect.LiteralType):
            exact = exact and all(value is None or type(value) in (str, int)
                                  for value in info.values)
        elif isinstance(info, (inspect.ListType, inspect.VarTupleType, inspect.SetType,
                               inspect.FrozenSetType)):
            todo.append(info.item_type)
        elif isinstance(info, inspect.TupleType):
            todo.extend(info.item_types)
        elif isinstance(info, inspect.UnionType):
            todo.extend(info.types)
        elif isinstance(info, inspect.StructType):
            if id(info) in seen:  # (a struct that holds itself: judged where it was met first)
                continue
            seen.add(id(info))
            exact = exact and not is_index_key(str(info.tag_field or "")) and not any(
                is_index_key(field.encode_name) for field in info.fields)
            todo.extend(field.type for field in info.fields)
        elif isinstance(info, inspect.DictType):
            exact = False
            keyed = keyed or not isinstance(info.key_type, inspect.AnyType)
            todo.append(info.value_type)
        else:  # floats, untyped values and the rest
            exact = False
    return TypeFacts(exact, keyed)


def string(text: str) -> bytes:
    """``JSON.stringify`` of a string (msgspec writes strings as JavaScript does, except lone
    surrogates, which take the pure-Python path)."""
    try:
        return _encoder.encode(text)
    except UnicodeEncodeError:
        return _dump_str(text).encode("utf-8", "surrogatepass")


def stringified(out: bytes, value: Any) -> bytes:
    """``JSON.stringify``'s form of ``value`` from ``out``, msgspec's JSON encoding of it (what
    :func:`dumps` does after encoding, for a caller that has the encoding already)."""
    zeroed = out.translate(_DIGITS_AS_ZERO)
    if _maybe_index_key(zeroed):
        return _dump_py(value).encode("utf-8", "surrogatepass")
    if out[0] not in _OPENERS or _maybe_float_diff(out, zeroed):
        out = _TOKEN.sub(_fix_number, out)
    return out


def _reject_constant(name: str) -> Any:
    raise JSONError(f"invalid JSON constant {name}")


def loads(data: bytes | memoryview | str) -> Any:
    """Parse strict JSON; lone surrogate escapes and invalid UTF-8 (as U+FFFD) are accepted as pi does.

    Raises:
        ValueError: the text is not JSON.
        NestedTooDeep: the text is nested too deep to decode.
    """
    try:
        return _decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        first_error = str(exc)
    except RecursionError:
        raise NestedTooDeep("the JSON is nested too deep to decode (arrays or objects about a "
                            "thousand levels inside each other)") from None
    # msgspec rejects lone surrogate escapes, invalid UTF-8 and numbers beyond a double, all of
    # which JSON.parse accepts; the standard library parser takes the rest of those lines.
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    import json  # (only for such lines: it is not needed otherwise)

    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError:
        raise JSONError(first_error) from None
    except RecursionError:
        raise NestedTooDeep("the JSON is nested too deep to decode (arrays or objects about a "
                            "thousand levels inside each other)") from None
