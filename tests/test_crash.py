"""Crash safety, proven by killing writers (``sessiontree.testing.crash``): a short run here;
``benchmarks/crash.py`` makes hundreds of kills per backend."""

from __future__ import annotations

from pathlib import Path

from sessiontree import Session, UserMessage
from sessiontree.testing import attacks, crash

from .backends import postgres_dsn


def test_killed_writers_lose_nothing_and_invent_nothing(tmp_path: Path) -> None:
    backends = ["jsonl", "sqlite", "postgres"]
    alone = [scenario for scenario in crash.SCENARIOS if scenario != "copies"]
    report = crash.run(backends, 4, rewrite_kills=2, scenarios=alone, seed=7,
                       postgres=postgres_dsn(), work=tmp_path / "alone")
    assert report.failures == []
    for backend in backends:
        assert report.kills[f"{backend}/append"] == 4
        assert report.kills[f"{backend}/copy"] == report.kills[f"{backend}/migrate"] == 2
    assert report.kills["jsonl/repair"] == 2
    # three copies racing into one store, one killed (a round starts three processes)
    racing = crash.run(backends, 0, rewrite_kills=1, scenarios=["copies"], seed=7,
                       postgres=postgres_dsn(), work=tmp_path / "racing")
    assert racing.failures == []
    assert all(racing.kills[f"{backend}/copies"] == 1 for backend in backends)


def test_the_append_check_sees_a_partial_batch_and_an_invented_entry(tmp_path: Path) -> None:
    session = Session.create(tmp_path, cwd="/c")
    session.append_message(UserMessage.of("before"))
    location = str(session.file)
    before = [session.raw_line(i) for i in session.ids()]
    first = session.append_message(UserMessage.of("one of a batch of three"))
    problem = crash._check_append(location, before, f"begin {first} b2 b3\n")
    assert problem is not None and "in part" in problem
    assert crash._check_append(location, before, f"ok {first}\n") is None
    session.append_message(UserMessage.of("nobody acknowledged this"))
    session.append_message(UserMessage.of("nor this"))
    problem = crash._check_append(location, before, f"ok {first}\n")
    assert problem is not None and "nobody appended" in problem


def test_attacks_on_files_hold(tmp_path: Path) -> None:
    """A lockless writer racing rewrites, a full disk, hostile files in a folder: a round each
    (an attack this machine cannot run, without node or the right to mount, is reported)."""
    report = crash.run(["jsonl"], 0, rewrite_kills=1, scenarios=list(attacks.ATTACKS), seed=3,
                       work=tmp_path)
    assert report.failures == []
    ran = {key.split("/")[1] for key in report.kills}
    skipped = {reason.split(":")[0] for reason in report.unavailable}
    assert ran | skipped == set(attacks.ATTACKS) and "hostile" in ran
