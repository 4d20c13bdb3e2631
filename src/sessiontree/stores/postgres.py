"""Sessions in PostgreSQL (psycopg 3 with a connection pool; extra ``[postgres]``):
:class:`PostgresStore`.

Invariants:
* The schema is set up by :meth:`PostgresStore.setup` when the store opens: versioned
  migrations in ``sessiontree_migrations``, each applied in one transaction under an advisory
  lock, so concurrent first starts apply each migration exactly once.
* ``session_id`` leads every key; every statement except the listing filters on one
  ``session_id`` (single-shard on Citus, see the README's Storage section).
* Appends lock the session's row (``SELECT ... FOR UPDATE``), so processes appending to one
  session serialize; each append sends ``NOTIFY sessiontree, '<session id>'`` on commit, which
  :meth:`PostgresStore.follow` waits on.
* A lost connection raises :class:`~sessiontree.errors.StoreUnavailable` and is dropped from
  the pool (so are the idle ones that died with it); the next call reconnects.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

try:
    import psycopg
    from psycopg import sql
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    from ..errors import MissingExtra

    raise MissingExtra("PostgresStore requires the 'postgres' extra: pip install "
                       "'sessiontree[postgres]'") from exc

from ..errors import (
    DuplicateId,
    InvalidLocation,
    ReadOnlyStore,
    SessionNotFound,
    SessionTreeError,
    StoreUnavailable,
)
from .. import _json
from ..entries import AnyEntry, SessionHeader
from ._sql import SqlStore
from ._sql_common import (
    Flow,
    SessionState,
    check_session_id,
    dialect,
    listing_from_row,
    lock_flow,
    migrate_flow,
    write_flow,
)
from .base import SessionListing

__all__ = ["AsyncPostgresStore", "PostgresStore", "split_schema", "translate"]

T = TypeVar("T")

_DIALECT = dialect("postgres")
_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_SETUP_LOCK = 0x5E5510_7EE  # pg_advisory_xact_lock key: one setup at a time per database


def split_schema(dsn: str) -> tuple[str, str | None]:
    """``(dsn without our schema=..., schema)`` for a ``postgresql://...?schema=NAME`` URL.

    Raises:
        InvalidLocation: a schema name that is not a plain identifier.
    """
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    if schema is not None and not _SCHEMA.fullmatch(schema):
        raise InvalidLocation(f"not a plain schema name: {schema!r}")
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, rest, "")), schema


def translate(exc: BaseException, url: str) -> SessionTreeError | None:
    """The sessiontree error for a psycopg or pool error (``None``: not one we translate)."""
    if isinstance(exc, psycopg.errors.UniqueViolation):
        return DuplicateId(f"already stored: {exc.diag.message_detail or exc}", path=url)
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return SessionNotFound("no sessiontree tables in this database or schema (open it once "
                               "without read_only to create them)", path=url)
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return ReadOnlyStore(f"the database refused a write: {exc}", path=url)
    if isinstance(exc, (psycopg.OperationalError, PoolTimeout)):
        return StoreUnavailable(f"the database connection failed: {exc}; retry when the server "
                                "is back", path=url)
    if isinstance(exc, psycopg.InterfaceError):
        return StoreUnavailable(f"the database connection is unusable: {exc}", path=url)
    return None


def _failure(exc: Exception, url: str, pool: ConnectionPool[Any] | AsyncConnectionPool[Any] | None
             ) -> tuple[BaseException, bool]:
    """The error to raise for a driver error, and whether the pool's idle connections should be
    checked (a lost connection: the others may have died with it)."""
    error = translate(exc, url)
    if error is None:
        return exc, False
    return error, isinstance(error, StoreUnavailable) and pool is not None and not pool.closed


def _settings(dsn: str, schema: str | None, read_only: bool, durable: bool
              ) -> tuple[str, str | None, dict[str, Any]]:
    """The libpq DSN, the schema, and the connection keyword arguments of a store."""
    dsn, from_url = split_schema(dsn)
    schema = schema or from_url
    if schema is not None and not _SCHEMA.fullmatch(schema):
        raise InvalidLocation(f"not a plain schema name: {schema!r}")
    options = []
    if schema is not None:
        options.append(f"-c search_path={schema}")
    if read_only:
        options.append("-c default_transaction_read_only=on")
    if not durable:
        options.append("-c synchronous_commit=off")
    kwargs: dict[str, Any] = {"autocommit": True}
    if options:
        kwargs["options"] = " ".join(options)
    return dsn, schema, kwargs


def _setup_statements(schema: str | None) -> list[tuple[sql.Composable | str, tuple[Any, ...]]]:
    """One setup at a time per database (an advisory lock), then the schema if one is named."""
    statements: list[tuple[sql.Composable | str, tuple[Any, ...]]] = [
        ("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))]
    if schema is not None:
        statements.append((sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
            sql.Identifier(schema)), ()))
    return statements


def _public_url(dsn: str, schema: str | None) -> str:
    base = _redacted(dsn)
    if schema is None:
        return base
    return base + ("&" if urlsplit(base).query else "?") + f"schema={schema}"


def _redacted(dsn: str) -> str:
    parts = urlsplit(dsn)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


class PostgresStore(SqlStore):
    """Sessions in a PostgreSQL database. Open with :meth:`from_url` (a context manager)."""

    dialect = _DIALECT

    def __init__(self, dsn: str, *, schema: str | None = None, read_only: bool = False,
                 durable: bool = True, pool_size: int = 8, timeout: float = 10.0) -> None:
        """Connect (lazily, through a pool) and set the schema up.

        Args:
            dsn: a libpq connection string or ``postgresql://`` URL; a ``schema=NAME`` query
                parameter selects (and creates) a schema, as ``schema`` does.
            schema: the schema for the tables (default: the server's ``search_path``).
            read_only: refuse every write (also at the server: read-only transactions).
            durable: ``False`` turns ``synchronous_commit`` off (faster; a server crash may
                lose the last commits, a client crash never does).
            pool_size: at most this many connections.
            timeout: seconds to wait for a connection.

        Raises:
            StoreUnavailable: the server cannot be reached.
            InvalidLocation: a bad schema name.
        """
        self._dsn, self.schema, self._kwargs = _settings(dsn, schema, read_only, durable)
        self.read_only = read_only
        self.durable = durable
        self._timeout = timeout
        self._listener: psycopg.Connection[Any] | None = None
        self._pool: ConnectionPool[Any] | None = ConnectionPool(
            self._dsn, min_size=1, max_size=max(1, pool_size), kwargs=self._kwargs, open=False,
            timeout=timeout, name="sessiontree")
        pool = self._pool
        self._start(lambda: pool.open(wait=True, timeout=timeout))

    @classmethod
    def from_url(cls, dsn: str, *, schema: str | None = None, read_only: bool = False,
                 durable: bool = True, pool_size: int = 8, timeout: float = 10.0
                 ) -> PostgresStore:
        """The store at ``dsn``; use it as a context manager. See :meth:`__init__`."""
        return cls(dsn, schema=schema, read_only=read_only, durable=durable,
                   pool_size=pool_size, timeout=timeout)

    @property
    def url(self) -> str:
        return _public_url(self._dsn, self.schema)

    def setup(self) -> int:
        """Create the schema if named, then apply the migrations it lacks (idempotent).

        Returns:
            The schema version.
        """
        self._writable()
        with self._transaction() as conn:
            for statement, params in _setup_statements(self.schema):
                conn.execute(statement, params)
            return self._migrate(conn)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except (psycopg.Error, PoolTimeout) as exc:
            error, check = _failure(exc, self.url, self._pool)
            if check:
                self._pool.check()  # type: ignore[union-attr]  # drop the ones that died too
            raise error from (None if error is exc else exc)

    def _connection(self) -> Any:
        if self._pool is None:
            raise StoreUnavailable("the store is closed", path=self.url)
        return self._pool.connection()

    @contextmanager
    def _reading(self) -> Iterator[Any]:
        with self._connection() as conn:
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._errors(), self._connection() as conn, conn.transaction():
            yield conn

    def _wait_for_change(self, session_id: str, timeout: float) -> None:
        with self._errors():
            listener = self._listen()
            for note in listener.notifies(timeout=timeout, stop_after=1):
                if note.payload == session_id:
                    return

    def _listen(self) -> psycopg.Connection[Any]:
        if self._listener is None or self._listener.closed:
            self._listener = psycopg.connect(self._dsn, **self._kwargs)
            self._listener.execute("LISTEN sessiontree")
        return self._listener

    def follow(self, session_id: str, after_seq: int, **kwargs: Any) -> Any:
        with self._errors():
            self._listen()  # before the first query: no notification falls in between
        return super().follow(session_id, after_seq, **kwargs)

    def close(self) -> None:
        """Close the pool and the listening connection (idempotent)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()

    def __enter__(self) -> PostgresStore:
        return self


class AsyncPostgresStore:
    """:class:`PostgresStore` for async code: the same methods as coroutines over psycopg's
    async connection pool, the same statements and transactions (:mod:`._sql_common`); ``aclose``
    instead of ``close``. Open with ``async with AsyncPostgresStore.from_url(dsn) as store``.
    """

    dialect = _DIALECT

    def __init__(self, dsn: str, *, schema: str | None = None, read_only: bool = False,
                 durable: bool = True, pool_size: int = 8, timeout: float = 10.0) -> None:
        """See :class:`PostgresStore`; nothing connects until :meth:`open` (or ``async with``)."""
        self._dsn, self.schema, self._kwargs = _settings(dsn, schema, read_only, durable)
        self.read_only = read_only
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self._pool: AsyncConnectionPool[Any] | None = AsyncConnectionPool(
            self._dsn, min_size=1, max_size=max(1, pool_size), kwargs=self._kwargs, open=False,
            timeout=timeout, name="sessiontree-async")
        self._timeout = timeout

    @classmethod
    def from_url(cls, dsn: str, **options: Any) -> AsyncPostgresStore:
        """The store at ``dsn`` (not connected yet: ``async with`` or ``await store.open()``)."""
        return cls(dsn, **options)

    @property
    def url(self) -> str:
        return _public_url(self._dsn, self.schema)

    def session_url(self, session_id: str) -> str:
        return f"{self.url}#{session_id}"

    async def open(self) -> AsyncPostgresStore:
        """Connect and set the schema up (idempotent)."""
        try:
            async with self._errors():
                await self._connection_pool().open(wait=True, timeout=self._timeout)
            if not self.read_only:
                await self.setup()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aenter__(self) -> AsyncPostgresStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _connection_pool(self) -> AsyncConnectionPool[Any]:
        if self._pool is None:
            raise StoreUnavailable("the store is closed", path=self.url)
        return self._pool

    @asynccontextmanager
    async def _errors(self) -> AsyncIterator[None]:
        try:
            yield
        except (psycopg.Error, PoolTimeout) as exc:
            error, check = _failure(exc, self.url, self._pool)
            if check:
                await self._pool.check()  # type: ignore[union-attr]
            raise error from (None if error is exc else exc)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Any]:
        async with self._errors(), self._connection_pool().connection() as conn, \
                conn.transaction():
            yield conn

    async def _drive(self, flow: Flow[T], conn: Any) -> T:
        result: Any = None
        try:
            while True:
                step = flow.send(result)
                sql_text = self.dialect[step.name]
                if step.fetch == "many":
                    async with conn.cursor() as cursor:
                        await cursor.executemany(sql_text, step.params)
                    result = None
                    continue
                cursor = await conn.execute(sql_text, step.params)
                result = await cursor.fetchone() if step.fetch == "one" else \
                    await cursor.fetchall() if step.fetch == "all" else None
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _query(self, name: str, params: dict[str, Any]) -> list[Any]:
        async with self._errors(), self._connection_pool().connection() as conn:
            cursor = await conn.execute(self.dialect[name], params)
            return list(await cursor.fetchall())

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStore("the store was opened read-only; nothing was written",
                                path=self.url)

    async def setup(self) -> int:
        """Create the schema if named, then apply the migrations it lacks (idempotent)."""
        self._writable()
        async with self._transaction() as conn:
            for statement, params in _setup_statements(self.schema):
                await conn.execute(statement, params)
            return await self._drive(migrate_flow(self.dialect), conn)

    async def create(self, header: SessionHeader) -> str:
        """Register a new session; returns its id (see :meth:`PostgresStore.create`)."""
        self._writable()
        state = SessionState.new(_json.dumps(header))
        async with self._transaction() as conn:
            await conn.execute(self.dialect["insert_session"], state.params())
        return state.session_id

    async def append(self, session_id: str,
                     entries: Sequence[AnyEntry | Mapping[str, Any]]) -> None:
        """Append entries as they are, in one transaction under the session's lock.

        Raises:
            SessionNotFound: no such session.
            InvalidEntry: a parent that is not stored or earlier in ``entries``.
            DuplicateId: an id the session has.
        """
        self._writable()
        check_session_id(session_id)
        from ..session import entry_builtins

        lines = [_json.dumps(entry if isinstance(entry, Mapping) else entry_builtins(entry))
                 for entry in entries]
        async with self._transaction() as conn:
            state, _ = await self._drive(lock_flow(session_id, None, 0, self.url,
                                                   catch_up=False), conn)
            if state is None:
                raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
            await self._drive(write_flow(state, session_id, lines, None, notify=True), conn)

    async def read(self, session_id: str) -> list[AnyEntry]:
        """Every entry of a session in append order."""
        from ..session import decode_line

        return [decode_line(line) for line in await self.lines(session_id)]

    async def lines(self, session_id: str) -> list[bytes]:
        """A session's entry lines, exact bytes, in append order.

        Raises:
            SessionNotFound: no such session.
        """
        if not await self._query("head", {"sid": check_session_id(session_id)}):
            raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
        rows = await self._query("all_lines", {"sid": session_id, "seq": 0, "limit": 2**62})
        return [bytes(row[0]) for row in rows]

    async def list_sessions(self, *, cwd: str | None = None,
                            limit: int | None = None) -> list[SessionListing]:
        """Sessions newest first, from the sessions table (see :meth:`PostgresStore.list_sessions`)."""
        params: dict[str, Any] = {"limit": limit if limit is not None else 2**62}
        if cwd is not None:
            params["cwd"] = cwd
        rows = await self._query("list" if cwd is None else "list_cwd", params)
        return [listing_from_row(row, self.session_url(row[0])) for row in rows]

    async def delete(self, session_id: str) -> None:
        """Remove a session and its entries, in one transaction."""
        self._writable()
        params = {"sid": check_session_id(session_id)}
        async with self._transaction() as conn:
            cursor = await conn.execute(self.dialect["lock"], params)
            if await cursor.fetchone() is None:
                raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
            await conn.execute(self.dialect["delete_entries"], params)
            await conn.execute(self.dialect["delete_session"], params)

    async def follow(self, session_id: str, after_seq: int = 0, *,
                     idle_timeout: float | None = None) -> AsyncIterator[bytes]:
        """Entry lines appended after ``after_seq``, as they land (woken by ``NOTIFY``), until
        ``idle_timeout`` seconds pass without one."""
        async with self._errors():
            if self._listener is None or self._listener.closed:
                self._listener = await psycopg.AsyncConnection.connect(self._dsn, **self._kwargs)
                await self._listener.execute("LISTEN sessiontree")
        listener = self._listener
        quiet_since = time.monotonic()
        while True:
            rows = await self._query("after_lines", {"sid": session_id, "seq": after_seq,
                                                     "limit": 1000})
            for row in rows:
                after_seq = row[0]
                yield bytes(row[11])
            if rows:
                quiet_since = time.monotonic()
                continue
            left = None if idle_timeout is None else idle_timeout - (time.monotonic() - quiet_since)
            if left is not None and left <= 0:
                return
            async with self._errors():
                async for note in listener.notifies(timeout=left, stop_after=1):
                    if note.payload == session_id:
                        break

    async def aclose(self) -> None:
        """Close the pool and the listening connection (idempotent)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
