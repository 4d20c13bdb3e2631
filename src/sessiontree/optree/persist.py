"""The operation tree inside the session file: events as pi ``custom`` entries, and the fold.

Each change is one ``custom`` entry whose ``customType`` starts with ``sessiontree.op``
(REFERENCE.md 14.4). pi ignores ``custom`` entries when it builds the model context and keeps
them in its tree, so a file with an operation tree opens in pi with the same context.

Invariants:
* Entries are appended at the leaf like any other entry; an entry is a few hundred bytes
  (payloads aside), so a killed run leaves every event up to its last complete line.
* With ``per_turn`` (the agent and ``chat``), a run costs one ``sessiontree.op.batch`` entry
  per turn, so bookkeeping never drowns the conversation; the events not yet in an entry are
  appended as they happen to a journal beside the session file
  (``<session>.blobs/pending-ops.journal``; for a session in a database, in the cache folder
  under a hash of its URL), which the fold reads after the entries, so a killed run still
  leaves every event (a database session's last turn only on the machine that ran it).
* Folding the events in file order (independent of the leaf) rebuilds the tree; an event that
  cannot be applied is reported in ``OpTree.problems`` with its entry id, never dropped
  silently, and the fold goes on.
* A run without a ``run.end`` event is marked ``unfinished`` on load, with every turn and op
  that never ended.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from .. import _json
from .._envindex import cache_dir
from .._fs import atomic_write, make_private_dirs
from .._treelog import TreeLog
from ..errors import SessionTreeError
from ..stores.jsonl import open_file
from . import events as ev
from ._apply import apply_event, mark_unfinished
from .events import EVENT_PREFIX, OpEvent
from .model import LoadProblem, OpTree

__all__ = [
    "SessionSink",
    "blob_dir",
    "fold_events",
    "load_blob",
    "load_optree",
    "optree_from_session",
]


def _is_optree_type(custom_type: object) -> bool:
    return isinstance(custom_type, str) and (
        custom_type == EVENT_PREFIX or custom_type.startswith(EVENT_PREFIX + "."))


def blob_dir(session_file: str | os.PathLike[str]) -> Path:
    """Where large payloads of a session file are stored: ``<file without .jsonl>.blobs/``."""
    path = Path(session_file)
    return path.with_name(path.stem + ".blobs")


def load_blob(session_file: str | os.PathLike[str], sha256: str) -> Any:
    """The payload stored beside a session file under this hash.

    Raises:
        FileNotFoundError: no such blob. ValueError: the content does not match the hash.
    """
    data = (blob_dir(session_file) / f"{sha256}.json").read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"blob {sha256} does not match its hash")
    return _json.loads(data)


class SessionSink:
    """A listener that writes each event into a session as a ``custom`` entry.

    Args:
        session: a :class:`sessiontree.Session` (anything with ``append_custom``).
        per_turn: write the events of each turn of the first run that begins as one
            ``batch`` entry, when the next turn begins or the run ends (the events of sub-agent
            runs started from it go in the same entry), journaling them beside the session
            file meanwhile (see the module's invariants).
        batch: when above 1, logs and reasoning chunks are grouped into one
            ``sessiontree.op.batch`` entry of up to this many events, written before the next
            other event (so at the latest when their op ends). A killed run loses the
            unwritten part of a batch; the default (0) writes every event at once.
        blob_threshold: payloads whose JSON is larger than this many bytes are written to
            ``<session>.blobs/<sha256>.json`` beside the session file, the entry keeping the
            hash, the size and a 200-character preview (sessions without a file keep them
            inline). ``None`` keeps every payload inline.
    """

    _BATCHABLE = frozenset({ev.LOG, ev.REASONING})

    def __init__(self, session: Any, *, batch: int = 0, blob_threshold: int | None = None,
                 per_turn: bool = False) -> None:
        self.session = session
        self.batch = batch
        self.blob_threshold = blob_threshold
        self.per_turn = per_turn
        self._pending: list[OpEvent] = []
        self.entry_ids: list[str] = []
        self._run: str | None = None  # per_turn: the run whose turns make the entries
        self._turn_ended = False
        self._journal: _Journal | None = None

    def __call__(self, event: OpEvent) -> None:
        """Write (or buffer) one event."""
        if self.per_turn:
            self._by_turn(event)
            return
        if self.batch > 1 and event.custom_type in self._BATCHABLE:
            self._pending.append(event)
            if len(self._pending) >= self.batch:
                self.flush()
            return
        self.flush()
        data = event.data
        if event.custom_type in (ev.REQUEST, ev.RESPONSE):
            data = self._maybe_blob(data)
        self.entry_ids.append(self.session.append_custom(event.custom_type, data))

    def _by_turn(self, event: OpEvent) -> None:
        kind, run = event.custom_type, event.data.get("run")
        if self._run is None and kind == ev.RUN_BEGIN:
            self._run = run
        own = run is not None and run == self._run
        if own and kind == ev.TURN_BEGIN and self._turn_ended:
            self.flush()  # the turn before, as one entry
        if kind in (ev.REQUEST, ev.RESPONSE):
            event = OpEvent(kind, self._maybe_blob(event.data))
        self._pending.append(event)
        if self._journal is None:
            self._journal = _Journal.of(self.session)
        if self._journal is not None:
            self._journal.add(event)
        if own and kind == ev.TURN_END:
            self._turn_ended = True
        elif own and kind == ev.RUN_END:
            self.flush()
            if self._journal is not None:
                self._journal.remove()
                self._journal = None

    def flush(self) -> None:
        """Write the buffered events (one ``batch`` entry)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        self._turn_ended = False
        if len(pending) == 1:
            written = self.session.append_custom(pending[0].custom_type, pending[0].data)
        else:
            data = {"v": ev.SCHEMA_VERSION, "run": pending[0].data.get("run"),
                    "events": [{"customType": e.custom_type, "data": e.data} for e in pending]}
            written = self.session.append_custom(ev.BATCH, data)
        self.entry_ids.append(written)
        if self._journal is not None:
            self._journal.committed(written)

    close = flush

    def _maybe_blob(self, data: dict[str, Any]) -> dict[str, Any]:
        file = getattr(self.session, "file", None)
        if self.blob_threshold is None or file is None or "payload" not in data:
            return data
        body = _json.dumps(data["payload"])
        if len(body) <= self.blob_threshold:
            return data
        digest = hashlib.sha256(body).hexdigest()
        folder = blob_dir(file)
        make_private_dirs(str(folder))
        target = folder / f"{digest}.json"
        if not target.exists():
            atomic_write(str(target), body)
        payload = data["payload"]
        text = payload if isinstance(payload, str) else body.decode("utf-8", "surrogatepass")
        out = {k: v for k, v in data.items() if k != "payload"}
        out["blob"] = {"sha256": digest, "size": len(body)}
        out["preview"] = text[:200]
        return out


class _Journal:
    """The events a ``per_turn`` sink holds, one JSON line each as they happen, beside the
    session file. Each line names the last operation-tree entry of the session when it was
    written (``after``): lines whose entry is no longer the last were committed since."""

    NAME = "pending-ops.journal"

    def __init__(self, path: Path, after: str | None) -> None:
        self.path, self.after = path, after

    @classmethod
    def where(cls, session: Any) -> Path | None:
        """The journal of ``session``: beside its file, or for a database session in the cache
        folder; ``None`` for a session in memory."""
        file = getattr(session, "file", None)
        if file is not None:
            return blob_dir(file) / cls.NAME
        url = getattr(session, "url", None)
        if not isinstance(url, str) or not url:
            return None
        digest = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:40]
        return Path(cache_dir()) / "ops-journal" / f"{digest}.journal"

    @classmethod
    def of(cls, session: Any) -> _Journal | None:
        path = cls.where(session)
        if path is None:
            return None
        last = None
        for _, _, entry_id in _session_events(session):
            last = entry_id
        return cls(path, last)

    def add(self, event: OpEvent) -> None:
        make_private_dirs(str(self.path.parent))
        line = _json.dumps({"after": self.after, "customType": event.custom_type,
                            "data": event.data})
        with open(self.path, "ab") as stream:
            stream.write(line + b"\n")

    def committed(self, entry_id: str) -> None:
        """The pending events are in the session now, as entry ``entry_id``."""
        self.after = entry_id
        with open(self.path, "wb"):
            pass

    def remove(self) -> None:
        for path in (self.path, self.path.parent):
            try:
                os.remove(path) if path == self.path else os.rmdir(path)
            except OSError:
                pass  # (a folder that also holds blobs stays)

    @classmethod
    def pending(cls, session: Any, last: str | None) -> list[tuple[str, Any, str | None]]:
        """The journaled events of ``session`` not in an entry yet (a killed run's)."""
        path = cls.where(session)
        if path is None:
            return []
        try:
            data = path.read_bytes()
        except OSError:
            return []
        out: list[tuple[str, Any, str | None]] = []
        for line in data.splitlines():
            try:
                item = _json.loads(line)
            except ValueError:
                continue  # the torn last line of a kill
            if isinstance(item, dict) and item.get("after") == last:
                out.append((str(item.get("customType")), item.get("data"), None))
        return out


def fold_events(events: Iterable[OpEvent | tuple[str, Mapping[str, Any]]
                                  | tuple[str, Mapping[str, Any], str | None]], *,
                tree: OpTree | None = None, mark_open: bool = True) -> OpTree:
    """Rebuild an operation tree from its events, in order.

    Args:
        events: :class:`OpEvent` values or ``(custom_type, data[, entry_id])`` tuples.
        tree: fold into this tree (default: a new one).
        mark_open: mark runs, turns and ops that never ended as ``unfinished``.

    Returns:
        The tree; ``tree.problems`` lists the events that could not be applied and the
        ``run.end`` totals that differ from the fold.
    """
    tree = tree if tree is not None else OpTree()
    for index, item in enumerate(events):
        data: Mapping[str, Any]
        entry_id: str | None = None
        if isinstance(item, OpEvent):
            custom_type, data = item.custom_type, item.data
        else:
            custom_type, data = item[0], item[1]
            if len(item) > 2:
                entry_id = item[2]
        try:
            notes = apply_event(tree, custom_type, data)
        except SessionTreeError as exc:
            reason = exc.reason
        except KeyError as exc:
            reason = f"missing key {exc.args[0]!r}" if exc.args else "missing key"
        except (msgspec.ValidationError, TypeError, ValueError) as exc:
            reason = str(exc)
        else:
            tree.problems.extend(
                LoadProblem(index=index, entry_id=entry_id, custom_type=custom_type,
                            reason=note) for note in notes)
            continue
        tree.problems.append(LoadProblem(index=index, entry_id=entry_id,
                                     custom_type=str(custom_type), reason=str(reason)))
    if mark_open:
        mark_unfinished(tree)
    return tree


def optree_from_session(session: Any, *, resolve_files: bool = True,
                        mark_open: bool = True) -> OpTree:
    """The operation tree recorded in a session (every ``sessiontree.op*`` custom entry, in
    file order, whatever the leaf).

    Args:
        session: a :class:`sessiontree.Session`.
        resolve_files: load child runs that live in other sessions (``op.child`` events name
            them: a file relative to this session's file, or for a session in a database the
            child session's id in the same store) into the same tree.
        mark_open: mark what never ended as ``unfinished`` (a killed run's open ops).
    """
    tree = OpTree()
    events = list(_session_events(session))
    events += _Journal.pending(session, events[-1][2] if events else None)
    fold_events(events, tree=tree, mark_open=False)
    children = _Children.of(session) if resolve_files else None
    if children is not None:
        seen = {children.own}
        while True:
            pending = [op for op in tree.ops.values()
                       if op.child_file and op.child not in tree.runs
                       and children.key(op.child_file) not in seen]
            if not pending:
                break
            for op in pending:
                assert op.child_file is not None
                seen.add(children.key(op.child_file))
                child_session = children.open(op.child_file)
                if child_session is None:
                    tree.problems.append(LoadProblem(
                        index=-1, custom_type=ev.CHILD,
                        reason=f"child run {op.child!r} of op {op.op_id!r} names missing "
                               f"{children.kind} {op.child_file!r}"))
                    continue
                with child_session:
                    fold_events(_session_events(child_session), tree=tree, mark_open=False)
    if mark_open:
        mark_unfinished(tree)
    return tree


class _Children:
    """Where the child sessions of a session are: files beside its file, or sessions of its
    database store."""

    def __init__(self, kind: str, own: str, key: Any, open_child: Any) -> None:
        self.kind, self.own, self.key, self.open = kind, own, key, open_child

    @classmethod
    def of(cls, session: Any) -> _Children | None:
        file = getattr(session, "file", None)
        if file is not None:
            folder = Path(file).parent

            def open_child_file(name: str) -> TreeLog | None:
                other = folder / name
                return TreeLog(open_file(other)) if other.is_file() else None

            return cls("file", os.path.realpath(file),
                       lambda name: os.path.realpath(folder / name), open_child_file)
        store = getattr(getattr(session, "_log", None), "store", None)
        if store is None or getattr(session, "url", None) is None:
            return None  # in memory: no other sessions to look in

        def open_stored(session_id: str) -> TreeLog | None:
            from ..errors import InvalidLocation, SessionNotFound

            try:
                return TreeLog(store.open_log(session_id), warn=False)
            except (SessionNotFound, InvalidLocation):
                return None

        return cls("session", session.id, lambda name: name, open_stored)


def _session_events(session: Any) -> Iterable[tuple[str, Any, str | None]]:
    finder = getattr(session, "custom_entries", None)
    entries = finder(EVENT_PREFIX) if finder is not None else session.entries()
    for entry in entries:
        custom_type = getattr(entry, "custom_type", None)
        if isinstance(custom_type, str) and _is_optree_type(custom_type):
            yield custom_type, entry.data, getattr(entry, "id", None)


def load_optree(path: str | os.PathLike[str], *, resolve_files: bool = True) -> OpTree:
    """Open a session file and return its operation tree (see :func:`optree_from_session`)."""
    with TreeLog(open_file(path)) as session:
        return optree_from_session(session, resolve_files=resolve_files)
