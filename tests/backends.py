"""One session API, every backend: the fixtures that run a suite over memory, JSONL, SQLite,
PostgreSQL (``SESSIONTREE_TEST_POSTGRES``, else a throwaway server the run starts; each test
run gets its own schema, dropped at the end; a server unreachable or not started fails the run,
never skips it), one Redis server and a Redis Cluster
(started for the run from the machine's ``redis-server``, :mod:`tests.servers`; each test gets
its own key prefix)."""

from __future__ import annotations

import atexit
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiontree import Session
from sessiontree._json import dumps, loads
from sessiontree._time import uuid7
from sessiontree.stores.memory import MemoryLog

BACKENDS = ["memory", "jsonl", "sqlite", "postgres", "redis", "redis-cluster"]
POSTGRES_ENV = "SESSIONTREE_TEST_POSTGRES"


_throwaway: list[Any] = []  # the PostgreSQL started for this run, if one was


def postgres_dsn() -> str:
    """The PostgreSQL the tests use: ``SESSIONTREE_TEST_POSTGRES``, else a throwaway server
    started on first use (:class:`tests.servers.PostgresServer`), named in the variable for the
    rest of the run (child processes inherit it) and stopped when the run ends.

    Raises:
        ServerFailed: the throwaway server did not start (the reason is in the message).
    """
    dsn = os.environ.get(POSTGRES_ENV)
    if dsn:
        return dsn
    from .servers import PostgresServer

    server = PostgresServer()
    _throwaway.append(server)
    atexit.register(stop_throwaway_postgres)
    os.environ[POSTGRES_ENV] = server.dsn
    return server.dsn


def stop_throwaway_postgres() -> None:
    """Stop the PostgreSQL this run started (if any) and unset the variable it set."""
    while _throwaway:
        server = _throwaway.pop()
        if os.environ.get(POSTGRES_ENV) == server.dsn:
            del os.environ[POSTGRES_ENV]
        server.stop()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A ``postgresql://...?schema=<random>`` URL for this test run; the schema is dropped at
    the end. Without ``SESSIONTREE_TEST_POSTGRES`` the server is a throwaway one; a server that
    is down or cannot start fails the run."""
    from .servers import ServerFailed

    try:
        dsn = postgres_dsn()
    except ServerFailed as exc:
        pytest.fail(f"{POSTGRES_ENV} is not set and the throwaway PostgreSQL did not start: {exc}")
    import psycopg

    try:
        admin = psycopg.connect(dsn, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"{POSTGRES_ENV}={dsn} is set but the server cannot be reached: {exc}")
    schema = f"sessiontree_test_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in dsn else "?"
    try:
        yield f"{dsn}{separator}schema={schema}"
    finally:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()


class RedisDeployments:
    """This run's Redis deployments, each started when a test first asks for it and stopped at
    the end: ``redis``, one server; ``redis-cluster``, a six-node cluster. One that cannot start
    fails the test that asked."""

    def __init__(self, folders: pytest.TempPathFactory) -> None:
        self._folders = folders
        self._started: dict[str, Any] = {}

    def url(self, kind: str) -> str:
        from .servers import RedisCluster, RedisServer, ServerFailed

        if kind not in self._started:
            make = {"redis": RedisServer, "redis-cluster": RedisCluster}[kind]
            try:
                self._started[kind] = make(self._folders.mktemp(kind))
            except ServerFailed as exc:
                pytest.fail(f"the test {kind} did not start: {exc}")
        url: str = self._started[kind].url
        return url

    def stop(self) -> None:
        for started in self._started.values():
            started.stop()


@pytest.fixture(scope="session")
def redis_deployments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisDeployments]:
    deployments = RedisDeployments(tmp_path_factory)
    try:
        yield deployments
    finally:
        deployments.stop()


def redis_store_url(request: pytest.FixtureRequest, kind: str) -> str:
    """A Redis store URL (``kind``: ``redis`` or ``redis-cluster``) with a key prefix of its own
    (an empty store) for one test."""
    base = request.getfixturevalue("redis_deployments").url(kind)
    return f"{base}?prefix=t{uuid.uuid4().hex[:12]}"


def beside_script(store: Any, name: str, then: Any, *, before: bool = False) -> list[int]:
    """Run ``then()`` right after (``before``: right before) each call of the Redis store's
    script ``name``: what another writer may do between the script and what its caller sends
    around it. Returns the list that counts the calls (one item each); a caller that keeps
    calling it past 100 times fails."""
    script = getattr(store, name)
    calls: list[int] = []

    def run(**kwargs: Any) -> Any:
        calls.append(1)
        assert len(calls) <= 100, f"{name} was called again and again"
        if before:
            then()
        reply = script(**kwargs)
        if not before:
            then()
        return reply

    setattr(store, name, run)
    return calls


def handle_store(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> str | None:
    """The store argument an agent-SDK session handle takes on each backend: ``None``
    (``memory``), a folder (``root``: a sessions root in pi's layout), an SQLite URL, a
    PostgreSQL URL (a schema of its own), a Redis URL (a key prefix of its own)."""
    if kind == "memory":
        return None
    if kind == "root":
        return str(tmp_path / "sessions")
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/conversations.db"
    if kind.startswith("redis"):
        return redis_store_url(request, kind)
    url: str = request.getfixturevalue("fresh_postgres_url")
    return url


@pytest.fixture
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """A schema of its own for one test (an empty store), dropped after it."""
    import psycopg

    base, _, _ = postgres_url.rpartition("schema=")
    schema = f"sessiontree_test_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{base}schema={schema}"
    finally:
        with psycopg.connect(postgres_dsn(), autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class Backend:
    """Creates and reopens sessions on one backend."""

    def __init__(self, kind: str, tmp_path: Path, postgres: str | None,
                 redis: str | None = None) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.store: Any = None
        if kind == "sqlite":
            from sessiontree.stores.sqlite import SqliteStore

            self.store = SqliteStore.open(tmp_path / "sessions.db")
        elif kind == "postgres":
            from sessiontree.stores.postgres import PostgresStore

            assert postgres is not None
            self.store = PostgresStore.from_url(postgres)
        elif kind.startswith("redis"):
            from sessiontree.stores.redis import RedisStore

            assert redis is not None
            self.store = RedisStore.from_url(redis)
        self._count = 0

    def create(self, cwd: str = "/home/dev/proj") -> Session:
        self._count += 1
        if self.kind == "memory":
            return Session.in_memory(cwd=cwd)
        if self.kind == "jsonl":
            return Session.create(self.tmp_path / f"s{self._count}", cwd=cwd)
        return Session.create(cwd=cwd, store=self.store)

    def reopen(self, session: Session, **kwargs: Any) -> Session:
        return reopen(session, **kwargs)

    def load(self, path: str | Path) -> Session:
        """The session of a JSONL file, put into this backend line for line (in a database
        under a new session id, so that one file can be loaded more than once)."""
        data = Path(path).read_bytes()
        self._count += 1
        if self.kind == "jsonl":
            target = self.tmp_path / f"loaded{self._count}" / Path(path).name
            target.parent.mkdir(parents=True)
            target.write_bytes(data)
            return Session.open(target)
        header, *lines = [line for line in data.splitlines() if line.strip()]
        if self.kind == "memory":
            return Session(MemoryLog([header, *lines]))
        fields = loads(header)
        fields["id"] = uuid7()
        return Session(self.store.open_log(self.store.import_lines(dumps(fields), lines)))

    def lines(self, session: Session) -> list[bytes]:
        return stored_lines(session)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    kind = request.param
    url = request.getfixturevalue("postgres_url") if kind == "postgres" else None
    redis = redis_store_url(request, kind) if kind.startswith("redis") else None
    backend = Backend(kind, tmp_path, url, redis)
    request.addfinalizer(backend.close)
    return backend


def reopen(session: Session, **kwargs: Any) -> Session:
    """The same session opened afresh (what a restart sees)."""
    log = session._log
    if isinstance(log, MemoryLog):
        return Session(MemoryLog(log.lines), **kwargs)
    if session.file is not None:
        return Session.open(session.file, **kwargs)
    return Session(log.store.open_log(session.id), **kwargs)  # type: ignore[attr-defined]


def stored_lines(session: Session) -> list[bytes]:
    """The session's stored entry lines, exact bytes, in stored order (``[]`` before the
    first append)."""
    log = session._log
    if isinstance(log, MemoryLog):
        return log.lines[1:]
    if session.file is not None:
        path = Path(session.file)
        return path.read_bytes().splitlines()[1:] if path.exists() else []
    store = log.store  # type: ignore[attr-defined]
    if session.id not in store.session_ids():
        return []
    return list(store.export_lines(session.id)[1])


def stored_file(session: Session, path: str | Path) -> Path:
    """The session as a JSONL file at ``path`` (its header and entry lines as stored), for
    pi or the file-based checks."""
    log = session._log
    if isinstance(log, MemoryLog):
        header = log.lines[0]
    elif session.file is not None:
        header = Path(session.file).read_bytes().splitlines()[0]
    else:
        header = log.store.export_lines(session.id)[0]  # type: ignore[attr-defined]
    target = Path(path)
    target.write_bytes(b"".join(line + b"\n" for line in [header, *stored_lines(session)]))
    return target


def stored(session: Session) -> bytes:
    """Everything stored for the session, to compare before and after an operation."""
    return b"\n".join(stored_lines(session))
