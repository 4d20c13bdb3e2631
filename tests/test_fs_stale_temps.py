"""A rewrite killed mid-copy leaves ``.<name>.sessiontree-tmp-PID-…`` behind; the next rewrite
in that folder removes it once its process is dead, and never touches a live process's file nor
another program's temporary file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sessiontree import Session, UserMessage
from sessiontree.messages import AssistantMessage

KILLED_WRITER = """
import os, signal, sys
from sessiontree import _fs
real = _fs._write_all
def half_then_die(fd, data):
    real(fd, data[: len(data) // 2])
    os.kill(os.getpid(), signal.SIGKILL)
_fs._write_all = half_then_die
_fs.atomic_write(sys.argv[1], b"x" * 100_000)
"""


def test_a_killed_rewrite_is_cleaned_up_by_the_next_one(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    session = Session.create(folder, cwd="/proj")
    first = session.append_message(UserMessage.of("hello"))
    session.append_message(AssistantMessage.of("hi"))
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(folder / "fork.jsonl")],
                            check=False)
    assert killed.returncode == -signal.SIGKILL
    (stale,) = [p for p in folder.iterdir() if "sessiontree-tmp-" in p.name]
    assert stale.name.startswith(".fork.jsonl.sessiontree-tmp-")
    assert 0 < stale.stat().st_size < 100_000
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = folder / f".other.jsonl.sessiontree-tmp-{sleeper.pid}-1"
        live.write_bytes(b"in progress")
        unrelated = folder / ".notes.tmp-mine"
        unrelated.write_bytes(b"keep")
        fork = session.create_branched_session(first, directory=folder)
        assert fork.file is not None and os.path.exists(fork.file)
        assert not stale.exists()
        assert live.exists() and unrelated.exists()
        assert session.file is not None and os.path.getsize(session.file) > 0
    finally:
        sleeper.kill()
        sleeper.wait()


def test_another_programs_temporary_files_are_never_removed(tmp_path: Path) -> None:
    """An editor's or LaTeX's ``.thesis.tex.tmp-<dead pid>-1`` beside an export survives it."""
    from click.testing import CliRunner

    from sessiontree.cli import cli

    session = Session.create(tmp_path / "s", cwd="/proj")
    session.append_message(UserMessage.of("hello"))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    docs = tmp_path / "docs"
    docs.mkdir()
    theirs = [docs / f".thesis.tex.tmp-{dead.stdout.strip()}-1",
              docs / f".out.html.tmp-{dead.stdout.strip()}-7"]
    for path in theirs:
        path.write_bytes(b"someone else's work")
    assert session.file is not None
    result = CliRunner().invoke(cli, ["export", session.file, "-o", str(docs / "out.html")])
    assert result.exit_code == 0, result.output
    assert (docs / "out.html").exists()
    assert all(path.read_bytes() == b"someone else's work" for path in theirs)
