"""Store and session addresses: what a command argument or ``Session.open`` takes.

* ``sqlite:///relative.db``, ``sqlite:////absolute/path.db``: an SQLite store (SQLAlchemy's
  form: three slashes then the path).
* ``postgresql://user@host:port/db?schema=NAME`` (or ``postgres://``): a PostgreSQL store;
  ``schema`` is ours (the tables' schema), every other parameter goes to libpq.
* ``redis://[user[:password]@]host[:port][/db]`` (``rediss://`` for TLS), or
  ``redis+cluster://host:port[,host:port...]`` (``rediss+cluster://``) naming a Redis
  Cluster's seed nodes: a Redis store; ``?prefix=NAME`` is its key prefix.
* Anything else is a path: a ``.jsonl`` file is one session, a folder a store of them.

A ``#SESSION_ID`` fragment names one session of a database store. Parsing opens nothing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeGuard

from ..errors import InvalidLocation
from .base import check_session_id

if TYPE_CHECKING:
    from .jsonl import JsonlStore
    from .postgres import PostgresStore
    from .redis import RedisStore
    from .sqlite import SqliteStore

__all__ = ["Location", "check_session_id", "is_url", "open_store", "parse_location",
           "stored_session_id"]

Kind = Literal["jsonl", "sqlite", "postgres", "redis"]
_POSTGRES = ("postgresql://", "postgres://")
_REDIS = ("redis://", "rediss://", "redis+cluster://", "rediss+cluster://")


class Location(NamedTuple):
    """A parsed address: the backend, the store (a path or a DSN) and an optional session id."""

    kind: Kind
    store: str
    session_id: str | None


def is_url(text: str | os.PathLike[str]) -> TypeGuard[str]:
    """Whether ``text`` is a database URL rather than a path."""
    return isinstance(text, str) and text.startswith(("sqlite://", *_POSTGRES, *_REDIS))


def parse_location(text: str | os.PathLike[str]) -> Location:
    """Split an address into backend, store and session id.

    Raises:
        InvalidLocation: a URL without a database, or a bad session id.
    """
    if not is_url(text):
        return Location("jsonl", os.fspath(text), None)
    base, _, fragment = text.partition("#")
    session_id = check_session_id(fragment) if fragment else None
    if base.startswith("sqlite://"):
        path = base[len("sqlite://"):]
        if not path.startswith("/") or len(path) < 2:
            raise InvalidLocation(f"{text}: an SQLite URL is sqlite:///relative.db or "
                                  "sqlite:////absolute/path.db")
        return Location("sqlite", path[1:], session_id)
    if base.startswith(_REDIS):
        return Location("redis", base, session_id)
    return Location("postgres", base, session_id)


def stored_session_id(url: str) -> str:
    """The session id an address of one stored session ends with (``...#SESSION_ID``).

    Raises:
        InvalidLocation: no ``#SESSION_ID``, or as :func:`parse_location`.
    """
    session_id = parse_location(url).session_id
    if session_id is None:
        raise InvalidLocation(f"{url}: name the session with #SESSION_ID (see "
                              "'sessiontree ls URL')")
    return session_id


def open_store(text: str | os.PathLike[str], *, read_only: bool = False, durable: bool = False
               ) -> JsonlStore | SqliteStore | PostgresStore | RedisStore:
    """Open the store an address names (a folder of JSONL files, SQLite, PostgreSQL, Redis).

    Args:
        text: the address (see the module docstring); a ``#SESSION_ID`` is ignored here.
        read_only: refuse every write.
        durable: fsync every append (SQLite, JSONL; PostgreSQL commits durably anyway; Redis
            waits for a replica).

    Raises:
        InvalidLocation: a bad address.
        SessionNotFound: ``read_only`` and the SQLite file does not exist.
        StoreUnavailable: the database cannot be reached.
        MissingExtra: PostgreSQL without the ``postgres`` extra, Redis without ``redis``.
    """
    where = parse_location(text)
    if where.kind == "sqlite":
        from .sqlite import SqliteStore

        return SqliteStore.open(where.store, read_only=read_only, durable=durable)
    if where.kind == "postgres":
        from .postgres import PostgresStore

        return PostgresStore.from_url(where.store, read_only=read_only)
    if where.kind == "redis":
        from .redis import RedisStore

        return RedisStore.from_url(where.store, read_only=read_only, durable=durable)
    from .jsonl import JsonlStore

    return JsonlStore(where.store, read_only=read_only, durable=durable)
