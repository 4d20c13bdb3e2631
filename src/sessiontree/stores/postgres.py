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

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from datetime import date, datetime
from typing import Any, TypeVar
from math import ceil
from urllib.parse import urlsplit

try:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    from ..errors import MissingExtra

    raise MissingExtra("PostgresStore requires the 'postgres' extra: pip install "
                       "'sessiontree[postgres]'") from exc

from ..errors import (
    BlockingCallInLoop,
    DuplicateId,
    InvalidLocation,
    ReadOnlyStore,
    SessionNotFound,
    SessionTreeError,
    StoreUnavailable,
)
from .. import _json
from .._codec import decode_line, entry_builtins
from .._search import SearchHit
from ..entries import AnyEntry, SessionHeader
from ._address import redacted, take_option
from ._sql import SqlStore
from ._sql_common import (
    Flow,
    SessionState,
    check_schema,
    check_session_id,
    counted_listing,
    dialect,
    listing_from_row,
    lock_flow,
    migrate_flow,
    write_flow,
)
from .base import SessionListing

__all__ = ["AsyncPostgresStore", "PostgresStore", "ThreadView", "split_schema", "translate"]

T = TypeVar("T")

_DIALECT = dialect("postgres")
_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_SETUP_LOCK = 0x5E5510_7EE  # pg_advisory_xact_lock key: one setup at a time per database


def split_schema(dsn: str) -> tuple[str, str | None]:
    """``(dsn without our schema=..., schema)`` for a ``postgresql://...?schema=NAME`` URL; the
    other parameters stay as written (libpq decodes them: ``%20`` re-encoded as ``+`` would
    reach the server as ``+``).

    Raises:
        InvalidLocation: a schema name that is not a plain identifier, or PostgreSQL's own.
    """
    rest, schema = take_option(dsn, "schema")
    return rest, _checked_schema(schema, dsn) if schema is not None else None


def _checked_schema(schema: str, dsn: str) -> str:
    """``schema`` if sessiontree may create its tables there.

    Raises:
        InvalidLocation: not a plain identifier, or one of PostgreSQL's own schemas.
    """
    if not _SCHEMA.fullmatch(schema):
        raise InvalidLocation(f"not a plain schema name: {schema!r} (letters, digits and '_', "
                              "at most 63, not starting with a digit)", path=redacted(dsn))
    if schema.startswith("pg_") or schema == "information_schema":
        raise InvalidLocation(f"schema {schema} is PostgreSQL's own (pg_* and "
                              "information_schema are reserved): name another", path=redacted(dsn))
    return schema


def translate(exc: BaseException, url: str) -> SessionTreeError | None:
    """The sessiontree error for a psycopg or pool error (``None``: not one we translate)."""
    if isinstance(exc, psycopg.errors.UniqueViolation):
        return DuplicateId(f"already stored: {exc.diag.message_detail or exc}", path=url)
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return SessionNotFound("no sessions here: this database or schema holds no sessiontree "
                               "tables yet (the first session stored creates them)", path=url)
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return ReadOnlyStore(f"the database refused a write: {exc}", path=url)
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return ReadOnlyStore(f"the database refused: {exc.diag.message_primary or _one_line(exc)}"
                             " (this role lacks the privilege: grant it, or open the store "
                             "read-only, which creates nothing)", path=url)
    if isinstance(exc, psycopg.errors.InvalidSchemaName):
        return InvalidLocation(f"{exc.diag.message_primary or _one_line(exc)} (the search_path "
                               "names no schema that exists: create it, or name one with "
                               "?schema=NAME)", path=url)
    if isinstance(exc, (psycopg.OperationalError, PoolTimeout)):
        reason = _one_line(exc).removeprefix("connection failed: ")
        return StoreUnavailable(f"the database connection failed: {reason}; retry when the "
                                "server is back", path=url)
    if isinstance(exc, psycopg.InterfaceError):
        return StoreUnavailable(f"the database connection is unusable: {_one_line(exc)}",
                                path=url)
    return None


def _one_line(exc: BaseException) -> str:
    """The driver's message on one line (libpq adds hints on lines of their own)."""
    return " ".join(str(exc).split())


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
    """The libpq DSN, the schema, and the connection keyword arguments of a store (the
    address's own ``options`` first, ours after them).

    Raises:
        InvalidLocation: an address libpq cannot parse, or a bad schema name.
    """
    dsn, from_url = split_schema(dsn)
    schema = from_url if schema is None else _checked_schema(schema, dsn)
    try:
        given = conninfo_to_dict(dsn).get("options")
    except psycopg.ProgrammingError as exc:
        raise InvalidLocation(f"not a PostgreSQL address: {_one_line(exc)}",
                              path=redacted(dsn)) from None
    options = [str(given)] if given else []
    if schema is not None:
        options.append(f'-c search_path="{schema}"')  # quoted: the case is kept
    if read_only:
        options.append("-c default_transaction_read_only=on")
    if not durable:
        options.append("-c synchronous_commit=off")
    kwargs: dict[str, Any] = {"autocommit": True}
    if options:
        kwargs["options"] = " ".join(options)
    return dsn, schema, kwargs


def _first_connection(dsn: str, kwargs: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The keyword arguments of the connection made before the pool's: it fails at once with
    the server's reason (the pool retries until its timeout, logging each attempt), and waits at
    most ``timeout`` seconds unless the address sets ``connect_timeout``."""
    if "connect_timeout" in conninfo_to_dict(dsn):
        return kwargs
    return {**kwargs, "connect_timeout": max(2, ceil(timeout))}


def _setup_statements(schema: str | None) -> list[tuple[sql.Composable | str, tuple[Any, ...]]]:
    """One setup at a time per database (an advisory lock), then the schema if one is named."""
    statements: list[tuple[sql.Composable | str, tuple[Any, ...]]] = [
        ("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))]
    if schema is not None:
        statements.append((sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
            sql.Identifier(schema)), ()))
    return statements


def _public_url(dsn: str, schema: str | None) -> str:
    base = redacted(dsn)
    if schema is None:
        return base
    return base + ("&" if urlsplit(base).query else "?") + f"schema={schema}"


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
            timeout: seconds to wait for a connection (the first one, made before the pool's,
                fails at once when the server refuses or cannot be reached, and waits at most
                this long unless the address sets ``connect_timeout``).

        Raises:
            StoreUnavailable: the server cannot be reached, or refuses the connection.
            InvalidLocation: an address libpq cannot parse, a bad schema name, or one of
                PostgreSQL's own schemas.
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
        first = _first_connection(self._dsn, self._kwargs, timeout)

        def connect() -> None:
            psycopg.connect(self._dsn, **first).close()
            pool.open(wait=True, timeout=timeout)

        self._start(connect)

    @classmethod
    def open(cls, dsn: str, *, schema: str | None = None, read_only: bool = False,
             durable: bool = True, pool_size: int = 8, timeout: float = 10.0) -> PostgresStore:
        """The store at ``dsn``; use it as a context manager (``with PostgresStore.open(url)
        as store``), as every store's ``open``. See :meth:`__init__`."""
        return cls(dsn, schema=schema, read_only=read_only, durable=durable,
                   pool_size=pool_size, timeout=timeout)

    from_url = open  # (the earlier name)

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

    def _query_many(self, name: str, params: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """Sent in one round trip (psycopg's pipeline mode)."""
        with self._errors(), self._reading() as conn, conn.pipeline():
            cursors = [conn.execute(self.dialect[name], one) for one in params]
            return [list(cursor.fetchall()) for cursor in cursors]

    def _scrub(self) -> None:
        """Old row versions of a replaced line are vacuumed away at once (not left until
        autovacuum); the table's TOAST data is vacuumed with it."""
        with self._errors(), self._reading() as conn:
            for table in ("sessiontree_entries", "sessiontree_sessions", "sessiontree_search"):
                conn.execute(f"VACUUM {table}")

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


class _OpenOrConnect:
    """``AsyncPostgresStore.open(url)`` makes a store, as every store's ``open`` does
    (``async with AsyncPostgresStore.open(url) as store``); ``await store.open()`` on a store
    connects it, as it always did."""

    def __get__(self, store: AsyncPostgresStore | None, owner: type[AsyncPostgresStore]) -> Any:
        return owner.from_url if store is None else store.connect


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
        self.durable = durable
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self._listening: asyncio.Task[None] | None = None
        self._listen_lock = asyncio.Lock()  # one listening connection, however many followers
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._pool: AsyncConnectionPool[Any] | None = AsyncConnectionPool(
            self._dsn, min_size=1, max_size=max(1, pool_size), kwargs=self._kwargs, open=False,
            timeout=timeout, name="sessiontree-async")
        self._timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._view: ThreadView | None = None

    @classmethod
    def from_url(cls, dsn: str, **options: Any) -> AsyncPostgresStore:
        """The store at ``dsn`` (not connected yet: ``async with`` or ``await store.open()``)."""
        return cls(dsn, **options)

    open = _OpenOrConnect()

    @property
    def url(self) -> str:
        return _public_url(self._dsn, self.schema)

    def session_url(self, session_id: str) -> str:
        return f"{self.url}#{session_id}"

    async def connect(self) -> AsyncPostgresStore:
        """Connect and set the schema up (idempotent; ``await store.open()`` too). The store
        belongs to the running event loop from now on."""
        self._loop = asyncio.get_running_loop()
        try:
            async with self._errors():
                first = _first_connection(self._dsn, self._kwargs, self._timeout)
                await (await psycopg.AsyncConnection.connect(self._dsn, **first)).close()
                await self._connection_pool().open(wait=True, timeout=self._timeout)
            if not self.read_only:
                await self.setup()
            else:  # not migrated: read as its version is
                self.dialect = self.dialect.reading(await self._read_version())
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aenter__(self) -> AsyncPostgresStore:
        return await self.connect()

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

    async def _query_many(self, name: str, params: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """One statement for each of ``params``, sent in one round trip (pipeline mode)."""
        async with self._errors(), self._connection_pool().connection() as conn:
            async with conn.pipeline():
                cursors = [await conn.execute(self.dialect[name], one) for one in params]
                return [list(await cursor.fetchall()) for cursor in cursors]

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStore("the store was opened read-only; nothing was written",
                                path=self.url)

    async def _read_version(self) -> int:
        """The schema version of a database this store does not migrate (see
        :meth:`PostgresStore._read_version <sessiontree.stores._sql.SqlStore._read_version>`)."""
        try:
            version = int((await self._query("version", {}))[0][0])
        except SessionNotFound:
            return len(self.dialect.migrations)
        return check_schema(version, self.dialect, self.url)

    async def setup(self) -> int:
        """Create the schema if named, then apply the migrations it lacks (idempotent)."""
        self._writable()
        async with self._transaction() as conn:
            for statement, params in _setup_statements(self.schema):
                await conn.execute(statement, params)
            return await self._drive(migrate_flow(self.dialect, self.url), conn)

    async def create(self, header: SessionHeader) -> str:
        """Register a new session; returns its id (see :meth:`PostgresStore.create`)."""
        self._writable()
        state = SessionState.new(_json.dumps(header), self.dialect)
        async with self._transaction() as conn:
            await conn.execute(self.dialect["insert_session"], state.params(self.dialect))
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
        lines = [_json.dumps(entry if isinstance(entry, Mapping) else entry_builtins(entry))
                 for entry in entries]
        async with self._transaction() as conn:
            state, _ = await self._drive(lock_flow(session_id, None, 0, self.url,
                                                   catch_up=False), conn)
            if state is None:
                raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
            await self._drive(write_flow(state, session_id, lines, None, self.dialect,
                                         notify=True), conn)

    async def read(self, session_id: str) -> list[AnyEntry]:
        """Every entry of a session in append order."""
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
            params["cwd"] = self.dialect.text(cwd)  # as the column holds it
        rows = await self._query("list" if cwd is None else "list_cwd", params)
        listings = []
        for row in rows:
            listing = listing_from_row(row, self.session_url(row[0]))
            if listing.usage is None:  # not kept in the row: counted from the lines
                listing = counted_listing(listing, await self._query(
                    "all_lines", {"sid": row[0], "seq": 0, "limit": 2**62}))
            listings.append(listing)
        return listings

    async def delete(self, session_id: str) -> None:
        """Remove a session and its entries, in one transaction."""
        self._writable()
        params = {"sid": check_session_id(session_id)}
        async with self._transaction() as conn:
            cursor = await conn.execute(self.dialect["lock"], params)
            if await cursor.fetchone() is None:
                raise SessionNotFound(f"no session {session_id} in this store", path=self.url)
            for name in ("delete_search", "delete_search_keys", "delete_entries",
                         "delete_session"):
                await conn.execute(self.dialect[name], params)

    async def search(self, query: str, *, cwd: str | None = None, role: str | None = None,
                     since: datetime | date | None = None, limit: int = 20) -> list[SearchHit]:
        """Entries holding every word and "phrase" of ``query`` (see
        :meth:`PostgresStore.search <sessiontree.stores._sql.SqlStore.search>`), run in a
        worker thread over :meth:`blocking`."""
        view = self.blocking()
        return await asyncio.to_thread(view.search, query, cwd=cwd, role=role, since=since,
                                       limit=limit)

    async def follow(self, session_id: str, after_seq: int = 0, *,
                     idle_timeout: float | None = None) -> AsyncIterator[bytes]:
        """Entry lines appended after ``after_seq``, as they land, until ``idle_timeout``
        seconds pass without one (``None``: never).

        Woken by ``NOTIFY``: one listening connection per store reads every notification and
        wakes the followers of its session, so any number of followers wait on it at once.

        Raises:
            StoreUnavailable: the server cannot be reached (the listening connection is opened
                again on the next call).
        """
        check_session_id(session_id)
        with self._woken_by(session_id) as woken:
            quiet_since = time.monotonic()
            while True:
                await self._listen()  # before the query: no notification falls in between
                woken.clear()
                rows = await self._query("after_lines", {"sid": session_id, "seq": after_seq,
                                                         "limit": 1000})
                for row in rows:
                    after_seq = row[0]
                    yield bytes(row[11])
                if rows:
                    quiet_since = time.monotonic()
                    continue
                left = None if idle_timeout is None else \
                    idle_timeout - (time.monotonic() - quiet_since)
                if left is not None and left <= 0:
                    return
                await _wait(woken, left)

    async def _wait_for_change(self, session_id: str, timeout: float) -> None:
        """Until ``session_id`` is notified or ``timeout`` seconds pass."""
        with self._woken_by(session_id) as woken:
            await self._listen()
            await _wait(woken, timeout)

    @contextmanager
    def _woken_by(self, session_id: str) -> Iterator[asyncio.Event]:
        """An event the listening task sets when ``session_id`` is notified (registered for the
        block)."""
        woken = asyncio.Event()
        waiting = self._waiters.setdefault(session_id, set())
        waiting.add(woken)
        try:
            yield woken
        finally:
            waiting.discard(woken)
            if not waiting and self._waiters.get(session_id) is waiting:
                del self._waiters[session_id]

    async def _listen(self) -> None:
        """Start the listening connection and the task that hands out its notifications (once;
        again after the connection was lost)."""
        async with self._listen_lock:
            if self._listening is not None and not self._listening.done():
                return
            if self._pool is None:
                raise StoreUnavailable("the store is closed", path=self.url)
            old, self._listener = self._listener, None
            if old is not None:
                await old.close()
            async with self._errors():
                listener = await psycopg.AsyncConnection.connect(self._dsn, **self._kwargs)
                try:
                    await listener.execute("LISTEN sessiontree")
                except BaseException:
                    await listener.close()
                    raise
            self._listener = listener
            self._listening = asyncio.create_task(self._dispatch(listener))

    async def _dispatch(self, listener: psycopg.AsyncConnection[Any]) -> None:
        """Wake the followers of each notified session; when the connection is lost, wake
        every follower (each asks again, and the next wait listens anew)."""
        try:
            async for note in listener.notifies():
                for woken in self._waiters.get(note.payload, ()):
                    woken.set()
        except psycopg.Error:
            pass  # the connection was lost: the followers find out when they ask again
        finally:
            for waiting in self._waiters.values():
                for woken in waiting:
                    woken.set()

    def blocking(self) -> ThreadView:
        """This store as a blocking :class:`~._sql.SqlStore` for code in worker threads (what
        :class:`~sessiontree.AsyncSession` runs a session over): each statement runs on this
        store's async pool, in its event loop, while the calling thread waits.

        Raises:
            StoreUnavailable: the store is not open.
        """
        if self._loop is None or self._pool is None:
            raise StoreUnavailable("the store is not open (async with, or await open())",
                                   path=self.url)
        if self._view is None:
            self._view = ThreadView(self, self._loop)
        return self._view

    async def aclose(self) -> None:
        """Close the pool and the listening connection (idempotent)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
        task, self._listening = self._listening, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()


async def _wait(event: asyncio.Event, timeout: float | None) -> None:
    """Until ``event`` is set or ``timeout`` seconds pass (``None``: no limit)."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except asyncio.TimeoutError:
        pass


class ThreadView(SqlStore):
    """An :class:`AsyncPostgresStore` as a blocking :class:`~._sql.SqlStore`, for a
    :class:`~sessiontree.Session` run in worker threads (:class:`~sessiontree.AsyncSession`):
    every statement is handed to the store's event loop and runs on its async pool; the
    worker thread waits for the result. One statement costs one hand-over (a statement and its
    rows travel together).

    Invariants: the view owns nothing (the async store's ``aclose`` releases everything;
    :meth:`close` does nothing); a call from the loop's own thread raises
    :class:`~sessiontree.errors.BlockingCallInLoop` instead of waiting for itself.
    """

    dialect = _DIALECT

    def __init__(self, owner: AsyncPostgresStore, loop: asyncio.AbstractEventLoop) -> None:
        self.async_twin = owner
        """The async store this view runs on."""
        self._loop = loop
        self.read_only = owner.read_only
        self.durable = owner.durable

    @property
    def url(self) -> str:
        return self.async_twin.url

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` in the store's loop and wait for its result.

        Raises:
            BlockingCallInLoop: called from the loop's own thread.
            StoreUnavailable: the loop is closed.
        """
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            coroutine.close()
            raise BlockingCallInLoop(
                "a blocking call on a session of an AsyncPostgresStore from its event loop's "
                "thread (it would wait for itself): await the AsyncSession method, or use "
                "asyncio.to_thread", path=self.url)
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        except RuntimeError as exc:  # the loop is closed
            coroutine.close()
            raise StoreUnavailable(f"the store's event loop is gone: {exc}",
                                   path=self.url) from exc
        return future.result()

    def setup(self) -> int:
        return self.call(self.async_twin.setup())

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except (psycopg.Error, PoolTimeout) as exc:
            pool = self.async_twin._pool
            error, check = _failure(exc, self.url, pool)
            if check:
                self.call(pool.check())  # type: ignore[union-attr]
            raise error from (None if error is exc else exc)

    def _query(self, name: str, params: dict[str, Any]) -> list[Any]:
        return self.call(self.async_twin._query(name, params))

    def _query_many(self, name: str, params: Sequence[dict[str, Any]]) -> list[list[Any]]:
        return self.call(self.async_twin._query_many(name, params))

    @contextmanager
    def _reading(self) -> Iterator[Any]:
        with self._connected(transaction=False) as conn:
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._errors(), self._connected(transaction=True) as conn:
            yield conn

    @contextmanager
    def _connected(self, *, transaction: bool) -> Iterator[_BlockingConnection]:
        """A pool connection (in a transaction, or not) for the calling thread, taken with its
        first statement and given back in one hand-over each."""
        conn = _BlockingConnection(self.async_twin._connection_pool(), transaction, self.call)
        try:
            yield conn
        except BaseException as exc:
            conn.finish(exc)
            raise
        conn.finish(None)

    def _drive(self, flow: Flow[T], conn: Any, *, last: bool = False) -> T:
        """The whole flow in one hand-over (its steps are computed in the loop's thread), and
        with ``last`` the commit too."""
        assert isinstance(conn, _BlockingConnection)
        return conn.run(lambda ready: self.async_twin._drive(flow, ready), finish=last)

    def _wait_for_change(self, session_id: str, timeout: float) -> None:
        self.call(self.async_twin._wait_for_change(session_id, timeout))

    def close(self) -> None:
        """Nothing: the async store's ``aclose`` releases the pool."""

    def __enter__(self) -> ThreadView:
        return self


class _Rows:
    """A statement's rows, fetched with it (what a blocking caller reads of a cursor)."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows


class _BlockingConnection:
    """The part of a psycopg connection that :mod:`._sql` uses (``execute``,
    ``cursor().executemany``), over a connection of an async pool: the connection (and the
    transaction) is taken with the first statement, each statement is one hand-over to the
    loop, and :meth:`finish` gives it back."""

    def __init__(self, pool: AsyncConnectionPool[Any], transaction: bool,
                 call: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self._pool = pool
        self._transaction = transaction
        self._call = call
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._stack: AsyncExitStack | None = None

    async def _ready(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None:
            async with AsyncExitStack() as opening:  # a failure on the way gives it all back
                conn = await opening.enter_async_context(self._pool.connection())
                if self._transaction:
                    await opening.enter_async_context(conn.transaction())
                self._stack, self._conn = opening.pop_all(), conn
        return self._conn

    def run(self, work: Callable[[psycopg.AsyncConnection[Any]], Coroutine[Any, Any, T]], *,
            finish: bool = False) -> T:
        """``await work(connection)`` in the loop; its result. With ``finish``, then commit
        and give the connection back, in the same hand-over (roll back if ``work`` raised)."""
        async def run() -> T:
            try:
                result = await work(await self._ready())
            except BaseException as exc:
                if finish:
                    await self._close(exc)
                raise
            if finish:
                await self._close(None)
            return result

        return self._call(run())  # type: ignore[no-any-return]

    async def _close(self, exc: BaseException | None) -> None:
        stack, self._stack, self._conn = self._stack, None, None
        if stack is None:
            return
        if exc is None:
            await stack.aclose()
        else:
            await stack.__aexit__(type(exc), exc, exc.__traceback__)

    def execute(self, query: str, params: Any = None) -> _Rows:
        async def statement(conn: psycopg.AsyncConnection[Any]) -> list[Any]:
            cursor = await conn.execute(query, params)
            return list(await cursor.fetchall()) if cursor.description is not None else []

        return _Rows(self.run(statement))

    def cursor(self) -> _BlockingConnection:
        return self

    def executemany(self, query: str, params: Sequence[Any]) -> None:
        async def statements(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.cursor() as cursor:
                await cursor.executemany(query, params)

        self.run(statements)

    def finish(self, exc: BaseException | None) -> None:
        """Commit (or, after ``exc``, roll back) and give the connection back (nothing to do
        when a :meth:`run` with ``finish`` did)."""
        if self._stack is not None:
            self._call(self._close(exc))
