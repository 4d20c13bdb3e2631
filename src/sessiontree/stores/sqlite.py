"""Many sessions in one SQLite file (stdlib ``sqlite3``, WAL): :class:`SqliteStore`, and its
async twin :class:`AsyncSqliteStore` (the same calls in a worker thread).

Invariants:
* The database file is created ``0600`` (its ``-wal`` and ``-shm`` files inherit that) in a
  folder created ``0700``; the schema is set up, idempotently, when the store opens.
* Writers serialize with ``BEGIN IMMEDIATE`` (other processes wait up to ``timeout`` seconds);
  readers never wait for writers (WAL). ``durable=True`` is ``synchronous=FULL`` (fsync at each
  commit); the default ``NORMAL`` loses nothing when a process dies, only on power loss.
* One connection per store, used by one thread at a time (a lock); open one store per process.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .. import _fs
from ..entries import AnyEntry, SessionHeader
from ..errors import DuplicateId, ReadOnlyStore, SessionLocked, SessionNotFound, StoreUnavailable
from ._sql import SqlStore
from ._sql_common import check_schema, dialect
from .base import SessionListing

if TYPE_CHECKING:
    from .._search import SearchHit

__all__ = ["AsyncSqliteStore", "SqliteStore"]

_DIALECT = dialect("sqlite")


class SqliteStore(SqlStore):
    """Sessions in one SQLite database file. Open with :meth:`open` (a context manager)."""

    dialect = _DIALECT

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False,
                 create: bool = True, durable: bool = False, timeout: float = 30.0) -> None:
        """Open (creating it if ``create`` and not ``read_only``) the database at ``path``.

        Args:
            path: the database file.
            read_only: refuse every write (:class:`~sessiontree.errors.ReadOnlyStore`).
            create: create the file if it does not exist.
            durable: fsync at every commit.
            timeout: seconds to wait for another process's write transaction.

        Raises:
            SessionNotFound: no such file, and ``read_only`` or not ``create``.
            StoreUnavailable: the file is not a database.
        """
        self.path = os.path.abspath(os.fspath(path))
        self.read_only = read_only
        self.durable = durable
        self._lock = threading.RLock()
        if (read_only or not create) and not os.path.exists(self.path):
            raise SessionNotFound("no such database file (opened "
                                  f"{'read-only' if read_only else 'without create'}: nothing "
                                  "was created)", path=self.path)
        if read_only:
            target = f"file:{quote(self.path)}?mode=ro"
        else:
            if create:
                _create_private(self.path)
            target = f"file:{quote(self.path)}?mode=rw"
        self._conn: sqlite3.Connection | None = None

        def connect() -> None:
            self._conn = conn = sqlite3.connect(target, uri=True, isolation_level=None,
                                                check_same_thread=False, timeout=timeout)
            if not read_only:
                try:  # a newer schema refused before the journal mode, which writes the file
                    version = conn.execute(self.dialect["version"]).fetchone()[0]
                    check_schema(version, self.dialect, self.url)
                except sqlite3.OperationalError:
                    pass  # no tables yet (or busy: the setup's transaction checks again)
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")

        self._start(connect)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, read_only: bool = False, create: bool = True,
             durable: bool = False, timeout: float = 30.0) -> SqliteStore:
        """The store at ``path``; use it as a context manager (``with SqliteStore.open(p) as s``).
        See :meth:`__init__` for the arguments."""
        return cls(path, read_only=read_only, create=create, durable=durable, timeout=timeout)

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def setup(self) -> int:
        """Apply the schema migrations this database lacks (idempotent, one transaction).

        Returns:
            The schema version.
        """
        self._writable()
        with self._transaction() as conn:
            return self._migrate(conn)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.IntegrityError as exc:
            raise DuplicateId(f"already stored: {exc}", path=self.path) from exc
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise SessionLocked(f"another process kept the database busy: {text}",
                                    path=self.path) from exc
            if "no such table" in text:
                raise SessionNotFound("no sessions here: this database holds no sessiontree "
                                      "tables yet (the first session stored creates them)",
                                      path=self.path) from exc
            if "readonly" in text:
                raise ReadOnlyStore(f"the database is read-only: {text}", path=self.path) from exc
            raise StoreUnavailable(text, path=self.path) from exc
        except sqlite3.DatabaseError as exc:
            raise StoreUnavailable(f"not a usable database: {exc}", path=self.path) from exc

    @contextmanager
    def _reading(self) -> Iterator[Any]:
        with self._lock:
            if self._conn is None:
                raise StoreUnavailable("the store is closed", path=self.path)
            yield self._conn

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._lock, self._errors():
            conn = self._conn
            if conn is None:
                raise StoreUnavailable("the store is closed", path=self.path)
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def replace_line(self, session_id: str, entry_id: str, line: bytes) -> None:
        """As :meth:`SqlStore.replace_line`, with SQLite's ``secure_delete`` on meanwhile (the
        old line's bytes are overwritten with zeros, not left in free space), and the
        write-ahead log checkpointed and truncated after."""
        with self._reading() as conn:
            conn.execute("PRAGMA secure_delete = ON")
        try:
            super().replace_line(session_id, entry_id, line)
        finally:
            with self._reading() as conn:
                conn.execute("PRAGMA secure_delete = OFF")

    def _scrub(self) -> None:
        """The search index's segments merged (FTS5 keeps a deleted row's words until then),
        then the write-ahead log checkpointed and truncated."""
        with self._errors(), self._reading() as conn:
            conn.execute("INSERT INTO sessiontree_search (sessiontree_search) VALUES ('optimize')")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

    def __enter__(self) -> SqliteStore:
        return self


def _create_private(path: str) -> None:
    """Create the folder (``0700``) and the database file (``0600``) if they do not exist."""
    _fs.make_private_dirs(os.path.dirname(path))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _fs.FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


class AsyncSqliteStore:
    """:class:`SqliteStore` for async code: the same methods as coroutines, each run in a
    worker thread (``asyncio.to_thread``); ``aclose`` instead of ``close``."""

    def __init__(self, store: SqliteStore) -> None:
        self.sync = store

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, read_only: bool = False, create: bool = True,
             durable: bool = False, timeout: float = 30.0) -> AsyncSqliteStore:
        """The store at ``path``; ``async with AsyncSqliteStore.open(p) as store``."""
        return cls(SqliteStore(path, read_only=read_only, create=create, durable=durable,
                               timeout=timeout))

    async def create(self, header: SessionHeader) -> str:
        return await asyncio.to_thread(self.sync.create, header)

    async def append(self, session_id: str,
                     entries: Sequence[AnyEntry | Mapping[str, Any]]) -> None:
        await asyncio.to_thread(self.sync.append, session_id, entries)

    async def read(self, session_id: str) -> list[AnyEntry]:
        return await asyncio.to_thread(lambda: list(self.sync.read(session_id)))

    async def list_sessions(self, *, cwd: str | None = None,
                            limit: int | None = None) -> list[SessionListing]:
        return await asyncio.to_thread(self.sync.list_sessions, cwd=cwd, limit=limit)

    async def delete(self, session_id: str) -> None:
        await asyncio.to_thread(self.sync.delete, session_id)

    async def search(self, query: str, *, cwd: str | None = None, role: str | None = None,
                     since: datetime | date | None = None, limit: int = 20) -> list[SearchHit]:
        return await asyncio.to_thread(self.sync.search, query, cwd=cwd, role=role, since=since,
                                       limit=limit)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncSqliteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
