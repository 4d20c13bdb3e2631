"""Repairing a session file so that pi (which hangs on cycles and fuses torn lines) can use it.

What ``verify`` reports and what repair does with it:
* ``corrupt`` and ``torn`` lines, and the earlier line of a duplicate id: removed (they are
  not entries of the tree anyway); their bytes stay in the backup.
* ``cycle``: the entry that breaks the cycle gets ``"parentId": null``, so it is the root it
  already was for sessiontree, and pi no longer loops forever.
* ``orphan``: left as it is (a root for both), since its parent may yet be found elsewhere.
* An old format version is migrated first (with its own backup).

The original bytes are saved to ``<file>.repair-<timestamp>.bak`` and the file is replaced
atomically; lines that were not changed keep their exact bytes. Lines another program (pi, which
takes no lock) appends while repair runs are carried over to the end of the repaired file.
"""

from __future__ import annotations

import os

import msgspec

from . import _fs, _json
from ._scan import Scanner, _split
from ._time import file_stamp, iso_now
from ._tree import TreeIndex
from .migrate import migrate_file
from .stores.memory import MemoryLog

__all__ = ["RepairResult", "repair_file"]


class RepairResult(msgspec.Struct, frozen=True):
    """What :func:`repair_file` changed."""

    path: str
    removed_lines: list[int]
    """Line numbers (of the file before repair) that were dropped."""
    rerooted: list[str]
    """Ids of entries whose ``parentId`` was set to null to break a cycle."""
    backup: str | None
    """Where the original bytes are; ``None`` when there was nothing to repair."""


def repair_file(path: str | os.PathLike[str], *, lock_timeout: float = 10.0) -> RepairResult:
    """Repair a session file in place, keeping a backup. The file is read and replaced under
    the writer's lock, so a session being written is never replaced under its writer.

    Args:
        lock_timeout: seconds to wait while another process writes the session.

    Raises:
        CorruptHeader: the header is missing or corrupt (nothing can be repaired safely).
        SessionNotFound: no such file.
        SessionLockedError: another process kept writing the session past ``lock_timeout``.
        UnsupportedVersion: a newer format version, or an odd one (``migrate`` it first).
    """
    path = os.fspath(path)
    migrate_file(path, lock_timeout=lock_timeout, odd=False)
    fd = _fs.open_regular(path)
    try:
        _fs.lock(fd, path, lock_timeout)
        return _repair_locked(path, fd)
    finally:
        os.close(fd)  # and with it the lock


def _repair_locked(path: str, fd: int) -> RepairResult:
    original = _fs.read_settled(fd)
    # the tree of exactly these bytes (the file may grow while repair runs)
    loaded = MemoryLog(original.split(b"\n")).load()
    index = TreeIndex(loaded.records, list(loaded.problems))
    kept = {record.line: record for record in index.records()}
    rerooted = sorted(index.cycle_roots)
    scanner = Scanner(path)
    out: list[bytes] = []
    removed: list[int] = []
    for line, offset, terminated in _split(original, 0):
        scanner.feed(line, offset, terminated)
        number = scanner.lineno
        raw = bytes(line).rstrip(b"\r")
        if number == scanner.header_line:
            out.append(raw.removeprefix(b"\xef\xbb\xbf"))
        elif number in kept:
            if kept[number].id in rerooted:
                data = _json.loads(raw)
                data["parentId"] = None
                raw = _json.dumps(data)
            out.append(raw)
        elif raw.strip():
            removed.append(number)
    if not removed and not rerooted:
        return RepairResult(path, [], [], None)
    backup = _fs.write_new(f"{path}.repair-{file_stamp(iso_now())}.bak", original)
    try:
        _fs.rewrite_following(path, fd, len(original), [line + b"\n" for line in out])
    except BaseException:
        os.unlink(backup)  # the file is as it was: no backup of nothing
        raise
    return RepairResult(path, removed, rerooted, backup)
