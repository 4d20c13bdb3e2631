"""Compatibility mode against the 17 shared vectors, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest

from ._vectors import Replay, canon, decode, load_vectors

VECTORS = load_vectors()


def test_all_seventeen_vectors_are_present() -> None:
    names = [v["name"] for v in VECTORS]
    assert names == [f"V{i}" for i in range(1, 11)] + [f"X{i}" for i in range(1, 8)]


@pytest.fixture(params=VECTORS, ids=[v["name"] for v in VECTORS])
def replayed(request: pytest.FixtureRequest) -> Replay:
    replay = Replay(request.param)
    replay.run()  # checks every `returns` and `arg_after` as the calls run
    return replay


def test_totals(replayed: Replay) -> None:
    expected = replayed.vector["expected"]
    assert canon(replayed.root.get_session()["totals"]) == canon(decode(expected["totals"]))


def test_paths(replayed: Replay) -> None:
    expected: dict[str, str] = replayed.vector["expected"]["paths"]
    assert list(expected) == replayed.op_ids
    assert {op: replayed.root.get_op_path(op) for op in replayed.op_ids} == expected


def test_ascii_byte_for_byte(replayed: Replay) -> None:
    expected: str = replayed.vector["expected"]["ascii"]
    got = replayed.root.render_ascii()
    assert got == expected
    assert not got.endswith("\n")


def test_flatten_order(replayed: Replay) -> None:
    expected = decode(replayed.vector["expected"]["flatten"])
    got = replayed.root.flatten()
    assert canon(got) == canon(expected)


def test_warnings_verbatim(replayed: Replay) -> None:
    assert replayed.warnings == replayed.vector["expected"]["warnings"]


def test_whole_session_node(replayed: Replay) -> None:
    expected: dict[str, Any] = decode(replayed.vector["expected"]["session"])
    assert canon(replayed.root.get_session()) == canon(expected)
