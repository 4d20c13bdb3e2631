"""JSONL session files, where and how pi keeps them (format-spec.md sections 1, 2, 8, 17, 18).

Invariants:
* Opening reads the file once, in chunks, keeping only envelopes and byte offsets.
* An append writes its whole line (and the header first, for a new file) with one ``write()`` on
  an ``O_APPEND`` descriptor, under an exclusive ``flock``; ``durable=True`` adds ``fsync``.
* Before appending: lines another writer added are scanned first; a torn last line is saved to
  ``<file>.torn-<timestamp>`` and truncated away; a complete last line without ``\\n`` gets one.
* A file that shrank or was replaced under the writer is never written to.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .. import _fs, _json
from .._codec import typed_header
from .._columns import Columns
from .._scan import FileRecord, Problem, Record, Scanner, iter_lines, read_at, read_ranges
from .._split_scan import scan_file
from .._time import file_stamp, iso_now
from .._treelog import LoadWarning, StoredEntries, TreeLog, current_branch
from ..entries import AnyEntry, SessionHeader
from ..errors import (
    ConcurrentModification,
    CopyRefused,
    CorruptHeader,
    DuplicateId,
    InvalidEntry,
    InvalidLocation,
    ReadOnlyStore,
    SessionNotFound,
    SessionTreeError,
    UnsupportedVersion,
    WriteFailed,
)
from .base import LoadResult, SessionListing, check_session_id

if TYPE_CHECKING:
    from datetime import date, datetime
    from pathlib import Path

    from .._search import SearchHit

__all__ = [
    "JsonlFile",
    "JsonlStore",
    "default_session_dir",
    "default_sessions_root",
    "delete_session_file",
    "header_for_name",
    "list_sessions",
    "open_file",
    "session_file_name",
]


def default_sessions_root() -> Path:
    """Where sessions go when no folder is given, and where ``sessiontree ls`` looks; each
    working directory has its own folder in it (:func:`default_session_dir`).

    In this order (a leading ``~`` expanded):

    1. ``$SESSIONTREE_DIR``: sessiontree's own setting, the folder itself; it keeps a test or
       an app out of the user's pi sessions without moving pi's.
    2. ``$PI_CODING_AGENT_DIR/sessions``: pi's setting, shared with pi.
    3. ``~/.pi/agent/sessions``: pi's own folder, where pi lists and resumes sessions.
    """
    from pathlib import Path

    own = os.environ.get("SESSIONTREE_DIR")
    if own:
        return Path(own).expanduser()
    agent_dir = os.environ.get("PI_CODING_AGENT_DIR")
    base = Path(agent_dir).expanduser() if agent_dir else Path.home() / ".pi" / "agent"
    return base / "sessions"


def default_session_dir(cwd: str, root: str | os.PathLike[str] | None = None) -> Path:
    """pi's per-working-directory folder: ``<root>/--<cwd with / \\ : as ->--/``; a NUL (which
    no file name may hold, and where pi fails) is a ``-`` too, so a session whose cwd holds one
    can still be written back from a database."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    folder = "--" + re.sub(r"[/\\:\x00]", "-", trimmed) + "--"
    from pathlib import Path

    return Path(root) / folder if root is not None else default_sessions_root() / folder


def session_file_name(header: SessionHeader) -> str:
    """``<timestamp>_<sessionId>.jsonl``, the timestamp's ``:`` and ``.`` replaced by ``-``."""
    return f"{file_stamp(header.timestamp)}_{header.id}.jsonl"


def header_for_name(path: str | os.PathLike[str]) -> SessionHeader | None:
    """The header a session file without one (an empty file) gets at its first append: the
    session id its name carries (``<timestamp>_<id>.jsonl``), so that it keeps matching its
    name; ``None`` for a name that carries none (a random id is drawn then)."""
    name = os.path.basename(os.fspath(path))
    stamp, _, rest = name.partition("_")
    session_id = rest.removesuffix(".jsonl")
    if not stamp or not rest.endswith(".jsonl"):
        return None
    try:
        check_session_id(session_id)
    except InvalidLocation:
        return None
    return SessionHeader(id=session_id, timestamp=iso_now(), cwd=os.getcwd())


class JsonlFile:
    """One session file, read by byte offsets and appended to under a lock.

    The first append takes an exclusive advisory lock on the file and keeps it until
    :meth:`close`: one writing process per session. Another sessiontree writer gets
    :class:`~sessiontree.errors.SessionLockedError` (after waiting up to ``lock_timeout``
    seconds, 0 by default). Programs that take no lock (pi) may still append: each append
    compares the file's size with what was read and reads their lines in first.
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = False,
                 lock_timeout: float = 0.0, read_only: bool = False, index: bool | None = None,
                 processes: int | None = None) -> None:
        """Args:
            path: the file.
            durable: fsync every append.
            lock_timeout: wait this long for another writer's lock.
            read_only: refuse every append.
            index: read and keep the file's envelope index (:mod:`sessiontree._envindex`);
                ``None``: unless ``SESSIONTREE_INDEX=0``, for files of 256 KiB or more.
            processes: scan a large file with helper processes, this many in all
                (:mod:`sessiontree._helpers`; ``None``: ``SESSIONTREE_PROCESSES``, else one).
        """
        self.path = os.fspath(path)
        self.durable = durable
        self.read_only = read_only
        self.lock_timeout = lock_timeout
        self.index = index
        self.processes = processes
        self.indexed_bytes = 0
        """How many bytes of the file the last :meth:`load` took from the envelope index
        instead of scanning them (0: it scanned the whole file)."""
        self._read_fd: int | None = None
        self._write_fd: int | None = None
        self._identity: tuple[int, int] | None = None
        self._scanner: Scanner | None = None
        self._size = 0
        self._locked = False
        self._needs_newline = False
        self._created = False  # the file was made by this log's first append

    @property
    def location(self) -> str:
        return self.path

    def exists(self) -> bool:
        return os.path.exists(self.path)

    # -- reading -------------------------------------------------------------------------------

    def load(self) -> LoadResult:
        """Scan the file, or read its envelope index and scan what was appended since; a file
        that does not exist yet is an empty log (created on append)."""
        try:
            fd = _fs.open_regular(self.path)  # a FIFO or a device is refused, never read
        except FileNotFoundError:
            return LoadResult(None, 0, [], [])
        from .. import _envindex  # (loaded with the first file opened, not with the package)

        stream = os.fdopen(fd, "rb", buffering=0, closefd=False)
        st = os.fstat(fd)
        indexed = _envindex.enabled(self.index, st.st_size)
        restored = _envindex.load(fd, st) if indexed else None
        try:
            self.indexed_bytes = 0 if restored is None else restored[1].end
            if restored is None:
                columns = Columns()
                scanner = Scanner(self.path, columns)
                scan_file(stream, scanner, columns, self.processes)
            else:
                columns, state = restored
                scanner = Scanner(self.path, columns)
                scanner.resume(state)
                if state.end < st.st_size:
                    scanner.scan(stream, state.end)
            scanner.finish()
        except CorruptHeader:
            os.close(fd)
            raise
        if indexed and scanner.header is not None and (restored is None or _envindex.stale(
                restored[1].end, scanner.end)):
            _envindex.save(fd, self.path, st, columns, scanner.state())
        self._adopt(fd, st, scanner)
        scanner.records = []  # the session's index keeps them
        return LoadResult(scanner.header, scanner.header_line, columns, scanner.problems)

    def _adopt(self, fd: int, st: os.stat_result, scanner: Scanner) -> None:
        if self._read_fd is not None and self._read_fd != fd:
            os.close(self._read_fd)
        self._read_fd = fd
        self._identity = (st.st_dev, st.st_ino)
        self._size = scanner.end  # (lines appended since are read before the next append)
        self._scanner = scanner
        self._needs_newline = not scanner.ends_with_newline

    def read(self, record: Record) -> bytes:
        if self._read_fd is None:
            raise ValueError("the session file is closed")
        located = cast(FileRecord, record)  # this log hands out FileRecords only
        return read_at(self._read_fd, located.offset, located.length)

    def read_many(self, records: Sequence[Record]) -> list[bytes]:
        """The stored bytes of many lines, in the order given; lines near each other in the
        file are read with one system call."""
        if self._read_fd is None:
            raise ValueError("the session file is closed")
        located = cast("Sequence[FileRecord]", records)  # this log hands out FileRecords only
        return read_ranges(self._read_fd, [(r.offset, r.length) for r in located])

    def refresh(self) -> LoadResult | None:
        """The whole lines appended since the last scan, by anyone, read without the writer's
        lock; a file that does not end with a newline yet (a line being written) is looked at
        again next time."""
        fd = self._read_fd
        if fd is None:
            if self._identity is not None or not self.exists():
                return None
            result = self.load()  # a new session's file, written by another handle meanwhile
            return result if result.header is not None else None
        st = os.fstat(fd)
        if st.st_size <= self._size or os.pread(fd, 1, st.st_size - 1) != b"\n":
            return None
        return self._scan_appended(st.st_size, stop=st.st_size)

    # -- appending -----------------------------------------------------------------------------

    def begin_append(self) -> LoadResult | None:
        fd = self._write_fd
        if fd is not None and self._locked:
            st = os.fstat(fd)
            if st.st_size == self._size and st.st_nlink:  # nothing new, still linked: go
                return None
            return self._catch_up(st)
        if self.read_only:
            raise ReadOnlyStore("the session was opened read-only; nothing was written",
                                path=self.path)
        if fd is None:
            if not self.exists():
                if self._identity is not None:
                    raise ConcurrentModification("the session file was removed", path=self.path)
                _fs.make_private_dirs(os.path.dirname(os.path.abspath(self.path)))
            fd = self._write_fd = _open_append(self.path)
            self._created = self._identity is None and os.fstat(fd).st_size == 0
        _fs.lock(fd, self.path, self.lock_timeout)
        self._locked = True
        try:
            return self._catch_up(os.fstat(fd))
        except BaseException:
            self.release()
            raise

    def _catch_up(self, st: os.stat_result) -> LoadResult | None:
        """Under the lock: check the file is still ours, read what others appended, fix the tail."""
        assert self._write_fd is not None
        try:
            on_disk = os.stat(self.path)
        except FileNotFoundError:
            raise ConcurrentModification("the session file was removed", path=self.path) from None
        identity = (st.st_dev, st.st_ino)
        if (on_disk.st_dev, on_disk.st_ino) != identity or \
                self._identity not in (None, identity):
            raise ConcurrentModification("the session file was replaced by another file",
                                         path=self.path)
        if self._identity is None:  # a new file: adopt it
            self._read_fd = os.open(self.path, os.O_RDONLY)
            self._identity = (st.st_dev, st.st_ino)
        fresh: LoadResult | None = None
        while True:
            if st.st_size < self._size:
                raise ConcurrentModification(
                    f"the session file shrank from {self._size} to {st.st_size} bytes since it "
                    "was read", path=self.path)
            if st.st_size > self._size:
                fresh = _merged(fresh, self._scan_appended(st.st_size))
            # a torn tail may be another program's line still being written: repair it only
            # once the size has stopped moving
            if self._scanner is None or self._scanner.tail != "torn":
                return fresh
            st = os.fstat(self._write_fd)
            if st.st_size == self._size:
                self._repair_tail()
                return fresh

    def _scan_appended(self, new_size: int, *, stop: int | None = None) -> LoadResult:
        if self._scanner is None:
            self._scanner = Scanner(self.path)
        scanner = self._scanner
        assert self._read_fd is not None
        start = self._size if scanner.tail == "clean" else scanner.tail_offset
        if scanner.tail != "clean":
            scanner.lineno -= 1  # the unterminated line is read again, whole this time
        first_problem = len(scanner.problems)
        # an unterminated last line kept as an entry is scanned again: the index replaces it
        records: list[FileRecord] = []
        scanner.records = records
        scanner.tail = "clean"
        scanner.scan(os.fdopen(self._read_fd, "rb", buffering=0, closefd=False), start,
                     stop=stop)
        scanner.finish()
        self._size = new_size
        self._needs_newline = not scanner.ends_with_newline
        return LoadResult(scanner.header, scanner.header_line, records,
                          scanner.problems[first_problem:])

    def _repair_tail(self) -> None:
        scanner = self._scanner
        if scanner is None or scanner.tail != "torn":
            return
        assert self._write_fd is not None and self._read_fd is not None
        torn = os.pread(self._read_fd, self._size - scanner.tail_offset, scanner.tail_offset)
        sidecar = _fs.write_new(f"{self.path}.torn-{file_stamp(iso_now())}", torn)
        os.ftruncate(self._write_fd, scanner.tail_offset)
        if self.durable:
            os.fsync(self._write_fd)
        self._size = scanner.tail_offset
        scanner.tail = "clean"
        self._needs_newline = False
        scanner.problems[:] = [
            Problem(p.line, p.kind, p.reason, p.entry_id, sidecar) if p.kind == "torn" and
            p.sidecar is None else p for p in scanner.problems
        ]
        scanner.lineno -= 1

    def write(self, lines: Sequence[bytes], header_line: bytes | None,
              envelopes: Sequence[FileRecord | None] | None = None) -> Sequence[FileRecord]:
        """Append the lines with one ``write()``; all of them or, when the file system refuses
        (a full disk), none: the file is cut back to where it was and a file this append
        created is removed, so a retry starts over with the header. ``envelopes``: the
        records of lines the writer composed, without positions (``None``: decode the line).

        Raises:
            WriteFailed: the file system refused the write (nothing was kept).
        """
        assert self._locked and self._write_fd is not None, "write() outside begin_append()"
        scanner = self._scanner
        if scanner is None:
            scanner = self._scanner = Scanner(self.path)
        before = scanner.mark()
        data = b"\n".join((*lines, b"")) if lines else b""  # (each line ended, one copy)
        offset = self._size
        if self._needs_newline or scanner.header is None:  # (rare: the usual append is above)
            parts: list[bytes] = []
            if self._needs_newline:
                parts.append(b"\n")
                offset += 1
            if scanner.header is None and header_line is not None:
                parts.append(header_line + b"\n")
            data = b"".join([*parts, data])
        records = scanner.appended(lines, envelopes, offset, header_line)
        written = 0
        try:
            written = os.write(self._write_fd, data)
            if written != len(data):  # a full disk: the next write() would say why
                first = written
                written += os.write(self._write_fd, data[written:])
                raise OSError(errno.ENOSPC, f"short write ({first} of {len(data)} bytes)")
            if self.durable:
                os.fsync(self._write_fd)
        except OSError as exc:
            scanner.back_to(before)
            # the size just before this write: what the file holds now, less what this write
            # added (pi, taking no lock, may have added lines before it; they stay). Asked
            # only on failure: an append costs one fstat (begin_append's) and one write.
            self._undo_write(os.fstat(self._write_fd).st_size - written)
            raise WriteFailed.of(exc, self.path) from exc
        self._size += len(data)
        self._needs_newline = False
        return records

    def _undo_write(self, start: int) -> None:
        """Cut the file back to the ``start`` bytes it held before a failed write; a file that
        held nothing (this append's new file) is removed, so no empty session file is left."""
        assert self._write_fd is not None
        os.ftruncate(self._write_fd, start)
        if start or not self._created:
            return
        try:
            same = os.stat(self.path).st_ino == os.fstat(self._write_fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.unlink(self.path)
        self.close()
        self._identity = None
        self._scanner = None

    def follow(self, *, poll: float, stop: Callable[[], bool]) -> Iterator[bytes]:
        """Whole lines appended after what was scanned, as they land (no lock is taken)."""
        from ._follow import follow_file

        scanner = self._scanner
        start = self._size if scanner is None or scanner.tail == "clean" else scanner.tail_offset
        return follow_file(self.path, start, poll=poll, stop=stop)

    def end_append(self) -> None:
        """Nothing: the writer's lock is kept until :meth:`close` (or :meth:`release`)."""

    def release(self) -> None:
        """Give up the writer's lock (the next append takes it again)."""
        if self._locked and self._write_fd is not None:
            _fs.unlock(self._write_fd)
        self._locked = False

    def close(self) -> None:
        """Release the lock and the file descriptors."""
        read_fd, write_fd = self._read_fd, self._write_fd
        self._read_fd = self._write_fd = None
        self._locked = False
        for fd in (read_fd, write_fd):
            if fd is not None:
                os.close(fd)  # closing the descriptor drops its lock

    def __del__(self) -> None:
        if self._read_fd is not None or self._write_fd is not None:
            self.close()


def _open_append(path: str) -> int:
    """An appending descriptor of ``path``, created ``0600`` if missing.

    Raises:
        WriteFailed: the file cannot be created (its folder is full, read-only, ...).
        InvalidLocation: ``path`` is not a regular file (a FIFO, a device).
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY,
                     _fs.FILE_MODE)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except OSError as exc:
        raise WriteFailed.of(exc, path) from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InvalidLocation(f"not a session: it is {_fs.file_kind(mode)}, not a regular file; "
                              "nothing was written", path=path)
    os.set_blocking(fd, True)
    return fd


def _merged(first: LoadResult | None, second: LoadResult) -> LoadResult:
    if first is None:
        return second
    return LoadResult(second.header, second.header_line, [*first.records, *second.records],
                      first.problems + second.problems)


# -- listing -----------------------------------------------------------------------------------


def list_sessions(directory: str | os.PathLike[str], *, cwd: str | None = None,
                  index: bool = True, processes: int | None = None,
                  all: bool = False) -> list[SessionListing]:
    """Every ``*.jsonl`` session in ``directory``, newest first, as pi 1.5.2's
    ``SessionManager.list(cwd, directory)`` lists them (without ``cwd``: its
    ``listAll(directory)``); files without a session header, and those pi cannot summarize, are
    skipped. With ``all``, every project folder of a sessions root, as its ``listAll()``.

    Args:
        directory: the folder (not searched recursively, unless ``all``).
        cwd: only the sessions whose header names this working directory (compared as pi
            resolves paths), unless ``directory`` is pi's own folder for it, which pi takes
            whole.
        index: keep the folder's listing index (``.sessiontree-index``) to skip unchanged files
            next time; it is checked against every file's size, mtime and inode, and rebuilt
            silently when stale or unreadable.
        processes: read the files with this many processes when 64 or more need reading
            (helper processes, only when CPUs are free); ``None``: ``SESSIONTREE_PROCESSES``,
            else one (no helper).
        all: ``directory`` is a sessions root (pi's layout, one ``--<cwd>--`` folder per
            project): list the sessions of every sub-folder too.

    Raises:
        SessionNotFound: ``directory`` is not a folder.
    """
    if not os.path.isdir(directory):
        raise SessionNotFound("no such session folder", path=directory)
    from .._listing import resolve_path
    from ._jsonl_listing import list_folder, list_root

    if cwd is not None and resolve_path(os.fspath(directory)) == \
            os.fspath(default_session_dir(resolve_path(cwd))):
        cwd = None  # pi's list(cwd) of the cwd's own folder filters nothing
    listed = list_root if all else list_folder
    return listed(directory, cwd=cwd, index=index, processes=processes)


def __getattr__(name: str) -> Any:
    """The listing functions, from :mod:`._jsonl_listing` when first asked for (a session
    that never lists never loads them)."""
    if name in ("most_recent_session", "read_listing"):
        from . import _jsonl_listing

        return getattr(_jsonl_listing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class JsonlStore(StoredEntries):
    """A folder of session files (one per session, named ``<timestamp>_<id>.jsonl``): a :class:`Store`.

    Session ids are validated before they become file names, so nothing is written outside the
    folder; files are created ``0600`` and the folder ``0700``.
    """

    def __init__(self, directory: str | os.PathLike[str], *, read_only: bool = False,
                 durable: bool = False, lock_timeout: float = 10.0) -> None:
        """Args:
            directory: the folder (created on the first write).
            read_only: refuse every write with :class:`~sessiontree.errors.ReadOnlyStore`.
            durable: fsync every append.
            lock_timeout: each :meth:`append` writes under the session's lock and lets go at
                once; while another process writes the session, wait this long for it.
        """
        from pathlib import Path

        self.directory = Path(directory)
        self.read_only = read_only
        self.durable = durable
        self.lock_timeout = lock_timeout

    @classmethod
    def open(cls, directory: str | os.PathLike[str], *, read_only: bool = False,
             durable: bool = False, lock_timeout: float = 10.0) -> JsonlStore:
        """The store of the folder ``directory``, as every store's ``open`` (see
        :meth:`__init__`)."""
        return cls(directory, read_only=read_only, durable=durable, lock_timeout=lock_timeout)

    @property
    def url(self) -> str:
        return str(self.directory)

    def session_url(self, session_id: str) -> str:
        return str(self._path(session_id))

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStore("the store was opened read-only; nothing was written",
                                path=self.directory)

    def _path(self, session_id: str) -> Path:
        check_session_id(session_id)
        matches = sorted(self.directory.glob(f"*_{glob_escape(session_id)}.jsonl"))
        if not matches:
            raise SessionNotFound(f"no session {session_id} in this folder", path=self.directory)
        return matches[-1]

    def _new_path(self, header: SessionHeader) -> Path:
        check_session_id(header.id)
        name = session_file_name(header)
        if "/" in name or "\\" in name or name.startswith(".") or "\x00" in name:
            raise InvalidLocation(f"the header's timestamp {header.timestamp!r} would make the "
                                  f"file name {name!r} leave the folder; nothing was written",
                                  path=self.directory)
        _fs.make_private_dirs(str(self.directory))
        return self.directory / name

    def create(self, header: SessionHeader) -> str:
        self._writable()
        _fs.write_new(str(self._new_path(header)), _json.dumps(header) + b"\n", exclusive=True)
        return header.id

    def append(self, session_id: str,
               entries: Sequence[AnyEntry | Mapping[str, Any]]) -> None:
        self._writable()  # before the log is opened for writing
        super().append(session_id, entries)

    def list_sessions(self, *, cwd: str | None = None, limit: int | None = None,
                      all: bool = False) -> list[SessionListing]:
        """The sessions newest first (only ``cwd``'s, at most ``limit``), as the database
        stores take them; ``all``: the folder is a sessions root, its project folders listed
        too (see :func:`list_sessions`)."""
        found = list_sessions(self.directory, cwd=cwd, all=all) \
            if self.directory.is_dir() else []
        return found[:limit] if limit is not None else found

    def delete(self, session_id: str) -> None:
        """Remove the session's file.

        Raises:
            InvalidLocation: several files carry this id in their names (pi's listing tells
                them apart by path: delete the file itself with :func:`delete_session_file`).
        """
        self._writable()
        check_session_id(session_id)
        matches = sorted(self.directory.glob(f"*_{glob_escape(session_id)}.jsonl"))
        if len(matches) > 1:
            raise InvalidLocation(
                f"{len(matches)} files carry session id {session_id} in their names "
                f"({', '.join(m.name for m in matches)}); nothing was deleted: delete the file "
                "itself", path=self.directory)
        delete_session_file(self._path(session_id))

    def delete_listed(self, listing: SessionListing) -> None:
        """Remove the file a listing row of this folder came from (its path, not its id: two
        files may carry one id, and a file's name may disagree with its header)."""
        self._writable()
        if os.path.dirname(os.path.abspath(listing.path)) != os.path.abspath(self.directory):
            raise InvalidLocation("the listed file is not in this folder; nothing was deleted",
                                  path=listing.path)
        delete_session_file(listing.path)

    def open_log(self, session_id: str) -> JsonlFile:
        """The file of a stored session (read-only stores hand out read-only logs)."""
        return JsonlFile(self._path(session_id), durable=self.durable, read_only=self.read_only,
                         lock_timeout=self.lock_timeout)

    def new_log(self, header: SessionHeader) -> JsonlFile:
        """The file for a new session, written at its first append."""
        self._writable()
        return JsonlFile(self._new_path(header), durable=self.durable,
                         lock_timeout=self.lock_timeout)

    def session_ids(self) -> list[str]:
        """The ids of the session files in the folder (from their names), sorted."""
        if not self.directory.is_dir():
            return []
        return sorted({f.name[:-len(".jsonl")].split("_", 1)[1]
                       for f in self.directory.glob("*_*.jsonl")})

    def export_lines(self, session_id: str) -> tuple[bytes, Iterator[bytes]]:
        """A session's header line and entry lines, exact bytes, in file order.

        Raises:
            CopyRefused: the file has lines that are not entries of its tree (corrupt, torn,
                duplicate ids, parent cycles) or an old format version: ``repair`` or
                ``migrate`` it first, so that nothing is silently left behind.
        """
        return read_exact_lines(self._path(session_id))

    def import_lines(self, header_line: bytes, lines: Sequence[bytes]) -> str:
        """Write a whole session file at once (atomically, never over an existing file);
        returns its id.

        Raises:
            DuplicateId: a file of that name exists.
        """
        self._writable()
        data = _json.loads(header_line)
        if not isinstance(data, dict):
            raise InvalidEntry("the header line is not a session header")
        header = typed_header(data)
        path = self._new_path(header)
        try:
            _fs.atomic_write(str(path), b"".join(line + b"\n" for line in (header_line, *lines)),
                             replace=False)
        except FileExistsError:
            raise DuplicateId(f"session {header.id} is already in this folder",
                              path=path) from None
        return header.id

    def search(self, query: str, *, cwd: str | None = None, role: str | None = None,
               since: datetime | date | None = None, limit: int = 20) -> list[SearchHit]:
        """Entries of every session of the folder and of its project folders (pi's sessions
        root), on every branch, holding every word and "phrase" of ``query``; best first (see
        :mod:`sessiontree._search`). Uses and refreshes the folder's search index
        (``.sessiontree-cache/search.db``), reading only what changed since the last search;
        what a search does not index (appends beyond half a second of indexing, new files
        when more changed than that indexes: a large folder not indexed yet) it scans as
        ``grep`` would, with the same hits (:meth:`build_search_index` builds it all), in
        parts by helper processes when ``SESSIONTREE_PROCESSES`` (or the command-line tool)
        asks for them and CPUs are free.

        Args:
            query: words and "exact phrases".
            cwd: only the sessions of this working directory.
            role: only ``user``, ``assistant``, ``tool`` (results), ``custom``, ``summary`` or
                ``label`` entries.
            since: only entries from this time on (a naive time is local).
            limit: at most this many hits.

        Raises:
            InvalidQuery: no word in ``query``.
        """
        from .._search import parse_query, since_ms
        from . import _jsonl_search

        parsed = parse_query(query)
        if not self.directory.is_dir():
            return []
        return _jsonl_search.search(self.directory, parsed, role=role, since=since_ms(since),
                                    cwd=cwd, limit=limit, branch=_current_branch)

    def build_search_index(self, stop: Callable[[], bool] | None = None) -> None:
        """Bring the folder's search index up to date with every session file, however long
        that takes: each :meth:`search` indexes only for a moment and scans the rest, so a
        program that searches often (a browser, a server) asks for this once, in the
        background, to make every later search fast.

        Args:
            stop: asked before each second of indexing (each a transaction, which a search
                meanwhile waits for; a second runs on to the end of the 8 MiB piece of a
                file being indexed); ``True`` ends the build, what was indexed kept.
        """
        from . import _jsonl_search

        if self.directory.is_dir():
            _jsonl_search.build(self.directory, stop)

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own file."""

    def __enter__(self) -> JsonlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _current_branch(path: str) -> set[str]:
    """The ids from the root to the leaf of a session file (none if it cannot be read)."""
    try:
        with TreeLog(JsonlFile(path, read_only=True), warn=False) as tree:
            return current_branch(tree)
    except (OSError, SessionTreeError):
        return set()


def open_file(path: str | os.PathLike[str], *, durable: bool = False, lock_timeout: float = 0.0,
              migrate: bool = True, read_only: bool = False, strict: bool = False,
              warn: bool = True, index: bool | None = None,
              processes: int | None = None) -> JsonlFile:
    """The log of an existing session file, of the current format version: an older file is
    migrated in place first (its original kept as ``<file>.v<N>.bak``); arguments as
    :meth:`Session.open <sessiontree.Session.open>`.

    Raises:
        SessionNotFound: no such file.
        UnsupportedVersion: a newer format version, an odd one (``"2"``, ``3.5``: only
            :func:`~sessiontree.migrate.migrate_file` rewrites those; ``"3"`` is read as pi reads
            it, as 3), or an old one with ``migrate=False`` or ``read_only``.
    """
    from ..migrate import check_version, migrate_file, needs_migration

    log = JsonlFile(path, durable=durable, lock_timeout=lock_timeout, read_only=read_only,
                    index=index, processes=processes)
    if not log.exists():
        raise SessionNotFound("no such session file", path=path)
    header = _peek_header(log)
    if header is not None:
        check_version(header, path)  # a newer or an odd version: refused, nothing written
        if needs_migration(header):
            if not migrate or read_only:
                raise _unmigrated(header, path)
            result = migrate_file(os.fspath(path), strict=strict)
            if result.skipped and warn:
                warnings.warn(LoadWarning(
                    f"{os.fspath(path)}: migration skipped {len(result.skipped)} line(s) that do "
                    f"not parse (lines {', '.join(map(str, result.skipped[:5]))}); the original "
                    f"is kept in {result.backup}"), stacklevel=3)
            log = JsonlFile(path, durable=durable, lock_timeout=lock_timeout, index=index,
                            processes=processes)
    return log


def delete_session_file(path: str | os.PathLike[str]) -> None:
    """Remove a session file, after checking that it is one: a regular file whose first line
    that parses is a session header (so that a mistyped name never deletes a document).

    Raises:
        SessionNotFound: no such file.
        InvalidLocation: not a regular file, or not a session (nothing was deleted).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SessionNotFound("no such session file", path=path) from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidLocation("not a regular file, so not a session; nothing was deleted",
                              path=path)
    try:
        header = _peek_header(JsonlFile(path))
    except CorruptHeader:
        header = None
    if header is None:
        raise InvalidLocation("not a session file (no line of it is a session header); nothing "
                              "was deleted", path=path)
    os.unlink(path)


def _peek_header(log: JsonlFile) -> dict[str, Any] | None:
    """The header of a file without scanning the rest (to decide on migration first)."""
    scanner = Scanner(log.path)
    with os.fdopen(_fs.open_regular(log.path), "rb") as stream:
        for line, offset, terminated in iter_lines(stream, chunk_size=1 << 16):
            scanner.feed(line, offset, terminated)
            if scanner.header is not None:
                return scanner.header
    scanner.finish()
    return None


def _unmigrated(header: dict[str, Any], path: str | os.PathLike[str]) -> UnsupportedVersion:
    """The refusal of a file of an old format version where it is not migrated."""
    return UnsupportedVersion(f"format version {header.get('version', 1)} needs migrating: run "
                              f"'sessiontree migrate {os.fspath(path)}'", path=path)


def read_exact_lines(path: str | os.PathLike[str]) -> tuple[bytes, Iterator[bytes]]:
    """The header line and the entry lines of a session file, exact bytes, the file read once
    (:func:`session_bytes`, :func:`exact_lines`).

    Raises:
        SessionNotFound: no such file.
        CopyRefused, CorruptHeader, UnsupportedVersion: see :func:`exact_lines`.
    """
    try:
        data, _ = session_bytes(path)
    except FileNotFoundError:
        raise SessionNotFound("no such session file", path=path) from None
    header, lines = exact_lines(data, path)
    return header, iter(lines)


def session_bytes(path: str | os.PathLike[str]) -> tuple[bytes, os.stat_result]:
    """A session file's bytes as they were at one moment, and its status then
    (:func:`sessiontree._fs.read_unchanged`): what a copy both checks and imports.

    Raises:
        OSError: it cannot be read.
        InvalidLocation: it is no regular file (a FIFO, a device: nothing was read).
        CopyRefused: it changed while it was read, each time.
    """
    fd = _fs.open_regular(path)
    try:
        read = _fs.read_unchanged(fd)
    finally:
        os.close(fd)
    if read is None:
        raise CopyRefused(f"the file changed while it was read ({_fs.UNCHANGED_TRIES} times); "
                          "copy it again once it is not being written", path=path)
    return read


def exact_lines(data: bytes, path: str | os.PathLike[str]) -> tuple[bytes, list[bytes]]:
    """The header line and the entry lines of a session file's bytes ``data`` (split from
    them; ``path`` names the file in errors); refuses a file that would not come back byte for
    byte from them (see :meth:`JsonlStore.export_lines`).

    Raises:
        CorruptHeader: no line is a session header (an empty file included).
        UnsupportedVersion: a newer, odd or old format version.
        CopyRefused: what the session's tree reports (corrupt or torn lines, duplicate ids,
            parent cycles), a byte order mark, CRLF line endings, blank lines, no final
            newline, or a line that is no entry (a second session header, which pi ignores).
    """
    from .._tree import TreeIndex
    from ..migrate import check_version, needs_migration

    columns = Columns()
    scanner = Scanner(os.fspath(path), columns)
    scanner.scan(io.BytesIO(data))
    scanner.finish()
    if scanner.header is None:
        raise CorruptHeader("no line is a session header (the file is empty or blank)",
                            path=path)
    check_version(scanner.header, path)
    if needs_migration(scanner.header):
        raise _unmigrated(scanner.header, path)
    problems = list(scanner.problems)
    TreeIndex(columns, problems)  # (adds the tree's problems: duplicate ids, cycles)
    if problems:
        first = min(problems, key=lambda p: (p.line, p.kind))
        raise CopyRefused(f"{len(problems)} problem(s), first: line {first.line} "
                          f"{first.kind}: {first.reason}; run 'sessiontree repair' first",
                          path=path)
    lines = data.split(b"\n")
    unterminated = lines.pop()  # (what follows the last newline)
    odd = [1] if data.startswith(b"\xef\xbb\xbf") else []
    if b"\r" in data and b"\r\n" in data:  # (a byte is found faster than two)
        odd.append(data.count(b"\n", 0, data.index(b"\r\n")) + 1)
    if b"" in lines:
        odd.append(lines.index(b"") + 1)
    if unterminated:
        odd.append(len(lines) + 1)
    if odd:
        raise CopyRefused(f"line {min(odd)}: the file has a byte order mark, CRLF line "
                          "endings, blank lines or no final newline, which a copy would not "
                          "keep byte for byte; pi reads the same session without them: "
                          "remove them, then copy again", path=path)
    header = lines.pop(0)
    if len(lines) != len(columns):
        entries = set(columns.lines)
        extra = next(number for number in range(2, len(lines) + 2) if number not in entries)
        raise CopyRefused(f"line {extra} is no entry (a second session header, which pi "
                          "ignores), which a copy would not keep; run 'sessiontree repair' "
                          "first", path=path)
    return header, lines


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)
