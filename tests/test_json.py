"""Our writer against JavaScript's own JSON.stringify (run with node) and its own slow path."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import msgspec

from sessiontree._json import (
    _DIGITS_AS_ZERO,
    _TOKEN,
    _dump_py,
    _fix_number,
    _maybe_float_diff,
    _maybe_index_key,
    dumps,
    js_number,
    loads,
)

FLOATS = st.floats(allow_nan=False, allow_infinity=False)
STRINGS = st.text() | st.sampled_from(["\ud800", "a\udfffb", "\ud83d\ude00", "\u2028\u2029\x7f", "\x00\x08\x1f"])
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | FLOATS | STRINGS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(STRINGS, inner, max_size=4),
    max_leaves=20,
)


def node_stringify(values: list[Any]) -> list[str]:
    """JSON.stringify of each value, as node prints it (values sent as exact JSON)."""
    node = shutil.which("node")
    assert node, "node is required for this test (Node 20 is part of the machine setup)"
    script = (
        "const vs = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(vs.map(v => JSON.stringify(v))));"
    )
    payload = json.dumps(values)  # Python's json writes lone surrogates as \\udxxx escapes
    out = subprocess.run([node, "-e", script], input=payload.encode(), capture_output=True, check=True)
    return list(json.loads(out.stdout))


@settings(max_examples=60, deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=30))
def test_dumps_equals_javascript(values: list[Any]) -> None:
    expected = node_stringify(values)
    for value, js in zip(values, expected):
        ours = dumps(value).decode("utf-8", "surrogatepass")
        assert ours == js


@settings(max_examples=200)
@given(VALUES)
def test_fast_and_slow_paths_agree_and_round_trip(value: Any) -> None:
    fast = dumps(value)
    assert fast == _dump_py(value).encode("utf-8", "surrogatepass")
    again = loads(fast)
    assert dumps(again) == fast


HEXISH = st.text("0123456789abcdef.e-:,[]", max_size=12)


@settings(max_examples=300)
@given(st.recursive(FLOATS | st.integers(-(2**53), 2**53) | HEXISH,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(HEXISH, inner, max_size=4),
                    max_leaves=12))
def test_float_check_never_misses_a_number(value: Any) -> None:
    """The quick check that sends a line to the exact number pass hits every line that pass
    changes (numbers among strings of digits, "e", "." and separators)."""
    out = msgspec.json.encode(value)
    if out[:1] in (b"{", b"[") and _TOKEN.sub(_fix_number, out) != out:
        assert _maybe_float_diff(out, out.translate(_DIGITS_AS_ZERO))


KEYISH = st.text('0123456789a"\\:', max_size=12)


@settings(max_examples=300)
@given(st.recursive(st.integers(0, 10**12) | KEYISH,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYISH, inner, max_size=4),
                    max_leaves=12))
def test_index_key_check_never_misses_a_key(value: Any) -> None:
    """The quick check that sends a line to the exact pure-Python pass hits every line in which
    JavaScript would order keys differently (integer-like keys among digits, quotes, backslashes
    and colons in keys and values)."""
    out = msgspec.json.encode(value)
    if _dump_py(value).encode() != out:
        assert _maybe_index_key(out.translate(_DIGITS_AS_ZERO))


def test_number_forms() -> None:
    cases = {0.000009: "0.000009", 1.0: "1", 1e21: "1e+21", 1e-7: "1e-7", 1e16: "10000000000000000",
             -0.0: "0", 123.456: "123.456", 5e-324: "5e-324", 1.5e300: "1.5e+300"}
    for value, text in cases.items():
        assert js_number(value) == text
    assert js_number(math.nan) == "null"
    assert dumps({"id": "3e8d0dcb", "n": 2.0}) == b'{"id":"3e8d0dcb","n":2}'
