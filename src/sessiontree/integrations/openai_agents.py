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
import contextlib
import json
import os
import pickle
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from weakref import WeakKeyDictionary

from .. import _fs, _json
from ..context import kept_after_compaction
from ..entries import CHECKOUT_CUSTOM_TYPE
from ..errors import ConcurrentModification, InvalidLocation, MissingExtra, SessionNotFound
from ..importers.responses import AssistantInfo, ToolCalls, entry_items, item_entry
from ..session import Session
from ..stores.base import Store, check_session_id, has_logs
from ..stores.jsonl import default_session_dir, glob_escape
from ..stores.url import is_url, parse_location
from . import _agents_turns as agents_turns

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
    from agents.result import RunResult

__all__ = ["SessionTreeSession"]

T = TypeVar("T")

MAIN = "main"
"""The branch that holds what no named branch holds (the SDK's default branch)."""

LOCK_WAIT = 10.0
"""Seconds a handle waits for a session file's writer lock while another handle or process
writes (files take one writer at a time; a handle holds the lock only while it writes)."""

_LOCKS: WeakKeyDictionary[Session, threading.RLock] = WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _lock_of(tree: Session) -> threading.RLock:
    """One lock per session object, shared by every handle wrapping it."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(tree)
        if lock is None:
            lock = _LOCKS[tree] = threading.RLock()
        return lock


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
        lock_timeout: a session file's writer lock: how long a write waits while another
            handle or process writes (then :class:`~sessiontree.errors.SessionLockedError`).
        session_id, db_path, create_tables: the SDK's ``AdvancedSQLiteSession`` constructor's
            words (``db_path`` an SQLite file or ``":memory:"``; the tables are always made as
            needed), so that switching from it is a change of import.

    Raises:
        InvalidLocation: a bad session id or store address, or a store given with a
            ``Session``.
        TypeError: ``session_settings`` holds an unknown key (the SDK's own check).
        pydantic.ValidationError: ``session_settings`` holds a bad value.
    """

    def __init__(self, session: Session | str | None = None,
                 store: Store | str | os.PathLike[str] | None = None, *,
                 session_id: str | None = None, db_path: str | os.PathLike[str] | None = None,
                 create_tables: bool = True,
                 session_settings: SessionSettings | Mapping[str, Any] | None = None,
                 model: str = "", provider: str = "openai", cwd: str | None = None,
                 lock_timeout: float = LOCK_WAIT) -> None:
        if session_id is not None or db_path is not None:  # AdvancedSQLiteSession's words
            if session is not None or store is not None or session_id is None:
                raise TypeError("give session_id (and db_path) or session (and store)")
            session = session_id
            if db_path is not None and os.fspath(db_path) != ":memory:":
                store = f"sqlite:///{os.path.abspath(db_path)}"
        if session is None:
            raise TypeError("SessionTreeSession needs a session id or a Session")
        self._root: Path | None = None
        """A sessions root this session is new to: its file may yet be written by another
        handle (see :meth:`_adopt_stored_file`)."""
        if isinstance(session, Session):
            if store is not None:
                raise InvalidLocation("give a store with a session id, not with a Session")
        else:
            session, self._root = _open_or_create(check_session_id(session), store, cwd,
                                                  lock_timeout)
        self._lock_timeout = lock_timeout
        self.tree = session
        self.session_id = session.id
        self.session_settings: SessionSettings = (
            SessionSettings() if session_settings is None
            else coerce_session_settings(dict(session_settings)
                                         if isinstance(session_settings, Mapping)
                                         else session_settings))
        self._info = AssistantInfo(provider=provider, model=model)
        self._lock = _lock_of(session)
        self._branch: _Branch | None = None
        """The history last handed out, at its leaf (checked against the store each call)."""

    # -- constructors ----------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, lock_timeout: float = LOCK_WAIT,
             **options: Any) -> SessionTreeSession:
        """Continue a session file (pi's or ours), or the session a database address names:
        ``sqlite:///x.db#ID`` (or ``postgresql://...#ID``) opens that session, or creates it when
        the database has no such id yet (a file must exist). Options as for the constructor.

        Raises:
            SessionNotFound: no such file.
        """
        if is_url(path):
            where = parse_location(path)
            if where.session_id is not None:
                return cls(where.session_id, path.partition("#")[0], lock_timeout=lock_timeout,
                           **options)
        return cls(Session.open(path, lock_timeout=lock_timeout), **options)

    @classmethod
    def create(cls, directory: str | os.PathLike[str] | None = None, cwd: str | None = None, *,
               session_id: str | None = None, store: Store | str | None = None,
               lock_timeout: float = LOCK_WAIT, **options: Any) -> SessionTreeSession:
        """A new session: a file (in pi's folder for ``cwd`` unless ``directory`` is given), or in
        ``store`` (a store URL or object), with ``session_id`` (default: a new UUIDv7). Nothing is
        stored until the first item arrives.

        Raises:
            InvalidLocation: a bad session id or store address.
        """
        return cls(Session.create(directory, cwd, session_id=session_id, store=store,
                                  lock_timeout=lock_timeout), **options)

    @classmethod
    def in_memory(cls, session_id: str | None = None, **options: Any) -> SessionTreeSession:
        """A session that is never written to disk."""
        return cls(Session.in_memory(session_id=session_id), **options)

    def close(self) -> None:
        """Release the session file (or the store opened for it)."""
        with self._lock:
            self.tree.close()

    # -- the stored session is the truth -------------------------------------------------------

    def _sync(self) -> _Branch:
        """Read in what other handles and processes wrote (the leaf then is the last stored
        entry) and bring the remembered history to the leaf; the caller holds the lock."""
        self._adopt_stored_file()
        new = self.tree.refresh()
        return self._branch_at(self.tree.leaf_id, new)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """What every writing method writes under: the handle's lock, the turn of a session's
        first write (:meth:`_first_write`), what others wrote read in first, and the file's
        writer lock given up after."""
        with self._lock, self._first_write():
            self._sync()
            try:
                yield
            finally:
                self._release()

    @contextlib.contextmanager
    def _first_write(self) -> Iterator[None]:
        """While a session new to a sessions root has no file, its first write is one handle's
        at a time, across threads and processes (a lock file in the root): the others then find
        that file and continue it instead of each starting a file of its own."""
        root = self._root
        if root is None:
            yield
            return
        _fs.make_private_dirs(str(root))
        path = root / f".{self.session_id}.sessiontree-new.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _fs.lock(fd, str(path), self._lock_timeout)
            yield
            self._adopt_stored_file()
            if self._root is None:  # written: who comes later finds the file
                path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def _adopt_stored_file(self) -> None:
        """A session new to a folder is a file named by its creation time: when another handle
        wrote the session's file first, continue that file instead of starting a second one."""
        if self._root is None:
            return
        mine = self.tree.file
        if mine is not None and os.path.exists(mine):
            self._root = None
            return
        found = _stored_file(self._root, self.session_id)
        if found is not None:
            self.tree.close()
            self.tree = Session.open(found, lock_timeout=self._lock_timeout)
            self._branch = None
            self._root = None

    def _branch_at(self, leaf: str | None, new: Sequence[str] = ()) -> _Branch:
        """The history at ``leaf``: the remembered one, extended by the ``new`` entries that
        lead to ``leaf`` from it when they do (no compaction among them), else read again."""
        known = self._branch
        if known is not None and known.leaf == leaf:
            return known
        if known is not None and new:
            fresh, at = set(new), leaf
            chain: list[dict[str, Any]] = []
            while at is not None and at != known.leaf and at in fresh and len(chain) < len(new):
                entry = json.loads(self.tree.raw_line(at))
                chain.append(entry)
                at = entry.get("parentId")
            if at == known.leaf and all(e.get("type") != "compaction" for e in chain):
                for entry in reversed(chain):
                    known.extend(entry["id"], entry)
                known.leaf = leaf
                return known
        self._branch = _Branch.read(self.tree, leaf)
        return self._branch

    def _release(self) -> None:
        """Let other handles and processes write between calls (a file's writer lock)."""
        self.tree.release()

    # -- reading -----------------------------------------------------------------------------

    def item_ids(self) -> list[str]:
        """The entry id of each item ``get_items()`` returns, in the same order: where to
        :meth:`checkout` to go back to just after that item."""
        with self._lock:
            return list(self._sync().ids)

    async def get_items(self, limit: int | None = None,
                        branch_id: str | None = None) -> list[TResponseInputItem]:
        """The items on the current branch (or the named branch ``branch_id``), oldest first;
        the latest ``limit`` of them when given (else ``session_settings.limit``). Each call
        hands out new objects: changing them changes nothing stored."""
        count = resolve_session_limit(limit, self.session_settings)

        def read() -> tuple[list[bytes], list[bytes], list[bytes]]:
            with self._lock:
                branch = self._sync()
                if branch_id is not None:
                    branch = _Branch.read(self.tree, self._tip(branch_id))
                size = len(branch.blobs)
                return branch.latest(size if count is None else min(max(count, 0), size))

        before, chunks, after = await asyncio.to_thread(read)
        items: list[Any] = _decoded(before)
        for chunk in chunks:
            items += pickle.loads(chunk)  # noqa: S301 - pickled by this process
        return items + _decoded(after) if after else items

    # -- writing -------------------------------------------------------------------------------

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items to the current branch (at the last stored entry, whoever wrote it), one
        entry each, in one write."""
        given = list(items)
        if given:
            await self._run(lambda: self._write(lambda branch: (False, branch.leaf, given)))

    async def pop_item(self) -> TResponseInputItem | None:
        """Take back the latest item: the leaf moves to before it (persisted); nothing is
        deleted, the item stays on a branch of its own. ``None`` when the branch is empty.
        Atomic across handles and processes: an item is popped once."""
        popped: list[bytes] = []

        def plan(branch: _Branch) -> tuple[bool, str | None, list[Any]] | None:
            popped.clear()  # a plan may run again (Redis: overtaken): only the last one counts
            if not branch.ids:
                return None
            popped[:] = branch.blobs[-1:]
            entry_id, first = branch.ids[-1], len(branch.ids) - 1
            while first > 0 and branch.ids[first - 1] == entry_id:
                first -= 1
            # an entry written by pi may stand for several items: the earlier ones come back
            siblings = _json.loads(b"[" + b",".join(branch.blobs[first:-1]) + b"]")
            return True, json.loads(self.tree.raw_line(entry_id)).get("parentId"), siblings

        await self._run(lambda: self._write(plan))
        return _json.loads(popped[0]) if popped else None

    async def clear_session(self) -> None:
        """Start a new, empty branch (persisted as a checkout marker at the root). Nothing is
        deleted: every earlier item stays in the tree and :meth:`checkout` can return to it."""
        await self._run(lambda: self._write(lambda branch: (True, None, [])))

    def _write(self, plan: Callable[[_Branch], tuple[bool, str | None, list[Any]] | None]
               ) -> list[str]:
        """:meth:`_append_planned` under :meth:`_writing`."""
        with self._writing():
            return self._append_planned(plan)

    def _append_planned(self, plan: Callable[[_Branch], tuple[bool, str | None, list[Any]] | None]
                        ) -> list[str]:
        """One compare-and-append; the caller is :meth:`_writing`. Under the writer's lock, at
        the last stored entry, ``plan`` gives ``(moves, parent, items)``: the items go under
        ``parent`` (the leaf, unless ``moves``: then a checkout marker under ``parent`` comes
        first, so that the move is stored); ``None``: nothing to write."""
        done: list[tuple[_Branch, list[dict[str, Any]]]] = []

        def entries(leaf: str | None) -> tuple[str | None, list[dict[str, Any]]]:
            branch = self._branch_at(leaf)
            planned = plan(branch)
            if planned is None:
                return None, []
            moves, parent, items = planned
            if moves:
                branch = _Branch.empty() if parent is None else \
                    branch.before_last(parent, self.tree) or _Branch.read(self.tree, parent)
            written: list[dict[str, Any]] = [_checkout_marker(parent)] if moves else []
            calls = branch.tool_calls(self.tree)
            for item in items:
                entry = item_entry(item, calls, self._info)
                calls.note(entry)
                written.append(entry)
            done.append((branch, written))
            return parent, written

        try:
            try:
                ids = self.tree.append_at_last(entries)
            except ConcurrentModification:
                # a new session another handle stored first: append again, after its
                # entries (a session deleted or replaced meanwhile raises again)
                done.clear()
                ids = self.tree.append_at_last(entries)
        except BaseException:
            self._branch = None  # what was planned may not be stored: read it again
            raise
        if ids:
            branch, written = done[-1]
            for entry_id, entry in zip(ids, written):
                branch.extend(entry_id, entry)
            branch.leaf = ids[-1]
            self._branch = branch
        return ids

    # -- the tree ------------------------------------------------------------------------------

    def checkout(self, entry_id: str | None) -> None:
        """Go back to just after ``entry_id`` (an id from :meth:`item_ids`); the next items start
        a new branch there. Persisted, so pi, a reopened session and every other handle
        agree."""
        with self._writing():
            self.tree.checkout(entry_id)

    branch = checkout

    def fork(self, entry_id: str | None = None, **options: Any) -> SessionTreeSession:
        """A new session (a new file beside this one, or in memory) holding the history up to
        ``entry_id`` (default: the current leaf); this one is unchanged."""
        with self._lock:
            self._sync()
            target = entry_id if entry_id is not None else self.tree.leaf_id
            if target is None:
                raise ValueError("nothing to fork: the current branch is empty")
            forked = self.tree.create_branched_session(target)
        merged = {"session_settings": self.session_settings, "model": self._info.model,
                  "provider": self._info.provider, **options}
        return SessionTreeSession(forked, **merged)

    # -- named branches, turns and usage (what the SDK's AdvancedSQLiteSession adds) ----------

    def _path_entries(self, leaf: str | None) -> list[dict[str, Any]]:
        return [json.loads(self.tree.raw_line(i)) for i in self.tree.path_ids(leaf)] \
            if leaf is not None else []

    def _branches(self) -> tuple[dict[str, tuple[str | None, str | None]], str]:
        """Every branch: name -> (its tip, when it started), and the current branch's name.

        A named branch starts at a checkout marker labelled with its name (what
        :meth:`create_branch_from_turn` writes) and holds what was stored below it, outside
        the named branches below; its tip is the last of that in stored order (pi's rule for
        a session's leaf). ``main`` holds the rest. The caller holds the lock."""
        names = {target: label for target, (label, _) in self.tree.labels().items()}
        owner: dict[str, str] = {}
        found: dict[str, tuple[str | None, str | None]] = {MAIN: (None, None)}
        for entry in self.tree.entries():
            name = names.get(entry.id) if entry.type == "custom" and \
                getattr(entry, "custom_type", None) == CHECKOUT_CUSTOM_TYPE else None
            if name is None:
                name = owner.get(entry.parent_id or "", MAIN)
            owner[entry.id] = name
            started = found.get(name, (None, entry.timestamp))[1] or entry.timestamp
            found[name] = (entry.id, started)
        leaf = self.tree.leaf_id
        return found, owner.get(leaf, MAIN) if leaf is not None else MAIN

    def _tip(self, branch_id: str) -> str | None:
        """The tip of a branch. Raises ``ValueError`` for an unknown branch (as the SDK)."""
        found = self._branches()[0]
        if branch_id not in found:
            raise ValueError(f"Branch '{branch_id}' does not exist")
        return found[branch_id][0]

    async def list_branches(self) -> list[dict[str, Any]]:
        """Every branch (``branch_id``, ``message_count``, ``user_turns``, ``is_current``,
        ``created_at``), as the SDK's ``AdvancedSQLiteSession`` lists them."""
        def listed() -> list[dict[str, Any]]:
            with self._lock:
                self._sync()
                found, current = self._branches()
                rows = []
                for name, (tip, started) in found.items():
                    history = _Branch.read(self.tree, tip)
                    rows.append({"branch_id": name, "message_count": len(history.ids),
                                 "user_turns": len(agents_turns.turns(self._path_entries(tip))),
                                 "is_current": name == current, "created_at": started})
                return rows

        return await self._run(listed)

    async def switch_to_branch(self, branch_id: str) -> None:
        """Continue the named branch: the leaf goes to its tip (persisted, as :meth:`checkout`).

        Raises:
            ValueError: no such branch.
        """
        def switch() -> None:
            with self._writing():
                self.tree.checkout(self._tip(branch_id))

        await self._run(switch)

    async def get_conversation_turns(self, branch_id: str | None = None) -> list[dict[str, Any]]:
        """The user turns of the current (or the named) branch: ``turn``, ``content`` (the
        first 100 characters), ``full_content``, ``timestamp``, ``can_branch``, and
        ``entry_id``, the entry of the user item."""
        def listed() -> list[dict[str, Any]]:
            with self._lock:
                self._sync()
                tip = self.tree.leaf_id if branch_id is None else self._tip(branch_id)
                return agents_turns.turns(self._path_entries(tip))

        return await self._run(listed)

    async def find_turns_by_content(self, search_term: str,
                                    branch_id: str | None = None) -> list[dict[str, Any]]:
        """The turns of :meth:`get_conversation_turns` whose user content holds
        ``search_term`` (ignoring case)."""
        wanted = search_term.casefold()
        found = await self.get_conversation_turns(branch_id)
        return [turn for turn in found if wanted in _text_of(turn["full_content"]).casefold()]

    async def create_branch_from_turn(self, turn_number: int,
                                      branch_name: str | None = None) -> str:
        """Start a named branch just before a user turn of the current branch and continue
        there (the turn can then be asked again, differently); nothing is copied or deleted:
        the branch is a checkout marker labelled with its name.

        Returns:
            The branch's name (``branch_from_turn_<n>_<time>`` when not given).

        Raises:
            ValueError: no such turn, or the name is blank or already used.
        """
        if branch_name is not None and not branch_name.strip():
            raise ValueError("Branch name cannot be empty")

        def create() -> str:
            with self._writing():
                found = agents_turns.turns(self._path_entries(self.tree.leaf_id))
                turn = next((t for t in found if t["turn"] == turn_number), None)
                if turn is None:
                    raise ValueError(f"Turn {turn_number} does not contain a user message "
                                     "in the current branch")
                name = branch_name or f"branch_from_turn_{turn_number}_{int(time.time())}"
                if name in self._branches()[0]:
                    raise ValueError(f"Branch '{name}' already exists")
                parent = json.loads(self.tree.raw_line(turn["entry_id"])).get("parentId")
                (marker,) = self._append_planned(lambda branch: (True, parent, []))
                self.tree.set_label(marker, name)
                return name

        return await self._run(create)

    async def create_branch_from_content(self, search_term: str,
                                         branch_name: str | None = None) -> str:
        """:meth:`create_branch_from_turn` at the first user turn holding ``search_term``.

        Raises:
            ValueError: no turn holds it.
        """
        found = await self.find_turns_by_content(search_term)
        if not found:
            raise ValueError(f"No user turns found containing '{search_term}'")
        return await self.create_branch_from_turn(found[0]["turn"], branch_name)

    async def store_run_usage(self, result: RunResult) -> None:
        """Keep a run's token usage in the session, after ``Runner.run``: a pi 1.5.2 ``usage``
        entry after the run's items (the turn's), counted in the session's totals that
        ``sessiontree ls`` and ``browse`` show, with the SDK's own figures (requests, token
        details) for :meth:`get_turn_usage`."""
        usage = result.context_wrapper.usage
        if usage is None:
            return
        entry = agents_turns.run_usage_entry(usage, self._info.provider, self._info.model)

        def store() -> None:
            with self._writing():
                self.tree.append_at_last(lambda leaf: (leaf, [entry]))

        await self._run(store)

    async def get_session_usage(self, branch_id: str | None = None) -> dict[str, int] | None:
        """The runs' usage summed over the whole session (or one branch): ``requests``,
        ``input_tokens``, ``output_tokens``, ``total_tokens``, ``total_turns``; ``None``
        before any :meth:`store_run_usage`."""
        def summed() -> dict[str, int] | None:
            with self._lock:
                self._sync()
                if branch_id is None:
                    every = (json.loads(self.tree.raw_line(i)) for i in self.tree.ids())
                    return agents_turns.usage_totals(every, one_branch=False)
                return agents_turns.usage_totals(self._path_entries(self._tip(branch_id)))

        return await self._run(summed)

    async def get_turn_usage(self, user_turn_number: int | None = None,
                             branch_id: str | None = None
                             ) -> list[dict[str, Any]] | dict[str, Any]:
        """The runs' usage per turn of the current (or the named) branch, token details
        included; one turn's as a dict (``{}`` when it has none) when ``user_turn_number`` is
        given."""
        def per_turn() -> list[dict[str, Any]] | dict[str, Any]:
            with self._lock:
                self._sync()
                tip = self.tree.leaf_id if branch_id is None else self._tip(branch_id)
                rows = agents_turns.turn_usage(self._path_entries(tip))
            if user_turn_number is None:
                return [rows[turn] for turn in sorted(rows)]
            row = dict(rows.get(user_turn_number, {}))
            row.pop("user_turn_number", None)
            return row

        return await self._run(per_turn)

    async def get_tool_usage(self, branch_id: str | None = None) -> list[tuple[str, int, int]]:
        """``(tool name, calls, turn)`` for the current (or the named) branch, by turn."""
        def counted() -> list[tuple[str, int, int]]:
            with self._lock:
                self._sync()
                tip = self.tree.leaf_id if branch_id is None else self._tip(branch_id)
                return agents_turns.tool_usage(self._path_entries(tip))

        return await self._run(counted)

    async def _run(self, work: Callable[[], T]) -> T:
        return await asyncio.to_thread(work)

    def __repr__(self) -> str:
        return f"<SessionTreeSession {self.session_id} {self.tree.url or 'memory'}>"


_CHUNK = 512


class _Branch:
    """The items of one leaf's history, kept between calls: the entry behind each item and
    the item as JSON (each ``get_items`` decodes new objects from it), with the tool calls on
    the path (what a new ``function_call_output`` is paired with)."""

    def __init__(self, leaf: str | None, ids: list[str], blobs: list[bytes],
                 calls: ToolCalls | None, compacted: bool, chunks: list[bytes] | None = None
                 ) -> None:
        self.leaf, self.ids, self.blobs = leaf, ids, blobs
        self.calls, self.compacted = calls, compacted
        self.chunks: list[bytes] = chunks or []
        """Items ``[k * _CHUNK, (k + 1) * _CHUNK)`` pickled, chunk ``k``: unpickling makes new
        objects about twice as fast as decoding their JSON (made as the history grows)."""

    def latest(self, count: int) -> tuple[list[bytes], list[bytes], list[bytes]]:
        """The last ``count`` items: the JSON of those before the first whole chunk, the
        whole chunks, the JSON of those after them."""
        size = len(self.blobs)
        while (len(self.chunks) + 1) * _CHUNK <= size:
            first = len(self.chunks) * _CHUNK
            part = _json.loads(b"[" + b",".join(self.blobs[first:first + _CHUNK]) + b"]")
            self.chunks.append(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
        start = size - count
        whole = min(-(-start // _CHUNK), len(self.chunks))  # the first chunk not before start
        chunked = len(self.chunks) * _CHUNK
        if whole == len(self.chunks):
            return self.blobs[start:], [], []
        return self.blobs[start:whole * _CHUNK], self.chunks[whole:], self.blobs[chunked:]

    @classmethod
    def empty(cls) -> _Branch:
        return cls(None, [], [], ToolCalls(), False)

    @classmethod
    def read(cls, tree: Session, leaf: str | None) -> _Branch:
        """Read ``leaf``'s history as pi builds its context: after a compaction, its summary
        (as the user message pi sends) and the kept entries."""
        path = [json.loads(tree.raw_line(i)) for i in tree.path_ids(leaf)] \
            if leaf is not None else []
        calls = ToolCalls()
        for entry in path:
            calls.note(entry)
        last = max((i for i, e in enumerate(path) if e.get("type") == "compaction"), default=-1)
        if last >= 0:
            path = [path[last], *kept_after_compaction(path, last, path[last].get(
                "firstKeptEntryId"), itemgetter("id"))]
        branch = cls(leaf, [], [], calls, last >= 0)
        for entry in path:
            branch.extend(entry["id"], entry, note=False)
        return branch

    def extend(self, entry_id: str, entry: Mapping[str, Any], *, note: bool = True) -> None:
        """Add the items of an entry that follows on the path."""
        for item in entry_items(entry):
            self.ids.append(entry_id)
            self.blobs.append(_json.dumps(item))
        if note and self.calls is not None:
            self.calls.note(entry)

    def before_last(self, parent: str, tree: Session) -> _Branch | None:
        """The history at ``parent`` when it is the parent of the last item's entry: these
        items without that entry's (``None`` otherwise, or after a compaction, where that is
        not a prefix); its tool calls are noted again when needed."""
        if self.compacted or not self.ids or \
                json.loads(tree.raw_line(self.ids[-1])).get("parentId") != parent:
            return None
        first = self.ids.index(self.ids[-1])
        return _Branch(parent, self.ids[:first], self.blobs[:first], None, False,
                       self.chunks[:first // _CHUNK])

    def tool_calls(self, tree: Session) -> ToolCalls:
        if self.calls is None:
            self.calls = ToolCalls()
            for entry_id in tree.path_ids(self.leaf) if self.leaf is not None else ():
                self.calls.note(json.loads(tree.raw_line(entry_id)))
        return self.calls


def _decoded(blobs: list[bytes]) -> list[Any]:
    """New objects from items' JSON."""
    found: list[Any] = _json.loads(b"[" + b",".join(blobs) + b"]") if blobs else []
    return found


def _text_of(content: Any) -> str:
    """A user item's content as text to search: a string, or its parts as JSON (the SDK
    searches the stored JSON)."""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _checkout_marker(target: str | None) -> dict[str, Any]:
    """The entry that stores a move of the leaf to ``target`` (as ``Session.checkout`` does)."""
    return {"type": "custom", "customType": CHECKOUT_CUSTOM_TYPE, "data": {"targetId": target}}


def _stored_file(root: Path, session_id: str) -> Path | None:
    """The file of ``session_id`` in a sessions root in pi's layout, if stored."""
    found = sorted(root.glob(f"*/*_{glob_escape(session_id)}.jsonl")) if root.is_dir() else []
    return found[-1] if found else None


def _open_or_create(session_id: str, store: Store | str | os.PathLike[str] | None,
                    cwd: str | None, lock_timeout: float) -> tuple[Session, Path | None]:
    """The session ``session_id`` of ``store``, or a new one by that id (stored at its first
    append); with the sessions root it is new to, if any."""
    if store is None:
        return Session.in_memory(cwd, session_id=session_id), None
    if isinstance(store, (str, os.PathLike)) and not is_url(store):
        root = Path(store)
        found = _stored_file(root, session_id)
        if found is not None:
            return Session.open(found, lock_timeout=lock_timeout), None
        cwd = os.path.abspath(cwd) if cwd is not None else os.getcwd()
        return Session.create(default_session_dir(cwd, root), cwd, session_id=session_id,
                              lock_timeout=lock_timeout), root
    if isinstance(store, str):
        where = parse_location(store)
        if where.session_id not in (None, session_id):
            raise InvalidLocation(f"{store}: names session {where.session_id}, not {session_id}")
        base = store.partition("#")[0]
        try:
            return Session.open(f"{base}#{session_id}"), None
        except SessionNotFound:
            return Session.create(cwd=cwd, session_id=session_id, store=base), None
    given: Store = store
    if not has_logs(store):
        raise InvalidLocation(f"{type(store).__name__} cannot hold a Session (it has no "
                              "open_log/new_log)")
    try:
        return Session(store.open_log(session_id)), None
    except SessionNotFound:
        return Session.create(cwd=cwd, session_id=session_id, store=given), None
