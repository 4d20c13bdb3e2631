"""JSONL concurrency with real processes (format-spec.md 18.5): one writing process per session holds
the writer's lock for the life of its session; pi, which takes no lock, may append meanwhile and
its lines are read in before our next append; readers never see a partial line as an entry."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sessiontree import AssistantMessage, Session, SessionLocked, SessionLockedError, UserMessage

from .test_pi_interop import Pi, check_in_pi, pi  # noqa: F401 - the fixture

SRC = str(Path(__file__).resolve().parents[1] / "src")


def python(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh Python process (sys.argv[1:] = args)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True,
                          text=True, timeout=timeout, check=False, env={"PYTHONPATH": SRC})


SECOND_WRITER = """
    import sys, time
    from sessiontree import Session, SessionLockedError, UserMessage
    session = Session.open(sys.argv[1], lock_timeout=float(sys.argv[2]))
    print("ready", flush=True)
    start = time.monotonic()
    try:
        entry = session.append_message(UserMessage.of("from the second process"))
    except SessionLockedError as error:
        print("locked", round(time.monotonic() - start, 2), error)
    else:
        print("appended", round(time.monotonic() - start, 2), entry)
    session.close()
"""


def test_a_second_writing_process_gets_a_typed_error_while_the_first_writes(tmp_path: Path) -> None:
    assert SessionLocked is SessionLockedError  # the earlier name still works
    session = Session.create(tmp_path)
    first = session.append_message(UserMessage.of("q1"))
    path = session.file or ""
    done = python(SECOND_WRITER, path, "0")
    assert done.returncode == 0, done.stderr
    verdict, _, message = done.stdout.strip().splitlines()[-1].split(" ", 2)
    assert verdict == "locked" and path in message and "another process is writing" in message
    # the lock is held between appends, not only during them
    second = session.append_message(AssistantMessage.of("a1"))
    assert python(SECOND_WRITER, path, "0").stdout.splitlines()[-1].startswith("locked")
    session.close()
    with Session.open(path) as reopened:
        assert reopened.ids() == [first, second]


def test_a_second_writer_waits_for_the_lock_when_asked(tmp_path: Path) -> None:
    session = Session.create(tmp_path)
    q1 = session.append_message(UserMessage.of("q1"))
    path = session.file or ""
    waiting = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SECOND_WRITER), path, "60"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={"PYTHONPATH": SRC})
    assert waiting.stdout is not None and waiting.stdout.readline() == "ready\n"
    time.sleep(1.0)
    assert waiting.poll() is None  # still waiting for our lock
    last = session.append_message(AssistantMessage.of("a1"))  # we still write meanwhile
    session.close()
    out, err = waiting.communicate(timeout=120)
    verdict, waited, entry = out.split()
    assert verdict == "appended" and float(waited) >= 0.9, err
    with Session.open(path) as reopened:
        # it read our last entry in before appending, under its own leaf (q1, when it opened)
        assert reopened.ids() == [q1, last, entry] and reopened.entry(entry).parent_id == q1


def test_a_writer_that_waits_too_long_gets_the_typed_error(tmp_path: Path) -> None:
    session = Session.create(tmp_path)
    session.append_message(UserMessage.of("q1"))
    done = python(SECOND_WRITER, session.file or "", "0.3")
    verdict, waited, _ = done.stdout.splitlines()[-1].split(" ", 2)
    assert verdict == "locked" and float(waited) >= 0.3
    session.close()


def test_the_lock_goes_with_the_session_when_it_is_closed_or_dropped(tmp_path: Path) -> None:
    session = Session.create(tmp_path)
    session.append_message(UserMessage.of("q1"))
    path = session.file or ""
    del session  # never closed: dropping it releases the lock too
    assert python(SECOND_WRITER, path, "0").stdout.splitlines()[-1].startswith("appended")


def test_pi_appending_without_a_lock_is_read_in_before_our_next_append(tmp_path: Path,
                                                                       pi: Pi) -> None:
    session = Session.create(tmp_path)
    q1 = session.append_message(UserMessage.of("q1"))
    a1 = session.append_message(AssistantMessage.of("a1"))  # pi writes only after an assistant
    path = Path(session.file or "")
    # pi's SessionManager appends to the file we hold open for writing (pi takes no lock)
    (written,) = pi.write([{"file": str(path), "ops": [
        ["user", "pi asks"], ["assistant", "pi answers", "openai", "gpt-5"], ["name", "by pi"]]}])
    ours = session.append_message(UserMessage.of("we continue"))
    assert set(written["ids"]) <= set(session.ids())  # pi's entries were read in first
    assert ours not in written["ids"]
    assert session.entry(ours).parent_id == a1  # our leaf did not move
    assert session.name == "by pi"
    assert session.path_ids() == [q1, a1, ours]
    context = session.build_context(written["ids"][1])  # pi's branch, built here
    assert [m.role for m in context.messages] == ["user", "assistant", "user", "assistant"]
    session.close()
    check_in_pi(pi, [path])  # pi reads the merged file as we do


def test_pi_appending_while_we_keep_appending_loses_nothing(tmp_path: Path, pi: Pi) -> None:
    session = Session.create(tmp_path)
    session.append_message(UserMessage.of("q"))
    session.append_message(AssistantMessage.of("a"))
    path = Path(session.file or "")
    ours, theirs = [], []
    for round_ in range(5):
        (written,) = pi.write([{"file": str(path), "ops": [["user", f"pi {round_}"]]}])
        theirs += written["ids"]
        ours.append(session.append_message(UserMessage.of(f"ours {round_}")))
    session.close()
    with Session.open(path, strict=True) as reopened:
        assert set(ours + theirs) <= set(reopened.ids())
        assert len(reopened) == 2 + len(ours) + len(theirs)
    check_in_pi(pi, [path])


READER = """
    import json, sys, time
    from sessiontree import Session
    path, size = sys.argv[1], int(sys.argv[2])
    seen = torn = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with Session.open(path, warn=False) as session:
            for problem in session.problems:
                assert problem.kind == "torn", problem  # a line being written, never corrupt
                torn += 1
            for entry in session.entries():
                text = entry.message.content[0].text
                assert len(text) == size and text == text[0] * size, "a partial entry"
            seen = max(seen, len(session))
            if seen >= 200:
                break
    print(json.dumps({"seen": seen, "torn": torn}))
"""

WRITER = """
    import sys
    from sessiontree import Session, UserMessage
    session = Session.open(sys.argv[1])
    size = int(sys.argv[2])
    for i in range(199):
        session.append_message(UserMessage.of(chr(ord("a") + i % 26) * size))
    session.close()
"""


def test_readers_never_see_a_partial_line_as_an_entry(tmp_path: Path) -> None:
    size = 300_000  # lines far larger than a pipe buffer or a page: written in one write()
    session = Session.create(tmp_path)
    session.append_message(UserMessage.of("z" * size))
    path = session.file or ""
    session.close()
    reader = subprocess.Popen([sys.executable, "-c", textwrap.dedent(READER), path, str(size)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": SRC})
    writer = python(WRITER, path, str(size), timeout=120)
    assert writer.returncode == 0, writer.stderr
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    assert json.loads(out)["seen"] >= 1
    with Session.open(path, strict=True) as final:
        assert len(final) == 200


def test_repair_and_migrate_wait_for_the_writer_and_never_replace_its_file(tmp_path: Path) -> None:
    from sessiontree import migrate_file, repair_file

    session = Session.create(tmp_path)
    session.append_message(UserMessage.of("q1"))
    path = Path(session.file or "")
    with open(path, "ab") as stream:  # a line for repair to drop
        stream.write(b"{not json\n")
    session.append_message(AssistantMessage.of("a1"))  # the writer keeps its lock
    before = path.read_bytes()
    for rewrite in (repair_file, migrate_file):
        start = time.monotonic()
        with pytest.raises(SessionLockedError, match="another process is writing"):
            rewrite(path, lock_timeout=0.2)
        assert time.monotonic() - start >= 0.2 and path.read_bytes() == before
    session.close()
    result = repair_file(path, lock_timeout=0)  # the writer is gone: the repair goes ahead
    assert result.removed_lines == [3] and b"{not json" not in path.read_bytes()


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_repair_and_migrate_carry_over_what_pi_appends_meanwhile(tmp_path: Path) -> None:
    """pi takes no lock: its lines appended while a rewrite reads and replaces the file end up
    in the new file (exactly once), never in neither the new file nor the backup."""
    from sessiontree import migrate_file, repair_file
    from sessiontree.testing.attacks import PiAppender, check_carried
    from sessiontree.testing.generate import generate_session

    path = tmp_path / "s.jsonl"
    generate_session(path, 500, seed=5)
    appender = PiAppender(path, corrupt_every=50)
    try:
        appender.wait_for(60)
        removed = 0
        for _ in range(5):
            result = repair_file(path)
            removed += len(result.removed_lines)
            appender.wait_for(60)
    finally:
        count = appender.stop()
    assert removed >= 5  # each repair had lines to drop, and carried what came meanwhile
    assert check_carried(path, count, 50) is None
    with Session.open(path, warn=False) as repaired:
        assert {f"pi{i}" for i in range(count) if i % 50 != 49} <= set(repaired.ids())

    old = tmp_path / "v1.jsonl"
    old.write_bytes(b'{"type":"session","id":"v1","timestamp":"2024-01-01T00:00:00.000Z",'
                    b'"cwd":"/c"}\n' + b'{"type":"message","timestamp":"2024-01-01T00:00:00.000Z",'
                    b'"message":{"role":"user","content":"old","timestamp":1}}\n' * 5_000)
    appender = PiAppender(old)
    try:
        appender.wait_for(20)
        assert migrate_file(old).backup is not None
        appender.wait_for(20)
    finally:
        count = appender.stop()
    assert check_carried(old, count, 0) is None
