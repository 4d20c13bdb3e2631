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
from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from ..context import kept_after_compaction
from ..errors import MissingExtra
from ..importers.responses import AssistantInfo, ToolCalls, entry_items, item_entry
from ..session import Session

try:
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("sessiontree.integrations.openai_agents requires the 'agents' extra: "
                       "pip install 'sessiontree[agents]'") from error

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["SessionTreeSession"]

T = TypeVar("T")


class SessionTreeSession:
    """The OpenAI Agents SDK ``Session`` protocol over a sessiontree :class:`~sessiontree.Session`.

    Args:
        session: the session tree to keep the conversation in (any store).
        session_settings: the SDK's settings (``limit`` caps what ``get_items`` returns).
        model: the model name recorded on assistant messages (pi shows it and uses it to decide
            whether reasoning can be replayed).
        provider: the provider recorded on assistant messages.
    """

    def __init__(self, session: Session, *, session_settings: SessionSettings | None = None,
                 model: str = "", provider: str = "openai") -> None:
        self.tree = session
        self.session_id = session.id
        self.session_settings = session_settings or SessionSettings()
        self._info = AssistantInfo(provider=provider, model=model)
        self._lock = threading.Lock()

    # -- constructors ----------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], **options: Any) -> SessionTreeSession:
        """Continue the session in a file (pi's or ours); options as for the constructor."""
        return cls(Session.open(path), **options)

    @classmethod
    def create(cls, directory: str | os.PathLike[str] | None = None, cwd: str | None = None,
               **options: Any) -> SessionTreeSession:
        """A new session file (in pi's folder for ``cwd`` unless ``directory`` is given); no file
        exists until the first item arrives."""
        return cls(Session.create(directory, cwd), **options)

    @classmethod
    def in_memory(cls, **options: Any) -> SessionTreeSession:
        """A session that is never written to disk."""
        return cls(Session.in_memory(), **options)

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
        return f"<SessionTreeSession {self.session_id} {self.tree.file or 'memory'}>"
