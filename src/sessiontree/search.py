"""Finding entries by their words in a store named by its address: :func:`search_sessions`.

What matches and how hits rank is :mod:`sessiontree._search`'s, the same for every backend;
each store keeps its own index (see ``search`` on :class:`~sessiontree.stores.jsonl.JsonlStore`
and the database stores).
"""

from __future__ import annotations

import os
from datetime import date, datetime

from ._search import SearchHit
from .errors import InvalidLocation
from .stores.base import SearchableStore
from .stores.url import open_store, parse_location

__all__ = ["SearchHit", "search_sessions"]


def search_sessions(location: str | os.PathLike[str] | None, query: str, *,
                    cwd: str | None = None, role: str | None = None,
                    since: datetime | date | None = None, limit: int = 20,
                    build_index: bool = False) -> list[SearchHit]:
    """Entries holding every word and "exact phrase" of ``query``, in every session and on
    every branch of the store at ``location`` (a folder, pi's sessions root with all its
    projects, ``sqlite:///x.db``, ``postgresql://...``; ``None``: pi's sessions root), best
    first: relevance, then recency.

    Args:
        location: the store.
        query: words and "exact phrases" (case does not matter).
        cwd: only the sessions of this working directory.
        role: only ``user``, ``assistant``, ``tool``, ``custom``, ``summary`` or ``label``.
        since: only entries from this time on (a naive time is local).
        limit: at most this many hits.
        build_index: first bring a folder's whole search index up to date
            (:meth:`~sessiontree.stores.jsonl.JsonlStore.build_search_index`), so that this
            search and the next read only what changed (a database's index is always whole).

    Raises:
        InvalidQuery: no word in ``query``.
        InvalidLocation: a session file or ``#SESSION_ID`` instead of a store, or a store
            that cannot search.
        SessionNotFound: no such folder or database file.
    """
    from .stores.jsonl import JsonlStore, default_sessions_root

    where = parse_location(location if location is not None else default_sessions_root())
    if where.session_id is not None or (where.kind == "jsonl" and os.path.isfile(where.store)):
        raise InvalidLocation(f"{os.fspath(location or '')}: search takes a store (a folder "
                              "or a database URL), not one session")
    if where.kind == "jsonl" and not os.path.isdir(where.store):
        from .errors import SessionNotFound

        raise SessionNotFound("no such session folder", path=where.store)
    with open_store(location if location is not None else where.store) as store:
        if not isinstance(store, SearchableStore):
            raise InvalidLocation(f"{type(store).__name__} cannot search its sessions",
                                  path=str(location))
        if build_index and isinstance(store, JsonlStore):
            store.build_search_index()
        return store.search(query, cwd=cwd, role=role, since=since, limit=limit)
