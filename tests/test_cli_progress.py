"""Progress display: drawn on stderr only when asked (a terminal), a no-op otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontree.cli._progress import LARGE_FILE_BYTES, loading, progress


def test_nothing_is_drawn_when_stdout_is_not_a_terminal(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    with progress("exporting", 10) as advance:
        advance(10)
    assert capsys.readouterr() == ("", "")


def test_loading_only_very_large_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    small = tmp_path / "small.jsonl"
    small.write_text("{}\n")
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as stream:  # sparse: only its size matters here
        stream.truncate(LARGE_FILE_BYTES)
    with loading(str(small), enabled=True), loading(str(big), enabled=True):
        pass
    with loading(str(tmp_path / "missing"), enabled=True):
        pass
    assert capsys.readouterr().out == ""
    assert os.path.getsize(big) == LARGE_FILE_BYTES


def _in_a_terminal(code: str) -> str:
    """Run ``code`` with stdout and stderr on a pseudo-terminal; return what it drew."""
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=follower, stderr=follower,
                            env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait()
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_a_bar_is_drawn_on_a_terminal_and_never_on_stdout_of_a_pipe() -> None:
    code = ("import sys, time\nfrom sessiontree.cli._progress import progress\n"
            "with progress('exporting html', 3) as advance:\n"
            "    for _ in range(3):\n        time.sleep(0.15)\n        advance(1)\n")
    drawn = _in_a_terminal(code)
    assert "exporting html" in drawn and "3/3" in drawn
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert piped.stdout == "" and "exporting html" not in piped.stderr


def test_copies_of_large_sessions_show_an_indicator_in_a_terminal() -> None:
    code = ("import time\nfrom sessiontree.cli._progress import copying\n"
            "with copying({n}):\n    time.sleep(0.4)\n")
    assert "copying 20,000 entries" in _in_a_terminal(code.format(n=20_000))
    assert "copying" not in _in_a_terminal(code.format(n=10))
