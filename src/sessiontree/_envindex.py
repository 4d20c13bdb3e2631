"""The envelope index of a session file: what the open scan found, kept so that reopening an
unchanged file reads it back instead of scanning, and a file that only grew is scanned from
where the index ends.

Where: ``<cache>/index/<device>-<inode>.envelopes``, where ``<cache>`` is
``$SESSIONTREE_CACHE_DIR``, else ``$XDG_CACHE_HOME/sessiontree``, else
``~/.cache/sessiontree``: outside the sessions folders, so pi never lists an index, and keyed by
the file's identity, so a renamed file keeps its index and a replaced one never gets another's.
What: a packed block (:mod:`sessiontree._packed`) whose ``extra`` is a :class:`Source`.

Invariants:
* The index is never trusted over the file. It is used only when the file has the device and
  inode it was made from, at least the size it covers (exactly that size: also the same
  modification time), and the same bytes at both ends of what it covers (a digest of the first
  and of the last ``WINDOW`` bytes); and when it is whole and of this format version
  (:class:`~sessiontree._packed.Unreadable` otherwise). What that cannot see: a change in place
  that keeps the size and both ends, made while the file also grew (sessiontree and pi only
  append; migration, repair and editors' usual saves write a new file or change the size). Anything else
  (a file rewritten by migration, repair, pi or an editor; an index torn, damaged, stale or of
  another version) is rebuilt silently from a full scan, with the answers of a full scan.
* A file that grew is scanned from the indexed end (when it ended in an unterminated line
  then, it is scanned again whole); the index is written again once what it lacks is worth it
  (:func:`stale`).
* Index files are written ``0600`` (their folder ``0700``) by an atomic rename, so a reader
  sees a whole index or none; writing them is best effort: a cache that cannot be written costs
  only time.
* ``SESSIONTREE_INDEX=0`` (or ``index=False``) neither reads nor writes an index; by default
  only files of ``MIN_BYTES`` or more are indexed (smaller ones scan faster than a cache file
  is opened).
* Index files whose session file is gone or replaced are removed, at most once a day, when an
  index is written.
"""

from __future__ import annotations

import os
import time
import zlib

import msgspec

from . import _fs
from ._columns import Columns
from ._packed import Block, Unreadable, pack
from ._scan import ScanState

__all__ = ["MIN_BYTES", "Source", "cache_dir", "enabled", "index_path", "load", "save", "stale"]

MIN_BYTES = 256 << 10
"""Files smaller than this are not indexed unless asked (``index=True``)."""
WINDOW = 4096
"""How many bytes at each end of the indexed part are compared."""
_SUFFIX = ".envelopes"
_PRUNE_EVERY_S = 24 * 3600


class Source(msgspec.Struct, array_like=True):
    """Which file an index was made from, and how far."""

    path: str
    device: int
    inode: int
    size: int
    """The bytes the index covers."""
    mtime_ns: int
    """The file's modification time when it was scanned."""
    head: int
    tail: int
    """CRC-32 of the first and of the last ``WINDOW`` bytes of those."""


_source_decoder = msgspec.msgpack.Decoder(Source)


def cache_dir() -> str:
    """sessiontree's cache folder (``$SESSIONTREE_CACHE_DIR``, ``$XDG_CACHE_HOME/sessiontree``,
    ``~/.cache/sessiontree``)."""
    own = os.environ.get("SESSIONTREE_CACHE_DIR")
    if own:
        return os.path.expanduser(own)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "sessiontree")
    return os.path.join(os.path.expanduser("~"), ".cache", "sessiontree")


def enabled(requested: bool | None, size: int) -> bool:
    """Whether to use an index for a file of ``size`` bytes (``requested``: the caller's
    ``index`` argument)."""
    if requested is not None:
        return requested
    if os.environ.get("SESSIONTREE_INDEX", "").strip().lower() in ("0", "off", "false", "no"):
        return False
    return size >= MIN_BYTES


def index_path(st: os.stat_result) -> str:
    """Where the index of the file with this ``stat`` lives."""
    return os.path.join(cache_dir(), "index", f"{st.st_dev:x}-{st.st_ino:x}{_SUFFIX}")


def stale(indexed: int, scanned: int) -> bool:
    """Whether an index of ``indexed`` bytes is worth writing again for a file scanned to
    ``scanned``: when scanning what it lacks costs about what writing it does (1/32 of the file
    ≈ the index's size), and at least 256 KiB."""
    return scanned - indexed >= max(MIN_BYTES, scanned // 32)


def _digests(fd: int, size: int) -> tuple[int, int]:
    """CRC-32 of the first and of the last ``WINDOW`` bytes of the file's first ``size``."""
    head = os.pread(fd, min(WINDOW, size), 0)
    start = max(0, size - WINDOW)
    return zlib.crc32(head), zlib.crc32(os.pread(fd, size - start, start))


def load(fd: int, st: os.stat_result) -> tuple[Columns, ScanState] | None:
    """The indexed columns and scanner state of the open file ``fd`` (whose ``fstat`` is
    ``st``), checked against it; ``None`` when there is none to trust."""
    try:
        index = os.open(index_path(st), os.O_RDONLY)
    except OSError:
        return None
    try:
        block = Block.of_file(index)
        source = _source_decoder.decode(block.extra)
        end = source.size
        if (source.device, source.inode) != (st.st_dev, st.st_ino) or end > st.st_size or \
                block.state.end != end or (end < st.st_size and block.state.tail != "clean") \
                or (end == st.st_size and st.st_mtime_ns != source.mtime_ns) \
                or _digests(fd, end) != (source.head, source.tail):
            return None
        return block.columns(), block.state
    except (Unreadable, msgspec.DecodeError, OSError):
        return None
    finally:
        os.close(index)


def save(fd: int, path: str, st: os.stat_result, columns: Columns, state: ScanState) -> None:
    """Keep the index of the open file ``fd`` (scanned to ``state.end``); best effort."""
    try:
        head, tail = _digests(fd, state.end)
        source = Source(os.path.abspath(path), st.st_dev, st.st_ino, state.end, st.st_mtime_ns,
                        head, tail)
        data = pack(columns, state, msgspec.msgpack.encode(source))
    except (msgspec.EncodeError, UnicodeEncodeError, OverflowError, OSError):
        return  # a value MessagePack cannot hold: this file goes unindexed
    target = index_path(st)
    try:
        _fs.make_private_dirs(os.path.dirname(target))
        _fs.atomic_write(target, data, durable=False)
        _prune(os.path.dirname(target))
    except OSError:
        pass


def _prune(folder: str) -> None:
    """Remove the index files of session files that are gone or replaced (once a day)."""
    marker = os.path.join(folder, ".pruned")
    now = time.time()
    try:
        if now - os.stat(marker).st_mtime < _PRUNE_EVERY_S:
            return
    except FileNotFoundError:
        pass
    os.close(os.open(marker, os.O_WRONLY | os.O_CREAT, _fs.FILE_MODE))
    os.utime(marker, (now, now))
    for entry in os.scandir(folder):
        if not entry.name.endswith(_SUFFIX):
            continue
        try:
            with open(entry.path, "rb") as stream:
                source = _source_decoder.decode(Block.of_file(stream.fileno()).extra)
            st = os.stat(source.path)
            if (st.st_dev, st.st_ino) == (source.device, source.inode):
                continue
        except (OSError, Unreadable, msgspec.DecodeError):
            pass
        try:
            os.unlink(entry.path)
        except OSError:
            pass
