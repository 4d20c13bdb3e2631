"""The search index of a folder of session files (and of its project folders: pi's sessions
root): SQLite FTS5 in ``.sessiontree-cache/search.db`` in the folder.

Invariants:
* The index is a cache, never a source. Before every search each file's size, mtime and
  identity (device, inode) are compared with what was indexed: an unchanged file is not read,
  a grown one has only its appended bytes read (after checking that the bytes before them are
  the ones indexed), and a file replaced, shrunk or otherwise changed (``repair``, a purge,
  an edit in place) is indexed again from its start; a file gone loses its rows. Only whole
  lines are indexed.
* Every candidate's line is read again from its file and judged by :mod:`sessiontree._search`
  before it is a hit, so a stale index can cost time but never give a wrong hit. A session's
  current branch (for the hits' flag) is kept with its file's row and forgotten when the file
  changes.
* The cache folder is created ``0700``, the index ``0600``. An index that is damaged or of
  another version is deleted and built again; a folder that cannot be written is searched
  with an index in memory.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import msgspec

from .. import _fs
from .._search import CANDIDATES, Candidate, Query, SearchHit, document, rank
from ._jsonl_listing import session_files

__all__ = ["CACHE_DIR", "INDEX_NAME", "index_path", "search"]

CACHE_DIR = ".sessiontree-cache"
INDEX_NAME = "search.db"
_VERSION = 2
_TAIL = 64
"""Bytes before the indexed end that must be unchanged for appended bytes to be read alone."""

_SCHEMA = (
    "CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, dev INTEGER, "
    "ino INTEGER, size INTEGER, mtime_ns INTEGER, indexed_to INTEGER, tail BLOB, "
    "session_id TEXT, cwd TEXT, branch BLOB)",
    "CREATE TABLE entries (id INTEGER PRIMARY KEY, file INTEGER NOT NULL, offset INTEGER NOT "
    "NULL, length INTEGER NOT NULL, role TEXT NOT NULL, ms INTEGER NOT NULL)",
    "CREATE INDEX entries_file ON entries (file)",
    "CREATE VIRTUAL TABLE body USING fts5(text, detail=none, "
    "tokenize='unicode61 remove_diacritics 0')",
)

_QUERY = """
    SELECT f.session_id, f.path, f.cwd, e.offset, e.length
    FROM body JOIN entries e ON e.id = body.rowid JOIN files f ON f.id = e.file
    WHERE body MATCH :match AND e.ms >= :since AND (:role IS NULL OR e.role = :role)
        AND (:cwd IS NULL OR f.cwd = :cwd)
    ORDER BY e.ms DESC, f.session_id, e.offset LIMIT :limit"""


class _Header(msgspec.Struct):
    type: Any = None
    id: Any = None
    cwd: Any = None


_header = msgspec.json.Decoder(_Header)


class _Known(NamedTuple):
    id: int
    dev: int
    ino: int
    size: int
    mtime_ns: int
    indexed_to: int
    tail: bytes
    session_id: str | None
    cwd: str | None


def index_path(root: str | os.PathLike[str]) -> str:
    """Where the search index of the folder ``root`` is."""
    return os.path.join(os.path.abspath(root), CACHE_DIR, INDEX_NAME)


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    conn.execute("PRAGMA synchronous = OFF")  # a cache: a lost write is found stale next time
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version != _VERSION:
        if version != 0 or conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise sqlite3.DatabaseError(f"index version {version}, not {_VERSION}")
        conn.execute("BEGIN IMMEDIATE")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {_VERSION}")
        conn.execute("COMMIT")
    return conn


def _remove(path: str) -> None:
    for name in (path, path + "-journal", path + "-wal", path + "-shm"):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


@contextmanager
def _opened(root: str) -> Iterator[sqlite3.Connection]:
    """The folder's index, refreshed from its files (built again when damaged or of another
    version; in memory when the folder cannot be written)."""
    path = index_path(root)
    for attempt in range(2):
        conn: sqlite3.Connection | None = None
        try:
            try:
                _fs.make_private_dirs(os.path.dirname(path))
                if not os.path.exists(path):
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _fs.FILE_MODE))
                conn = _connect(path)
            except (OSError, sqlite3.OperationalError) as exc:
                if isinstance(exc, sqlite3.OperationalError) and "readonly" not in str(exc) \
                        and "unable to open" not in str(exc):
                    raise
                conn = _connect(":memory:")  # a folder we may not write to: no index kept
            refresh(conn, root)
        except sqlite3.DatabaseError:
            if conn is not None:
                conn.close()
            if attempt:
                raise
            _remove(path)  # damaged: built again
            continue
        try:
            yield conn
        finally:
            conn.close()
        return


def refresh(conn: sqlite3.Connection, root: str) -> None:
    """Bring the index up to date with the files (only what changed is read)."""
    known = {row[1]: _Known(row[0], *row[2:]) for row in conn.execute(
        "SELECT id, path, dev, ino, size, mtime_ns, indexed_to, tail, session_id, cwd FROM files")}
    changed: list[tuple[str, os.stat_result, _Known | None]] = []
    for path in session_files(root):
        try:
            st = os.stat(path)
        except OSError:
            continue
        row = known.pop(path, None)
        if row is not None and (row.dev, row.ino, row.size, row.mtime_ns) == \
                (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns):
            continue
        changed.append((path, st, row))
    if not changed and not known:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for row in known.values():  # files gone
            _drop(conn, row.id)
            conn.execute("DELETE FROM files WHERE id = ?", (row.id,))
        for path, st, row in changed:
            _index_file(conn, path, st, row)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _drop(conn: sqlite3.Connection, file_id: int) -> None:
    conn.execute("DELETE FROM body WHERE rowid IN (SELECT id FROM entries WHERE file = ?)",
                 (file_id,))
    conn.execute("DELETE FROM entries WHERE file = ?", (file_id,))


def _index_file(conn: sqlite3.Connection, path: str, st: os.stat_result,
                row: _Known | None) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        start = 0
        session_id = cwd = None
        if row is not None and (row.dev, row.ino) == (st.st_dev, st.st_ino) and \
                st.st_size > row.size and row.session_id is not None and \
                os.pread(fd, len(row.tail), row.indexed_to - len(row.tail)) == row.tail:
            start, session_id, cwd = row.indexed_to, row.session_id, row.cwd
        elif row is not None:
            _drop(conn, row.id)
        data = _read_from(fd, start)
    finally:
        os.close(fd)
    end = data.rfind(b"\n") + 1  # whole lines only
    lines = data[:end].split(b"\n")[:-1]
    offset = start
    if start == 0 and lines:
        session_id, cwd = _session_of(lines)
    if row is None:
        file_id = int(conn.execute("INSERT INTO files (path) VALUES (?) RETURNING id",
                                   (path,)).fetchone()[0])
    else:
        file_id = row.id
    entries: list[tuple[int, int, int, int, str, int]] = []
    bodies: list[tuple[int, str]] = []
    if session_id is not None:
        next_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM entries").fetchone()[0]
        for line in lines:
            doc = document(line) if line.startswith(b"{") else None
            if doc is not None:
                entries.append((next_id, file_id, offset, len(line), doc.role, doc.ms))
                bodies.append((next_id, doc.text))
                next_id += 1
            offset += len(line) + 1
    conn.executemany("INSERT INTO entries (id, file, offset, length, role, ms) "
                     "VALUES (?, ?, ?, ?, ?, ?)", entries)
    conn.executemany("INSERT INTO body (rowid, text) VALUES (?, ?)", bodies)
    indexed_to = start + end
    tail = data[max(0, end - _TAIL):end] if end else (row.tail if row and start else b"")
    conn.execute("UPDATE files SET dev = ?, ino = ?, size = ?, mtime_ns = ?, indexed_to = ?, "
                 "tail = ?, session_id = ?, cwd = ?, branch = NULL WHERE id = ?",
                 (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, indexed_to, tail,
                  session_id, cwd, file_id))


def _read_from(fd: int, start: int) -> bytes:
    parts: list[bytes] = []
    while True:
        chunk = os.pread(fd, 1 << 22, start)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        start += len(chunk)


def _session_of(lines: list[bytes]) -> tuple[str | None, str | None]:
    """The id and cwd of the first line that parses, if it is a session header (pi's rule)."""
    for line in lines:
        text = line[3:] if line.startswith(b"\xef\xbb\xbf") else line
        if not text.strip():
            continue
        try:
            header = _header.decode(text)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
        if header.type == "session" and isinstance(header.id, str):
            return header.id, header.cwd if isinstance(header.cwd, str) else ""
        return None, None
    return None, None


def search(root: str | os.PathLike[str], query: Query, *, role: str | None, since: int,
           cwd: str | None, limit: int, branch: Callable[[str], set[str]]) -> list[SearchHit]:
    """The best hits among the folder's sessions (:func:`sessiontree._search.rank`), the index
    refreshed first; ``branch(path)`` gives the ids on a session's current branch, kept in the
    index until the file changes."""
    location = os.path.abspath(root)
    match = " AND ".join(f'"{word}"' for word in query.words())
    with _opened(location) as conn:
        rows = conn.execute(_QUERY, {"match": match, "since": since, "role": role, "cwd": cwd,
                                     "limit": CANDIDATES}).fetchall()
        found = _read_lines(rows)
        computed: dict[str, set[str]] = {}

        def current(candidate: Candidate) -> set[str]:
            stored = conn.execute("SELECT branch FROM files WHERE path = ?",
                                  (candidate.session,)).fetchone()
            if stored is not None and stored[0] is not None:
                return set(_ids.decode(stored[0]))
            ids = computed[candidate.session] = branch(candidate.session)
            return ids

        hits = rank(found, query, role=role, since=since, limit=limit, branch=current)
        if computed:
            try:
                with conn:
                    conn.executemany("UPDATE files SET branch = ? WHERE path = ?",
                                     [(_ids_encoder.encode(sorted(ids)), path)
                                      for path, ids in computed.items()])
            except sqlite3.OperationalError:
                pass  # busy or read-only: computed again next time
    return hits


_ids = msgspec.msgpack.Decoder(list[str])
_ids_encoder = msgspec.msgpack.Encoder()


def _read_lines(rows: list[Any]) -> list[Candidate]:
    """Each candidate with its line read again from its file."""
    found: list[Candidate] = []
    descriptors: dict[str, int | None] = {}
    try:
        for session_id, path, session_cwd, offset, length in rows:
            if path not in descriptors:
                try:
                    descriptors[path] = os.open(path, os.O_RDONLY)
                except OSError:
                    descriptors[path] = None
            fd = descriptors[path]
            if fd is not None:
                found.append(Candidate(session_id, path, session_cwd or "", offset,
                                       os.pread(fd, length, offset)))
    finally:
        for fd in descriptors.values():
            if fd is not None:
                os.close(fd)
    return found
