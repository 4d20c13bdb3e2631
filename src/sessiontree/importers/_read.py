"""Reading source files with errors that say where: file, line and column, or JSON path.

Invariants:
* Every failure is a :class:`~sessiontree.errors.MalformedSource` naming the file; a syntax error
  or a truncated file gives its line and column, a value of the wrong shape its JSON path.
* Sources are read whole before anything is written, so a bad file never starts an import.
* Nothing is changed without a word: bytes that are not UTF-8 are read as U+FFFD and said in
  :attr:`SourceFile.notes`; a time that is not a date (NaN, infinite, out of range) and JSON
  nested deeper than Python can read are errors naming where they are.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from typing import Any, NoReturn

from ..errors import MalformedSource

__all__ = ["SourceFile", "as_text", "json_path", "obj"]

_FIRST_SECOND = -62135596800.0
"""0001-01-01T00:00:00Z in epoch seconds: the earliest time an ISO timestamp can write."""
_LAST_SECOND = 253402300799.999
"""9999-12-31T23:59:59.999Z: the latest."""


def json_path(*parts: str | int) -> str:
    """``$[2].mapping["a b"]`` from ``(2, "mapping", "a b")``."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += "[" + json.dumps(part, ensure_ascii=False) + "]"
    return out


class SourceFile:
    """One file being imported: its text, and typed errors that point into it."""

    def __init__(self, path: str | os.PathLike[str], format: str, *,
                 text: str | None = None) -> None:
        """Read the file at ``path``; with ``text``, take that as its content instead (records
        that arrive in batches, not from a file: ``path`` then only names them in errors)."""
        self.path = os.fspath(path)
        self.format = format
        self.notes: list[str] = []
        """What reading changed (bytes that are not UTF-8), for the import summary."""
        if text is not None:
            self.text = text
            return
        try:
            with open(self.path, "rb") as stream:
                data = stream.read()
        except FileNotFoundError:
            self.fail("no such file")
        except IsADirectoryError:
            self.fail("is a folder, not a file")
        self.text = self._decode(data).removeprefix("\ufeff")

    def _decode(self, data: bytes) -> str:
        """The file's text; bytes that are not UTF-8 become U+FFFD, and a note says so."""
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            text = data.decode("utf-8", "replace")
            count = text.count("\ufffd") - data.count("\ufffd".encode())
            line = data.count(b"\n", 0, error.start) + 1
            column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
            self.notes.append(f"{self.path}: not valid UTF-8: {count} invalid byte sequence(s) "
                              f"read as U+FFFD, the first at line {line}, byte {column}")
            return text

    def fail(self, reason: str, *, position: str | None = None, lineno: int | None = None,
             column: int | None = None) -> NoReturn:
        """Raise :class:`MalformedSource` about this file."""
        raise MalformedSource(reason, format=self.format, path=self.path, lineno=lineno,
                              column=column, position=position)

    def _parse(self, text: str, lineno: int | None = None) -> Any:
        try:
            return json.loads(text)
        except RecursionError:
            self.too_deep(text, lineno)
        except json.JSONDecodeError as error:
            truncated = error.pos >= len(text.rstrip())
            reason = ("the file ends in the middle of a JSON value (truncated?)" if truncated
                      else error.msg)
            self.fail(reason, lineno=lineno if lineno is not None else error.lineno,
                      column=error.colno)

    def too_deep(self, text: str | None = None, lineno: int | None = None) -> NoReturn:
        """Raise :class:`MalformedSource` for JSON nested deeper than Python can read, at the
        first place the nesting is deepest in ``text`` (default: the whole file)."""
        text = self.text if text is None else text
        depth, where = _deepest(text)
        line = text.count("\n", 0, where) + 1
        column = where - (text.rfind("\n", 0, where) + 1) + 1
        self.fail(f"JSON nested {depth} levels deep, deeper than can be read",
                  lineno=lineno if lineno is not None else line, column=column)

    def seconds(self, value: Any, *where: str | int, per_second: int = 1) -> float | None:
        """Epoch seconds from a JSON number of ``1/per_second`` seconds (``None`` for anything
        else); a number that is no time an ISO timestamp can hold (NaN, infinite, before year 1
        or after 9999) is a :class:`MalformedSource` naming ``where``."""
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        seconds = value / per_second
        if not math.isfinite(seconds) or not _FIRST_SECOND <= seconds <= _LAST_SECOND:
            unit = "seconds" if per_second == 1 else f"1/{per_second} seconds"
            self.fail(f"{value!r} is not a time (epoch {unit} from year 1 to 9999)",
                      position=json_path(*where))
        return float(seconds)

    def json(self) -> Any:
        """The whole file as one JSON document."""
        if not self.text.strip():
            self.fail("the file is empty", lineno=1)
        return self._parse(self.text)

    def json_lines(self) -> Iterator[tuple[int, Any]]:
        """``(line number, value)`` for every non-blank line of a JSONL file."""
        for lineno, line in enumerate(self.text.split("\n"), start=1):
            if line.strip():
                yield lineno, self._parse(line, lineno)

    def expect_object(self, value: Any, *where: str | int, lineno: int | None = None
                      ) -> dict[str, Any]:
        """``value`` if it is a JSON object, else a :class:`MalformedSource` naming ``where``."""
        if not isinstance(value, dict):
            self.fail(f"expected an object, found {_kind(value)}", position=json_path(*where),
                      lineno=lineno)
        return value

    def expect_list(self, value: Any, *where: str | int, lineno: int | None = None) -> list[Any]:
        """``value`` if it is a JSON array, else a :class:`MalformedSource` naming ``where``."""
        if not isinstance(value, list):
            self.fail(f"expected an array, found {_kind(value)}", position=json_path(*where),
                      lineno=lineno)
        return value


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (for optional objects)."""
    return value if isinstance(value, dict) else {}


def as_text(value: Any) -> str:
    """A field as text: a JSON null (or a missing field) is empty, never ``"None"``."""
    return "" if value is None else str(value)


def _deepest(text: str) -> tuple[int, int]:
    """The deepest nesting of arrays and objects in JSON text, and the offset where it is first
    reached (brackets inside strings do not count)."""
    depth = deepest = at = 0
    in_string = escaped = False
    for offset, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, offset
        elif char in "]}":
            depth -= 1
    return deepest, at


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number")
