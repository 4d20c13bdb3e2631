"""The click group every subcommand module registers on, and what they share."""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from .. import _helpers
from ..errors import SessionTreeError
from ._progress import loading

__all__ = ["SESSION", "SESSION_MAYBE", "cli", "echo_json", "json_option", "open_session",
           "reports_errors", "warnings_said"]

F = TypeVar("F", bound=Callable[..., Any])
CLI_PROCESSES = 4
"""How many processes a command may use to scan a large file or list a large folder."""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="sessiontree")
def cli() -> None:
    """Store and explore LLM agent sessions as trees (pi session format v3).

    Shell completion: eval "$(_SESSIONTREE_COMPLETE=bash_source sessiontree)" (zsh_source,
    fish_source for other shells).
    """
    # a command may scan a large file or folder with helper processes (the library does not
    # unless asked); SESSIONTREE_PROCESSES still decides when set
    before = _helpers.default_processes
    _helpers.default_processes = CLI_PROCESSES
    click.get_current_context().call_on_close(lambda: setattr(_helpers, "default_processes",
                                                              before))


def reports_errors(func: F) -> F:
    """Turn library errors into one clear line and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SessionTreeError as exc:
            raise click.ClickException(str(exc)) from None
        except BrokenPipeError:
            raise  # stdout was closed (``| head``): the group exits quietly
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{where}{exc.strerror or exc}") from None

    return wrapper  # type: ignore[return-value]


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


class SessionLocation(click.ParamType):  # type: ignore[type-arg]  # generic in click 8.2+
    """A session: a ``.jsonl`` file (that exists, with ``exists``; else opening it reports a
    missing file), or a database URL naming one with ``#SESSION_ID`` (``sqlite:///x.db#ID``,
    ``postgresql://.../db#ID``)."""

    name = "session"

    def __init__(self, *, exists: bool) -> None:
        self.exists = exists

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from ..stores.url import is_url, parse_location

        text: str = os.fspath(value)
        if is_url(text):
            try:
                where = parse_location(text)
            except SessionTreeError as exc:
                self.fail(str(exc), param, ctx)
            if where.session_id is None:
                self.fail(f"{text}: name the session with #SESSION_ID (see 'sessiontree ls "
                          "URL')", param, ctx)
            return text
        if self.exists and not os.path.exists(text):
            self.fail(f"File {text!r} does not exist.", param, ctx)
        if os.path.isdir(text):
            self.fail(f"{text} is a folder: name a session file", param, ctx)
        return text


SESSION = SessionLocation(exists=True)
"""A session argument that must exist (a file) or name one (a URL)."""
SESSION_MAYBE = SessionLocation(exists=False)
"""A session argument whose file is checked when it is opened (SessionNotFound, exit 1)."""


@contextmanager
def warnings_said(*categories: type[Warning]) -> Iterator[None]:
    """Print the warnings raised in the block to stderr, one ``warning: ...`` line for each
    message (the given categories every time they are raised)."""
    with warnings.catch_warnings(record=True) as caught:
        for category in categories:
            warnings.simplefilter("always", category)
        try:
            yield
        finally:
            for message in dict.fromkeys(str(warning.message) for warning in caught):
                click.echo(f"warning: {message}", err=True)


def open_session(path: str, **kwargs: Any) -> Any:
    """Open a session (a file or a database URL with ``#SESSION_ID``), printing load problems
    to stderr as one warning line."""
    from ..session import LoadWarning, Session

    with warnings_said(LoadWarning), loading(path):
        return Session.open(path, **kwargs)


def echo_json(data: bytes) -> None:
    """Write JSON bytes (already serialized) and a newline to stdout."""
    out = sys.stdout.buffer
    out.write(data + b"\n")
    out.flush()
