"""Reading pi 1.5.2's sessions exactly as pi 1.5.2 reads them.

(a) Every golden case of tests/conformance-pi1 (tests/conformance-pi1/README.md): the context
    from every entry is byte for byte pi 1.5.2's ``JSON.stringify(buildSessionContext())``, the
    leaf and ``getTree()`` are pi's.
(b) Sessions generated with every pi 1.x entry kind (``generate_session(pi1=True)``), compared
    with pi 1.5.2 run by node on the same files, entry by entry.

pi 1.5.2 is installed from npm on first use (``sessiontree.testing.pi``); without node, npm or
the registry the tests of (b) fail with the reason, they never skip.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sessiontree import (
    ContextEdit,
    Session,
    SystemMessage,
    UsageEntry,
    build_context,
    build_projection,
    current_system_message,
)
from sessiontree._json import dumps, loads
from sessiontree.cli import cli
from sessiontree.testing.generate import generate_session
from sessiontree.testing.pi import PI_1_5, PiUnavailable, ensure_pi, run_node_script

from .backends import Backend
from .conftest import TESTS

GOLDEN = TESTS / "conformance-pi1"
PROBE = TESTS / "pi" / "pi1_probe.mjs"
CASES = sorted(p.name[: -len(".jsonl")] for p in GOLDEN.glob("*.jsonl"))


def expected(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{name}.expected.json").read_text("utf-8"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_of(session: Session) -> list[list[Any]]:
    return [[node.id, depth, node.label] for root in session.tree() for node, depth in root.walk()]


def assert_contexts(session: Session, answer: dict[str, Any], digests: bool, where: str,
                    projections: int = 1) -> None:
    """Our context from every entry is pi's, as JSON text (or its SHA-256); so are the
    projection and the replayed system message from every ``projections``-th entry and every
    leaf."""
    assert set(session.ids()) == set(answer["at"]), where
    shown = sha256 if digests else (lambda data: data.decode("utf-8"))
    leaves = set(session.leaves())
    for number, entry_id in enumerate(session.ids()):
        pis = answer["at"][entry_id]
        text = session.build_context(entry_id).to_json_bytes()
        assert shown(text) == pis["context"], f"{where}: context at {entry_id}"
        if number % projections and entry_id not in leaves:
            continue
        projection = session.build_projection(entry_id)
        pairs = [[e.entry_id, e.messages] for e in projection.entries]
        assert shown(dumps(pairs)) == pis["projection"], f"{where}: projection at {entry_id}"
        assert dumps(projection.messages) == dumps(loads(text)["messages"])
        system = session.system_message(entry_id)
        replayed = current_system_message(projection.messages)
        assert shown(dumps(replayed)) == pis["system"], f"{where}: system message at {entry_id}"
        assert (system is None) == (replayed is None)


# -- (a) golden cases ----------------------------------------------------------------------------

def test_there_are_golden_cases() -> None:
    assert len(CASES) >= 9
    assert any(name.startswith("generated-") for name in CASES)


@pytest.mark.parametrize("name", CASES)
def test_case(name: str, tmp_path: Path) -> None:
    exp = expected(name)
    path = tmp_path / f"{name}.jsonl"
    shutil.copyfile(GOLDEN / f"{name}.jsonl", path)
    with Session.open(path, strict=True) as session:
        assert session.leaf_id == exp["leaf"]
        assert tree_of(session) == exp["tree"]
        assert_contexts(session, exp, exp["values"] == "sha256", name,
                        projections=3 if name.startswith("generated-") else 1)
    # a second open of the same file (reading back the envelope index) builds the same
    with Session.open(path, strict=True) as again:
        last = again.ids()[-1]
        text = again.build_context(last).to_json_bytes()
        assert (sha256(text) if exp["values"] == "sha256" else text.decode()) == \
            exp["at"][last]["context"]


def test_every_backend_builds_pis_contexts(backend: Backend) -> None:
    """Memory, JSONL, SQLite and PostgreSQL sessions (paths read from the database) give pi
    1.5.2's contexts on the cases."""
    for name in ("edit-rules", "compaction-checkpoint", "generated-pi1-seed12"):
        exp = expected(name)
        session = backend.load(GOLDEN / f"{name}.jsonl")
        try:
            assert tree_of(session) == exp["tree"]
            assert_contexts(session, exp, exp["values"] == "sha256", f"{backend.kind} {name}",
                            projections=7)
        finally:
            session.close()


@pytest.mark.parametrize("name", [c for c in CASES if not c.startswith("generated-")])
def test_build_context_over_entries_without_a_session(name: str) -> None:
    """The session-free ``build_context(entries, leaf)`` gives pi's context too."""
    exp = expected(name)
    lines = (GOLDEN / f"{name}.jsonl").read_bytes().splitlines()[1:]
    entries = [json.loads(line) for line in lines]
    for entry in entries:
        got = build_context(entries, entry["id"]).to_json()
        pis = exp["at"][entry["id"]]
        assert json.loads(got) == json.loads(pis["context"]), entry["id"]
        projection = build_projection(entries, entry["id"])
        assert dumps([[e.entry_id, e.messages] for e in projection.entries]).decode() == \
            pis["projection"]
        assert dumps(projection.system_message()).decode() == pis["system"]


def test_the_issue_example_redacts_and_omits(tmp_path: Path) -> None:
    """The password edited out of the user message is not in the context; the omitted
    assistant message is not there either; the stored lines still hold both."""
    path = tmp_path / "s.jsonl"
    shutil.copyfile(GOLDEN / "redact-and-omit.jsonl", path)
    with Session.open(path) as session:
        text = session.build_context().to_json()
        assert "hunter2" not in text and "[redacted]" in text
        assert "Logged in" not in text
        assert b"hunter2" in path.read_bytes()
        kinds = {type(entry).__name__ for entry in session.entries()}
        assert {"ContextEdit", "MessageEntry"} <= kinds


def test_cli_context_json_is_pis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.jsonl"
    shutil.copyfile(GOLDEN / "edit-rules.jsonl", path)
    exp = expected("edit-rules")
    with pytest.raises(SystemExit) as done:
        cli(["context", str(path), "--json"])
    assert done.value.code in (0, None)
    assert json.loads(capsys.readouterr().out) == json.loads(exp["at"][exp["leaf"]]["context"])


def test_new_entry_kinds_are_typed_and_their_lines_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    shutil.copyfile(GOLDEN / "compaction-checkpoint.jsonl", path)
    original = path.read_bytes().splitlines()[1:]
    with Session.open(path) as session:
        assert [session.raw_line(i) for i in session.ids()] == original
        entries = list(session.entries())
    systems = [e.message for e in entries if isinstance(getattr(e, "message", None), SystemMessage)]
    assert systems and systems[0].sections == {"preamble": "P"}
    assert systems[0].tools_added and systems[0].tools_added[0].name == "read"
    compactions = [e for e in entries if e.type == "compaction"]
    assert isinstance(compactions[-1].system_message, SystemMessage)  # type: ignore[union-attr]
    assert compactions[-1].usage.total_tokens == 30  # type: ignore[union-attr]
    shutil.copyfile(GOLDEN / "edit-rules.jsonl", path)
    with Session.open(path) as session:
        kinds = [e for e in session.entries() if isinstance(e, (ContextEdit, UsageEntry))]
    assert any(isinstance(e, UsageEntry) and e.kind == "something-new" for e in kinds)
    assert any(isinstance(e, ContextEdit) and e.replacement is None for e in kinds)


def test_an_edit_without_replacement_changes_nothing() -> None:
    """pi 1.5.2 fails on an edit with no ``replacement`` key whose target is in the context;
    we leave such an edit out (the target keeps its content) and go on."""
    entries: list[dict[str, Any]] = [
        {"type": "message", "id": "a", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
         "message": {"role": "user", "content": "keep me", "timestamp": 1}},
        {"type": "context_edit", "id": "b", "parentId": "a",
         "timestamp": "2026-01-01T00:00:01.000Z", "targetId": "a"},
    ]
    assert build_context(entries).to_builtins()["messages"] == [entries[0]["message"]]


def test_an_edit_of_a_later_entry_applies_when_the_context_grows() -> None:
    """Edits apply to every context entry they target, even one appended after the edit (a
    context built one step from its parent's must not miss it)."""
    session = Session.in_memory()
    first = session.append_message({"role": "user", "content": "one", "timestamp": 1})
    session.append_entry({"type": "context_edit", "targetId": "later0001", "replacement": None})
    session.build_context()
    entry = {"type": "message", "id": "later0001", "parentId": session.leaf_id,
             "timestamp": "2026-01-01T00:00:00.000Z",
             "message": {"role": "user", "content": "two", "timestamp": 2}}
    entries = [session.entry(i) for i in session.ids()] + [entry]
    assert [m["content"] for m in build_context(entries).to_builtins()["messages"]] == ["one"]
    assert first


# -- (b) generated sessions against pi 1.5.2 ------------------------------------------------------

@functools.cache
def _pi1() -> Path | str:
    try:
        return ensure_pi(release=PI_1_5)
    except PiUnavailable as error:
        return f"pi 1.5.2 is required by these tests and could not be installed or run: {error}"


def pi1_modules() -> Path:
    installed = _pi1()
    if isinstance(installed, str):
        pytest.fail(installed, pytrace=False)  # a failure, never a skip
    return installed


def pi1_read(files: list[Path], *, full: bool = False) -> list[dict[str, Any]]:
    """pi 1.5.2's answers for these files (``tests/pi/pi1_probe.mjs``)."""
    return run_node_script(PROBE, str(pi1_modules()), "read",  # type: ignore[no-any-return]
                           payload={"files": [str(f) for f in files], "full": full})


SHAPES = [  # (entries, seed, branch_every, compact_every, keep_recent_tokens)
    (120, 1, 15, 40, 800), (250, 2, 30, 80, 2000), (250, 3, 0, 60, 1500),
    (400, 4, 50, 0, 0), (400, 5, 20, 100, 4000), (600, 6, 70, 150, 6000),
    (200, 7, 10, 30, 500), (300, 8, 40, 90, 2500),
]


def test_generated_pi1_sessions_equal_pi_1_5_on_every_entry(tmp_path: Path) -> None:
    files = []
    for entries, seed, branch_every, compact_every, keep in SHAPES:
        path = tmp_path / f"g{seed}.jsonl"
        generate_session(path, entries, seed=seed, branch_every=branch_every,
                         compact_every=compact_every, keep_recent_tokens=keep or 20_000,
                         pi1=True)
        files.append(path)
    answers = pi1_read(files)
    kinds: set[str] = set()
    for path, answer in zip(files, answers):
        assert answer["unchanged"], path
        with Session.open(path, strict=True) as session:
            assert session.leaf_id == answer["leaf"]
            assert tree_of(session) == answer["tree"], path.name
            assert_contexts(session, answer, True, path.name, projections=5)
            kinds |= {entry.type for entry in session.entries()}
    assert {"usage", "context_edit", "compaction", "branch_summary", "label"} <= kinds


def test_sessions_of_pi_0_73_read_the_same_in_pi_1_5(tmp_path: Path) -> None:
    """A session without pi 1.x entries: pi 1.5.2 builds what pi 0.73.1 built, and so do we."""
    files = []
    for seed in (21, 22):
        path = tmp_path / f"old{seed}.jsonl"
        generate_session(path, 300, seed=seed, branch_every=30, compact_every=90,
                         keep_recent_tokens=2000)
        files.append(path)
    for path, answer in zip(files, pi1_read(files)):
        with Session.open(path, strict=True) as session:
            assert tree_of(session) == answer["tree"]
            assert_contexts(session, answer, True, path.name)


def test_contents_are_filled_in_whatever_the_key_order(tmp_path: Path) -> None:
    """Stored bytes are checked for a top-level content without decoding only when that is
    certain; a nested "content" key, another key order or a later null still give pi's []."""
    messages = [
        {"role": "user", "meta": {"content": "nested"}, "timestamp": 1},        # missing
        {"content": None, "role": "user", "timestamp": 2},                       # null, first
        {"role": "toolResult", "toolCallId": "c", "toolName": "t", "isError": False,
         "timestamp": 3},                                                         # missing
        {"role": "assistant", "content": [{"type": "text", "text": '"content":null'}],
         "timestamp": 4},                                                         # kept as is
        {"role": "system", "sections": {"content": "x"}, "timestamp": 5},         # missing
    ]
    lines = [{"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z",
              "cwd": "/"}]
    parent = None
    for number, message in enumerate(messages):
        lines.append({"type": "message", "id": f"m{number}", "parentId": parent,
                      "timestamp": "2026-01-01T00:00:00.000Z", "message": message})
        parent = f"m{number}"
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(dumps(line) + b"\n" for line in lines))
    (pis,) = pi1_read([path], full=True)
    with Session.open(path) as session:
        got = session.build_context().to_builtins()["messages"]
        assert_contexts(session, pis, False, "key orders")
    assert [m.get("content") for m in got] == [[], [], [], messages[3]["content"], ""]
    assert list(got[0]) == ["role", "meta", "timestamp", "content"]  # appended, as pi spreads
    assert list(got[1]) == ["content", "role", "timestamp"]          # kept in place
