"""``sessiontree export``: write a session, one path of it or one subtree, in another form.

Formats are entries of :data:`FORMATS`: a name, a one-line description and a writer. Adding
one (html, md, json, ...) is one entry here and its writer function; the command, its
``--format`` choice and its help text pick it up.

``jsonl`` writes a new session file in pi's format (a path with ``--branch``, a subtree with
``--subtree``) that pi and sessiontree open like any other session. ``html`` (one offline page
with a tree sidebar), ``md`` (the active branch, or every branch with ``--all``) and ``json``
(entries and tree) are for reading; their writers live in :mod:`sessiontree.export`. Long
exports show a progress bar when stdout is a terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click
import msgspec

from .. import _json
from ._address import ENTRY_HELP, entry_option_value
from ._app import SESSION, cli, echo_json, json_option, open_session, reports_errors
from ._progress import copying, progress

if TYPE_CHECKING:
    from ..export import Selection
    from ..session import Session

__all__ = ["FORMATS", "ExportFormat", "ExportRequest", "export"]


class ExportRequest(msgspec.Struct, frozen=True):
    """What the command line asked for; a writer uses what applies to its format.

    Attributes:
        file: the source session file.
        branch: ``--branch ID``: the path from the root to ID.
        subtree: ``--subtree ID``: ID and its descendants.
        output: ``-o OUT`` (``None``: the writer's default, e.g. stdout).
        ancestors: with ``--subtree``: include the path to ID (``--no-ancestors`` drops it).
        overwrite: ``--force``: replace an existing output file.
        all_branches: ``--all`` (md): every branch, each under its own heading.
    """

    file: str
    branch: str | None = None
    subtree: str | None = None
    output: str | None = None
    ancestors: bool = True
    overwrite: bool = False
    all_branches: bool = False


Writer = Callable[["Session", ExportRequest], str]
"""Writes the export and returns where it went (a path, or ``"-"`` for stdout)."""


class ExportFormat(msgspec.Struct, frozen=True):
    description: str
    writer: Writer


def _write_jsonl(session: Session, request: ExportRequest) -> str:
    if request.branch is None and request.subtree is None:
        raise click.UsageError("the jsonl format exports one part of a session: give "
                               "--branch ID or --subtree ID (use 'sessiontree fork FILE' to "
                               "copy every branch)")
    if request.output is None:
        raise click.UsageError("the jsonl format writes a new session file: give -o OUT")
    with copying(len(session)):
        if request.branch is not None:
            return session.export_branch(request.branch, request.output,
                                         overwrite=request.overwrite)
        assert request.subtree is not None
        return session.export_subtree(request.subtree, request.output,
                                      ancestors=request.ancestors, overwrite=request.overwrite)


def _selection(session: Session, request: ExportRequest) -> Selection:
    from ..export import select

    return select(session, branch=request.branch, subtree=request.subtree,
                  ancestors=request.ancestors)


def _write(request: ExportRequest, data: bytes, default: str | None) -> str:
    """Write ``data`` to ``-o OUT`` (``-``: stdout), else ``default`` (``None``: stdout)."""
    target = request.output if request.output is not None else default
    if target is None or target == "-":
        out = sys.stdout.buffer
        out.write(data)
        out.flush()
        return "-"
    if os.path.isdir(target):
        raise click.UsageError(f"{target} is a folder; give a file name with -o")
    if os.path.exists(target) and not request.overwrite:
        raise click.ClickException(f"{target} exists; use --force to replace it")
    from .._fs import atomic_write

    atomic_write(target, data)
    return target


def _write_html(session: Session, request: ExportRequest) -> str:
    from ..export.html import export_html

    selection = _selection(session, request)
    with progress("exporting html", len(selection.ids)) as advance:
        data = export_html(session, selection, advance=advance)
    stem = os.path.splitext(os.path.basename(request.file))[0]
    return _write(request, data, stem + ".html")


def _write_md(session: Session, request: ExportRequest) -> str:
    from ..export.markdown import export_markdown

    selection = _selection(session, request)
    with progress("exporting markdown", None) as advance:
        text = export_markdown(session, selection, all_branches=request.all_branches,
                               advance=advance)
    return _write(request, text.encode("utf-8"), None)


def _write_json(session: Session, request: ExportRequest) -> str:
    from ..export.json import export_json

    selection = _selection(session, request)
    with progress("exporting json", len(selection.ids)) as advance:
        data = export_json(session, selection, advance=advance)
    return _write(request, data + b"\n", None)


FORMATS: dict[str, ExportFormat] = {
    "html": ExportFormat("one self-contained HTML page with a tree sidebar, like pi's /export "
                         "(default -o: FILE's name with .html, in the current folder)",
                         _write_html),
    "md": ExportFormat("the active branch as Markdown (--all: every branch); stdout by "
                       "default", _write_md),
    "json": ExportFormat("the entries and the tree as one JSON document; stdout by default",
                         _write_json),
    "jsonl": ExportFormat("a new session file in pi's format (needs --branch or --subtree, -o)",
                          _write_jsonl),
}
"""The export formats by name; the first one (html, as pi's ``/export``) is the default."""


def _format_of(output: str | None) -> str:
    """The format an output name implies (``x.md`` -> md), else the default (html)."""
    suffix = os.path.splitext(output or "")[1].lstrip(".").lower()
    return suffix if suffix in FORMATS else next(iter(FORMATS))


@cli.command(help=f"""Export FILE, the path to one entry (--branch ID) or the subtree of one
entry (--subtree ID).

\b
Formats:
{chr(10).join(f'  {name:<6} {fmt.description}' for name, fmt in FORMATS.items())}
""", epilog=ENTRY_HELP)
@click.argument("file", type=SESSION)
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default=None,
              help="The output format (default: from OUT's extension, else html).")
@click.option("--branch", metavar="ID", help="Only the path from the root to entry ID.")
@click.option("--subtree", metavar="ID", help="Only entry ID and everything below it.")
@click.option("-o", "--output", type=click.Path(), metavar="OUT",
              help="The file to write (or an existing folder, for a file named as pi names "
                   "session files).")
@click.option("--no-ancestors", "ancestors", flag_value=False, default=True,
              help="With --subtree: leave out the path to ID (ID becomes a root).")
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@click.option("--all", "all_branches", is_flag=True,
              help="With --format md: every branch, each under its own heading.")
@json_option
@reports_errors
def export(file: str, fmt: str | None, branch: str | None, subtree: str | None,
           output: str | None, ancestors: bool, force: bool, all_branches: bool,
           as_json: bool) -> None:
    if fmt is None:
        fmt = _format_of(output)
    if branch is not None and subtree is not None:
        raise click.UsageError("give --branch or --subtree, not both")
    if all_branches and fmt != "md":
        raise click.UsageError("--all goes with --format md")
    to_stdout = output == "-" or (output is None and fmt in ("md", "json"))
    if as_json and to_stdout:
        raise click.UsageError("--json reports where the export went; give -o OUT for "
                               f"--format {fmt} (its output is on stdout otherwise)")
    with open_session(file) as session:
        request = ExportRequest(file=file, branch=entry_option_value(session, branch),
                                subtree=entry_option_value(session, subtree), output=output,
                                ancestors=ancestors, overwrite=force, all_branches=all_branches)
        written = FORMATS[fmt].writer(session, request)
    if as_json:
        echo_json(_json.dumps({"format": fmt, "file": written}))
    elif written != "-":
        click.echo(written)
