"""``AsyncSession``: a :class:`~sessiontree.Session` for async code, on any backend.

The same method names as :class:`~sessiontree.Session`, as coroutines; ``aclose`` instead of
``close``. Each call runs the session's own code in a worker thread (``asyncio.to_thread``), one
call at a time per session (a session is not thread-safe), so the event loop never waits on a
file, SQLite or PostgreSQL. The store-level twins with native async I/O are
:class:`~sessiontree.stores.postgres.AsyncPostgresStore` and
:class:`~sessiontree.stores.sqlite.AsyncSqliteStore`.

Invariants: an ``AsyncSession`` and the ``Session`` it wraps give the same results for the same
calls (``tests/test_async_parity.py``); properties that need no I/O (``id``, ``leaf_id``,
``name``, ``header``, ``url``, ``len()``) are plain attributes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from msgspec import UNSET, UnsetType

from ._tree import TreeNode
from .context import SessionContext
from .entries import AnyEntry, Compaction, SessionHeader
from .messages import AgentMessage, ImageContent, TextContent, UnknownMessage
from .session import Session
from .stores.base import SessionListing, Store

__all__ = ["AsyncSession"]

T = TypeVar("T")


class AsyncSession:
    """A session for async code. Open with :meth:`open` or :meth:`create`; use
    ``async with`` (or ``await aclose()``)."""

    def __init__(self, session: Session) -> None:
        self.sync = session
        """The wrapped session (use it from one thread at a time)."""
        self._turn = asyncio.Lock()

    async def _run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        async with self._turn:
            return await asyncio.to_thread(func, *args, **kwargs)

    # -- constructors and resources -----------------------------------------------------------

    @classmethod
    async def open(cls, path: str | os.PathLike[str], **options: Any) -> AsyncSession:
        """:meth:`Session.open` (a file or a store URL with ``#SESSION_ID``), in a thread."""
        return cls(await asyncio.to_thread(Session.open, path, **options))

    @classmethod
    async def create(cls, directory: str | os.PathLike[str] | None = None,
                     cwd: str | None = None, *, store: Store | str | None = None,
                     **options: Any) -> AsyncSession:
        """:meth:`Session.create` (a file, or a session of ``store``), in a thread."""
        return cls(await asyncio.to_thread(Session.create, directory, cwd, store=store,
                                           **options))

    async def aclose(self) -> None:
        await self._run(self.sync.close)

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- no I/O ---------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def header(self) -> SessionHeader:
        return self.sync.header

    @property
    def leaf_id(self) -> str | None:
        return self.sync.leaf_id

    @property
    def name(self) -> str | None:
        return self.sync.name

    @property
    def url(self) -> str | None:
        return self.sync.url

    def __len__(self) -> int:
        return len(self.sync)

    # -- reading ----------------------------------------------------------------------------------

    async def entry(self, entry_id: str) -> AnyEntry:
        return await self._run(self.sync.entry, entry_id)

    async def ids(self) -> list[str]:
        return await self._run(self.sync.ids)

    async def entries(self) -> list[AnyEntry]:
        return await self._run(lambda: list(self.sync.entries()))

    async def path(self, entry_id: str | None | UnsetType = UNSET) -> list[AnyEntry]:
        return await self._run(self.sync.path, entry_id)

    async def path_ids(self, entry_id: str | None | UnsetType = UNSET) -> list[str]:
        return await self._run(self.sync.path_ids, entry_id)

    async def children(self, entry_id: str) -> list[AnyEntry]:
        return await self._run(self.sync.children, entry_id)

    async def tree(self) -> list[TreeNode]:
        return await self._run(self.sync.tree)

    async def leaves(self) -> list[str]:
        return await self._run(self.sync.leaves)

    async def branch_points(self) -> list[str]:
        return await self._run(self.sync.branch_points)

    async def label(self, entry_id: str) -> str | None:
        return await self._run(self.sync.label, entry_id)

    async def labels(self) -> dict[str, tuple[str, str | None]]:
        return await self._run(self.sync.labels)

    async def build_context(self, leaf_id: str | None | UnsetType = UNSET) -> SessionContext:
        return await self._run(self.sync.build_context, leaf_id)

    async def listing(self) -> SessionListing:
        return await self._run(self.sync.listing)

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

    async def append_model_change(self, provider: str, model_id: str) -> str:
        return await self._run(self.sync.append_model_change, provider, model_id)

    async def append_thinking_level_change(self, thinking_level: str) -> str:
        return await self._run(self.sync.append_thinking_level_change, thinking_level)

    async def append_compaction(self, summary: str, first_kept_entry_id: str, tokens_before: int,
                                **options: Any) -> str:
        return await self._run(self.sync.append_compaction, summary, first_kept_entry_id,
                               tokens_before, **options)

    async def set_label(self, target_id: str, label: str | None) -> str:
        return await self._run(self.sync.set_label, target_id, label)

    async def set_name(self, name: str | None) -> str:
        return await self._run(self.sync.set_name, name)

    async def extend(self, entries: Iterable[Mapping[str, Any] | AnyEntry]) -> list[str]:
        return await self._run(self.sync.extend, list(entries))

    async def branch(self, entry_id: str) -> None:
        await self._run(self.sync.branch, entry_id)

    async def reset_leaf(self) -> None:
        await self._run(self.sync.reset_leaf)

    async def branch_with_summary(self, branch_from_id: str | None, summary: str,
                                  **options: Any) -> str:
        return await self._run(self.sync.branch_with_summary, branch_from_id, summary, **options)

    async def checkout(self, entry_id: str | None) -> str | None:
        return await self._run(self.sync.checkout, entry_id)

    async def compact(self, **options: Any) -> Compaction:
        """:meth:`Session.compact` (hooks run in the worker thread: register sync handlers)."""
        return await self._run(lambda: self.sync.compact(**options))

    async def create_branched_session(self, leaf_id: str, **options: Any) -> AsyncSession:
        return AsyncSession(await self._run(self.sync.create_branched_session, leaf_id,
                                            **options))
