"""Reading source files with errors that say where: file, line and column, or JSON path.

Invariants:
* Every failure is a :class:`~sessiontree.errors.MalformedSource` naming the file; a syntax error
  or a truncated file gives its line and column, a value of the wrong shape its JSON path.
* Sources are read whole before anything is written, so a bad file never starts an import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, NoReturn

from ..errors import MalformedSource

__all__ = ["SourceFile", "json_path", "obj"]


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
        self.text = data.decode("utf-8", "replace").removeprefix("\ufeff")

    def fail(self, reason: str, *, position: str | None = None, lineno: int | None = None,
             column: int | None = None) -> NoReturn:
        """Raise :class:`MalformedSource` about this file."""
        raise MalformedSource(reason, format=self.format, path=self.path, lineno=lineno,
                              column=column, position=position)

    def _parse(self, text: str, lineno: int | None = None) -> Any:
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            truncated = error.pos >= len(text.rstrip())
            reason = ("the file ends in the middle of a JSON value (truncated?)" if truncated
                      else error.msg)
            self.fail(reason, lineno=lineno if lineno is not None else error.lineno,
                      column=error.colno)

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


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number")
