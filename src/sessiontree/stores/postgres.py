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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

try:
    import psycopg
    from psycopg import sql
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    from ..errors import MissingExtra

    raise MissingExtra("PostgresStore requires the 'postgres' extra: pip install "
                       "'sessiontree[postgres]'") from exc

from ..errors import (
    DuplicateId,
    InvalidLocation,
    ReadOnlyStore,
    SessionNotFound,
    StoreUnavailable,
)
from ._sql import SqlStore
from ._sql_common import dialect

__all__ = ["PostgresStore", "split_schema"]

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
        dsn, from_url = split_schema(dsn)
        schema = schema or from_url
        if schema is not None and not _SCHEMA.fullmatch(schema):
            raise InvalidLocation(f"not a plain schema name: {schema!r}")
        self.schema = schema
        self.read_only = read_only
        self.durable = durable
        self._dsn = dsn
        options = []
        if schema is not None:
            options.append(f"-c search_path={schema}")
        if read_only:
            options.append("-c default_transaction_read_only=on")
        if not durable:
            options.append("-c synchronous_commit=off")
        self._kwargs: dict[str, Any] = {"autocommit": True}
        if options:
            self._kwargs["options"] = " ".join(options)
        self._timeout = timeout
        self._listener: psycopg.Connection[Any] | None = None
        self._pool: ConnectionPool[Any] | None = ConnectionPool(
            dsn, min_size=1, max_size=max(1, pool_size), kwargs=self._kwargs, open=False,
            timeout=timeout, name="sessiontree")
        try:
            with self._errors():
                self._pool.open(wait=True, timeout=timeout)
            if not read_only:
                self.setup()
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, dsn: str, *, schema: str | None = None, read_only: bool = False,
                 durable: bool = True, pool_size: int = 8, timeout: float = 10.0
                 ) -> PostgresStore:
        """The store at ``dsn``; use it as a context manager. See :meth:`__init__`."""
        return cls(dsn, schema=schema, read_only=read_only, durable=durable,
                   pool_size=pool_size, timeout=timeout)

    @property
    def url(self) -> str:
        base = _redacted(self._dsn)
        if self.schema is None:
            return base
        return base + ("&" if urlsplit(base).query else "?") + f"schema={self.schema}"

    def setup(self) -> int:
        """Create the schema if named, then apply the migrations it lacks (idempotent).

        Returns:
            The schema version.
        """
        self._writable()
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
            if self.schema is not None:
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    sql.Identifier(self.schema)))
            return self._migrate(conn)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.errors.UniqueViolation as exc:
            raise DuplicateId(f"already stored: {exc.diag.message_detail or exc}",
                              path=self.url) from exc
        except psycopg.errors.UndefinedTable as exc:
            raise SessionNotFound("no sessiontree tables in this database or schema (open it "
                                  "once without read_only to create them)", path=self.url) from exc
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            raise ReadOnlyStore(f"the database refused a write: {exc}", path=self.url) from exc
        except (psycopg.OperationalError, PoolTimeout) as exc:
            if self._pool is not None and not self._pool.closed:
                self._pool.check()  # drop the idle connections that died with this one
            raise StoreUnavailable(f"the database connection failed: {exc}; retry when the "
                                   "server is back", path=self.url) from exc
        except psycopg.InterfaceError as exc:
            raise StoreUnavailable(f"the database connection is unusable: {exc}",
                                   path=self.url) from exc

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
