"""New sessions made from parts of one: forks (pi's ``createBranchedSession``, ``forkFrom``)
and exports of one path or one subtree.

Invariants:
* The source is never written to.
* A copied entry is its stored line, byte for byte, except where pi 1.5.2's fork changes it:
  the ``parentId`` of a child of a dropped label entry (format-spec.md 17 i) and of a forked
  path's top entry whose parent is missing (made a root), a compaction's ``firstKeptEntryId``
  that named a dropped label entry (the next kept entry); and the ``parentId`` of an exported
  subtree's top entry (without ancestors) and of an entry that closed a parent cycle (made a
  root, so pi does not hang).
* Copied entries keep their ids; only the new label entries get new ones.
* A new file is written whole: a temporary file in the same folder, fsync, rename (format-spec.md
  18.3), named ``<timestamp>_<session id>.jsonl`` unless the caller names it; its header has a
  new UUIDv7 id, the current time, the working directory resolved as pi resolves it, and
  ``parentSession`` = the source file's absolute path.
* A fork of one path (``create_branched_session``) whose path has no user or assistant
  message creates no file: it is written whole at the append that brings one (pi 1.5.2's
  rule; :mod:`sessiontree.stores.pending`). ``fork_from`` of every branch writes at once, as
  pi's ``forkFrom`` does.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from . import _json
from ._fs import atomic_write, make_private_dirs
from ._time import iso_now, new_entry_id, uuid7
from ._treelog import LoadWarning
from .entries import SessionHeader
from .errors import InvalidEntry, ReadOnlyStore, SessionTreeError
from .events import BranchEvent, BranchPreparation, OperationCancelled
from .stores.pending import PendingFile, has_conversation

if TYPE_CHECKING:
    from .session import Session

__all__ = [
    "ForkError",
    "branch_lines",
    "create_branched_session",
    "export_branch",
    "export_subtree",
    "fork_from",
    "open_source",
    "subtree_lines",
]


class ForkError(SessionTreeError):
    """A fork or export cannot be made (empty source, existing output file); nothing was written."""


# -- what goes into the new file -----------------------------------------------------------------


def _reparent(line: bytes, parent: str | None) -> bytes:
    return _changed(line, parentId=parent)


def _changed(line: bytes, **fields: Any) -> bytes:
    """The line with these fields set (in place when present, as JavaScript's spread does)."""
    data = _json.loads(line)
    assert isinstance(data, dict)
    data.update(fields)
    return _json.dumps(data)


def _label_line(entry_id: str, parent: str | None, timestamp: str | None, target: str,
                label: str | None) -> bytes:
    entry: dict[str, Any] = {"type": "label", "id": entry_id, "parentId": parent,
                             "timestamp": timestamp or iso_now(), "targetId": target}
    if label:
        entry["label"] = label
    return _json.dumps(entry)


def branch_lines(session: Session, leaf_id: str) -> tuple[list[bytes], list[str]]:
    """The entry lines of a fork of the root-to-``leaf_id`` path (pi 1.5.2's
    ``createBranchedSession``).

    Label entries on the path are dropped; each kept entry's parent is the kept entry before it
    (a child of a dropped label gets the label's nearest kept ancestor, the top entry none), and
    a compaction that kept from a dropped label keeps from the next kept entry. Then, for every
    label currently set on a kept entry (in the session's label order), a new label entry with
    the original label timestamp is chained after the last kept entry.

    Returns:
        The lines, and the ids copied from the source in order.

    Raises:
        EntryNotFound: no such entry.
    """
    path = session.path_ids(leaf_id)
    if not path:
        raise InvalidEntry("a fork needs an entry to end at", path=session.file)
    lines: list[bytes] = []
    kept: list[str] = []
    last_kept: str | None = None
    dropped: list[str] = []  # label entries since the last kept entry
    instead: dict[str, str] = {}  # a dropped label entry -> the kept entry after it
    for entry_id in path:
        entry = session.entry(entry_id)
        if entry.type == "label":
            dropped.append(entry_id)
            continue
        instead.update(dict.fromkeys(dropped, entry_id))
        raw = session.raw_line(entry_id)
        changes: dict[str, Any] = {}
        if entry.parent_id != last_kept:
            changes["parentId"] = last_kept  # a dropped label entry, or a missing parent
        first_kept = getattr(entry, "first_kept_entry_id", None)
        if entry.type == "compaction" and first_kept in instead:
            changes["firstKeptEntryId"] = instead[first_kept]
        if changes:
            raw = _changed(raw, **changes)
        dropped = []
        lines.append(raw)
        kept.append(entry_id)
        last_kept = entry_id
    taken = set(kept)
    on_path = set(kept)
    for target, (label, timestamp) in session.labels().items():
        if target in on_path:
            new_id = new_entry_id(taken)
            taken.add(new_id)
            lines.append(_label_line(new_id, last_kept, timestamp, target, label))
            last_kept = new_id
    return lines, kept


def subtree_lines(session: Session, entry_id: str, *, ancestors: bool = True
                  ) -> tuple[list[bytes], list[str]]:
    """The entry lines of an export of ``entry_id`` and all its descendants, in file order.

    With ``ancestors`` the root-to-entry path is included too (so every leaf of the subtree
    builds the same context as in the source); without, the entry becomes a root. Label entries
    inside are kept; where the labels of the copied entries would then resolve differently
    than in the source (set or cleared by a label entry outside), label entries fixing them
    are chained after the last copied entry.

    Returns:
        The lines, and the ids copied from the source in order.

    Raises:
        EntryNotFound: no such entry.
    """
    chosen = set(session.subtree_ids(entry_id))
    if ancestors:
        chosen.update(session.path_ids(entry_id))
    cycle_roots = {p.entry_id for p in session.problems if p.kind == "cycle"}
    lines: list[bytes] = []
    kept: list[str] = []
    resolved: dict[str, tuple[str, str | None]] = {}
    for item in session.ids():
        if item not in chosen:
            continue
        raw = session.raw_line(item)
        entry = session.entry(item)
        if (item == entry_id and not ancestors and entry.parent_id is not None) or \
                (item in cycle_roots and entry.parent_id is not None):
            raw = _reparent(raw, None)
        if entry.type == "label":
            target = getattr(entry, "target_id", None)
            value = getattr(entry, "label", None)
            if isinstance(target, str):
                if isinstance(value, str) and value:
                    resolved[target] = (value, entry.timestamp)
                else:
                    resolved.pop(target, None)
        lines.append(raw)
        kept.append(item)
    wanted = {t: v for t, v in session.labels().items() if t in chosen}
    present = {t: v for t, v in resolved.items() if t in chosen}
    taken = set(kept)
    last = kept[-1] if kept else None
    for target in [*wanted, *(t for t in present if t not in wanted)]:
        want = wanted.get(target)
        have = present.get(target)
        if want is not None and (have is None or have[0] != want[0]):
            new_id = new_entry_id(taken)
            lines.append(_label_line(new_id, last, want[1], target, want[0]))
        elif want is None and have is not None:
            new_id = new_entry_id(taken)
            lines.append(_label_line(new_id, last, None, target, None))
        else:
            continue
        taken.add(new_id)
        last = new_id
    return lines, kept


def _cycle_free_lines(session: Session) -> list[bytes]:
    cycle_roots = {p.entry_id for p in session.problems if p.kind == "cycle"}
    lines = []
    for entry_id in session.ids():
        raw = session.raw_line(entry_id)
        if entry_id in cycle_roots:
            raw = _reparent(raw, None)
        lines.append(raw)
    return lines


# -- writing -------------------------------------------------------------------------------------


def _header(session: Session, cwd: str | None, *, with_parent: bool = True) -> SessionHeader:
    """A fork's header; its cwd (default: the source's) resolved as pi 1.5.2 resolves it."""
    from msgspec import UNSET

    from ._listing import resolve_path

    parent = (os.path.abspath(session.file) if session.file else session.url) if with_parent \
        else None
    return SessionHeader(id=uuid7(), timestamp=iso_now(),
                         cwd=resolve_path(cwd if cwd is not None else session.cwd),
                         parent_session=parent if parent else UNSET)


def _target_path(header: SessionHeader, path: str | os.PathLike[str] | None,
                 directory: str | os.PathLike[str] | None, overwrite: bool) -> str:
    from .stores.jsonl import session_file_name

    if path is not None and not os.path.isdir(path):
        target = os.fspath(path)
        if os.path.exists(target) and not overwrite:
            raise ForkError("the output file exists; choose another name or allow overwriting",
                            path=target)
        return target
    folder = Path(path if path is not None else directory if directory is not None else ".")
    return os.fspath(folder / session_file_name(header))


def _write(header: SessionHeader, lines: Sequence[bytes], target: str) -> str:
    parent = os.path.dirname(os.path.abspath(target))
    make_private_dirs(parent)
    data = b"".join(line + b"\n" for line in (_json.dumps(header), *lines))
    atomic_write(target, data)
    return target


def _materialize(session: Session, header: SessionHeader, lines: Sequence[bytes], *,
                 in_memory: bool, path: str | os.PathLike[str] | None,
                 directory: str | os.PathLike[str] | None, overwrite: bool = False,
                 until_conversation: bool = False) -> Session:
    """The fork, a session of the source's own class (``Session`` or a subclass of it);
    ``until_conversation``: its file is not written while no line is a user or assistant
    message (pi 1.5.2's ``createBranchedSession``), but at the append that brings one."""
    from .stores.memory import MemoryLog

    make = type(session)
    if in_memory:
        if not lines:
            return make(MemoryLog(), header=header)
        return make(MemoryLog([_json.dumps(header), *lines]))
    target = _target_path(header, path, directory, overwrite)
    if until_conversation and not any(map(has_conversation, lines)):
        return make(PendingFile(target, [_json.dumps(header), *lines]))
    return make.open(_write(header, lines, target))


def _refuse_read_only(session: Session, in_memory: bool, path: str | os.PathLike[str] | None,
                      directory: str | os.PathLike[str] | None) -> None:
    """A session opened read-only forks into its own folder no more than a read-only database
    store takes the fork; a fork kept in memory, or written where the caller said, is fine.

    Raises:
        ReadOnlyStore: a read-only session file, forked with no ``path`` nor ``directory``.
    """
    if in_memory or path is not None or directory is not None or \
            getattr(session.log, "store", None) is not None:
        return  # (a store refuses by itself)
    if getattr(session.log, "read_only", False):
        raise ReadOnlyStore("the session was opened read-only, so its fork is not written "
                            "beside it; nothing was written (give path or directory to write "
                            "the fork elsewhere)", path=session.file)


def _into_store(session: Session, header: SessionHeader, lines: Sequence[bytes],
                in_memory: bool, path: str | os.PathLike[str] | None,
                directory: str | os.PathLike[str] | None) -> Session | None:
    """A fork of a database session goes into the same store (unless told otherwise)."""
    if in_memory or path is not None or directory is not None:
        return None
    store: Any = getattr(session.log, "store", None)  # a database's log knows its store
    if getattr(store, "import_lines", None) is None:  # no store, or one without whole copies
        return None
    make = type(session)
    if not lines:  # decision f: stored at its first entry
        return make(store.new_log(header), header=header)
    store.import_lines(_json.dumps(header), lines)
    return make(store.open_log(header.id))


def _before(session: Session, entry_id: str | None, mode: Literal["path", "all"],
            in_memory: bool) -> BranchPreparation:
    prep = BranchPreparation(session=session, entry_id=entry_id, mode=mode, in_memory=in_memory)
    result, decider = session.events.decide("session_before_branch", prep)
    if result is not None and result.cancel:
        raise OperationCancelled("session_before_branch", decider or "?")
    return prep


def _after(session: Session, fork: Session, entry_id: str | None,
           mode: Literal["path", "all"]) -> None:
    session.events.emit("session_branch", BranchEvent(
        session=session, new_session=fork, previous_file=session.file, new_file=fork.file,
        entry_id=entry_id, mode=mode))


def create_branched_session(session: Session, leaf_id: str, *, in_memory: bool | None = None,
                            path: str | os.PathLike[str] | None = None,
                            directory: str | os.PathLike[str] | None = None,
                            cwd: str | None = None) -> Session:
    """A new session holding the root-to-``leaf_id`` path (pi's ``/fork``; format-spec.md 13, 18.6).

    Label entries of the path are dropped and the labels set on its entries re-created after
    it, with their original timestamps; the children of dropped label entries are re-parented
    so the fork is one connected path (decision i). The header's ``parentSession`` is the
    source file's absolute path. The source is not changed; the fork is returned open (its leaf
    is its last entry) and the caller closes it. As pi 1.5.2 does, a fork whose path has no
    user or assistant message is not written yet: its :attr:`~Session.file` names the file
    the append that brings the first one writes (closed before, it leaves no file).

    Args:
        leaf_id: the last entry of the path to copy.
        in_memory: keep the fork in memory (default: when the source is in memory and neither
            ``path`` nor ``directory`` is given).
        path: the new file (default: ``<timestamp>_<id>.jsonl`` in ``directory``); an existing
            folder means a file of the default name in it.
        directory: the folder for the new file (default: the source's folder, or pi's folder
            for ``cwd`` when the source is in memory).
        cwd: the working directory for the new header (default: the source's).

    Raises:
        EntryNotFound: no such entry.
        OperationCancelled: a ``session_before_branch`` handler cancelled.
        HookFailed: a handler raised.
        ForkError: ``path`` exists.
    """
    session.entry(leaf_id)
    memory = (session.url is None and path is None and directory is None) if in_memory is None \
        else in_memory
    _before(session, leaf_id, "path", memory)
    lines, _ = branch_lines(session, leaf_id)
    header = _header(session, cwd, with_parent=not memory)
    _refuse_read_only(session, memory, path, directory)
    fork = _into_store(session, header, lines, memory, path, directory) or \
        _materialize(session, header, lines, in_memory=memory, path=path,
                     directory=_default_directory(session, directory, cwd),
                     until_conversation=True)
    _after(session, fork, leaf_id, "path")
    return fork


def _default_directory(session: Session, directory: str | os.PathLike[str] | None,
                       cwd: str | None) -> str | os.PathLike[str]:
    if directory is not None:
        return directory
    if cwd is None and session.file is not None:
        return os.path.dirname(os.path.abspath(session.file))
    from .stores.jsonl import default_session_dir

    return default_session_dir(os.path.abspath(cwd) if cwd is not None else session.cwd)


def fork_from(source: Session, entry_id: str | None = None, *, cwd: str | None = None,
              in_memory: bool = False, path: str | os.PathLike[str] | None = None,
              directory: str | os.PathLike[str] | None = None) -> Session:
    """A new session from the open session ``source``: every entry, all branches (pi's
    ``forkFrom``), or with ``entry_id`` the root-to-``entry_id`` path (pi's ``/fork``, as
    :func:`create_branched_session`). :meth:`Session.fork_from
    <sessiontree.Session.fork_from>` also takes a file or an address.

    Entries keep their bytes and ids; an entry that closed a parent cycle becomes a root (pi
    would hang on it). The new header has ``cwd`` (default: the source's) and
    ``parentSession`` = the source file. The fork is returned open, its leaf the last entry;
    ``source``'s ``session_before_branch`` and ``session_branch`` handlers run.

    Args:
        source: the session to fork.
        entry_id: fork only the path to this entry (default: every branch).
        cwd: the working directory of the new session.
        in_memory: keep the fork in memory.
        path: the new file (default: ``<timestamp>_<id>.jsonl`` in ``directory``).
        directory: the folder for the new file (default: the source's folder; pi's folder for
            ``cwd`` when ``cwd`` is given).

    Raises:
        EntryNotFound: ``entry_id`` is not in the source.
        ForkError: the source has no entries, or ``path`` exists.
        OperationCancelled, HookFailed: a handler cancelled or raised.
    """
    if entry_id is not None:
        return create_branched_session(source, entry_id, in_memory=in_memory, path=path,
                                       directory=directory, cwd=cwd)
    return _fork_all(source, cwd=cwd, in_memory=in_memory, path=path, directory=directory)


def open_source(make: type[Session], source: str | os.PathLike[str]) -> Session:
    """A fork's source opened by its file or address, as pi reads one: never migrated (an
    old-version file is refused: ``sessiontree migrate`` it first), its bad lines simply not
    copied (so no :class:`~sessiontree.LoadWarning`). The caller closes it.

    Raises:
        SessionNotFound, CorruptHeader, UnsupportedVersion: as ``Session.open``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoadWarning)
        return make.open(source, migrate=False)


def _fork_all(session: Session, *, cwd: str | None, in_memory: bool,
              path: str | os.PathLike[str] | None,
              directory: str | os.PathLike[str] | None) -> Session:
    if len(session) == 0:
        raise ForkError("cannot fork: the source session has no entries", path=session.file)
    _before(session, None, "all", in_memory)
    lines = _cycle_free_lines(session)
    header = _header(session, cwd, with_parent=not in_memory)
    _refuse_read_only(session, in_memory, path, directory)
    fork = _into_store(session, header, lines, in_memory, path, directory) or \
        _materialize(session, header, lines, in_memory=in_memory, path=path,
                     directory=_default_directory(session, directory, cwd))
    _after(session, fork, None, "all")
    return fork


def export_branch(session: Session, entry_id: str, path: str | os.PathLike[str], *,
                  overwrite: bool = False) -> str:
    """Write the root-to-``entry_id`` path to a new session file, as a fork would hold it.

    Args:
        path: the file to write, or an existing folder (a ``<timestamp>_<id>.jsonl`` in it).
        overwrite: replace an existing file (atomically).

    Returns:
        The file written.

    Raises:
        EntryNotFound: no such entry.
        ForkError: the file exists and ``overwrite`` is False.
    """
    lines, _ = branch_lines(session, entry_id)
    header = _header(session, None)
    return _write(header, lines, _target_path(header, path, None, overwrite))


def export_subtree(session: Session, entry_id: str, path: str | os.PathLike[str], *,
                   ancestors: bool = True, overwrite: bool = False) -> str:
    """Write ``entry_id`` and all its descendants to a new session file (the first seed's
    subtree export); see :func:`subtree_lines` for ``ancestors`` and labels.

    Returns:
        The file written.

    Raises:
        EntryNotFound: no such entry.
        ForkError: the file exists and ``overwrite`` is False.
    """
    lines, _ = subtree_lines(session, entry_id, ancestors=ancestors)
    header = _header(session, None)
    return _write(header, lines, _target_path(header, path, None, overwrite))
