"""Store and session addresses: what a command argument or ``Session.open`` takes.

* ``sqlite:///relative.db``, ``sqlite:////absolute/path.db``: an SQLite store (SQLAlchemy's
  form: three slashes then the path; a ``?`` starts the parameters). ``?mode=`` opens it as
  SQLite's URIs do: ``rwc`` (the default) creates a missing file, ``rw`` opens an existing
  one, ``ro`` opens an existing one read-only; there is no other parameter.
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
SqliteMode = Literal["ro", "rw", "rwc"]
_SQLITE_MODES: tuple[SqliteMode, ...] = ("ro", "rw", "rwc")


class Location(NamedTuple):
    """A parsed address: the backend, the store (a path or a DSN), an optional session id and
    an SQLite file's open mode (``?mode=``; ``rwc`` for every other backend)."""

    kind: Kind
    store: str
    session_id: str | None
    mode: SqliteMode = "rwc"


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
        path, _, query = base[len("sqlite://"):].partition("?")
        if not path.startswith("/") or len(path) < 2:
            raise InvalidLocation(f"{text}: an SQLite URL is sqlite:///relative.db or "
                                  "sqlite:////absolute/path.db")
        return Location("sqlite", path[1:], session_id, _sqlite_mode(query, text))
    if base.startswith(_REDIS):
        return Location("redis", base, session_id)
    return Location("postgres", base, session_id)


def _sqlite_mode(query: str, text: str) -> SqliteMode:
    """The open mode an SQLite URL's parameters name (``rwc`` when none).

    Raises:
        InvalidLocation: a parameter other than ``mode``, or a mode SQLite's URIs do not have
            (``memory`` too: a store is a file).
    """
    from urllib.parse import parse_qsl  # urllib.parse (with ipaddress): SQLite URLs only

    mode: SqliteMode = "rwc"
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name != "mode":
            raise InvalidLocation(f"{text}: an SQLite URL takes one parameter, mode "
                                  f"(ro, rw or rwc), not {name!r}")
        if value not in _SQLITE_MODES:
            raise InvalidLocation(f"{text}: mode={value} is not an SQLite store's mode: ro "
                                  "(read-only), rw (an existing file) or rwc (created if missing)")
        mode = value
    return mode


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
        SessionNotFound: the SQLite file does not exist, and ``read_only`` or the URL's mode
            (``ro``, ``rw``) says not to create it.
        StoreUnavailable: the database cannot be reached.
        UnsupportedVersion: an SQLite or PostgreSQL store whose schema is newer than this
            sessiontree (nothing is written to it).
        MissingExtra: PostgreSQL without the ``postgres`` extra, Redis without ``redis``.
    """
    where = parse_location(text)
    if where.kind == "sqlite":
        from .sqlite import SqliteStore

        return SqliteStore.open(where.store, read_only=read_only or where.mode == "ro",
                                create=where.mode == "rwc", durable=durable)
    if where.kind == "postgres":
        from .postgres import PostgresStore

        return PostgresStore.from_url(where.store, read_only=read_only)
    if where.kind == "redis":
        from .redis import RedisStore

        return RedisStore.from_url(where.store, read_only=read_only, durable=durable)
    from .jsonl import JsonlStore

    return JsonlStore(where.store, read_only=read_only, durable=durable)
