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
import math
import os
import re
from collections.abc import Callable
from typing import Any

import msgspec

from . import _fs, _json
from ._scan import Scanner, _split
from ._time import iso_now, new_entry_id
from .entries import CHECKOUT_CUSTOM_TYPE, CURRENT_VERSION
from .errors import CorruptLine, SessionNotFound, UnsupportedVersion

__all__ = [
    "MIGRATIONS",
    "MigrationResult",
    "check_version",
    "import_draft",
    "is_draft",
    "migrate_entries",
    "migrate_file",
    "needs_migration",
    "read_version",
    "stated_version",
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


_JS_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_JS_WHITESPACE = " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007" \
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def _js_number(value: object) -> float:
    """``value`` as JavaScript compares it with a number (``Number(value)``); NaN for what is
    not one (objects, arrays, text that is not a number)."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if not isinstance(value, str):
        return math.nan
    text = value.strip(_JS_WHITESPACE)
    if not text:
        return 0.0
    if _JS_DECIMAL.fullmatch(text):
        return float(text)
    if re.fullmatch(r"0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+", text):
        return float(int(text, 0))
    if text in ("Infinity", "+Infinity", "-Infinity"):
        return -math.inf if text[0] == "-" else math.inf
    return math.nan


def stated_version(header: dict[str, Any]) -> object:
    """The header's ``version`` as pi takes it: ``version ?? 1``."""
    version = header.get("version")
    return 1 if version is None else version


def read_version(header: dict[str, Any]) -> int | None:
    """The format version a header states, as this library reads it without rewriting
    anything: 1, 2, 3 or a newer integer; a value pi compares equal to 3 (``"3"``, ``3.0``)
    is 3, as pi reads it. ``None`` for any other value (``3.5``, ``"2"``, ``"99"``, ``0``):
    such a file is read only after ``migrate`` (:func:`migrate_file`) rewrote it."""
    version = stated_version(header)
    if isinstance(version, int) and not isinstance(version, bool) and version >= 1:
        return version
    return CURRENT_VERSION if _js_number(version) == CURRENT_VERSION else None


def _version(header: dict[str, Any]) -> int:
    """The version pi migrates a header's file from (``migrateToCurrentVersion``: below 2 is
    1, below 3 is 2, anything else, NaN included, is current)."""
    number = _js_number(stated_version(header))
    return 1 if number < 2 else 2 if number < 3 else CURRENT_VERSION


def is_draft(header: dict[str, Any]) -> bool:
    """The first seed's draft format: a header with an integer ``parent`` field."""
    parent = header.get("parent")
    return isinstance(parent, int) and not isinstance(parent, bool)


def needs_migration(header: dict[str, Any]) -> bool:
    """Whether :func:`migrate_file` would rewrite a file with this header: the draft format, an
    old version, or an odd one (see :func:`read_version`)."""
    version = read_version(header)
    return is_draft(header) or version is None or version < CURRENT_VERSION


def check_version(header: dict[str, Any], path: str | os.PathLike[str], *,
                  odd: bool = False) -> None:
    """Refuse a header whose version this library cannot read as it stands.

    Args:
        odd: accept an odd version (what :func:`migrate_file` rewrites).

    Raises:
        UnsupportedVersion: a newer version, or (unless ``odd``) an odd one.
    """
    if is_draft(header):
        return
    version = read_version(header)
    stated = stated_version(header)
    number = _js_number(stated)
    if (version is not None and version > CURRENT_VERSION) or \
            (number > CURRENT_VERSION and number.is_integer()):
        raise UnsupportedVersion(
            f"format version {_json.dumps(stated).decode()} is newer than this library's "
            f"{CURRENT_VERSION}; upgrade sessiontree", path=path, lineno=1)
    if version is None and not odd:
        raise UnsupportedVersion(
            f"the header's version {_json.dumps(stated).decode()} is not a format version; "
            f"nothing was read or changed. 'sessiontree migrate {os.fspath(path)}' rewrites the "
            f"file as pi reads it (as version {_version(header)}), keeping the original",
            path=path, lineno=1)


def migrate_entries(entries: Entries) -> bool:
    """pi's ``migrateSessionEntries``: bring a parsed file (header first) to the current version
    (a header whose version is odd gets the steps pi would run, then version 3).

    Returns:
        True if anything changed.
    """
    start = _version(entries[0])
    for step in MIGRATIONS[start - 1:]:
        step(entries)
    changed = start < CURRENT_VERSION or entries[0].get("version") != CURRENT_VERSION
    entries[0]["version"] = CURRENT_VERSION
    return changed


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
    odd_version: str | None = None
    """An odd version the header stated (as JSON, ``"3.5"``), read as pi reads it."""


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
                 strict: bool = False, lock_timeout: float = 10.0,
                 odd: bool = True) -> MigrationResult:
    """Migrate a session file in place to the current version, keeping a backup.

    Args:
        path: the session file.
        now: the import time for the draft format (default: the current time).
        strict: raise instead of leaving lines that do not parse out of the migrated file.
        lock_timeout: seconds to wait while another process writes the session (its writer
            holds the lock until it closes).
        odd: rewrite a header whose version is odd (``3.5``, ``"2"``, ``{}``) as pi reads it:
            the steps pi's ``migrateToCurrentVersion`` would run, then version 3; False
            refuses it (:func:`check_version`).

    Raises:
        SessionNotFound: no such file.
        CorruptHeader: the file has no valid header (it is left untouched).
        CorruptLine: ``strict`` and a line that does not parse (the file is left untouched).
        UnsupportedVersion: a newer format version (the file is left untouched).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SessionNotFound("no such session file", path=path)
    fd = _fs.open_regular(path)
    try:
        _fs.lock(fd, path, lock_timeout)
        original = _fs.read_settled(fd)
        parsed, skipped = _parsed_lines(path, original)
        header = parsed[0][0] if parsed else {}
        check_version(header, path, odd=odd)
        if not parsed or not needs_migration(header):
            return MigrationResult(path, _version(header), None)
        odd_version = None if is_draft(header) or read_version(header) is not None else \
            _json.dumps(stated_version(header)).decode()
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
        return MigrationResult(path, from_version, backup, skipped, odd_version)
    finally:
        os.close(fd)
