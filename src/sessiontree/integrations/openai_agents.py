"""A tree-shaped session for the OpenAI Agents SDK (``pip install 'sessiontree[agents]'``).

:class:`SessionTreeSession` satisfies the SDK's ``Session`` protocol (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``, ``clear_session``) over any
:class:`~sessiontree.Session`, so ``Runner.run(agent, prompt, session=...)`` keeps its history in a
pi session file that ``sessiontree browse`` and pi open. Beyond the SDK's own backends it can go
back (:meth:`SessionTreeSession.checkout`), fork (:meth:`SessionTreeSession.fork`) and never
deletes anything.

Invariants:
* Each item is one entry, mapped as :mod:`sessiontree.importers.responses` describes (pi's own
  OpenAI Responses mapping); ``get_items`` gives back exactly the items ``add_items`` stored, on
  the current branch, in order. Items pi has no message for (hosted tool calls, item
  references...) are ``openai.item`` custom entries; details a message cannot hold are kept
  verbatim in the entry's ``openaiItem`` field.
* The history is the path from the root to the leaf, read as pi builds its context: after a
  compaction, its summary (as the user message pi sends) and the kept entries; a branch summary
  left by ``navigate_tree`` as a user message.
* Every leaf move (``pop_item``, ``clear_session``, ``checkout``) is persisted with a checkout
  marker, so a reopened session (and pi) continues where the SDK left off.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Mapping
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..context import kept_after_compaction
from ..errors import MissingExtra
from ..importers.responses import AssistantInfo, ToolCalls, entry_items, item_entry
from ..errors import InvalidLocation, SessionNotFound
from ..session import Session
from ..stores.base import Store, check_session_id, has_logs
from ..stores.jsonl import default_session_dir, glob_escape
from ..stores.url import is_url, parse_location

try:
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("sessiontree.integrations.openai_agents requires the 'agents' extra: "
                       "pip install 'sessiontree[agents]'") from error

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["SessionTreeSession"]

T = TypeVar("T")


class SessionTreeSession:
    """The OpenAI Agents SDK ``Session`` protocol over a sessiontree :class:`~sessiontree.Session`.

    ``SessionTreeSession("user_123", "sqlite:///conversations.db")`` opens that session, or
    creates it, as the SDK's ``SQLiteSession("user_123", "conversations.db")`` does.

    Args:
        session: a session id (opened in ``store``, or created there when it is not stored yet),
            or a sessiontree :class:`~sessiontree.Session` to keep the conversation in.
        store: with a session id: a store URL (``sqlite:///x.db``, ``postgresql://...``; opened
            for this session and closed with it), a folder (a sessions root in pi's layout: the
            session's file goes in the folder of ``cwd``, ``<folder>/--<cwd>--/``, where pi
            finds it), a store object (left open), or ``None`` for a session in memory only.
        session_settings: the SDK's settings, a ``SessionSettings`` or a dict such as
            ``{"limit": 10}`` (normalized and checked as the SDK's own sessions do; ``limit``
            caps what ``get_items`` returns).
        model: the model name recorded on assistant messages (pi shows it and uses it to decide
            whether reasoning can be replayed).
        provider: the provider recorded on assistant messages.
        cwd: the working directory recorded in a new session's header (default: the current
            one).

    Raises:
        InvalidLocation: a bad session id or store address, or a store given with a
            ``Session``.
        TypeError: ``session_settings`` holds an unknown key (the SDK's own check).
        pydantic.ValidationError: ``session_settings`` holds a bad value.
    """

    def __init__(self, session: Session | str,
                 store: Store | str | os.PathLike[str] | None = None, *,
                 session_settings: SessionSettings | Mapping[str, Any] | None = None,
                 model: str = "", provider: str = "openai", cwd: str | None = None) -> None:
        if isinstance(session, Session):
            if store is not None:
                raise InvalidLocation("give a store with a session id, not with a Session")
        else:
            session = _open_or_create(check_session_id(session), store, cwd)
        self.tree = session
        self.session_id = session.id
        self.session_settings: SessionSettings = (
            SessionSettings() if session_settings is None
            else coerce_session_settings(dict(session_settings)
                                         if isinstance(session_settings, Mapping)
                                         else session_settings))
        self._info = AssistantInfo(provider=provider, model=model)
        self._lock = threading.Lock()

    # -- constructors ----------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], **options: Any) -> SessionTreeSession:
        """Continue a session file (pi's or ours), or the session a database address names:
        ``sqlite:///x.db#ID`` (or ``postgresql://...#ID``) opens that session, or creates it when
        the database has no such id yet (a file must exist). Options as for the constructor.

        Raises:
            SessionNotFound: no such file.
        """
        if is_url(path):
            where = parse_location(path)
            if where.session_id is not None:
                return cls(where.session_id, path.partition("#")[0], **options)
        return cls(Session.open(path), **options)

    @classmethod
    def create(cls, directory: str | os.PathLike[str] | None = None, cwd: str | None = None, *,
               session_id: str | None = None, store: Store | str | None = None,
               **options: Any) -> SessionTreeSession:
        """A new session: a file (in pi's folder for ``cwd`` unless ``directory`` is given), or in
        ``store`` (a store URL or object), with ``session_id`` (default: a new UUIDv7). Nothing is
        stored until the first item arrives.

        Raises:
            InvalidLocation: a bad session id or store address.
        """
        return cls(Session.create(directory, cwd, session_id=session_id, store=store), **options)

    @classmethod
    def in_memory(cls, session_id: str | None = None, **options: Any) -> SessionTreeSession:
        """A session that is never written to disk."""
        return cls(Session.in_memory(session_id=session_id), **options)

    def close(self) -> None:
        """Release the session file."""
        self.tree.close()

    # -- reading -----------------------------------------------------------------------------

    def _history(self) -> list[tuple[str, dict[str, Any]]]:
        """``(entry id, item)`` for the leaf's history, oldest first (pi's context rule)."""
        path = [json.loads(self.tree.raw_line(i)) for i in self.tree.path_ids()]
        last = max((i for i, e in enumerate(path) if e.get("type") == "compaction"), default=-1)
        if last >= 0:
            path = [path[last], *kept_after_compaction(path, last, path[last].get(
                "firstKeptEntryId"), itemgetter("id"))]
        return [(entry["id"], item) for entry in path for item in entry_items(entry)]

    def item_ids(self) -> list[str]:
        """The entry id of each item ``get_items()`` returns, in the same order: where to
        :meth:`checkout` to go back to just after that item."""
        with self._lock:
            return [entry_id for entry_id, _ in self._history()]

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items on the current branch, oldest first; the latest ``limit`` of them when
        given (else ``session_settings.limit``)."""
        count = resolve_session_limit(limit, self.session_settings)

        def read() -> list[Any]:
            items = [item for _, item in self._history()]
            return items if count is None else items[-count:] if count > 0 else []

        return await self._run(read)

    # -- writing -------------------------------------------------------------------------------

    def _add(self, items: list[Any]) -> None:
        calls = ToolCalls()
        for entry_id in self.tree.path_ids():
            calls.note(json.loads(self.tree.raw_line(entry_id)))
        for item in items:
            entry = item_entry(item, calls, self._info)
            self.tree.append_entry(entry)
            calls.note(entry)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items to the current branch, one entry each."""
        await self._run(lambda: self._add(list(items)))

    async def pop_item(self) -> TResponseInputItem | None:
        """Take back the latest item: the leaf moves to before it (persisted); nothing is
        deleted, the item stays on a branch of its own. ``None`` when the branch is empty."""

        def pop() -> Any:
            history = self._history()
            if not history:
                return None
            entry_id, item = history[-1]
            siblings = [i for e, i in history if e == entry_id][:-1]  # same entry, earlier
            parent = self.tree.entry(entry_id).parent_id
            self.tree.checkout(parent)
            if siblings:  # an entry written by pi that stood for several items
                self._add(siblings)
            return item

        return await self._run(pop)

    async def clear_session(self) -> None:
        """Start a new, empty branch (persisted as a checkout marker at the root). Nothing is
        deleted: every earlier item stays in the tree and :meth:`checkout` can return to it."""
        await self._run(lambda: self.tree.checkout(None))

    # -- the tree ------------------------------------------------------------------------------

    def checkout(self, entry_id: str | None) -> None:
        """Go back to just after ``entry_id`` (an id from :meth:`item_ids`); the next items start
        a new branch there. Persisted, so pi and a reopened session agree."""
        with self._lock:
            self.tree.checkout(entry_id)

    branch = checkout

    def fork(self, entry_id: str | None = None, **options: Any) -> SessionTreeSession:
        """A new session (a new file beside this one, or in memory) holding the history up to
        ``entry_id`` (default: the current leaf); this one is unchanged."""
        with self._lock:
            target = entry_id if entry_id is not None else self.tree.leaf_id
            if target is None:
                raise ValueError("nothing to fork: the current branch is empty")
            forked = self.tree.create_branched_session(target)
        merged = {"session_settings": self.session_settings, "model": self._info.model,
                  "provider": self._info.provider, **options}
        return SessionTreeSession(forked, **merged)

    async def _run(self, work: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:
                return work()

        return await asyncio.to_thread(locked)

    def __repr__(self) -> str:
        return f"<SessionTreeSession {self.session_id} {self.tree.url or 'memory'}>"


def _open_or_create(session_id: str, store: Store | str | os.PathLike[str] | None,
                    cwd: str | None) -> Session:
    """The session ``session_id`` of ``store``, or a new one by that id (stored at its first
    append)."""
    if store is None:
        return Session.in_memory(cwd, session_id=session_id)
    if isinstance(store, (str, os.PathLike)) and not is_url(store):
        root = Path(store)
        found = sorted(root.glob(f"*/*_{glob_escape(session_id)}.jsonl")) if root.is_dir() else []
        if found:
            return Session.open(found[-1])
        cwd = os.path.abspath(cwd) if cwd is not None else os.getcwd()
        return Session.create(default_session_dir(cwd, root), cwd, session_id=session_id)
    if isinstance(store, str):
        where = parse_location(store)
        if where.session_id not in (None, session_id):
            raise InvalidLocation(f"{store}: names session {where.session_id}, not {session_id}")
        base = store.partition("#")[0]
        try:
            return Session.open(f"{base}#{session_id}")
        except SessionNotFound:
            return Session.create(cwd=cwd, session_id=session_id, store=base)
    given: Store = store
    if not has_logs(store):
        raise InvalidLocation(f"{type(store).__name__} cannot hold a Session (it has no "
                              "open_log/new_log)")
    try:
        return Session(store.open_log(session_id))
    except SessionNotFound:
        return Session.create(cwd=cwd, session_id=session_id, store=given)
