"""Forks and new session ids as pi 1.5.2 makes them, checked against pi 1.5.2 itself: the
header of a fork (``parentSession``, the resolved ``cwd``), the entries of a ``/fork``
(``createBranchedSession``) and of ``forkFrom``, and session ids (UUIDv7 with pi-ai's
sequence)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessiontree import InvalidEntry, Session
from sessiontree._json import loads
from sessiontree.cli import cli
from sessiontree.testing.pi import run_node_script

from .test_listing import PROBE, pi15  # noqa: F401 - the fixture
from .test_pi_interop import Pi

CWD = "/home/dev/../dev/proj/"  # pi resolves it: /home/dev/proj


def lines(path: str | Path) -> list[dict[str, Any]]:
    return [loads(line) for line in Path(path).read_bytes().splitlines()]


def write(path: Path, *entries: dict[str, Any]) -> Path:
    header = {"type": "session", "version": 3, "id": "source", "timestamp": "2026-01-02T03:04:05.678Z",
              "cwd": CWD}
    path.write_text("".join(json.dumps(e) + "\n" for e in (header, *entries)), "utf-8")
    return path


def entry(kind: str, entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": entry_id, "parentId": parent,
            "timestamp": f"2026-01-02T03:05:{len(entry_id):02d}.000Z", **fields}


def message(entry_id: str, parent: str | None, role: str, text: str) -> dict[str, Any]:
    body: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}
    if role == "assistant":
        body.update(api="x", provider="p", model="m", stopReason="stop",
                    usage={"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                           "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
    return entry("message", entry_id, parent, message=body)


def labelled_source(folder: Path) -> Path:
    """Labels on the path (one a compaction kept from), and a top entry whose parent is
    missing."""
    return write(
        folder / "source.jsonl",
        message("u1", "gone", "user", "first"),  # its parent is not in the file
        message("a1", "u1", "assistant", "one"),
        entry("label", "l1", "a1", targetId="u1", label="start"),
        entry("label", "l2", "l1", targetId="a1", label="reply"),
        message("u2", "l2", "user", "second"),
        entry("compaction", "c1", "u2", summary="so far", firstKeptEntryId="l1", tokensBefore=9),
        message("a2", "c1", "assistant", "two"),
        entry("label", "l3", "a2", targetId="u1", label="renamed"),
        message("u3", "l3", "user", "third"),
    )


def without_new_ids(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A fork's lines with what is new in each fork (the header's id and time, the new label
    entries' ids and their chaining) left out."""
    out = []
    for row in rows:
        row = dict(row)
        if row["type"] == "session":
            row.pop("id"), row.pop("timestamp")
        elif row["type"] == "label":
            row.pop("id"), row.pop("parentId")
        out.append(row)
    return out


def test_a_fork_is_pi_1_5s_fork(tmp_path: Path, pi15: Pi) -> None:
    source = labelled_source(tmp_path)
    theirs = run_node_script(PROBE, str(pi15.modules), "fork", str(source), "u3")
    with Session.open(source, warn=False) as opened, opened.create_branched_session("u3") as fork:
        assert fork.file is not None
        ours = lines(fork.file)
    assert without_new_ids(ours) == without_new_ids(lines(theirs["file"]))
    assert ours[0]["parentSession"] == str(source) and ours[0]["cwd"] == "/home/dev/proj"
    by_id = {row["id"]: row for row in ours[1:]}
    assert by_id["u1"]["parentId"] is None  # the missing parent: a root, as pi makes it
    assert by_id["u2"]["parentId"] == "a1"  # its parent was a dropped label entry
    assert by_id["c1"]["firstKeptEntryId"] == "u2"  # it kept from a dropped label entry


@pytest.mark.filterwarnings("ignore::sessiontree.LoadWarning")  # the orphan is copied as it is
def test_fork_from_is_pi_1_5s_fork_from(tmp_path: Path, pi15: Pi) -> None:
    source = labelled_source(tmp_path)
    (tmp_path / "theirs").mkdir()
    theirs = run_node_script(PROBE, str(pi15.modules), "forkfrom", str(source), "/w/./x/",
                             str(tmp_path / "theirs"))
    with Session.fork_from(source, cwd="/w/./x/", directory=tmp_path / "ours") as fork:
        assert fork.file is not None
        ours = lines(fork.file)
    assert without_new_ids(ours) == without_new_ids(lines(theirs["file"]))
    assert ours[0]["cwd"] == "/w/x" and ours[0]["parentSession"] == str(source)


def sequence(session_id: str) -> tuple[int, int]:
    """A UUIDv7's millisecond time and the 41-bit sequence pi-ai puts after it."""
    value = uuid.UUID(session_id).int
    return value >> 80, ((value >> 64) & 0xFFF) << 29 | (value >> 33) & ((1 << 29) - 1)


def test_new_session_ids_are_pi_1_5s_uuidv7(tmp_path: Path, pi15: Pi) -> None:
    theirs = run_node_script(PROBE, str(pi15.modules), "new", str(tmp_path / "theirs"), "/w", "50")["ids"]
    ours = []
    for _ in range(50):
        with Session.create(tmp_path / "ours", "/w") as session:
            ours.append(session.id)
    for ids in (theirs, ours):
        assert all(uuid.UUID(i).version == 7 and uuid.UUID(i).variant == uuid.RFC_4122 for i in ids)
        assert ids == sorted(ids) and len(set(ids)) == len(ids)  # ordered within a millisecond too
        stamps, counts = zip(*map(sequence, ids))
        assert list(counts) == list(range(counts[0], counts[0] + len(ids)))  # one step per id
        assert counts[-1] < 1 << 41 and max(stamps) - min(stamps) < 60_000
    assert not os.path.exists(tmp_path / "ours") or not any((tmp_path / "ours").iterdir())


def test_a_chosen_session_id_is_one_pi_1_5_accepts(tmp_path: Path, pi15: Pi) -> None:
    from sessiontree import InvalidLocation

    candidates = ["a", "chat-2", "a.b_c-D9", "abc-", "-abc", "../escape", "a/b", "a b", "x" * 128,
                  "x" * 129, "caf\u00e9", "ends."]
    accepted = run_node_script(PROBE, str(pi15.modules), "ids", *candidates)
    for candidate, pi_accepts in zip(candidates, accepted):
        if len(candidate) > 128:  # (pi has no length limit; ids here are at most 128)
            assert pi_accepts
            pi_accepts = False
        try:
            Session.create(tmp_path, "/w", session_id=candidate).close()
            ours = True
        except InvalidLocation:
            ours = False
        assert ours == pi_accepts, candidate
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, nothing outside


def test_a_fork_without_a_conversation_is_written_at_its_first_message(tmp_path: Path,
                                                                      pi15: Pi) -> None:
    """Issue 16 point 6, gap 2: pi 1.5.2 writes a fork's file only once its path holds a user or
    assistant message; entries appended before wait with it, and the message writes them all."""
    source = write(
        tmp_path / "source.jsonl",
        entry("model_change", "m1", None, provider="p", modelId="x"),
        entry("label", "l1", "m1", targetId="m1", label="start"),
        entry("thinking_level_change", "t1", "l1", thinkingLevel="high"),
        entry("message", "r1", "t1", message={"role": "toolResult", "toolCallId": "c", "toolName": "ls",
                                              "content": [{"type": "text", "text": "x"}], "isError": False,
                                              "timestamp": 1}),
        entry("custom_message", "cm", "r1", customType="note", content="not said", display=True),
        message("u1", "m1", "user", "another branch talks"),
    )
    theirs = run_node_script(PROBE, str(pi15.modules), "forkappend", str(source), "cm")
    with Session.open(source, warn=False) as opened:
        fork = opened.create_branched_session("cm")
        assert fork.file is not None
        written = [os.path.exists(fork.file)]
        fork.append_thinking_level_change("low")
        written.append(os.path.exists(fork.file))
        fork.append_message({"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1})
        written.append(os.path.exists(fork.file))
        fork.close()
        assert written == theirs["written"] == [False, False, True]
        copied = set(opened.ids())

    def comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in row.items() if row.get("id") in copied or
                 k not in ("id", "parentId", "timestamp")} for row in rows]

    ours = lines(fork.file)
    assert comparable(ours) == comparable(theirs["lines"])
    assert [row.get("parentId") for row in ours[2:]] == [row["id"] for row in ours[1:-1]]  # one path
    with Session.open(source, warn=False) as opened:  # closed before a message: no file at all
        untouched = opened.create_branched_session("t1")
        untouched.set_label("t1", "kept in memory only")
        assert untouched.file is not None and len(untouched) == 4
        untouched.close()
        assert not os.path.exists(untouched.file)
    with Session.open(source, warn=False) as opened, opened.create_branched_session("t1") as late:
        assert late.file is not None
        Path(late.file).write_text("someone else's\n")  # a file appeared where the fork goes
        with pytest.raises(InvalidEntry):
            late.append_message({"role": "user", "content": "hi", "timestamp": 1})
        assert Path(late.file).read_text() == "someone else's\n" and len(late) == 3
    with Session.open(source, warn=False) as opened, opened.create_branched_session("u1") as talked:
        assert talked.file is not None and os.path.exists(talked.file)  # a conversation: at once
    before = sorted(tmp_path.iterdir())
    done = CliRunner().invoke(cli, ["fork", str(source), "cm", "--json"])
    assert done.exit_code == 0 and json.loads(done.stdout)["file"] is None
    assert "nothing was written" in done.stderr and sorted(tmp_path.iterdir()) == before
