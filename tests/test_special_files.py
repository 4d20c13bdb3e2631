"""Sessions are regular files: a FIFO or a device named like a session (``*.jsonl``, the listing
index) is never opened for reading, so nothing hangs on a FIFO nor reads ``/dev/zero`` until
memory runs out; a listing leaves it out with a note, opening it fails with a clear error.

Each command runs in its own process, bounded in time and memory, so that a regression fails
instead of hanging the suite or eating the machine's memory."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontree import Session, UserMessage


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessiontree", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=60, preexec_fn=_bounded, check=False,
                          env={**os.environ, "SESSIONTREE_DIR": str(cwd / "root")})


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    sessions = tmp_path / "sessions"
    session = Session.create(sessions, cwd=str(tmp_path))
    session.append_message(UserMessage.of("the only real session"))
    session.close()
    os.mkfifo(sessions / ".sessiontree-index")
    os.mkfifo(sessions / "2026-01-01T00-00-00-000Z_fifo.jsonl")
    os.symlink("/dev/zero", sessions / "2026-01-01T00-00-00-000Z_zero.jsonl")
    return sessions


def test_a_listing_leaves_fifos_and_devices_out_with_a_note(folder: Path) -> None:
    for args in (["ls", str(folder)], ["prune", str(folder), "--older-than", "1", "--dry-run"]):
        done = run(*args, cwd=folder.parent)
        assert done.returncode == 0, done.stderr
        assert f"{folder}/2026-01-01T00-00-00-000Z_fifo.jsonl: not listed: it is a FIFO" \
            in done.stderr
        assert "_zero.jsonl: not listed: it is a character device" in done.stderr
    listed = run("ls", str(folder), cwd=folder.parent)
    assert "the only real session" in listed.stdout and "Z_fifo" not in listed.stdout
    assert (folder / ".sessiontree-index").is_fifo()  # not ours to replace


@pytest.mark.parametrize("name", ["2026-01-01T00-00-00-000Z_fifo.jsonl",
                                  "2026-01-01T00-00-00-000Z_zero.jsonl"])
def test_opening_a_fifo_or_a_device_fails_at_once_naming_it(folder: Path, name: str) -> None:
    path = str(folder / name)
    for args in (["tree", path], ["verify", path], ["context", path], ["migrate", path],
                 ["repair", path], ["export", path, "-o", str(folder.parent / "x.html")]):
        done = run(*args, cwd=folder.parent)
        assert done.returncode == 1, (args, done.stderr)
        assert f"{path}: not a session: it is a" in done.stderr and "not a regular file" \
            in done.stderr, args


def test_continue_recent_passes_over_a_fifo(folder: Path) -> None:
    code = ("from sessiontree import Session; import sys; "
            "print(Session.continue_recent(sys.argv[1], directory=sys.argv[2]).file)")
    done = subprocess.run([sys.executable, "-c", code, str(folder.parent), str(folder)],
                          text=True, capture_output=True, timeout=60, preexec_fn=_bounded,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(".jsonl") and "Z_fifo" not in done.stdout
