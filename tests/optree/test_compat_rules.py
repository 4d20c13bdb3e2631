"""Single JavaScript rules of the compatibility mode (REFERENCE.md section 9) and error paths
the vectors do not reach."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessiontree.optree import CompatTreeBuilder
from sessiontree.optree._jsformat import (
    UNDEFINED,
    iso,
    js_add,
    js_string,
    merge,
    strict_equal,
    stringify,
    to_fixed,
    utf16_truncate,
)


@pytest.mark.parametrize(("value", "digits", "expected"), [
    (1.005, 2, "1.00"), (2.675, 2, "2.67"), (0.145, 2, "0.14"), (0.125, 2, "0.13"),
    (0.03125, 4, "0.0313"), (-0.001, 2, "-0.00"), (-0.0, 2, "0.00"), (0.035, 2, "0.04"),
    (0.0123, 2, "0.01"), (0, 2, "0.00"), (1e21, 2, "1e+21"), (math.nan, 2, "NaN"),
    (0.30000000000000004, 4, "0.3000"), (123.456, 0, "123"),
])
def test_to_fixed(value: float, digits: int, expected: str) -> None:
    assert to_fixed(value, digits) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (1e20, "100000000000000000000"), (1e21, "1e+21"), (1e-7, "1e-7"), (1.5e-7, "1.5e-7"),
    (0.000001, "0.000001"), (123.456, "123.456"), (1.0, "1"), (-0.0, "0"), (math.nan, "NaN"),
    (math.inf, "Infinity"), (-math.inf, "-Infinity"), (True, "true"), (None, "null"),
    (UNDEFINED, "undefined"), ([1, None, "a"], "1,,a"), ({"a": 1}, "[object Object]"),
])
def test_js_string(value: object, expected: str) -> None:
    assert js_string(value) == expected


def test_js_add_and_strict_equality() -> None:
    assert js_add(0, "5") == "05" and js_add(1, 2) == 3 and js_add(0.1, 0.2) == 0.30000000000000004
    assert math.isnan(js_add(1, UNDEFINED)) and js_add(1, None) == 1 and js_add(True, 1) == 2
    assert strict_equal(1, 1.0) and not strict_equal(math.nan, math.nan)
    assert not strict_equal(True, 1) and not strict_equal("1", 1)


def test_iso() -> None:
    assert iso(1700000000000) == "2023-11-14T22:13:20.000Z"
    assert iso(1700000000000.9) == "2023-11-14T22:13:20.000Z"
    assert iso("1700000000000") == "" and iso(None) == ""
    for bad in (math.nan, math.inf, 8.64e15 + 1):
        with pytest.raises(ValueError, match="Invalid time value"):
            iso(bad)


def test_utf16_truncation_and_stringify() -> None:
    cut = utf16_truncate("😀" * 150, 200, 197)
    assert cut.endswith("\ud83d...") and len(cut) == 98 + 1 + 3
    assert utf16_truncate("abc", 200, 197) == "abc"
    assert stringify(UNDEFINED) is UNDEFINED
    assert stringify({"a": UNDEFINED, "b": [UNDEFINED, math.nan], "1": 0}) == '{"1":0,"b":[null,null]}'
    cycle: dict[str, object] = {}
    cycle["self"] = cycle
    with pytest.raises(TypeError):
        stringify(cycle)


def test_merge_rules() -> None:
    assert merge([1, 2, 3], [9]) == {"0": 9, "1": 2, "2": 3}
    assert merge({"a": 1}, {"a": None, "b": None}) == {"a": 1, "b": None}
    assert merge({"a": 1}, "s") == "s" and merge("s", {"a": 1}) == {"a": 1}
    assert merge(UNDEFINED, 5) == 5 and merge(5, None) == 5


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e20, max_value=1e20),
       st.integers(0, 6))
def test_to_fixed_round_trips_within_half_a_unit(value: float, digits: int) -> None:
    text = to_fixed(value, digits)
    assert abs(float(text) - value) <= 0.5 * 10 ** -digits + abs(value) * 1e-15


def test_path_failure_warns_and_still_appends_the_log() -> None:
    warnings: list[str] = []
    b = CompatTreeBuilder(clock=lambda: 1, ids=iter(["s", "t", "o1", "o2"]).__next__,
                          warn=warnings.append)
    b.begin_turn(1)
    first = b.begin_op(1, "session")
    second = b.begin_op(1, "llm")
    b.attach_child_session(first, {})  # a child node without turns
    log: dict[str, object] = {"timestamp": 1, "message": "m"}
    b.append_log(second, log)
    assert warnings == ["session-tree: failed to compute path for op o2: node.turns is not iterable"]
    assert "path" not in log and b.get_session()["turns"][0]["ops"][1]["logs"] == [log]
    with pytest.raises(TypeError):  # the reference's flatten and renderAscii throw too (8.5)
        b.flatten()
    with pytest.raises(TypeError):
        b.render_ascii()


def test_non_string_kind_makes_render_throw() -> None:
    b = CompatTreeBuilder(clock=lambda: 1, ids=iter(["s", "t", "o"]).__next__)
    b.begin_turn(1)
    b.begin_op(1, 42)
    with pytest.raises(TypeError, match="toUpperCase"):
        b.render_ascii()
