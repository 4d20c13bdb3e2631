"""A pseudo-terminal driver for ``sessiontree chat``: start it, type, wait for text."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\x1b\][^\x07]*\x07|\r")
REPO = Path(__file__).resolve().parents[1]


class Terminal:
    """A child process on a pseudo-terminal of ``columns`` × ``rows``."""

    def __init__(self, args: list[str], env: dict[str, str], *, columns: int = 110,
                 rows: int = 30) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self.leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        full_env = {**os.environ, **env, "TERM": "xterm-256color", "COLUMNS": str(columns),
                    "LINES": str(rows), "PYTHONPATH": str(REPO)}
        def controlling_terminal() -> None:  # so that Ctrl+C is a SIGINT, as in a real terminal
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen([sys.executable, "-m", "sessiontree", *args], stdin=follower,
                                     stdout=follower, stderr=follower, env=full_env, cwd=REPO,
                                     preexec_fn=controlling_terminal)
        os.close(follower)
        self.raw = b""
        self.seen = 0

    def _read(self, wait: float) -> None:
        ready, _, _ = select.select([self.leader], [], [], wait)
        if ready:
            try:
                data = os.read(self.leader, 65536)
            except OSError:
                data = b""
            if data:
                self.raw += data
                if b"\x1b[6n" in data:  # answer prompt_toolkit's cursor position query
                    os.write(self.leader, b"\x1b[1;1R")

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def expect(self, pattern: str, timeout: float = 30.0) -> str:
        """Wait until ``pattern`` (a regex) appears after the last match; returns the text."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.text[self.seen:])
            if match:
                self.seen += match.end()
                return self.text
            if self.proc.poll() is not None:
                self._read(0.1)
                if not re.search(pattern, self.text[self.seen:]):
                    break
            self._read(0.05)
        dump = os.environ.get("CHATTERM_DUMP")
        if dump:
            Path(dump).write_text(self.text)
        raise AssertionError(f"{pattern!r} never appeared; the terminal shows:\n{self.text[-3000:]}")

    def pause(self, seconds: float) -> None:
        """Wait while reading what the program draws (so it never blocks on a full terminal)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._read(0.02)

    def send(self, data: str | bytes) -> None:
        os.write(self.leader, data.encode() if isinstance(data, str) else data)

    def type(self, text: str) -> None:
        """Type ``text`` and press Enter."""
        self.send(text)
        self.pause(0.05)
        self.send("\r")

    def close(self) -> int:
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self.leader)
        return self.proc.returncode
