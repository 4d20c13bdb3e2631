"""A Claude Code transcript that grows in batches (what the Claude Agent SDK mirrors to a session
store), as the entries of one session: the importer's mapping (:mod:`.claude_code`), applied as
the lines arrive.

:class:`TranscriptMirror` turns each batch of transcript lines into entries to append; nothing
already written changes. Every entry that stands for lines keeps them verbatim in its
``claudeCode`` field, so the transcript comes back exactly (:func:`transcript_lines`) while the
session is a real tree that pi, ``browse`` and the exports read:

* ``claudeCode.lines``: ``[[n, line], ...]``: the lines, each with its position ``n`` in the
  transcript (1 for the first line ever appended). The first entry of a node keeps the line of
  its record and of the records merged into it (the other blocks of a reply, the summary that
  follows a compaction); a ``claude-code.*`` custom entry whose ``data`` is the line keeps only
  ``[[n]]``. Every line is kept by exactly one entry.
* ``claudeCode.problem``: why a line was kept as a custom entry instead of being mapped (a
  ``user`` record without a message, a parent that is not in the transcript...).

Invariants:
* The mapping is the importer's, record by record: one reply's blocks are one message and
  parallel tool results one chain, as long as they arrive in one batch (the SDK sends a turn at
  once); a reply whose blocks are split across batches stays two messages, and results that
  arrive later still follow the earlier results of their reply.
* Records of the tree hang where their ``parentUuid`` says (under anything appended below that
  record since); a record without a parent hangs below the lines that came before the first
  record of the tree, so the session has one root. Lines outside the tree (queue operations,
  costs, prompts of the title...) hang below the latest entry of the main chain, so the last line
  of a session continues Claude Code's current branch and nothing dangles.
* ``summary`` lines label their entry; ``custom-title`` lines name the session, else a summary
  of the current leaf does (the importer's rule; that name entry keeps no line).
* A line with a ``uuid`` that was taken before, unchanged, is skipped (the SDK retries a batch
  that may have landed); a changed one is kept (``claude-code.duplicate``).
* :meth:`TranscriptMirror.prime` rebuilds the state from the stored entries, so a new process
  continues a session exactly where another one left it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from .. import _json
from .._time import iso_now, iso_to_ms, new_entry_id
from .._tree import js_trim
from ..errors import InvalidEntry, MalformedSource
from ._build import _ordered, fingerprint, node_entries
from ._read import SourceFile
from .claude_code import FORMAT, _Reader, detached_entry

__all__ = ["TranscriptMirror", "stored_entry", "transcript_lines"]


class _Stored(msgspec.Struct, rename="camel"):
    """The fields of a stored entry the mirror reads (its message is skipped, not decoded)."""

    type: Any = msgspec.UNSET
    id: Any = msgspec.UNSET
    parent_id: Any = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    source: Any = msgspec.UNSET
    claude_code: Any = msgspec.UNSET
    data: Any = msgspec.UNSET


_STORED = msgspec.json.Decoder(_Stored)


def stored_entry(line: bytes) -> dict[str, Any]:
    """What :meth:`TranscriptMirror.prime` and :func:`transcript_lines` read of a stored entry
    line: its type and envelope, ``source``, ``claudeCode`` and ``data``, in the on-disk
    names."""
    try:
        found = _STORED.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError):  # a lone surrogate, say: the slow parser
        data = _json.loads(line)
        return data if isinstance(data, dict) else {}
    return {name: value for name, value in zip(_STORED_NAMES, msgspec.structs.astuple(found))
            if value is not msgspec.UNSET}


_STORED_NAMES = ("type", "id", "parentId", "timestamp", "source", "claudeCode", "data")


class _Inline(NamedTuple):
    """An entry outside the tree of records, hung below the latest entry of the main chain."""

    body: dict[str, Any]
    lines: list[list[Any]]
    problem: str | None = None


class _Label(NamedTuple):
    """A label on the node ``key`` (a ``summary`` record); ``name``: the session's name too (it
    labels the current leaf and no ``custom-title`` came, the importer's rule)."""

    key: str
    text: str
    lines: list[list[Any]]
    name: bool


class TranscriptMirror:
    """The entries for one transcript's batches of lines, continuing what is stored.

    Args:
        where: how errors name the transcript (a session address).
    """

    def __init__(self, where: str) -> None:
        self.reader = _Reader(SourceFile(where, FORMAT, text=""))
        self.lines = 0
        """Lines taken so far (the position of the last one)."""
        self._seen: set[tuple[str, bytes]] = set()  # (uuid, digest) of every line taken
        self._taken: set[str] = set()  # entry ids in the session
        self._tail: dict[str | None, str] = {}  # node key -> the entry its children hang below
        self._last: dict[str, str] = {}  # node key -> its last entry (a label's target)
        self._main: str | None = None  # the latest node of the main chain
        self._latest: str | None = None  # the latest node of any chain
        self._first: str | None = None  # the first time in the batch being taken
        self._titled = False  # whether a custom-title named the session

    # -- the stored session ---------------------------------------------------------------------

    def prime(self, stored: Iterable[Mapping[str, Any]]) -> None:
        """Take in a session's stored entries (on-disk dicts, in file order) before the next
        batch, so that it continues them: positions, parents, replies, duplicates.

        The lines each node keeps are read again, node by node as they were written, so the
        reader knows what it knew when it wrote them (tool calls, replies, chains of results);
        where each record's children go is what is stored.
        """
        owner: dict[str, str | None] = {}
        stamps: list[Any] = []
        latest: tuple[int, str] | None = None  # the transcript's latest timed record, by line
        for entry in stored:
            entry_id, parent = entry.get("id"), entry.get("parentId")
            if not isinstance(entry_id, str):
                continue
            self._taken.add(entry_id)
            stamps.append(entry.get("timestamp"))
            self._titled = self._titled or entry.get("type") == "session_info" and \
                bool(entry.get("claudeCode"))  # (a name from a summary keeps no line)
            source = entry.get("source")
            key = source.get("id") if isinstance(source, Mapping) else None
            lines = _lines_of(entry)
            if isinstance(key, str):  # an entry of a node (its first, or a later part)
                owner[entry_id] = key
                self._tail[key] = self._last[key] = entry_id
            else:  # below a node, or before the first one: it moves that node's tail
                above = owner.get(parent) if isinstance(parent, str) else None
                owner[entry_id] = above
                self._tail[above] = entry_id
            for n, line in lines:
                self.lines = max(self.lines, n)
                uuid = line.get("uuid") if isinstance(line, dict) else None
                if isinstance(uuid, str):
                    self._seen.add((uuid, _digest(line)))
                    stamp = line.get("timestamp")
                    if isinstance(stamp, str) and iso_to_ms(stamp) and \
                            (latest is None or n > latest[0]):
                        latest = (n, stamp)
            if isinstance(key, str) and isinstance(source, Mapping) and "part" not in source \
                    and lines:
                self._reread(key, [line for _, line in lines])
        # as the reader left it after the last timed record (entries are stored in another
        # order than their lines where results chain; the last stored entry's time differed)
        self.reader.last_timestamp = latest[1] if latest is not None else next(
            (stamp for stamp in reversed(stamps) if iso_to_ms(stamp) is not None), None)

    def _reread(self, key: str, lines: list[Any]) -> None:
        """Read a stored node's lines again, then record that each of them is in that node."""
        for n, line in enumerate(lines, 1):
            try:
                self.reader.record(n, line)
            except MalformedSource:  # (kept by a version that mapped it): its place is stored
                pass
        self.reader.freeze()
        own: dict[str, Any] = {}
        for line in lines:
            uuid = line.get("uuid") if isinstance(line, dict) else None
            if isinstance(uuid, str):
                self.reader.alias[uuid] = key
                own = line if uuid == key else own
        self._moved(key, bool(own.get("isSidechain")))

    # -- a new batch --------------------------------------------------------------------------------

    def take(self, batch: Sequence[Any]) -> list[dict[str, Any]]:
        """The entries that stand for ``batch`` (transcript lines in the order they were
        written), ids and parents set, to append in this order. Lines taken before, unchanged,
        are left out."""
        reader = self.reader
        self._first = next((line["timestamp"] for line in batch if isinstance(line, dict)
                            and iso_to_ms(line.get("timestamp")) is not None), None)
        plan: list[str | _Inline | _Label] = []  # node keys and other entries, as they came
        carried: dict[str, list[list[Any]]] = {}  # node key -> the lines its first entry keeps
        host: dict[str, str] = {}  # node key of this batch -> the node that keeps its line
        for given in batch:
            line = _exactly(given, self.lines + 1)
            uuid = line.get("uuid") if isinstance(line, dict) else None
            digest = _digest(line) if isinstance(uuid, str) else b""
            if isinstance(uuid, str) and (uuid, digest) in self._seen:
                continue
            self.lines += 1
            n = self.lines
            if isinstance(uuid, str):
                self._seen.add((uuid, digest))
            try:
                took = reader.record(n, line)
            except MalformedSource as error:
                plan.append(_Inline(detached_entry(line, self._stamp()), [[n]], error.reason))
                continue
            if took.kind == "node" and took.key is not None:
                node = reader.by_key[took.key]
                keeper = took.key if node.entries else host.get(node.parent or "", "")
                host[took.key] = keeper or took.key
                carried.setdefault(host[took.key], []).append([n, line])
                plan.append(took.key)
            elif took.kind == "merged" and took.key is not None:
                carried[host[took.key]].append([n, line])
            elif took.kind == "title":
                self._titled = True
                plan.append(_Inline({"type": "session_info", "timestamp": self._stamp(),
                                     "name": js_trim(took.text)}, [[n, line]]))
            elif took.kind == "summary" and took.key is not None and \
                    (took.key in host or took.key in self._last):
                plan.append(_Label(took.key, took.text, [[n, line]],
                                   not self._titled and took.key == reader.main_leaf))
            else:
                kept = took.line if took.kind == "detached" else line
                plan.append(_Inline(detached_entry(kept, self._stamp()),
                                    [[n]] if kept is line else [[n, line]]))
        entries = [entry for item in plan for entry in self._entries(item, carried)]
        reader.freeze()
        return entries

    def _entries(self, item: str | _Inline | _Label,
                 carried: Mapping[str, list[list[Any]]]) -> list[dict[str, Any]]:
        if isinstance(item, _Label):
            label = self._below_main({"type": "label", "timestamp": self._stamp(),
                                      "targetId": self._last[item.key], "label": item.text},
                                     item.lines)
            if not item.name:
                return [label]
            return [label, self._below_main({"type": "session_info", "timestamp": self._stamp(),
                                             "name": js_trim(item.text)}, [])]
        if isinstance(item, _Inline):
            return [self._below_main(item.body, item.lines, item.problem)]
        node = self.reader.by_key[item]
        problem = None
        if node.parent is not None and node.parent not in self._tail:
            problem = f"its parent {node.parent} is not in the transcript: kept as a root"
        parent_id = self._tail.get(node.parent if problem is None else None)
        node.source = {}  # the record itself is kept whole in claudeCode.lines
        made = node_entries(node, parent_id, self._taken)
        if made:
            made[0]["claudeCode"] = {"lines": carried[item]}
            if problem is not None:
                made[0]["claudeCode"]["problem"] = problem
            self._last[item] = made[-1]["id"]
        else:  # the summary after a compaction: its children go below the compaction
            self._last[item] = self._last.get(node.parent or "", parent_id or "")
        self._tail[item] = made[-1]["id"] if made else parent_id or ""
        line = next((line for _, line in carried.get(item, ()) if isinstance(line, dict)
                     and line.get("uuid") == item), {})
        self._moved(item, bool(line.get("isSidechain")))
        return made

    def _below_main(self, body: Mapping[str, Any], lines: list[list[Any]],
                    problem: str | None = None) -> dict[str, Any]:
        anchor = self._main if self._main is not None else self._latest
        entry_id = new_entry_id(self._taken)
        self._taken.add(entry_id)
        entry = _ordered(body, entry_id, self._tail.get(anchor))
        if lines:
            entry["claudeCode"] = {"lines": lines} if problem is None else \
                {"lines": lines, "problem": problem}
        self._tail[anchor] = entry_id
        return entry

    def _moved(self, key: str, sidechain: bool) -> None:
        self._latest = key
        if not sidechain:
            self._main = key

    def _stamp(self) -> str:
        """The time of an entry whose line has none: the latest time read, else the batch's
        first, else now."""
        return self.reader.last_timestamp or self._first or iso_now()


def transcript_lines(entries: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The transcript lines that ``entries`` keep (any order of entries), in transcript order."""
    found = [pair for entry in entries for pair in _lines_of(entry)]
    found.sort(key=lambda pair: pair[0])
    return [line for _, line in found]


def _lines_of(entry: Mapping[str, Any]) -> list[tuple[int, Any]]:
    """``(n, line)`` for each line an entry keeps.

    Raises:
        InvalidEntry: its ``claudeCode.lines`` is not a list of ``[n]`` or ``[n, line]``.
    """
    kept = entry.get("claudeCode")
    if kept is None:
        return []
    lines = kept.get("lines", []) if isinstance(kept, Mapping) else None
    out: list[tuple[int, Any]] = []
    for item in lines if isinstance(lines, list) else [None]:
        if not isinstance(item, list) or len(item) not in (1, 2) or type(item[0]) is not int:
            raise InvalidEntry("claudeCode.lines must be a list of [n] or [n, line]",
                               entry_id=str(entry.get("id")))
        out.append((item[0], item[1] if len(item) == 2 else entry.get("data")))
    return out


def _exactly(value: Any, n: int) -> Any:
    """``value`` as JSON keeps it: a float of 2**53 or more with an integral value as the
    integer it is (JavaScript would write its shortest digits, another integer); the same object
    when nothing changes.

    Raises:
        InvalidEntry: a NaN or an infinity (JSON has none).
    """
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidEntry(f"transcript line {n} holds {value}, which JSON cannot keep")
        return int(value) if value.is_integer() and abs(value) >= 2 ** 53 else value
    if isinstance(value, dict):
        changed = {k: _exactly(v, n) for k, v in value.items()}
        return value if all(changed[k] is v for k, v in value.items()) else changed
    if isinstance(value, list):
        items = [_exactly(v, n) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _digest(line: Any) -> bytes:
    """A short hash of a line's content, the same whatever its key order."""
    try:
        data = msgspec.json.encode(line, order="sorted")
    except (TypeError, UnicodeEncodeError, msgspec.EncodeError):
        data = fingerprint(line).encode()
    return hashlib.blake2b(data, digest_size=16).digest()
