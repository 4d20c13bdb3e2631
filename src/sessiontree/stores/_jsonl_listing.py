"""Listing a folder of JSONL sessions as pi's ``SessionManager.list`` does, fast, with a cache.

Invariants (format-spec.md section 13, "Listing"):
* A row is what pi's ``buildSessionInfo`` computes from the file, by the rules of
  :mod:`sessiontree._listing` (the same code counts ``Session.listing()`` and the database
  stores' rows). Lines that do not parse are skipped as pi skips them; a file whose first
  parsed line is not a session header is not listed; one whose header ``id`` is not a string
  is (as pi 1.5.2 lists it), although it opens neither in pi nor here.
* Each file is read once and each line decoded by msgspec on its own (a line that does not
  decode as a listing line sends the file to the careful reading, which skips what pi skips). Message contents stay raw JSON, except the user messages read
  until the first one with text.
* Folders with many files to read are listed by several processes when the caller allows
  (:mod:`sessiontree._helpers`), each reading a share of the files; the rows are the same.
* The index (``.sessiontree-index`` in the folder, 0600, replaced atomically) is a cache, never
  a source: a row is reused only while its file has the same size, mtime and inode; an index
  that is missing, stale, of another version or corrupt is rebuilt silently, and a folder that
  cannot be written is listed without one.
"""

from __future__ import annotations

import os
import re
import stat
import warnings

from typing import Any

import msgspec
from msgspec import UNSET

from .. import _fs, _helpers, _json
from .._listing import (ListingLine, ListingStats, ListingWarning, cwd_matches, line_decoder,
                        listing_line, node_mtime_ms, pi_order, resolve_path, row_of_lines)
from ..errors import InvalidLocation
from .base import SessionListing

__all__ = ["INDEX_NAME", "checked_listing", "list_folder", "list_root", "listing_of",
           "most_recent_session", "project_folders", "read_listing", "session_files",
           "session_stamps"]

INDEX_NAME = ".sessiontree-index"
_INDEX_VERSION = 4
"""4: rows of headers whose id is not a string (pi 1.5.2 lists them); 3: rows with usage
totals; 2: pi 1.5.2's rules (rows of version 1 were counted by pi
0.73.1's)."""
PARALLEL_FILES = 64
"""Listing this many files or more (their rows not in the index) uses helper processes."""


_BLANK_TAIL = b" \t\r\n"
_LINE_END = re.compile(rb"\r\n?|\n")
"""Where node's ``readline`` ends a line (pi 1.5.2 reads files with it): LF, CRLF, a lone CR."""


def read_listing(path: str | os.PathLike[str], st: os.stat_result | None = None, *,
                 as_pi: bool = True) -> SessionListing | None:
    """Summarize one session file as pi's ``buildSessionInfo`` does; ``None`` when it has no
    session header or cannot be read, and (``as_pi``) when pi's listing drops it."""
    try:
        return checked_listing(path, st, as_pi=as_pi)
    except (OSError, InvalidLocation):
        return None


def checked_listing(path: str | os.PathLike[str], st: os.stat_result | None = None, *,
                    as_pi: bool = True) -> SessionListing | None:
    """:func:`read_listing`, but a file that cannot be read raises why.

    Raises:
        OSError: the file cannot be read.
        InvalidLocation: it is no regular file (a FIFO, a device).
    """
    location = os.path.abspath(path)
    fd = _fs.open_regular(location)  # a FIFO or /dev/zero is never read
    try:
        if st is None:
            st = os.fstat(fd)
        data = _read_all(fd, st.st_size)
    finally:
        os.close(fd)
    return listing_of(data, location, st, as_pi=as_pi)


def listing_of(data: bytes, location: str, st: os.stat_result, *,
               as_pi: bool = True) -> SessionListing | None:
    """:func:`read_listing` of a file's bytes already read (``location``, its absolute path,
    and ``st``, its status, are the row's), so that a copy checks and imports the same
    bytes."""
    raw = _LINE_END.split(data) if b"\r" in data else data.split(b"\n")
    lines = _clean_lines(raw)
    if lines is None:  # odd lines: each on its own, skipped where pi skips them
        lines = [line for line in map(listing_line, raw) if line is not None]
    if not lines or lines[0].type != "session":
        return None
    stats = ListingStats()
    stats.add(lines[1:])
    if as_pi and stats.unlistable:
        return None
    return row_of_lines(lines[0], lines[1:], location, node_mtime_ms(st), stats,
                        header_id=UNSET if isinstance(lines[0].id, str) else _header_id(raw))


def _header_id(raw: list[bytes]) -> Any:
    """The ``id`` of a header whose id is not a string (a listing line keeps string ids only),
    as pi 1.5.2 lists it: the value as it is, ``None`` when there is none. Such a file opens
    neither in pi nor here, but pi lists it."""
    for line in raw:
        if listing_line(line) is not None:  # the first line pi does not skip: the header
            return _json.loads(line).get("id")
    return None


def _read_all(fd: int, size: int) -> bytes:
    """The whole file (it may have grown since ``size`` was seen)."""
    parts = [os.read(fd, size + 1)]
    while len(parts[-1]) > 0 and sum(map(len, parts)) > size:
        more = os.read(fd, 1 << 20)
        if not more:
            break
        parts.append(more)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _clean_lines(lines: list[bytes]) -> list[ListingLine] | None:
    """Every line decoded on its own, or ``None`` when one is blank or does not parse as a
    listing line (then the careful reading skips what pi skips)."""
    lines = lines[:]
    while lines and not lines[-1].strip(_BLANK_TAIL):
        lines.pop()
    try:
        return list(map(line_decoder.decode, lines))
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None


# -- the folder and its index ------------------------------------------------------------------


class _Cached(msgspec.Struct, array_like=True):
    size: int
    mtime_ns: int
    inode: int
    row: SessionListing | None


class _Index(msgspec.Struct):
    version: int
    files: dict[str, _Cached]


_index_decoder = msgspec.msgpack.Decoder(_Index)
_rows_decoder = msgspec.msgpack.Decoder(dict[str, _Cached])
_index_encoder = msgspec.msgpack.Encoder()


def _load_index(folder: str) -> dict[str, _Cached]:
    try:
        with os.fdopen(_fs.open_regular(os.path.join(folder, INDEX_NAME)), "rb") as stream:
            index = _index_decoder.decode(stream.read())
    except (OSError, InvalidLocation, msgspec.DecodeError, msgspec.ValidationError):
        return {}  # none yet, or corrupt: rebuilt below
    return index.files if index.version == _INDEX_VERSION else {}


def list_folder(folder: str | os.PathLike[str], *, cwd: str | None = None,
                index: bool = True, processes: int | None = None) -> list[SessionListing]:
    """Every ``*.jsonl`` session in ``folder``, newest first (files without a header skipped).

    Args:
        folder: the folder (not searched recursively).
        cwd: only the sessions whose header names this working directory (both resolved as pi
            resolves paths; a session without a cwd never matches).
        index: reuse and refresh the folder's index (rows of unchanged files are not read again).
        processes: how many processes may read files (see :func:`_helpers.processes`).
    """
    location = os.path.abspath(folder)
    cached = _load_index(location) if index else {}
    fresh: dict[str, _Cached] = {}
    with os.scandir(location) as entries:
        names = [e.name for e in entries if e.name.endswith(".jsonl")]
    changed = False
    to_read: list[str] = []
    for name in names:
        try:
            st = os.stat(os.path.join(location, name))
        except OSError:
            changed = True
            continue
        if not stat.S_ISREG(st.st_mode):
            _note_skipped(os.path.join(location, name), st.st_mode)
            continue
        hit = cached.get(name)
        if hit is not None and hit.size == st.st_size and hit.mtime_ns == st.st_mtime_ns and \
                hit.inode == st.st_ino:
            fresh[name] = hit
        else:
            to_read.append(name)
    if to_read:
        changed = True
        fresh.update(_read_rows(location, to_read, processes))
    wanted = resolve_path(cwd) if cwd is not None else None
    rows = [row for row in (fresh[name].row for name in names if name in fresh)
            if row is not None and (wanted is None or cwd_matches(row.cwd, wanted))]
    if index and (changed or len(fresh) != len(cached)):
        _save_index(location, fresh)
    return pi_order(rows)


def _note_skipped(path: str, mode: int) -> None:
    """Say that a ``*.jsonl`` name that is not a regular file was left out of a listing."""
    warnings.warn(ListingWarning(f"{path}: not listed: it is {_fs.file_kind(mode)}, not a regular "
                              "file"), stacklevel=4)


def project_folders(root: str | os.PathLike[str]) -> list[str]:
    """``root`` and its sub-folders (pi's sessions root holds one ``--<cwd>--`` folder per
    project), sorted, hidden folders left out: where ``list_root`` and
    ``session_stamps`` look."""
    location = os.path.abspath(root)
    with os.scandir(location) as entries:
        subfolders = sorted(e.path for e in entries
                            if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    return [location, *subfolders]


def list_root(root: str | os.PathLike[str], *, cwd: str | None = None, index: bool = True,
              processes: int | None = None) -> list[SessionListing]:
    """Every session of ``root`` and of each of its project folders, newest first: pi's
    ``SessionManager.listAll`` (which lists the project folders; sessions directly in ``root``
    are listed too, so that no file ``ls`` could show is left out)."""
    return pi_order([row for folder in project_folders(root)
                     for row in list_folder(folder, cwd=cwd, index=index, processes=processes)])


def session_files(root: str | os.PathLike[str]) -> list[str]:
    """Every session file of ``root`` and of its project folders (:func:`session_stamps`),
    folder by folder, each folder's sorted (what a copy of the whole root must account for:
    each is copied or named with the reason)."""
    location = os.path.abspath(root)
    return [os.path.join(location, folder, name) for folder, files in session_stamps(location)
            for name in sorted(file[0] for file in files)]


Stamp = tuple[str, int, int, int, int]
"""A session file as a search checks it: its name, device, inode, size and mtime (ns)."""


def session_stamps(root: str | os.PathLike[str]) -> list[tuple[str, list[Stamp]]]:
    """Each folder of ``root`` (:func:`project_folders`; its path in ``root``, ``""`` for
    ``root``) with its session files (a ``*.jsonl`` name of a regular file, or of a link to
    one) in the order the folder lists them, each stat'ed in the open folder and kept as its
    :data:`Stamp`, nothing more (the stat pass is most of a warm search of a rare phrase)."""
    location = os.path.abspath(root)
    found: list[tuple[str, list[Stamp]]] = []
    start = len(os.path.join(location, ""))
    for folder in project_folders(location):
        stamps: list[Stamp] = []
        found.append((folder[start:], stamps))
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in os.listdir(fd):
                if name.endswith(".jsonl"):
                    try:
                        st = os.stat(name, dir_fd=fd)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        stamps.append((name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
        finally:
            os.close(fd)
    return found


def _read_rows(folder: str, names: list[str], requested: int | None) -> dict[str, _Cached]:
    """The rows of these files, read by helper processes too when there are many and the
    caller allows them."""
    processes = _helpers.processes(requested) if len(names) >= PARALLEL_FILES else 1
    if processes == 1:
        return _rows_of(folder, names)

    def read(answer: bytes, share: list[str]) -> dict[str, _Cached] | None:
        rows = _rows_decoder.decode(answer)
        return rows if set(rows) <= set(share) else None  # (rows of no other file)

    found: dict[str, _Cached] = {}
    for rows in _helpers.shared("sessiontree.stores._jsonl_listing:_list_share",
                                [names[i::processes] for i in range(processes)],
                                lambda share: [folder, *share],
                                lambda share: _rows_of(folder, share), read):
        found.update(rows)
    return found


def _rows_of(folder: str, names: list[str]) -> dict[str, _Cached]:
    found: dict[str, _Cached] = {}
    for name in names:
        path = os.path.join(folder, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        found[name] = _Cached(st.st_size, st.st_mtime_ns, st.st_ino, read_listing(path, st))
    return found


def _list_share(folder: str, *names: str) -> None:
    """A helper process: the rows of these files of ``folder``, as MessagePack."""
    _helpers.reply(_index_encoder.encode(_rows_of(folder, list(names))))


def _save_index(folder: str, files: dict[str, _Cached]) -> None:
    target = os.path.join(folder, INDEX_NAME)
    if os.path.lexists(target) and not _fs.is_regular(target):
        return  # something else (a FIFO) has the index's name: it is not ours to replace
    try:
        data = _index_encoder.encode(_Index(_INDEX_VERSION, files))
    except (OverflowError, UnicodeEncodeError):  # a total beyond 64 bits (MessagePack's
        # integers), a name that is not UTF-8 (its text): such rows are read at each listing
        data = _index_encoder.encode(_Index(_INDEX_VERSION, {
            name: cached for name, cached in files.items() if _encodes(name, cached)}))
    try:
        _fs.atomic_write(os.path.join(folder, INDEX_NAME), data, mode=0o600, durable=False)
    except OSError:
        pass  # a folder we may not write to is listed without an index


def _encodes(name: str, cached: _Cached) -> bool:
    """Whether the index can hold this file's row."""
    try:
        _index_encoder.encode({name: cached})
    except (OverflowError, UnicodeEncodeError):
        return False
    return True


def most_recent_session(folder: str | os.PathLike[str], cwd: str | None = None) -> str | None:
    """pi 1.5.2's ``findMostRecentSession``: the ``*.jsonl`` file modified last (ties: the
    first by name) whose first line that parses, within the first MiB, is a session header
    (of ``cwd``, resolved as pi resolves paths, when given); ``None`` if none. (pi 0.73.1
    read the first line of the first 512 bytes only.)"""
    location = os.path.abspath(folder)
    wanted = resolve_path(cwd) if cwd is not None else None
    try:
        with os.scandir(location) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".jsonl"))
        stamped = []
        for name in names:
            st = os.stat(os.path.join(location, name))
            if not stat.S_ISREG(st.st_mode):
                continue  # a FIFO would hang the read, a device never end it
            stamped.append((node_mtime_ms(st), name))
    except OSError:
        return None  # pi: discovery unavailable
    stamped.sort(key=lambda item: item[0], reverse=True)
    for _, name in stamped:
        path = os.path.join(location, name)
        header = _discovered_header(path)
        if header is not None and (wanted is None or (
                isinstance(header.cwd, str) and cwd_matches(header.cwd, wanted))):
            return path
    return None


_HEADER_SCAN = 1 << 20
"""How far pi 1.5.2 looks for a session's header line."""


def _discovered_header(path: str) -> ListingLine | None:
    """The header pi's ``readSessionHeader`` finds: the first line that parses to a value
    JavaScript holds true, if it is a session header with a string id, read within the first
    MiB (a longer first line is no header)."""
    try:
        with os.fdopen(_fs.open_regular(path), "rb") as stream:
            head = stream.read(_HEADER_SCAN + 1)
    except (OSError, InvalidLocation):
        return None
    lines = head.split(b"\n") if len(head) <= _HEADER_SCAN else \
        head[:_HEADER_SCAN].split(b"\n")[:-1]  # pi gives up on a line it could not finish
    for line in lines:
        if not line.strip():
            continue
        parsed = listing_line(line)
        if parsed is None:
            continue
        return parsed if parsed.type == "session" and isinstance(parsed.id, str) else None
    return None
