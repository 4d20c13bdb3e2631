"""``AsyncSession``: a :class:`~sessiontree.Session` for async code, on any backend.

Every public name of :class:`~sessiontree.Session`, with the same parameters: a coroutine where
the call may read or write (``aclose`` for ``close``, ``async with`` for ``with``); plain
attributes where it never does (``id``, ``leaf_id``, ``last_id``, ``name``, ``header``,
``stored_header``, ``url``, ``log``, ``len()``, ``events``, :meth:`in_memory`). ``Session``'s async variants are the plain names here:
``navigate_tree``, ``pop`` and ``compact`` are ``anavigate_tree``, ``apop`` and ``acompact``,
``build_context(for_model=True)`` is ``abuild_context``. ``follow`` and ``follow_lines`` are
async iterators. ``tests/test_async_parity.py`` checks both classes name for name.

How it runs (DESIGN.md 7: twins with the same names, blocking code in ``asyncio.to_thread``, the
session logic written once):

* The session's own code (the tree index, context building, appends) runs in a worker thread,
  one call at a time per session (a session is not thread-safe); the event loop never waits on
  a file, SQLite or the network.
* Over PostgreSQL (an :class:`~sessiontree.stores.postgres.AsyncPostgresStore`, or a
  ``postgresql://`` address) that code's statements run on the async store's pool, in the
  event loop (:meth:`AsyncPostgresStore.blocking`), and :meth:`follow` waits on ``NOTIFY``
  through the store's listening connection: no polling, no second pool. JSONL, SQLite and
  memory sessions read and write in the worker thread; their :meth:`follow` looks every
  ``poll`` seconds in a worker thread.
* Navigation, pop, compaction and ``build_context(for_model=True)`` run ``Session``'s async
  operations: hooks are awaited in the running loop, the reads and writes between them in the
  worker thread.

Invariants: an ``AsyncSession`` and the ``Session`` it wraps give the same results for the same
calls; a cancelled call keeps the session's turn until its worker thread is done, so the next
call never runs beside it. Hook handlers get the wrapped ``Session`` (``event.session``); over
an ``AsyncPostgresStore`` calling its blocking methods from the loop's thread raises
:class:`~sessiontree.errors.BlockingCallInLoop` (await this class's methods instead).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from msgspec import UNSET, UnsetType

from ._cache import DEFAULT_CACHE_BYTES
from ._codec import decode_line
from ._scan import Problem
from ._tree import TreeNode
from .context import SessionContext
from .entries import AnyEntry, Compaction, Custom, FileDetails, SessionHeader
from .messages import (
    AgentMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolDeclaration,
    ToolReference,
    UnknownMessage,
    Usage,
)
from .session import Session
from .stores.base import SessionListing, SessionLog, Store
from .stores.url import is_url, parse_location, stored_session_id

if TYPE_CHECKING:
    from .compaction import CompactionPreparation, CompactionSettings
    from .events import EventBus
    from .navigation import NavigationResult
    from .optree.model import OpTree
    from .projection import SessionProjection
    from .stores.postgres import AsyncPostgresStore
    from .summarize.base import CancelToken, Summarizer

__all__ = ["AsyncSession"]

T = TypeVar("T")

AsyncStore = Any
"""An :class:`~sessiontree.stores.postgres.AsyncPostgresStore` or
:class:`~sessiontree.stores.sqlite.AsyncSqliteStore` (typed loosely: both are optional imports)."""


class AsyncSession:
    """A session for async code. Open with :meth:`open`, :meth:`create`,
    :meth:`continue_recent` or :meth:`in_memory` (or wrap a :class:`Session`); use
    ``async with`` (or ``await aclose()``)."""

    def __init__(self, session: Session) -> None:
        """Wrap an open session; use it only through this object from now on."""
        self.sync = session
        """The wrapped session (one thread at a time: this object's worker, or yours)."""
        self._turn = asyncio.Lock()
        self._owned: AsyncPostgresStore | None = None  # opened for this session, closed with it

    async def _run(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``func(*args, **kwargs)`` in a worker thread, when the session's turn comes."""
        async with self._turn:
            work = asyncio.ensure_future(asyncio.to_thread(func, *args, **kwargs))
            try:
                return await asyncio.shield(work)
            except asyncio.CancelledError:
                await _finish(work)  # keep the turn until the thread is done with the session
                raise

    async def _offload(self, step: Callable[[], T], /) -> T:
        """The :class:`~sessiontree._offload.Offload` given to ``Session``'s async operations."""
        return await self._run(step)

    # -- constructors and resources -----------------------------------------------------------

    @classmethod
    async def open(cls, path: str | os.PathLike[str], *, strict: bool = False,
                   durable: bool = False, lock_timeout: float = 0.0, migrate: bool = True,
                   warn: bool = True, cache_bytes: int = DEFAULT_CACHE_BYTES,
                   read_only: bool = False, index: bool | None = None,
                   processes: int | None = None, store: AsyncStore | Store | None = None
                   ) -> AsyncSession:
        """:meth:`Session.open`: a session file, a store URL with ``#SESSION_ID``, or (with
        ``store``) the id of a session of that store.

        A ``postgresql://`` address opens an :class:`~sessiontree.stores.postgres.
        AsyncPostgresStore` for the session (closed with it); ``store`` may be an open
        ``AsyncPostgresStore``, an ``AsyncSqliteStore`` or any store with sessions (left open).

        Raises:
            As :meth:`Session.open`; ``InvalidLocation`` for a URL without ``#SESSION_ID``.
        """
        options: dict[str, Any] = {"strict": strict, "warn": warn, "cache_bytes": cache_bytes}
        if store is None and is_url(path) and parse_location(path).kind == "postgres":
            session_id = stored_session_id(path)
            owned = await _open_postgres(parse_location(path).store, read_only=read_only)
            try:
                session = await cls.open(session_id, store=owned, **options)
            except BaseException:
                await owned.aclose()
                raise
            session._owned = owned
            return session
        if store is not None:
            target = _blocking_store(store)
            session_id = os.fspath(path)
            return cls(await asyncio.to_thread(
                lambda: Session(target.open_log(session_id), **options)))  # type: ignore[attr-defined]
        return cls(await asyncio.to_thread(
            Session.open, path, durable=durable, lock_timeout=lock_timeout, migrate=migrate,
            read_only=read_only, index=index, processes=processes, **options))

    @classmethod
    async def create(cls, directory: str | os.PathLike[str] | None = None,
                     cwd: str | None = None, *, session_id: str | None = None,
                     parent_session: str | None = None,
                     root: str | os.PathLike[str] | None = None, durable: bool = False,
                     store: AsyncStore | Store | str | None = None,
                     lock_timeout: float = 0.0) -> AsyncSession:
        """:meth:`Session.create`: a new file, or a new session of ``store`` (a store object,
        an ``AsyncPostgresStore`` or ``AsyncSqliteStore`` among them, left open; or a store URL,
        closed with the session). Nothing is stored until the first append."""
        options: dict[str, Any] = {"session_id": session_id, "parent_session": parent_session,
                                   "root": root, "durable": durable,
                                   "lock_timeout": lock_timeout}
        owned = None
        if isinstance(store, str) and parse_location(store).kind == "postgres":
            owned = store = await _open_postgres(parse_location(store).store, read_only=False)
        target = _blocking_store(store) if store is not None and not isinstance(store, str) \
            else store
        try:
            session = cls(await asyncio.to_thread(Session.create, directory, cwd, store=target,
                                                  **options))
        except BaseException:
            if owned is not None:
                await owned.aclose()
            raise
        session._owned = owned
        return session

    @classmethod
    async def continue_recent(cls, cwd: str | None = None, *,
                              directory: str | os.PathLike[str] | None = None,
                              root: str | os.PathLike[str] | None = None, durable: bool = False,
                              lock_timeout: float = 0.0) -> AsyncSession:
        """:meth:`Session.continue_recent`: the most recent session of ``cwd``, or a new one."""
        return cls(await asyncio.to_thread(Session.continue_recent, cwd, directory=directory,
                                           root=root, durable=durable,
                                           lock_timeout=lock_timeout))

    @classmethod
    def in_memory(cls, cwd: str | None = None, *, session_id: str | None = None
                  ) -> AsyncSession:
        """:meth:`Session.in_memory` (no I/O, so not a coroutine)."""
        return cls(Session.in_memory(cwd, session_id=session_id))

    @classmethod
    async def fork_from(cls, source: str | os.PathLike[str] | Session | AsyncSession,
                        entry_id: str | None = None, *, cwd: str | None = None,
                        in_memory: bool = False, path: str | os.PathLike[str] | None = None,
                        directory: str | os.PathLike[str] | None = None) -> AsyncSession:
        """:meth:`Session.fork_from`; ``source`` may also be an ``AsyncSession``."""
        options: dict[str, Any] = {"cwd": cwd, "in_memory": in_memory, "path": path,
                                   "directory": directory}
        if isinstance(source, AsyncSession):
            return cls(await source._run(Session.fork_from, source.sync, entry_id, **options))
        return cls(await asyncio.to_thread(Session.fork_from, source, entry_id, **options))

    async def aclose(self) -> None:
        """:meth:`Session.close`, then the store opened for this session, if one was."""
        try:
            await self._run(self.sync.close)
        finally:
            owned, self._owned = self._owned, None
            if owned is not None:
                await owned.aclose()

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- no I/O ---------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def cwd(self) -> str:
        return self.sync.cwd

    @property
    def header(self) -> SessionHeader:
        return self.sync.header

    @property
    def file(self) -> str | None:
        return self.sync.file

    @property
    def url(self) -> str | None:
        return self.sync.url

    @property
    def leaf_id(self) -> str | None:
        return self.sync.leaf_id

    @property
    def name(self) -> str | None:
        return self.sync.name

    @property
    def last_id(self) -> str | None:
        return self.sync.last_id

    @property
    def log(self) -> SessionLog:
        """:attr:`Session.log` (its calls block: append through this object)."""
        return self.sync.log

    @property
    def stored_header(self) -> dict[str, Any] | None:
        return self.sync.stored_header

    @property
    def events(self) -> EventBus:
        """The wrapped session's hooks (:mod:`sessiontree.events`); async handlers are awaited
        in the running loop by :meth:`navigate_tree`, :meth:`pop`, :meth:`compact` and
        ``build_context(for_model=True)``."""
        return self.sync.events

    def __len__(self) -> int:
        return len(self.sync)

    # -- reading ----------------------------------------------------------------------------------

    async def problems(self) -> list[Problem]:
        """:attr:`Session.problems` (a database session loads its whole tree for it)."""
        return await self._run(lambda: self.sync.problems)

    async def contains(self, entry_id: object) -> bool:
        """``entry_id in session`` (a database session may ask the database)."""
        return await self._run(self.sync.__contains__, entry_id)

    async def entry(self, entry_id: str) -> AnyEntry:
        return await self._run(self.sync.entry, entry_id)

    async def role(self, entry_id: str) -> str | None:
        return await self._run(self.sync.role, entry_id)

    async def raw_line(self, entry_id: str) -> bytes:
        return await self._run(self.sync.raw_line, entry_id)

    async def ids(self) -> list[str]:
        return await self._run(self.sync.ids)

    async def entries(self) -> list[AnyEntry]:
        """Every entry in stored order (a list: the whole session is read)."""
        return await self._run(lambda: list(self.sync.entries()))

    async def custom_entries(self, prefix: str = "") -> list[Custom]:
        return await self._run(lambda: list(self.sync.custom_entries(prefix)))

    async def optree(self, *, resolve_files: bool = True) -> OpTree:
        return await self._run(self.sync.optree, resolve_files=resolve_files)

    async def children(self, entry_id: str) -> list[AnyEntry]:
        return await self._run(self.sync.children, entry_id)

    async def children_ids(self, entry_id: str) -> list[str]:
        return await self._run(self.sync.children_ids, entry_id)

    async def subtree_ids(self, entry_id: str) -> list[str]:
        return await self._run(self.sync.subtree_ids, entry_id)

    async def path(self, entry_id: str | None | UnsetType = UNSET) -> list[AnyEntry]:
        return await self._run(self.sync.path, entry_id)

    async def path_ids(self, entry_id: str | None | UnsetType = UNSET) -> list[str]:
        return await self._run(self.sync.path_ids, entry_id)

    async def tree(self) -> list[TreeNode]:
        """:meth:`Session.tree`, every node's ``entry`` decoded in the worker thread (so that
        reading ``node.entry`` in the event loop does no I/O)."""
        return await self._run(self._decoded_tree)

    def _decoded_tree(self) -> list[TreeNode]:
        roots = self.sync.tree()
        pending = list(roots)
        while pending:
            node = pending.pop()
            node.entry  # noqa: B018 (decodes and keeps the entry)
            pending.extend(node.children)
        return roots

    async def leaves(self) -> list[str]:
        return await self._run(self.sync.leaves)

    async def branch_points(self) -> list[str]:
        return await self._run(self.sync.branch_points)

    async def label(self, entry_id: str) -> str | None:
        return await self._run(self.sync.label, entry_id)

    async def labels(self) -> dict[str, tuple[str, str | None]]:
        return await self._run(self.sync.labels)

    async def build_context(self, leaf_id: str | None | UnsetType = UNSET, *,
                            for_model: bool = False) -> SessionContext:
        """:meth:`Session.build_context`; with ``for_model`` the ``context`` hooks are awaited
        in the running loop (:meth:`Session.abuild_context`)."""
        if for_model:
            return await self.sync.abuild_context(leaf_id, offload=self._offload)
        return await self._run(self.sync.build_context, leaf_id)

    async def build_projection(self, leaf_id: str | None | UnsetType = UNSET
                               ) -> SessionProjection:
        """:meth:`Session.build_projection`."""
        return await self._run(self.sync.build_projection, leaf_id)

    async def system_message(self, at: str | None | UnsetType = UNSET
                             ) -> SystemMessage | UnknownMessage | None:
        """:meth:`Session.system_message`."""
        return await self._run(self.sync.system_message, at)

    async def listing(self, path: str | None = None) -> SessionListing:
        return await self._run(self.sync.listing, path)

    async def follow_lines(self, *, idle_timeout: float | None = None,
                           poll: float = 0.2) -> AsyncIterator[bytes]:
        """:meth:`Session.follow_lines` as an async iterator: each entry line appended by any
        writer after what this session has read, as it lands. Over an ``AsyncPostgresStore``
        it waits on ``NOTIFY`` in the event loop; other backends look every ``poll`` seconds
        in a worker thread. Stop early by leaving the ``async for`` (or cancelling it)."""
        twin = _async_twin(self.sync)
        if twin is not None:
            after = self.sync.log.seen_seq  # type: ignore[attr-defined]
            async for line in twin.follow(self.id, after, idle_timeout=idle_timeout):
                yield line
            return
        stopped = threading.Event()
        lines = self.sync.follow_lines(idle_timeout=idle_timeout, poll=poll,
                                       stop=stopped.is_set)
        try:
            while True:
                found = await asyncio.to_thread(_next_or_none, lines)
                if found is None:
                    return
                yield found
        finally:
            stopped.set()  # a look under way returns at its next pause

    async def follow(self, *, idle_timeout: float | None = None,
                     poll: float = 0.2) -> AsyncIterator[AnyEntry]:
        """:meth:`follow_lines`, each line decoded as a typed entry."""
        async for line in self.follow_lines(idle_timeout=idle_timeout, poll=poll):
            yield decode_line(line)

    # -- appending and moving the leaf --------------------------------------------------------

    async def append_message(self, message: AgentMessage | UnknownMessage | Mapping[str, Any]
                             ) -> str:
        return await self._run(self.sync.append_message, message)

    async def append_entry(self, entry: Mapping[str, Any] | AnyEntry) -> str:
        return await self._run(self.sync.append_entry, entry)

    async def append_custom(self, custom_type: str, data: Any = UNSET) -> str:
        return await self._run(self.sync.append_custom, custom_type, data)

    async def append_custom_message(self, custom_type: str,
                                    content: str | Sequence[TextContent | ImageContent],
                                    display: bool = True, details: Any = UNSET) -> str:
        return await self._run(self.sync.append_custom_message, custom_type, content, display,
                               details)

    async def append_system_message(
            self, content: str | Sequence[TextContent] = "", *,
            sections: Mapping[str, str | None] | None = None,
            tools_added: Sequence[ToolDeclaration | Mapping[str, Any]] | None = None,
            tools_removed: Sequence[str | ToolReference | Mapping[str, Any]] | None = None) -> str:
        """:meth:`Session.append_system_message`."""
        return await self._run(self.sync.append_system_message, content, sections=sections,
                               tools_added=tools_added, tools_removed=tools_removed)

    async def append_usage(self, kind: str, provider: str, model: str,
                           usage: Usage | Mapping[str, Any], note: str | None = None) -> str:
        """:meth:`Session.append_usage`."""
        return await self._run(self.sync.append_usage, kind, provider, model, usage, note)

    async def append_context_edit(self, target_id: str, replacement: Any) -> str:
        """:meth:`Session.append_context_edit`."""
        return await self._run(self.sync.append_context_edit, target_id, replacement)

    async def append_model_change(self, provider: str, model_id: str) -> str:
        return await self._run(self.sync.append_model_change, provider, model_id)

    async def append_thinking_level_change(self, thinking_level: str) -> str:
        return await self._run(self.sync.append_thinking_level_change, thinking_level)

    async def append_compaction(self, summary: str, first_kept_entry_id: str, tokens_before: int,
                                details: FileDetails | Any = UNSET, from_hook: bool = False,
                                usage: Usage | UnsetType = UNSET) -> str:
        return await self._run(self.sync.append_compaction, summary, first_kept_entry_id,
                               tokens_before, details, from_hook, usage)

    async def set_label(self, target_id: str, label: str | None) -> str:
        return await self._run(self.sync.set_label, target_id, label)

    async def set_name(self, name: str | None) -> str:
        return await self._run(self.sync.set_name, name)

    async def extend(self, entries: Iterable[Mapping[str, Any] | AnyEntry]) -> list[str]:
        return await self._run(self.sync.extend, list(entries))

    async def append_at_last(self, plan: Callable[[str | None], tuple[str | None, Sequence[
            Mapping[str, Any]]]]) -> list[str]:
        """:meth:`Session.append_at_last` (``plan`` runs in the worker thread, under the lock)."""
        return await self._run(self.sync.append_at_last, plan)

    async def refresh(self) -> list[str]:
        return await self._run(self.sync.refresh)

    async def release(self) -> None:
        await self._run(self.sync.release)

    async def branch(self, entry_id: str) -> None:
        await self._run(self.sync.branch, entry_id)

    async def reset_leaf(self) -> None:
        await self._run(self.sync.reset_leaf)

    async def branch_with_summary(self, branch_from_id: str | None, summary: str,
                                  details: FileDetails | Any = UNSET, from_hook: bool = False,
                                  usage: Usage | UnsetType = UNSET) -> str:
        return await self._run(self.sync.branch_with_summary, branch_from_id, summary, details,
                               from_hook, usage)

    async def checkout(self, entry_id: str | None) -> str | None:
        return await self._run(self.sync.checkout, entry_id)

    # -- navigation, forks and exports ----------------------------------------------------------

    async def navigate_tree(self, target_id: str, summarize: bool = False,
                            instructions: str | None = None, label: str | None = None,
                            cancel: CancelToken | None = None, *,
                            summarizer: Summarizer | None = None,
                            persist: bool = True) -> NavigationResult:
        """:meth:`Session.anavigate_tree`: hooks awaited in the running loop, reads and writes
        in the worker thread."""
        return await self.sync.anavigate_tree(target_id, summarize, instructions, label, cancel,
                                              summarizer=summarizer, persist=persist,
                                              offload=self._offload)

    async def pop(self, to: str | None = None, *, summarizer: Summarizer | None = None,
                  instructions: str | None = None, cancel: CancelToken | None = None
                  ) -> NavigationResult:
        """:meth:`Session.apop` (as :meth:`navigate_tree`)."""
        return await self.sync.apop(to, summarizer=summarizer, instructions=instructions,
                                    cancel=cancel, offload=self._offload)

    async def cherry_pick(self, entry_id: str) -> str:
        return await self._run(self.sync.cherry_pick, entry_id)

    async def create_branched_session(self, leaf_id: str, *, in_memory: bool | None = None,
                                      path: str | os.PathLike[str] | None = None,
                                      directory: str | os.PathLike[str] | None = None
                                      ) -> AsyncSession:
        """:meth:`Session.create_branched_session`; a fork of a database session goes into the
        same store (over an ``AsyncPostgresStore``: the same pool)."""
        return AsyncSession(await self._run(self.sync.create_branched_session, leaf_id,
                                            in_memory=in_memory, path=path,
                                            directory=directory))

    async def export_branch(self, entry_id: str, path: str | os.PathLike[str], *,
                            overwrite: bool = False) -> str:
        return await self._run(self.sync.export_branch, entry_id, path, overwrite=overwrite)

    async def export_subtree(self, entry_id: str, path: str | os.PathLike[str], *,
                             ancestors: bool = True, overwrite: bool = False) -> str:
        return await self._run(self.sync.export_subtree, entry_id, path, ancestors=ancestors,
                               overwrite=overwrite)

    # -- compaction ---------------------------------------------------------------------------------

    async def should_compact(self, context_window: int,
                             settings: CompactionSettings | None = None,
                             leaf_id: str | None | UnsetType = UNSET) -> bool:
        return await self._run(self.sync.should_compact, context_window, settings, leaf_id)

    async def prepare_compaction(self, settings: CompactionSettings | None = None, *,
                                 keep_recent_tokens: int | None = None
                                 ) -> CompactionPreparation | None:
        return await self._run(self.sync.prepare_compaction, settings,
                               keep_recent_tokens=keep_recent_tokens)

    async def compact(self, summarizer: Summarizer | None = None, *,
                      keep_recent_tokens: int | None = None, reserve_tokens: int | None = None,
                      settings: CompactionSettings | None = None,
                      instructions: str | None = None,
                      cancel: CancelToken | None = None) -> Compaction:
        """:meth:`Session.acompact`: hooks awaited in the running loop, a summarizer's
        ``asummarize`` used when it has one, reads and the append in the worker thread."""
        return await self.sync.acompact(summarizer, keep_recent_tokens=keep_recent_tokens,
                                        reserve_tokens=reserve_tokens, settings=settings,
                                        instructions=instructions, cancel=cancel,
                                        offload=self._offload)

    def __repr__(self) -> str:
        return f"<AsyncSession of {self.sync!r}>"


async def _finish(work: asyncio.Future[Any]) -> None:
    """Wait for ``work`` to end, whatever cancels the waiter meanwhile."""
    while not work.done():
        try:
            await asyncio.shield(work)
        except BaseException:  # cancelled again, or the work's own error: wait on
            pass
    if not work.cancelled():
        work.exception()  # retrieved: its error belongs to the cancelled call


def _next_or_none(lines: Iterator[bytes]) -> bytes | None:
    return next(lines, None)


async def _open_postgres(dsn: str, *, read_only: bool) -> AsyncPostgresStore:
    from .stores.postgres import AsyncPostgresStore

    return await AsyncPostgresStore.from_url(dsn, read_only=read_only).connect()


def _blocking_store(store: AsyncStore | Store) -> Store:
    """The blocking store a wrapped session runs over: an async store's view or twin."""
    blocking = getattr(store, "blocking", None)
    if callable(blocking):  # AsyncPostgresStore: its statements run in its loop
        view: Store = blocking()
        return view
    sync: Store | None = getattr(store, "sync", None)  # AsyncSqliteStore: runs it in threads
    return sync if sync is not None else store


def _async_twin(session: Session) -> AsyncPostgresStore | None:
    """The ``AsyncPostgresStore`` a session's statements run on, if they do."""
    store = getattr(session.log, "store", None)
    twin: AsyncPostgresStore | None = getattr(store, "async_twin", None)
    return twin
