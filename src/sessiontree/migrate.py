"""Format migrations: version 1 -> 2 -> 3, and the first seed's draft format (version 0).

Invariants (format-spec.md sections 9, 17 e and k, 18.3, 18.4):
* ``MIGRATIONS[i]`` turns version ``i + 1`` into version ``i + 2``; each works on a list of
  plain dicts (header first), in place, and is a no-op on files already past its version.
* Version 1 -> 2 draws every new id against the ids already drawn, so it never duplicates one.
* A migrated file is rewritten atomically (temporary file, fsync, rename) after its original
  bytes are saved as ``<file>.v<N>.bak``; lines the migration did not change keep their bytes,
  and lines another program (pi, which takes no lock) appends meanwhile are carried over.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

import msgspec

from . import _fs, _json
from ._scan import Scanner, _split
from ._time import iso_now, new_entry_id
from .entries import CHECKOUT_CUSTOM_TYPE, CURRENT_VERSION
from .errors import CorruptLine, SessionNotFound

__all__ = [
    "MIGRATIONS",
    "MigrationResult",
    "import_draft",
    "is_draft",
    "migrate_entries",
    "migrate_file",
    "needs_migration",
    "v1_to_v2",
    "v2_to_v3",
]

Entries = list[dict[str, Any]]


def v1_to_v2(entries: Entries) -> None:
    """Give every entry an id and chain them in file order; indexes become ``firstKeptEntryId``."""
    header, body = entries[0], entries[1:]
    header["version"] = 2
    drawn: set[str] = set()
    previous: str | None = None
    for entry in body:
        entry_id = new_entry_id(drawn)
        drawn.add(entry_id)
        entry["id"] = entry_id
        entry["parentId"] = previous
        previous = entry_id
        if entry.get("type") == "compaction" and "firstKeptEntryIndex" in entry:
            index = entry.pop("firstKeptEntryIndex")
            if isinstance(index, int) and not isinstance(index, bool) and 0 < index < len(entries):
                entry["firstKeptEntryId"] = entries[index]["id"]


def v2_to_v3(entries: Entries) -> None:
    """Rename the ``hookMessage`` role to ``custom``."""
    entries[0]["version"] = 3
    for entry in entries[1:]:
        message = entry.get("message")
        if entry.get("type") == "message" and isinstance(message, dict) and \
                message.get("role") == "hookMessage":
            message["role"] = "custom"


MIGRATIONS: list[Callable[[Entries], None]] = [v1_to_v2, v2_to_v3]


def _version(header: dict[str, Any]) -> int:
    version = header.get("version", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else 1


def is_draft(header: dict[str, Any]) -> bool:
    """The first seed's draft format: a header with an integer ``parent`` field."""
    parent = header.get("parent")
    return isinstance(parent, int) and not isinstance(parent, bool)


def needs_migration(header: dict[str, Any]) -> bool:
    return is_draft(header) or _version(header) < CURRENT_VERSION


def migrate_entries(entries: Entries) -> bool:
    """pi's ``migrateSessionEntries``: bring a parsed file (header first) to the current version.

    Returns:
        True if anything changed.
    """
    start = _version(entries[0])
    for step in MIGRATIONS[start - 1:]:
        step(entries)
    return start < CURRENT_VERSION


def import_draft(lines: list[dict[str, Any]], now: str) -> Entries:
    """Convert the draft format (integer ``parent`` indices, ``head`` entries) to version 3.

    Args:
        lines: the parsed non-blank lines, header first (index 0).
        now: the import time, used where the draft has no timestamp.
    """
    draft_header = lines[0]
    stamp = draft_header.get("timestamp") if isinstance(draft_header.get("timestamp"), str) else now
    header: dict[str, Any] = {"type": "session", "version": CURRENT_VERSION,
                              "id": draft_header.get("id"), "timestamp": stamp,
                              "cwd": draft_header.get("cwd")}
    for key, value in draft_header.items():
        if key not in header and key != "parent":
            header[key] = value

    ids: dict[int, str | None] = {}
    drawn: set[str] = set()

    def resolve(index: Any) -> str | None:
        # A parent naming a head resolves to that head's own parent; a bad index to no parent.
        seen: set[int] = set()
        while isinstance(index, int) and 0 < index < len(lines) and index not in seen:
            seen.add(index)
            if lines[index].get("type") != "head":
                return ids.get(index)
            index = lines[index].get("parent")
        return None

    out: Entries = [header]
    leaf: str | None = None
    last_written: str | None = None
    for index, line in enumerate(lines[1:], start=1):
        if line.get("type") == "head":
            leaf = resolve(line.get("parent"))
            continue
        entry_id = new_entry_id(drawn)
        drawn.add(entry_id)
        ids[index] = entry_id
        entry: dict[str, Any] = {
            "type": line.get("type"), "id": entry_id, "parentId": resolve(line.get("parent")),
            "timestamp": line["timestamp"] if isinstance(line.get("timestamp"), str) else stamp,
        }
        if entry["type"] == "branch_summary" and "fromId" not in line:
            previous = lines[index - 1] if index > 1 else None
            if previous is None:
                entry["fromId"] = "root"
            elif previous.get("type") == "head":
                entry["fromId"] = resolve(previous.get("parent")) or "root"
            else:
                entry["fromId"] = ids.get(index - 1) or "root"
        for key, value in line.items():
            if key not in entry and key != "parent":
                entry[key] = value
        out.append(entry)
        last_written = entry_id
        leaf = None
    if leaf is not None and leaf != last_written:
        marker_id = new_entry_id(drawn)
        out.append({"type": "custom", "customType": CHECKOUT_CUSTOM_TYPE,
                    "data": {"targetId": leaf}, "id": marker_id, "parentId": leaf,
                    "timestamp": now})
    return out


class MigrationResult(msgspec.Struct, frozen=True):
    """What :func:`migrate_file` did."""

    path: str
    from_version: int
    """The file's version before (0 for the draft format)."""
    backup: str | None
    """Where the original bytes were saved; ``None`` when nothing needed migrating."""
    skipped: list[int] = []
    """Line numbers (of the original file) that did not parse and are only in the backup."""


def _parsed_lines(path: str, original: bytes) -> tuple[list[tuple[dict[str, Any], bytes]],
                                                     list[int]]:
    """Every line of ``original`` that parses as a JSON object, from the header on, with its
    bytes; and the numbers of the other non-blank lines."""
    scanner = Scanner(path)
    out: list[tuple[dict[str, Any], bytes]] = []
    skipped: list[int] = []
    for line, offset, terminated in _split(original, 0):
        scanner.feed(line, offset, terminated)
        if scanner.header is None:
            continue
        raw = bytes(line).rstrip(b"\r")
        if offset == 0 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        try:
            value = _json.loads(raw)
        except ValueError:
            value = None
        if isinstance(value, dict):
            out.append((value, raw))
        else:
            skipped.append(scanner.lineno)
    scanner.finish()
    return out, skipped


def migrate_file(path: str | os.PathLike[str], *, now: str | None = None,
                 strict: bool = False, lock_timeout: float = 10.0) -> MigrationResult:
    """Migrate a session file in place to the current version, keeping a backup.

    Args:
        path: the session file.
        now: the import time for the draft format (default: the current time).
        strict: raise instead of leaving lines that do not parse out of the migrated file.
        lock_timeout: seconds to wait while another process writes the session (its writer
            holds the lock until it closes).

    Raises:
        SessionNotFound: no such file.
        CorruptHeader: the file has no valid header (it is left untouched).
        CorruptLine: ``strict`` and a line that does not parse (the file is left untouched).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SessionNotFound("no such session file", path=path)
    fd = os.open(path, os.O_RDONLY)
    try:
        _fs.lock(fd, path, lock_timeout)
        original = _fs.read_settled(fd)
        parsed, skipped = _parsed_lines(path, original)
        header = parsed[0][0] if parsed else {}
        if not parsed or not needs_migration(header):
            return MigrationResult(path, _version(header), None)
        if strict and skipped:
            raise CorruptLine("corrupt: the line does not parse as a JSON object; nothing was "
                              "migrated", kind="corrupt", path=path, lineno=skipped[0])
        if is_draft(header):
            from_version = 0
            migrated = import_draft([value for value, _ in parsed], now or iso_now())
            raws: list[bytes | None] = [None] * len(migrated)
        else:
            from_version = _version(header)
            originals = [copy.deepcopy(value) for value, _ in parsed]
            migrated = [value for value, _ in parsed]
            migrate_entries(migrated)
            raws = [raw if new == old else None
                    for new, old, (_, raw) in zip(migrated, originals, parsed)]
        text = b"".join((raw if raw is not None else _json.dumps(entry)) + b"\n"
                        for entry, raw in zip(migrated, raws))
        backup = _fs.write_new(f"{path}.v{from_version}.bak", original)
        try:
            # lines pi (which takes no lock) appends meanwhile are carried over
            _fs.rewrite_following(path, fd, len(original), text)
        except BaseException:
            os.unlink(backup)  # the file is as it was: no backup of nothing
            raise
        return MigrationResult(path, from_version, backup, skipped)
    finally:
        os.close(fd)
