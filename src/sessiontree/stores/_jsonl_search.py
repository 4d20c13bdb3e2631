"""The search index of a folder of session files (and of its project folders: pi's sessions
root): SQLite FTS5 in ``.sessiontree-cache/search.db`` in the folder.

Invariants:
* The index is a cache, never a source. Before every search each file's size, mtime and
  identity (device, inode) are compared with what was indexed: an unchanged file is not read,
  a grown one has only its appended bytes read (after checking that the bytes before them are
  the ones indexed), and a file replaced, shrunk or otherwise changed (``repair``, a purge,
  an edit in place) is indexed again from its start; a file gone loses its rows. Only whole
  lines are indexed.
* A search indexes for at most :data:`INDEX_BUDGET` seconds (what changed least first, a
  chunk of a file at a time; new files only when all that changed is at most
  :data:`INDEX_BYTES`) and scans the bytes left (:mod:`sessiontree._search_scan`),
  which finds the candidates the index would have; :func:`build` indexes everything. A file
  indexed in part keeps the size indexed, so the next search goes on from there.
* Every candidate's line is read again from its file and judged by :mod:`sessiontree._search`
  before it is a hit, so a stale index can cost time but never give a wrong hit. Each entry's
  row keeps its size and word counts, which bound its relevance: the lines are read best bound
  first and only until no line left can rank (:func:`sessiontree._search.best_first`), so a
  word most entries hold reads about as many lines as hits shown. A session's
  current branch (for the hits' flag) is kept with its file's row and forgotten when the file
  changes.
* The cache folder is created ``0700``, the index ``0600``. An index that is damaged or of
  another version is deleted and built again; a folder that cannot be written is scanned.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import msgspec

from .. import _fs, _helpers
from .._search import (
    CANDIDATES,
    Bounded,
    Candidate,
    Query,
    SearchHit,
    best_first,
    branch_flags,
    document,
    entry_terms,
    fts_body,
    fts_query,
    row_bounds,
)
from .._search_scan import Found, Recent
from ._jsonl_listing import Stamp, session_stamps

__all__ = ["CACHE_DIR", "INDEX_BUDGET", "INDEX_BYTES", "INDEX_NAME", "build", "index_path",
           "search"]

CACHE_DIR = ".sessiontree-cache"
INDEX_NAME = "search.db"
_VERSION = 8
"""The index's schema and words (7: a float is the words of its text as the file writes it,
``1e-7``, no longer Python's ``1e-07``; 8: a capital I with a dot is a letter of its words,
``tax\u0130``, no longer an ``i`` ending one, ``taxi``: :func:`sessiontree._search.lowered`):
an index of another version is built again."""
_TAIL = 64
"""Bytes before the indexed end that must be unchanged for appended bytes to be read alone."""
_BUSY_TIMEOUT = 30.0
"""Seconds a search waits for another process's write to the index (a build commits every
second) before it does without the index."""
INDEX_BUDGET = 0.5
"""Seconds of indexing a search may spend (what it does not index, it scans: a first search
costs about a ``grep -r`` of the folder, and each one leaves the index more complete)."""
INDEX_BYTES = 4 << 20
"""New files are indexed by a search only when all that changed is at most this many bytes
(about what :data:`INDEX_BUDGET` indexes); else they are scanned until :func:`build`."""

_SCHEMA = (
    # a file's path is relative to the folder: the index stays good for the folder reached
    # by another path (a link, a mount); its text, or its bytes where it is not UTF-8 (_stored)
    "CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, dev INTEGER, "
    "ino INTEGER, size INTEGER, mtime_ns INTEGER, indexed_to INTEGER, tail BLOB, "
    "session_id TEXT, cwd TEXT, branch BLOB)",
        # size and counts (JSON: the words held more than once) bound the entry's relevance
    "CREATE TABLE entries (id INTEGER PRIMARY KEY, file INTEGER NOT NULL, offset INTEGER NOT "
    "NULL, length INTEGER NOT NULL, role TEXT NOT NULL, ms INTEGER NOT NULL, size INTEGER NOT "
    "NULL, counts TEXT)",
    "CREATE INDEX entries_file ON entries (file)",
    "CREATE VIRTUAL TABLE body USING fts5(text, detail=none, "
    "tokenize='unicode61 remove_diacritics 0')",
    "CREATE TABLE counter (next INTEGER NOT NULL)",
    "INSERT INTO counter VALUES (0)",
    "CREATE TABLE state (digest BLOB NOT NULL)",  # (the files' stamps: see refresh)
)

_SHIFT = 36
_MINUTES = 1 << 27
"""An entry's row id is its minute (since 1970, clamped to 0 .. 2^27-1: up to the year 2225)
above a counter of ``_SHIFT`` bits: the index hands over the most recent matches first and
stops (a query matching most entries reads a thousand rows, not all of them)."""

_QUERY = f"""
    SELECT e.file, e.offset, e.length, e.ms, e.id >> {_SHIFT}, e.size, {{counts}}
    FROM body JOIN entries e ON e.id = body.rowid
    WHERE body MATCH :match AND e.ms >= :since AND (:role IS NULL OR e.role = :role)
        AND (:cwd IS NULL OR e.file IN (SELECT id FROM files WHERE cwd = :cwd))
    ORDER BY body.rowid DESC"""
"""The index's rows of a query, most recent minute first; each file's row is read once after
(:func:`_most_recent`: a join read it for each of a thousand rows)."""
_FILES = "SELECT id, session_id, path, cwd FROM files WHERE id IN (SELECT value FROM json_each(?))"


def _counts(words: Sequence[str]) -> tuple[str, dict[str, str | int]]:
    """SQL for :data:`_QUERY`'s counts (as :func:`~sessiontree._search.fts_counts` gives them:
    one word's count, or ``"2,1"``) and its parameters: each word's count found as text in the
    row's ``counts``, which this index writes itself (:func:`_insert`: compact JSON whose keys
    are words, letters and digits that JSON never escapes, so ``"word":`` is that key's place
    and nothing else's). ``json_extract`` parsed each row's JSON again: three quarters of the
    query's time for a word most entries hold."""
    columns = [f"coalesce(CAST(substr(e.counts, nullif(instr(e.counts, :key{i}), 0) + "
               f":skip{i}) AS INTEGER), 1)" for i in range(len(words))]
    params: dict[str, str | int] = {}
    for i, word in enumerate(words):
        key = f'"{word}":'
        params[f"key{i}"], params[f"skip{i}"] = key, len(key)
    return " || ',' || ".join(columns), params


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


def _stored(name: str) -> str | bytes:
    """A file's path as the index keeps it: its text, or, for a name that is not UTF-8 (its
    bytes undecoded, as ``os.listdir`` gives them), its bytes, which SQLite's text cannot hold;
    ``os.fsdecode`` gives the name back."""
    if name.isascii():
        return name
    try:
        name.encode()
    except UnicodeEncodeError:
        return os.fsencode(name)
    return name


def index_path(root: str | os.PathLike[str]) -> str:
    """Where the search index of the folder ``root`` is."""
    return os.path.join(os.path.abspath(root), CACHE_DIR, INDEX_NAME)


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=_BUSY_TIMEOUT,
                           check_same_thread=False)  # (kept for the next search: _idle)
    conn.execute("PRAGMA synchronous = OFF")  # a cache: a lost write is found stale next time
    _check_version(conn)
    return conn


def _check_version(conn: sqlite3.Connection) -> None:
    """Make the schema in an empty index; raise :class:`sqlite3.DatabaseError` for an index
    of another version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version != _VERSION:
        if version != 0 or conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise sqlite3.DatabaseError(f"index version {version}, not {_VERSION}")
        conn.execute("BEGIN IMMEDIATE")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {_VERSION}")
        conn.execute("COMMIT")


_idle: dict[str, tuple[int, int, int, sqlite3.Connection]] = {}
"""A connection to each index this process searched, idle between its searches, with the
process id and the index file's device and inode when it was opened: the next search of the
folder takes it (SQLite's schema read, statements prepared and pages cached: opening and
closing the index cost about 0.5 million instructions a search), unless the index file was
replaced or the process forked since. Taken out while in use (one search at a time has it,
from any thread); a search that raised closes it."""


def _open_index(path: str) -> tuple[sqlite3.Connection, tuple[int, int]]:
    """A connection to the index at ``path`` (made, ``0600`` in a ``0700`` folder, when
    missing), the idle one if it is still that file's, and the file's device and inode."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        _fs.make_private_dirs(os.path.dirname(path))
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _fs.FILE_MODE))
        except FileExistsError:
            pass
        st = os.stat(path)
    idle = _idle.pop(path, None)
    if idle is not None:
        pid, dev, ino, conn = idle
        if (pid, dev, ino) == (os.getpid(), st.st_dev, st.st_ino):
            try:
                _check_version(conn)  # (another process may have changed it)
            except BaseException:
                conn.close()
                raise
            return conn, (dev, ino)
        if pid == os.getpid():  # (a forked child leaves its parent's connection alone)
            conn.close()
    return _connect(path), (st.st_dev, st.st_ino)


def _remove(path: str) -> None:
    for name in (path, path + "-journal", path + "-wal", path + "-shm"):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


@contextmanager
def _opened(root: str, budget: float | None, stop: Callable[[], bool] | None = None
            ) -> Iterator[tuple[sqlite3.Connection, list[Pending]]]:
    """The folder's index, refreshed from its files for at most ``budget`` seconds of indexing
    (``None``: all of them, unless ``stop()`` says so before a second's transaction; built
    again when damaged or of another version; in memory, and not built at all, when the
    folder cannot be written), and the bytes it does not hold yet (not known, and ``[]``,
    after a stopped build)."""
    path = index_path(root)
    for attempt in range(2):
        conn: sqlite3.Connection | None = None
        identity: tuple[int, int] | None = None  # (the index file's, while it is kept)
        try:
            try:
                conn, identity = _open_index(path)
            except (OSError, sqlite3.OperationalError) as exc:
                if isinstance(exc, sqlite3.OperationalError) and "readonly" not in str(exc) \
                        and "unable to open" not in str(exc):
                    raise
                conn = _connect(":memory:")  # a folder we may not write to: no index kept
            if budget is None and identity is not None:  # a whole build: a transaction a
                pending = _built(conn, root, stop)  # second (a search meanwhile waits for one)
            else:
                pending = refresh(conn, root, budget=budget if identity is not None else 0.0)
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            identity = None
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                conn = _connect(":memory:")  # another process kept it too long: not damage,
                pending = refresh(conn, root, budget=0.0)  # this search scans instead
            elif attempt:
                raise
            else:
                _remove(path)  # damaged: built again
                continue
        done = False
        try:
            yield conn, pending
            done = True
        finally:
            if done and identity is not None and not conn.in_transaction:
                replaced = _idle.pop(path, None)  # (another thread's, kept meanwhile)
                _idle[path] = (os.getpid(), *identity, conn)
                if replaced is not None and replaced[0] == os.getpid():
                    replaced[3].close()
            else:
                conn.close()
        return


def _built(conn: sqlite3.Connection, root: str, stop: Callable[[], bool] | None
           ) -> list[Pending]:
    """Index every file a second at a time until nothing is left or a second indexes nothing
    (a file that cannot be opened stays left, to the scan), then merge the index
    (:func:`_merge`), or until ``stop()`` says so before a second (what was indexed is
    kept); what is left: ``[]`` (not known after a stop)."""
    pending: list[Pending] | None = None
    while True:
        if stop is not None and stop():
            return []
        before, pending = pending, refresh(conn, root, budget=1.0, new=True)
        if not pending or pending == before:
            break
    _merge(conn, stop)
    return pending


_MERGE_PAGES = 1000
"""Pages of the FTS5 index a build's merge step writes in one transaction (about a second)."""


def _merge(conn: sqlite3.Connection, stop: Callable[[], bool] | None = None) -> None:
    """The FTS5 index's segments merged into one, as its ``optimize`` does but a transaction
    at a time (searches get the index between them): a build commits every second, leaving
    many segments, and a word's rows were looked up in each (a rare phrase among common
    words: its rows in 0.1 against 0.9-3 ms at 1,000 sessions, load 15); ``stop()`` is
    asked before each transaction."""
    while stop is None or not stop():
        before = conn.total_changes
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT INTO body (body, rank) VALUES ('merge', ?)", (-_MERGE_PAGES,))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        if conn.total_changes - before < 2:  # (FTS5's sign that nothing was left to merge)
            return


class Pending(NamedTuple):
    """Bytes of a file the index does not hold yet: searched by a scan of the bytes."""

    path: str
    start: int
    session_id: str | None
    """``None``: not known yet (the scan reads the header: ``start`` is 0)."""
    cwd: str | None
    mtime_ns: int
    size: int
    """The file's size when it was looked at (the bytes from ``start`` to it are scanned,
    and any appended since)."""


def refresh(conn: sqlite3.Connection, root: str, *, budget: float | None = None,
            new: bool = False) -> list[Pending]:
    """Bring the index up to date with the files (only what changed is read), for at most
    ``budget`` seconds of indexing (``None``: all of it; ``new``: new files too, however
    many); what is left is returned. The files' stamps are kept only when nothing is left
    (they could not match otherwise), and the write lock is taken only when there is
    something to write."""
    deadline = None if budget is None else time.monotonic() + budget
    listed = session_stamps(root)
    stamps = _packed(listed)  # (compared whole: exact, and no hash to make)
    if _stored_stamps(conn) == stamps:
        return []  # (the check a warm search makes: a stat per file, one row, no lock taken)
    stats = {os.path.join(folder, name): _Stat(*stamp) for folder, files in listed
             for name, *stamp in files}
    changed, gone = _changes(conn, stats)
    new = new or budget is None or _unindexed(changed) <= INDEX_BYTES
    if not new and not gone and all(row is None for _, _, row in changed):
        # only new files, which this search scans: nothing to write, no lock taken
        return [Pending(os.path.join(root, path), 0, None, None, st.st_mtime_ns, st.st_size)
                for path, st, _ in changed]
    conn.execute("BEGIN IMMEDIATE")  # what is known is read again under the lock another
    try:                             # search takes
        changed, gone = _changes(conn, stats)
        new = new or budget is None or _unindexed(changed) <= INDEX_BYTES
        for file in gone:
            _drop(conn, file.id)
            conn.execute("DELETE FROM files WHERE id = ?", (file.id,))
        pending: list[Pending] = []
        changed.sort(key=lambda item: item[1].st_size - (item[2].indexed_to if item[2] else 0))
        for path, st, row in changed:  # the least to read first: appends before new files
            left = _index_file(conn, root, path, st, row,
                               deadline if new or row is not None else 0.0)
            if left is not None:
                pending.append(left)
        conn.execute("DELETE FROM state")
        if not pending:  # every file indexed as it was stat'ed: the files' stamps
            conn.execute("INSERT INTO state VALUES (?)", (stamps,))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return pending


def _changes(conn: sqlite3.Connection, stats: dict[str, _Stat]
             ) -> tuple[list[tuple[str, _Stat, _Known | None]], list[_Known]]:
    """The files whose stat differs from the index's row (with the row, ``None`` for a new
    file), and the rows of files gone."""
    known = {os.fsdecode(row[1]): _Known(row[0], *row[2:]) for row in conn.execute(
        "SELECT id, path, dev, ino, size, mtime_ns, indexed_to, tail, session_id, cwd "
        "FROM files")}
    changed: list[tuple[str, _Stat, _Known | None]] = []
    for path, st in stats.items():
        row = known.pop(path, None)
        if row is None or (row.dev, row.ino, row.size, row.mtime_ns) != \
                (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns):
            changed.append((path, st, row))
    return changed, list(known.values())


def _unindexed(changed: list[tuple[str, _Stat, _Known | None]]) -> int:
    """The bytes of the changed files that the index does not hold: new files are indexed
    only when this is at most :data:`INDEX_BYTES` (indexing a byte costs about what scanning
    a hundred does, so an index a search cannot complete would save the next ones little: a
    first search of a large folder scans it, as grep would)."""
    return sum(st.st_size - (row.indexed_to if row else 0) for _, st, row in changed)


def _packed(listed: list[tuple[str, list[Stamp]]]) -> bytes:
    """The files' stamps (:func:`~._jsonl_listing.session_stamps`) as the index keeps them;
    a name that is not UTF-8 (MessagePack's text is) as its bytes."""
    try:
        return _stamps_encoder.encode(listed)
    except UnicodeEncodeError:
        return _stamps_encoder.encode([(os.fsencode(folder), [(os.fsencode(name), *rest)
                                                             for name, *rest in files])
                                       for folder, files in listed])


def _stored_stamps(conn: sqlite3.Connection) -> bytes | None:
    """The files' stamps as indexed (:func:`_packed`, in the order the folders list them:
    the same while a folder is unchanged; a folder listed in another order only costs a
    refresh, which finds nothing to read), ``None`` while files are left unindexed: when
    they equal the folder's, the index holds what the folder holds. (An index that kept a
    digest of them, or stamps of another form, differs: refreshed.)"""
    row = conn.execute("SELECT digest FROM state").fetchone()
    return bytes(row[0]) if row is not None else None


class _Stat(NamedTuple):
    """What a refresh knows of a session file: its stamp (named as ``os.stat_result``
    names them)."""

    st_dev: int
    st_ino: int
    st_size: int
    st_mtime_ns: int


_stamps_encoder = msgspec.msgpack.Encoder()


def _drop(conn: sqlite3.Connection, file_id: int) -> None:
    conn.execute("DELETE FROM body WHERE rowid IN (SELECT id FROM entries WHERE file = ?)",
                 (file_id,))
    conn.execute("DELETE FROM entries WHERE file = ?", (file_id,))


def _index_file(conn: sqlite3.Connection, root: str, name: str, st: _Stat,
                row: _Known | None, deadline: float | None) -> Pending | None:
    """Index what the file ``name`` (in ``root``) holds beyond what is indexed, a chunk at a
    time until ``deadline``; what is left, if anything (all of a file that cannot be read:
    left to the scan, which passes over it, and not taken for indexed)."""
    path = os.path.join(root, name)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return Pending(path, 0, None, None, st.st_mtime_ns, st.st_size)
    try:
        start = 0
        session_id = cwd = None
        if row is not None and (row.dev, row.ino) == (st.st_dev, st.st_ino) and \
                st.st_size > row.size and row.session_id is not None and \
                os.pread(fd, len(row.tail), row.indexed_to - len(row.tail)) == row.tail:
            start, session_id, cwd = row.indexed_to, row.session_id, row.cwd
        elif row is not None:  # replaced, shrunk or rewritten: from its start again
            _drop(conn, row.id)
            conn.execute("DELETE FROM files WHERE id = ?", (row.id,))
            row = None
        at, tail, done = start, b"", False
        while deadline is None or time.monotonic() < deadline:
            data = _read_lines_from(fd, at, _CHUNK)
            if at == 0:
                session_id, cwd = _session_of(data)
            if row is None:
                row = _Known(int(conn.execute("INSERT INTO files (path) VALUES (?) RETURNING id",
                                              (_stored(name),)).fetchone()[0]),
                             0, 0, 0, 0, 0, b"", session_id, cwd)
            if not data or session_id is None:  # the end, or not a session: nothing to index
                done = True
                break
            _insert(conn, row.id, at, data)
            at += len(data)
            tail = data[-_TAIL:]
    finally:
        os.close(fd)
    if row is not None:
        conn.execute("UPDATE files SET dev = ?, ino = ?, size = ?, mtime_ns = ?, indexed_to = ?, "
                     "tail = ?, session_id = ?, cwd = ?, branch = NULL WHERE id = ?",
                     (st.st_dev, st.st_ino, st.st_size if done else at, st.st_mtime_ns, at,
                      tail or (row.tail if start else b""), session_id, cwd, row.id))
    if done:
        return None
    return Pending(path, at, session_id if at else None, cwd if at else None, st.st_mtime_ns,
                   st.st_size)


_CHUNK = 1 << 23
"""Bytes indexed at a time: what bounds a build's memory on a huge file."""
PARALLEL_SCAN_BYTES = 256 << 20
"""Bytes left to scan from which a search shares them with helper processes, when allowed:
a helper starts in about 0.13 s, in which this process scans some 250 MB for a rare phrase
(Hyperscan passes over most reads) but only some 40 MB for a word most lines hold. Measured
(one process against one helper, a free CPU, the 1,000-session folder's newest files): the
rare phrase breaks even at about 700 MB (256 MB: 200 -> 285 ms), the common word at 64-128
MB (256 MB: 1,126 -> 955 ms; 800 MB: 2,259 -> 1,567 ms). One threshold for both (a scan
cannot tell a word's commonness first): from here a helper costs the phrase at most its start
(within 2x ``grep -r -F`` of the same bytes), below it up to 3x."""
HELPER_START = 24 << 20
"""About what this process scans while a helper starts: its share is larger by this much."""
_SCAN_CHUNK = 1 << 18
"""Bytes scanned at a time: a buffer this small is reused from the process's heap and stays
in the CPU's cache between the passes over it (reading 8 MiB at a time cost 2-3 times as
much: fresh pages for each buffer)."""


def _read_lines_from(fd: int, start: int, size: int) -> bytes:
    """The whole lines from ``start``, about ``size`` bytes of them (more if one line is
    longer); empty when no whole line is there."""
    data = os.pread(fd, max(0, min(size, os.fstat(fd).st_size - start)), start)  # (a buffer
    end = data.rfind(b"\n") + 1                                    # of the size it will hold)
    while not end and len(data) >= size:  # a line longer than a chunk (or than several)
        more = os.pread(fd, size, start + len(data))
        if not more:
            break
        cut = more.find(b"\n")
        data += more if cut < 0 else more[:cut + 1]
        end = len(data) if cut >= 0 else 0
    return data[:end]


def _insert(conn: sqlite3.Connection, file_id: int, offset: int, data: bytes) -> None:
    """The search rows of the entry lines of ``data`` (whole lines, from ``offset``)."""
    entries: list[tuple[int, int, int, int, str, int, int, str | None]] = []
    bodies: list[tuple[int, str]] = []
    count = conn.execute("SELECT next FROM counter").fetchone()[0]
    for line in data.split(b"\n")[:-1]:
        doc = document(line) if line.startswith(b"{") else None
        if doc is not None:
            row_id = min(max(doc.ms // 60_000, 0), _MINUTES - 1) << _SHIFT | count
            size, counts = entry_terms(doc.text)
            repeated = {word: count for word, count in counts.items() if count > 1}
            entries.append((row_id, file_id, offset, len(line), doc.role, doc.ms, size,
                            msgspec.json.encode(repeated).decode() if repeated else None))
            bodies.append((row_id, fts_body(counts)))
            count += 1
        offset += len(line) + 1
    conn.execute("UPDATE counter SET next = ?", (count,))
    conn.executemany("INSERT INTO entries (id, file, offset, length, role, ms, size, counts) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", entries)
    conn.executemany("INSERT INTO body (rowid, text) VALUES (?, ?)", bodies)


def _session_of(data: bytes, stop: int | None = None) -> tuple[str | None, str | None]:
    """The id and cwd of the first line of ``data[:stop]`` that parses, if it is a session
    header (pi's rule)."""
    start = 0
    stop = len(data) if stop is None else stop
    while start < stop:
        end = data.find(b"\n", start, stop)
        end = stop if end < 0 else end
        line = data[start:end]
        start = end + 1
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


def _scan(pending: list[Pending], query: Query, *, role: str | None, since: int,
          cwd: str | None) -> list[Found]:
    """The most recent candidates in the bytes the index does not hold, shared with helper
    processes when there are many and the caller allows them (:mod:`sessiontree._helpers`:
    ``SESSIONTREE_PROCESSES``, or the command-line tool); each process keeps its own most
    recent, and the most recent of them all are those of one scan."""
    words = query.words()
    left = sum(item.size - item.start for item in pending)
    count = _helpers.processes() if left >= PARALLEL_SCAN_BYTES else 1
    shares = _shares(pending, count)
    task = _task_encoder.encode([words, role, since, cwd]).decode()
    found = [item for part in _helpers.shared(
        "sessiontree.stores._jsonl_search:_scan_share", shares,
        # (each path an argument of its own: a name that is not UTF-8 is not JSON's text)
        lambda share: [task, *(argument for item in share for argument in (
            item.path, _task_encoder.encode(item[1:]).decode()))],
        lambda share: _scan_files(share, words, role=role, since=since, cwd=cwd),
        lambda answer, _: _found_decoder.decode(answer)) for item in part]
    found.sort(key=lambda item: item.key)
    return found[:CANDIDATES]


def _shares(pending: list[Pending], count: int) -> list[list[Pending]]:
    """``pending`` cut into at most ``count`` shares of about as many bytes, each newest
    file first: the first (this process's) larger by what it scans while the helpers start,
    and no helper's empty."""
    shares: list[list[Pending]] = [[] for _ in range(count)]
    loads = [HELPER_START if n else 0 for n in range(count)]
    for item in sorted(pending, key=lambda item: -item.mtime_ns):
        least = loads.index(min(loads))
        shares[least].append(item)
        loads[least] += item.size - item.start
    return shares[:1] + [share for share in shares[1:] if share]


def _scan_files(pending: list[Pending], words: list[str], *, role: str | None, since: int,
                cwd: str | None) -> list[Found]:
    """The most recent candidates in these bytes, newest files first (the older ones then
    have fewer lines to decode)."""
    with _LineReader() as read:
        recent = Recent(words, role=role, since=since, read=read)
        _scan_into(recent, pending, cwd)
        return recent.best()


def _scan_into(recent: Recent, pending: list[Pending], cwd: str | None) -> None:
    """Each file's bytes not indexed yet, a chunk at a time, into ``recent``."""
    for left in pending:
        try:
            fd = os.open(left.path, os.O_RDONLY)
        except OSError:
            continue
        try:
            at, session_id, session_cwd = left.start, left.session_id, left.cwd
            while True:
                data = os.pread(fd, _SCAN_CHUNK, at)  # (its last line may be cut: the
                end = data.rfind(b"\n") + 1           # scan judges whole lines only)
                if not end:  # the end, or a line longer than a chunk
                    data = _read_lines_from(fd, at, _SCAN_CHUNK)
                    end = len(data)
                    if not end:
                        break
                if at == 0:
                    session_id, session_cwd = _session_of(data, end)  # (no copy of the chunk)
                if session_id is None or (cwd is not None and session_cwd != cwd):
                    break
                recent.scan(data, at, session_id, left.path, session_cwd or "")
                at += end
        finally:
            os.close(fd)


class _LineReader:
    """A scan's lines read back by place to be judged (:class:`Recent`): the whole line of
    that length there, or ``None`` (the file is gone or changed); the file read last is kept
    open (the most recent lines are often of one session)."""

    def __init__(self) -> None:
        self._path: str | None = None
        self._fd = -1

    def __call__(self, path: str, place: int, length: int) -> bytes | None:
        try:
            if path != self._path:
                self.__exit__()
                self._fd = os.open(path, os.O_RDONLY)
                self._path = path
            data = os.pread(self._fd, length + 1, place)
        except OSError:
            return None
        return data[:length] if len(data) == length + 1 and data[length] == 0x0A else None

    def __enter__(self) -> _LineReader:
        return self

    def __exit__(self, *_: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._path = -1, None


def _scan_share(task: str, *items: str) -> None:
    """A helper process: the most recent candidates of its share of the files, as
    MessagePack (``task``: the words, role, since and cwd; ``items``: each file's path, then
    the rest of its :class:`Pending`). A hit in a file whose name is not UTF-8 cannot be
    answered (MessagePack's text is UTF-8): the helper answers nothing, which its caller cannot
    read, and scans the share itself (an expected case: no error said)."""
    words, role, since, cwd = msgspec.json.decode(task)
    share = [Pending(path, *msgspec.json.decode(rest))
             for path, rest in zip(items[::2], items[1::2])]
    try:
        answer = _found_encoder.encode(_scan_files(share, words, role=role, since=since,
                                                   cwd=cwd))
    except UnicodeEncodeError:
        return
    _helpers.reply(answer)


_task_encoder = msgspec.json.Encoder()
_found_encoder = msgspec.msgpack.Encoder()
_found_decoder = msgspec.msgpack.Decoder(list[Found])


def search(root: str | os.PathLike[str], query: Query, *, role: str | None, since: int,
           cwd: str | None, limit: int, branch: Callable[[str], set[str]]) -> list[SearchHit]:
    """The best hits among the folder's sessions (:func:`sessiontree._search.best_first`):
    the index refreshed first for at most :data:`INDEX_BUDGET` seconds, the bytes it does not
    hold yet scanned (:mod:`sessiontree._search_scan`); ``branch(path)`` gives the ids on a
    session's current branch, kept in the index until the file changes."""
    location = os.path.abspath(root)
    words = query.words()
    with _opened(location, INDEX_BUDGET) as (conn, pending):
        counts_sql, counts_params = _counts(words)
        rows = _most_recent(conn, conn.execute(_QUERY.format(counts=counts_sql), {
            "match": fts_query(words)["match"], **counts_params, "since": since, "role": role,
            "cwd": cwd}))
        found: dict[tuple[str, int], tuple[Bounded, int | bytes, int | None]] = {}
        if rows:  # (by columns: a few C loops, no Python call a row)
            ids, names, cwds, offsets, lengths, times, _, sizes, counts = zip(*rows)
            paths = {name: os.path.join(location, os.fsdecode(name)) for name in set(names)}
            sessions = list(map(paths.__getitem__, names))
            found = dict(zip(zip(sessions, offsets), zip(map(_bounded, zip(
                ids, sessions, [folder or "" for folder in cwds], offsets, times,
                row_bounds(query, counts, sizes))), lengths, sizes)))
        scanned = _scan(pending, query, role=role, since=since, cwd=cwd) if pending else []
        for item in scanned:
            place = item.key[2]  # (its line in hand: read first, whatever its relevance)
            found[(item.session, place)] = (Bounded(item.key[1], item.session, item.cwd, place,
                                                    -item.key[0], math.inf), item.line, None)
        best = [row for row, _, _ in found.values()]  # (the index's rows come in this order)
        if scanned:
            best = sorted(best, key=lambda row: (-row.ms, row.session_id, row.place)
                          )[:CANDIDATES]
        computed: dict[str, set[str]] = {}
        descriptors: dict[str, tuple[int, bool] | None] = {}
        files: dict[str, Any] = {}

        def file_row(path: str) -> Any:
            """The file's row in the index (its stamp, what is indexed, its branch)."""
            if path not in files:
                files[path] = conn.execute(
                    "SELECT dev, ino, size, mtime_ns, indexed_to, branch FROM files "
                    "WHERE path = ?", (_stored(os.path.relpath(path, location)),)).fetchone()
            return files[path]

        def read(batch: Sequence[Bounded]) -> list[Candidate]:
            out: list[Candidate] = []
            for row in batch:
                _, line, size = found[row.session, row.place]
                if isinstance(line, int):  # its length: read from its file
                    if row.session not in descriptors:
                        descriptors[row.session] = _descriptor(row.session,
                                                               file_row(row.session))
                    opened = descriptors[row.session]
                    if opened is None:
                        continue
                    line = os.pread(opened[0], line, row.place)
                    if not opened[1]:
                        size = None
                out.append(Candidate(row.session_id, row.session, row.cwd, row.place, line,
                                     size))
            return out

        def current(candidate: Candidate) -> set[str]:
            path = candidate.session
            stored = file_row(path)
            if stored is not None and stored[5] is not None:
                return set(_ids.decode(stored[5]))
            ids = computed[path] = branch(path)
            return ids

        try:
            hits = best_first(best, query, read, role=role, since=since, limit=limit,
                              on_branch=branch_flags(current))
        finally:
            for opened in descriptors.values():
                if opened is not None:
                    os.close(opened[0])
        if computed:
            try:
                with conn:
                    conn.executemany("UPDATE files SET branch = ? WHERE path = ?",
                                     [(_ids_encoder.encode(sorted(ids)),
                                       _stored(os.path.relpath(path, location)))
                                      for path, ids in computed.items()])
            except sqlite3.OperationalError:
                pass  # busy or read-only: computed again next time
    return hits


def _descriptor(path: str, row: Any) -> tuple[int, bool] | None:
    """The session file at ``path`` opened (``None``: it cannot be), and whether it is the
    file as its index ``row`` holds it, all of it (device, inode, size and mtime the row's):
    then each of its entries' rows holds the size of the very line it reads (its text's
    pieces, which a judge need not count again)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    st = os.fstat(fd)
    return fd, row is not None and tuple(row[:5]) == (st.st_dev, st.st_ino, st.st_size,
                                                      st.st_mtime_ns, st.st_size)


_bounded = functools.partial(tuple.__new__, Bounded)
"""A :class:`Bounded` from a tuple of its fields, made in C."""
_ID_PLACE = operator.itemgetter(0, 3)
_TIME = operator.itemgetter(5)


def _most_recent(conn: sqlite3.Connection, cursor: sqlite3.Cursor) -> list[Any]:
    """The :data:`CANDIDATES` most recent rows of :data:`_QUERY` (most recent minute first),
    each with its file's session id, path and cwd in place of the file's id, in (time,
    session id, place) order: every row of each minute read until there are enough (within a
    minute the order is not the time's)."""
    rows = cursor.fetchmany(CANDIDATES)
    if len(rows) == CANDIDATES:
        last = rows[-1][4]
        while True:
            batch = cursor.fetchmany(64)
            more = list(itertools.takewhile(lambda row: row[4] >= last, batch))
            rows += more
            if len(more) < 64:
                break
    cursor.close()
    if not rows:
        return rows
    ids, *rest = zip(*rows)  # (by columns: C loops, no Python call a row)
    distinct = list(set(ids))
    files = {row[0]: row[1:] for row in conn.execute(
        _FILES, (msgspec.json.encode(distinct).decode(),))}
    if len(files) < len(distinct):  # (rows of a file whose row is gone: left out, as a join)
        rows = [row for row in rows if row[0] in files]
        if not rows:
            return rows
        ids, *rest = zip(*rows)
    sessions = list(map(files.__getitem__, ids))
    rows = list(zip(*zip(*sessions), *rest))
    rows.sort(key=_ID_PLACE)  # (two stable sorts by C keys: no tuple made a row)
    rows.sort(key=_TIME, reverse=True)
    return rows[:CANDIDATES]


def build(root: str | os.PathLike[str], stop: Callable[[], bool] | None = None) -> None:
    """Bring the folder's index up to date with every file, however long it takes (what a
    search does only for :data:`INDEX_BUDGET` seconds), committing every second or so;
    ``stop()``, asked before each second, ends it early (what was indexed is kept)."""
    with _opened(os.path.abspath(root), None, stop):
        pass


_ids = msgspec.msgpack.Decoder(list[str])
_ids_encoder = msgspec.msgpack.Encoder()
