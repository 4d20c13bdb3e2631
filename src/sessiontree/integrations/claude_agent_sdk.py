"""A Claude Agent SDK session store over any sessiontree store (``pip install 'sessiontree[claude]'``).

::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from sessiontree.integrations.claude_agent_sdk import SessionTreeSessionStore

    options = ClaudeAgentOptions(session_store=SessionTreeSessionStore("sqlite:///sessions.db"))

:class:`SessionTreeSessionStore` implements the SDK's ``SessionStore`` protocol, every optional
method included (``list_sessions``, ``list_session_summaries``, ``delete``, ``list_subkeys``),
over a folder of sessions in pi's layout (the default: pi's own), SQLite, PostgreSQL or any
other sessiontree store. The SDK mirrors each Claude Code transcript to it; here each transcript
(the main one, and each subagent's) is a session whose tree is Claude Code's own
(:mod:`sessiontree.importers.claude_code_mirror` maps it as it arrives), so ``browse``, ``ls``,
the exports and pi open Claude Agent SDK sessions while they run.

Invariants:
* ``load`` returns exactly the entries ``append`` was given, in order (each entry is kept
  verbatim by the session entry that stands for it); an entry whose ``uuid`` was appended
  before, unchanged, is not stored twice (the SDK retries batches that may have landed).
* A key (project, session id, subpath) is one session, whose id is derived from the key
  (:meth:`SessionTreeSessionStore.session_id`); a subagent transcript's session names the main
  transcript's session as its ``parentSession``. Nothing else is written: a session holds only
  its transcript (its first entry also records the key, its last one the SDK's summary).
* Calls run in a worker thread; appends to one session are serialized within the process. A
  session written meanwhile by another process is read again before the next append.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

from msgspec import UNSET

from .._scan import no_gc
from .._time import iso_now, iso_to_ms
from ..entries import SessionHeader
from ..errors import InvalidLocation, MissingExtra, SessionNotFound
from ..importers._build import iso_from_ms
from ..importers.claude_code_mirror import TranscriptMirror, stored_entry, transcript_lines
from ..session import Session
from ..stores.base import Store, has_lines, has_logs
from ..stores.jsonl import (
    JsonlStore,
    default_session_dir,
    default_sessions_root,
    glob_escape,
    list_sessions,
)
from ..stores.url import is_url, open_store

try:
    import anyio.to_thread
    from claude_agent_sdk import fold_session_summary
    from claude_agent_sdk.types import (
        SessionKey,
        SessionListSubkeysKey,
        SessionStore,
        SessionStoreEntry,
        SessionStoreListEntry,
        SessionSummaryEntry,
    )
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("sessiontree.integrations.claude_agent_sdk requires the 'claude' extra: "
                       "pip install 'sessiontree[claude]'") from error

__all__ = ["SessionTreeSessionStore"]

T = TypeVar("T")

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_HASHED = "_h"  # a part too long to spell out: "_h" + a hash ("h" is no hex digit: no escape)


def _part(value: str, budget: int) -> str:
    """``value`` spelt in session id characters (others as ``_`` + hex of each UTF-8 byte), or
    a hash of it when that is longer than ``budget``."""
    spelt = "".join(c if c in _SAFE else "".join(f"_{b:02x}" for b in c.encode("utf-8", "surrogatepass"))
                    for c in value)
    if spelt and len(spelt) <= budget:
        return spelt
    return _HASHED + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _unpart(part: str) -> str | None:
    """The value a part spells; ``None`` for a hashed one."""
    if part.startswith(_HASHED):
        return None
    out, i = bytearray(), 0
    while i < len(part):
        if part[i] == "_":
            out.append(int(part[i + 1:i + 3], 16))
            i += 3
        else:
            out.extend(part[i].encode())
            i += 1
    return out.decode("utf-8", "surrogatepass")


def _project(project_key: str) -> str:
    return hashlib.sha256(project_key.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _main_key(key: Mapping[str, Any]) -> SessionKey:
    return {"project_key": key["project_key"], "session_id": key["session_id"]}


def _key_record(key: Mapping[str, Any]) -> dict[str, str]:
    record = {"projectKey": key["project_key"], "sessionId": key["session_id"]}
    if key.get("subpath"):
        record["subpath"] = key["subpath"]
    return record


# -- where the sessions are --------------------------------------------------------------------------


class _Place(Protocol):
    """The sessions of the adapter: found by id, listed by id prefix, created for a cwd."""

    def open(self, session_id: str) -> Session | None:
        """The stored session, ``None`` when there is none."""

    def target(self, cwd: str) -> Store:
        """The store a new session of this working directory goes to."""

    def ids(self, prefix: str) -> list[str]:
        """The stored session ids that start with ``prefix``."""

    def modified(self, prefix: str) -> dict[str, int]:
        """Those sessions' latest activity (epoch ms), as their listing says."""

    def delete(self, session_id: str) -> None:
        """Remove the session if it is there."""

    def close(self) -> None:
        """Release what the adapter opened."""


class _OneStore:
    """Every session in one store."""

    def __init__(self, store: Store, owned: bool) -> None:
        self.store: Store = store
        self.owned = owned
        if not has_logs(store):
            raise InvalidLocation(f"{type(store).__name__} cannot hold sessions (it has no "
                                  "open_log/new_log)")
        self.logs = store

    def open(self, session_id: str) -> Session | None:
        try:
            return Session(self.logs.open_log(session_id), warn=False)
        except SessionNotFound:
            return None

    def target(self, cwd: str) -> Store:
        return self.store

    def ids(self, prefix: str) -> list[str]:
        found = self.store.session_ids() if has_lines(self.store) else \
            [row.id for row in self.store.list_sessions() if isinstance(row.id, str)]
        return [session_id for session_id in found if session_id.startswith(prefix)]

    def modified(self, prefix: str) -> dict[str, int]:
        return {row.id: row.modified_ms for row in self.store.list_sessions()
                if isinstance(row.id, str) and row.id.startswith(prefix)}

    def delete(self, session_id: str) -> None:
        try:
            self.store.delete(session_id)
        except SessionNotFound:
            pass

    def close(self) -> None:
        if self.owned:
            self.store.close()

    def __str__(self) -> str:
        return str(getattr(self.store, "url", type(self.store).__name__))


class _Folders:
    """A sessions root in pi's layout: a folder per working directory (``--<cwd>--``)."""

    def __init__(self, root: Path, durable: bool) -> None:
        self.root = root
        self.durable = durable

    def _files(self, pattern: str) -> list[Path]:
        return sorted(self.root.glob(f"*/*_{pattern}.jsonl")) if self.root.is_dir() else []

    def _store(self, folder: Path) -> JsonlStore:
        return JsonlStore(folder, durable=self.durable)

    def open(self, session_id: str) -> Session | None:
        for path in self._files(glob_escape(session_id)):
            return Session(self._store(path.parent).open_log(session_id), warn=False)
        return None

    def target(self, cwd: str) -> Store:
        return self._store(default_session_dir(cwd, self.root))

    def ids(self, prefix: str) -> list[str]:
        names = (path.name[:-len(".jsonl")].split("_", 1)[1]
                 for path in self._files(glob_escape(prefix) + "*"))
        return sorted({name for name in names if name.startswith(prefix)})

    def modified(self, prefix: str) -> dict[str, int]:
        folders = {path.parent for path in self._files(glob_escape(prefix) + "*")}
        return {row.id: row.modified_ms for folder in sorted(folders)
                for row in list_sessions(folder)
                if isinstance(row.id, str) and row.id.startswith(prefix)}

    def delete(self, session_id: str) -> None:
        for path in self._files(glob_escape(session_id)):
            self._store(path.parent).delete(session_id)

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own files."""

    def __str__(self) -> str:
        return str(self.root)


# -- the adapter ------------------------------------------------------------------------------------


@dataclass
class _State:
    """What the adapter keeps of a session between appends."""

    mirror: TranscriptMirror
    summary: SessionSummaryEntry | None
    mark: tuple[int, str | None]  # (entries, last entry) when this state was last in step


class SessionTreeSessionStore(SessionStore):
    """The Claude Agent SDK's ``SessionStore`` over sessiontree sessions.

    Args:
        store: where the sessions go: a folder, as a sessions root in pi's layout (each session
            in the folder of its working directory, ``<root>/--<cwd>--/``, as pi keeps its
            own); a store address (``sqlite:///sessions.db``, ``postgresql://...``; opened here,
            closed by :meth:`close`); or a store object (any sessiontree store, left open).
            Default: pi's sessions root (``$SESSIONTREE_DIR``, else
            ``$PI_CODING_AGENT_DIR/sessions``, else ``~/.pi/agent/sessions``).
        durable: fsync every append (files, SQLite) when the store is opened here.
        cached_sessions: how many sessions' mapping state to keep between appends (a session
            not kept is read again before its next append).

    Raises:
        InvalidLocation: a bad address, or a store that cannot hold sessions.
        StoreUnavailable: the database cannot be reached.
    """

    def __init__(self, store: Store | str | os.PathLike[str] | None = None, *,
                 durable: bool = False, cached_sessions: int = 64) -> None:
        self._place: _Place
        if store is None:
            self._place = _Folders(default_sessions_root(), durable)
        elif isinstance(store, str) and is_url(store):
            self._place = _OneStore(open_store(store, durable=durable), owned=True)
        elif isinstance(store, (str, os.PathLike)):
            self._place = _Folders(Path(store).expanduser(), durable)
        else:
            self._place = _OneStore(store, owned=False)
        self._states: OrderedDict[str, _State] = OrderedDict()
        self._cached = cached_sessions
        self._guard = threading.Lock()  # the cache
        self._locks = [threading.Lock() for _ in range(64)]  # appends, by session id

    # -- keys and sessions -----------------------------------------------------------------------

    @staticmethod
    def session_id(key: Mapping[str, Any]) -> str:
        """The id of the session that holds a key's transcript.

        ``<project hash>.<session id>[.<subpath>]``: the project key as 12 hex digits of its
        SHA-256, the session id and subpath spelt in session id characters (another character
        as ``_`` and the hex of its UTF-8 bytes; a part too long for the 128 characters of an
        id as ``_h`` and a hash), so the sessions of a project, and the subagent transcripts of
        a session, are found by the start of their ids.
        """
        session_id = f"{_project(str(key['project_key']))}.{_part(str(key['session_id']), 48)}"
        subpath = key.get("subpath")
        return f"{session_id}.{_part(str(subpath), 60)}" if subpath else session_id

    def open(self, key: Mapping[str, Any]) -> Session:
        """The session of a key's transcript (close it when done).

        Raises:
            SessionNotFound: nothing was appended for this key.
        """
        session = self._place.open(self.session_id(key))
        if session is None:
            raise SessionNotFound(f"no transcript for {_key_record(key)} in this store")
        return session

    def address(self, key: Mapping[str, Any]) -> str | None:
        """Where the session of a key's transcript is (its file, or ``<store URL>#<id>``), for
        ``sessiontree browse`` and the other commands; ``None`` when there is none."""
        session = self._place.open(self.session_id(key))
        if session is None:
            return None
        with session:
            return _address(session)

    def close(self) -> None:
        """Close the store if this adapter opened it."""
        with self._guard:
            self._states.clear()
        self._place.close()

    def __enter__(self) -> SessionTreeSessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the SDK's protocol ----------------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Mirror a batch of transcript entries (Claude Code's JSONL lines) to the key's
        session, created with the first batch."""
        if entries:
            await self._run(self._append, key, list(entries))

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every entry appended for the key, in order; ``None`` when there is none."""
        return await self._run(self._load, key)

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The main transcripts of a project: session id and ``mtime`` (epoch ms, the
        session's latest activity as its listing says)."""
        return await self._run(self._list, project_key)

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The SDK's summary of each main transcript of a project (kept up to date by every
        append), with the same ``mtime`` as :meth:`list_sessions`."""
        return await self._run(self._summaries, project_key)

    async def delete(self, key: SessionKey) -> None:
        """Delete a transcript's session; a main transcript's takes its subagents' with it."""
        await self._run(self._delete, key)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths of a session's subagent transcripts."""
        return await self._run(self._subkeys, key)

    async def _run(self, work: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(partial(work, *args))

    # -- in the worker thread --------------------------------------------------------------------

    def _lock(self, session_id: str) -> threading.Lock:
        return self._locks[int(hashlib.sha256(session_id.encode()).hexdigest()[:8], 16) % 64]

    def _append(self, key: SessionKey, entries: list[Any]) -> None:
        session_id = self.session_id(key)
        with self._lock(session_id):
            session = self._place.open(session_id)
            created = session is None
            if session is None:
                session = self._create(key, session_id, entries)
            with session:
                state = self._state(session_id, session, key)
                try:
                    new = state.mirror.take(entries)
                    if not new:
                        return
                    if created:
                        new[0]["claudeCode"]["key"] = _key_record(key)
                    if not key.get("subpath"):
                        state.summary = fold_session_summary(state.summary, key,
                                                             transcript_lines(new))
                        new[-1].setdefault("claudeCode", {})["summary"] = state.summary["data"]
                    session.extend(new)
                except BaseException:  # the state took lines the session did not
                    self._forget(session_id)
                    raise
                state.mark = (len(session), session.leaf_id)

    def _create(self, key: SessionKey, session_id: str, entries: list[Any]) -> Session:
        lines = [e for e in entries if isinstance(e, Mapping)]
        cwd = next((e["cwd"] for e in lines if isinstance(e.get("cwd"), str) and e["cwd"]), None)
        cwd = cwd or os.getcwd()
        stamp = next((ms for ms in map(iso_to_ms, (e.get("timestamp") for e in lines))
                      if ms is not None), None)
        parent = None
        if key.get("subpath"):
            main = self._place.open(self.session_id(_main_key(key)))
            if main is not None:
                with main:
                    parent = _address(main)
        header = SessionHeader(id=session_id, timestamp=iso_now() if stamp is None else
                               iso_from_ms(stamp), cwd=cwd,
                               parent_session=parent if parent else UNSET)
        store = self._place.target(cwd)
        assert has_logs(store)
        return Session(store.new_log(header), header=header)

    def _state(self, session_id: str, session: Session, key: SessionKey) -> _State:
        """The session's mapping state, read again from the session when it is not in step."""
        mark = (len(session), session.leaf_id)
        with self._guard:
            state = self._states.get(session_id)
            if state is not None and state.mark == mark:
                self._states.move_to_end(session_id)
                return state
        with no_gc():  # many new objects, no cycles among them
            stored = list(_stored(session))
            _check_key(stored, key, session)
            mirror = TranscriptMirror(_address(session))
            mirror.prime(stored)
            lines = transcript_lines(stored)
        summary = fold_session_summary(None, key, lines) if lines and not key.get("subpath") \
            else None
        state = _State(mirror, summary, mark)
        with self._guard:
            self._states[session_id] = state
            while len(self._states) > self._cached:
                self._states.popitem(last=False)
        return state

    def _forget(self, session_id: str) -> None:
        with self._guard:
            self._states.pop(session_id, None)

    def _load(self, key: SessionKey) -> list[Any] | None:
        session = self._place.open(self.session_id(key))
        if session is None:
            return None
        with session, no_gc():
            stored = list(_stored(session))
            _check_key(stored, key, session)
            return transcript_lines(stored) or None

    def _mains(self, project_key: str) -> Iterator[tuple[str, str, int]]:
        """``(session id, transcript's session id, mtime)`` of a project's main transcripts."""
        prefix = _project(project_key) + "."
        for session_id, mtime in sorted(self._place.modified(prefix).items()):
            parts = session_id[len(prefix):].split(".")
            if len(parts) != 1:
                continue  # a subagent transcript
            name = _unpart(parts[0])
            if name is None:
                name = str(self._stored_key(session_id).get("sessionId"))
            yield session_id, name, mtime

    def _list(self, project_key: str) -> list[SessionStoreListEntry]:
        return [{"session_id": name, "mtime": mtime}
                for _, name, mtime in self._mains(project_key)]

    def _summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        out: list[SessionSummaryEntry] = []
        for session_id, name, mtime in self._mains(project_key):
            session = self._place.open(session_id)
            if session is None:
                continue
            with session:
                last = stored_entry(session.raw_line(session.leaf_id)) if session.leaf_id \
                    else {}
                kept = last.get("claudeCode")
                data = kept.get("summary") if isinstance(kept, dict) else None
                if not isinstance(data, dict):  # another writer appended after it
                    key: SessionKey = {"project_key": project_key, "session_id": name}
                    data = fold_session_summary(None, key, transcript_lines(_stored(session)))[
                        "data"]
            out.append({"session_id": name, "mtime": mtime, "data": data})
        return out

    def _delete(self, key: SessionKey) -> None:
        session_id = self.session_id(key)
        doomed = [session_id] if key.get("subpath") else \
            [session_id, *self._place.ids(session_id + ".")]
        for one in doomed:
            with self._lock(one):
                self._place.delete(one)
                self._forget(one)

    def _subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        prefix = self.session_id(key) + "."
        out = []
        for session_id in self._place.ids(prefix):
            subpath = _unpart(session_id[len(prefix):])
            if subpath is None:
                subpath = str(self._stored_key(session_id).get("subpath"))
            out.append(subpath)
        return out

    def _stored_key(self, session_id: str) -> dict[str, Any]:
        """The key a session records (for ids whose parts are hashed)."""
        session = self._place.open(session_id)
        if session is None:
            return {}
        with session:
            for entry_id in session.ids()[:1]:
                kept = stored_entry(session.raw_line(entry_id)).get("claudeCode")
                found = kept.get("key") if isinstance(kept, dict) else None
                return found if isinstance(found, dict) else {}
        return {}

    def __repr__(self) -> str:
        return f"<SessionTreeSessionStore {self._place}>"


def _stored(session: Session) -> Iterator[dict[str, Any]]:
    """What the mirror reads of a session's entries, in file order."""
    for entry_id in session.ids():
        yield stored_entry(session.raw_line(entry_id))


def _address(session: Session) -> str:
    return session.file or session.url or session.id


def _check_key(stored: list[dict[str, Any]], key: Mapping[str, Any], session: Session) -> None:
    """Refuse a session that records another key (two keys whose hashes met).

    Raises:
        InvalidLocation: it does.
    """
    for entry in stored[:1]:
        kept = entry.get("claudeCode")
        found = kept.get("key") if isinstance(kept, dict) else None
        if isinstance(found, dict) and found != _key_record(key):
            raise InvalidLocation(f"{_address(session)} holds the transcript of {found}, not of "
                                  f"{_key_record(key)}")
