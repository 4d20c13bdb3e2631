"""``Session``: one agent conversation as an append-only tree; the facade a program calls.

A session is composed from a log (a JSONL file, memory, or a store's log); reading entries, the
load report and checked appends come from :class:`~sessiontree._treelog.TreeLog`, and each
operation is handed to its own module (:mod:`.navigation`, :mod:`.fork`, :mod:`.compaction`,
:mod:`.optree`), which takes the session as an argument and never imports this module.

Invariants:
* Every append creates a child of the current leaf and makes it the leaf; nothing stored is
  ever rewritten in place (migrations replace the whole file atomically, keeping a backup).
* ``build_context`` costs O(depth) (one step from a remembered parent's context when it can).
* On open the leaf is the last entry in file order (pi's rule); ``branch``/``reset_leaf`` move it
  in memory only, ``checkout`` persists the move with a marker entry (format-spec.md 17 g).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET, UnsetType

from ._cache import DEFAULT_CACHE_BYTES
from ._codec import decode_line, held
from ._time import iso_now, uuid7
from ._tree import TreeNode, js_trim
from ._treelog import EntryMaker, LoadWarning, TreeLog, entry_maker
from .entries import (
    CHECKOUT_CUSTOM_TYPE,
    AnyEntry,
    BranchSummary,
    Compaction,
    Custom,
    CustomMessageEntry,
    FileDetails,
    Label,
    ModelChange,
    SessionHeader,
    SessionInfo,
    ThinkingLevelChange,
    UsageEntry,
)
from .errors import InvalidEntry, InvalidLocation
from .messages import (
    AgentMessage,
    CustomMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolDeclaration,
    ToolReference,
    UnknownMessage,
    Usage,
    message_from_builtins,
    stored_message,
    validate_message,
)
from .stores.base import SessionLog, Store, check_new_session_id
from .stores.jsonl import (
    JsonlFile,
    default_session_dir,
    header_for_name,
    open_file,
    session_file_name,
)
if TYPE_CHECKING:
    from ._offload import Offload
    from .context import ContextMemo, SessionContext
    from .events import EventBus
    from .compaction import CompactionPreparation, CompactionSettings
    from .navigation import NavigationResult
    from .optree.model import OpTree
    from .projection import SessionProjection
    from .summarize.base import CancelToken, Summarizer

__all__ = ["CHECKOUT_CUSTOM_TYPE", "LoadWarning", "Session"]

class Session(TreeLog):
    """A session tree. Open one with :meth:`open`, :meth:`create` or :meth:`in_memory`.

    Use it as a context manager (or call :meth:`close`) to release the file. Reading entries by
    id, :meth:`entries`, :meth:`extend`, :attr:`problems` and :meth:`listing` come from
    :class:`~sessiontree._treelog.TreeLog`, the part of a session the stores share.
    """

    _init_frames = 1

    def __init__(self, log: SessionLog, *, header: SessionHeader | None = None,
                 strict: bool = False, warn: bool = True,
                 cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        """Wrap an already-migrated log. Prefer :meth:`open`, :meth:`create`, :meth:`in_memory`."""
        self._owned_store: Store | None = None  # opened for this session: closed with it
        self._contexts: ContextMemo | None = None  # made by the first build_context
        self._events: EventBus | None = None
        super().__init__(log, header=header, strict=strict, warn=warn, cache_bytes=cache_bytes)

    @property
    def events(self) -> EventBus:
        """Hooks around navigation, forks, compaction and model context
        (:mod:`sessiontree.events`; made when first asked for)."""
        if self._events is None:
            from .events import EventBus

            self._events = EventBus()
        return self._events

    @events.setter
    def events(self, bus: EventBus) -> None:
        self._events = bus

    def _hooked(self, name: str) -> bool:
        """Whether a handler is registered for ``name`` (without making the bus)."""
        return self._events is not None and self._events.has(name)

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, strict: bool = False, durable: bool = False,
             lock_timeout: float = 0.0, migrate: bool = True, warn: bool = True,
             cache_bytes: int = DEFAULT_CACHE_BYTES, read_only: bool = False,
             index: bool | None = None, processes: int | None = None) -> Session:
        """Open a session file, or a stored session by URL.

        Args:
            path: the ``.jsonl`` file, or a database address with the session's id
                (``sqlite:///x.db#ID``, ``postgresql://...#ID``; the store is opened for this
                session and closed with it). A file of an older format version (or the first
                seed's draft format) is migrated in place first, its original kept as
                ``<file>.v<N>.bak``.
            strict: raise :class:`~sessiontree.errors.CorruptLine` on the first bad line instead
                of reporting it in :attr:`problems`.
            durable: fsync after every append (SQLite: at every commit; PostgreSQL commits
                durably whatever this says).
            lock_timeout: JSONL files: the first append takes the writer's lock and keeps it
                until :meth:`close`; if another process holds it, wait this many seconds for
                it before raising :class:`~sessiontree.errors.SessionLockedError`. Databases
                have no session-long lock, so this does not apply to them: each append locks
                the session's row for its own transaction only; a second appender waits for
                that transaction (PostgreSQL: until it ends; SQLite: up to the store's
                ``timeout``, 30 s, then ``SessionLockedError``).
            migrate: set False to refuse (raise) instead of migrating an old file.
            warn: emit one :class:`LoadWarning` when the file has problems.
            cache_bytes: keep decoded lines up to this many bytes of the file (0: none), so
                that repeated reads of the same entries are not decoded again.
            read_only: refuse every append, label and leaf marker with
                :class:`~sessiontree.errors.ReadOnlyStore` (a database store is opened
                read-only, down to the server's transactions for PostgreSQL); an old file is
                then not migrated but refused.
            index: files: read the file's envelope index instead of scanning what it covers,
                and keep it up to date (in sessiontree's cache folder, checked against the file
                on every open). ``None``: for files of 256 KiB or more, unless
                ``SESSIONTREE_INDEX=0``.
            processes: files: let a file of 96 MiB or more be scanned by this many processes
                (helper processes started for the open; only when CPUs are free). ``None``:
                ``SESSIONTREE_PROCESSES``, else one (no helper).

        Raises:
            SessionNotFound: the file (or the stored session) does not exist.
            CorruptHeader: the first parsed line is not a session header (the file is untouched).
            CorruptLine: ``strict`` and a bad line.
            UnsupportedVersion: a newer format version, or an old one with ``migrate=False``
                or ``read_only``.
            InvalidLocation: a database address without ``#SESSION_ID``.
            StoreUnavailable: the database cannot be reached.
        """
        from .stores.url import is_url  # not imported with Session: it is rarely a URL

        if is_url(path):
            return cls._open_stored(path, strict=strict, durable=durable, warn=warn,
                                    cache_bytes=cache_bytes, read_only=read_only)
        log = open_file(path, durable=durable, lock_timeout=lock_timeout, migrate=migrate,
                        read_only=read_only, strict=strict, warn=warn, index=index,
                        processes=processes)
        # an empty file keeps the id its name carries
        return cls(log, strict=strict, warn=warn, cache_bytes=cache_bytes,
                   header=header_for_name(path))

    @classmethod
    def _open_stored(cls, url: str, *, strict: bool, durable: bool, warn: bool,
                     cache_bytes: int, read_only: bool) -> Session:
        """A session of a database store, by URL; closing the session closes the store."""
        from .stores.url import open_store, stored_session_id

        session_id = stored_session_id(url)
        store = open_store(url, durable=durable, read_only=read_only)
        try:
            log = store.open_log(session_id)
        except BaseException:
            store.close()
            raise
        try:
            session = cls(log, strict=strict, warn=warn, cache_bytes=cache_bytes)
        except BaseException:
            store.close()
            raise
        session._owned_store = store
        return session

    @classmethod
    def create(cls, directory: str | os.PathLike[str] | None = None, cwd: str | None = None, *,
               session_id: str | None = None, parent_session: str | None = None,
               root: str | os.PathLike[str] | None = None, durable: bool = False,
               store: Store | str | None = None, lock_timeout: float = 0.0) -> Session:
        """Start a new session. Nothing is stored until the first append (format-spec.md 17 f).

        Without ``directory`` (or ``root``, or ``store``) the file goes where pi keeps its
        sessions, under the home directory: ``~/.pi/agent/sessions/--<cwd>--/``, so pi lists and
        resumes it. Set ``$SESSIONTREE_DIR`` (or pass ``directory``) to keep tests and apps out
        of the user's real pi sessions; see
        :func:`~sessiontree.stores.jsonl.default_sessions_root` for the order of the settings.

        Args:
            directory: the folder for the file; default the folder for ``cwd`` under ``root``
                (``<root>/--<cwd>--/``).
            root: the sessions root (default: ``$SESSIONTREE_DIR``, else
                ``$PI_CODING_AGENT_DIR/sessions``, else ``~/.pi/agent/sessions``).
            cwd: the working directory recorded in the header (default: the current one).
            session_id: the session id (default: a new UUIDv7); as pi 1.5.2 accepts one:
                letters, digits, ``.``, ``_`` and ``-``, starting and ending with a letter or
                digit.
            parent_session: recorded in the header when this session was forked from another.
            store: keep the session in this store instead of a file: a store object (left open
                when the session closes) or a store URL such as ``sqlite:///sessions.db``
                (closed with the session).
            lock_timeout: a file's writer lock, as for :meth:`open`.

        Raises:
            InvalidLocation: a bad session id or store URL, or a store URL as ``directory`` or
                ``root``.
        """
        for folder in (directory, root):
            if folder is not None and "://" in os.fspath(folder):
                from .stores.url import is_url  # (only for a name that may be one)

                if is_url(folder):  # (it would name a folder "sqlite:" at the first append)
                    raise InvalidLocation(f"{os.fspath(folder)} is a store's URL, not a "
                                          "folder: pass it as store=")
        cwd = os.path.abspath(cwd) if cwd is not None else os.getcwd()
        header = SessionHeader(id=uuid7() if session_id is None else check_new_session_id(
            session_id), timestamp=iso_now(), cwd=cwd,
            parent_session=parent_session if parent_session else UNSET)
        if store is not None:
            return cls._create_stored(store, header, durable=durable)
        folder = default_session_dir(cwd, root) if directory is None else directory
        log = JsonlFile(os.path.join(folder, session_file_name(header)), durable=durable,
                        lock_timeout=lock_timeout)
        if log.exists():
            raise InvalidEntry("a session file with this name already exists", path=log.path)
        return cls(log, header=header)

    @classmethod
    def _create_stored(cls, store: Store | str, header: SessionHeader, *,
                       durable: bool) -> Session:
        from .stores.base import has_logs
        from .stores.url import open_store

        owned = open_store(store, durable=durable) if isinstance(store, str) else None
        target = owned if owned is not None else store
        assert not isinstance(target, str)
        if not has_logs(target):
            raise InvalidLocation(f"{type(target).__name__} cannot hold a Session (it has no "
                                  "open_log/new_log)")
        try:
            log = target.new_log(header)
        except BaseException:
            if owned is not None:
                owned.close()
            raise
        session = cls(log, header=header)
        session._owned_store = owned
        return session

    @classmethod
    def continue_recent(cls, cwd: str | None = None, *,
                        directory: str | os.PathLike[str] | None = None,
                        root: str | os.PathLike[str] | None = None, durable: bool = False,
                        lock_timeout: float = 0.0) -> Session:
        """Resume the most recent session of a working directory, or start a new one there
        (pi's ``continueRecent``, what ``pi -c`` does).

        The most recent session is pi 1.5.2's choice exactly: among the folder's ``*.jsonl``
        files whose first line that parses (within the first MiB) is a session header, the one
        modified last; in a ``directory`` that is not pi's folder for ``cwd``, only the
        sessions of ``cwd``. Nothing is written until the first append.

        Args:
            cwd: the working directory (default: the current one).
            directory: the session folder (default: pi's folder for ``cwd`` under ``root``,
                root default ``~/.pi/agent/sessions``).
            root: the sessions root, when ``directory`` is not given.
            durable: fsync after every append.
            lock_timeout: as for :meth:`open`.
        """
        from .stores._jsonl_listing import most_recent_session

        cwd = os.path.abspath(cwd) if cwd is not None else os.getcwd()
        own = default_session_dir(cwd, root)
        folder = own if directory is None else directory
        found = most_recent_session(folder, None if os.path.abspath(folder) == os.fspath(own)
                                    else cwd)
        if found is not None:
            return cls.open(found, durable=durable, lock_timeout=lock_timeout)
        return cls.create(folder, cwd, durable=durable)

    @classmethod
    def in_memory(cls, cwd: str | None = None, *, session_id: str | None = None) -> Session:
        """A session that lives only in memory (nothing is ever written to disk)."""
        from .stores.memory import MemoryLog

        header = SessionHeader(id=session_id or uuid7(), timestamp=iso_now(),
                               cwd=cwd if cwd is not None else os.getcwd())
        return cls(MemoryLog(), header=header)

    # -- resources ------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the file (or the store opened for it). The session cannot be read or appended
        to afterwards."""
        self._contexts = None
        try:
            super().close()
        finally:
            store, self._owned_store = self._owned_store, None
            if store is not None:
                store.close()

    def _paths_changed(self) -> None:
        if self._contexts is not None:
            self._contexts.clear()

    # -- reading -------------------------------------------------------------------------------

    def follow_lines(self, *, idle_timeout: float | None = None, poll: float = 0.2,
                     stop: Callable[[], bool] | None = None) -> Iterator[bytes]:
        """The stored line of each entry appended after what this session has read, by any
        writer, as it lands (PostgreSQL wakes on ``NOTIFY``; files, SQLite and memory are
        looked at every ``poll`` seconds). Only whole lines are handed out. The session itself
        is not changed: its next append reads the new entries in, or open it again.

        Args:
            idle_timeout: stop after this many seconds without a new entry (``None``: never).
            poll: seconds between looks.
            stop: also stop once this returns true (asked whenever nothing new came).
        """
        from .stores._follow import follow_log

        return follow_log(self._log, idle_timeout=idle_timeout, poll=poll, stop=stop)

    def follow(self, *, idle_timeout: float | None = None, poll: float = 0.2,
               stop: Callable[[], bool] | None = None) -> Iterator[AnyEntry]:
        """:meth:`follow_lines`, each line decoded as a typed entry."""
        for line in self.follow_lines(idle_timeout=idle_timeout, poll=poll, stop=stop):
            yield decode_line(line)

    def optree(self, *, resolve_files: bool = True) -> OpTree:
        """The operation tree recorded in this session (its ``sessiontree.op*`` custom entries,
        folded in file order whatever the leaf; runs that never ended are marked unfinished).

        Args:
            resolve_files: also load child runs that live in other session files.

        Returns:
            The tree; ``tree.problems`` lists the entries that could not be applied.
        """
        from .optree.persist import optree_from_session

        return optree_from_session(self, resolve_files=resolve_files)

    def children(self, entry_id: str) -> list[AnyEntry]:
        """Direct children of an entry, in file order.

        Raises:
            EntryNotFound: no such entry.
        """
        self._record(entry_id)
        return self._decode_all(self._index.children(entry_id))

    def children_ids(self, entry_id: str) -> list[str]:
        """Ids of the direct children, in file order (no payload decoded)."""
        self._record(entry_id)
        return [r.id for r in self._index.children(entry_id)]

    def subtree_ids(self, entry_id: str) -> list[str]:
        """``entry_id`` and every entry below it, in file order (no payload decoded).

        Raises:
            EntryNotFound: no such entry.
        """
        self._record(entry_id)
        below = {entry_id}
        stack = [entry_id]
        while stack:
            for child in self._index.children(stack.pop()):
                if child.id not in below:
                    below.add(child.id)
                    stack.append(child.id)
        return [r.id for r in self._index.records() if r.id in below]

    def path_ids(self, entry_id: str | None | UnsetType = UNSET) -> list[str]:
        """Ids on the root-to-entry path (default: to the current leaf); no payload decoded."""
        target = self._leaf if entry_id is UNSET else entry_id
        if target is None:
            return []
        self._record(target)
        return [r.id for r in self._index.path(target)]

    def path(self, entry_id: str | None | UnsetType = UNSET) -> list[AnyEntry]:
        """The entries from the root to ``entry_id`` (default: the current leaf), root first.

        Raises:
            EntryNotFound: no such entry.
        """
        target = self._leaf if entry_id is UNSET else entry_id
        if target is None:
            return []
        self._record(target)
        return self._decode_all(self._index.path(target))

    def tree(self) -> list[TreeNode]:
        """Every entry as a tree: roots in file order, children oldest first (stable).

        Nodes carry the envelope and label; ``node.entry`` decodes the payload on demand.
        """
        return self._index.tree(self._decode)

    def leaves(self) -> list[str]:
        """Ids of the entries without children, in file order."""
        return [r.id for r in self._index.leaves()]

    def branch_points(self) -> list[str]:
        """Ids of the entries with more than one child, in file order."""
        return [r.id for r in self._index.branch_points()]

    def label(self, entry_id: str) -> str | None:
        """The entry's current label (the last label entry for it in file order wins)."""
        found = self._index.label(entry_id)
        return found[0] if found else None

    def labels(self) -> dict[str, tuple[str, str | None]]:
        """Every resolved label: target id -> (label, timestamp of the label entry that set it)."""
        return dict(self._index.labels)

    def build_context(self, leaf_id: str | None | UnsetType = UNSET, *,
                      for_model: bool = False) -> SessionContext:
        """The messages to send to a model from ``leaf_id`` (default: the current leaf).

        ``None`` means "before the first entry": an empty context.

        Args:
            leaf_id: where to build from.
            for_model: run the ``context`` hooks (:mod:`sessiontree.events`) over the messages,
                as just before a model call; the session itself is never changed by them.

        Raises:
            EntryNotFound: ``leaf_id`` is not in the session.
            HookFailed: a ``context`` handler raised (``for_model`` only).
        """
        target = self._leaf if leaf_id is UNSET else leaf_id
        if target is None:
            from .context import EMPTY_CONTEXT

            context = EMPTY_CONTEXT.share()
        else:
            context = self._context(target).share()
        if for_model and self._hooked("context"):
            from .events import for_model as hooked

            context = hooked(self, target, context)
        return context

    def build_projection(self, leaf_id: str | None | UnsetType = UNSET) -> SessionProjection:
        """What the model sees of each entry from ``leaf_id`` (default: the current leaf): pi
        1.5.2's ``buildSessionProjection``, every context entry with the messages it
        contributes after ``context_edit`` entries (:mod:`sessiontree.projection`).

        Raises:
            EntryNotFound: ``leaf_id`` is not in the session.
        """
        from .projection import SessionProjection, projection_from_path

        target = self._leaf if leaf_id is UNSET else leaf_id
        if target is None:
            return SessionProjection([], "off", None)
        return projection_from_path(self._path_records(target), self._data, self._message_json)

    def system_message(self, at: str | None | UnsetType = UNSET
                       ) -> SystemMessage | UnknownMessage | None:
        """The system prompt and tools in effect at ``at`` (default: the current leaf),
        replayed from the context's system messages as pi does (pi-ai's
        ``getCurrentSystemMessage``, :mod:`sessiontree.system_prompt`); ``None`` when the
        context has no system message and no tool.

        Raises:
            EntryNotFound: ``at`` is not in the session.
        """
        from .system_prompt import current_system_message

        data = current_system_message(self.build_context(at).to_builtins()["messages"])
        return None if data is None else message_from_builtins(data)  # type: ignore[return-value]

    def _context(self, target: str) -> SessionContext:
        """The context of ``target``, built or remembered (:meth:`ContextMemo.context`)."""
        contexts = self._contexts
        if contexts is None:  # the first context: its module is imported now, not with Session
            from .context import ContextMemo

            contexts = self._contexts = ContextMemo()
        return contexts.context(target, self._record, self._index, self._path_records,
                                      self._data, self._message_json, self._prefetch_messages)

    # -- appending -----------------------------------------------------------------------------

    def append_at_last(self, plan: Callable[[str | None], tuple[str | None, Sequence[
            Mapping[str, Any]]]]) -> list[str]:
        """Read, decide and append as one step no other writer can come between (a
        compare-and-append across handles and processes).

        Under the writer's lock, with every entry other writers appended read in, the leaf
        moves to the last stored entry and ``plan(leaf)`` returns the parent of the first new
        entry and the entries (on-disk dicts, as for :meth:`append_entry`; each the child of
        the one before). They are written together; the leaf is the last of them. Where appends
        take no lock (Redis: a compare and append), ``plan`` runs again whenever another writer
        appended first, with their entries read in; only its last answer is written.

        Returns:
            The new entries' ids (``[]`` when ``plan`` returned none).
        """
        def planned() -> tuple[str | None, list[EntryMaker]]:
            self._leaf = self.last_id
            parent, entries = plan(self._leaf)
            if parent is not None:
                self._record(parent)
            return parent, [entry_maker(entry) for entry in entries]

        return self._append_chain(planned)

    def append_entry(self, entry: Mapping[str, Any] | AnyEntry) -> str:
        """Append any entry at the leaf; its ``id``, ``parentId`` and ``timestamp`` are set anew.

        Args:
            entry: a typed entry, or a dict in the on-disk shape (camelCase keys, a string
                ``type``); other keys are written as given, in pi's key order.

        Returns:
            The new entry's id (it is now the leaf).

        Raises:
            InvalidEntry: no string ``type``, or a value JSON cannot hold (a set, bytes,
                another object; the message names where); nothing is written.
        """
        return self._append(entry_maker(entry))

    def append_message(self, message: AgentMessage | UnknownMessage | Mapping[str, Any]) -> str:
        """Append a conversation message (user, assistant, toolResult, bashExecution, custom).

        Args:
            message: a typed message (``UserMessage.of(...)``, ``AssistantMessage.of(...)``,
                ``ToolResultMessage.of(...)``), or a dict in the on-disk shape, written as given;
                a dict without ``timestamp`` gets the current time in epoch milliseconds. A
                message of a role this library does not know is written unchecked, as is an
                :class:`UnknownMessage` (a message copied as it was stored).

        Returns:
            The new entry's id.

        Raises:
            InvalidMessage: a field of the wrong type or a missing required field (the error's
                ``field`` names it); nothing is written.
            InvalidEntry: no ``role``, or a summary message (those come from entries).
        """
        return self._append_message(*stored_message(message))

    def append_thinking_level_change(self, thinking_level: str) -> str:
        """Record a thinking level (``off``, ``minimal``, ``low``, ``medium``, ``high``, ``xhigh``)."""
        return self._append(lambda i, p, t: ThinkingLevelChange(
            id=i, parent_id=p, timestamp=t, thinking_level=thinking_level))

    def append_model_change(self, provider: str, model_id: str) -> str:
        """Record a model switch; it sets the context's model until a later change or reply."""
        return self._append(lambda i, p, t: ModelChange(
            id=i, parent_id=p, timestamp=t, provider=provider, model_id=model_id))

    def append_compaction(self, summary: str, first_kept_entry_id: str, tokens_before: int,
                          details: FileDetails | Any = UNSET, from_hook: bool = False,
                          usage: Usage | UnsetType = UNSET) -> str:
        """Append a compaction: the context from here on starts with ``summary``, then the path
        from ``first_kept_entry_id`` on. As pi 1.5.2 does, it carries the system prompt and
        tools replayed at the current leaf (``systemMessage``, stamped with the compaction's
        time; none when the context has no system message and no tool), which then lead the
        compacted context; ``usage`` is the summarizer's, counted in the session's totals.

        Raises:
            EntryNotFound: ``first_kept_entry_id`` is not on the current path.
            InvalidEntry: ``details`` holds what JSON cannot (a set, bytes, another object).
        """
        from .compaction import compaction_entry

        held(details, "details", "compaction")
        return self._append(compaction_entry(self, summary, first_kept_entry_id, tokens_before,
                                             details, from_hook, usage))

    def append_custom(self, custom_type: str, data: Any = UNSET) -> str:
        """Append extension state: stored in the tree, never sent to the model.

        Raises:
            InvalidEntry: ``data`` holds what JSON cannot (a set, bytes, another object; the
                message names where); nothing is written.
        """
        held(data, "data", f"custom entry {custom_type!r}")
        return self._append(lambda i, p, t: Custom(
            id=i, parent_id=p, timestamp=t, custom_type=custom_type, data=data))

    def append_custom_message(self, custom_type: str,
                              content: str | Sequence[TextContent | ImageContent],
                              display: bool = True, details: Any = UNSET) -> str:
        """Append a message an extension injects into the model context (as a user message).

        Raises:
            InvalidMessage: ``content`` is not a string or a list of text and image blocks.
            InvalidEntry: ``details`` holds what JSON cannot (a set, bytes, another object).
        """
        held(details, "details", f"custom message {custom_type!r}")
        body = content if isinstance(content, str) else list(content)
        validate_message(CustomMessage(custom_type=custom_type, content=body, display=display,
                                       details=details))
        return self._append(lambda i, p, t: CustomMessageEntry(
            id=i, parent_id=p, timestamp=t, custom_type=custom_type, content=body,
            display=display, details=details))

    def append_system_message(self, content: str | Sequence[TextContent] = "", *,
                              sections: Mapping[str, str | None] | None = None,
                              tools_added: Sequence[ToolDeclaration | Mapping[str, Any]]
                              | None = None,
                              tools_removed: Sequence[str | ToolReference | Mapping[str, Any]]
                              | None = None) -> str:
        """Append a system message (pi 1.x): the first one of a session holds the whole prompt
        (``content``, named ``sections``) and the tools; later ones add instructions, patch
        sections by name (``None`` removes one) and add or remove tools. It stays in the
        context; :meth:`system_message` replays them.

        Raises:
            InvalidMessage: a field of the wrong shape (the error's ``field`` names it).
        """
        from .system_prompt import new_system_message

        message = new_system_message(content, sections=sections, tools_added=tools_added,
                                     tools_removed=tools_removed)
        return self._append(lambda i, p, t: {"type": "message", "id": i, "parentId": p,
                                             "timestamp": t, "message": message})

    def append_usage(self, kind: str, provider: str, model: str, usage: Usage | Mapping[str, Any],
                     note: str | None = None) -> str:
        """Record model usage that is no assistant message (pi 1.x's ``usage`` entry: cache
        warming, a title, a classifier): counted in the session's totals, never part of the
        context. ``kind`` is any string; an empty ``note`` is left out, as pi leaves it out.

        Raises:
            InvalidEntry: ``usage`` does not have pi's usage shape.
        """
        try:
            typed = usage if isinstance(usage, Usage) else msgspec.convert(dict(usage), Usage)
        except msgspec.ValidationError as error:
            raise InvalidEntry(f"usage: {error}") from None
        return self._append(lambda i, p, t: UsageEntry(
            id=i, parent_id=p, timestamp=t, kind=kind, provider=provider, model=model,
            usage=typed, note=note or UNSET))

    def append_context_edit(self, target_id: str, replacement: Any) -> str:
        """Change what the model sees of an earlier entry, without rewriting it (pi 1.x's
        ``context_edit``, checked as pi's ``appendContextEdit`` checks it): from here on,
        on this branch, the target is left out of the context (``replacement=None``) or its
        content is replaced (a string, a list of content blocks, or ``{"content": ...}``; a
        string is stored as one text block for assistant messages and tool results).

        Raises:
            EntryNotFound: no such target.
            InvalidEntry: the target is not on the current branch, gives no editable content
                (only user, assistant, tool result and custom messages do), or the replacement
                holds no string or list content.
        """
        from .context import context_edit

        record = self._record(target_id)
        edit = context_edit(target_id, replacement, entry_type=record.type, role=record.role,
                            on_branch=target_id in self.path_ids(), path=self.file)
        return self._append(lambda i, p, t: {"type": "context_edit", "id": i, "parentId": p,
                                             "timestamp": t, **edit})

    def set_label(self, target_id: str, label: str | None) -> str:
        """Label an entry (``None`` or ``""`` clears it); appends a ``label`` entry at the leaf.

        Raises:
            EntryNotFound: no such target.
        """
        self._record(target_id)
        return self._append(lambda i, p, t: Label(
            id=i, parent_id=p, timestamp=t, target_id=target_id, label=label or UNSET))

    def set_name(self, name: str | None) -> str:
        """Name the session (trimmed; ``None`` or blank clears it)."""
        text = js_trim(name or "")
        return self._append(lambda i, p, t: SessionInfo(id=i, parent_id=p, timestamp=t, name=text))

    # -- moving the leaf -----------------------------------------------------------------------

    def branch(self, entry_id: str) -> None:
        """Move the leaf to an existing entry; the next append starts a branch there.

        Raises:
            EntryNotFound: no such entry.
        """
        self._record(entry_id)
        self._leaf = entry_id

    def reset_leaf(self) -> None:
        """Move the leaf before the first entry: the next append is a new root."""
        self._leaf = None

    def branch_with_summary(self, branch_from_id: str | None, summary: str,
                            details: FileDetails | Any = UNSET, from_hook: bool = False,
                            usage: Usage | UnsetType = UNSET) -> str:
        """Move the leaf to ``branch_from_id`` and append a ``branch_summary`` there (pi's rule:
        ``fromId`` is ``branch_from_id``, or ``"root"`` for ``None``); ``usage`` is the
        summarizer's, counted in the session's totals.

        Returns:
            The summary entry's id (the new leaf).

        Raises:
            EntryNotFound: no entry ``branch_from_id``.
            InvalidEntry: ``details`` holds what JSON cannot (a set, bytes, another object).
        """
        held(details, "details", "branch summary")
        if branch_from_id is not None:
            self._record(branch_from_id)
        self._leaf = branch_from_id
        return self._append(lambda i, p, t: BranchSummary(
            id=i, parent_id=p, timestamp=t, from_id=branch_from_id or "root", summary=summary,
            details=details, usage=usage, from_hook=from_hook))

    def checkout(self, entry_id: str | None) -> str | None:
        """Move the leaf so that the move survives a reload, in pi too (format-spec.md 17 g).

        Appends a ``sessiontree.checkout`` custom entry under the target (a new root for
        ``None``), unless the target is already the last line.

        Returns:
            The marker's id, or ``None`` when no marker was needed.
        """
        from .navigation import checkout

        return checkout(self, entry_id)

    # -- navigation and forks (navigation.py, fork.py) --

    def navigate_tree(self, target_id: str, summarize: bool = False,
                      instructions: str | None = None, label: str | None = None,
                      cancel: CancelToken | None = None, *, summarizer: Summarizer | None = None,
                      persist: bool = True) -> NavigationResult:
        """Move to another point of the tree as pi's ``/tree`` does, optionally leaving a summary
        of the abandoned branch; see :func:`sessiontree.navigation.navigate_tree`."""
        from .navigation import navigate_tree

        return navigate_tree(self, target_id, summarize, instructions, label, cancel,
                             summarizer=summarizer, persist=persist)

    async def anavigate_tree(self, target_id: str, summarize: bool = False,
                             instructions: str | None = None, label: str | None = None,
                             cancel: CancelToken | None = None, *,
                             summarizer: Summarizer | None = None,
                             persist: bool = True, offload: Offload | None = None
                             ) -> NavigationResult:
        """:meth:`navigate_tree` for async code (async hooks awaited in the running loop;
        ``offload`` runs the reads and writes between them, default in the loop's thread)."""
        from .navigation import anavigate_tree

        return await anavigate_tree(self, target_id, summarize, instructions, label, cancel,
                                    summarizer=summarizer, persist=persist, offload=offload)

    def pop(self, to: str | None = None, *, summarizer: Summarizer | None = None,
            instructions: str | None = None, cancel: CancelToken | None = None
            ) -> NavigationResult:
        """Go back to before the last user message (or to ``to``), leaving a summary of what was
        popped; see :func:`sessiontree.navigation.pop`."""
        from .navigation import pop

        return pop(self, to, summarizer=summarizer, instructions=instructions, cancel=cancel)

    async def apop(self, to: str | None = None, *, summarizer: Summarizer | None = None,
                   instructions: str | None = None, cancel: CancelToken | None = None,
                   offload: Offload | None = None) -> NavigationResult:
        """:meth:`pop` for async code (as :meth:`anavigate_tree`)."""
        from .navigation import apop

        return await apop(self, to, summarizer=summarizer, instructions=instructions,
                          cancel=cancel, offload=offload)

    def cherry_pick(self, entry_id: str) -> str:
        """Copy an entry's message onto the current leaf; returns the copy's id (the new leaf).
        See :func:`sessiontree.navigation.cherry_pick`."""
        from .navigation import cherry_pick

        return cherry_pick(self, entry_id)

    def create_branched_session(self, leaf_id: str, *, in_memory: bool | None = None,
                                path: str | os.PathLike[str] | None = None,
                                directory: str | os.PathLike[str] | None = None) -> Session:
        """A new session holding the root-to-``leaf_id`` path (pi's ``/fork``), returned open;
        this session is unchanged. See :func:`sessiontree.fork.create_branched_session`."""
        from .fork import create_branched_session

        return create_branched_session(self, leaf_id, in_memory=in_memory, path=path,
                                       directory=directory)

    @classmethod
    def fork_from(cls, source: str | os.PathLike[str] | Session, entry_id: str | None = None,
                  *, cwd: str | None = None, in_memory: bool = False,
                  path: str | os.PathLike[str] | None = None,
                  directory: str | os.PathLike[str] | None = None) -> Session:
        """A new session from a session file or an open session: every branch (pi's
        ``forkFrom``), or the path to ``entry_id`` (pi's ``/fork``); returned open.
        See :func:`sessiontree.fork.fork_from`.

        Args:
            source: a session file (a path), a stored session's address (``sqlite:///x.db#ID``,
                ``postgresql://...#ID``: the fork goes into that store, which stays open until
                the fork is closed), or an open session (its ``session_before_branch`` and
                ``session_branch`` handlers run).

        Raises:
            SessionNotFound, CorruptHeader, UnsupportedVersion: as :meth:`open` (an old-version
                source is not migrated: run ``sessiontree migrate`` on it first).
            EntryNotFound, ForkError, OperationCancelled, HookFailed: as
                :func:`~sessiontree.fork.fork_from`.
        """
        from .fork import fork_from, open_source

        def fork(opened: Session) -> Session:
            return fork_from(opened, entry_id, cwd=cwd, in_memory=in_memory, path=path,
                             directory=directory)

        if isinstance(source, Session):
            return fork(source)
        with open_source(cls, source) as opened:
            forked = fork(opened)
            owned = opened._owned_store  # a database opened for the source by its address
            if owned is not None and getattr(forked._log, "store", None) is owned:
                forked._owned_store, opened._owned_store = owned, None  # the fork lives in it
            return forked

    def export_branch(self, entry_id: str, path: str | os.PathLike[str], *,
                      overwrite: bool = False) -> str:
        """Write the root-to-``entry_id`` path to a new session file; returns its path.
        See :func:`sessiontree.fork.export_branch`."""
        from .fork import export_branch

        return export_branch(self, entry_id, path, overwrite=overwrite)

    def export_subtree(self, entry_id: str, path: str | os.PathLike[str], *,
                       ancestors: bool = True, overwrite: bool = False) -> str:
        """Write ``entry_id`` and its descendants (with the path to it, unless ``ancestors``
        is False) to a new session file; returns its path.
        See :func:`sessiontree.fork.export_subtree`."""
        from .fork import export_subtree

        return export_subtree(self, entry_id, path, ancestors=ancestors, overwrite=overwrite)

    async def abuild_context(self, leaf_id: str | None | UnsetType = UNSET, *,
                             offload: Offload | None = None) -> SessionContext:
        """:meth:`build_context` with ``for_model=True`` for async code: ``context`` hooks are
        awaited in the running loop (``offload`` runs the build, default in the loop's thread)."""
        from ._offload import inline

        context = await (offload or inline)(lambda: self.build_context(leaf_id))
        if not self._hooked("context"):
            return context
        from .events import afor_model

        return await afor_model(self, self._leaf if leaf_id is UNSET else leaf_id, context)

    # -- compaction (compaction.py) --

    def should_compact(self, context_window: int, settings: CompactionSettings | None = None,
                       leaf_id: str | None | UnsetType = UNSET) -> bool:
        """pi's automatic trigger: the context of ``leaf_id`` (default: the leaf) is larger
        than ``context_window`` minus ``settings.reserve_tokens``; see
        :func:`sessiontree.compaction.context_tokens`."""
        from .compaction import DEFAULT_COMPACTION_SETTINGS, context_tokens, should_compact

        return should_compact(context_tokens(self, leaf_id), context_window,
                              settings or DEFAULT_COMPACTION_SETTINGS)

    def prepare_compaction(self, settings: CompactionSettings | None = None, *,
                           keep_recent_tokens: int | None = None) -> CompactionPreparation | None:
        """What compacting the current path would do, without doing it (pi's
        ``prepareCompaction``); ``None`` when the path is empty or ends in a compaction.
        See :func:`sessiontree.compaction.prepare_compaction`."""
        from .compaction import DEFAULT_COMPACTION_SETTINGS, _path_dicts, prepare_compaction

        return prepare_compaction(_path_dicts(self), settings or DEFAULT_COMPACTION_SETTINGS,
                                  keep_recent_tokens=keep_recent_tokens)

    def compact(self, summarizer: Summarizer | None = None, *,
                keep_recent_tokens: int | None = None, reserve_tokens: int | None = None,
                settings: CompactionSettings | None = None, instructions: str | None = None,
                cancel: CancelToken | None = None) -> Compaction:
        """Summarize the history before the cut point and append a compaction at the leaf
        (offline summarizer by default); a hook or ``cancel`` cancelling it raises
        ``OperationCancelled`` or ``SummaryCancelled`` and writes nothing.
        See :func:`sessiontree.compaction.compact`."""
        from .compaction import compact

        return compact(self, summarizer, keep_recent_tokens=keep_recent_tokens,
                       reserve_tokens=reserve_tokens, settings=settings,
                       instructions=instructions, cancel=cancel)

    async def acompact(self, summarizer: Summarizer | None = None, *,
                       keep_recent_tokens: int | None = None, reserve_tokens: int | None = None,
                       settings: CompactionSettings | None = None, instructions: str | None = None,
                       cancel: CancelToken | None = None, offload: Offload | None = None
                       ) -> Compaction:
        """:meth:`compact` for async code (hooks awaited in the running loop, the summarizer's
        ``asummarize`` used when it has one). See :func:`sessiontree.compaction.acompact`."""
        from .compaction import acompact

        return await acompact(self, summarizer, keep_recent_tokens=keep_recent_tokens,
                              reserve_tokens=reserve_tokens, settings=settings,
                              instructions=instructions, cancel=cancel, offload=offload)

    def __repr__(self) -> str:
        where = self.url or "memory"
        return f"<Session {self.id} {where} entries={len(self)} leaf={self._leaf}>"
