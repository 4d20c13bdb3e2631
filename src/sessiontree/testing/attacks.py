"""Attacks on session files besides the kills of :mod:`sessiontree.testing.crash`, each a
bounded round that checks what it did: the robustness suite of a hostile environment.

* ``pi-appends``: a lockless writer appending as pi does (``appendFileSync``, node) while
  ``migrate_file`` and ``repair_file`` rewrite the file: every line it appended is in the new
  file exactly once, or in a backup the rewrite made of what it read (never in neither).
* ``full-disk``: appends, a new session's first append, a migration and a repair on a small
  tmpfs filled for real: each fails with ``WriteFailed`` and leaves the files as they were (no
  empty file, no ``.bak``), and succeeds once space is freed. Needs the right to mount (root).
* ``hostile``: a folder holding a FIFO and a ``/dev/zero`` link named ``*.jsonl``, a FIFO named
  ``.sessiontree-index``, a line nested too deep, odd header versions, another program's
  temporary file and a note: ``ls``, ``prune --dry-run``, ``tree`` and an export there end in
  time with one clear line (no traceback), and nothing that is not a session is touched.

Nothing here is timed; each process it starts is bounded in time and memory.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["ATTACKS", "PiAppender", "Unavailable", "attack", "check_carried"]

ATTACKS = ("pi-appends", "full-disk", "hostile")


_PI_APPENDER = r"""
const fs = require("fs");
const [path, stop, corruptEvery] = [process.argv[1], process.argv[2], Number(process.argv[3])];
const pause = new Int32Array(new SharedArrayBuffer(4));
let i = 0;
while (!fs.existsSync(stop)) {
  const line = corruptEvery > 0 && i % corruptEvery === corruptEvery - 1 ? `{not json ${i}`
    : JSON.stringify({type: "message", id: `pi${i}`, parentId: null,
                      timestamp: "2025-01-01T00:00:00.000Z",
                      message: {role: "user", content: `line ${i}`, timestamp: 1}});
  fs.appendFileSync(path, line + "\n");  // what pi does for every entry: no lock
  i++;
  if (i % 2 === 0) Atomics.wait(pause, 0, 0, 1);
}
process.stdout.write(String(i));
"""


class PiAppender:
    """A node process appending lines to a session file the way pi does (``appendFileSync`` of
    one line, no lock) until stopped: entries ``pi0``, ``pi1``, ... as roots, and every
    ``corrupt_every``-th line one that does not parse (so that ``repair`` has work each time).
    Needs ``node``."""

    def __init__(self, path: str | os.PathLike[str], *, corrupt_every: int = 0) -> None:
        self.path = os.fspath(path)
        self.corrupt_every = corrupt_every
        self._stop = f"{self.path}.stop-appending"
        self._child = subprocess.Popen(
            ["node", "-e", _PI_APPENDER, self.path, self._stop, str(corrupt_every)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_for(self, lines: int, timeout: float = 30.0) -> None:
        """Until the file holds at least ``lines`` more lines than it had at the start."""
        start = Path(self.path).read_bytes().count(b"\n")
        deadline = time.monotonic() + timeout
        while Path(self.path).read_bytes().count(b"\n") - start < lines:
            if time.monotonic() > deadline or self._child.poll() is not None:
                raise RuntimeError("the appender did not append")
            time.sleep(0.01)

    def stop(self) -> int:
        """Stop it; how many lines it appended."""
        Path(self._stop).touch()
        out, err = self._child.communicate(timeout=60)
        os.unlink(self._stop)
        if self._child.returncode != 0:
            raise RuntimeError(f"the appender failed: {err[-1000:]}")
        return int(out)


def check_carried(path: str | os.PathLike[str], count: int, corrupt_every: int) -> str | None:
    """After a :class:`PiAppender` of ``count`` lines raced rewrites of ``path``: every line
    it appended is in the file (at most once) or in a backup (a rewrite that read it keeps its
    original there), never in neither."""
    target = Path(path)
    present: dict[bytes, int] = {}
    for line in target.read_bytes().split(b"\n"):
        present[line] = present.get(line, 0) + 1
    backups = set()
    for backup in target.parent.glob(target.name + ".*.bak*"):
        backups.update(backup.read_bytes().split(b"\n"))
    lost, doubled = [], []
    for i in range(count):
        if corrupt_every and i % corrupt_every == corrupt_every - 1:
            line = b"{not json %d" % i
        else:
            line = (b'{"type":"message","id":"pi%d","parentId":null,"timestamp":"2025-01-01T00:'
                    b'00:00.000Z","message":{"role":"user","content":"line %d","timestamp":1}}'
                    % (i, i))
        if present.get(line, 0) > 1:
            doubled.append(i)
        elif line not in present and line not in backups:
            lost.append(i)
    if lost or doubled:
        return (f"{target}: of {count} lines pi appended, {len(lost)} in neither the file nor a "
                f"backup (first {lost[:5]}), {len(doubled)} doubled (first {doubled[:5]})")
    return None


def attack(name: str, rng: random.Random, work: Path) -> str | None:
    """One round of the attack ``name`` in the scratch folder ``work``; what went wrong, or
    ``None``. A round that cannot run here (no node, no right to mount) raises
    :class:`Unavailable`."""
    work.mkdir(parents=True, exist_ok=True)
    if name == "pi-appends":
        return _pi_appends(rng, work)
    if name == "full-disk":
        return _full_disk(rng, work)
    if name == "hostile":
        return _hostile(rng, work)
    raise ValueError(f"no attack {name!r}")


class Unavailable(RuntimeError):
    """The attack needs what this machine does not give (node, the right to mount)."""


_V1_HEADER = b'{"type":"session","id":"v1-attack","timestamp":"2024-01-01T00:00:00.000Z","cwd":"/c"}\n'
_V1_LINE = (b'{"type":"message","timestamp":"2024-01-01T00:00:00.000Z","message":{"role":"user",'
            b'"content":"old","timestamp":1}}\n')


def _pi_appends(rng: random.Random, work: Path) -> str | None:
    from ..migrate import migrate_file
    from ..repair import repair_file

    if shutil.which("node") is None:
        raise Unavailable("the pi-appends attack needs node")
    path = work / f"raced-{rng.getrandbits(32):08x}.jsonl"
    path.write_bytes(_V1_HEADER + _V1_LINE * rng.randint(500, 3000))
    corrupt_every = rng.choice((0, 20, 50))
    appender = PiAppender(path, corrupt_every=corrupt_every)
    try:
        appender.wait_for(rng.randint(1, 40))
        migrate_file(path)
        for _ in range(rng.randint(1, 3)):
            appender.wait_for(rng.randint(1, 60))
            repair_file(path)
    finally:
        count = appender.stop()
    return check_carried(path, count, corrupt_every)


def _full_disk(rng: random.Random, work: Path) -> str | None:
    from .fulldisk import DiskUnavailable, small_disk

    try:
        with small_disk(work / f"disk-{rng.getrandbits(32):08x}", 1 << 20) as disk:
            return _fill_up(rng, disk)
    except DiskUnavailable as exc:
        raise Unavailable(str(exc)) from None


def _fill_up(rng: random.Random, disk: Path) -> str | None:
    from .. import Session, UserMessage
    from ..errors import WriteFailed
    from ..migrate import migrate_file
    from ..repair import repair_file
    from .fulldisk import fill

    folder = disk / "sessions"
    writer = Session.create(folder, cwd="/attack")
    acked = [writer.append_message(UserMessage.of("first"))]
    assert writer.file is not None
    filler = fill(disk, leave=rng.randint(0, 64 << 10))
    try:
        while True:  # until the disk says no
            acked.append(writer.append_message(UserMessage.of("x" * rng.randint(1, 20_000))))
    except WriteFailed as exc:
        if exc.path != writer.file:
            return f"the full disk's error names {exc.path}, not the session file"
    with Session.open(writer.file, warn=False) as seen:
        if seen.ids() != acked or seen.problems:
            return f"{writer.file}: after a full disk: not exactly the acknowledged entries"
    filler = fill(disk)  # (anew: not a byte left)
    fresh = Session.create(folder, cwd="/attack")
    try:
        fresh.append_message(UserMessage.of("no room"))
        return "a first append on a full disk did not fail"
    except WriteFailed:
        pass
    if fresh.file is not None and os.path.exists(fresh.file):
        return f"{fresh.file}: a failed first append left a file"
    old = disk / "old.jsonl"
    filler.unlink()
    old.write_bytes(_V1_HEADER + _V1_LINE * 500)
    original = old.read_bytes()
    filler = fill(disk, leave=rng.choice((0, len(original) // 2)))
    for rewrite in (migrate_file, repair_file):
        try:
            rewrite(old)
            return f"{rewrite.__name__} on a full disk did not fail"
        except WriteFailed:
            pass
        if old.read_bytes() != original or list(disk.glob("old.jsonl.*")):
            return f"{rewrite.__name__} on a full disk changed the file or left a backup"
    filler.unlink()
    fresh.append_message(UserMessage.of("room again"))
    writer.append_message(UserMessage.of("room again"))
    migrate_file(old)
    for session in (fresh, writer):
        session.close()
        assert session.file is not None
        with Session.open(session.file, warn=False) as again:
            if again.problems or again.id != session.id:
                return f"{session.file}: not a whole session once space was back"
    return None


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _command(*args: str, cwd: Path) -> tuple[int, str]:
    try:
        done = subprocess.run([sys.executable, "-m", "sessiontree", *args], cwd=cwd, text=True,
                              capture_output=True, timeout=60, preexec_fn=_bounded, check=False)
    except subprocess.TimeoutExpired:
        return -1, f"sessiontree {' '.join(args)}: did not end within 60 s"
    return done.returncode, done.stderr


_DEEP = b"[" * 50_000 + b"]" * 50_000


def _hostile(rng: random.Random, work: Path) -> str | None:
    from .. import Session, UserMessage

    folder = work / f"hostile-{rng.getrandbits(32):08x}"
    real = Session.create(folder, cwd="/attack")
    real.append_message(UserMessage.of("the real session"))
    real.close()
    assert real.file is not None
    os.mkfifo(folder / ".sessiontree-index")
    os.mkfifo(folder / "2026-01-01T00-00-00-000Z_fifo.jsonl")
    os.symlink("/dev/zero", folder / "2026-01-01T00-00-00-000Z_zero.jsonl")
    deep = folder / "2026-01-01T00-00-00-000Z_deep.jsonl"
    deep.write_bytes(b'{"type":"session","version":3,"id":"deep","timestamp":"2025-01-01T00:00:00'
                     b'.000Z","cwd":"/attack"}\n{"type":"custom","id":"d1","parentId":null,'
                     b'"timestamp":"2025-01-01T00:00:00.000Z","customType":"x","data":%s}\n'
                     % _DEEP)
    odd = folder / "2026-01-01T00-00-00-000Z_odd.jsonl"
    version = rng.choice((b"3.5", b'"2"', b"0", b"{}", b'"99"'))
    odd.write_bytes(b'{"type":"session","version":%s,"id":"odd","timestamp":"2025-01-01T00:00:00'
                    b'.000Z","cwd":"/attack"}\n' % version)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    theirs = folder / f".notes.txt.tmp-{dead}-1"
    theirs.write_bytes(b"another program's")
    note = folder / "notes.txt"
    note.write_bytes(b"mine")
    keep = {p: p.read_bytes() for p in (deep, odd, theirs, note)}
    code, err = _command("ls", str(folder), cwd=work)
    if code != 0 or "Traceback" in err or "_fifo.jsonl: not listed" not in err:
        return f"ls of a hostile folder: exit {code}: {err[-500:]}"
    code, err = _command("prune", str(folder), "--older-than", "36500", "--dry-run", cwd=work)
    if code != 0 or "Traceback" in err:
        return f"prune of a hostile folder: exit {code}: {err[-500:]}"
    for bad in ("2026-01-01T00-00-00-000Z_fifo.jsonl", "2026-01-01T00-00-00-000Z_zero.jsonl",
                deep.name, odd.name):
        code, err = _command("tree", str(folder / bad), cwd=work)
        if code != 1 or "Traceback" in err or err.count("\n") != 1 or bad not in err:
            return f"tree {bad}: exit {code}: {err[-500:]}"
    code, err = _command("export", real.file, "-o", str(folder / "out.html"), cwd=work)
    if code != 0:
        return f"export into a hostile folder: exit {code}: {err[-500:]}"
    code, err = _command("delete", "--yes", str(note), cwd=work)
    if code != 1:
        return "delete removed a file that is not a session"
    changed = [p.name for p, data in keep.items() if not p.exists() or p.read_bytes() != data]
    backups = [p.name for p in folder.glob("*.bak")]
    if changed or backups:
        return f"a hostile folder: {changed + backups} touched or made by reads and an export"
    return None
