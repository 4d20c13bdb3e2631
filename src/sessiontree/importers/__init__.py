"""Importers: other tools' conversations as sessiontree sessions, every branch kept.

::

    from sessiontree.importers import import_file

    result = import_file("chatgpt", "conversations.json", "sessions/")
    print(result.summary())

Formats (see each module for what maps to what): ``claude-code`` (a Claude Code session
``.jsonl``), ``chatgpt`` (ChatGPT's ``conversations.json``), ``open-webui`` (an Open WebUI chat
export) and ``responses`` (a JSON array of OpenAI Responses / Agents SDK input items). A Claude
Code transcript that grows in batches maps the same way, line by line:
:mod:`sessiontree.importers.claude_code_mirror`.

Invariants:
* The whole source is read and checked before anything is written: a malformed or truncated file
  raises :class:`~sessiontree.errors.MalformedSource` (file, line and column or JSON path) and
  writes nothing; each session is written all at once or not at all.
* A conversation imported before (same format and source id, so the same session id) is not
  imported again: the result says so, and whether the source changed since.
* Every session opens in pi with the source's current leaf as its leaf.
* Nothing is changed silently: bytes of the file that are not UTF-8 are read as U+FFFD and the
  result's notes say so; JSON nested deeper than can be read, and times that are no time
  (NaN, infinite, out of range), are a ``MalformedSource`` naming where they are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from .._time import uuid7
from ..errors import MalformedSource
from ..stores.base import Store
from ..stores.jsonl import JsonlStore, default_session_dir
from ..stores.url import open_store
from ._build import (
    IMPORT_CUSTOM_TYPE,
    SourceConversation,
    build_session,
    session_id_for,
)
from ._read import SourceFile
from ._write import earlier_import, save_session
from .chatgpt import parse_chatgpt
from .claude_code import parse_claude_code
from .open_webui import parse_open_webui
from .responses import parse_responses

__all__ = [
    "FORMATS",
    "IMPORT_CUSTOM_TYPE",
    "ImportResult",
    "ImportedSession",
    "guess_format",
    "import_file",
    "parse_file",
]

FORMATS: dict[str, Callable[[SourceFile], list[SourceConversation]]] = {
    "claude-code": parse_claude_code,
    "chatgpt": parse_chatgpt,
    "open-webui": parse_open_webui,
    "responses": parse_responses,
}
"""Format name -> the parser of its files."""


@dataclass(frozen=True)
class ImportedSession:
    """One source conversation and what became of it.

    Attributes:
        source_id: the conversation's id in the source.
        title: its title there, if any.
        session_id: the session's id (also the id of the earlier import when skipped).
        location: where the session is (a file path for JSONL stores); ``None`` when skipped
            and the store cannot say.
        status: ``"imported"``, or ``"skipped"`` when imported before.
        changed: for a skipped conversation, whether the source differs from the earlier import.
        counts: entries by kind (``message:user``, ``message:assistant``, ``compaction``...).
        unmapped: what had no pi equivalent and was kept as custom entries or source fields.
        branches: leaves of the imported tree (1 for a linear conversation).
        leaf_id: the session's leaf entry (the source's current leaf).
        notes: repairs the import made (orphans, cycles, a missing current leaf).
        entries: every entry written (what ``ls`` counts: the counted kinds, the unmapped
            custom entries, the name, labels and the import record).
    """

    source_id: str
    title: str | None
    session_id: str
    location: str | None
    status: str
    changed: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    unmapped: dict[str, int] = field(default_factory=dict)
    branches: int = 0
    leaf_id: str | None = None
    notes: tuple[str, ...] = ()
    entries: int = 0


@dataclass(frozen=True)
class ImportResult:
    """What one import did: a row per source conversation."""

    format: str
    source: str
    sessions: list[ImportedSession]
    notes: tuple[str, ...] = ()
    """What reading the file changed (bytes that are not UTF-8)."""

    @property
    def imported(self) -> list[ImportedSession]:
        return [s for s in self.sessions if s.status == "imported"]

    @property
    def skipped(self) -> list[ImportedSession]:
        return [s for s in self.sessions if s.status == "skipped"]

    def summary(self) -> str:
        """A few human-readable lines: totals, then one line per session."""
        totals: dict[str, int] = {}
        unmapped: dict[str, int] = {}
        for item in self.imported:
            for key, value in item.counts.items():
                totals[key] = totals.get(key, 0) + value
            for key, value in item.unmapped.items():
                unmapped[key] = unmapped.get(key, 0) + value
        lines = [f"{self.source} ({self.format}): {len(self.imported)} imported, "
                 f"{len(self.skipped)} already imported"]
        lines.extend(f"  note: {note}" for note in self.notes)
        if totals:
            lines.append("  entries: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))
        if unmapped:
            lines.append("  kept unmapped: " + ", ".join(f"{k} {v}"
                                                         for k, v in sorted(unmapped.items())))
        for item in self.sessions:
            name = f" {item.title!r}" if item.title else ""
            if item.status == "skipped":
                state = "source changed since" if item.changed else "unchanged"
                lines.append(f"  skipped{name}: already imported as {item.session_id} ({state})")
            else:
                lines.append(f"  {item.location}{name}: {item.entries} entries "
                             f"({sum(item.counts.values())} mapped), "
                             f"{item.branches} branch(es)")
            lines.extend(f"    note: {note}" for note in item.notes)
        return "\n".join(lines)


def parse_file(format: str, path: str | os.PathLike[str]) -> list[SourceConversation]:
    """Read and check a source file without writing anything.

    Raises:
        ValueError: an unknown format.
        MalformedSource: the file is malformed or truncated.
    """
    return _parse(format, path)[0]


def _parse(format: str, path: str | os.PathLike[str]) -> tuple[list[SourceConversation],
                                                                  list[str]]:
    """The file's conversations, and the notes reading it made."""
    try:
        parser = FORMATS[format]
    except KeyError:
        raise ValueError(f"unknown format {format!r}; known: {', '.join(FORMATS)}") from None
    source = SourceFile(path, format)
    try:
        try:
            return parser(source), source.notes
        except RecursionError:  # past the parse: a value too deep to hash or copy
            source.too_deep()
    except MalformedSource as error:
        looks = guess_format(source.text)
        if looks is None or looks == format:
            raise
        hint = (f" (--from {format} expects {_EXPECTS[format]}; this file looks like "
                f"{_EXPECTS[looks]}: --from {looks}?)")
        raise MalformedSource(error.reason + hint, format=format, path=error.path,
                              lineno=error.lineno, column=error.column,
                              position=error.position) from None


_EXPECTS = {
    "claude-code": "a Claude Code session (JSON Lines)",
    "chatgpt": "ChatGPT's conversations.json (an array of conversations with a mapping)",
    "open-webui": "an Open WebUI chat export (chats with a history of messages)",
    "responses": "a JSON array of OpenAI Responses input items",
}


def guess_format(text: str) -> str | None:
    """Which format a source's text looks like (``None``: none of them), from its first
    record's shape; for the hint when a file does not parse as the format asked for."""
    start = text.lstrip()[:1]
    if start not in ("[", "{"):
        return None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # JSON Lines? Claude Code's records have uuids
        for line in text.strip().split("\n")[:20]:
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                return None
            if isinstance(record, dict) and ("uuid" in record or "sessionId" in record):
                return "claude-code"
        return None
    record = document[0] if isinstance(document, list) and document else document
    if isinstance(document, dict) and isinstance(document.get("input"), list):
        return "responses"
    if not isinstance(record, dict):
        return None
    if "mapping" in record:
        return "chatgpt"
    if "history" in record or isinstance(record.get("chat"), dict):
        return "open-webui"
    if isinstance(document, list) and ("type" in record or "role" in record):
        return "responses"
    return None


def import_file(format: str, path: str | os.PathLike[str],
                store: Store | str | os.PathLike[str] | None = None, *, cwd: str | None = None,
                again: bool = False) -> ImportResult:
    """Import every conversation of a source file as a session.

    Args:
        format: one of :data:`FORMATS`.
        path: the source file.
        store: where the sessions go: a :class:`~sessiontree.stores.base.Store`, or a store
            address (a folder of JSONL files, ``sqlite:///x.db``, ``postgresql://...``);
            default pi's folder for each session's working directory.
        cwd: the working directory recorded for sources that have none (default: the current).
        again: import conversations that were imported before once more, as new sessions.

    Returns:
        One row per conversation; :meth:`ImportResult.summary` for people.

    Raises:
        ValueError: an unknown format.
        MalformedSource: the file is malformed or truncated (nothing was written).
        InvalidLocation: ``store`` is not a store address.
        StoreUnavailable: the database cannot be reached.
    """
    conversations, notes = _parse(format, path)
    source = os.path.abspath(os.fspath(path))
    cwd = os.path.abspath(cwd) if cwd is not None else os.getcwd()
    if isinstance(store, (str, os.PathLike)):
        with open_store(store) as opened:
            return _import(format, source, conversations, opened, cwd, again, notes)
    return _import(format, source, conversations, store, cwd, again, notes)


def _import(format: str, source: str, conversations: list[SourceConversation],
            store: Store | None, cwd: str, again: bool, notes: list[str]) -> ImportResult:
    rows: list[ImportedSession] = []
    for conversation in conversations:
        target = _store(store, conversation.cwd or cwd)
        session_id = session_id_for(conversation.format, conversation.source_id)
        earlier = earlier_import(target, session_id)
        if earlier is not None and not again:
            rows.append(ImportedSession(
                source_id=conversation.source_id, title=conversation.title, session_id=session_id,
                location=None, status="skipped",
                changed=earlier.get("fingerprint") != conversation.fingerprint))
            continue
        built = build_session(conversation, cwd=cwd, source_file=source,
                              session_id=uuid7() if earlier is not None else session_id)
        location = save_session(target, built.header, built.entries)
        rows.append(ImportedSession(
            source_id=conversation.source_id, title=conversation.title,
            session_id=built.header.id, location=location, status="imported",
            counts=built.counts, unmapped=built.unmapped, branches=built.branches,
            leaf_id=built.leaf_id, notes=tuple(built.notes), entries=len(built.entries)))
    return ImportResult(format=format, source=source, sessions=rows, notes=tuple(notes))


def _store(store: Store | None, cwd: str) -> Store:
    return JsonlStore(default_session_dir(cwd)) if store is None else store
