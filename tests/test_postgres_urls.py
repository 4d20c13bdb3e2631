"""PostgreSQL addresses reach the server as written (issue 23 point 11): libpq parameters are not
re-encoded, a user's ``options`` survive ``schema=``, schema names keep their case and
PostgreSQL's own schemas are refused; a server that cannot be reached fails at once, in one
line naming the address (never its password)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from sessiontree import Session, UserMessage
from sessiontree.errors import InvalidLocation, ReadOnlyStore, StoreUnavailable
from sessiontree.stores.postgres import AsyncPostgresStore, PostgresStore

from .backends import postgres_dsn


@pytest.fixture
def dsn(postgres_url: str) -> str:
    """The server's address without a schema (``postgres_url`` makes sure it is up)."""
    return postgres_dsn()


@pytest.fixture
def schema(dsn: str) -> Iterator[str]:
    """A fresh mixed-case schema name, dropped after the test."""
    import psycopg

    name = f"St_Urls_{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def settings(store: PostgresStore, *names: str) -> tuple[Any, ...]:
    with store._reading() as conn:
        row = conn.execute("SELECT " + ", ".join(f"current_setting('{n}')" for n in names)
                           ).fetchone()
    return tuple(row)


def with_query(dsn: str, query: str) -> str:
    return dsn + ("&" if "?" in dsn else "?") + query


def test_parameters_reach_the_server_as_written_and_options_survive_schema(
        dsn: str, schema: str) -> None:
    url = with_query(dsn, f"application_name=my%20app&schema={schema}"
                          "&options=-c%20statement_timeout%3D4321")
    with PostgresStore.from_url(url) as store:
        assert settings(store, "application_name", "search_path", "statement_timeout") == (
            "my app", f'"{schema}"', "4321ms")
        with Session.create(cwd="/w", store=store) as session:
            session.append_message(UserMessage.of("in the mixed-case schema"))
        assert store.url.endswith(f"schema={schema}")
    with PostgresStore.from_url(dsn, schema=schema) as store:  # the same schema, its case kept
        assert len(store.list_sessions()) == 1


def test_a_search_path_in_options_is_used(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    url = with_query(dsn, f"options=-c%20search_path%3D%22{schema}%22")
    with PostgresStore.from_url(url) as store:
        assert store.schema is None and store.schema_version() >= 1
    with psycopg.connect(dsn, autocommit=True) as admin:
        tables = admin.execute("SELECT count(*) FROM information_schema.tables WHERE "
                               "table_schema = %s", (schema,)).fetchone()
    assert tables is not None and tables[0] == 4  # sessions, entries, migrations, search
    missing = with_query(dsn, "options=-c%20search_path%3Dno_such_schema_here")
    with pytest.raises(InvalidLocation, match="names no schema that exists"):
        PostgresStore.from_url(missing)


@pytest.mark.parametrize("reserved", ["pg_catalog", "pg_toast", "pg_mine", "information_schema"])
def test_postgresqls_own_schemas_are_refused(dsn: str, reserved: str) -> None:
    import psycopg

    url = with_query(dsn, f"schema={reserved}")
    for opening in (lambda: PostgresStore.from_url(url),
                    lambda: PostgresStore.from_url(dsn, schema=reserved),
                    lambda: AsyncPostgresStore.from_url(url)):
        with pytest.raises(InvalidLocation, match=f"{reserved} is PostgreSQL's own"):
            opening()
    with psycopg.connect(dsn, autocommit=True) as admin:
        found = admin.execute("SELECT count(*) FROM information_schema.tables WHERE "
                              "table_name LIKE 'sessiontree%%' AND table_schema = %s",
                              (reserved,)).fetchone()
    assert found is not None and found[0] == 0


def refused_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_server_is_one_line_naming_the_address() -> None:
    url = f"postgresql://someone:hunter2@127.0.0.1:{refused_port()}/db"
    done = subprocess.run([sys.executable, "-m", "sessiontree", "ls", url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Connection refused" in done.stderr and "hunter2" not in done.stderr
    assert f"someone@127.0.0.1:{url.rsplit(':', 1)[1].split('/')[0]}/db" in done.stderr
    with pytest.raises(StoreUnavailable, match="Connection refused") as raised:
        PostgresStore.from_url(url)
    assert "\n" not in str(raised.value) and "hunter2" not in str(raised.value)

    async def open_async() -> None:
        await AsyncPostgresStore.from_url(url).open()

    with pytest.raises(StoreUnavailable, match="Connection refused") as raised:
        asyncio.run(open_async())
    assert "\n" not in str(raised.value)


def test_the_async_store_reads_the_address_alike(dsn: str, schema: str) -> None:
    url = with_query(dsn, f"application_name=my%20app&schema={schema}"
                          "&options=-c%20statement_timeout%3D4321")

    async def run() -> tuple[Any, ...]:
        async with AsyncPostgresStore.from_url(url) as store:
            async with store._connection_pool().connection() as conn:
                cursor = await conn.execute(
                    "SELECT current_setting('application_name'), current_setting('search_path'), "
                    "current_setting('statement_timeout')")
                return tuple(await cursor.fetchone() or ())

    assert asyncio.run(run()) == ("my app", f'"{schema}"', "4321ms")


@pytest.fixture
def restricted_role(dsn: str, schema: str) -> Iterator[tuple[str, str]]:
    """A login role of its own (``(name, password)``) that may read ``schema``'s sessiontree
    tables (set up by the server's user, with one session) and create nothing, insert nothing;
    dropped after the test."""
    import psycopg

    name, password = f"st_reader_{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    with PostgresStore.from_url(with_query(dsn, f"schema={schema}")) as store:
        Session.create(cwd="/w", store=store).append_message(UserMessage.of("stored"))
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {name}')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {name}')
    try:
        yield name, password
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP OWNED BY {name}')
            admin.execute(f"DROP ROLE {name}")


def test_a_role_without_create_or_insert_rights_gets_a_typed_error_naming_the_store(
        dsn: str, schema: str, restricted_role: tuple[str, str]) -> None:
    import psycopg

    name, password = restricted_role
    parts = urlsplit(with_query(dsn, f"schema={schema}"))
    url = parts._replace(netloc=f"{name}:{password}@{parts.netloc.rpartition('@')[2]}").geturl()
    shown = url.replace(f":{password}", "")
    with pytest.raises(ReadOnlyStore) as no_create:  # opening sets the schema up: refused
        PostgresStore.from_url(url)
    assert str(no_create.value).startswith(f"{shown}: ") and password not in str(no_create.value)
    assert "permission denied" in str(no_create.value)

    async def open_async() -> None:
        async with AsyncPostgresStore.from_url(url):
            pass

    with pytest.raises(ReadOnlyStore, match="permission denied") as async_refused:
        asyncio.run(open_async())
    assert str(async_refused.value).startswith(f"{shown}: ")
    with PostgresStore.from_url(url, read_only=True) as reader:  # what the message suggests
        assert len(reader.session_ids()) == 1
    with psycopg.connect(dsn, autocommit=True) as admin:  # may set up, still not insert
        admin.execute(f'GRANT CREATE ON DATABASE "{parts.path.lstrip("/")}" TO {name}')
        admin.execute(f'GRANT CREATE ON SCHEMA "{schema}" TO {name}')
    with PostgresStore.from_url(url) as store:
        (session_id,) = store.session_ids()
        with Session(store.open_log(session_id)) as session:
            with pytest.raises(ReadOnlyStore) as no_insert:
                session.append_message(UserMessage.of("refused"))
            assert str(no_insert.value).startswith(f"{shown}: ")
            assert "permission denied" in str(no_insert.value)
            assert password not in str(no_insert.value)
        with Session(store.open_log(session_id)) as again:
            assert len(again) == 1  # nothing written
