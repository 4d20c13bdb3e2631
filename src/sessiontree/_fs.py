"""File-system primitives that never lose data: atomic rewrites, backups, sidecars, locks.

A rewrite's temporary file is ``.<name>.sessiontree-tmp-<pid>-<ns>`` beside the target, a name
no other program makes. One left behind by a process that died mid-write (a killed ``fork``)
is removed by the next rewrite in that folder, only when its process no longer exists (a live
process's file is never touched); another program's temporary files (``.x.tmp-<pid>-1``) are
never removed.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import time
from collections.abc import Sequence

from .errors import SessionLockedError

__all__ = [
    "atomic_write", "fsync_dir", "lock", "make_private_dirs", "remove_stale_temps", "unlock",
    "write_new",
]

FILE_MODE = 0o600
"""Every file sessiontree creates (sessions, sidecars, backups, exports) is private to its user."""
DIR_MODE = 0o700


def fsync_dir(directory: str) -> None:
    """Make a rename or a new file in ``directory`` durable."""
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes | Sequence[bytes | memoryview]) -> None:
    for part in (data,) if isinstance(data, bytes) else data:
        view = memoryview(part)
        while view:
            written = os.write(fd, view)
            view = view[written:]


def make_private_dirs(directory: str) -> None:
    """Create ``directory`` and its missing parents, each ``0700`` (existing ones unchanged)."""
    missing = []
    current = os.path.abspath(directory)
    while not os.path.isdir(current):
        missing.append(current)
        current = os.path.dirname(current)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            pass


def write_new(path: str, data: bytes, *, exclusive: bool = False) -> str:
    """Write ``data`` to a file that must not exist yet; ``path.1``, ``path.2``, ... if it does
    (or, with ``exclusive``, raise :class:`FileExistsError`).

    The file is fsynced before returning. Returns the path actually written.
    """
    candidate, n = path, 0
    while True:
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            break
        except FileExistsError:
            if exclusive:
                raise
            n += 1
            candidate = f"{path}.{n}"
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(os.path.dirname(candidate))
    return candidate


TEMP_MARK = ".sessiontree-tmp-"
"""What the name of every temporary file of a rewrite holds, before ``<pid>-<ns>``."""
_TEMP_NAME = re.compile(r"^\..+" + re.escape(TEMP_MARK) + r"(\d+)-\d+$")


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale_temps(directory: str) -> list[str]:
    """Remove the temporary files of rewrites whose process is gone; returns their paths."""
    removed: list[str] = []
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return removed
    for name in names:
        match = _TEMP_NAME.match(name)
        if match is None or int(match.group(1)) == os.getpid() or _process_exists(int(match.group(1))):
            continue
        path = os.path.join(directory, name)
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def atomic_write(path: str, data: bytes | Sequence[bytes | memoryview], *, mode: int = FILE_MODE,
                 durable: bool = True, replace: bool = True) -> None:
    """Replace (or create) ``path`` with ``data``: temporary file, fsync, rename, fsync folder
    (after removing stale temporary files of dead processes from the folder).

    Args:
        data: the bytes, or pieces written one after the other (nothing joined in memory).
        mode: the new file's permissions (before the umask).
        durable: False skips both fsyncs (for caches: still atomic, not crash-durable).
        replace: False publishes the file only under a free name (a hard link, which fails if
            the name is taken meanwhile), so an existing file is never overwritten.

    Raises:
        FileExistsError: ``replace`` is False and ``path`` exists.
    """
    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temps(directory)
    tmp = os.path.join(directory, f".{os.path.basename(path)}{TEMP_MARK}{os.getpid()}-"
                                  f"{time.monotonic_ns()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(directory)


def lock(fd: int, path: str, timeout: float) -> None:
    """Take the exclusive advisory lock on ``fd``, waiting up to ``timeout`` seconds.

    Raises:
        SessionLockedError: another writer kept the lock past the timeout.
    """
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            waited = f" for {timeout:g} s" if timeout > 0 else ""
            raise SessionLockedError(
                f"another process is writing this session (it holds the writer's lock{waited}); "
                "close it first, or pass lock_timeout to wait", path=path,
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
