"""File-system primitives that never lose data: atomic rewrites, backups, sidecars, locks.

A rewrite's temporary file is ``.<name>.sessiontree-tmp-<pid>-<ns>`` beside the target, a name
no other program makes. One left behind by a process that died mid-write (a killed ``fork``)
is removed by the next rewrite in that folder, only when its process no longer exists (a live
process's file is never touched); another program's temporary files (``.x.tmp-<pid>-1``) are
never removed.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Sequence

from .errors import (
    ConcurrentModification,
    InvalidLocation,
    SessionLockedError,
    SessionTreeError,
    WriteFailed,
)

__all__ = [
    "atomic_write", "file_kind", "fsync_dir", "is_regular", "lock", "make_private_dirs",
    "open_regular", "read_settled", "read_unchanged",
    "remove_stale_temps", "rewrite_following", "unlock", "write_new",
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


_BATCH = 16
"""Pieces a ``writev`` is given at most (POSIX guarantees 16)."""


def _write_all(fd: int, data: bytes | Sequence[bytes | memoryview]) -> None:
    """Write all of ``data``, pieces ``_BATCH`` at a time by ``writev`` where there is one: a
    packed envelope index is about thirty pieces, and each write system call that extends a
    file updates its size (a journal transaction on ext4, a wait when another program's fsync
    is committing)."""
    pieces = [memoryview(part).cast("B") for part in ((data,) if isinstance(data, bytes) else data)]
    at = 0
    while at < len(pieces):
        batch = pieces[at:at + _BATCH]
        written = os.writev(fd, batch) if hasattr(os, "writev") else os.write(fd, batch[0])
        for piece in batch:  # past what was written; the rest of a piece written in part
            if written < piece.nbytes:
                pieces[at] = piece[written:]
                break
            written -= piece.nbytes
            at += 1


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device such as /dev/zero"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder"))


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, for messages (``a FIFO``)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of ``path``, which must be (or link to) a regular file: opening
    never waits on a FIFO, and a device (``/dev/zero``) is never read without end.

    Raises:
        InvalidLocation: it is something else (nothing was read).
        OSError: it cannot be opened (``FileNotFoundError`` when it does not exist).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InvalidLocation(f"not a session: it is {file_kind(mode)}, not a regular file; "
                                  "nothing was read from it", path=path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def is_regular(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is (or links to) a regular file."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


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

    Raises:
        WriteFailed: the file system refused (a full disk): no file is left behind.
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
        except OSError as exc:
            raise WriteFailed.of(exc, candidate) from exc
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(os.path.dirname(candidate))
    except OSError as exc:
        os.unlink(candidate)
        raise WriteFailed.of(exc, candidate) from exc
    except BaseException:
        os.unlink(candidate)
        raise
    return candidate


TEMP_MARK = ".sessiontree-tmp-"
"""What the name of every temporary file of a rewrite holds, before ``<pid>-<ns>``."""
_TEMP_NAME = r"^\..+" + re.escape(TEMP_MARK) + r"(\d+)-\d+$"  # compiled on first use


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
        names = [name for name in os.listdir(directory or ".") if TEMP_MARK in name]
    except OSError:
        return removed
    if not names:  # (compiling the pattern took 0.4 ms of every process's first write)
        return removed
    temp_name = re.compile(_TEMP_NAME)
    for name in names:
        match = temp_name.match(name)
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
        WriteFailed: the file system refused (a full disk, a missing folder); ``path`` is as
            it was and no temporary file is left.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = _temp_file(path, data, mode, durable)
    _publish(tmp, path, replace)
    if durable:
        fsync_dir(directory)


def _temp_file(path: str, data: bytes | Sequence[bytes | memoryview], mode: int,
               durable: bool) -> str:
    """A new temporary file beside ``path`` holding ``data`` (fsynced when ``durable``)."""
    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temps(directory)
    tmp = os.path.join(directory, f".{os.path.basename(path)}{TEMP_MARK}{os.getpid()}-"
                                  f"{time.monotonic_ns()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as exc:
        raise WriteFailed.of(exc, path) from exc
    try:
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException as exc:
        _discard(tmp)
        if isinstance(exc, OSError):
            raise WriteFailed.of(exc, path) from exc
        raise
    return tmp


def _publish(tmp: str, path: str, replace: bool) -> None:
    """Rename ``tmp`` over ``path`` (or link it to the free name ``path``); ``tmp`` is gone
    afterwards whatever happens."""
    try:
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException as exc:
        _discard(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, FileExistsError):
            raise WriteFailed.of(exc, path) from exc
        raise


def _discard(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


SETTLE = 2.0
"""Seconds a rewrite waits at most for a line another program is appending to be finished."""
QUIET = 0.1
"""Seconds without growth after which an unfinished last line is taken as torn, not as being
written (pi writes a line with one call)."""


def _whole_lines_after(fd: int, start: int, settle: float, *,
                       linger: bool = False) -> bytes | None:
    """The bytes of ``fd``'s file after ``start``, ending with a newline; ``None`` when the
    last line stays unfinished (no growth for ``QUIET`` seconds, or ``settle`` in all). With
    ``linger``, only once the file has not grown for ``QUIET`` seconds (a writer that opened
    it before it was replaced may still write to it)."""
    deadline = time.monotonic() + settle
    size, quiet_since, data = -1, time.monotonic(), b""
    while True:
        now_size = os.fstat(fd).st_size
        if now_size != size:
            size, quiet_since = now_size, time.monotonic()
            data = _pread_all(fd, start, size - start) if size > start else b""
            if not linger and (not data or data.endswith(b"\n")):
                return data
        now = time.monotonic()
        if now >= deadline or now - quiet_since >= QUIET:
            return data if not data or data.endswith(b"\n") else None
        time.sleep(0.005)


def _pread_all(fd: int, start: int, length: int) -> bytes:
    parts = []
    while length > 0:
        part = os.pread(fd, min(length, 1 << 30), start)
        if not part:
            break
        parts.append(part)
        start += len(part)
        length -= len(part)
    return b"".join(parts)


def read_settled(fd: int, *, settle: float = SETTLE) -> bytes:
    """The whole file of ``fd``, read once its last line is finished (a line another program
    is appending is waited for up to ``settle`` seconds; then it is read as it is)."""
    data = _whole_lines_after(fd, 0, settle)
    return data if data is not None else _pread_all(fd, 0, os.fstat(fd).st_size)


UNCHANGED_TRIES = 3
"""Reads :func:`read_unchanged` makes of a file that keeps changing before it gives up."""


def read_unchanged(fd: int) -> tuple[bytes, os.stat_result] | None:
    """The whole file of ``fd`` as it was at one moment, and its status then: read between two
    ``fstat`` calls that agree (size and modification time) on the size read, so that bytes
    of two versions (a file rewritten in place while read) are never taken for one; read again
    when it changed meanwhile (an agent appended), ``None`` when it changed during each of
    :data:`UNCHANGED_TRIES` reads. (Not the change time: a link made or removed, which leaves
    the bytes as they are, changes it.)"""
    for _ in range(UNCHANGED_TRIES):
        before = os.fstat(fd)
        data = _pread_all(fd, 0, before.st_size)
        after = os.fstat(fd)
        if len(data) == after.st_size == before.st_size and \
                after.st_mtime_ns == before.st_mtime_ns:
            return data, after
        del data  # (not held while the next read is made: one copy of a large file at a time)
    return None


def rewrite_following(path: str, fd: int, seen: int, data: bytes | Sequence[bytes | memoryview],
                      *, settle: float = SETTLE) -> int:
    """Replace ``path`` (open as ``fd``, of which the caller read the first ``seen`` bytes)
    with ``data``, carrying over to the end of the new file the lines a writer that takes no
    lock (pi) appended meanwhile: before the rename, and those that land in the old file
    between the last look and the rename, after it. Returns how many bytes were carried.

    Raises:
        ConcurrentModification: a line being appended stayed unfinished for ``settle``
            seconds before the rename (nothing was changed).
        WriteFailed: the file system refused (a full disk); ``path`` is as it was.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = _temp_file(path, data, FILE_MODE, False)
    carried = seen
    try:
        extra = _whole_lines_after(fd, carried, settle)
        if extra is None:
            raise ConcurrentModification(
                "another program is appending to the file and did not finish its line; "
                "nothing was changed, run the command again", path=path)
        with open(tmp, "ab") as stream:
            stream.write(extra)
            stream.flush()
            os.fsync(stream.fileno())
        carried += len(extra)
    except BaseException as exc:
        _discard(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, SessionTreeError):
            raise WriteFailed.of(exc, path) from exc
        raise
    _publish(tmp, path, True)
    late = _whole_lines_after(fd, carried, settle, linger=True)
    if late is None:  # an unfinished line: carried as it is (it was one in the old file too)
        late = _pread_all(fd, carried, os.fstat(fd).st_size - carried)
    if late:
        out = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            _write_all(out, late)
            os.fsync(out)
        finally:
            os.close(out)
    fsync_dir(directory)
    return carried + len(late) - seen


def lock(fd: int, path: str, timeout: float) -> None:
    """Take the exclusive advisory lock on ``fd``, waiting up to ``timeout`` seconds.

    Raises:
        SessionLockedError: another writer kept the lock past the timeout.
    """
    import fcntl  # a shared library: loaded by the first writer, not with Session

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
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)
